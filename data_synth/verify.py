"""The independent checks a synthesized problem must pass before it is kept.

1. `pyomo_optimal`: the family's Pyomo model (its `model_code` executed with `pyo` and `data`) solves to
   optimality with HiGHS, or, for a deliberately infeasible instance, is infeasible; infeasibility
   is confirmed by the matrix build with a zero objective (so "infeasible or unbounded" cannot pass for
   "infeasible").
2. `matrix_agrees`: the family's direct matrix build (`build_highspy`, no Pyomo) gives the same status
   and objective (relative 1e-7) with two solver families: HiGHS (highspy) and, for LP and MILP, COIN-OR
   CBC (the binary PuLP ships), so a HiGHS bug shared by checks 1 and 2 cannot pass. CBC has no QP: a
   QP instance is checked by HiGHS alone, and the check's detail says so.
3. `program_agrees`: the rendered program, run by `trex_sandbox` in a fresh folder with its data.json,
   prints the same objective (or `Status: infeasible`) on its last line, and the solve its own solver
   reported (recorded by the sandbox's hooks; the one whose objective it printed) agrees: the recorded
   objective is the source of truth, the printed line must match it too.
4. `solution_feasible`: the Pyomo solution satisfies every constraint of the raw instance (scaled residual
   <= 1e-6), every variable domain (binary, integer, sign), and `objective_value` gives the objective;
   plain Python arithmetic in the family, no solver model.
5. `quality`: the objective is not trivial (non-zero) and at least one constraint binds; for a model
   with integer variables, a row also counts as binding when its slack is smaller than the step of any
   integer variable in it (a 0-1 knapsack whose capacity is 3 kg from full, with no item under 4 kg, is
   tight). The duplicate statement check needs every record, so the pipeline adds it.
6. `statement_complete` (when the statement is given): the statement a learner reads states the model's
   data: in "text" and "table" statements every number of the instance appears verbatim (a fraction may
   be written as a percentage); a "file" statement names every key of data.json the model reads.

`verify_instance` runs them in order and stops at the first failure, whose name is the reject reason. Check
3's program starts in the sandbox (another process) before check 1 and runs while checks 1 and 2 solve in
this one, so each worker keeps two cores' worth of work going; its outcome is judged in order, after check 2.
"""

from __future__ import annotations

import copy
import json
import math
import re
import threading
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
    name = solver_name(family, data)
    try:
        exec(compile(family.model_code_for(data), f"<{family.name}.model_code>", "exec"), namespace)
        model = namespace["model"]
        built = time.perf_counter()
        if name == "appsi_highs":
            return _solve_appsi(model, time_limit, seconds, started, built)
        solver = pyo.SolverFactory(name)
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
        _appsi.solver = None  # a solve that failed halfway leaves nothing behind for the next one
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


_appsi = threading.local()  # this thread's appsi HiGHS interface (`_solve_appsi`)


def _solve_appsi(model, time_limit: float, seconds: dict | None, started: float, built: float) -> PyomoOutcome:
    """Check 1's solve of a linear model: Pyomo's appsi HiGHS interface, called directly rather than through
    `SolverFactory("appsi_highs")`'s legacy wrapper (which builds a legacy results object and a symbol map
    for every variable, only for the caller to load the same values back). The interface object is kept
    per thread: a solve of another model rebuilds the whole HiGHS instance from that model (`set_instance`),
    so nothing of one solve reaches the next. HiGHS's log is switched off (`output_flag`), not captured and
    discarded; the options that decide the solve are those of the other path."""
    import pyomo.environ as pyo
    from pyomo.contrib.appsi.base import TerminationCondition, legacy_termination_condition_map
    from pyomo.contrib.appsi.solvers import Highs

    solver = getattr(_appsi, "solver", None)
    if solver is None:
        solver = _appsi.solver = Highs()
        solver.config.load_solution = False
    # one HiGHS thread per worker process, as on the SolverFactory path
    solver.highs_options = {"output_flag": False, "mip_rel_gap": 1e-9, "time_limit": float(time_limit), "threads": 1}
    results = solver.solve(model)
    if seconds is not None:
        seconds["pyomo_build"] = built - started
        seconds["pyomo_solve"] = time.perf_counter() - built
    condition = results.termination_condition
    if condition == TerminationCondition.optimal:
        results.solution_loader.load_vars()
        x = {variable.local_name: {index: variable[index].value for index in variable}
             for variable in model.component_objects(pyo.Var, active=True)}
        return PyomoOutcome(status="optimal", objective=float(pyo.value(model.obj)), x=x)
    if condition in (TerminationCondition.infeasible, TerminationCondition.infeasibleOrUnbounded):
        return PyomoOutcome(status="infeasible")
    return PyomoOutcome(status=str(legacy_termination_condition_map[condition]))


