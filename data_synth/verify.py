"""The independent checks a synthesized problem must pass before it is kept.

1. `pyomo_optimal`: the family's Pyomo model (its `model_code` executed with `pyo` and `data`) solves to
   optimality with HiGHS, or, for a deliberately infeasible instance, is infeasible; infeasibility
   is confirmed by the matrix build with a zero objective (so "infeasible or unbounded" cannot pass for
   "infeasible").
2. `matrix_agrees`: the family's direct highspy build (`build_highspy`, no Pyomo) gives the same status
   and objective (relative 1e-7).
3. `program_agrees`: the rendered program, run by `trex_sandbox` in a fresh folder with its data.json,
   prints the same objective (or `Status: infeasible`) on its last line, and the solve its own solver
   reported (recorded by the sandbox's hooks; the one whose objective it printed) agrees: the recorded
   objective is the source of truth, the printed line must match it too.
4. `solution_feasible`: the Pyomo solution satisfies every constraint of the raw instance (scaled residual
   <= 1e-6), every variable domain (binary, integer, sign), and `objective_value` gives the objective;
   plain Python arithmetic in the family, no solver model.
5. `quality`: the objective is not trivial (non-zero) and at least one constraint binds. The duplicate
   statement check needs every record, so the pipeline adds it.

`verify_instance` runs them in order and stops at the first failure, whose name is the reject reason.
"""

from __future__ import annotations

import copy
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from data_synth.family import MatrixModel, MatrixResult, ProblemFamily
from data_synth.render import parse_last_line, solver_name

OBJECTIVE_RTOL = 1e-7
RECOMPUTE_RTOL = 1e-6  # check 4 recomputes from rounded solver values: a little looser
RESIDUAL_TOL = 1e-6
INTEGRALITY_TOL = 1e-6


@dataclass
class Check:
    name: str
    passed: bool
    detail: str = ""

    def as_dict(self) -> dict:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


@dataclass
class PyomoOutcome:
    status: str  # "optimal", "infeasible", or the termination condition's name
    objective: float | None = None
    x: dict[str, dict[Any, float | None]] = field(default_factory=dict)
    error: str = ""


@dataclass
class Verification:
    """Everything verification learned about one instance."""

    checks: list[Check] = field(default_factory=list)
    status: str = ""  # "optimal" or "infeasible" when kept
    objective: float | None = None
    x: dict[str, dict[Any, float | None]] = field(default_factory=dict)
    matrix: MatrixResult | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    @property
    def reject_reason(self) -> str | None:
        for check in self.checks:
            if not check.passed:
                return check.name
        return None

    @property
    def reject_detail(self) -> str:
        for check in self.checks:
            if not check.passed:
                return check.detail
        return ""


def close(a: float, b: float, rtol: float) -> bool:
    return abs(a - b) <= rtol * max(1.0, abs(a), abs(b))


# ------------------------------------------------------------------------------------ the solver paths

def solve_pyomo(family: ProblemFamily, data: dict, time_limit: float = 30.0,
                seconds: dict | None = None) -> PyomoOutcome:
    """Check 1's solve: exec the family's model_code, solve with HiGHS through Pyomo, read the solution.
    `seconds` (optional) receives the build and solve times."""
    import pyomo.environ as pyo

    namespace = {"pyo": pyo, "data": copy.deepcopy(data)}
    started = time.perf_counter()
    try:
        exec(compile(family.model_code_for(data), f"<{family.name}.model_code>", "exec"), namespace)
        model = namespace["model"]
        built = time.perf_counter()
        solver = pyo.SolverFactory(solver_name(family, data))
        solver.options["mip_rel_gap"] = 1e-9
        solver.options["time_limit"] = float(time_limit)
        # one HiGHS thread per worker process: the pipeline parallelizes over problems, and HiGHS sizes
        # its process-wide scheduler at the first solve (the matrix path then shares it)
        solver.options["threads"] = 1
        results = solver.solve(model, load_solutions=False)
        if seconds is not None:
            seconds["pyomo_build"] = built - started
            seconds["pyomo_solve"] = time.perf_counter() - built
    except Exception as error:  # a broken family must be a counted reject, not a crash
        return PyomoOutcome(status="error", error=f"{type(error).__name__}: {error}")
    condition = results.solver.termination_condition
    if condition == pyo.TerminationCondition.optimal:
        model.solutions.load_from(results)
        x = {variable.local_name: {index: variable[index].value for index in variable}
             for variable in model.component_objects(pyo.Var, active=True)}
        return PyomoOutcome(status="optimal", objective=float(pyo.value(model.obj)), x=x)
    if condition in (pyo.TerminationCondition.infeasible, pyo.TerminationCondition.infeasibleOrUnbounded):
        return PyomoOutcome(status="infeasible")
    return PyomoOutcome(status=str(condition))


