"""Check 2's CBC run without PuLP's model objects: the MPS file `cbc_mps` writes straight from the
matrix build is, byte for byte, the one PuLP 3 writes for the same problem built from PuLP objects (the
route check 2 took before), so CBC is given the same problem in the same layout; and its outcomes match."""

from __future__ import annotations

import math
import random

import pulp
import pytest
from pulp.mps_lp import writeMPS

from data_synth.families import all_families
from data_synth.family import MatrixModel
from data_synth.verify import (
    _cbc_binary,
    _feasibility_only,
    build_matrix,
    cbc_command,
    cbc_mps,
    solve_matrix_cbc,
)

INF = math.inf


def pulp_problem(matrix: MatrixModel) -> pulp.LpProblem:
    """The PuLP model check 2 used to build from the matrix (the reference for the direct writer)."""
    problem = pulp.LpProblem("check2", pulp.LpMinimize if matrix.sense == "min" else pulp.LpMaximize)
    columns = [
        problem.add_variable(f"c{j}", None if math.isinf(lower) else lower, None if math.isinf(upper) else upper,
                             cat=pulp.LpInteger if integer else pulp.LpContinuous)
        for j, (lower, upper, integer) in enumerate(zip(matrix.col_lower, matrix.col_upper, matrix.col_integer,
                                                        strict=True))
    ]
    problem += pulp.LpAffineExpression([(columns[j], cost) for j, cost in enumerate(matrix.col_cost) if cost])
    for r, (lower, upper, row) in enumerate(zip(matrix.row_lower, matrix.row_upper, matrix.row_coefficients,
                                               strict=True)):
        expression = pulp.LpAffineExpression([(columns[j], value) for j, value in row.items()])
        if lower == upper:
            problem += pulp.LpConstraint(expression, pulp.LpConstraintEQ, f"r{r}", lower)
            continue
        if not math.isinf(lower):
            problem += pulp.LpConstraint(expression, pulp.LpConstraintGE, f"r{r}l", lower)
        if not math.isinf(upper):
            problem += pulp.LpConstraint(expression, pulp.LpConstraintLE, f"r{r}u", upper)
    return problem


def pulp_mps(matrix: MatrixModel, tmp_path) -> str:
    path = tmp_path / "pulp.mps"
    writeMPS(pulp_problem(matrix), str(path), rename=1)
    return path.read_text()


def edge_cases() -> MatrixModel:
    """Every bound kind PuLP writes (binary, free, minus infinity, fixed, integer without an upper bound,
    a negative lower bound), a column in no row, one with only a zero coefficient, an empty row, a free
    row, a zero right-hand side, and more than ten columns (PuLP sorts names: c10 before c2)."""
    matrix = MatrixModel("max")
    a = matrix.add_var("a", 0, 1, 3.0, integer=True)
    b = matrix.add_var("b", -INF, 4, 0.0)
    c = matrix.add_var("c", 2, 2, 1.5)
    d = matrix.add_var("d", -INF, INF, -1.0)
    e = matrix.add_var("e", -3, 5, 0.0, integer=True)
    for i in range(8):
        matrix.add_var(f"z{i}", 0, INF, 0.5 if i % 3 else 0.0, integer=bool(i % 2))
    matrix.add_row({a: 1.0, b: 2.0, 6: 0.0}, -INF, 3.0)
    matrix.add_row({a: 1.0, b: -1.0}, 1.0, 1.0)
    matrix.add_row({b: 1.0, c: 1.0, d: 1.0, 12: 1.0}, -1.0, 10.0)
    matrix.add_row({}, 0.0, 5.0)
    matrix.add_row({d: 1.0, e: 2.0, 11: 1.0, 10: 1.0, 8: 1.0}, -INF, 0.0)
    matrix.add_row({e: 1.0}, -INF, INF)
    matrix.add_row({j: 1.0 for j in range(5, 13)}, -INF, 20.0)  # keeps the optimum finite
    return matrix