def build_matrix(family: ProblemFamily, data: dict) -> MatrixModel:
    """The family's direct matrix build of `data` (no Pyomo)."""
    matrix = MatrixModel(family.sense)
    family.build_highspy(copy.deepcopy(data), matrix)
    return matrix


def solve_matrix(family: ProblemFamily, data: dict, time_limit: float = 30.0,
                 seconds: dict | None = None, matrix: MatrixModel | None = None) -> MatrixResult:
    """Check 2's HiGHS solve of the family's direct build (`matrix`, built here when not given).
    `seconds` receives build and solve times."""
    started = time.perf_counter()
    if matrix is None:
        matrix = build_matrix(family, data)
    built = time.perf_counter()
    result = matrix.solve(time_limit=time_limit)
    if seconds is not None:
        seconds["matrix_build"] = built - started
        seconds["matrix_solve"] = time.perf_counter() - built
    if result.status == "infeasible_or_unbounded" and _feasibility_only(matrix).solve(time_limit).status == "infeasible":
        return MatrixResult(status="infeasible")
    return result


def _feasibility_only(matrix: MatrixModel) -> MatrixModel:
    """The same rows and columns with a zero objective: nothing is unbounded, what is left is feasibility."""
    plain = copy.copy(matrix)
    plain.col_cost = [0.0] * len(matrix.col_cost)
    plain.hessian = {}
    return plain


def _cbc_binary() -> str | None:
    """The CBC binary PuLP 3 ships in its wheel (None: let PuLP find `cbc` on PATH, e.g. from cbcbox)."""
    import os
    import stat

    from pulp.apis import coin_api

    path = getattr(coin_api, "pulp_cbc_path", None)
    if not path or not os.path.isfile(path):
        return None
    if not os.access(path, os.X_OK):
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def cbc_mps(matrix: MatrixModel) -> tuple[str, list[tuple[int | None, float]], list[int | None]]:
    """`matrix` as an MPS file for CBC, written straight from the matrix build: the text PuLP 3's
    `writeMPS(rename=1)` writes for the same problem built from PuLP objects (the layout CBC was always
    given, so its search and answers stay as they were), without building those objects. Returns the
    text, the objective's terms (column, cost; column None is PuLP's dummy of an empty objective)
    and the matrix column of each MPS column X0000000, X0000001, ... in order."""
    def number(value: float) -> str:
        return f"{value: .12e}"

    rows: list[tuple[str, float, dict[int, float]]] = []  # (MPS sense, rhs, coefficients)
    for lower, upper, row in zip(matrix.row_lower, matrix.row_upper, matrix.row_coefficients, strict=True):
        if lower == upper:
            rows.append(("E", lower, row))
            continue
        if not math.isinf(lower):
            rows.append(("G", lower, row))
        if not math.isinf(upper):
            rows.append(("L", upper, row))
    objective: list[tuple[int | None, float]] = [(j, cost) for j, cost in enumerate(matrix.col_cost) if cost]
    used = {j for j, _ in objective}
    coefficients: dict[int, list[tuple[int, float]]] = {}
    for r, (_, _, row) in enumerate(rows):
        for j, value in row.items():
            used.add(j)
            coefficients.setdefault(j, []).append((r, value))
    columns: list[int | None] = sorted(used, key=lambda j: f"c{j}")  # PuLP sorts its variables by name
    if not objective:  # PuLP gives an empty objective a dummy column fixed at 0, named first
        objective = [(None, 1.0)]
        columns.insert(0, None)
    costs = dict(objective)
    lines = [f"*SENSE:{'Minimize' if matrix.sense == 'min' else 'Maximize'}\n", "NAME          MODEL\n", "ROWS\n",
             " N  OBJ\n"]
    lines += [f" {sense}  C{r:07d}\n" for r, (sense, _, _) in enumerate(rows)]
    lines.append("COLUMNS\n")
    bounds = []
    for position, j in enumerate(columns):
        name = f"X{position:07d}"
        integer = j is not None and matrix.col_integer[j]
        if integer:
            lines.append("    MARK      'MARKER'                 'INTORG'\n")
        lines += [f"    {name:<8}  C{r:07d}  {number(value)}\n" for r, value in coefficients.get(j, ())]
        if j in costs:
            lines.append(f"    {name:<8}  OBJ       {number(costs[j])}\n")
        if integer:
            lines.append("    MARK      'MARKER'                 'INTEND'\n")
        lower, upper = (0.0, 0.0) if j is None else (matrix.col_lower[j], matrix.col_upper[j])
        lower_bound = None if math.isinf(lower) else lower
        upper_bound = None if math.isinf(upper) else upper
        if lower_bound is not None and lower_bound == upper_bound:
            bounds.append(f" FX BND       {name:<8}  {number(lower_bound)}\n")
            continue
        if lower_bound == 0 and upper_bound == 1 and integer:
            bounds.append(f" BV BND       {name:<8}\n")
            continue
        if lower_bound is None:
            bounds.append(f" {'MI' if upper_bound is not None else 'FR'} BND       {name:<8}\n")
        elif lower_bound != 0 or (integer and upper_bound is None):
            bounds.append(f" LO BND       {name:<8}  {number(lower_bound)}\n")
        if upper_bound is not None:
            bounds.append(f" UP BND       {name:<8}  {number(upper_bound)}\n")
    lines.append("RHS\n")
    lines += [f"    RHS       C{r:07d}  {number(rhs if rhs != 0 else 0)}\n" for r, (_, rhs, _) in enumerate(rows)]
    lines.append("BOUNDS\n")
    lines += bounds
    lines.append("ENDATA\n")
    return "".join(lines), objective, columns


