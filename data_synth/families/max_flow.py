"""Maximum flow (LP): push as much as possible from a source to a sink through a network whose arcs
have capacities (pipelines, roads, data links). Flow conservation holds at every intermediate node.

Structure variants (drawn per instance, recorded by the keys present): throughput limits at some intermediate
nodes (`node_capacity`), a cost per unit of flow on every arc with a total operating budget (`unit_cost` with
`budget`), and contracted minimum flows on some arcs (`min_flow`), each present or absent, so the program has
eight skeletons. Every limit is drawn around a maximum flow found by augmenting paths, scaled down to 60%,
which meets all of them, so every variant stays feasible."""

from __future__ import annotations

import math
import random
from collections import deque

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
    Scenario("pipeline", "oil and gas", {
        "source": "the oil field", "sink": "the refinery", "node": "pumping station", "arc": "pipeline",
        "unit": "thousand barrels per day", "prefix": "Station ",
        "goal": "the largest daily throughput from the field to the refinery",
    }),
    Scenario("evacuation", "emergency planning", {
        "source": "the city centre", "sink": "the shelter zone", "node": "junction", "arc": "road",
        "unit": "vehicles per hour", "prefix": "Junction ",
        "goal": "the largest number of vehicles per hour that can be evacuated",
    }),
    Scenario("network", "telecommunications", {
        "source": "the data centre", "sink": "the regional hub", "node": "router", "arc": "fibre link",
        "unit": "gigabits per second", "prefix": "Router ",
        "goal": "the highest total bandwidth that can be routed from the data centre to the hub",
    }),
)
# the eval split's own industries, networks, node names and units (held out from training)
EVAL_SCENARIOS = (
    Scenario("water", "water supply", {
        "source": "the reservoir", "sink": "the treatment works", "node": "valve chamber", "arc": "water main",
        "unit": "megalitres a day", "prefix": "Chamber ",
        "goal": "the largest daily volume of water that can reach the treatment works from the reservoir",
    }),
    Scenario("rail", "rail freight", {
        "source": "the container port", "sink": "the inland terminal", "node": "rail yard", "arc": "track section",
        "unit": "trains a day", "prefix": "Yard ",
        "goal": "the largest number of container trains a day that can get from the port to the inland terminal",
    }),
    Scenario("power", "electricity transmission", {
        "source": "the wind farm", "sink": "the city substation", "node": "switching station",
        "arc": "transmission line", "unit": "megawatts", "prefix": "Switchyard ",
        "goal": "the most power that can be sent from the wind farm to the city substation",
    }),
)


