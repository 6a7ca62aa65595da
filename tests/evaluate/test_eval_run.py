"""Whole evals: the gold backend on a Bench4Opt-style fixture, the file backend with several samples,
the stage folder (no-op re-runs), the reports, and the `trex eval` commands."""

from __future__ import annotations

import json

import pytest
from eval_fixtures import SILENT_PROGRAM, bench4opt_fixture, en_question_rows, write_jsonl
from shared_programs import simple_program
from typer.testing import CliRunner

from trex_cli.app import app
from trex_cli.evaluate import EvalConfig, run_eval
from trex_cli.evaluate.grading import RULES


def test_gold_scores_the_bench4opt_fixture_at_100_percent(tmp_path):
    benchmark = bench4opt_fixture(tmp_path / "b4o")
    config = EvalConfig(benchmarks=[str(benchmark)], backend="gold", allow_code_execution=True, timeout=30, workers=2)
    out = tmp_path / "eval" / "gold"
    results = run_eval(config, out, show_progress=False)
    scores = results["scores"]["b4o"]
    assert {rule: scores["rules"][rule]["pass@1"] for rule in RULES} == {rule: 1.0 for rule in RULES}
    assert scores["outcomes"]["correct"] == 2
    for key in ("config", "versions", "git_hash", "seeds", "benchmarks", "isolation", "headline_rule"):
        assert key in results
    assert results["benchmarks"]["b4o"]["sha256"] and results["scores"]["b4o"]["rules"]["strict"]["pass@1_stderr"] == 0.0
    assert "## Rule `strict` (headline)" in (out / "report.md").read_text()
    assert (out / "pass_at_1.png").read_bytes()[:4] == b"\x89PNG"
    record = json.loads((out / "samples.jsonl").read_text().splitlines()[0])
    for key in ("program", "stdout", "stderr", "solver_status", "objective", "wall_s", "outcome", "verdicts", "gap"):
        assert key in record
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stage"] == "eval" and manifest["counts"]["samples"] == 2

    before = (out / "samples.jsonl").stat().st_mtime_ns
    again = run_eval(config, out, show_progress=False)  # finished with the same settings: a no-op
    assert again["scores"] == results["scores"] and (out / "samples.jsonl").stat().st_mtime_ns == before


def test_gold_reads_the_objective_of_a_program_that_prints_nothing(tmp_path):
    benchmark = bench4opt_fixture(tmp_path / "b4o", program=SILENT_PROGRAM)
    config = EvalConfig(benchmarks=[str(benchmark)], backend="gold", allow_code_execution=True, timeout=30)
    rules = run_eval(config, tmp_path / "out", show_progress=False)["scores"]["b4o"]["rules"]
    assert rules["strict"]["pass@1"] == 1.0 and rules["trex-paper"]["pass@1"] == 1.0
    assert rules["opt-engine"]["pass@1"] == 0.0  # the printed-objective rules find no line to read
    assert rules["sirl"]["pass@1"] == 1.0  # SIRL's evaluator prints the objective after the solve itself


def test_execution_must_be_allowed(tmp_path, monkeypatch):
    monkeypatch.delenv("TREX_ALLOW_CODE_EXECUTION", raising=False)
    benchmark = bench4opt_fixture(tmp_path / "b4o")
    with pytest.raises(ValueError, match="--allow-code-execution"):
        run_eval(EvalConfig(benchmarks=[str(benchmark)], backend="gold"), tmp_path / "out")


def completions_file(path, rows):
    return write_jsonl(path, [{"id": str(i), "sample": s, "completion": text} for i, s, text in rows])