def solve_matrix_cbc(matrix: MatrixModel, time_limit: float = 30.0, preprocess: bool = True) -> MatrixResult:
    """The same matrix solved by COIN-OR CBC: a second solver family for check 2 (LP and MILP; CBC has no
    quadratic objective). Statuses as `MatrixModel.solve` names them. `preprocess=False` turns off CBC's
    MILP preprocessing and its cut generators (the re-solve of a disagreement). The MPS file, the command
    line and the reading of CBC's solution are those of PuLP's COIN_CMD (`cbc_mps`), with no PuLP model
    objects built: the same CBC run, a third of the Python time."""
    import os
    import subprocess
    import tempfile

    if matrix.hessian:
        raise ValueError("CBC does not solve quadratic objectives")
    text, objective, columns = cbc_mps(matrix)
    path = _cbc_binary() or _cbc_on_path()
    with tempfile.TemporaryDirectory(prefix="trex-cbc-") as folder:
        mps, solution = os.path.join(folder, "check2.mps"), os.path.join(folder, "check2.sol")
        with open(mps, "w") as handle:
            handle.write(text)
        command = cbc_command(path, mps, solution, matrix.sense, time_limit, preprocess)
        ended = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=False)
        if ended.returncode != 0 or not os.path.exists(solution):
            raise RuntimeError(f"CBC ({path}) ended with exit status {ended.returncode} and no solution file")
        with open(solution) as handle:
            lines = handle.read().splitlines()
    status, values = _read_cbc_solution(lines, len(columns))
    if status == "optimal":
        position = {j: p for p, j in enumerate(columns)}
        value = 0  # as PuLP's value of the objective: its constant, then each term in order
        for j, cost in objective:
            if j is not None:
                value += values[position[j]] * cost
        return MatrixResult(status="optimal", objective=float(value) + matrix.objective_offset)
    return MatrixResult(status=status)