def solve_matrix(family: ProblemFamily, data: dict, time_limit: float = 30.0,
                 seconds: dict | None = None) -> MatrixResult:
    """Check 2's solve: the family's direct highspy build. `seconds` receives build and solve times."""
    started = time.perf_counter()
    matrix = MatrixModel(family.sense)
    family.build_highspy(copy.deepcopy(data), matrix)
    built = time.perf_counter()
    result = matrix.solve(time_limit=time_limit)
    if seconds is not None:
        seconds["matrix_build"] = built - started
        seconds["matrix_solve"] = time.perf_counter() - built
    if result.status == "infeasible_or_unbounded":
        # with a zero objective nothing is unbounded: what is left is feasibility alone
        matrix.col_cost = [0.0] * len(matrix.col_cost)
        matrix.hessian = {}
        if matrix.solve(time_limit=time_limit).status == "infeasible":
            return MatrixResult(status="infeasible")
    return result


# ------------------------------------------------------------------------------------- check 4 and 5

def check_solution(family: ProblemFamily, data: dict, x: dict, objective: float) -> Check:
    """Check 4: constraints, domains and objective of the raw instance, on the solution `x`."""
    missing = [f"{name}[{index}]" for name, values in x.items() for index, value in values.items()
               if value is None]
    if missing:
        return Check("solution_feasible", False, f"variables without a value: {', '.join(missing[:5])}")
    domains = family.domains_for(data)
    for name, values in x.items():
        domain = domains.get(name)
        if domain is None:
            return Check("solution_feasible", False, f"variable {name!r} has no entry in {family.name}.domains")
        for index, value in values.items():
            problem = _domain_violation(domain, value)
            if problem:
                return Check("solution_feasible", False, f"{name}[{index}] = {value!r}: {problem}")
    worst_name, worst = "", 0.0
    count = 0
    for row in family.constraint_rows(data, x):
        count += 1
        residual = row.scaled_residual()
        if not math.isfinite(residual):  # NaN compares false with everything: catch it here
            return Check("solution_feasible", False, f"constraint {row.name} evaluates to {row.lhs!r}")
        if residual > worst:
            worst_name, worst = row.name, residual
    if worst > RESIDUAL_TOL:
        return Check("solution_feasible", False, f"constraint {worst_name} violated: scaled residual {worst:.3g}")
    recomputed = family.objective_value(data, x)
    if not close(recomputed, objective, RECOMPUTE_RTOL):
        return Check("solution_feasible", False,
                     f"objective recomputed from the instance is {recomputed!r}, the solver reported {objective!r}")
    return Check("solution_feasible", True,
                 f"{count} constraints, max scaled residual {worst:.1e}; domains hold; objective recomputed")


def _domain_violation(domain: str, value: float) -> str:
    tolerance = INTEGRALITY_TOL * max(1.0, abs(value))
    if domain in ("nonnegative", "nonnegative_integer", "binary") and value < -tolerance:
        return "negative"
    if domain in ("binary", "nonnegative_integer", "integer") and abs(value - round(value)) > tolerance:
        return "not integral"
    if domain == "binary" and round(value) not in (0, 1):
        return "not 0 or 1"
    if domain not in ("nonnegative", "binary", "nonnegative_integer", "integer", "free"):
        return f"unknown domain {domain!r}"
    return ""


def check_quality(family: ProblemFamily, data: dict, x: dict, objective: float) -> Check:
    """Check 5 (all but duplicates): a non-zero objective and at least one binding constraint."""
    if abs(objective) <= 1e-9:
        return Check("quality", False, "trivial objective (zero)")
    binding = sum(1 for row in family.constraint_rows(data, x) if row.is_binding())
    if binding == 0:
        return Check("quality", False, "no constraint is binding")
    return Check("quality", True, f"objective non-zero; {binding} binding constraints")


# ------------------------------------------------------------------------------------------- check 3

