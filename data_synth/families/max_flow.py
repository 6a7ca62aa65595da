"""Maximum flow (LP): push as much as possible from a source to a sink through a network whose arcs
have capacities (pipelines, roads, data links). Flow conservation holds at every intermediate node."""

from __future__ import annotations

import random

from data_synth.family import (
    MatrixModel,
    ProblemFamily,
    Row,
    Scenario,
    describe_data_file,
    fmt,
    markdown_table,
    size_for,
)

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


class MaxFlow(ProblemFamily):
    name = "max_flow"
    title = "Maximum flow"
    problem_type = "LP"
    sense = "max"
    scenarios = SCENARIOS
    domains = {"flow": "nonnegative"}
    data_fields = {
        "nodes": "list of node names (including the source and the sink)",
        "source": "name of the source node",
        "sink": "name of the sink node",
        "arcs": "list of [from, to, capacity] triples: a directed arc and its capacity",
    }
    model_code = '''\
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
'''

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
        return {"nodes": nodes, "source": source, "sink": sink,
                "arcs": [[i, j, c] for (i, j), c in arcs.items()]}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        column = {}
        for i, j, cap in data["arcs"]:
            cost = (1.0 if i == data["source"] else 0.0) - (1.0 if j == data["source"] else 0.0)
            column[(i, j)] = matrix.add_var(f"flow[{i},{j}]", 0.0, cap, cost=cost)
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

    def objective_value(self, data: dict, x: dict) -> float:
        source = data["source"]
        return sum(x["flow"][(i, j)] for i, j, _ in data["arcs"] if i == source) - \
            sum(x["flow"][(i, j)] for i, j, _ in data["arcs"] if j == source)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        unit, arc = words["unit"], words["arc"]
        names = f"The source is node S ({words['source']}) and the sink is node T ({words['sink']})."
        intro = {
            "pipeline": f"An operator moves crude oil from {words['source']} to {words['sink']} through a network "
                        f"of {arc}s joined at {words['node']}s.",
            "evacuation": f"Emergency planners study how fast traffic can leave {words['source']} for "
                          f"{words['sink']} over one-way {arc}s between {words['node']}s.",
            "network": f"A carrier routes traffic from {words['source']} to {words['sink']} over directed "
                       f"{arc}s between {words['node']}s.",
        }[scenario.key]
        question = (f"Flow is conserved at every intermediate node and no {arc} may carry more than its capacity. "
                    f"What is {words['goal']}, in {unit}?")
        if representation == "text":
            links = "; ".join(f"from {i} to {j}: {fmt(c)}" for i, j, c in data["arcs"])
            return f"{intro} {names} The {arc} capacities in {unit} are: {links}. {question}"
        if representation == "table":
            table = markdown_table(["from", "to", f"capacity ({unit})"], data["arcs"])
            return f"{intro} {names}\n\n{table}\n\n{question}"
        if representation == "file":
            return f"{intro} {names}\n\n{describe_data_file(self.data_fields)}\n\nCapacities are in {unit}. {question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: nodes $N$ with source $s$ and sink $t$; directed arcs $A$.\n\n"
            "**Parameters**: capacity $u_{ij}$ of arc $(i,j)$.\n\n"
            "**Variables**: $f_{ij} \\ge 0$, flow on arc $(i,j)$.\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & \\sum_{(s,j) \\in A} f_{sj} - \\sum_{(i,s) \\in A} f_{is} \\\\\n"
            "\\text{s.t.}\\ & f_{ij} \\le u_{ij} && \\forall (i,j) \\in A \\\\\n"
            "& \\sum_{(n,j) \\in A} f_{nj} - \\sum_{(i,n) \\in A} f_{in} = 0 && \\forall n \\in N \\setminus \\{s,t\\} \\\\\n"
            "& f_{ij} \\ge 0 && \\forall (i,j) \\in A\n\\end{aligned}\n$$"
        )


FAMILY = MaxFlow()