def cbc_command(path: str, mps: str, solution: str, sense: str, time_limit: float, preprocess: bool) -> list[str]:
    """CBC's command line for check 2, as PuLP's COIN_CMD writes it with gapRel = gapAbs = 1e-9 and no
    `threads`. Not `-threads 1`: that is not "serial" but CBC's threaded branch and bound with one worker
    thread, whose hand-over sometimes loses a wake-up and then waits out a 10-second condition timeout
    with no CPU used (CBC 2.10 from PuLP's wheel: 2 of 300 runs of one small MILP took 10.0 s against
    7 ms, the main thread in `CbcBaseModel::waitForThreadsInTree`, the worker in `CbcThread::waitThread`).
    In `trex synth` that was 90% of check 2's time. Without the option CBC searches in its own thread."""
    command = [path, mps] + (["-max"] if sense == "max" else []) + ["-sec", str(max(1, int(time_limit)))]
    command += [] if preprocess else ["-cuts", "off", "-preprocess", "off"]
    return command + ["-ratio", "1e-09", "-allow", "1e-09", "-timeMode", "elapsed", "-solve",
                      "-printingOptions", "all", "-solution", solution]


def _cbc_on_path() -> str:
    import shutil

    path = shutil.which("cbc")
    if path is None:
        raise RuntimeError("no CBC binary: PuLP's wheel ships one (pip install pulp), or put `cbc` on PATH")
    return path


def _read_cbc_solution(lines: list[str], count: int) -> tuple[str, list[float]]:
    """CBC's solution file as PuLP's COIN_CMD reads it: the status from the first word of the first line
    (with "Stopped ... objective" a feasible solution), the value of column Xnnnnnnn from the lines after
    (0 when not listed). Status names as `MatrixModel.solve` uses them."""
    words = lines[0].split() if lines else [""]
    first = words[0] if words else ""
    values: list[float] = [0] * count
    for line in lines:
        if len(line) + 1 <= 2:  # PuLP stops at a line of at most two characters with its newline
            break
        parts = line.split()
        if parts[0] == "**":
            parts = parts[1:]
        name = parts[1]
        if len(name) == 8 and name[0] == "X" and name[1:].isdigit() and int(name[1:]) < count:
            values[int(name[1:])] = float(parts[2])
    if first == "Optimal" or (first == "Stopped" and len(words) >= 5 and words[4] == "objective"):
        return ("optimal" if first == "Optimal" else "cbc Optimal (solution: 2)"), values
    if first in ("Infeasible", "Integer"):
        return "infeasible", values
    if first == "Unbounded":
        return "unbounded", values
    return f"cbc {'Not Solved' if first == 'Stopped' else 'Undefined'} (solution: 0)", values


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


def check_quality(family: ProblemFamily, data: dict, x: dict, objective: float,
                  matrix: MatrixModel | None = None, col_values: dict[str, float] | None = None) -> Check:
    """Check 5 (all but duplicates): a non-zero objective and at least one binding constraint. With the
    matrix build and its solution, a row of a model with integer variables is binding too when its slack
    is below the smallest coefficient of an integer column in it (no integer move fits in the slack)."""
    if abs(objective) <= 1e-9:
        return Check("quality", False, "trivial objective (zero)")
    binding = sum(1 for row in family.constraint_rows(data, x) if row.is_binding())
    if binding:
        return Check("quality", True, f"objective non-zero; {binding} binding constraints")
    tight = integer_tight_rows(matrix, col_values) if matrix is not None and col_values else []
    if tight:
        return Check("quality", True, f"objective non-zero; {len(tight)} rows tight to integer steps "
                                      f"(e.g. {tight[0]})")
    return Check("quality", False, "no constraint is binding")


def integer_tight_rows(matrix: MatrixModel, col_values: dict[str, float]) -> list[str]:
    """Rows of `matrix` whose slack at `col_values` is smaller than every integer step that could use it:
    rows over integer columns only, slack below the smallest |coefficient| in the row."""
    values = [col_values.get(name, 0.0) for name in matrix.col_names]
    tight = []
    for name, lower, upper, row in zip(matrix.row_names, matrix.row_lower, matrix.row_upper,
                                       matrix.row_coefficients, strict=True):
        nonzero = {j: a for j, a in row.items() if abs(a) > 1e-12}
        if not nonzero or not all(matrix.col_integer[j] for j in nonzero):
            continue
        activity = sum(a * values[j] for j, a in nonzero.items())
        slack = min(upper - activity, activity - lower)
        if slack < min(abs(a) for a in nonzero.values()) - 1e-9:
            tight.append(name)
    return tight


# ------------------------------------------------------------------------------------------- check 6

