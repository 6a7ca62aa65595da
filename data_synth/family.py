"""The contract of a problem family, and the small shared pieces every family uses.

A family describes one kind of OR problem (production mix, transportation, ...). It gives:

- `sample(rng, difficulty, scenario)`: a raw instance, a JSON-serializable dict with string keys
  (names of products, plants, ... taken from the scenario) and numbers with realistic units. The
  pipeline picks the scenario first and renders the statement with the same one. This dict is what a rendered program reads
  as `data.json`.
- `model_code`: Pyomo source (module-level statements) that reads `data` and builds `model`, with the
  objective named `model.obj`. It is the body of the self-contained program a user can run; the
  pipeline also executes it in-process for the first verification.
- `build_highspy(data, matrix)`: the same problem as a matrix, built directly for highspy through
  `MatrixModel`, sharing no code with `model_code` (the second, independent verification).
- `constraint_rows(data, x)` and `objective_value(data, x)`: every constraint and the objective of the
  raw instance, evaluated on a solution `x` with plain Python arithmetic (the fourth verification:
  no solver model involved). `x[var_name][index]` is the value Pyomo found for `model.<var_name>[index]`
  (index is the Pyomo index: a name, an int, a tuple, or None for a scalar variable).
- `domains`: for every variable of `model_code`, its domain: "nonnegative", "binary",
  "nonnegative_integer", "integer" or "free" (checked on the solution, again without a solver model).
- `render_statement(data, scenario, representation)`: the problem in words, for each of at least three
  `scenarios` (industries and wordings) and each representation: "text" (numbers in the prose),
  "table" (Markdown tables), "file" (the data is in an attached `data.json`; use `describe_data_file`).
- `formulation(data)`: the mathematical model in Markdown with LaTeX.
- optionally `eval_scenarios`: scenarios only the eval split draws (its own industries, companies, entity
  names and units, with the same `words` keys as `scenarios`), so no eval statement repeats a training
  statement's names; `scenarios` are then the training split's alone (`scenarios_for(split)`).
- optionally `phrasings`: `data_synth.statements.Phrasing` rewrite rules for the family's own fixed
  sentences, with disjoint training and eval wordings; the pipeline re-dresses every rendered statement
  with a statement skeleton (`data_synth.statements`), so `render_statement` states the facts once.
- optionally `make_infeasible(data, rng)`: a deliberately infeasible variant of an instance.
- structure variants: `sample` may draw, per instance, optional constraint groups, an objective variant,
  integrality or bounds, recorded in the instance itself (a key that is present or absent, or a
  `"objective"`-style choice). A family with variants overrides `model_code_for(data)` (the Pyomo source
  of exactly that instance's model), and where the variant changes them `domains_for(data)` and
  `problem_type_for(data)`; `build_highspy`, `constraint_rows`, `objective_value`, `render_statement` and
  `formulation` follow the same keys. `variant_of(data)` names the variant (records carry it);
  `python -m data_synth.stats --programs` counts the distinct program skeletons per family (the issue asks
  for >= 4).
- optionally `gurobipy_code`: the same model in gurobipy (module-level statements that read `data` and
  build `model = gp.Model(...)` with its objective set; `gp` and `GRB` are imported), the library
  T-Rex's prompts ask for. Its variables carry the Pyomo variables' names. A family with variants
  overrides `gurobipy_code_for(data)` as it does `model_code_for`. The family then also has the gurobipy
  program styles (`data_synth.render.program_styles`), and check 3 runs those programs with Gurobi.
- optionally `industrial = True` when `sample` also makes "industrial" instances, of at least 1,000
  variables (`size_for(..., industrial=N)`; `pick_names` extends a scenario's names past its list).
"""

from __future__ import annotations

import abc
import functools
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

DIFFICULTIES = ("small", "medium", "large")  # every family has these
INDUSTRIAL = "industrial"  # instances of >= 1,000 variables, for the families that scale (`industrial = True`)
ALL_DIFFICULTIES = (*DIFFICULTIES, INDUSTRIAL)
REPRESENTATIONS = ("text", "table", "file")
DOMAINS = ("nonnegative", "binary", "nonnegative_integer", "integer", "free")
INF = math.inf
# HiGHS options of the verification solves whose solution is not recorded (check 2's matrix solve, the
# reference program's run in the sandbox), beside the gap, time limit and threads. Feasibility jump is a
# primal heuristic with a fixed effort; on these models it took about a third of HiGHS's time and found
# nothing the search does not (400 instances: the same optimum, 4.2 s -> 3.0 s). Check 1, whose solution
# the record keeps, runs HiGHS's defaults: with the heuristic off HiGHS may stop at another optimal vertex
# or print 244.9999999999999 for 245.0, and the records of a seed would change with a speed setting.
# `verify_highs_options()` leaves out what an older HiGHS does not know.
VERIFY_HIGHS_OPTIONS = {"mip_heuristic_run_feasibility_jump": False}


