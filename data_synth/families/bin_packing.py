"""Bin packing (MILP): pack items of given sizes into as few identical bins (trucks, servers, pallets)
as possible, without exceeding any bin's capacity.

Structure variants (drawn per instance, recorded by the keys present): a limit on the number of items in
one bin (`max_per_bin`) and pairs of items that may not share a bin (`conflicts`), each present or absent,
so the program has four skeletons."""

from __future__ import annotations

import math
import random
from itertools import pairwise

from data_synth.family import (
    MatrixModel,
    ProblemFamily,
    Row,
    Scenario,
    describe_data_file,
    fmt,
    markdown_table,
    plural,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("freight", "freight logistics", {
        "company": "a regional freight forwarder", "item": "crate", "item_prefix": "C", "bin": "truck",
        "bin_prefix": "Truck ", "unit": "kg", "measure": "weight", "capacity_range": (900, 1400),
        "task": "ship a batch of crates to one customer site",
    }),
    Scenario("cloud", "cloud computing", {
        "company": "a cloud hosting provider", "item": "virtual machine", "item_prefix": "VM", "bin": "server",
        "bin_prefix": "Server ", "unit": "GB of RAM", "measure": "memory requirement",
        "capacity_range": (96, 160), "task": "place a set of customer virtual machines on physical servers",
    }),
    Scenario("warehouse", "warehousing", {
        "company": "a distribution warehouse", "item": "carton", "item_prefix": "K", "bin": "pallet",
        "bin_prefix": "Pallet ", "unit": "litres", "measure": "volume", "capacity_range": (1200, 2000),
        "task": "consolidate outbound cartons onto shipping pallets",
    }),
)

# the eval split's own industries and names (see ProblemFamily.eval_scenarios)
EVAL_SCENARIOS = (
    Scenario("cold_chain", "pharmaceutical cold-chain distribution", {
        "company": "a vaccine distributor", "item": "insulated shipper", "item_prefix": "IS",
        "bin": "refrigerated van", "bin_prefix": "Van ", "unit": "kg", "measure": "packed weight",
        "capacity_range": (600, 1100), "task": "send the day's insulated shippers out to regional clinics",
    }),
    Scenario("archive", "broadcast media archiving", {
        "company": "a television archive", "item": "video file", "item_prefix": "F", "bin": "tape cartridge",
        "bin_prefix": "Tape ", "unit": "GB", "measure": "file size", "capacity_range": (120, 200),
        "task": "copy a season of video files onto archive tape cartridges",
    }),
)


def first_fit_decreasing(sizes: list[int], capacity: int, max_per_bin: int | None = None,
                         conflicts: list[tuple[int, int]] = ()) -> int:
    """Number of bins the first-fit-decreasing heuristic uses: a feasible upper bound on the optimum.
    `max_per_bin` limits the items in a bin; `conflicts` are pairs of item positions that may not share one."""
    apart = {(a, b) for a, b in conflicts} | {(b, a) for a, b in conflicts}
    bins: list[list[int]] = []
    for item in sorted(range(len(sizes)), key=lambda k: -sizes[k]):
        for held in bins:
            if (sum(sizes[k] for k in held) + sizes[item] <= capacity
                    and (max_per_bin is None or len(held) < max_per_bin)
                    and not any((item, k) in apart for k in held)):
                held.append(item)
                break
        else:
            bins.append([item])
    return len(bins)


