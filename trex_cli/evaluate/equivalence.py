"""B4O-ORGEval grading: is the linear model a program built structurally equivalent to the reference LP?

This is the method of the T-Rex paper's checker (SLAI-T-Rex `or_benchmark_eval/evaluate/
equivalence_check.py`, `check_lp_equivalence_fast`), reimplemented step by step so scores compare
with the paper's:

1. Read both LP files (with gurobipy's reader, as the checker does: Gurobi writes variable names
   with brackets, which HiGHS's LP reader rejects).
2. Normalize each model: a row with one variable becomes a bound on it (bound = rhs / coefficient;
   the bound replaces the declared one); a `<= 0` row becomes `>= 0` with its coefficients negated;
   a `== 0` row whose coefficients sum below zero is negated.
3. Compare the numbers of variables and of rows.
4. Colour the variable-constraint bipartite graph by Weisfeiler-Lehman refinement: a variable starts
   as (objective coefficient, type, lower, upper), a row as (rhs, sense), an edge as its coefficient,
   each printed as float32 with 6 decimals; refine until the number of colour classes stops growing.
   The models must end with the same set of colours.
5. WL cannot tell some non-isomorphic graphs apart, so each model must also meet the checker's
   sufficient condition: every colour class is a single node (WL-determinable), or, in the graph
   of the nodes in larger classes, no connected piece holds two nodes of the same class
   (symmetric decomposable).

Quirks of the checker kept on purpose (a trex score must mean what the paper's does), all of which
apply the same way to the reference and the candidate: the objective sense is not
compared; a one-variable row keeps its sense when its coefficient is negative (`-2 x <= 4` becomes
the upper bound -2); colour sets are compared, not class sizes. One difference: an integer variable
bounded to [0, 1] counts as binary (Gurobi's reader keeps the two declarations apart; they define the
same set, and Pyomo's and gurobipy's writers spell it differently).

The model comes from the sandbox (`capture_model`): a gurobipy model is written by Gurobi's own LP
writer, as the reference LPs were; a Pyomo model by Pyomo's, which splits a ranged row into two rows
and writes an objective constant as a variable fixed at 1 (as Gurobi does), but leaves out variables
that no row or objective uses (Gurobi keeps them): such a Pyomo model has fewer variables than the
same model built with gurobipy.

On the real B4O-ORGEval set (394 items) the benchmark's own reference programs, run in trex's
sandbox, build models graded equivalent for 384 (97.46%); T-Rex's checker gives the same verdict on
each of the 394 pairs.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

# Row senses as Gurobi names them; the checker's feature values for them.
SENSE_FEATURE = {"=": 0.0, "<": -1.0, ">": 1.0}
ZERO_RHS = 1e-9  # |rhs| below this counts as a zero right-hand side
ZERO_COEFFICIENT = 1e-12


@dataclass
class LinearModel:
    """A linear (mixed-integer) model as rows of (variable index, coefficient) pairs."""

    objective: list[float]
    var_type: list[str]  # "C" continuous, "B" binary, "I" integer (others count as continuous)
    lower: list[float]
    upper: list[float]
    rows: list[list[tuple[int, float]]] = field(default_factory=list)
    senses: list[str] = field(default_factory=list)  # "<", ">", "="
    rhs: list[float] = field(default_factory=list)

    @property
    def num_vars(self) -> int:
        return len(self.objective)

    @property
    def num_rows(self) -> int:
        return len(self.rows)


@dataclass
class EquivalenceResult:
    equivalent: bool
    reason: str  # which check decided, in words
    checks: dict = field(default_factory=dict)


def read_lp(path: str | Path) -> LinearModel:
    """The model in an LP file. ValueError (naming the file) when it cannot be read."""
    try:
        import gurobipy as gp
    except ImportError:
        raise ValueError(
            "B4O-ORGEval grading reads LP files with gurobipy (as T-Rex's checker does): "
            "pip install 'trex[eval]' (gurobipy's PyPI licence is size-limited and works offline)"
        ) from None
    env = gp.Env(empty=True)
    env.setParam("OutputFlag", 0)
    env.start()
    try:
        try:
            model = gp.read(str(path), env)
        except gp.GurobiError as error:
            raise ValueError(f"{path}: not a readable LP file ({error})") from None
        variables = model.getVars()
        constraints = model.getConstrs()
        matrix = model.getA().tocsr() if constraints else None
        rows, senses, rhs = [], [], []
        for index, constraint in enumerate(constraints):
            start, end = matrix.indptr[index], matrix.indptr[index + 1]
            rows.append([(int(j), float(v)) for j, v in zip(matrix.indices[start:end], matrix.data[start:end], strict=True)])
            senses.append(constraint.Sense)
            rhs.append(float(constraint.RHS))
        var_types = []
        for variable in variables:
            kind = variable.VType
            if kind == "I" and variable.LB == 0.0 and variable.UB == 1.0:
                kind = "B"
            var_types.append(kind if kind in ("B", "I") else "C")
        result = LinearModel(
            objective=[float(v.Obj) for v in variables],
            var_type=var_types,
            lower=[float(v.LB) for v in variables],
            upper=[float(v.UB) for v in variables],
            rows=rows,
            senses=senses,
            rhs=rhs,
        )
        if any(sense not in SENSE_FEATURE for sense in senses):
            raise ValueError(f"{path}: a row with a sense other than <=, >=, = (the checker handles only these)")
        model.dispose()
        return result
    finally:
        env.dispose()


def normalize(model: LinearModel) -> LinearModel:
    """The checker's three rewrites (see the module docstring), on a copy."""
    lower, upper = list(model.lower), list(model.upper)
    new_lower: dict[int, float] = {}
    new_upper: dict[int, float] = {}
    kept: list[tuple[list[tuple[int, float]], str, float]] = []
    for row, sense, rhs in zip(model.rows, model.senses, model.rhs, strict=True):
        if len(row) == 1 and abs(row[0][1]) >= ZERO_COEFFICIENT:
            variable, coefficient = row[0]
            bound = rhs / coefficient  # the row's sense is kept even for a negative coefficient, as the checker does
            if sense in (">", "="):
                new_lower[variable] = max(new_lower.get(variable, -math.inf), bound)
            if sense in ("<", "="):
                new_upper[variable] = min(new_upper.get(variable, math.inf), bound)
            continue
        kept.append((row, sense, rhs))
    for variable, bound in new_lower.items():
        lower[variable] = bound
    for variable, bound in new_upper.items():
        upper[variable] = bound
    # The checker removes the rewritten rows and appends their replacements: order does not matter
    # to the colouring, so they are rewritten in place here.
    rows, senses, rhs_values = [], [], []
    for row, sense, rhs in kept:
        if sense == "<" and abs(rhs) < ZERO_RHS:
            row, sense, rhs = [(j, -v) for j, v in row], ">", 0.0
        elif sense == "=" and abs(rhs) < ZERO_RHS and sum(v for _, v in row) < 0 and abs(sum(v for _, v in row)) >= ZERO_COEFFICIENT:
            row, rhs = [(j, -v) for j, v in row], 0.0
        rows.append(row)
        senses.append(sense)
        rhs_values.append(rhs)
    return LinearModel(list(model.objective), list(model.var_type), lower, upper, rows, senses, rhs_values)


