"""The planner on the paper's layouts: the divisibility rules, the no-op placement, feasibility of
T-Rex's Pro and Flash layouts under its switches, the search, and the `trex plan` command."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trex_cli.app import app
from trex_cli.models.deepseek_v4.config import get_flavor
from trex_cli.models.deepseek_v4.flops import training_flops_per_token
from trex_cli.plan.clusters import PROFILES, load_cluster
from trex_cli.plan.layout import (
    Job,
    PlannedLayout,
    check,
    default_noop_layers,
    microbatches,
    real_layer_of_slot,
    stage_slots,
)
from trex_cli.plan.parameters import ModelShape
from trex_cli.plan.search import evaluate, search
from trex_cli.recipe import load_recipe

PRO_LAYOUT = PlannedLayout(tp=2, pp=8, vpp_layers=4, ep=64, etp=1, cp=1, micro_batch=1, recompute="full",
                    optimizer_swap=True, noop_layers=(3, 62, 63))
FLASH_LAYOUT = PlannedLayout(tp=1, pp=4, vpp_layers=0, ep=32, etp=1, cp=1, micro_batch=1, recompute="full",
                      optimizer_swap=True, noop_layers=(43,))


def shape_of(flavor: str) -> ModelShape:
    return ModelShape.from_config(get_flavor(flavor))


def flops(flavor: str, seq: int) -> float:
    return training_flops_per_token(get_flavor(flavor), seq, attention="v4")


def test_default_noop_layers_reproduce_the_paper():
    assert default_noop_layers(61, 8, 4) == (3, 62, 63)
    assert default_noop_layers(43, 4, 0) == (43,)
    assert default_noop_layers(64, 8, 4) == ()


def test_pro_stages_balance_embedding_and_head_with_noop_layers():
    shape = shape_of("pro")
    stages = stage_slots(PRO_LAYOUT, shape)
    assert [chunk[0] for chunk in stages[0]] == [0, 32]  # two virtual stages of 4 layers, round-robin
    real = real_layer_of_slot(PRO_LAYOUT, shape)
    per_stage = [sum(slot in real for chunk in chunks for slot in chunk) for chunks in stages]
    assert per_stage == [7, 8, 8, 8, 8, 8, 8, 6]  # the embedding stage and the head + MTP stage carry less
    assert sum(per_stage) == 61


@pytest.mark.parametrize("global_batch", [256, 1024])
def test_paper_pro_layout_is_feasible_with_its_switches(global_batch):
    job = Job(shape_of("pro"), world=512, seq_len=4096, global_batch=global_batch)
    cluster = load_cluster("cloudmatrix384")
    evaluation = evaluate(job, PRO_LAYOUT, cluster, flops("pro", 4096))
    assert evaluation.feasible, evaluation.reasons
    assert evaluation.memory.total < cluster.usable_memory_bytes
    assert microbatches(PRO_LAYOUT, job) == global_batch // 32
    # Without optimizer swap the fp32 master weights and moments of 3 billion expert parameters do not fit
    # a 64 GB die: the swap is what makes the paper's layout possible.
    without_swap = evaluate(job, dataclasses.replace(PRO_LAYOUT, optimizer_swap=False), cluster, flops("pro", 4096))
    assert not without_swap.feasible
    assert "out of memory" in without_swap.reasons[0] and "optimizer" in without_swap.reasons[0]


@pytest.mark.parametrize("seq_len", [4096, 8192])
def test_paper_flash_layout_is_feasible_for_cpt_and_sft(seq_len):
    job = Job(shape_of("flash"), world=128, seq_len=seq_len, global_batch=128)
    evaluation = evaluate(job, FLASH_LAYOUT, load_cluster("910c"), flops("flash", seq_len))
    assert evaluation.feasible, evaluation.reasons
    assert 0 < evaluation.mfu < 1
    time = evaluation.time
    # four micro-batches through a 4-stage pipeline: the bubble is (pp - 1) / m of the compute
    assert time.bubble == pytest.approx(time.compute * 3 / 4, rel=1e-9)


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (dataclasses.replace(PRO_LAYOUT, ep=100), "384 experts cannot be split over EP 100"),
        (dataclasses.replace(PRO_LAYOUT, tp=3), "not divisible by TP x PP x CP"),
        (dataclasses.replace(PRO_LAYOUT, noop_layers=(3, 62)), "not divisible by PP 8"),
        (dataclasses.replace(PRO_LAYOUT, noop_layers=(3, 62, 99)), "must be distinct slots in 0..63"),
        (dataclasses.replace(PRO_LAYOUT, vpp_layers=3), "not divisible by 3 layers per virtual stage"),
        (dataclasses.replace(PRO_LAYOUT, micro_batch=3), "global batch 1024 is not divisible"),
        (dataclasses.replace(PRO_LAYOUT, tp=32, pp=1, vpp_layers=0, noop_layers=()), "TP 32 does not divide"),
    ],
)
def test_bad_plans_get_clear_errors(layout, message):
    job = Job(shape_of("pro"), world=512, seq_len=4096, global_batch=1024)
    with pytest.raises(ValueError, match="invalid") as error:
        check(layout, job, ranks_per_node=16)
    assert message in str(error.value)


def test_search_ranks_flash_layouts_and_explains_rejections():
    job = Job(shape_of("flash"), world=128, seq_len=4096, global_batch=128)
    cluster = load_cluster("cloudmatrix384")
    result = search(job, cluster, flops("flash", 4096))
    steps = [e.time.step for e in result.feasible]
    assert steps == sorted(steps) and len(steps) > 10
    assert all(e.memory.total <= cluster.usable_memory_bytes for e in result.feasible)
    # the paper's layout is among the candidates that fit, and the planner's best is at least as fast
    paper = next(e for e in result.feasible if dataclasses.replace(e.layout) == FLASH_LAYOUT)
    assert result.feasible[0].time.step <= paper.time.step
    best = result.feasible[0]
    print(f"planner's best Flash layout: {best.layout.describe()}, step {best.time.step:.2f} s, "
          f"MFU {100 * best.mfu:.2f}%, {best.memory.total / 1e9:.1f} GB; the paper's: step {paper.time.step:.2f} s")
    kinds = {kind for kind, _count, _example in result.rejection_summary()}
    assert "out of memory" in kinds


def test_profile_file_overrides_a_builtin(tmp_path):
    profile = tmp_path / "bigger.toml"
    profile.write_text('base = "910c"\ndevice_memory_gb = 128\nranks_per_node = 8\n')
    cluster = load_cluster(str(profile))
    assert cluster.device_memory_gb == 128.0 and cluster.ranks_per_node == 8
    assert cluster.peak_bf16_tflops == PROFILES["cloudmatrix384"].peak_bf16_tflops
    profile.write_text('device_memory = 128\n')
    with pytest.raises(ValueError, match="unknown key 'device_memory'"):
        load_cluster(str(profile))
    with pytest.raises(ValueError, match="unknown cluster profile"):
        load_cluster("tpu-v9")


runner = CliRunner()
RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def test_cli_prints_the_planners_best_pro_layout(tmp_path):
    fragment = tmp_path / "best.toml"
    result = runner.invoke(app, ["plan", "--flavor", "pro", "--ranks", "512", "--seq", "4096", "--global-batch", "1024",
                                 "--json", "--top", "5", "--out", str(fragment)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    best = report["feasible"][0]
    assert best["feasible"] and best["memory_gb"]["total"] < 60.0
    assert report["feasible_count"] >= 5 and report["rejected_count"] > 0
    assert any(r["reason"] == "out of memory" for r in report["rejections"])
    print(f"planner's best Pro layout: {best['describe']}, step {best['time_s']['step']:.2f} s, "
          f"MFU {100 * best['mfu']:.2f}%, {best['memory_gb']['total']:.1f} GB")
    # the fragment is a valid recipe (its [plan] and [mindspeed] tables validate)
    recipe = load_recipe(fragment)
    assert recipe.section("mindspeed").tp == best["layout"]["tp"]
    # the native engine's table asks for the sequence parallel the memory estimate assumed
    parallel = recipe.section("train").parallel
    assert parallel.tp == best["layout"]["tp"] > 1 and parallel.sequence_parallel is True
    assert "sequence_parallel = true" in fragment.read_text()
    assert recipe.section("plan").check.count(",") == 5


def test_cli_check_prints_the_paper_layout_with_estimates():
    result = runner.invoke(app, ["plan", "--flavor", "pro", "--ranks", "512", "--seq", "4096", "--global-batch",
                                 "1024", "--check", "2,8,4,64,1,1"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "TP2 PP8 VPP4 EP64 ETP1 CP1 mb1 rc-full swap noop3,62,63: feasible" in result.output
    assert "step time" in result.output and "per-rank memory" in result.output


def test_cli_check_rejects_384_experts_on_ep_100():
    result = runner.invoke(app, ["plan", "--flavor", "pro", "--ranks", "512", "--seq", "4096", "--global-batch",
                                 "1024", "--check", "2,8,4,100,1,1"])
    assert result.exit_code == 1
    assert "384 experts cannot be split over EP 100" in " ".join(result.output.split())
    result = runner.invoke(app, ["plan", "--flavor", "pro", "--ranks", "512", "--global-batch", "1024",
                                 "--check", "2,8,4"])
    assert result.exit_code == 1 and "six integers" in " ".join(result.output.split())


def test_cli_mfu_under_both_conventions_names_the_peak():
    result = runner.invoke(app, ["plan", "mfu", "--flavor", "pro", "--ranks", "512", "--step-time", "27", "--seq", "4096",
                                 "--global-batch", "256", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    tokens = 256 * 4096
    for convention in ("v4", "dense"):
        expected = training_flops_per_token(get_flavor("pro"), 4096, attention=convention) * tokens / (27 * 512 * 390e12)
        assert report["mfu"][convention] == pytest.approx(expected, rel=1e-12)
    assert report["mfu"]["dense"] > report["mfu"]["v4"]
    assert "390 TFLOP/s" in report["peak_name"] and "910C" in report["peak_name"]
    result = runner.invoke(app, ["plan", "mfu", "--flavor", "pro", "--ranks", "512", "--step-time", "27",
                                 "--global-batch", "256"], env={"COLUMNS": "200"})
    assert "dense causal attention" in result.output and "peak:" in result.output


def test_recipes_plan_the_paper_layouts():
    for name, world in (("pro", 512), ("flash", 128)):
        path = RECIPES / f"deepseek-v4-{name}-superpod.toml"
        recipe = load_recipe(path)
        plan = recipe.section("plan")
        assert plan.ranks == world
        result = runner.invoke(app, ["plan", "--recipe", str(path), "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["evaluation"]["feasible"]


def test_calibration_inverts_the_timing_model():
    from trex_cli.plan.timing import calibrate_efficiency, estimate_time

    job = Job(shape_of("pro"), world=512, seq_len=4096, global_batch=1024)
    cluster = load_cluster("cloudmatrix384")
    # any step the model can reach: the bisection finds the efficiency that gives it back
    efficiency = calibrate_efficiency(job, PRO_LAYOUT, cluster, flops("pro", 4096), measured_step_seconds=40.0)
    calibrated = dataclasses.replace(cluster, compute_efficiency=efficiency)
    assert estimate_time(job, PRO_LAYOUT, calibrated, flops("pro", 4096)).step == pytest.approx(40.0, rel=1e-6)
    with pytest.raises(ValueError, match="faster than this cluster model allows"):
        calibrate_efficiency(job, PRO_LAYOUT, cluster, flops("pro", 4096), measured_step_seconds=1.0)


def test_validate_prints_the_error_on_runs_the_model_was_not_fitted_to():
    result = runner.invoke(app, ["plan", "--validate", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    runs = {row["name"]: row for row in report["runs"]}
    assert [row["role"] for row in report["runs"]] == ["calibration", "held-out", "held-out"]
    titan = runs["torchtitan-npu DeepSeek-V4-Flash"]
    # 1,100 tokens/s per device on 128 dies, one 4K sequence each: the step the prediction is held to
    assert titan["measured_step_s"] == pytest.approx(4096 / 1100)
    assert titan["error"] == pytest.approx(titan["predicted_step_s"] / titan["measured_step_s"] - 1)
    assert abs(titan["error"]) < 0.3, titan
    open_source = runs["open-source MindSpeed-LLM recipe, DeepSeek-V4-Pro"]
    assert open_source["measured_step_s"] == pytest.approx(27 * 34.22 / 11.67)
    for row in report["runs"]:
        print(f"{row['role']:12s} {row['name']}: predicted {row['predicted_step_s']:.2f} s, published "
              f"{row['measured_step_s']:.2f} s, error {100 * row['error']:+.1f}%")
    # the fitted efficiency is the one the built-in profile carries
    assert report["compute_efficiency"] == pytest.approx(PROFILES["cloudmatrix384"].compute_efficiency, abs=5e-4)
    # T-Rex's 34.22% at about 27 s: V4 model FLOPs plus the recomputed forward
    closest = next(row for row in report["mfu_conventions"] if row["closest"])
    assert closest["convention"] == "V4 attention + recomputed forward (HFU)"
    expected = training_flops_per_token(get_flavor("pro"), 4096, attention="v4") * 4 / 3 * 1024 * 4096 / (
        27 * 512 * 390e12)
    assert closest["mfu_at_27s"] == pytest.approx(expected, rel=1e-12)
    text = runner.invoke(app, ["plan", "--validate"], env={"COLUMNS": "220"}).output
    assert "held-out" in text and "error %" in text and "<- closest" in text


def test_gpu_profiles_recommend_only_layouts_the_native_trainer_runs():
    from trex_cli.plan.layout import engine_problems

    job = Job(shape_of("flash"), world=256, seq_len=32768, global_batch=256)
    assert PROFILES["h100"].engine == "native" and PROFILES["cloudmatrix384"].engine == "mindspeed"
    assert PROFILES["h100"].compute_efficiency != PROFILES["cloudmatrix384"].compute_efficiency
    layout = PlannedLayout(tp=2, pp=4, ep=8, etp=2, cp=2, noop_layers=(43,))
    assert engine_problems(layout, job, "native") == []  # expert-TP = TP runs natively (issue #21)
    assert engine_problems(dataclasses.replace(layout, tp=4, ep=4), job, "native") == [
        "ETP 2: trex's native trainer runs expert-TP 1 or TP (4)"]
    assert engine_problems(layout, job, "mindspeed") == []
    # experts fold into the tensor ranks too: EP 64 on the 64 ranks of a stage (32 DP x 2 TP) runs
    assert engine_problems(dataclasses.replace(layout, cp=1, etp=1, ep=64), job, "native") == []
    assert engine_problems(dataclasses.replace(layout, cp=1, etp=1, ep=128), job, "native") == [
        "EP 128 x ETP 1 does not divide the 64 ranks of a pipeline stage that trex's native trainer folds experts "
        "into"]
    result = search(job, load_cluster("h200"), flops("flash", 32768), micro_batches=(1,))
    assert result.feasible
    assert all(e.layout.etp in (1, e.layout.tp) for e in result.feasible)
    # the same job on the SuperPOD may use context parallel (MindSpeed-LLM runs it)
    structures = {(e.layout.cp, e.layout.etp) for e in search(job, load_cluster("cloudmatrix384"),
                                                               flops("flash", 32768), micro_batches=(1,)).feasible}
    assert any(cp > 1 for cp, _ in structures)


def test_json_memory_figures_are_gigabytes():
    from trex_cli.plan.memory import estimate_memory

    result = runner.invoke(app, ["plan", "--flavor", "pro", "--ranks", "512", "--seq", "4096", "--global-batch",
                                 "1024", "--check", "2,8,4,64,1,1", "--json"])
    assert result.exit_code == 0, result.output
    evaluation = json.loads(result.output)["evaluation"]
    job = Job(shape_of("pro"), world=512, seq_len=4096, global_batch=1024)
    memory = estimate_memory(job, PRO_LAYOUT, load_cluster("cloudmatrix384"))
    assert evaluation["memory_gb"]["total"] == pytest.approx(memory.total / 1e9)
    assert evaluation["memory_gb"]["weights"] == pytest.approx(memory.weights / 1e9)
    assert all(value < 1e3 for value in evaluation["memory_gb"].values())
    assert max(evaluation["memory_stages_total_gb"]) == pytest.approx(memory.total / 1e9)


def test_cli_reads_a_config_json(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(get_flavor("flash").to_hf_dict()))
    result = runner.invoke(app, ["plan", "--config", str(config), "--ranks", "128", "--global-batch", "128",
                                 "--check", "1,4,0,32,1,1", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["evaluation"]["feasible"]
    result = runner.invoke(app, ["plan", "--config", str(tmp_path / "missing.json"), "--ranks", "8",
                                 "--global-batch", "8"])
    assert result.exit_code == 1 and "missing.json not found" in " ".join(result.output.split())


def test_the_ranked_table_fits_80_columns(tmp_path):
    """At 80 columns the layout is one word per knob in one column (rich would otherwise squeeze 18
    columns into ellipses); every line of the table fits."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    result = subprocess.run(
        [sys.executable, "-m", "trex_cli.app", "plan", "--flavor", "flash", "--ranks", "128", "--global-batch",
         "256", "--seq", "4096", "--top", "3"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if "layout" in line and "MFU %" in line)
    assert "…" not in header
    assert any("TP" in line and "EP" in line and "mb" in line for line in lines)
