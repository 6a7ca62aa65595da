"""`trex run`: the whole chain on a micro recipe, killed midway, finished on re-run, then a no-op re-run;
and the cheap parts (stage selection, input checks, eval lineage) without running any stage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trex_cli.app import app
from trex_cli.artifacts import write_json_atomic
from trex_cli.orchestrator import RecipeRun, downstream_of, parse_only

STAGE_NAMES = ("synth", "data-cpt", "data-sft", "model-init", "train-cpt", "train-sft", "eval-start", "eval-cpt",
               "eval-sft")

MICRO_RECIPE = """
[run]
name = "micro"
run_dir = "{run_dir}"

[synth]
n = 12
eval_n = 3
seed = 0
families = ["production_mix", "knapsack_01"]
difficulty = {{ small = 1.0 }}
infeasible_share = 0.0
workers = 1

[data]
vocab_size = 400
validation_share = 0.0

[data.cpt]
seq_len = 256

[data.sft]
seq_len = 2400

[train]
dtype = "fp32"
save_every = 2
log_every = 1

[train.cpt]
max_steps = 4
warmup_steps = 1
global_batch_size = 2
micro_batch_size = 1

[train.sft]
max_steps = 2
warmup_steps = 1
global_batch_size = 2
micro_batch_size = 1

