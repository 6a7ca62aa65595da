"""The six verifications catch what they are for: planted mistakes fail the right check."""

from __future__ import annotations

import random
import re

import pytest

from data_synth.families import get_family
from data_synth.family import VERIFY_HIGHS_OPTIONS, MatrixModel, fmt, verify_highs_options
from data_synth.render import program_data, render_program
from data_synth.verify import (
    build_matrix,
    check_second_solver,
    check_solution,
    instance_numbers,
    integer_tight_rows,
    solve_matrix_cbc,
    solve_pyomo,
    statement_gaps,
    verify_instance,
)
from trex_sandbox import Sandbox, SandboxSettings


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxSettings(timeout=20, memory_mb=2048, workers=1)) as running:
        yield running


def production_mix(seed: int = 3):
    family = get_family("production_mix")
    rng = random.Random(seed)
    scenario = rng.choice(family.scenarios)
    return family, family.sample(rng, "medium", scenario)


def test_a_correct_instance_passes_every_check(sandbox):
    family, data = production_mix()
    program = render_program(family, data, "file")
    result = verify_instance(family, data, program, program_data(data, "file"), sandbox)
    assert [c.name for c in result.checks] == ["pyomo_optimal", "matrix_agrees", "program_agrees",
                                               "solution_feasible", "quality"]
    assert result.passed and result.status == "optimal"


def test_planted_wrong_program_is_caught_by_check_3(sandbox):
    family, data = production_mix()
    program = render_program(family, data, "text")
    # the program's model drops half of every resource: it still runs and prints an optimum, a wrong one
    wrong = program.replace('<= data["capacity"][r]', '<= 0.5 * data["capacity"][r]')
    assert wrong != program
    result = verify_instance(family, data, wrong, None, sandbox)
    assert not result.passed
    assert result.reject_reason == "program_agrees"
    assert [c.passed for c in result.checks] == [True, True, False]


def test_program_that_crashes_is_caught_by_check_3(sandbox):
    family, data = production_mix()
    program = render_program(family, data, "file")
    result = verify_instance(family, data, program, None, sandbox)  # data.json is missing
    assert result.reject_reason == "program_agrees" and "FileNotFoundError" in result.reject_detail


def test_planted_infeasible_solution_is_caught_by_check_4():
    family, data = production_mix()
    data.pop("integer_units", None)  # the continuous variant: a scaled plan breaks a limit, not integrality
    outcome = solve_pyomo(family, data)
    assert check_solution(family, data, outcome.x, outcome.objective).passed
    # 10% more of every product: some resource limit is exceeded
    planted = {"make": {p: 1.1 * v for p, v in outcome.x["make"].items()}}
    check = check_solution(family, data, planted, family.objective_value(data, planted))
    assert not check.passed and "violated" in check.detail


def test_check_4_catches_broken_integrality_and_a_wrong_objective():
    family = get_family("knapsack_01")
    rng = random.Random(1)
    scenario = rng.choice(family.scenarios)
    data = family.sample(rng, "small", scenario)
    outcome = solve_pyomo(family, data)
    fractional = {"take": dict(outcome.x["take"])}
    item = next(i for i, v in fractional["take"].items() if v > 0.5)
    fractional["take"][item] = 0.5
    check = check_solution(family, data, fractional, family.objective_value(data, fractional))
    assert not check.passed and "not integral" in check.detail
    check = check_solution(family, data, outcome.x, outcome.objective + 1.0)
    assert not check.passed and "objective recomputed" in check.detail


def test_deliberately_infeasible_instance_is_labelled(sandbox):
    family, data = production_mix()
    infeasible = family.make_infeasible(data, random.Random(0))
    program = render_program(family, infeasible, "file")
    result = verify_instance(family, infeasible, program, infeasible, sandbox, expect_infeasible=True)
    assert result.passed and result.status == "infeasible"
    # the same instance, not expected to be infeasible, is rejected at check 1
    assert verify_instance(family, infeasible, program, infeasible, sandbox).reject_reason == "pyomo_optimal"