@functools.cache
def verify_highs_options() -> dict:
    """`VERIFY_HIGHS_OPTIONS` less those the installed HiGHS does not have."""
    import highspy

    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)  # an unknown option is then refused without a log line
    return {option: value for option, value in VERIFY_HIGHS_OPTIONS.items()
            if highs.setOptionValue(option, value) == highspy.HighsStatus.kOk}


@dataclass(frozen=True)
class Scenario:
    """One dressing of a family: an industry, the names of its things, and the words it uses."""

    key: str
    industry: str
    words: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    """One constraint of the raw instance evaluated on a solution: lhs (sense) rhs."""

    name: str
    lhs: float
    sense: str  # "<=", ">=" or "=="
    rhs: float

    def violation(self) -> float:
        if self.sense == "<=":
            return max(0.0, self.lhs - self.rhs)
        if self.sense == ">=":
            return max(0.0, self.rhs - self.lhs)
        return abs(self.lhs - self.rhs)

    def scaled_residual(self) -> float:
        return self.violation() / max(1.0, abs(self.rhs))

    def is_binding(self, tolerance: float = 1e-6) -> bool:
        return abs(self.lhs - self.rhs) <= tolerance * max(1.0, abs(self.rhs))


class ProblemFamily(abc.ABC):
    """Base class of a problem family; see the module docstring for the contract."""

    name: str = ""
    title: str = ""
    problem_type: str = "LP"  # "LP", "MILP", "IP" (all variables integer) or "QP"
    sense: str = "min"  # "min" or "max"
    scenarios: tuple[Scenario, ...] = ()
    # the eval split's own scenarios (none: the eval split draws from `scenarios` too); see scenarios_for
    eval_scenarios: tuple[Scenario, ...] = ()
    domains: dict[str, str] = {}
    phrasings: tuple = ()  # data_synth.statements.Phrasing rules for this family's fixed sentences
    industrial: bool = False  # True: `sample` also makes "industrial" instances (>= 1,000 variables)
    model_code: str = ""
    gurobipy_code: str = ""  # the same model in gurobipy ("": the family has only Pyomo programs)
    # key -> meaning (with units), for the "file" representation and the CPT document
    data_fields: dict[str, str] = {}

    @abc.abstractmethod
    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        """See the module docstring."""

    @abc.abstractmethod
    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        """See the module docstring."""

    @abc.abstractmethod
    def constraint_rows(self, data: dict, x: dict) -> Iterable[Row]:
        """See the module docstring."""

    @abc.abstractmethod
    def objective_value(self, data: dict, x: dict) -> float:
        """See the module docstring."""

    @abc.abstractmethod
    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        """See the module docstring."""

    @abc.abstractmethod
    def formulation(self, data: dict) -> str:
        """See the module docstring."""

    def scenarios_for(self, split: str) -> tuple[Scenario, ...]:
        """The scenarios candidates of `split` draw from: the eval split has its own when the family
        declares `eval_scenarios`, so held-out statements name other industries and things."""
        return self.eval_scenarios if split == "eval" and self.eval_scenarios else self.scenarios

    @property
    def all_scenarios(self) -> tuple[Scenario, ...]:
        return self.scenarios + self.eval_scenarios

    def model_code_for(self, data: dict) -> str:
        """The Pyomo source of `data`'s model (override when the family has structure variants)."""
        return self.model_code

    def gurobipy_code_for(self, data: dict) -> str:
        """The gurobipy source of `data`'s model (override when the family has structure variants)."""
        return self.gurobipy_code

    def domains_for(self, data: dict) -> dict[str, str]:
        """The domain of every variable of `model_code_for(data)` (override when a variant changes one)."""
        return self.domains

    def problem_type_for(self, data: dict) -> str:
        """"LP", "MILP", "IP" or "QP" for this instance (override when a variant changes integrality)."""
        return self.problem_type

    def variant_of(self, data: dict) -> str:
        """A short name of the instance's structure variant (override with the choices `sample` made)."""
        return "base"

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        """A deliberately infeasible variant of `data`, or None when the family has none."""
        return None

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        """A short interpretation of an optimal solution for the CPT document (override to improve)."""
        lines = []
        for var_name, values in x.items():
            nonzero = {k: v for k, v in values.items() if v is not None and abs(v) > 1e-9}
            if not nonzero:
                continue
            shown = ", ".join(f"{_index_text(k)}: {fmt(v)}" for k, v in list(nonzero.items())[:12])
            more = f" (and {len(nonzero) - 12} more)" if len(nonzero) > 12 else ""
            lines.append(f"- `{var_name}`: {shown}{more}")
        return "\n".join(lines) or "- every decision variable is zero"


