"""B4O-ORGEval: the structural LP equivalence check on tiny LP pairs written by the tests, and whole
evals in which the sandbox captures the model a program built (gurobipy or Pyomo)."""

from __future__ import annotations

import json
import os

import pytest
from eval_fixtures import GUROBI_MODEL_PROGRAM, PYOMO_MODEL_PROGRAM, orgeval_fixture, write_jsonl
from typer.testing import CliRunner

from trex_cli.app import app
from trex_cli.evaluate import EvalConfig, run_eval
from trex_cli.evaluate.equivalence import check_equivalence, normalize, read_lp

pytest.importorskip("gurobipy", reason="B4O-ORGEval reads LP files with gurobipy (the eval extra)")

REFERENCE = """\\ a small production plan
Maximize
  3 x[0] + 5 x[1] + 2 x[2]
Subject To
 capacity: x[0] + 2 x[1] + x[2] <= 10
 demand: x[0] + x[1] >= 2
 balance: x[0] - x[2] <= 0
 single: x[1] <= 4
Bounds
 x[0] <= 4
Generals
 x[2]
End
"""

# The same model: variables renamed, rows reordered and rewritten (`<= 0` as `>= 0` negated, a
# one-variable row as a bound), terms permuted.
EQUIVALENT = """\\ the same plan in other words
Maximize
  5 b + 2 c + 3 a
Subject To
 r1: - a + c >= 0
 r2: b + a >= 2
 r3: c + 2 b + a <= 10
Bounds
 a <= 4
 b <= 4
Generals
 c
End
"""


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_renamed_variables_and_permuted_rows_stay_equivalent(tmp_path):
    result = check_equivalence(write(tmp_path, "ref.lp", REFERENCE), write(tmp_path, "same.lp", EQUIVALENT))
    assert result.equivalent, result.reason
    assert result.checks["var_num_check"] and result.checks["cons_num_check"] and result.checks["wl_check"]


def test_a_changed_coefficient_is_not_equivalent(tmp_path):
    changed = write(tmp_path, "changed.lp", EQUIVALENT.replace("c + 2 b + a <= 10", "c + 2.5 b + a <= 10"))
    result = check_equivalence(write(tmp_path, "ref.lp", REFERENCE), changed)
    assert not result.equivalent and result.checks["wl_check"] is False
    objective = write(tmp_path, "objective.lp", EQUIVALENT.replace("5 b + 2 c + 3 a", "5 b + 2 c + 3.01 a"))
    assert not check_equivalence(tmp_path / "ref.lp", objective).equivalent


def test_a_dropped_constraint_or_a_changed_type_is_not_equivalent(tmp_path):
    reference = write(tmp_path, "ref.lp", REFERENCE)
    dropped = write(tmp_path, "dropped.lp", EQUIVALENT.replace(" r2: b + a >= 2\n", ""))
    result = check_equivalence(reference, dropped)
    assert not result.equivalent and result.checks == {"var_num_check": True, "cons_num_check": False}
    continuous = write(tmp_path, "continuous.lp", EQUIVALENT.replace("Generals\n c\n", ""))
    assert not check_equivalence(reference, continuous).equivalent
    bound = write(tmp_path, "bound.lp", EQUIVALENT.replace(" b <= 4", " b <= 5"))
    assert not check_equivalence(reference, bound).equivalent


def test_normalization_follows_the_papers_checker(tmp_path):
    model = normalize(read_lp(write(tmp_path, "ref.lp", REFERENCE)))
    assert model.num_rows == 3 and model.upper[1] == 4.0  # the row `single` became x[1]'s bound
    balance = next(i for i, row in enumerate(model.rows) if len(row) == 2 and model.rhs[i] == 0.0)
    assert model.senses[balance] == ">" and sorted(v for _, v in model.rows[balance]) == [-1.0, 1.0]
    # a one-variable row keeps its sense when its coefficient is negative (as the checker does)
    negative = normalize(read_lp(write(tmp_path, "neg.lp", "Minimize\n x + y\nSubject To\n c: - 2 x <= 4\n d: x + y >= 1\nEnd\n")))
    assert negative.upper[0] == -2.0 and negative.num_rows == 1


def test_a_model_wl_cannot_decide_is_not_credited_even_against_itself(tmp_path):
    # three interchangeable variables in a cycle of rows: every node has a twin it is connected to
    cycle = "Maximize\n x1 + x2 + x3\nSubject To\n a: x1 + x2 <= 1\n b: x2 + x3 <= 1\n c: x3 + x1 <= 1\nEnd\n"
    result = check_equivalence(write(tmp_path, "a.lp", cycle), write(tmp_path, "b.lp", cycle))
    assert not result.equivalent and result.checks["wl_check"] and not result.checks["sufficient_check"]


def test_an_unreadable_candidate_is_not_equivalent(tmp_path):
    result = check_equivalence(write(tmp_path, "ref.lp", REFERENCE), write(tmp_path, "bad.lp", "this is not an LP file"))
    assert not result.equivalent and "could not be read" in result.reason