def check_program(sandbox, program: str, program_data: dict | None, expected: str, objective: float | None,
                  timeout: float, seconds: dict) -> Check:
    """Check 3: run the rendered program; its recorded solve and its last line must both agree with
    check 1 (`expected` status, `objective` when optimal)."""
    started = time.perf_counter()
    inline = {"data.json": json.dumps(program_data)} if program_data is not None else None
    run = sandbox.run(program, inline_files=inline, timeout=timeout)
    seconds["program"] = time.perf_counter() - started
    if run.timed_out:
        return Check("program_agrees", False, f"the program ran past {timeout} s")
    if not run.exit_ok:
        tail = run.stderr.strip().splitlines()[-1:] or [run.error or ""]
        ended = f"signal {run.signal}" if run.signal is not None else f"exit status {run.exit_code}"
        return Check("program_agrees", False, f"the program ended with {ended}: {tail[0]}")
    choice = run.chosen_solve()
    solve = choice.solve
    if solve is None:
        return Check("program_agrees", False, "the sandbox recorded no solve by the program")
    recorded = solve.get("status")
    infeasible = recorded in ("infeasible", "infeasible_or_unbounded")
    if (expected == "infeasible" and not infeasible) or (expected == "optimal" and recorded != "optimal"):
        return Check("program_agrees", False, f"the program's solver reported {recorded}; expected {expected}")
    recorded_objective = solve.get("objective")
    if expected == "optimal" and (recorded_objective is None
                                  or not close(recorded_objective, objective, OBJECTIVE_RTOL)):
        return Check("program_agrees", False,
                     f"the program's solver reported objective {recorded_objective!r} ({choice.reason}); "
                     f"check 1 found {objective!r}")
    status, value = parse_last_line(run.stdout)
    if status != expected or (status == "optimal" and not close(value, recorded_objective, OBJECTIVE_RTOL)):
        return Check("program_agrees", False,
                     f"the program's last line is {run.last_line!r}; expected "
                     f"{'Status: infeasible' if expected == 'infeasible' else repr(recorded_objective)}")
    return Check("program_agrees", True,
                 f"the program's solver reported {recorded} ({choice.reason}); it printed {run.last_line!r}")


# --------------------------------------------------------------------------------------- all together

def verify_instance(family: ProblemFamily, data: dict, program: str, program_data: dict | None,
                    sandbox, expect_infeasible: bool = False, program_timeout: float = 20.0,
                    solver_time_limit: float = 30.0) -> Verification:
    """Run checks 1 to 5 (without duplicates) on one instance; stops at the first failure. `sandbox` is
    a started `trex_sandbox.Sandbox`."""
    result = Verification()
    checks = result.checks

    pyomo = solve_pyomo(family, data, solver_time_limit, result.seconds)
    expected = "infeasible" if expect_infeasible else "optimal"
    if pyomo.status == "error":
        checks.append(Check("pyomo_optimal", False, f"the Pyomo model failed: {pyomo.error}"))
        return result
    if pyomo.status != expected:
        checks.append(Check("pyomo_optimal", False, f"Pyomo/HiGHS status {pyomo.status}, expected {expected}"))
        return result
    result.status, result.objective, result.x = pyomo.status, pyomo.objective, pyomo.x

    try:
        matrix = solve_matrix(family, data, solver_time_limit, result.seconds)
    except Exception as error:
        checks.append(Check("pyomo_optimal", True, f"status {pyomo.status}"))
        checks.append(Check("matrix_agrees", False, f"the highspy build failed: {type(error).__name__}: {error}"))
        return result
    result.matrix = matrix
    if expect_infeasible:
        # Pyomo may say "infeasible or unbounded"; the zero-objective matrix solve proves infeasibility
        checks.append(Check("pyomo_optimal", matrix.status == "infeasible",
                            "deliberately infeasible; Pyomo/HiGHS reports infeasible" if matrix.status == "infeasible"
                            else f"Pyomo reports infeasible but the matrix build says {matrix.status}"))
        if not checks[-1].passed:
            return result
        checks.append(Check("matrix_agrees", True, "the highspy build is infeasible too"))
    else:
        checks.append(Check("pyomo_optimal", True, f"optimal, objective {pyomo.objective!r}"))
        if matrix.status != "optimal" or not close(matrix.objective, pyomo.objective, OBJECTIVE_RTOL):
            checks.append(Check("matrix_agrees", False,
                                f"highspy build: status {matrix.status}, objective {matrix.objective!r}; "
                                f"Pyomo: {pyomo.objective!r}"))
            return result
        checks.append(Check("matrix_agrees", True, f"highspy build objective {matrix.objective!r}"))

    checks.append(check_program(sandbox, program, program_data, expected, pyomo.objective, program_timeout,
                                result.seconds))
    if not checks[-1].passed:
        return result

    if expect_infeasible:
        checks.append(Check("solution_feasible", True, "no solution: the instance is infeasible by design"))
        checks.append(Check("quality", True, "deliberately infeasible instance"))
        return result
    started = time.perf_counter()
    try:
        checks.append(check_solution(family, data, pyomo.x, pyomo.objective))
        if checks[-1].passed:
            checks.append(check_quality(family, data, pyomo.x, pyomo.objective))
    except Exception as error:
        checks.append(Check("solution_feasible", False,
                            f"evaluating the instance's constraints failed: {type(error).__name__}: {error}"))
    result.seconds["checks"] = time.perf_counter() - started
    return result
