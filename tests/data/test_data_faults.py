"""`trex data` with a bad tokenizer: a missing `--tokenizer` folder is named as the tokenizer (not as a
data source) and a corrupt tokenizer.json as that file, each one line with the fix; the corrected
command then builds the same rows as a clean run."""

from __future__ import annotations

import shutil

from data_fixtures import write_jsonl
from typer.testing import CliRunner

from trex_cli.app import app

runner = CliRunner()


def _invoke(*args):
    """The result and its output without whitespace (rich wraps long paths anywhere, even inside a word)."""
    result = runner.invoke(app, [*args, "--no-progress"])
    return result, _squeezed(result.stdout + (result.stderr or ""))


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _rows(folder):
    import datasets

    return datasets.load_from_disk(str(folder / "train"))["input_ids"]


def test_a_missing_or_corrupt_tokenizer_is_named_and_the_fixed_command_builds_the_clean_rows(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"text": f"document number {i} " * 40} for i in range(30)])
    common = ["data", "cpt", "--source", str(corpus), "--seq-len", "64", "--run-dir", str(tmp_path)]
    result, text = _invoke(*common, "--train-tokenizer", "300", "--out", str(tmp_path / "first"))
    assert result.exit_code == 0, text
    tokenizer = tmp_path / "first" / "tokenizer"
    result, text = _invoke(*common, "--tokenizer", str(tokenizer), "--out", str(tmp_path / "clean"))
    assert result.exit_code == 0, text

    missing = tmp_path / "no-such-tokenizer"
    result, text = _invoke(*common, "--tokenizer", str(missing), "--out", str(tmp_path / "cpt"))
    assert result.exit_code == 1, text
    assert _squeezed(f"--tokenizer {missing} ([data] tokenizer): no tokenizer.json there") in text, text
    assert "source" not in text.split("notokenizer.jsonthere")[0] and "Traceback" not in text

    copy = tmp_path / "copied-tokenizer"
    shutil.copytree(tokenizer, copy)
    whole = (copy / "tokenizer.json").read_bytes()
    (copy / "tokenizer.json").write_bytes(whole[: len(whole) // 3])  # a copy that stopped a third of the way
    result, text = _invoke(*common, "--tokenizer", str(copy), "--out", str(tmp_path / "cpt"))
    assert result.exit_code == 1, text
    assert _squeezed(f"{copy / 'tokenizer.json'}: not a readable tokenizer") in text and "Traceback" not in text

    (copy / "tokenizer.json").write_bytes(whole)  # the fix: copy it again
    result, text = _invoke(*common, "--tokenizer", str(copy), "--out", str(tmp_path / "cpt"))
    assert result.exit_code == 0, text
    assert _rows(tmp_path / "cpt") == _rows(tmp_path / "clean")
