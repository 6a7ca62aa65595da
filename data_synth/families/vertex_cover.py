"""Weighted vertex cover (IP): choose a least-cost set of nodes so that every edge of a network has at
least one chosen end (cameras at intersections watching every street, inspectors at stations covering
every line segment).

Structure variants (drawn per instance, recorded by the keys present): nodes that cannot be chosen
(`forbidden`, an independent set, so their neighbours must be), a limit on the number of chosen nodes
(`max_nodes`, drawn from a greedy cover that respects the forbidden nodes), and edges that may be left
uncovered at a penalty (`uncovered_penalty`, a binary per such edge), each present or absent, so the
program has eight skeletons."""

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
    plural,
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

# eval only: other industries, nodes, edges and currencies than any training scenario
EVAL_SCENARIOS = (
    Scenario("lookouts", "forest fire prevention", {
        "intro": "A forestry service staffs fire lookouts on hilltops so that every valley between two hilltops is "
                 "in view.",
        "node": "hilltop", "node_prefix": "Hill ", "edge": "valley", "money": "pesos",
        "cost_word": "seasonal staffing cost",
        "rule": "A lookout on a hilltop keeps watch over every valley leading off that hilltop",
    }),
    Scenario("chargers", "electric vehicle charging", {
        "intro": "A motorway operator wants a fast charger within reach on every road link of its network.",
        "node": "service area", "node_prefix": "Services ", "edge": "road link", "money": "kronor",
        "cost_word": "build cost",
        "rule": "A charger at a service area serves each road link that meets it",
    }),
    Scenario("attendants", "museum security", {
        "intro": "A museum posts attendants in its halls so that every doorway between two halls is watched.",
        "node": "hall", "node_prefix": "Hall ", "edge": "doorway", "money": "francs",
        "cost_word": "daily wage of an attendant",
        "rule": "An attendant standing in a hall keeps an eye on each doorway of that hall",
    }),
)