class BinPacking(ProblemFamily):
    name = "bin_packing"
    title = "Bin packing"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"assign": "binary", "use": "binary"}
    data_fields = {
        "items": "list of item names",
        "size": "size of each item, keyed by item (in the unit of the capacity)",
        "bins": "list of the available (identical) bins, in the order they are taken into use",
        "capacity": "capacity of every bin",
        "max_per_bin": "most items one bin may hold (only when there is such a limit)",
        "conflicts": "pairs of items that may not go into the same bin (only when there are such pairs)",
    }
    # eval-only rewordings of the fixed sentences (training keeps its text)
    phrasings = (
        Phrasing(r"\bmay hold more than\b", ("may hold more than",), ("can take more than", "is loaded with over")),
        Phrasing(r"\bThese pairs of\b", ("These pairs of",), ("The following pairs of",)),
        Phrasing(r"\bmust travel in different\b", ("must travel in different",),
                 ("are to be kept in separate", "have to ride in separate")),
        Phrasing(r"\bmust go to exactly one\b", ("must go to exactly one",),
                 ("is assigned to precisely one", "has to be put in a single")),
        Phrasing(r"\bWhat is the minimum number of\b", ("What is the minimum number of",),
                 ("What would be the smallest count of", "Which is the lowest possible count of")),
        Phrasing(r"\bneeded to hold all\b", ("needed to hold all",), ("that suffice for all",)),
        Phrasing(r"\(minimize the number of\b", ("(minimize the number of",), ("(keep low the count of",)),
        Phrasing(r"\bof each\b(?= [\w -]+ is:)", ("of each",), ("for every",)),
        Phrasing(r"\blist of item names\b", ("list of item names",), ("names of all items",)),
        Phrasing(r"\bsize of each item\b", ("size of each item",), ("space every item takes up",)),
        Phrasing(r"\(in the unit of the capacity\)", ("(in the unit of the capacity)",),
                 ("(measured like the capacity)",)),
        Phrasing(r"\blist of the available \(identical\) bins, in the order they are taken into use\b",
                 ("list of the available (identical) bins, in the order they are taken into use",),
                 ("identical bins on hand, in the sequence in which they are opened",)),
        Phrasing(r"\bcapacity of every bin\b", ("capacity of every bin",), ("room available in one bin",)),
        Phrasing(r"\bmost items one bin may hold\b", ("most items one bin may hold",),
                 ("largest count of items allowed in one bin",)),
        Phrasing(r"\bpairs of items that may not go into the same bin\b",
                 ("pairs of items that may not go into the same bin",),
                 ("item pairs that have to be placed in different bins",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(included only if",)),
    )
    # the pieces of `model_code_for`: the head and tail always, each optional group when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.I = pyo.Set(initialize=data["items"])
model.B = pyo.Set(initialize=data["bins"])
model.assign = pyo.Var(model.I, model.B, domain=pyo.Binary)  # item i goes into bin b
model.use = pyo.Var(model.B, domain=pyo.Binary)              # bin b is used

model.obj = pyo.Objective(expr=sum(model.use[b] for b in model.B), sense=pyo.minimize)

# every item is packed exactly once
model.pack_once = pyo.Constraint(
    model.I, rule=lambda model, i: sum(model.assign[i, b] for b in model.B) == 1
)

# a bin holds items only if it is used, and never more than its capacity
def capacity(model, b):
    return sum(data["size"][i] * model.assign[i, b] for i in model.I) <= data["capacity"] * model.use[b]

model.capacity = pyo.Constraint(model.B, rule=capacity)

'''
    _MAX_PER_BIN = '''\
model.max_per_bin = pyo.Constraint(
    model.B, rule=lambda model, b: sum(model.assign[i, b] for i in model.I) <= data["max_per_bin"]
)

'''
    _CONFLICTS = '''\
# two conflicting items never share a bin
model.P = pyo.RangeSet(0, len(data["conflicts"]) - 1)
model.conflicts = pyo.Constraint(
    model.P, model.B,
    rule=lambda model, p, b: model.assign[data["conflicts"][p][0], b] + model.assign[data["conflicts"][p][1], b]
    <= model.use[b],
)

'''
    _TAIL = '''\
# the bins are identical, so any packing can be relabelled: number the bins by the first item they
# hold. Then bins are taken into use in order, and the k-th item sits in one of the first k bins.
# Both rules only remove mirror images of the same packing, and they make the search much faster.
items, bins = data["items"], data["bins"]
model.use_in_order = pyo.Constraint(
    range(1, len(bins)), rule=lambda model, k: model.use[bins[k]] <= model.use[bins[k - 1]]
)

def item_order(model, k):
    later_bins = bins[k + 1:]
    if not later_bins:
        return pyo.Constraint.Skip
    return sum(model.assign[items[k], b] for b in later_bins) == 0

model.item_order = pyo.Constraint(range(len(items)), rule=item_order)
'''

    model_code = _HEAD + _TAIL  # the plain model, without the optional groups

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD
        if "max_per_bin" in data:
            code += self._MAX_PER_BIN
        if "conflicts" in data:
            code += self._CONFLICTS
        return code + self._TAIL

    def variant_of(self, data: dict) -> str:
        return "+".join(name for name in ("max_per_bin", "conflicts") if name in data) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_items = size_for(difficulty, 6, 9, 12)
        capacity = rng.randrange(*words["capacity_range"], 10 if words["capacity_range"][0] > 500 else 2)
        items = [f"{words['item_prefix']}{k + 1}" for k in range(n_items)]
        sizes = [rng.randint(int(capacity * 0.15), int(capacity * 0.6)) for _ in items]
        max_per_bin = rng.choice((2, 3)) if rng.random() < 0.5 else None
        conflicts = []
        if rng.random() < 0.5:
            pairs = set()
            while len(pairs) < max(1, n_items // 4):
                a, b = sorted(rng.sample(range(n_items), 2))
                pairs.add((a, b))
            conflicts = sorted(pairs)
        # enough bins for a packing that honours every optional rule, so the instance stays feasible
        n_bins = first_fit_decreasing(sizes, capacity, max_per_bin, conflicts)
        bins = [f"{words['bin_prefix']}{k + 1}" for k in range(n_bins)]
        data = {"items": items, "size": dict(zip(items, sizes, strict=True)), "bins": bins, "capacity": capacity}
        if max_per_bin is not None:
            data["max_per_bin"] = max_per_bin
        if conflicts:
            data["conflicts"] = [[items[a], items[b]] for a, b in conflicts]
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # fewer bins than the total size needs even with perfect packing
        lower_bound = math.ceil(sum(data["size"].values()) / data["capacity"])
        if lower_bound < 2:
            return None
        return {**data, "bins": data["bins"][: lower_bound - 1]}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        items, bins = data["items"], data["bins"]
        # symmetry breaking as bounds: the k-th item may only use the first k + 1 bins
        put = {(i, b): matrix.add_var(f"assign[{i},{b}]", 0, 1 if position_b <= position_i else 0, integer=True)
               for position_i, i in enumerate(items) for position_b, b in enumerate(bins)}
        opened = {b: matrix.add_var(f"use[{b}]", 0, 1, cost=1.0, integer=True) for b in bins}
        for i in items:
            matrix.add_row({put[i, b]: 1.0 for b in bins}, lower=1.0, upper=1.0, name=f"pack_once[{i}]")
        for b in bins:
            coefficients = {put[i, b]: data["size"][i] for i in items}
            coefficients[opened[b]] = -data["capacity"]
            matrix.add_row(coefficients, upper=0.0, name=f"capacity[{b}]")
            if "max_per_bin" in data:
                matrix.add_row({put[i, b]: 1.0 for i in items}, upper=data["max_per_bin"], name=f"max_per_bin[{b}]")
            for first, second in data.get("conflicts", ()):
                matrix.add_row({put[first, b]: 1.0, put[second, b]: 1.0, opened[b]: -1.0}, upper=0.0,
                               name=f"conflict[{first},{second},{b}]")
        for earlier, later in pairwise(bins):
            matrix.add_row({opened[later]: 1.0, opened[earlier]: -1.0}, upper=0.0, name=f"use_in_order[{later}]")

    def constraint_rows(self, data: dict, x: dict):
        assign, use = x["assign"], x["use"]
        items, bins = data["items"], data["bins"]
        for i in items:
            yield Row(f"pack_once[{i}]", sum(assign[i, b] for b in bins), "==", 1)
        for b in bins:
            load = sum(data["size"][i] * assign[i, b] for i in items)
            yield Row(f"capacity[{b}]", load, "<=", data["capacity"] * use[b])
            if "max_per_bin" in data:
                yield Row(f"max_per_bin[{b}]", sum(assign[i, b] for i in items), "<=", data["max_per_bin"])
            for first, second in data.get("conflicts", ()):
                yield Row(f"conflict[{first},{second},{b}]", assign[first, b] + assign[second, b], "<=", use[b])
        for k in range(1, len(bins)):
            yield Row(f"use_in_order[{bins[k]}]", use[bins[k]] - use[bins[k - 1]], "<=", 0)
        for k, i in enumerate(items):
            if bins[k + 1:]:
                yield Row(f"item_order[{i}]", sum(assign[i, b] for b in bins[k + 1:]), "==", 0)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(x["use"][b] for b in data["bins"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        item, bin_, unit = words["item"], words["bin"], words["unit"]
        n_bins, capacity = len(data["bins"]), fmt(data["capacity"])
        intro = {
            "freight": f"{words['company'].capitalize()} must {words['task']}. It has {n_bins} identical "
                       f"{plural(bin_)} available, each able to carry at most {capacity} {unit}.",
            "cloud": f"{words['company'].capitalize()} needs to {words['task']}. Up to {n_bins} identical "
                     f"{plural(bin_)} can be switched on, each with {capacity} {unit}; a {item} cannot be split "
                     f"across {plural(bin_)}.",
            "warehouse": f"The shipping team of {words['company']} wants to {words['task']}. {n_bins} "
                         f"{plural(bin_)} are available and each holds at most {capacity} {unit} of cartons.",
            "cold_chain": f"{words['company'].capitalize()} has to {words['task']}. {n_bins} identical {plural(bin_)} "
                          f"can be loaded, and none of them takes more than {capacity} {unit}.",
            "archive": f"{words['company'].capitalize()} plans to {words['task']}. There are {n_bins} blank "
                       f"{plural(bin_)} of the same kind, every one of which stores {capacity} {unit}; a {item} has to "
                       f"sit on a single {bin_}.",
        }[scenario.key]
        rules = ""
        if "max_per_bin" in data:
            rules += f" No {bin_} may hold more than {fmt(data['max_per_bin'])} {plural(item)}."
        if "conflicts" in data:
            pairs = "; ".join(f"{a} and {b}" for a, b in data["conflicts"])
            rules += f" These pairs of {plural(item)} must travel in different {plural(bin_)}: {pairs}."
        intro += rules
        question = (f"Each {item} must go to exactly one {bin_}. What is the minimum number of {plural(bin_)} "
                    f"needed to hold all {plural(item)} (minimize the number of {plural(bin_)} used)?")
        if representation == "text":
            sizes = "; ".join(f"{i}: {fmt(data['size'][i])} {unit}" for i in data["items"])
            return f"{intro} The {words['measure']} of each {item} is: {sizes}. {question}"
        if representation == "table":
            table = markdown_table([item, f"{words['measure']} ({unit})"],
                                   [[i, data["size"][i]] for i in data["items"]])
            return f"{intro}\n\n{table}\n\n{question}"
        if representation == "file":
            return f"{intro}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        words = scenario.words
        lines = []
        for b in data["bins"]:
            packed = [i for i in data["items"] if x["assign"][i, b] > 0.5]
            if packed:
                load = sum(data["size"][i] for i in packed)
                lines.append(f"- {b}: {', '.join(packed)} ({fmt(load)} of {fmt(data['capacity'])} {words['unit']})")
        return f"{len(lines)} {words['bin']}s are used:\n" + "\n".join(lines)

    def formulation(self, data: dict) -> str:
        sets = "items $I = \\{1, \\dots, n\\}$ (in list order), bins $B = \\{1, \\dots, m\\}$"
        parameters = "size $s_i$ of item $i$, bin capacity $C$"
        optional = ""
        if "max_per_bin" in data:
            parameters += ", most items per bin $K$"
            optional += "& \\sum_{i \\in I} x_{ib} \\le K && \\forall b \\in B \\\\\n"
        if "conflicts" in data:
            sets += ", conflicting pairs $P \\subseteq I \\times I$"
            optional += "& x_{ib} + x_{jb} \\le y_b && \\forall (i, j) \\in P,\\ b \\in B \\\\\n"
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            "**Variables**: $x_{ib} \\in \\{0,1\\}$ (item $i$ goes into bin $b$), "
            "$y_b \\in \\{0,1\\}$ (bin $b$ is used).\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{b \\in B} y_b \\\\\n"
            "\\text{s.t.}\\ & \\sum_{b \\in B} x_{ib} = 1 && \\forall i \\in I \\\\\n"
            "& \\sum_{i \\in I} s_i x_{ib} \\le C\\, y_b && \\forall b \\in B \\\\\n"
            + optional +
            "& y_b \\le y_{b-1} && b = 2, \\dots, m \\quad\\text{(symmetry breaking)} \\\\\n"
            "& x_{ib} = 0 && b > i \\quad\\text{(symmetry breaking)} \\\\\n"
            "& x_{ib}, y_b \\in \\{0,1\\}\n\\end{aligned}\n$$"
        )


FAMILY = BinPacking()
