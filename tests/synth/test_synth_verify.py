"""The five verifications catch what they are for: planted mistakes fail the right check."""

from __future__ import annotations

import random

import pytest

from data_synth.families import get_family
from data_synth.render import program_data, render_program
from data_synth.verify import check_solution, solve_pyomo, verify_instance
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


def test_a_correct_instance_passes_all_five_checks(sandbox):
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
