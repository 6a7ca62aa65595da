"""The rendered MindSpeed-LLM launches against the pinned framework's flag catalogue and T-Rex's own
scripts: every flag defined, every value of the declared type and arity, the entry point and spec
module the framework has, and T-Rex's model flags carried with the same values. The catalogue is
regenerated from the framework sources when $TREX_SUPERPOD_SOURCES names them."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest

from trex_cli.recipe import load_recipe
from trex_cli.train.engines.mindspeed import catalogue, engine, run_mindspeed

ROOT = Path(__file__).resolve().parents[2]
CASES = [("flash", "cpt"), ("flash", "sft"), ("pro", "cpt"), ("pro", "sft")]
# T-Rex's Flash CPT evaluates on a separate validation set every 50 steps; trex trains on one split.
VALUES_NOT_COMPARED = {"--eval-interval", "--eval-iters"}


@pytest.fixture(autouse=True)
def no_installed_mindspeed(monkeypatch):
    monkeypatch.delenv("MINDSPEED_LLM_DIR", raising=False)
    monkeypatch.setattr(engine, "_torch_npu_works", lambda: False)


def rendered(flavor: str, stage: str, run_dir: Path, overrides: list[str] | None = None) -> str:
    recipe = load_recipe(ROOT / "recipes" / f"deepseek-v4-{flavor}-superpod.toml", overrides)
    with contextlib.redirect_stdout(io.StringIO()):
        result = run_mindspeed(stage, recipe, run_dir, dry_run=True)
    return (Path(result["folder"]) / "scripts" / "node-00.sh").read_text()


def _numbers(values: list[str]) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


@pytest.mark.parametrize("flavor,stage", CASES)
def test_rendered_launch_passes_the_catalogue_and_carries_trex_flags(flavor, stage, tmp_path):
    text = rendered(flavor, stage, tmp_path)
    assert catalogue.check_script(text, "train") == []
    script = catalogue.read_script(text)
    trex = catalogue.trex_script(flavor, stage)
    assert script["entry_point"] == trex["entry_point"]
    if stage == "cpt":
        assert script["entry_point"] in catalogue.load_catalogue()["entry_points"]
    share, missing = catalogue.trex_coverage(script["flags"], flavor, stage)
    print(f"{flavor} {stage}: {100 * share:.1f}% of T-Rex's stock-defined flags")
    assert missing == [] and share >= 0.95
    # the values agree wherever T-Rex writes a number (its paths and variables differ by design)
    for flag, values in trex["flags"].items():
        expected = _numbers(values)
        if flag in script["flags"] and expected is not None and flag not in VALUES_NOT_COMPARED:
            actual = _numbers(script["flags"][flag])
            if flag == "--compress-ratios":
                actual = actual[: len(expected)]  # T-Rex's Flash list stops before the no-op slot and MTP
            assert actual == pytest.approx(expected), (flag, values, script["flags"][flag])


def test_pro_compress_ratios_are_read_by_slot_with_no_op_and_mtp_entries(tmp_path):
    ratios = catalogue.read_script(rendered("pro", "cpt", tmp_path))["flags"]["--compress-ratios"]
    assert len(ratios) == 64 + 1 and [ratios[i] for i in (3, 62, 63, 64)] == ["0"] * 4
    assert ratios == catalogue.trex_script("pro", "cpt")["flags"]["--compress-ratios"]


def test_patched_image_flags_only_with_patched_image(tmp_path):
    patched = catalogue.patched_image_flags()
    assert {"--use-g2-attention", "--g2-window-size", "--rope-head-dim", "--norm-eps"} <= set(patched)
    assert patched["--position-embedding-type"] == ["g2"]
    stock = catalogue.read_script(rendered("pro", "cpt", tmp_path / "stock"))["flags"]
    assert not set(stock) & {flag for flag, values in patched.items() if values is None}
    text = rendered("pro", "cpt", tmp_path / "patched", ["mindspeed.patched_image=true"])
    flags = catalogue.read_script(text)["flags"]
    assert flags["--position-embedding-type"] == ["g2"] and flags["--g2-window-size"] == ["128"]
    assert catalogue.check_script(text, "train", allowed=patched) == []
    problems = catalogue.check_script(text, "train")
    assert any("--use-g2-attention is not defined" in p for p in problems)
    assert any("--position-embedding-type 'g2' is not valid" in p for p in problems)


def test_conversion_and_preprocess_commands_pass_their_programs(tmp_path):
    recipe = load_recipe(ROOT / "recipes" / "deepseek-v4-pro-superpod.toml")
    with contextlib.redirect_stdout(io.StringIO()):
        result = run_mindspeed("sft", recipe, tmp_path, dry_run=True)
    assert result["flags"]["problems"] == []
    assert result["flags"]["left_out"] and "--position-embedding-type g2" in result["flags"]["left_out"]


def test_the_check_fails_on_each_kind_of_mistake(tmp_path):
    text = rendered("flash", "cpt", tmp_path)
    cases = {
        "--n-hash-layers 3": ("--num-hash-layers 3", "--num-hash-layers is not defined"),
        "--kv-compress": ("--kv-compress 1", "--kv-compress got 1 value(s)"),
        "--hidden-size 4096": ("--hidden-size 4096.5", "--hidden-size '4096.5' is not valid"),
        "--moe-token-dispatcher-type alltoall": ("--moe-token-dispatcher-type all2all",
                                                 "--moe-token-dispatcher-type 'all2all' is not valid"),
        "--spec mindspeed_llm.tasks.models.spec.deepseek4_spec layer_spec": (
            "--spec mindspeed_llm.tasks.models.spec.deepseek_v4_spec layer_spec", "no such spec module"),
    }
    for original, (broken, message) in cases.items():
        assert original in text, original
        problems = catalogue.check_script(text.replace(original, broken, 1), "train")
        assert any(message in p for p in problems), (broken, problems)
    comma_joined = catalogue.check_flags({"--compress-ratios": ["0,0,4,128"]}, "train")
    assert comma_joined and "type int, nargs '+'" in comma_joined[0]
    assert catalogue.check_script(text.replace("pretrain_deepseek4.py", "pretrain_gpt.py"), "train")
    without_mla = text.replace("    --multi-latent-attention\n", "")
    assert catalogue.trex_coverage(catalogue.read_script(without_mla)["flags"], "flash", "cpt")[1] == [
        "--multi-latent-attention"]


def test_read_script_follows_bash_arrays_strings_and_defaults():
    text = """