def test_check_3_trusts_the_objective_the_programs_solver_reported(sandbox):
    family, data = production_mix()
    program = render_program(family, data, "text")
    expected = solve_pyomo(family, data).objective
    # the wrong model again, but the program prints check 1's objective instead of its own: only the
    # objective recorded from the program's solve shows the mistake
    wrong = program.replace('<= data["capacity"][r]', '<= 0.5 * data["capacity"][r]').replace(
        "{float(pyo.value(model.obj))!r}", repr(expected))
    assert wrong.count(repr(expected)) == 1
    result = verify_instance(family, data, wrong, None, sandbox)
    assert result.reject_reason == "program_agrees"
    assert "solver reported objective" in result.reject_detail and "check 1 found" in result.reject_detail
    right = verify_instance(family, data, program, None, sandbox)
    assert right.passed and "solver reported optimal (only solve)" in right.checks[2].detail


# ---- check 2's second solver (CBC), the integer-aware quality check, check 6 (statement_complete)

def small_milp() -> MatrixModel:
    """max 5a + 4b + 3c  s.t. 2a + 3b + c <= 5, 4a + b + 2c <= 11, 3a + 4b + 2c <= 8, a, b, c integer
    in [0, 10]: the optimum is a = 2, b = 0, c = 1, objective 13 (by hand: a = 2 leaves 1 in the first row)."""
    matrix = MatrixModel("max")
    a, b, c = (matrix.add_var(name, 0, 10, cost=cost, integer=True) for name, cost in (("a", 5), ("b", 4), ("c", 3)))
    matrix.add_row({a: 2, b: 3, c: 1}, upper=5)
    matrix.add_row({a: 4, b: 1, c: 2}, upper=11)
    matrix.add_row({a: 3, b: 4, c: 2}, upper=8)
    return matrix


def test_cbc_solves_the_matrix_build_independently_of_highs():
    assert solve_matrix_cbc(small_milp()).status == "optimal"
    assert solve_matrix_cbc(small_milp()).objective == pytest.approx(13.0, abs=1e-9)
    assert small_milp().solve().objective == pytest.approx(13.0, abs=1e-9)
    infeasible = small_milp()
    infeasible.add_row({infeasible.col("a"): 1}, lower=3)  # 2a <= 5 leaves a <= 2
    assert solve_matrix_cbc(infeasible).status == "infeasible"


def test_check_2_fails_when_cbc_disagrees_with_the_objective_highs_found():
    matrix = small_milp()
    assert check_second_solver(matrix, "optimal", 13.0, 30.0, {}).passed
    wrong = check_second_solver(matrix, "optimal", 14.0, 30.0, {})
    assert not wrong.passed and "CBC" in wrong.detail
    assert not check_second_solver(matrix, "infeasible", None, 30.0, {}).passed


def fixed_charge_with_minimum_loads() -> MatrixModel:
    """Two plants, three wholesalers; shipping on a route costs per unit plus a fixed charge, and a used
    route must carry a minimum load (x <= M y and x >= L y). The optimum is 2940 (HiGHS, and CBC without
    preprocessing): Alpha ships 220 to wholesaler 2 (880 + 230), Beta ships 60 to wholesaler 1 (900 + 420)
    and 200 to wholesaler 3 (400 + 110). CBC 2.10's preprocessing ends "optimal" at 3251 on it."""
    supply = {"alpha": 250, "beta": 380}
    demand = {"w1": 60, "w2": 220, "w3": 200}
    unit = {"alpha": {"w1": 19, "w2": 4, "w3": 20}, "beta": {"w1": 15, "w2": 3, "w3": 2}}
    fixed = {"alpha": {"w1": 150, "w2": 230, "w3": 240}, "beta": {"w1": 420, "w2": 480, "w3": 110}}
    least = {"w1": 22, "w2": 81, "w3": 74}
    matrix = MatrixModel("min")
    ship = {(s, c): matrix.add_var(f"ship[{s},{c}]", cost=unit[s][c]) for s in supply for c in demand}
    use = {(s, c): matrix.add_var(f"use[{s},{c}]", 0, 1, cost=fixed[s][c], integer=True)
           for s in supply for c in demand}
    for s in supply:
        matrix.add_row({ship[s, c]: 1.0 for c in demand}, upper=supply[s])
    for c in demand:
        matrix.add_row({ship[s, c]: 1.0 for s in supply}, lower=demand[c], upper=demand[c])
    for s in supply:
        for c in demand:
            matrix.add_row({ship[s, c]: 1.0, use[s, c]: -min(supply[s], demand[c])}, upper=0.0)
            matrix.add_row({ship[s, c]: 1.0, use[s, c]: -least[c]}, lower=0.0)
    return matrix