def _index_text(index: Any) -> str:
    if index is None:
        return "value"
    if isinstance(index, tuple):
        return ", ".join(str(i) for i in index)
    return str(index)


class MatrixModel:
    """A problem as a matrix for highspy: columns, rows, a linear objective and an optional PSD
    quadratic term (minimize c'x + 1/2 x'Qx). Independent of Pyomo by construction."""

    def __init__(self, sense: str = "min") -> None:
        if sense not in ("min", "max"):
            raise ValueError(f"sense must be 'min' or 'max', not {sense!r}")
        self.sense = sense
        self.col_names: list[str] = []
        self.col_lower: list[float] = []
        self.col_upper: list[float] = []
        self.col_cost: list[float] = []
        self.col_integer: list[bool] = []
        self.row_names: list[str] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []
        self.row_coefficients: list[dict[int, float]] = []
        self.hessian: dict[tuple[int, int], float] = {}
        self.objective_offset = 0.0
        self._col_index: dict[str, int] = {}

    def add_var(self, name: str, lower: float = 0.0, upper: float = INF, cost: float = 0.0,
                integer: bool = False) -> int:
        if name in self._col_index:
            raise ValueError(f"column {name!r} added twice")
        self._col_index[name] = len(self.col_names)
        self.col_names.append(name)
        self.col_lower.append(float(lower))
        self.col_upper.append(float(upper))
        self.col_cost.append(float(cost))
        self.col_integer.append(bool(integer))
        return len(self.col_names) - 1

    def col(self, name: str) -> int:
        return self._col_index[name]

    def add_row(self, coefficients: dict[int, float], lower: float = -INF, upper: float = INF,
                name: str = "") -> int:
        merged: dict[int, float] = {}
        for column, value in coefficients.items():
            merged[column] = merged.get(column, 0.0) + float(value)
        self.row_names.append(name or f"r{len(self.row_names)}")
        self.row_lower.append(float(lower))
        self.row_upper.append(float(upper))
        self.row_coefficients.append(merged)
        return len(self.row_names) - 1

    def add_quadratic(self, i: int, j: int, value: float) -> None:
        """Add `value` to Q[i, j] and Q[j, i] (so x'Qx/2 gains value * x_i * x_j for i != j,
        and value/2 * x_i^2 for i == j)."""
        key = (max(i, j), min(i, j))
        self.hessian[key] = self.hessian.get(key, 0.0) + float(value)

    def solve(self, time_limit: float = 60.0) -> MatrixResult:
        import highspy
        import numpy as np

        highs = highspy.Highs()
        highs.setOptionValue("output_flag", False)
        highs.setOptionValue("time_limit", float(time_limit))
        highs.setOptionValue("mip_rel_gap", 1e-9)
        for option, value in verify_highs_options().items():
            highs.setOptionValue(option, value)
        lp = highspy.HighsLp()
        lp.num_col_ = len(self.col_names)
        lp.num_row_ = len(self.row_names)
        sign = 1.0 if self.sense == "min" else -1.0
        lp.col_cost_ = np.array([sign * c for c in self.col_cost], dtype=float)
        lp.col_lower_ = np.array(self.col_lower, dtype=float)
        lp.col_upper_ = np.array([min(u, highspy.kHighsInf) for u in self.col_upper], dtype=float)
        lp.row_lower_ = np.array([max(v, -highspy.kHighsInf) for v in self.row_lower], dtype=float)
        lp.row_upper_ = np.array([min(v, highspy.kHighsInf) for v in self.row_upper], dtype=float)
        starts, indices, values = [0], [], []
        for row in self.row_coefficients:
            for column in sorted(row):
                indices.append(column)
                values.append(row[column])
            starts.append(len(indices))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
        lp.a_matrix_.index_ = np.array(indices, dtype=np.int32)
        lp.a_matrix_.value_ = np.array(values, dtype=float)
        if any(self.col_integer):
            lp.integrality_ = [highspy.HighsVarType.kInteger if flag else highspy.HighsVarType.kContinuous
                               for flag in self.col_integer]
        lp.sense_ = highspy.ObjSense.kMinimize
        passed = highs.passModel(lp)
        if passed == highspy.HighsStatus.kError:
            raise RuntimeError("highspy rejected the matrix model (passModel returned an error)")
        if self.hessian:
            if self.sense != "min":
                raise ValueError("quadratic objectives are supported for minimization only")
            hessian = highspy.HighsHessian()
            hessian.dim_ = lp.num_col_
            hessian.format_ = highspy.HessianFormat.kTriangular
            by_column: dict[int, list[tuple[int, float]]] = {}
            for (row, column), value in self.hessian.items():
                by_column.setdefault(column, []).append((row, value))
            h_start, h_index, h_value = [0], [], []
            for column in range(lp.num_col_):
                for row, value in sorted(by_column.get(column, [])):
                    h_index.append(row)
                    h_value.append(value)
                h_start.append(len(h_index))
            hessian.start_ = np.array(h_start, dtype=np.int32)
            hessian.index_ = np.array(h_index, dtype=np.int32)
            hessian.value_ = np.array(h_value, dtype=float)
            highs.passHessian(hessian)
        run_status = highs.run()
        if run_status == highspy.HighsStatus.kError:
            return MatrixResult(status="solver_error")
        status = highs.getModelStatus()
        info = highs.getInfo()
        if status == highspy.HighsModelStatus.kOptimal:
            solution = highs.getSolution()
            objective = sign * info.objective_function_value + self.objective_offset
            has_duals = not any(self.col_integer)
            return MatrixResult(
                status="optimal",
                objective=objective,
                col_values=dict(zip(self.col_names, solution.col_value, strict=True)),
                row_duals=dict(zip(self.row_names, [sign * d for d in solution.row_dual], strict=True))
                if has_duals else {},
                reduced_costs=dict(zip(self.col_names, [sign * d for d in solution.col_dual], strict=True))
                if has_duals else {},
                mip_gap=float(info.mip_gap) if any(self.col_integer) else 0.0,
            )
        if status in (highspy.HighsModelStatus.kInfeasible,):
            return MatrixResult(status="infeasible")
        if status == highspy.HighsModelStatus.kUnboundedOrInfeasible:
            return MatrixResult(status="infeasible_or_unbounded")
        if status == highspy.HighsModelStatus.kUnbounded:
            return MatrixResult(status="unbounded")
        return MatrixResult(status=str(status).split(".")[-1])


