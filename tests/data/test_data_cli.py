"""`trex data cpt` / `trex data sft` on a synth folder with the tiny recipe: summary tables, re-runs,
bad input (file and line named; `--skip-bad` counts it into the exclusion file)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from data_fixtures import chat_sample, make_synth_folder, random_document, vocabulary, write_jsonl
from typer.testing import CliRunner

from trex_cli.app import app

RECIPE = str(Path(__file__).resolve().parents[2] / "recipes" / "tiny-cpu.toml")
runner = CliRunner()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    rng = random.Random(2)
    words = vocabulary(500)
    documents = [random_document(rng, words, rng.randint(150, 400)) for _ in range(60)]
    samples = [chat_sample(rng, words, f"toy-{i}", ["program", "model_program"][i % 2]) for i in range(24)]
    make_synth_folder(root / "synth", documents, samples)
    return root


def _invoke(*args):
    result = runner.invoke(app, [*args, "--no-progress"])
    # rich wraps long lines at the terminal width: compare with whitespace collapsed
    return result, " ".join((result.stdout + (result.stderr or "")).split())


def test_cpt_then_sft_with_the_tiny_recipe(run_dir):
    result, text = _invoke("data", "cpt", "--recipe", RECIPE, "--run-dir", str(run_dir), "--set", "data.vocab_size=600")
    assert result.exit_code == 0, text
    assert "CPT sources" in text and "train" in text and "validation" in text
    meta = json.loads((run_dir / "data" / "cpt" / "meta.json").read_text())
    assert meta["seq_len"] == 1024 and meta["num_train_rows"] > 0
    assert (run_dir / "data" / "cpt" / "recipe.resolved.toml").read_text().count("[data") >= 1

    again, text = _invoke("data", "cpt", "--recipe", RECIPE, "--run-dir", str(run_dir), "--set", "data.vocab_size=600")
    assert again.exit_code == 0 and "already done" in text

    result, text = _invoke("data", "sft", "--recipe", RECIPE, "--run-dir", str(run_dir), "--stage", "program")
    assert result.exit_code == 0, text
    assert "SFT sources (stage program)" in text
    stats = json.loads((run_dir / "data" / "sft-program" / "stats.json").read_text())
    assert stats["tokenizer"]["origin"].endswith("data/cpt/tokenizer")  # reuses the CPT tokenizer
    assert stats["answer_styles"] == {"program": 12}
    manifest = json.loads((run_dir / "data" / "sft-program" / "manifest.json").read_text())
    assert {entry["stage"] for entry in manifest["inputs"]} == {"synth", "data-cpt"}

    result, text = _invoke("data", "sft", "--recipe", RECIPE, "--run-dir", str(run_dir), "--stage", "all", "--packing")
    assert result.exit_code == 0, text
    stats = json.loads((run_dir / "data" / "sft" / "stats.json").read_text())
    assert stats["answer_styles"] == {"program": 12, "model_program": 12} and stats["packing"] is True


def test_bad_line_names_file_and_line_and_skip_bad_counts_it(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"text": f"document number {i} " * 40} for i in range(30)])
    lines = corpus.read_text().splitlines()
    lines[6] = '{"text": "broken'
    lines[9] = '{"title": "no text field"}'
    corpus.write_text("\n".join(lines) + "\n")
    common = ["data", "cpt", "--source", str(corpus), "--train-tokenizer", "300", "--seq-len", "64",
              "--run-dir", str(tmp_path), "--out", str(tmp_path / "cpt")]
    result, text = _invoke(*common)
    assert result.exit_code == 1
    assert f"{corpus}:7: not valid JSON" in text and "--skip-bad" in text and "Traceback" not in text

    result, text = _invoke(*common, "--skip-bad")
    assert result.exit_code == 0, text
    rows = [json.loads(line) for line in (tmp_path / "cpt" / "exclusions.jsonl").read_text().splitlines()]
    bad = [row for row in rows if row["reason"] == "bad_input"]
    assert [row["where"] for row in bad] == [f"{corpus}:7", f"{corpus}:10"]
    assert json.loads((tmp_path / "cpt" / "stats.json").read_text())["drops_by_reason"]["bad_input"] == 2


def test_user_mistakes_are_one_line_errors(tmp_path):
    result, text = _invoke("data", "cpt", "--source", str(tmp_path / "missing"), "--run-dir", str(tmp_path))
    assert result.exit_code == 1 and "does not exist" in text
    result, text = _invoke("data", "cpt", "--source", "x.jsonl=abc", "--run-dir", str(tmp_path))
    assert result.exit_code == 1 and "share after '=' must be a number" in text
    unfinished = tmp_path / "synth"
    (unfinished / "cpt_docs").mkdir(parents=True)
    result, text = _invoke("data", "cpt", "--source", str(unfinished), "--run-dir", str(tmp_path))
    assert result.exit_code == 1 and "manifest.json" in text