def _feature(values: list[float]) -> str:
    # float32, 6 decimals: the checker's resolution (coefficients equal to ~7 digits are equal)
    import numpy as np

    return ",".join(f"{np.float32(value):.6f}" for value in values)


def _graph(model: LinearModel) -> tuple[list[str], list[list[tuple[int, str]]]]:
    """Initial node colours (variables, then rows) and each node's (neighbour, edge colour) list."""
    type_feature = {"B": 1.0, "I": 2.0, "C": 0.0}
    colours = [
        _feature([model.objective[j], type_feature[model.var_type[j]], model.lower[j], model.upper[j]])
        for j in range(model.num_vars)
    ]
    neighbours: list[list[tuple[int, str]]] = [[] for _ in range(model.num_vars + model.num_rows)]
    for i, (row, sense, rhs) in enumerate(zip(model.rows, model.senses, model.rhs, strict=True)):
        node = model.num_vars + i
        colours.append(_feature([rhs, SENSE_FEATURE[sense]]))
        for variable, coefficient in row:
            edge = _feature([coefficient])
            neighbours[variable].append((node, edge))
            neighbours[node].append((variable, edge))
    return colours, neighbours


def wl_partition(colours: list[str], neighbours: list[list[tuple[int, str]]]) -> dict[str, list[int]]:
    """Weisfeiler-Lehman refinement until the number of classes stops growing: {colour: nodes}."""
    previous_size = 0
    partition: dict[str, list[int]] = {}
    for _ in range(len(colours)):
        partition = {}
        refined = []
        for node, colour in enumerate(colours):
            pairs = sorted(f"{colours[other]}|{edge}" for other, edge in neighbours[node])
            new_colour = hashlib.md5(f"{colour}|{'|'.join(pairs)}".encode()).hexdigest()
            refined.append(new_colour)
            partition.setdefault(new_colour, []).append(node)
        if len(partition) == previous_size:
            return partition
        colours, previous_size = refined, len(partition)
    return partition