TP=2
SEQ="${SEQ:-4096}"
ratios=(
    0 4
    128
)
MODEL_ARGS="
    --tensor-model-parallel-size ${TP} \\
    --seq-length $SEQ \\
"
extra=(--swiglu)
extra+=(--fix-router)  # appended later
DISTRIBUTED_ARGS="--nnodes 2"
torchrun $DISTRIBUTED_ARGS pretrain_deepseek4.py $MODEL_ARGS "${extra[@]}" --compress-ratios "${ratios[@]}" \\
    --data-path "$DATA" 2>&1 | tee log
"""
    script = catalogue.read_script(text)
    assert script["entry_point"] == "pretrain_deepseek4.py"
    assert script["flags"] == {"--tensor-model-parallel-size": ["2"], "--seq-length": ["4096"], "--swiglu": [],
                               "--fix-router": [], "--compress-ratios": ["0", "4", "128"], "--data-path": ["$DATA"]}


def test_flags_in_source_reads_add_argument_calls_with_ast():
    source = '''
KINDS = ["a", "b"]
def register(parser, self):
    group = parser.add_argument_group(title="x")
    group.add_argument("--ratios", type=int, nargs="+", default=None)
    group.add_argument('--kind', choices=KINDS, default="a")
    group.add_argument("--on", "--enable-on", action="store_true")
    group.add_argument(f"--{name}.x", type=int)
    self.add_parser_argument_choices_value(parser, "--kind", "c")
'''
    flags, extra = catalogue.flags_in_source(source, "demo.py")
    assert flags["--ratios"]["type"] == "int" and flags["--ratios"]["nargs"] == "+"
    assert flags["--kind"]["choices"] == ["a", "b"] and flags["--kind"]["type"] == "str"
    assert flags["--on"]["action"] == "store_true" and flags["--enable-on"]["type"] is None
    assert flags["--ratios"]["source"] == "demo.py:5" and extra == {"--kind": ["c"]}
    assert len(flags) == 4


def test_shipped_catalogue_records_its_versions():
    shipped = catalogue.load_catalogue()
    assert any(line.startswith("Ascend+MindSpeed-LLM v26.1.0") for line in shipped["versions"])
    assert any("Megatron-LM core_v0.12.1" in line for line in shipped["versions"])
    assert shipped["spec_modules"]["mindspeed_llm.tasks.models.spec.deepseek4_spec"] == ["args", "layer_spec",
                                                                                          "mtp_spec"]
    assert {(s["flavor"], s["stage"]) for s in catalogue.load_trex_scripts()["scripts"]} == set(CASES)


@pytest.mark.skipif(not os.environ.get("TREX_SUPERPOD_SOURCES"),
                    reason="set TREX_SUPERPOD_SOURCES to the pinned framework sources (superpod_sources) to "
                           "regenerate the catalogue and compare it with the shipped one")
def test_catalogue_regenerates_from_the_framework_sources():
    sources = Path(os.environ["TREX_SUPERPOD_SOURCES"])
    regenerated = catalogue.build_catalogue(sources)
    assert regenerated == catalogue.load_catalogue()
    scripts = catalogue.build_trex_scripts(sources, [], regenerated)["scripts"]
    shipped = {(s["flavor"], s["stage"]): s for s in catalogue.load_trex_scripts()["scripts"]}
    assert scripts, f"{sources} holds no T-Rex launch scripts"
    for script in scripts:
        assert script == shipped[(script["flavor"], script["stage"])]