@dataclass
class MatrixResult:
    status: str
    objective: float | None = None
    col_values: dict[str, float] = field(default_factory=dict)
    row_duals: dict[str, float] = field(default_factory=dict)
    reduced_costs: dict[str, float] = field(default_factory=dict)
    mip_gap: float = 0.0


# ---------------------------------------------------------------- rendering helpers shared by families

def fmt(value: float) -> str:
    """A number as written in statements: integers without decimals or thousands separators, others
    exactly as stored in the instance (instances are sampled with few decimals), so that every
    number of the instance appears verbatim in the text."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return str(int(value))
    return repr(float(value))


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[fmt(c) if isinstance(c, int | float) else str(c) for c in row]
                                            for row in rows]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in cells[1:]]
    return "\n".join(lines)


def plural(unit: str) -> str:
    """The plural of a unit of measure as statements write it: "batch" -> "batches", "tonne" -> "tonnes";
    a unit already ending in "s" ("thousand litres", "Gbps") stays as it is."""
    if unit.endswith("s"):
        return unit
    if unit.endswith(("ch", "sh", "x", "z")):
        return unit + "es"
    if len(unit) > 1 and unit.endswith("y") and unit[-2] not in "aeiou":
        return unit[:-1] + "ies"
    return unit + "s"


def join_names(names: list[str]) -> str:
    names = [str(n) for n in names]
    if len(names) <= 2:
        return " and ".join(names)
    return ", ".join(names[:-1]) + ", and " + names[-1]


def describe_data_file(fields: dict[str, str]) -> str:
    """The paragraph a "file" statement uses to describe the attached data.json."""
    lines = ["All data are in the attached file `data.json`, a JSON object with these keys:"]
    lines += [f"- `{key}`: {meaning}" for key, meaning in fields.items()]
    return "\n".join(lines)


def size_for(difficulty: str, small: int, medium: int, large: int, industrial: int | None = None) -> int:
    if difficulty == INDUSTRIAL:
        if industrial is None:
            raise ValueError("this family has no industrial size; its difficulties are "
                             f"{', '.join(DIFFICULTIES)}")
        return industrial
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty {difficulty!r} is not one of {', '.join(ALL_DIFFICULTIES)}")
    return {"small": small, "medium": medium, "large": large}[difficulty]


def pick_names(rng: random.Random, names: list[str], count: int) -> list[str]:
    """`count` distinct names drawn from a scenario's list; past its length (industrial sizes) the names
    repeat with a number ("Leeds", "Leeds 2", ...)."""
    if count <= len(names):
        return rng.sample(names, count)
    extended = [name if round_ == 0 else f"{name} {round_ + 1}" for round_ in range(-(-count // len(names)))
                for name in names]
    return rng.sample(extended, count)