_NUMBER_TOKEN = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?%?")
_DATA_KEY = re.compile(r"""data\[["'](\w+)["']\]""")


def instance_numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [value]
    if isinstance(value, dict):
        return [n for item in value.values() for n in instance_numbers(item)]
    if isinstance(value, list | tuple):
        return [n for item in value for n in instance_numbers(item)]
    return []


def statement_gaps(family: ProblemFamily, data: dict, statement: str, representation: str) -> list[str]:
    """What the statement leaves out of the model: numbers of the instance missing from a "text" or
    "table" statement; keys of data.json the model reads that a "file" statement does not name."""
    from data_synth.family import fmt

    if representation == "file":
        keys = sorted(key for key in set(_DATA_KEY.findall(family.model_code_for(data))) if key in data)
        return [f"data.json key `{key}`" for key in keys if f"`{key}`" not in statement]
    found = _NUMBER_TOKEN.findall(statement)
    tokens = set(found) | {token.rstrip("%") for token in found}
    missing = []
    for number in instance_numbers(data):
        forms = {fmt(number), fmt(abs(number))}
        if isinstance(number, float) and 0 < abs(number) < 1:
            forms.add(fmt(round(abs(number) * 100, 6)) + "%")
        if not forms & tokens and fmt(number) not in missing:
            missing.append(fmt(number))
    return [f"the number {number}" for number in missing]


def check_statement(family: ProblemFamily, data: dict, statement: str, representation: str) -> Check:
    """Check 6: the statement states every number (or, for a "file" statement, every data key) of the model."""
    gaps = statement_gaps(family, data, statement, representation)
    if gaps:
        more = f" (and {len(gaps) - 5} more)" if len(gaps) > 5 else ""
        return Check("statement_complete", False, f"the statement does not state {', '.join(gaps[:5])}{more}")
    what = "every data key the model reads" if representation == "file" else "every number of the instance"
    return Check("statement_complete", True, f"the {representation} statement states {what}")


# ------------------------------------------------------------------------------------------- check 3

class ProgramRun:
    """Check 3's program running in the sandbox, waited for on a thread of its own (the thread only waits:
    the program runs in the sandbox's process), so the caller can solve checks 1 and 2 meanwhile.
    `seconds["program"]` receives its wall time."""

    def __init__(self, sandbox, program: str, program_data: dict | None, timeout: float, seconds: dict) -> None:
        inline = {"data.json": json.dumps(program_data)} if program_data is not None else None
        self._outcome = None
        self._done = threading.Event()

        def run() -> None:
            started = time.perf_counter()
            try:
                self._outcome = sandbox.run(program, inline_files=inline, timeout=timeout)
            except BaseException as error:  # handed to the caller by `result`
                self._outcome = error
            finally:
                seconds["program"] = time.perf_counter() - started
                self._done.set()

        threading.Thread(target=run, name="trex-check-3", daemon=True).start()

    def result(self):
        """The program's `ExecutionResult` once it has ended (the sandbox's error, if it failed, raised here)."""
        self._done.wait()
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome

    def wait(self) -> None:
        """Let the program end without looking at it (a check before check 3 failed)."""
        self._done.wait()


def check_program(sandbox, program: str, program_data: dict | None, expected: str, objective: float | None,
                  timeout: float, seconds: dict, running: ProgramRun | None = None) -> Check:
    """Check 3: run the rendered program (or take `running`, the same program started earlier); its recorded
    solve and its last line must both agree with check 1 (`expected` status, `objective` when optimal)."""
    run = (running or ProgramRun(sandbox, program, program_data, timeout, seconds)).result()
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
                    solver_time_limit: float = 30.0, statement: str | None = None,
                    representation: str | None = None) -> Verification:
    """Run checks 1 to 5 (without duplicates), and 6 when `statement` (written in `representation`) is
    given, on one instance; stops at the first failure. `sandbox` is a started `trex_sandbox.Sandbox`."""
    result = Verification()
    if statement is not None:
        result.checks.append(check_statement(family, data, statement, representation or "text"))
        if not result.checks[-1].passed:
            return result
    running = ProgramRun(sandbox, program, program_data, program_timeout, result.seconds)
    verified = _verify_started(family, data, program, program_data, sandbox, expect_infeasible, program_timeout,
                               solver_time_limit, result, running)
    running.wait()  # a failure before check 3 still lets the program end: no run outlives its candidate
    return verified