[eval]
benchmarks = ["synth"]
limit = 2
max_tokens = 16
hf_batch_size = 2
allow_code_execution = true
timeout = 20.0
"""

STAGE_FOLDERS = {
    "synth": "synth",
    "data-cpt": "data/cpt",
    "data-sft": "data/sft",
    "model-init": "train/init",
    "train-cpt": "train/cpt",
    "train-sft": "train/sft",
    "eval-start": "eval/start",
    "eval-cpt": "eval/cpt",
    "eval-sft": "eval/sft",
}


def write_micro_recipe(folder: Path) -> tuple[Path, Path]:
    run_dir = folder / "run"
    recipe = folder / "micro.toml"
    recipe.write_text(MICRO_RECIPE.format(run_dir=run_dir))
    return recipe, run_dir


def trex_run_command(recipe: Path) -> list[str]:
    return [sys.executable, "-m", "trex_cli.app", "run", str(recipe), "--no-progress"]


def flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Size and modification time of every file under `folder`."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_run_killed_midway_finishes_on_rerun_and_then_only_prints_the_report(tmp_path):
    recipe, run_dir = write_micro_recipe(tmp_path)
    log_path = tmp_path / "first_run.log"

    # 1. start the pipeline and kill its whole process group once CPT has saved its first checkpoint
    first_checkpoint = run_dir / "train" / "cpt" / "checkpoints" / "step-2"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            trex_run_command(recipe), cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            give_up = time.monotonic() + 900  # only a guard against a hung run, not a timing
            while not first_checkpoint.is_dir():
                assert process.poll() is None, f"the run ended before CPT's first checkpoint:\n{log_path.read_text()[-3000:]}"
                assert time.monotonic() < give_up, "no CPT checkpoint after 15 minutes"
                time.sleep(0.05)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == -signal.SIGKILL
    for stage in ("synth", "data-cpt", "data-sft", "model-init"):
        assert (run_dir / STAGE_FOLDERS[stage] / "manifest.json").is_file(), stage
    assert not (run_dir / "train" / "cpt" / "manifest.json").exists(), "CPT finished before the kill"
    assert not (run_dir / "report.md").exists()

    # 2. the same command finishes the pipeline, resuming CPT from its checkpoint
    second = subprocess.run(trex_run_command(recipe), cwd=tmp_path, capture_output=True, text=True)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "synth: already done" in flat(second.stdout)
    assert "train-cpt: finished" in flat(second.stdout)
    cpt_manifest = json.loads((run_dir / "train" / "cpt" / "manifest.json").read_text())
    assert cpt_manifest["summary"]["resumed_from"] == 2
    cpt_steps = [json.loads(line)["step"] for line in (run_dir / "train" / "cpt" / "metrics.jsonl").read_text().splitlines()]
    assert cpt_steps == [1, 2, 3, 4]
    for stage, folder in STAGE_FOLDERS.items():
        assert (run_dir / folder / "manifest.json").is_file(), stage
    for label in ("start", "cpt", "sft"):
        results = json.loads((run_dir / "eval" / label / "results.json").read_text())
        assert results["scores"]["synth"]["items"] == 2
        assert results["config"]["checkpoint"] == str(
            run_dir / "train" / ("init" if label == "start" else label) / "hf"
        )
    state = json.loads((run_dir / "run.json").read_text())
    assert set(state["stages"]) == set(STAGE_NAMES)
    assert state["stages"]["eval-sft"]["model"] == str(run_dir / "train" / "sft" / "hf")

    report = (run_dir / "report.md").read_text()
    eval_families = {json.loads(line)["family"] for line in (run_dir / "synth" / "eval" / "test.jsonl").read_text().splitlines()[:2]}
    for expected in ["Pass@1", "| synth | 2 |", "start", "after CPT", "after SFT", "report/loss_curves.png",
                     "report/pass_at_1.png", str(run_dir / "train" / "sft" / "hf"), *eval_families]:
        assert expected in report, expected
    for figure in ("loss_curves.png", "pass_at_1.png"):
        assert (run_dir / "report" / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "# trex run: micro" in report and "report:" in flat(second.stdout)

    # 3. a third run touches nothing and prints the report
    before = snapshot(run_dir)
    third = subprocess.run(trex_run_command(recipe), cwd=tmp_path, capture_output=True, text=True)
    assert third.returncode == 0, third.stderr[-3000:]
    assert "every stage is finished" in flat(third.stdout)
    assert "trex run: micro" in flat(third.stdout) and "Stages and artifacts" in flat(third.stdout)
    assert "finished in" not in flat(third.stdout)
    assert snapshot(run_dir) == before


def test_run_has_the_stages_in_order_and_only_expands_groups_keeping_that_order(tmp_path):
    recipe, _ = write_micro_recipe(tmp_path)
    assert tuple(RecipeRun(recipe).stages) == STAGE_NAMES
    assert parse_only(None, STAGE_NAMES) == STAGE_NAMES
    assert parse_only("eval-sft,train", STAGE_NAMES) == ("train-cpt", "train-sft", "eval-sft")
    assert parse_only("data", STAGE_NAMES) == ("data-cpt", "data-sft")
    with pytest.raises(ValueError, match="unknown stage 'trian'.*train-cpt"):
        parse_only("trian", STAGE_NAMES)


def test_run_downstream_of_lists_every_reader(tmp_path):
    recipe, _ = write_micro_recipe(tmp_path)
    stages = RecipeRun(recipe).stages
    assert downstream_of("train-cpt", stages) == ["train-cpt", "train-sft", "eval-cpt", "eval-sft"]
    assert downstream_of("synth", stages) == list(STAGE_NAMES)
    assert downstream_of("eval-start", stages) == ["eval-start"]


def test_run_only_refuses_a_stage_whose_input_has_not_finished(tmp_path):
    recipe, run_dir = write_micro_recipe(tmp_path)
    result = CliRunner().invoke(app, ["run", str(recipe), "--only", "train-sft"])
    assert result.exit_code == 1
    assert "stage train-sft reads data-sft" in flat(result.output) and "add data-sft to --only" in flat(result.output)
    assert not (run_dir / "run.json").exists()


def test_run_refuses_evals_that_may_not_run_programs_before_any_stage(tmp_path, monkeypatch):
    monkeypatch.delenv("TREX_ALLOW_CODE_EXECUTION", raising=False)
    recipe, run_dir = write_micro_recipe(tmp_path)
    result = CliRunner().invoke(app, ["run", str(recipe), "--set", "eval.allow_code_execution=false"])
    assert result.exit_code == 1
    assert "allow_code_execution" in flat(result.output) and "--only synth,data,model-init,train" in flat(result.output)
    assert not run_dir.exists()


def test_run_refuses_a_run_folder_another_run_holds(tmp_path):
    import fcntl

    recipe, run_dir = write_micro_recipe(tmp_path)
    run_dir.mkdir()
    with open(run_dir / ".trex-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write("pid 12345")
        lock.flush()
        result = CliRunner().invoke(app, ["run", str(recipe)])
    assert result.exit_code == 1
    assert "in use by pid 12345" in flat(result.output)
    assert not (run_dir / "synth").exists()


def test_run_unknown_recipe_key_names_the_file_and_key(tmp_path):
    recipe, _ = write_micro_recipe(tmp_path)
    result = CliRunner().invoke(app, ["run", str(recipe), "--set", "train.cpt.max_stpes=3"])
    assert result.exit_code == 1
    assert "max_stpes" in flat(result.output) and "micro.toml" in flat(result.output)


def _finished_stage(folder: Path, stage: str, marker: str, inputs: list[Path] = ()) -> None:
    from trex_cli.artifacts import sha256_file

    folder.mkdir(parents=True, exist_ok=True)
    lineage = [{"path": str(i), "manifest_sha256": sha256_file(i / "manifest.json")} for i in inputs]
    write_json_atomic(folder / "manifest.json", {"stage": stage, "fingerprint": marker, "inputs": lineage})


def test_run_evaluates_again_when_its_model_was_rebuilt(tmp_path):
    """No model run here: the stage folders are stand-ins holding only the manifests the check reads."""
    recipe, run_dir = write_micro_recipe(tmp_path)
    model = run_dir / "train" / "sft"
    _finished_stage(model, "train-sft", "first")
    _finished_stage(run_dir / "eval" / "sft", "eval", "eval", inputs=[model])
    evaluation = RecipeRun(recipe).stages["eval-sft"]
    assert evaluation.stale_inputs() == []
    _finished_stage(model, "train-sft", "rebuilt")
    assert evaluation.stale_inputs() == [str(model)]
    # an interrupted eval (no manifest yet, its stage.json names the inputs) of a model rebuilt since starts again too
    (run_dir / "eval" / "sft" / "manifest.json").unlink()
    write_json_atomic(run_dir / "eval" / "sft" / "stage.json",
                      {"stage": "eval", "fingerprint": "x", "inputs": [{"path": str(model), "manifest_sha256": "old"}]})
    assert evaluation.stale_inputs() == [str(model)]


def test_run_rebuild_hint_keeps_the_users_overrides(tmp_path):
    recipe, _ = write_micro_recipe(tmp_path)
    run = RecipeRun(recipe, ["train.cpt.lr=1e-3", "eval.limit=1"])
    assert run.rerun_command("train-cpt") == (
        f"trex run {recipe} --set train.cpt.lr=1e-3 --set eval.limit=1 --force --only train-cpt,train-sft,eval-cpt,eval-sft"
    )


def test_run_sees_a_corpus_file_changed_in_place(tmp_path):
    """The fast path ("every stage is finished") asks each stage for its fingerprint now, which covers
    the files the recipe names: a corpus edited in place makes its data stage unfinished."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"document {i} about linear programs and duals"}) + "\n" for i in range(40)))
    recipe, run_dir = write_micro_recipe(tmp_path)
    overrides = [f'data.cpt.sources=[{{ path = "{corpus}" }}]', "data.vocab_size=300"]
    stage = RecipeRun(recipe, overrides).stages["data-cpt"]
    stage.run(show_progress=False)
    assert RecipeRun(recipe, overrides).stages["data-cpt"].is_finished()
    with open(corpus, "a") as stream:
        stream.write(json.dumps({"text": "one more document about integer programs"}) + "\n")
    assert not RecipeRun(recipe, overrides).stages["data-cpt"].is_finished()