def test_the_direct_mps_is_pulps_for_the_edge_cases(tmp_path):
    matrix = edge_cases()
    assert cbc_mps(matrix)[0] == pulp_mps(matrix, tmp_path)
    plain = _feasibility_only(matrix)  # PuLP's dummy column for an empty objective
    assert cbc_mps(plain)[0] == pulp_mps(plain, tmp_path)


def family_matrices():
    for family in all_families().values():
        rng = random.Random(f"cbc-mps {family.name}")
        for difficulty in ("small", "medium"):
            data = family.sample(rng, difficulty, rng.choice(family.scenarios))
            matrix = build_matrix(family, data)
            if not matrix.hessian:
                yield f"{family.name}/{difficulty}", matrix


def test_the_direct_mps_is_pulps_for_every_family(tmp_path):
    cases = list(family_matrices())
    assert len(cases) > 50
    for name, matrix in cases:
        assert cbc_mps(matrix)[0] == pulp_mps(matrix, tmp_path), name


def pulp_outcome(matrix: MatrixModel, preprocess: bool) -> tuple[int, int, float | None]:
    problem = pulp_problem(matrix)
    problem.solve(pulp.COIN_CMD(path=_cbc_binary(), msg=False, gapRel=1e-9, gapAbs=1e-9, timeLimit=30,
                                cuts=None if preprocess else False,
                                options=[] if preprocess else ["preprocess off"]))
    return problem.status, problem.sol_status, pulp.value(problem.objective)


@pytest.mark.parametrize("preprocess", [True, False])
def test_the_direct_cbc_run_reads_what_pulp_reads(preprocess):
    feasible = edge_cases()
    infeasible = edge_cases()
    infeasible.add_row({0: 1.0}, 2.0, INF)  # a binary column at least 2
    unbounded = MatrixModel("max")
    unbounded.add_row({unbounded.add_var("x", 0, INF, 1.0): 1.0}, 0.0, INF)
    for matrix, expected in ((feasible, "optimal"), (infeasible, "infeasible"), (unbounded, "unbounded")):
        status, sol_status, value = pulp_outcome(matrix, preprocess)
        direct = solve_matrix_cbc(matrix, preprocess=preprocess)
        assert direct.status == expected
        if expected == "optimal":
            assert (status, sol_status) == (pulp.LpStatusOptimal, pulp.LpSolutionOptimal)
            assert direct.objective == value + matrix.objective_offset
        else:
            assert status == {"infeasible": pulp.LpStatusInfeasible, "unbounded": pulp.LpStatusUnbounded}[expected]


@pytest.mark.parametrize("preprocess", [True, False])
@pytest.mark.parametrize("sense", ["min", "max"])
def test_the_direct_cbc_command_is_pulps_without_threads(preprocess, sense, monkeypatch):
    """The command line is the one PuLP's COIN_CMD runs with no `threads`: `-threads 1` would put CBC in its
    threaded search, which sometimes stalls 10 s on a lost wake-up (see `cbc_command`)."""
    import subprocess

    matrix = edge_cases()
    matrix.sense = sense
    seen = []
    real_popen = subprocess.Popen

    def capture(args, *rest, **kwargs):
        seen.append(list(args))
        return real_popen(args, *rest, **kwargs)

    monkeypatch.setattr(pulp.apis.coin_api.subprocess, "Popen", capture)
    problem = pulp_problem(matrix)
    problem.solve(pulp.COIN_CMD(path=_cbc_binary(), msg=False, gapRel=1e-9, gapAbs=1e-9, timeLimit=30,
                                cuts=None if preprocess else False,
                                options=[] if preprocess else ["preprocess off"]))
    (pulps,) = seen
    mps, solution = pulps[1], pulps[pulps.index("-solution") + 1]
    ours = cbc_command(_cbc_binary(), mps, solution, sense, 30, preprocess)
    assert "-threads" not in ours
    assert sorted(ours) == sorted(pulps)  # the same options (PuLP orders its gap options differently)
