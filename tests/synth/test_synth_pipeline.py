"""The pipeline: deterministic, resumable, held-out families, output formats, standalone programs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from data_synth.config import SynthConfig
from data_synth.families import all_families
from trex_cli.stages.synth import run_synth_stage as run_synth

FAST_FAMILIES = ["diet_blending", "knapsack_01", "min_cost_flow", "production_mix", "transportation"]


def config(**changes) -> SynthConfig:
    settings = dict(n=24, eval_n=6, seed=5, families=FAST_FAMILIES, workers=1, block_size=8,
                    infeasible_share=0.2, difficulty={"small": 0.7, "medium": 0.3})
    settings.update(changes)
    return SynthConfig(**settings)


def folder_records(out: Path) -> dict[str, str]:
    """Every output file's text (records, docs, samples, rejects, eval), keyed by relative path."""
    files = {}
    for pattern in ("problems/*.jsonl", "cpt_docs/*.jsonl", "sft/*.jsonl", "rejects.jsonl", "eval/test.jsonl",
                    "eval/data/*.json", "eval/problems/*.jsonl"):
        for path in sorted(out.glob(pattern)):
            files[str(path.relative_to(out))] = path.read_text()
    return files


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "reference"
    run_synth(config(), out)
    return out


def test_outputs_follow_the_folder_format(reference):
    manifest = json.loads((reference / "manifest.json").read_text())
    assert manifest["stage"] == "synth" and manifest["counts"]["problems"] == 24
    records = [r for p in sorted((reference / "problems").glob("*.jsonl")) for r in read_jsonl(p)]
    assert len(records) == 24 and len({r["id"] for r in records}) == 24
    required = {"id", "family", "problem_type", "difficulty", "scenario", "representation", "seed", "parameters",
                "statement", "formulation", "program", "data", "status", "objective", "solution",
                "verification", "split"}
    for record in records:
        assert required <= set(record) and record["split"] == "train"
        assert all(check["passed"] for check in record["verification"]) and len(record["verification"]) == 6
        assert (record["data"] is None) == (record["representation"] != "file")
        assert record["status"] in ("optimal", "infeasible")
        assert (record["objective"] is None) == (record["status"] == "infeasible")
    assert any(r["status"] == "infeasible" for r in records), "infeasible_share=0.2 yields labelled items"
    sft = [s for p in sorted((reference / "sft").glob("*.jsonl")) for s in read_jsonl(p)]
    assert len(sft) == 24 and {s["answer_style"] for s in sft} <= {"model", "model_program", "program"}
    for sample in sft:
        assert [m["role"] for m in sample["messages"]] == ["system", "user", "assistant"]
        if sample["representation"] == "file":
            assert "```json" in sample["messages"][1]["content"]
        if sample["answer_style"] == "program":
            assert sample["messages"][2]["content"].startswith("```python\n")
    docs = [d for p in sorted((reference / "cpt_docs").glob("*.jsonl")) for d in read_jsonl(p)]
    assert len(docs) == 24 and all("## Mathematical model" in d["text"] and "```python" in d["text"] for d in docs)
    assert any("Dual values" in d["text"] for d in docs), "LP documents carry duals"
    for reject in read_jsonl(reference / "rejects.jsonl"):
        assert {"id", "family", "difficulty", "reason", "detail"} <= set(reject)


def test_eval_split_is_disjoint_and_runnable(reference):
    items = read_jsonl(reference / "eval" / "test.jsonl")
    assert len(items) == 6
    train = {r["instance"] for p in (reference / "problems").glob("*.jsonl") for r in read_jsonl(p)}
    evaluation = [r for p in sorted((reference / "eval" / "problems").glob("*.jsonl")) for r in read_jsonl(p)]
    assert [r["id"] for r in evaluation] == [i["id"] for i in items]
    assert all(r["split"] == "eval" for r in evaluation)
    assert len(train) == 24, "every training record is a distinct instance"
    assert not train & {r["instance"] for r in evaluation}, "no eval problem repeats a training instance"
    for item in items:
        assert set(item) >= {"id", "en_question", "en_answer", "family", "difficulty", "representation",
                             "data_file", "reference_program"}
        if item["data_file"]:
            assert (reference / "eval" / item["data_file"]).is_file()
        if item["en_answer"] != "No Best Solution":
            float(item["en_answer"])