class VertexCover(ProblemFamily):
    name = "vertex_cover"
    title = "Weighted vertex cover"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"pick": "binary"}
    data_fields = {
        "nodes": "list of node names",
        "edges": "list of [node, node] pairs: the edges to cover",
        "cost": "cost of choosing each node, keyed by node",
        "forbidden": "list of nodes that cannot be chosen (only when there are such nodes)",
        "max_nodes": "most nodes that can be chosen (only when there is such a limit)",
        "uncovered_penalty": "list of [node, node, penalty]: an edge that may be left uncovered, and the penalty "
                             "for leaving it so (only when some edges may)",
    }
    phrasings = (
        Phrasing(r"\bmust have at least one end chosen\b", ("must have at least one end chosen",
                                                            "needs a chosen node at one end or both"),
                 ("has to have a chosen node at one of its ends or at both",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text); rules stop
        # before generic phrases with several training wordings ("the lowest", "what is that")
        Phrasing(r"\bThe network has\b", ("The network has",), ("In all, the network consists of",)),
        Phrasing(r"\bcannot be chosen: ", ("cannot be chosen: ",), ("are ruled out: ",)),
        Phrasing(r"\bNo more than\b", ("No more than",), ("Up to",)),
        Phrasing(r"\bcan be chosen in total\.", ("can be chosen in total.",), ("may be picked altogether.",)),
        Phrasing(r"\bshould be chosen to cover every\b", ("should be chosen to cover every",),
                 ("ought to be picked so that they cover every",)),
        Phrasing(r"\bmay be left uncovered instead, at a penalty in\b",
                 ("may be left uncovered instead, at a penalty in",),
                 ("can go uncovered instead, each for a penalty in",)),
        Phrasing(r"\bshould be chosen, and which\b", ("should be chosen, and which",), ("ought to be picked, and which",)),
        Phrasing(r"\bleft uncovered, to minimize the total\b", ("left uncovered, to minimize the total",),
                 ("left uncovered, so that the sum of the",)),
        Phrasing(r"\bplus penalties, and (?=what is that\b)", ("plus penalties, and ",),
                 ("and the penalties is as small as possible, and ",)),
        Phrasing(r"(?<=that )total\?", ("total?",), ("sum?",)),
        Phrasing(r"(?<=s )run\b", ("run",), ("connect",)),
    )
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.N = pyo.Set(initialize=data["nodes"])
model.pick = pyo.Var(model.N, domain=pyo.Binary)
'''
    _COVER = '''\

model.obj = pyo.Objective(expr=sum(data["cost"][n] * model.pick[n] for n in model.N), sense=pyo.minimize)
# every edge has at least one chosen end
model.covered = pyo.Constraint(range(len(data["edges"])),
                               rule=lambda model, e: model.pick[data["edges"][e][0]] + model.pick[data["edges"][e][1]] >= 1)
'''
    _SOFT_COVER = '''\
# some edges may be left uncovered (miss = 1) at a penalty
soft = [(a, b) for a, b, _ in data["uncovered_penalty"]]
model.miss = pyo.Var(range(len(soft)), domain=pyo.Binary)

model.obj = pyo.Objective(
    expr=sum(data["cost"][n] * model.pick[n] for n in model.N)
    + sum(data["uncovered_penalty"][k][2] * model.miss[k] for k in range(len(soft))),
    sense=pyo.minimize,
)

# every edge has at least one chosen end, unless it is one that may be missed
def covered(model, e):
    a, b = data["edges"][e]
    missed = model.miss[soft.index((a, b))] if (a, b) in soft else 0
    return model.pick[a] + model.pick[b] + missed >= 1

model.covered = pyo.Constraint(range(len(data["edges"])), rule=covered)
'''
    _FORBIDDEN = '''\
model.forbidden = pyo.Constraint(data["forbidden"], rule=lambda model, n: model.pick[n] == 0)
'''
    _MAX_NODES = '''\
model.max_nodes = pyo.Constraint(expr=sum(model.pick[n] for n in model.N) <= data["max_nodes"])
'''

    model_code = _HEAD + _COVER  # the base model (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._SOFT_COVER if "uncovered_penalty" in data else self._COVER)
        if "forbidden" in data:
            code += self._FORBIDDEN
        if "max_nodes" in data:
            code += self._MAX_NODES
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("forbidden", "max_nodes", "uncovered_penalty") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "miss": "binary"} if "uncovered_penalty" in data else self.domains

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
        data = {"nodes": nodes, "edges": [list(edge) for edge in sorted(edges)], "cost": cost}
        if rng.random() < 0.5:
            # an independent set of nodes (no edge between two of them), so a cover without them exists
            forbidden: list[str] = []
            for n in rng.sample(nodes, max(1, n_nodes // 6)):
                if not any({n, m} == set(edge) for m in forbidden for edge in data["edges"]):
                    forbidden.append(n)
            data["forbidden"] = sorted(forbidden, key=nodes.index)
        if rng.random() < 0.5:
            data["max_nodes"] = len(greedy_cover(data))
        if rng.random() < 0.5:
            soft = rng.sample(data["edges"], max(1, len(data["edges"]) // 4))
            data["uncovered_penalty"] = [[a, b, rng.randint(10, 40)] for a, b in sorted(soft)]
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # both ends of an edge that must be covered are declared unusable
        soft = {(a, b) for a, b, _ in data.get("uncovered_penalty", ())}
        hard = [edge for edge in data["edges"] if tuple(edge) not in soft]
        if not hard:
            return None
        a, b = rng.choice(hard)
        forbidden = [n for n in data["nodes"] if n in (a, b) or n in data.get("forbidden", ())]
        return {**data, "forbidden": forbidden}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        columns = {n: matrix.add_var(f"pick[{n}]", 0.0, 1.0, cost=data["cost"][n], integer=True)
                   for n in data["nodes"]}
        for n in data.get("forbidden", ()):
            matrix.col_upper[columns[n]] = 0.0  # a bound, not a row
        soft = {(a, b): matrix.add_var(f"miss[{k}]", 0.0, 1.0, cost=penalty, integer=True)
                for k, (a, b, penalty) in enumerate(data.get("uncovered_penalty", ()))}
        for k, (a, b) in enumerate(data["edges"]):
            row = {columns[a]: 1.0, columns[b]: 1.0}
            if (a, b) in soft:
                row[soft[a, b]] = 1.0
            matrix.add_row(row, lower=1.0, name=f"covered[{k}]")
        if "max_nodes" in data:
            matrix.add_row({c: 1.0 for c in columns.values()}, upper=data["max_nodes"], name="max_nodes")

    def constraint_rows(self, data: dict, x: dict):
        pick = x["pick"]
        soft = {(a, b): k for k, (a, b, _) in enumerate(data.get("uncovered_penalty", ()))}
        for k, (a, b) in enumerate(data["edges"]):
            missed = x["miss"][soft[a, b]] if (a, b) in soft else 0.0
            yield Row(f"covered[{k}]", pick[a] + pick[b] + missed, ">=", 1)
        for n in data.get("forbidden", ()):
            yield Row(f"forbidden[{n}]", pick[n], "==", 0)
        if "max_nodes" in data:
            yield Row("max_nodes", sum(pick[n] for n in data["nodes"]), "<=", data["max_nodes"])

    def objective_value(self, data: dict, x: dict) -> float:
        penalty = sum(p * x["miss"][k] for k, (_, _, p) in enumerate(data.get("uncovered_penalty", ())))
        return penalty + sum(data["cost"][n] * x["pick"][n] for n in data["nodes"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        chosen = [n for n in data["nodes"] if x["pick"][n] > 0.5]
        return f"- choose {join_names(chosen)} ({len(chosen)} of {len(data['nodes'])})"

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        node, edge, money = words["node"], words["edge"], words["money"]
        intro = (f"{words['intro']} {words['rule']}; each {edge} must have at least one end chosen. The network "
                 f"has {len(data['nodes'])} {plural(node)} and {len(data['edges'])} {plural(edge)}.")
        if "forbidden" in data:
            intro += f" These {plural(node)} cannot be chosen: {join_names(data['forbidden'])}."
        if "max_nodes" in data:
            intro += f" No more than {fmt(data['max_nodes'])} {plural(node)} can be chosen in total."
        question = (f"Which {plural(node)} should be chosen to cover every {edge} at the lowest total {words['cost_word']}, "
                    "and what is that cost?")
        if "uncovered_penalty" in data:
            intro += (f" Some {plural(edge)} may be left uncovered instead, at a penalty in {money}"
                      + (": " + "; ".join(f"{a} to {b} for {fmt(p)}" for a, b, p in data["uncovered_penalty"])
                         if representation != "file" else "") + ".")
            question = (f"Which {plural(node)} should be chosen, and which {plural(edge)} left uncovered, to minimize the total "
                        f"{words['cost_word']} plus penalties, and what is that total?")
        edges = "; ".join(f"{a} to {b}" for a, b in data["edges"])
        if representation == "text":
            costs = "; ".join(f"{n} costs {fmt(data['cost'][n])} {money}" for n in data["nodes"])
            return f"{intro} The {plural(edge)} run {edges}. The {words['cost_word']} per {node}: {costs}. {question}"
        if representation == "table":
            table = markdown_table([node, f"{words['cost_word']} ({money})"],
                                   [[n, data["cost"][n]] for n in data["nodes"]])
            return f"{intro} The {plural(edge)} run {edges}.\n\n{table}\n\n{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        sets = "nodes $N$, edges $E \\subseteq N \\times N$"
        parameters = "cost $c_n$"
        variables = "$x_n \\in \\{0, 1\\}$, 1 when node $n$ is chosen"
        objective = "\\sum_{n \\in N} c_n x_n"
        cover = "x_a + x_b \\ge 1 && \\forall (a, b) \\in E"
        rows = []
        if "uncovered_penalty" in data:
            sets += ", edges $S \\subseteq E$ that may be left uncovered"
            parameters += ", penalty $p_e$ for $e \\in S$"
            variables += "; $m_e \\in \\{0, 1\\}$, 1 when edge $e \\in S$ is left uncovered ($m_e = 0$ for $e \\notin S$)"
            objective += " + \\sum_{e \\in S} p_e m_e"
            cover = "x_a + x_b + m_{ab} \\ge 1 && \\forall (a, b) \\in E"
        if "forbidden" in data:
            sets += ", forbidden nodes $F$"
            rows.append("& x_n = 0 && \\forall n \\in F")
        if "max_nodes" in data:
            parameters += ", node limit $K$"
            rows.append("& \\sum_{n \\in N} x_n \\le K")
        rows.append("& x_n \\in \\{0, 1\\} && \\forall n \\in N")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n"
            f"\\text{{s.t.}}\\ & {cover} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


def greedy_cover(data: dict) -> list[str]:
    """A cover that avoids the forbidden nodes: every neighbour of a forbidden node, then repeatedly the
    node that covers the most uncovered edges."""
    forbidden = set(data.get("forbidden", ()))
    chosen = [n for n in data["nodes"] if n not in forbidden
              and any(n in edge and set(edge) & forbidden for edge in data["edges"])]
    left = [edge for edge in data["edges"] if not set(edge) & set(chosen)]
    while left:
        best = max((n for n in data["nodes"] if n not in forbidden and n not in chosen),
                   key=lambda n: sum(n in edge for edge in left))
        chosen.append(best)
        left = [edge for edge in left if best not in edge]
    return chosen


FAMILY = VertexCover()