def test_gold_gurobipy_and_pyomo_programs_are_graded_by_the_model_they_build(tmp_path):
    benchmark = orgeval_fixture(tmp_path / "bench4opt")
    # trex writes the model the program built itself: the programs below write no model.lp of their own
    wrong_coefficient = GUROBI_MODEL_PROGRAM.replace('data["use"][i] * x[i]', '1.5 * data["use"][i] * x[i]').replace('model.write("model.lp")', "")
    dropped_constraint = GUROBI_MODEL_PROGRAM.replace('model.addConstr(x[0] - x[1] <= 0, name="balance")', "").replace(
        'model.write("model.lp")', "model.optimize()")
    other_file = GUROBI_MODEL_PROGRAM.replace('model.write("model.lp")', 'model.write("plan.lp")')
    completions = write_jsonl(tmp_path / "completions.jsonl", [
        {"id": "BENCH4OPT_0", "sample": 0, "completion": f"```python\n{PYOMO_MODEL_PROGRAM}```"},
        {"id": "BENCH4OPT_0", "sample": 1, "completion": f"```python\n{wrong_coefficient}```"},
        {"id": "BENCH4OPT_1", "sample": 0, "completion": f"```python\n{other_file}```"},
        {"id": "BENCH4OPT_1", "sample": 1, "completion": f"```python\n{dropped_constraint}```"},
    ])  # fmt: skip
    config = EvalConfig(benchmarks=[str(benchmark)], backend="file", completions=str(completions), samples=2,
                        allow_code_execution=True, timeout=60, workers=2)  # fmt: skip
    out = tmp_path / "eval"
    results = run_eval(config, out, show_progress=False)
    score = results["scores"]["bench4opt"]
    assert list(score["rules"]) == ["orgeval"] and score["headline_rule"] == "orgeval"
    assert score["rules"]["orgeval"]["correct"] == 2 and score["rules"]["orgeval"]["pass@1"] == pytest.approx(0.5)
    assert score["outcomes"]["not equivalent"] == 2
    records = {(r["item_id"], r["sample"]): r for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    assert records[("BENCH4OPT_0", 1)]["equivalence"]["checks"]["wl_check"] is False
    assert records[("BENCH4OPT_1", 1)]["equivalence"]["checks"]["cons_num_check"] is False
    assert "units(0)" in records[("BENCH4OPT_0", 0)]["model_lp"]  # the Pyomo model, as trex wrote it
    # per-subset Pass@1 by wording: item 0 is the plain wording, item 1 the concise one
    assert score["subsets"]["wp_type"][""]["orgeval"]["pass@1"] == 0.5
    assert score["subsets"]["wp_type"]["_concise"]["orgeval"]["pass@1"] == 0.5
    assert "## bench4opt by `wp_type` (rule `orgeval`)" in (out / "report.md").read_text()
    lm_eval = json.loads((out / "results_lm_eval.json").read_text())
    assert lm_eval["results"]["trex_bench4opt"]["pass@1,orgeval"] == pytest.approx(0.5)
    regraded = CliRunner().invoke(app, ["eval", "regrade", str(out / "samples.jsonl"), "--rule", "orgeval"])
    assert regraded.exit_code == 0 and "│ orgeval *  │       2 │" in regraded.output, regraded.output
    assert lm_eval["n-shot"] == {"trex_bench4opt": 0} and lm_eval["versions"]["trex_bench4opt"] == results["benchmarks"]["bench4opt"]["sha256"]


def test_gold_on_the_orgeval_fixture_is_all_equivalent_and_a_model_less_program_says_so(tmp_path):
    benchmark = orgeval_fixture(tmp_path / "b4o-orgeval")
    config = EvalConfig(benchmarks=[str(benchmark)], backend="gold", allow_code_execution=True, timeout=60, workers=2)
    assert run_eval(config, tmp_path / "gold", show_progress=False)["scores"]["b4o-orgeval"]["rules"]["orgeval"]["pass@1"] == 1.0
    no_model = write_jsonl(tmp_path / "none.jsonl", [{"id": f"BENCH4OPT_{i}", "completion": "```python\nprint('hello')\n```"} for i in (0, 1)])
    config = EvalConfig(benchmarks=[str(benchmark)], backend="file", completions=str(no_model), allow_code_execution=True, timeout=60)
    assert run_eval(config, tmp_path / "none", show_progress=False)["scores"]["b4o-orgeval"]["outcomes"]["no model"] == 2


CONFORMANCE_ENV = "TREX_CONFORMANCE_DIR"  # a folder holding slai_trex_eval/ (the T-Rex paper's benchmarks)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get(CONFORMANCE_ENV), reason=f"set {CONFORMANCE_ENV} to check gold on the real B4O-ORGEval")
def test_conformance_the_reference_programs_build_equivalent_models_on_the_real_b4o_orgeval(tmp_path):
    config = EvalConfig(benchmarks=["b4o-orgeval"], benchmark_dir=os.environ[CONFORMANCE_ENV], backend="gold",
                        allow_code_execution=True, timeout=120, workers=2)  # fmt: skip
    score = run_eval(config, tmp_path / "gold", show_progress=False)["scores"]["b4o-orgeval"]
    assert score["items"] == 394 and score["rules"]["orgeval"]["pass@1"] >= 0.95