def test_file_backend_cli_regrade_and_compare(tmp_path):
    benchmark = write_jsonl(tmp_path / "bench" / "mini.jsonl", en_question_rows()[:2])
    right0 = "```python\n" + simple_program("model.x + 2 * model.y", integer=True) + "```"
    wrong0 = "```python\n" + simple_program("model.x + 2 * model.y") + "```"  # continuous: 7.5
    right1 = "```python\n" + simple_program("3 * model.x + 2 * model.y") + "```"
    broken = "```python\nprint('Objective:' 13.5)\n```"
    good = completions_file(tmp_path / "good.jsonl", [("0", 0, right0), ("0", 1, wrong0), ("1", 0, right1), ("1", 1, right1)])
    poor = completions_file(tmp_path / "poor.jsonl", [("0", 0, wrong0), ("0", 1, wrong0), ("1", 0, right1), ("1", 1, broken)])
    runner = CliRunner()
    base = ["eval", "--benchmark", str(benchmark), "--backend", "file", "--samples", "2", "--allow-code-execution",
            "--timeout", "30", "--workers", "2"]  # fmt: skip
    first = runner.invoke(app, base + ["--completions", str(good), "--out", str(tmp_path / "good")])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, base + ["--completions", str(poor), "--out", str(tmp_path / "poor")])
    assert second.exit_code == 0, second.output

    results = json.loads((tmp_path / "good" / "results.json").read_text())
    strict = results["scores"]["mini"]["rules"]["strict"]
    assert strict["pass@1"] == pytest.approx(0.75) and strict["pass@2"] == pytest.approx(1.0)
    assert strict["correct"] == 3 and strict["samples"] == 4
    orlm = results["scores"]["mini"]["rules"]["orlm"]
    assert orlm["correct"] == 3  # the continuous answer 7.5 rounds to 8: 14 % from 7
    poor_outcomes = json.loads((tmp_path / "poor" / "results.json").read_text())["scores"]["mini"]["outcomes"]
    assert poor_outcomes["syntax error"] == 1 and poor_outcomes["wrong value"] == 2

    compared = runner.invoke(app, ["eval", "compare", str(tmp_path / "good"), str(tmp_path / "poor")])
    assert compared.exit_code == 0, compared.output
    assert "A wins 2" in compared.output and "loses 0" in compared.output

    regraded = runner.invoke(app, ["eval", "regrade", str(tmp_path / "poor" / "samples.jsonl"), "--rule", "sirl",
                                   "--output", str(tmp_path / "regraded.jsonl")])  # fmt: skip
    assert regraded.exit_code == 0, regraded.output
    again = [json.loads(line) for line in (tmp_path / "regraded.jsonl").read_text().splitlines()]
    original = [json.loads(line) for line in (tmp_path / "poor" / "samples.jsonl").read_text().splitlines()]
    assert [r["verdicts"] for r in again] == [r["verdicts"] for r in original]

    published = write_jsonl(tmp_path / "published.jsonl", [
        {"pred": "1.5e+06", "gt": "1500000"}, {"pred": "No Best Solution", "gt": "-99999"}, {"pred": "3.1", "gt": "3"},
    ])  # fmt: skip
    outside = runner.invoke(app, ["eval", "regrade", str(published), "--pred-field", "pred", "--answer-field", "gt"])
    assert outside.exit_code == 0, outside.output
    # ORLM's evaluator reads -99999 as a number: "No Best Solution" does not match it there
    assert "│ strict *   │       2 │" in outside.output and "│ orlm       │       2 │" in outside.output
    missing = runner.invoke(app, ["eval", "regrade", str(published), "--pred-field", "nope", "--answer-field", "gt"])
    assert missing.exit_code == 1 and "nope" in missing.output