def test_check_2_re_solves_a_cbc_disagreement_without_preprocessing():
    matrix = fixed_charge_with_minimum_loads()
    highs = matrix.solve()
    assert highs.status == "optimal" and highs.objective == pytest.approx(2940.0, abs=1e-6)
    assert solve_matrix_cbc(matrix, preprocess=False).objective == pytest.approx(2940.0, abs=1e-6)
    preprocessed = solve_matrix_cbc(matrix)
    check = check_second_solver(matrix, "optimal", highs.objective, 30.0, {})
    assert check.passed, check.detail
    if preprocessed.objective != pytest.approx(2940.0, abs=1e-6):  # the CBC PuLP ships: 3251
        assert "re-solved with preprocessing and cuts off" in check.detail
        assert f"{preprocessed.objective!r}" in check.detail
    # a disagreement that survives the re-solve still rejects, and says a re-solve happened
    wrong = check_second_solver(matrix, "optimal", 2900.0, 30.0, {})
    assert not wrong.passed and "re-solved" in wrong.detail


def test_a_correct_instance_records_both_solvers_and_the_statement_check(sandbox):
    family, data = production_mix()
    statement = family.render_statement(data, family.scenarios[0], "text")
    result = verify_instance(family, data, render_program(family, data, "text"), None, sandbox,
                             statement=statement, representation="text")
    assert result.passed, result.checks
    checks = {check.name: check.detail for check in result.checks}
    assert list(checks)[0] == "statement_complete"
    assert "with HiGHS and with CBC" in checks["matrix_agrees"]


def test_check_6_rejects_a_statement_that_leaves_out_a_number_or_a_data_key(sandbox):
    family, data = production_mix()
    statement = family.render_statement(data, family.scenarios[0], "text")
    assert statement_gaps(family, data, statement, "text") == []
    resource = data["resources"][0]
    capacity = fmt(data["capacity"][resource])
    dropped = re.sub(r"(?<![\d.])" + re.escape(capacity) + r"(?![\d.])", "plenty", statement)
    if any(fmt(n) == capacity for n in instance_numbers({k: v for k, v in data.items() if k != "capacity"})):
        pytest.skip("the capacity also appears elsewhere in the instance")
    assert statement_gaps(family, data, dropped, "text") == [f"the number {capacity}"]
    result = verify_instance(family, data, render_program(family, data, "text"), None, sandbox,
                             statement=dropped, representation="text")
    assert result.reject_reason == "statement_complete" and capacity in result.reject_detail
    file_statement = family.render_statement(data, family.scenarios[0], "file")
    assert statement_gaps(family, data, file_statement, "file") == []
    assert statement_gaps(family, data, file_statement.replace("`capacity`", "`limits`"), "file") == [
        "data.json key `capacity`"]


def test_quality_counts_a_row_tight_to_the_integer_steps_as_binding():
    # one integer item of weight 4 in a knapsack of capacity 7: taking it leaves 3, less than any step
    matrix = MatrixModel("max")
    item = matrix.add_var("take[a]", 0, 1, cost=2.0, integer=True)
    matrix.add_row({item: 4}, upper=7, name="capacity")
    assert integer_tight_rows(matrix, {"take[a]": 1.0}) == ["capacity"]
    assert integer_tight_rows(matrix, {"take[a]": 0.0}) == []  # slack 7 would fit the item
    matrix.col_integer[item] = False  # a continuous variable could use the slack
    assert integer_tight_rows(matrix, {"take[a]": 1.0}) == []


def _solve_through_solver_factory(family, data):
    """Check 1's solve through `SolverFactory("appsi_highs")`, the legacy wrapper `solve_pyomo` called before
    it used the appsi interface directly: (status, objective, solution)."""
    import copy

    import pyomo.environ as pyo

    namespace = {"pyo": pyo, "data": copy.deepcopy(data)}
    exec(family.model_code_for(data), namespace)
    model = namespace["model"]
    solver = pyo.SolverFactory("appsi_highs")
    solver.options.update({"mip_rel_gap": 1e-9, "time_limit": 30.0, "threads": 1})
    results = solver.solve(model, load_solutions=False)
    if results.solver.termination_condition != pyo.TerminationCondition.optimal:
        return str(results.solver.termination_condition), None, {}
    model.solutions.load_from(results)
    return "optimal", float(pyo.value(model.obj)), {
        variable.local_name: {index: variable[index].value for index in variable}
        for variable in model.component_objects(pyo.Var, active=True)}