def _verify_started(family: ProblemFamily, data: dict, program: str, program_data: dict | None, sandbox,
                    expect_infeasible: bool, program_timeout: float, solver_time_limit: float,
                    result: Verification, running: ProgramRun) -> Verification:
    """`verify_instance` from check 1 on, with check 3's program already `running`."""
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
        built = build_matrix(family, data)
        matrix = solve_matrix(family, data, solver_time_limit, result.seconds, matrix=built)
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
    else:
        checks.append(Check("pyomo_optimal", True, f"optimal, objective {pyomo.objective!r}"))
        if matrix.status != "optimal" or not close(matrix.objective, pyomo.objective, OBJECTIVE_RTOL):
            checks.append(Check("matrix_agrees", False,
                                f"highspy build: status {matrix.status}, objective {matrix.objective!r}; "
                                f"Pyomo: {pyomo.objective!r}"))
            return result
    checks.append(check_second_solver(built, expected, pyomo.objective, solver_time_limit, result.seconds))
    if not checks[-1].passed:
        return result

    checks.append(check_program(sandbox, program, program_data, expected, pyomo.objective, program_timeout,
                                result.seconds, running))
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
            checks.append(check_quality(family, data, pyomo.x, pyomo.objective, built, matrix.col_values))
    except Exception as error:
        checks.append(Check("solution_feasible", False,
                            f"evaluating the instance's constraints failed: {type(error).__name__}: {error}"))
    result.seconds["checks"] = time.perf_counter() - started
    return result


def check_second_solver(matrix: MatrixModel, expected: str, objective: float | None, time_limit: float,
                        seconds: dict) -> Check:
    """Check 2's CBC half: the matrix HiGHS agreed on, solved by CBC, must agree too (LP and MILP).
    CBC's MILP preprocessing can end a solve "optimal" at a worse objective than the true optimum (seen
    on fixed-charge models with a minimum load per used route), so a disagreement is solved again with
    preprocessing and cuts off; only a disagreement that survives the re-solve rejects."""
    if matrix.hessian:
        return Check("matrix_agrees", True, "highspy build agrees (a QP: CBC has no quadratic objective, "
                                            "so HiGHS is the only solver of this check)")
    started = time.perf_counter()
    cbc = _cbc_outcome(matrix, expected, time_limit, preprocess=True)
    resolved = ""
    if not _cbc_agrees(cbc, expected, objective):
        first = cbc
        cbc = _cbc_outcome(matrix, expected, time_limit, preprocess=False)
        resolved = (f" (CBC with preprocessing said status {first.status}, objective {first.objective!r}; "
                    f"re-solved with preprocessing and cuts off)")
    seconds["cbc_solve"] = time.perf_counter() - started
    if expected == "infeasible":
        return Check("matrix_agrees", cbc.status == "infeasible",
                     ("the highspy build is infeasible with HiGHS and with CBC" if cbc.status == "infeasible"
                      else f"the highspy build is infeasible with HiGHS but CBC says {cbc.status}") + resolved)
    if not _cbc_agrees(cbc, expected, objective):
        return Check("matrix_agrees", False, f"HiGHS agrees but CBC on the same build says status {cbc.status}, "
                                             f"objective {cbc.objective!r}; Pyomo: {objective!r}{resolved}")
    return Check("matrix_agrees", True, f"highspy build objective {objective!r} with HiGHS and with CBC{resolved}")


def _cbc_outcome(matrix: MatrixModel, expected: str, time_limit: float, preprocess: bool) -> MatrixResult:
    cbc = solve_matrix_cbc(matrix, time_limit, preprocess=preprocess)
    if expected == "infeasible" and cbc.status not in ("infeasible", "optimal"):
        # "unbounded" may hide infeasibility: the zero objective leaves only feasibility to decide
        cbc = solve_matrix_cbc(_feasibility_only(matrix), time_limit, preprocess=preprocess)
    return cbc


def _cbc_agrees(cbc: MatrixResult, expected: str, objective: float | None) -> bool:
    if expected == "infeasible":
        return cbc.status == "infeasible"
    return cbc.status == "optimal" and close(cbc.objective, objective, OBJECTIVE_RTOL)