def test_cli_refuses_to_run_code_without_permission(tmp_path, monkeypatch):
    monkeypatch.delenv("TREX_ALLOW_CODE_EXECUTION", raising=False)
    benchmark = bench4opt_fixture(tmp_path / "b4o")
    result = CliRunner().invoke(app, ["eval", "--benchmark", str(benchmark), "--backend", "gold", "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and "--allow-code-execution" in result.output


def test_gold_on_trex_s_own_eval_split_with_data_files_and_an_infeasible_item(tmp_path):
    from eval_fixtures import INSTANCES, OPTIMA, PYOMO_DATA_PROGRAM

    synth = tmp_path / "run" / "synth"
    (synth / "eval" / "data").mkdir(parents=True)
    rows = []
    for index, (instance, optimum) in enumerate(zip(INSTANCES, OPTIMA, strict=True)):
        (synth / "eval" / "data" / f"p{index}.json").write_text(json.dumps(instance))
        rows.append({"id": f"p{index}", "en_question": f"Plan {index}.", "en_answer": repr(optimum), "family": "production",
                     "difficulty": "small", "representation": "file", "data_file": f"data/p{index}.json",
                     "reference_program": PYOMO_DATA_PROGRAM})  # fmt: skip
    infeasible = simple_program("model.x", sense="minimize", extra="model.impossible = pyo.Constraint(expr=model.x >= 11)")
    rows.append({"id": "p9", "en_question": "Impossible plan.", "en_answer": "No Best Solution", "family": "production",
                 "difficulty": "small", "representation": "text", "data_file": None, "reference_program": infeasible})  # fmt: skip
    write_jsonl(synth / "eval" / "test.jsonl", rows)
    config = EvalConfig(benchmarks=["synth"], backend="gold", allow_code_execution=True, timeout=30)
    results = run_eval(config, tmp_path / "run" / "eval" / "gold", synth_dir=synth, show_progress=False)
    assert results["scores"]["synth"]["rules"]["strict"]["pass@1"] == 1.0
    assert results["scores"]["synth"]["items"] == 3


def test_an_eval_with_hostile_completions_finishes_and_explains_each(tmp_path):
    rows = [{"id": f"h{n}", "en_question": f"Question {n}", "en_answer": "7"} for n in range(6)]
    benchmark = write_jsonl(tmp_path / "hostile.jsonl", rows)
    right = simple_program("model.x + 2 * model.y", integer=True)
    programs = {
        "h0": "while True:\n    pass\n",
        "h1": "hog = bytearray(8 * 1024 ** 3)\n",
        "h2": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
        "h3": "import os\nos.execv('/bin/sh', ['sh', '-c', 'sleep 30'])\n",
        "h4": "def broken(:\n    pass\n",
        "h5": right,
    }
    completions = write_jsonl(tmp_path / "completions.jsonl", [
        {"id": item, "completion": f"```python\n{program}```"} for item, program in programs.items()
    ])  # fmt: skip
    config = EvalConfig(benchmarks=[str(benchmark)], backend="file", completions=str(completions),
                        allow_code_execution=True, timeout=2, memory_mb=512, workers=3)  # fmt: skip
    out = tmp_path / "eval"
    results = run_eval(config, out, show_progress=False)
    outcomes = {json.loads(line)["item_id"]: json.loads(line)["outcome"] for line in (out / "samples.jsonl").read_text().splitlines()}
    assert outcomes == {"h0": "timeout", "h1": "runtime error", "h2": "runtime error", "h3": "timeout",
                        "h4": "syntax error", "h5": "correct"}  # fmt: skip
    assert results["scores"]["hostile"]["rules"]["strict"]["correct"] == 1
    report = (out / "report.md").read_text()
    assert "- timeout: hostile item `h0` sample 0: time limit reached" in report
    assert "- syntax error: hostile item `h4`" in report


def test_regrade_reads_nested_fields_of_published_files(tmp_path):
    published = write_jsonl(tmp_path / "nested.jsonl", [
        {"result": {"objective": "105.0"}, "gold": {"answer": "100"}},
        {"result": {"objective": "1e+06"}, "gold": {"answer": "1000000"}},
    ])  # fmt: skip
    result = CliRunner().invoke(app, ["eval", "regrade", str(published), "--rule", "orlm",
                                      "--pred-field", "result.objective", "--answer-field", "gold.answer"])  # fmt: skip
    assert result.exit_code == 0, result.output
    # 105 is exactly 5 % from 100: the ORLM rule accepts it, the strict rule does not
    assert "│ orlm *     │       2 │" in result.output and "│ strict     │       1 │" in result.output


def test_compare_refuses_evals_of_different_benchmark_versions(tmp_path):
    rows = en_question_rows()[:2]
    completions = completions_file(tmp_path / "c.jsonl", [("0", 0, "```python\n" + simple_program("model.x + 2 * model.y", integer=True) + "```"),
                                                          ("1", 0, "no code")])  # fmt: skip
    runner = CliRunner()
    for name, answer in (("v1", "7.0"), ("v2", "7.5")):  # the same file name, one answer changed
        benchmark = write_jsonl(tmp_path / name / "mini.jsonl", [{**rows[0], "en_answer": answer}, rows[1]])
        result = runner.invoke(app, ["eval", "--benchmark", str(benchmark), "--backend", "file", "--completions", str(completions),
                                     "--allow-code-execution", "--timeout", "30", "--out", str(tmp_path / f"eval-{name}")])  # fmt: skip
        assert result.exit_code == 0, result.output
    refused = runner.invoke(app, ["eval", "compare", str(tmp_path / "eval-v1"), str(tmp_path / "eval-v2")])
    assert refused.exit_code == 1 and "different versions" in refused.output and "--allow-different-benchmarks" in refused.output
    allowed = runner.invoke(app, ["eval", "compare", str(tmp_path / "eval-v1"), str(tmp_path / "eval-v2"), "--allow-different-benchmarks"])
    assert allowed.exit_code == 0 and "A wins 1" in allowed.output and "warning: different benchmark versions" in allowed.output


def test_the_trex_suite_reports_the_mean_of_its_four_benchmarks(tmp_path):
    from eval_fixtures import GUROBI_MODEL_PROGRAM, orgeval_fixture

    root = tmp_path / "benchmarks" / "slai_trex_eval"
    write_jsonl(root / "NL4OPT" / "test.jsonl", en_question_rows()[:2])
    write_jsonl(root / "optibench" / "OptiBench.json", en_question_rows()[:2])
    bench4opt_fixture(root / "bench4opt_feasible")
    orgeval_fixture(root / "bench4opt")
    right = "```python\n" + simple_program("model.x + 2 * model.y", integer=True) + "```"
    rows = [{"benchmark": b, "id": "0", "completion": right} for b in ("nl4opt", "optibench")]
    rows += [{"benchmark": b, "id": "1", "completion": "no code"} for b in ("nl4opt", "optibench")]
    rows += [{"benchmark": "b4o-feasible", "id": f"B4O_{i}", "completion": "no code"} for i in (0, 1)]
    rows += [{"benchmark": "b4o-orgeval", "id": f"BENCH4OPT_{i}", "completion": f"```python\n{GUROBI_MODEL_PROGRAM}```"} for i in (0, 1)]
    completions = write_jsonl(tmp_path / "completions.jsonl", rows)
    out = tmp_path / "suite"
    result = CliRunner().invoke(app, ["eval", "--suite", "trex", "--benchmark-dir", str(tmp_path / "benchmarks"), "--backend", "file",
                                      "--completions", str(completions), "--allow-code-execution", "--timeout", "60",
                                      "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    suite = results["suite"]
    assert list(suite["benchmarks"]) == ["nl4opt", "optibench", "b4o-feasible", "b4o-orgeval"]
    assert {name: entry["pass@1"] for name, entry in suite["benchmarks"].items()} == {
        "nl4opt": 0.5, "optibench": 0.5, "b4o-feasible": 0.0, "b4o-orgeval": 1.0}  # fmt: skip
    assert suite["benchmarks"]["b4o-orgeval"]["rule"] == "orgeval" and suite["benchmarks"]["nl4opt"]["rule"] == "trex-paper"
    assert suite["mean_pass@1"] == pytest.approx(0.5) and "mean Pass@1 50.00%" in result.output
    assert results["config"]["prompt"] == "trex-paper" and results["headline_rule"] == "trex-paper"
    prompts = {r["benchmark"]: r["prompt"] for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    assert [m["role"] for m in prompts["b4o-orgeval"]] == ["user"] and "save the model as an `.lp` file" in prompts["b4o-orgeval"][0]["content"]
    assert "data.json" in prompts["b4o-feasible"][1]["content"] and "<python>" in prompts["nl4opt"][0]["content"]
    lm_eval = json.loads((out / "results_lm_eval.json").read_text())
    assert lm_eval["groups"]["trex_suite_trex"]["pass@1,paper"] == pytest.approx(0.5)
