"""`trex eval` faults: a completions file whose `sample` is not a number names the file, line and field;
`trex eval compare` refuses an unfinished eval instead of scoring its missing samples as wrong. Each
corrected command then gives what a clean run gives."""

from __future__ import annotations

import json

from eval_fixtures import en_question_rows, write_jsonl
from shared_programs import simple_program
from typer.testing import CliRunner

from trex_cli.app import app

runner = CliRunner()
RIGHT = "```python\n" + simple_program("model.x + 2 * model.y", integer=True) + "```"
WRONG = "```python\n" + simple_program("model.x + 2 * model.y") + "```"  # continuous: a wrong value


def _squeezed(text: str) -> str:
    """Without whitespace: rich wraps long paths anywhere, even inside a word."""
    return "".join(text.split())


def _eval(tmp_path, benchmark, completions, out):
    return runner.invoke(app, [
        "eval", "--benchmark", str(benchmark), "--backend", "file", "--samples", "2", "--allow-code-execution",
        "--timeout", "30", "--workers", "2", "--completions", str(completions), "--out", str(out),
    ])  # fmt: skip


def _completions(path, samples):
    rows = [{"id": item, "sample": sample, "completion": text} for item, sample, text in samples]
    return write_jsonl(path, rows)


def test_a_sample_that_is_not_a_number_names_file_line_and_field_and_the_fixed_file_scores_as_clean(tmp_path):
    benchmark = write_jsonl(tmp_path / "bench" / "mini.jsonl", en_question_rows()[:1])
    clean = _completions(tmp_path / "clean.jsonl", [("0", 0, RIGHT), ("0", 1, WRONG)])
    assert _eval(tmp_path, benchmark, clean, tmp_path / "clean").exit_code == 0
    bad = _completions(tmp_path / "bad.jsonl", [("0", 0, RIGHT), ("0", "second", WRONG)])
    result = _eval(tmp_path, benchmark, bad, tmp_path / "bad")
    assert result.exit_code == 1
    assert _squeezed(f"{bad}:2: 'sample' is 'second'; give the sample's number") in _squeezed(result.output)
    assert "Traceback" not in result.output and "int()" not in result.output
    _completions(bad, [("0", 0, RIGHT), ("0", "1", WRONG)])  # the fix ("1" as text is a number too)
    result = _eval(tmp_path, benchmark, bad, tmp_path / "bad")
    assert result.exit_code == 0, result.output
    scores = [json.loads((tmp_path / name / "results.json").read_text())["scores"] for name in ("clean", "bad")]
    assert scores[0] == scores[1]


def test_compare_refuses_an_unfinished_eval_and_compares_once_it_is_finished(tmp_path):
    benchmark = write_jsonl(tmp_path / "bench" / "mini.jsonl", en_question_rows()[:2])
    good = _completions(tmp_path / "good.jsonl", [("0", 0, RIGHT), ("0", 1, RIGHT), ("1", 0, WRONG), ("1", 1, WRONG)])
    poor = _completions(tmp_path / "poor.jsonl", [("0", 0, WRONG), ("0", 1, WRONG), ("1", 0, WRONG), ("1", 1, WRONG)])
    for name, completions in (("good", good), ("poor", poor), ("unfinished", good)):
        assert _eval(tmp_path, benchmark, completions, tmp_path / name).exit_code == 0
    clean = runner.invoke(app, ["eval", "compare", str(tmp_path / "good"), str(tmp_path / "poor")])
    assert clean.exit_code == 0 and "A wins 1" in clean.output, clean.output

    # what an eval stopped after its first graded sample leaves: that line, its stage state, no manifest
    unfinished = tmp_path / "unfinished"
    samples = unfinished / "samples.jsonl"
    samples.write_text(samples.read_text().splitlines()[0] + "\n")
    for name in ("manifest.json", "results.json"):
        (unfinished / name).unlink()
    result = runner.invoke(app, ["eval", "compare", str(unfinished), str(tmp_path / "poor")])
    assert result.exit_code == 1
    assert _squeezed(f"{unfinished} is an unfinished eval (no manifest.json yet)") in _squeezed(result.output)
    assert "trexeval" in _squeezed(result.output) and "%" not in result.output

    assert _eval(tmp_path, benchmark, good, unfinished).exit_code == 0  # the fix: run it again; it resumes
    finished = runner.invoke(app, ["eval", "compare", str(unfinished), str(tmp_path / "poor")])
    assert finished.exit_code == 0 and finished.output == clean.output.replace("good", "unfinished")