@pytest.mark.parametrize("name", ["production_mix", "knapsack_01", "facility_location_capacitated",
                                  "transportation", "lot_sizing"])
def test_check_1_reads_what_the_solver_factory_path_reads(name):
    # one appsi interface serves every solve of the thread: each solve gives exactly the status, objective and
    # values a fresh SolverFactory solve of the same model gives, whatever was solved before it
    family = get_family(name)
    rng = random.Random(11)
    for difficulty in ("small", "medium"):
        data = family.sample(rng, difficulty, rng.choice(family.scenarios))
        outcome = solve_pyomo(family, data)
        assert (outcome.status, outcome.objective, outcome.x) == _solve_through_solver_factory(family, data)
        infeasible = family.make_infeasible(data, rng)
        if infeasible is not None:
            assert solve_pyomo(family, infeasible).status == "infeasible"
            assert solve_pyomo(family, data).objective == outcome.objective


def test_check_2_runs_highs_without_feasibility_jump_and_check_1_keeps_the_defaults(monkeypatch):
    # check 2's matrix solve turns the heuristic off (speed); check 1, whose solution the record keeps, sets
    # nothing beyond gap, time limit and threads, on both of its paths
    import highspy

    assert verify_highs_options() == VERIFY_HIGHS_OPTIONS == {"mip_heuristic_run_feasibility_jump": False}
    real = highspy.Highs.setOptionValue
    set_on = []

    def recording(self, option, value):
        set_on.append((option, value))
        return real(self, option, value)

    monkeypatch.setattr(highspy.Highs, "setOptionValue", recording)
    family = get_family("knapsack_01")  # a MILP: check 1 on the appsi path
    data = family.sample(random.Random(5), "small", family.scenarios[0])
    assert MatrixModel.solve(build_matrix(family, data), 30).status == "optimal"
    assert ("mip_heuristic_run_feasibility_jump", False) in set_on
    qp = get_family("portfolio_qp")  # a QP: check 1 through SolverFactory("highs")
    for check_1 in (lambda: solve_pyomo(family, data),
                    lambda: solve_pyomo(qp, qp.sample(random.Random(5), "small", qp.scenarios[0]))):
        set_on.clear()
        assert check_1().status == "optimal"
        assert set_on and "mip_heuristic_run_feasibility_jump" not in dict(set_on)


class _SandboxSpy:
    """The sandbox with its runs' starts and ends recorded."""

    def __init__(self, sandbox):
        import threading

        self.sandbox, self.events, self.started = sandbox, [], threading.Event()

    def run(self, *args, **kwargs):
        self.events.append("run started")
        self.started.set()
        outcome = self.sandbox.run(*args, **kwargs)
        self.events.append("run ended")
        return outcome


def test_check_3_program_runs_while_check_1_solves_and_ends_before_the_verdict(sandbox, monkeypatch):
    import data_synth.verify as verify

    family, data = production_mix()
    program = render_program(family, data, "file")
    spy = _SandboxSpy(sandbox)
    real_solve = verify.solve_pyomo

    def solve_once_the_program_runs(*args, **kwargs):
        # sequential checks would start the program only after this returns: the wait would time out
        assert spy.started.wait(30), "check 3's program did not start while check 1 was solving"
        spy.events.append("check 1 solved")
        return real_solve(*args, **kwargs)

    monkeypatch.setattr(verify, "solve_pyomo", solve_once_the_program_runs)
    result = verify_instance(family, data, program, program_data(data, "file"), spy)
    assert result.passed and spy.events[0] == "run started" and "run ended" in spy.events
    assert result.seconds["program"] > 0

    # a failure before check 3 still waits for the program: no run outlives its candidate
    spy.events.clear()
    spy.started.clear()
    monkeypatch.setattr(verify, "solve_pyomo", lambda *args, **kwargs: (
        spy.started.wait(30), verify.PyomoOutcome(status="error", error="planted"))[1])
    result = verify_instance(family, data, program, program_data(data, "file"), spy)
    assert result.reject_reason == "pyomo_optimal"
    assert spy.events == ["run started", "run ended"]