def test_eval_statements_use_held_out_skeletons_and_the_overlap_is_reported(reference):
    train = [r for p in sorted((reference / "problems").glob("*.jsonl")) for r in read_jsonl(p)]
    evaluation = [r for p in sorted((reference / "eval" / "problems").glob("*.jsonl")) for r in read_jsonl(p)]
    assert all(r["skeleton"].startswith("open:t") for r in train)
    assert len({r["program_style"] for r in train}) >= 4, "answers are written in several program styles"
    samples = [s for p in sorted((reference / "sft").glob("*.jsonl")) for s in read_jsonl(p)]
    by_id = {r["id"]: r for r in train}
    assert all(by_id[s["source_id"]]["instance"] == s["instance"] for s in samples)
    assert all(r["skeleton"].startswith("open:e") for r in evaluation)
    assert not {r["skeleton"] for r in train} & {r["skeleton"] for r in evaluation}
    overlap = json.loads((reference / "summary.json").read_text())["overlap"]
    manifest = json.loads((reference / "manifest.json").read_text())
    assert manifest["overlap"] == overlap and overlap["n"] == 13 and overlap["eval_ngrams"] > 0
    assert 0.0 <= overlap["eval_ngram_share_in_train"] <= 0.05


def test_programs_run_standalone_with_python(reference, tmp_path):
    """`python program.py` in a folder with data.json prints the recorded objective (fresh interpreter)."""
    records = [r for p in sorted((reference / "problems").glob("*.jsonl")) for r in read_jsonl(p)]
    chosen = [next(r for r in records if r["representation"] == "file"),
              next(r for r in records if r["representation"] != "file")]
    for record in chosen:
        folder = tmp_path / record["id"]
        folder.mkdir()
        (folder / "program.py").write_text(record["program"])
        if record["data"] is not None:
            (folder / "data.json").write_text(json.dumps(record["data"]))
        run = subprocess.run([sys.executable, "program.py"], cwd=folder, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        last = run.stdout.strip().splitlines()[-1]
        expected = (f"Optimal objective value: {record['objective']!r}" if record["status"] == "optimal"
                    else "Status: infeasible")
        assert last == expected


def test_same_seed_gives_identical_records_and_rerun_is_a_no_op(reference, tmp_path):
    again = tmp_path / "again"
    run_synth(config(), again)
    assert folder_records(again) == folder_records(reference)
    manifest = (again / "manifest.json").read_text()
    assert run_synth(config(), again) is None  # finished already: nothing written
    assert (again / "manifest.json").read_text() == manifest


def test_interrupted_run_resumes_to_the_same_records(reference, tmp_path):
    out = tmp_path / "interrupted"

    def interrupt_after_two_blocks(progress):
        if progress.split == "train" and progress.kept >= 10:
            raise KeyboardInterrupt  # like Ctrl-C (or a kill) in the middle of the train split

    with pytest.raises(KeyboardInterrupt):
        run_synth(config(), out, on_progress=interrupt_after_two_blocks)
    assert not (out / "manifest.json").exists()
    finished_blocks = sorted(p.name for p in (out / "blocks").glob("train-*.json"))
    assert finished_blocks, "at least one block was finished before the interruption"
    result = run_synth(config(), out)
    assert result is not None
    assert folder_records(out) == folder_records(reference)


def test_other_settings_refuse_a_finished_folder(reference):
    with pytest.raises(ValueError, match="--force"):
        run_synth(config(seed=6), reference)


def test_holdout_families_stay_out_of_training(tmp_path):
    out = tmp_path / "holdout"
    run_synth(config(n=12, eval_n=10, holdout_families=["knapsack_01", "transportation"]), out)
    train = [r for p in (out / "problems").glob("*.jsonl") for r in read_jsonl(p)]
    assert train and not {r["family"] for r in train} & {"knapsack_01", "transportation"}
    evaluation = read_jsonl(out / "eval" / "test.jsonl")
    assert {i["family"] for i in evaluation} & {"knapsack_01", "transportation"}


@pytest.mark.slow
def test_two_workers_give_the_same_records_as_one(reference, tmp_path):
    out = tmp_path / "two_workers"
    run_synth(config(workers=2), out)
    assert folder_records(out) == folder_records(reference)


def test_bad_settings_name_the_key():
    with pytest.raises(ValueError, match="families"):
        run_synth(config(families=["no_such_family"]), Path("/nonexistent/never-created"))
    with pytest.raises(ValueError, match="difficulty"):
        run_synth(config(difficulty={"huge": 1.0}), Path("/nonexistent/never-created"))
    with pytest.raises(ValueError, match=r"difficulty: diet_blending, knapsack_01.* have no industrial size"):
        run_synth(config(difficulty={"industrial": 1.0}), Path("/nonexistent/never-created"))
    with pytest.raises(ValueError, match=r"program_styles: unknown styles sets:fancy"):
        run_synth(config(program_styles=["sets:fancy"]), Path("/nonexistent/never-created"))
    with pytest.raises(ValueError, match=r"program_styles: min_cost_flow has none of sets:plain"):
        run_synth(config(program_styles=["sets:plain/builder:module/footer:check"]), Path("/nonexistent/never-created"))


def test_industrial_weight_goes_to_the_families_that_scale():
    from data_synth.synthesis import make_candidate

    mixed = config(difficulty={"small": 0.5, "industrial": 0.5})
    drawn = [make_candidate(mixed, "train", i) for i in range(40)]
    industrial = {c.family.name for c in drawn if c.difficulty == "industrial"}
    assert industrial and all(all_families()[name].industrial for name in industrial)
    assert any(c.difficulty == "small" and not c.family.industrial for c in drawn)


def test_program_styles_pin_the_answer_style(tmp_path):
    pinned = "sets:plain/builder:function/footer:check"
    out = tmp_path / "pinned"
    run_synth(config(n=4, eval_n=1, families=["knapsack_01"], program_styles=[pinned]), out)
    records = [r for p in sorted((out / "problems").glob("*.jsonl")) for r in read_jsonl(p)]
    assert len(records) == 4 and {r["program_style"] for r in records} == {pinned}
    assert all("def build_model(data):" in r["program"] and "pyo.Set(" not in r["program"] for r in records)


def test_eval_synth_prompt_is_the_program_sft_prompt(reference):
    # a model trained on the program-only SFT samples is asked the eval questions in the same words:
    # the same system message, the same user message (a data file shown inline), the same request
    from data_synth.render import sft_sample
    from trex_cli.evaluate.benchmarks import load_benchmark
    from trex_cli.evaluate.prompts import PromptBuilder

    records = {r["id"]: r for p in (reference / "eval" / "problems").glob("*.jsonl") for r in read_jsonl(p)}
    benchmark = load_benchmark(str(reference))
    assert {item.id for item in benchmark.items} == set(records)
    builder = PromptBuilder("synth")
    for item in benchmark.items:
        expected = sft_sample(records[item.id], "program")["messages"][:2]
        assert builder.messages(item) == expected, item.id
    assert any(records[item.id]["representation"] == "file" for item in benchmark.items)


def test_a_file_request_ends_with_the_data_keys(reference):
    # the sentence a short-window model still reads when it chooses the program (render.keys_sentence):
    # every top-level key of the file, in the file's order, last in the user message; none without a file
    from data_synth.render import request_messages

    records = [r for p in (reference / "problems").glob("*.jsonl") for r in read_jsonl(p)]
    files = [r for r in records if r["representation"] == "file"]
    assert files
    for record in files:
        user = request_messages(record["statement"], record["data"], "program")[1]["content"]
        last = user.rsplit("\n\n", 1)[1]
        keys = list(record["data"])
        listed = ", ".join(f"`{key}`" for key in keys[:-1]) + f" and `{keys[-1]}`"
        assert last.endswith(f"last line. `data.json` holds {listed}."), (record["id"], last)
    assert request_messages("Maximize x.", None, "program")[1]["content"].endswith("on its last line.")
    assert request_messages("Q", {"n": 3}, "model")[1]["content"].endswith("`data.json` holds `n`.")
