"""Weighted vertex cover (IP): choose a least-cost set of nodes so that every edge of a network has at
least one chosen end (cameras at intersections watching every street, inspectors at stations covering
every line segment)."""

from __future__ import annotations

import random

from data_synth.family import (
    MatrixModel,
    ProblemFamily,
    Row,
    Scenario,
    describe_data_file,
    fmt,
    join_names,
    markdown_table,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("cameras", "urban security", {
        "intro": "A city's traffic department wants every street of a district watched by a camera.",
        "node": "intersection", "node_prefix": "Corner ", "edge": "street", "money": "dollars",
        "cost_word": "installation cost",
        "rule": "A camera at an intersection watches every street that ends there",
    }),
    Scenario("inspectors", "rail maintenance", {
        "intro": "A rail operator posts track inspectors at stations so that every line segment is checked.",
        "node": "station", "node_prefix": "Station ", "edge": "segment", "money": "euros",
        "cost_word": "weekly cost of an inspector",
        "rule": "An inspector posted at a station checks every segment touching that station",
    }),
    Scenario("sensors", "water utilities", {
        "intro": "A water utility places leak sensors at pipe junctions so that every pipe is monitored.",
        "node": "junction", "node_prefix": "Junction ", "edge": "pipe", "money": "dollars",
        "cost_word": "sensor cost",
        "rule": "A sensor at a junction monitors every pipe connected to it",
    }),
)


class VertexCover(ProblemFamily):
    name = "vertex_cover"
    title = "Weighted vertex cover"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"pick": "binary"}
    data_fields = {
        "nodes": "list of node names",
        "edges": "list of [node, node] pairs: the edges to cover",
        "cost": "cost of choosing each node, keyed by node",
    }
    phrasings = (
        Phrasing(r"\bmust have at least one end chosen\b", ("must have at least one end chosen",
                                                            "needs a chosen node at one end or both"),
                 ("may not be left without a chosen end",)),
    )
    model_code = '''\
model = pyo.ConcreteModel()
model.N = pyo.Set(initialize=data["nodes"])
model.pick = pyo.Var(model.N, domain=pyo.Binary)

model.obj = pyo.Objective(expr=sum(data["cost"][n] * model.pick[n] for n in model.N), sense=pyo.minimize)
# every edge has at least one chosen end
model.covered = pyo.Constraint(range(len(data["edges"])),
                               rule=lambda model, e: model.pick[data["edges"][e][0]] + model.pick[data["edges"][e][1]] >= 1)
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_nodes = size_for(difficulty, 7, 12, 20)
        nodes = [f"{words['node_prefix']}{k}" for k in sorted(rng.sample(range(1, 90), n_nodes))]
        # a connected backbone (a random tree) plus extra edges, so the network is one piece
        edges = {tuple(sorted((nodes[k], nodes[rng.randrange(k)]))) for k in range(1, n_nodes)}
        for _ in range(int(n_nodes * rng.uniform(0.4, 0.9))):
            a, b = rng.sample(nodes, 2)
            edges.add(tuple(sorted((a, b))))
        cost = {n: rng.randint(5, 60) for n in nodes}
        return {"nodes": nodes, "edges": [list(edge) for edge in sorted(edges)], "cost": cost}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        columns = {n: matrix.add_var(f"pick[{n}]", 0.0, 1.0, cost=data["cost"][n], integer=True)
                   for n in data["nodes"]}
        for k, (a, b) in enumerate(data["edges"]):
            matrix.add_row({columns[a]: 1.0, columns[b]: 1.0}, lower=1.0, name=f"covered[{k}]")

    def constraint_rows(self, data: dict, x: dict):
        pick = x["pick"]
        for k, (a, b) in enumerate(data["edges"]):
            yield Row(f"covered[{k}]", pick[a] + pick[b], ">=", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["cost"][n] * x["pick"][n] for n in data["nodes"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        chosen = [n for n in data["nodes"] if x["pick"][n] > 0.5]
        return f"- choose {join_names(chosen)} ({len(chosen)} of {len(data['nodes'])})"

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        node, edge, money = words["node"], words["edge"], words["money"]
        intro = (f"{words['intro']} {words['rule']}; each {edge} must have at least one end chosen. The network "
                 f"has {len(data['nodes'])} {node}s and {len(data['edges'])} {edge}s.")
        question = (f"Which {node}s should be chosen to cover every {edge} at the lowest total {words['cost_word']}, "
                    "and what is that cost?")
        edges = "; ".join(f"{a} to {b}" for a, b in data["edges"])
        if representation == "text":
            costs = "; ".join(f"{n} costs {fmt(data['cost'][n])} {money}" for n in data["nodes"])
            return f"{intro} The {edge}s run {edges}. The {words['cost_word']} per {node}: {costs}. {question}"
        if representation == "table":
            table = markdown_table([node, f"{words['cost_word']} ({money})"],
                                   [[n, data["cost"][n]] for n in data["nodes"]])
            return f"{intro} The {edge}s run {edges}.\n\n{table}\n\n{question}"
        if representation == "file":
            return f"{intro}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: nodes $N$, edges $E \\subseteq N \\times N$.\n\n"
            "**Parameters**: cost $c_n$.\n\n"
            "**Variables**: $x_n \\in \\{0, 1\\}$, 1 when node $n$ is chosen.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{n \\in N} c_n x_n \\\\\n"
            "\\text{s.t.}\\ & x_a + x_b \\ge 1 && \\forall (a, b) \\in E \\\\\n"
            "& x_n \\in \\{0, 1\\} && \\forall n \\in N\n\\end{aligned}\n$$"
        )


FAMILY = VertexCover()