def sufficient_condition(partition: dict[str, list[int]], neighbours: list[list[tuple[int, str]]]) -> tuple[bool, str]:
    """The checker's test that WL colours decide equivalence for this graph."""
    group_of = {node: colour for colour, nodes in partition.items() if len(nodes) > 1 for node in nodes}
    if not group_of:
        return True, "WL-determinable"
    seen: set[int] = set()
    for seed in group_of:
        if seed in seen:
            continue
        groups_here: set[str] = set()
        stack = [seed]
        seen.add(seed)
        while stack:
            node = stack.pop()
            if group_of[node] in groups_here:
                return False, "not symmetric decomposable (two nodes of one colour class are connected)"
            groups_here.add(group_of[node])
            for other, _ in neighbours[node]:
                if other in group_of and other not in seen:
                    seen.add(other)
                    stack.append(other)
    return True, "symmetric decomposable"


def check_equivalence(reference: str | Path, candidate: str | Path) -> EquivalenceResult:
    """Is the LP file `candidate` equivalent to `reference` under the T-Rex checker's test?"""
    first = normalize(read_lp(reference))
    try:
        second = normalize(read_lp(candidate))
    except ValueError as error:
        return EquivalenceResult(False, f"the program's model could not be read: {error}")
    checks: dict = {}
    checks["var_num_check"] = first.num_vars == second.num_vars
    if not checks["var_num_check"]:
        return EquivalenceResult(False, f"{second.num_vars} variables, the reference has {first.num_vars}", checks)
    checks["cons_num_check"] = first.num_rows == second.num_rows
    if not checks["cons_num_check"]:
        return EquivalenceResult(False, f"{second.num_rows} constraints, the reference has {first.num_rows}", checks)
    colours1, neighbours1 = _graph(first)
    colours2, neighbours2 = _graph(second)
    partition1, partition2 = wl_partition(colours1, neighbours1), wl_partition(colours2, neighbours2)
    checks["wl_check"] = partition1.keys() == partition2.keys()
    if not checks["wl_check"]:
        return EquivalenceResult(False, "the Weisfeiler-Lehman colours differ (coefficients, bounds, types or structure)", checks)
    ok1, why1 = sufficient_condition(partition1, neighbours1)
    ok2, why2 = sufficient_condition(partition2, neighbours2)
    checks["sufficient_check"] = ok1 and ok2
    checks["sufficient_msg"] = {"reference": why1, "candidate": why2}
    if not checks["sufficient_check"]:
        return EquivalenceResult(False, f"same colours, but WL cannot decide: reference {why1}, candidate {why2}", checks)
    return EquivalenceResult(True, f"equivalent ({why1})", checks)