class MaxFlow(ProblemFamily):
    name = "max_flow"
    title = "Maximum flow"
    problem_type = "LP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"flow": "nonnegative"}
    # the family's fixed sentences of the optional rules, in other words for each split (data_synth.statements)
    phrasings = (
        Phrasing(r"\bhave a throughput limit \(the most that can pass through them\):",
                 ("have a throughput limit (the most that can pass through them):",),
                 ("are limited in what they handle (the most that can pass through them):",)),
        Phrasing(r"Contracts require a minimum flow on some", ("Contracts require a minimum flow on some",
                                                               "Agreements fix a minimum flow on some"),
                 ("Commitments impose a minimum flow on some",)),
        Phrasing(r"\bThe operating budget\b", ("The operating budget",), ("The money available for operation",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bThe source is node\b", ("The source is node",), ("The flow starts at node",)),
        Phrasing(r"\band the sink is node\b", ("and the sink is node",), ("and ends at node",)),
        Phrasing(r"\bevery unit of flow on any\b", ("every unit of flow on any",),
                 ("each unit sent along any",)),
        Phrasing(r"\bcosts money \(", ("costs money (",), ("has a price (",)),
        Phrasing(r"\bcosts in dollars per unit:", ("costs in dollars per unit:",),
                 ("unit prices in USD:",)),
        Phrasing(r"\bthe costs per unit are in the data file\b", ("the costs per unit are in the data file",),
                 ("the unit prices come with the data file",)),
        Phrasing(r"\bthe costs per unit are in the table\b", ("the costs per unit are in the table",),
                 ("the unit prices are listed in the table",)),
        # "may not exceed" and "at least" have two training wordings: these rules stop before them
        Phrasing(r"\band the total cost of the flow (?=may not exceed the budget)",
                 ("and the total cost of the flow ",),
                 ("and the combined cost of all flow ",)),
        Phrasing(r"\bthe listed arcs must carry (?=at least their minimum)", ("the listed arcs must carry ",),
                 ("the arcs listed there shall carry ",)),
        Phrasing(r"\bFlow is conserved at every intermediate node and no\b",
                 ("Flow is conserved at every intermediate node and no",),
                 ("At each intermediate node inflow equals outflow, and no",)),
        Phrasing(r"\bmay carry more than its capacity\.", ("may carry more than its capacity.",),
                 ("is loaded beyond its capacity.",)),
        # the question names the scenario's goal ("the largest ..."), which the generic "what is the" wordings
        # garble; the rule takes "the" as they do, so the rules of the words after it see the same text
        Phrasing(r"\bWhat is the\b", ("What is the",), ("How much is the",)),
        Phrasing(r"\bcapacities in\b", ("capacities in",), ("capacities, measured in",)),
        Phrasing(r"(?<=[a-z]) are: (?=from\b)", (" are: ",), (", are: ",)),
        Phrasing(r"\bCapacities are in\b", ("Capacities are in",), ("All capacities are stated in",)),
        # table headers
        Phrasing(r"(?<=\| )from(?= \|)", ("from",), ("start",)),
        Phrasing(r"(?<=\| )to(?= \|)", ("to",), ("end",)),
        Phrasing(r"\bcost \(\$ per unit\)", ("cost ($ per unit)",), ("unit price ($)",)),
        # data.json fields
        Phrasing(r"\blist of node names \(including the source and the sink\)",
                 ("list of node names (including the source and the sink)",),
                 ("names of all nodes, source and sink included",)),
        Phrasing(r"\bname of the source node\b", ("name of the source node",), ("source node's name",)),
        Phrasing(r"\bname of the sink node\b", ("name of the sink node",), ("sink node's name",)),
        Phrasing(r"\blist of \[from, to, capacity\] triples: a directed arc and its capacity\b",
                 ("list of [from, to, capacity] triples: a directed arc and its capacity",),
                 ("directed arcs with their capacities, written as [from, to, capacity]",)),
        Phrasing(r"\bmost flow that can pass through each limited intermediate node\b",
                 ("most flow that can pass through each limited intermediate node",),
                 ("throughput cap of every limited intermediate node",)),
        Phrasing(r"\(only when some nodes have a throughput limit\)",
                 ("(only when some nodes have a throughput limit)",),
                 ("(present only if some nodes have a throughput cap)",)),
        Phrasing(r"\blist of \[from, to, cost\] triples: dollars per unit of flow on each arc\b",
                 ("list of [from, to, cost] triples: dollars per unit of flow on each arc",),
                 ("prices in dollars of one unit of flow on an arc, written as [from, to, cost]",)),
        Phrasing(r"\(only when there is an operating budget\)", ("(only when there is an operating budget)",),
                 ("(present only if an operating budget applies)",)),
        Phrasing(r"\bmost dollars the flow may cost in total\b", ("most dollars the flow may cost in total",),
                 ("largest sum in dollars that all flow together may cost",)),
        Phrasing(r"\blist of \[from, to, minimum\] triples: the least flow on those arcs\b",
                 ("list of [from, to, minimum] triples: the least flow on those arcs",),
                 ("contracted lower bounds on arc flow, written as [from, to, minimum]",)),
        Phrasing(r"\(only when some arcs have a contracted minimum\)",
                 ("(only when some arcs have a contracted minimum)",),
                 ("(present only if some arcs carry a contracted minimum)",)),
    )
    data_fields = {
        "nodes": "list of node names (including the source and the sink)",
        "source": "name of the source node",
        "sink": "name of the sink node",
        "arcs": "list of [from, to, capacity] triples: a directed arc and its capacity",
        "node_capacity": "most flow that can pass through each limited intermediate node, keyed by node (only "
                         "when some nodes have a throughput limit)",
        "unit_cost": "list of [from, to, cost] triples: dollars per unit of flow on each arc (only when there is "
                     "an operating budget)",
        "budget": "most dollars the flow may cost in total (only when there is an operating budget)",
        "min_flow": "list of [from, to, minimum] triples: the least flow on those arcs (only when some arcs have "
                    "a contracted minimum)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = """\
model = pyo.ConcreteModel()
arcs = [(a[0], a[1]) for a in data["arcs"]]
capacity = {(a[0], a[1]): a[2] for a in data["arcs"]}
model.flow = pyo.Var(arcs, domain=pyo.NonNegativeReals)

def net_outflow(node):
    out = sum(model.flow[i, j] for (i, j) in arcs if i == node)
    inflow = sum(model.flow[i, j] for (i, j) in arcs if j == node)
    return out - inflow

# total flow leaving the source
model.obj = pyo.Objective(expr=net_outflow(data["source"]), sense=pyo.maximize)

model.capacity = pyo.Constraint(arcs, rule=lambda model, i, j: model.flow[i, j] <= capacity[i, j])

inner = [n for n in data["nodes"] if n not in (data["source"], data["sink"])]
model.conservation = pyo.Constraint(inner, rule=lambda model, n: net_outflow(n) == 0)
"""
    _NODE_CAPACITY = """\

# what enters a limited node (and so passes through it) stays within its throughput limit
model.node_capacity = pyo.Constraint(
    list(data["node_capacity"]),
    rule=lambda model, n: sum(model.flow[i, j] for (i, j) in arcs if j == n) <= data["node_capacity"][n],
)
"""
    _BUDGET = """\

unit_cost = {(a[0], a[1]): a[2] for a in data["unit_cost"]}
model.budget = pyo.Constraint(expr=sum(unit_cost[a] * model.flow[a] for a in arcs) <= data["budget"])
"""
    _MIN_FLOW = """\

minimum = {(a[0], a[1]): a[2] for a in data["min_flow"]}
model.min_flow = pyo.Constraint(list(minimum), rule=lambda model, i, j: model.flow[i, j] >= minimum[i, j])
"""

    model_code = _HEAD  # the base model (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD
        if "node_capacity" in data:
            code += self._NODE_CAPACITY
        if "budget" in data:
            code += self._BUDGET
        if "min_flow" in data:
            code += self._MIN_FLOW
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("node_capacity", "budget", "min_flow") if name in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        n_inner = size_for(difficulty, 4, 7, 11)
        words = scenario.words
        inner = [f"{words['prefix']}{chr(ord('A') + k)}" for k in range(n_inner)]
        source, sink = "S", "T"
        nodes = [source, *inner, sink]
        arcs: dict[tuple[str, str], int] = {}
        # layered structure so every inner node lies on some source-sink path
        for node in inner[: max(2, n_inner // 3)]:
            arcs[(source, node)] = rng.randint(20, 90)
        for node in inner[-max(2, n_inner // 3):]:
            arcs[(node, sink)] = rng.randint(20, 90)
        for position, node in enumerate(inner):
            later = inner[position + 1:]
            for target in rng.sample(later, min(len(later), rng.randint(1, 3))):
                arcs[(node, target)] = rng.randint(10, 70)
        for node in inner:  # every inner node reachable and able to drain
            if not any(j == node for (_, j) in arcs):
                arcs[(source, node)] = rng.randint(10, 50)
            if not any(i == node for (i, _) in arcs):
                arcs[(node, sink)] = rng.randint(10, 50)
        data = {"nodes": nodes, "source": source, "sink": sink,
                "arcs": [[i, j, c] for (i, j), c in arcs.items()]}
        chosen = [part for part in ("node_capacity", "budget", "min_flow") if rng.random() < 0.5]
        if not chosen:
            return data
        # 60% of a maximum flow meets every limit below: node limits and the budget are at least 60% of what
        # it passes and costs, minimum flows at most half of what it carries
        reference = maximum_flow(nodes, arcs, source, sink)
        if "node_capacity" in chosen:
            through = {n: sum(v for (_, j), v in reference.items() if j == n) for n in inner}
            used = [n for n in inner if through[n] > 0]
            limited = sorted(rng.sample(used, max(1, len(used) // 3)), key=inner.index)
            data["node_capacity"] = {n: math.ceil(through[n] * rng.uniform(0.6, 0.9)) for n in limited}
        if "budget" in chosen:
            unit_cost = {arc: rng.randint(1, 9) for arc in arcs}
            data["unit_cost"] = [[i, j, unit_cost[i, j]] for (i, j) in arcs]
            spent = sum(unit_cost[arc] * v for arc, v in reference.items())
            data["budget"] = math.ceil(spent * rng.uniform(0.6, 0.85))
        if "min_flow" in chosen:
            carrying = [arc for arc in arcs if reference.get(arc, 0) >= 4]
            contracted = sorted(rng.sample(carrying, max(1, len(carrying) // 4)), key=list(arcs).index)
            data["min_flow"] = [[i, j, max(1, int(reference[i, j] * rng.uniform(0.2, 0.5)))] for i, j in contracted]
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        minimum = {(i, j): low for i, j, low in data.get("min_flow", ())}
        column = {}
        for i, j, cap in data["arcs"]:
            cost = (1.0 if i == data["source"] else 0.0) - (1.0 if j == data["source"] else 0.0)
            column[(i, j)] = matrix.add_var(f"flow[{i},{j}]", minimum.get((i, j), 0.0), cap, cost=cost)
        for node in data["nodes"]:
            if node in (data["source"], data["sink"]):
                continue
            coefficients: dict[int, float] = {}
            for (i, j), col in column.items():
                if i == node:
                    coefficients[col] = coefficients.get(col, 0.0) + 1.0
                if j == node:
                    coefficients[col] = coefficients.get(col, 0.0) - 1.0
            matrix.add_row(coefficients, 0.0, 0.0, name=f"conservation[{node}]")
        for node, limit in data.get("node_capacity", {}).items():
            matrix.add_row({col: 1.0 for (_, j), col in column.items() if j == node}, upper=limit,
                           name=f"node_capacity[{node}]")
        if "budget" in data:
            matrix.add_row({column[i, j]: cost for i, j, cost in data["unit_cost"]}, upper=data["budget"],
                           name="budget")

    def constraint_rows(self, data: dict, x: dict):
        flow = x["flow"]
        for i, j, cap in data["arcs"]:
            yield Row(f"capacity[{i},{j}]", flow[(i, j)], "<=", cap)
        for node in data["nodes"]:
            if node in (data["source"], data["sink"]):
                continue
            balance = sum(flow[(i, j)] for i, j, _ in data["arcs"] if i == node) - \
                sum(flow[(i, j)] for i, j, _ in data["arcs"] if j == node)
            yield Row(f"conservation[{node}]", balance, "==", 0.0)
        for node, limit in data.get("node_capacity", {}).items():
            yield Row(f"node_capacity[{node}]", sum(flow[(i, j)] for i, j, _ in data["arcs"] if j == node), "<=",
                      limit)
        if "budget" in data:
            yield Row("budget", sum(cost * flow[(i, j)] for i, j, cost in data["unit_cost"]), "<=", data["budget"])
        for i, j, low in data.get("min_flow", ()):
            yield Row(f"min_flow[{i},{j}]", flow[(i, j)], ">=", low)

    def objective_value(self, data: dict, x: dict) -> float:
        source = data["source"]
        return sum(x["flow"][(i, j)] for i, j, _ in data["arcs"] if i == source) - \
            sum(x["flow"][(i, j)] for i, j, _ in data["arcs"] if j == source)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        unit, arc, node = words["unit"], words["arc"], words["node"]
        names = f"The source is node S ({words['source']}) and the sink is node T ({words['sink']})."
        intro = {
            "pipeline": f"An operator moves crude oil from {words['source']} to {words['sink']} through a network "
                        f"of {plural(arc)} joined at {words['node']}s.",
            "evacuation": f"Emergency planners study how fast traffic can leave {words['source']} for "
                          f"{words['sink']} over one-way {plural(arc)} between {words['node']}s.",
            "network": f"A carrier routes traffic from {words['source']} to {words['sink']} over directed "
                       f"{plural(arc)} between {words['node']}s.",
            "water": f"A water utility sends raw water from {words['source']} to {words['sink']} along {plural(arc)} "
                     f"that meet at {words['node']}s.",
            "rail": f"A rail freight operator plans container trains from {words['source']} to {words['sink']} "
                    f"over one-directional {plural(arc)} that link {words['node']}s.",
            "power": f"A grid company transmits wind power from {words['source']} to {words['sink']} along {plural(arc)} "
                     f"connecting {words['node']}s.",
        }[scenario.key]
        file = representation == "file"
        rules = []  # the optional rules, stated in words in every representation
        if "node_capacity" in data:
            limits = "; ".join(f"{n}: {fmt(limit)}" for n, limit in data["node_capacity"].items())
            rules.append(f"Some {plural(node)} have a throughput limit (the most that can pass through them): "
                         + (f"{limits} ({unit})." if not file else "see the data file."))
        if "budget" in data:
            cost = ("the costs per unit are in the data file" if file else
                    "costs in dollars per unit: " + "; ".join(f"from {i} to {j}: {fmt(c)}" for i, j, c in data["unit_cost"])
                    if representation == "text" else "the costs per unit are in the table")
            budget = "a given number of" if file else fmt(data["budget"])
            rules.append(f"The operating budget is {budget} dollars: every unit of flow on any {arc} costs money "
                         f"({cost}), and the total cost of the flow may not exceed the budget.")
        if "min_flow" in data:
            minimums = "; ".join(f"at least {fmt(low)} from {i} to {j}" for i, j, low in data["min_flow"])
            rules.append(f"Contracts require a minimum flow on some {plural(arc)}: "
                         + (f"{minimums}." if not file else "the listed arcs must carry at least their minimum."))
        question = (f"Flow is conserved at every intermediate node and no {arc} may carry more than its capacity. "
                    f"What is {words['goal']}, in {unit}?")
        rules_text = "".join(f" {rule}" for rule in rules)
        if representation == "text":
            links = "; ".join(f"from {i} to {j}: {fmt(c)}" for i, j, c in data["arcs"])
            return f"{intro} {names} The {arc} capacities in {unit} are: {links}.{rules_text} {question}"
        if representation == "table":
            if "budget" in data:
                table = markdown_table(["from", "to", f"capacity ({unit})", "cost ($ per unit)"],
                                       [[i, j, c, priced[2]] for (i, j, c), priced in
                                        zip(data["arcs"], data["unit_cost"], strict=True)])
            else:
                table = markdown_table(["from", "to", f"capacity ({unit})"], data["arcs"])
            return "\n\n".join([f"{intro} {names}", table, *([rules_text.strip()] if rules else []), question])
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return (f"{intro} {names}{rules_text}\n\n{describe_data_file(fields)}\n\nCapacities are in {unit}. "
                    f"{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        sets = "nodes $N$ with source $s$ and sink $t$; directed arcs $A$"
        parameters = "capacity $u_{ij}$ of arc $(i,j)$"
        rows = ["\\text{s.t.}\\ & f_{ij} \\le u_{ij} && \\forall (i,j) \\in A",
                "& \\sum_{(n,j) \\in A} f_{nj} - \\sum_{(i,n) \\in A} f_{in} = 0 && \\forall n \\in N \\setminus \\{s,t\\}"]
        if "node_capacity" in data:
            sets += "; limited nodes $L \\subseteq N$"
            parameters += ", throughput limit $q_n$"
            rows.append("& \\sum_{(i,n) \\in A} f_{in} \\le q_n && \\forall n \\in L")
        if "budget" in data:
            parameters += ", unit cost $c_{ij}$, budget $B$"
            rows.append("& \\sum_{(i,j) \\in A} c_{ij} f_{ij} \\le B")
        if "min_flow" in data:
            sets += "; contracted arcs $K \\subseteq A$"
            parameters += ", minimum flow $l_{ij}$"
            rows.append("& f_{ij} \\ge l_{ij} && \\forall (i,j) \\in K")
        rows.append("& f_{ij} \\ge 0 && \\forall (i,j) \\in A")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            "**Variables**: $f_{ij} \\ge 0$, flow on arc $(i,j)$.\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & \\sum_{(s,j) \\in A} f_{sj} - \\sum_{(i,s) \\in A} f_{is} \\\\\n"
            + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


def maximum_flow(nodes: list[str], capacity: dict[tuple[str, str], int], source: str, sink: str) -> dict:
    """A maximum flow (arc -> amount) by shortest augmenting paths (Edmonds-Karp) on integer capacities; the
    reference `sample` draws the variants' limits around."""
    residual = {node: {} for node in nodes}
    for (i, j), cap in capacity.items():
        residual[i][j] = residual[i].get(j, 0) + cap
        residual[j].setdefault(i, 0)
    while True:
        parent = {source: None}
        queue = deque([source])
        while queue and sink not in parent:
            node = queue.popleft()
            for nxt, left in residual[node].items():
                if left > 0 and nxt not in parent:
                    parent[nxt] = node
                    queue.append(nxt)
        if sink not in parent:
            break
        path, node = [], sink
        while parent[node] is not None:
            path.append((parent[node], node))
            node = parent[node]
        push = min(residual[i][j] for i, j in path)
        for i, j in path:
            residual[i][j] -= push
            residual[j][i] += push
    # the flow on an arc is what its capacity lost (no arc has a reverse twin in this family's networks)
    return {(i, j): cap - residual[i][j] for (i, j), cap in capacity.items() if cap - residual[i][j] > 0}


FAMILY = MaxFlow()
