"""Uncapacitated p-hub median (MILP): open exactly p of the nodes as hubs and route every origin-
destination flow origin -> hub -> (hub ->) destination, at a cost of flow times distance per leg, where
a leg between two hubs is discounted by the factor alpha (economies of scale on consolidated links).

Two allocation rules, the choice `allocation` of the instance, give two formulations (Ernst and
Krishnamoorthy's flow-based models):
- "single": every node sends and receives all its flow through one hub; binary assign[i, k] (assign[k, k]
  means k is a hub) and route[i, k, l], the flow of origin i carried from hub k to hub l, balanced at
  every hub.
- "multiple": every flow may use any open hubs; binary hub[k], and the flows of each origin: collect[i, k]
  to the first hub, route[i, k, l] between hubs and deliver[i, l, j] from the last hub to destination j,
  balanced at every hub and allowed only through open hubs.
Distances are the shortest-path closure of rounded Euclidean distances, so the direct hub-to-hub link is
always the cheapest and the objective can be recomputed from the hubs and allocations alone.

Structure variants (besides the allocation rule, recorded by the keys present): a set-up cost per hub in
the objective (`hub_cost`) and a restricted list of nodes that may become hubs (`candidates`), each
present or absent: eight program skeletons."""

from __future__ import annotations

import math
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
    pick_names,
    plural,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("airline", "airline network design", {
        "intro": "A regional airline is redesigning its network around a few hub airports.",
        "node": "airport", "node_names": ["Denver", "Omaha", "Tulsa", "Boise", "Fresno", "Reno", "Wichita",
                                          "Spokane", "Tucson", "El Paso", "Billings", "Fargo"],
        "flow_word": "passengers per day", "distance_unit": "km", "money": "dollars", "rate": "one dollar per km",
        "link": "flights between two hubs",
    }),
    Scenario("parcel", "parcel delivery", {
        "intro": "A parcel carrier is choosing which of its depots become sorting hubs.",
        "node": "depot", "node_names": ["Leeds", "Bristol", "Norwich", "Exeter", "Carlisle", "Oxford", "Hull",
                                        "Derby", "Swansea", "York", "Preston", "Ipswich"],
        "flow_word": "hundreds of parcels per night", "distance_unit": "miles", "money": "pounds",
        "rate": "one pound per mile",
        "link": "trunk lorries between two hubs",
    }),
    Scenario("freight", "less-than-truckload freight", {
        "intro": "A freight company is picking the terminals where shipments are consolidated.",
        "node": "terminal", "node_names": ["Lyon", "Lille", "Nantes", "Dijon", "Rouen", "Metz", "Tours",
                                           "Reims", "Nimes", "Pau", "Brest", "Caen"],
        "flow_word": "tonnes per week", "distance_unit": "km", "money": "euros", "rate": "one euro per km",
        "link": "full trucks between two hubs",
    }),
)

# the eval split's own industries and names (see ProblemFamily.eval_scenarios)
EVAL_SCENARIOS = (
    Scenario("intermodal", "intermodal rail freight", {
        "intro": "An intermodal operator is deciding which inland rail terminals will serve as transshipment hubs.",
        "node": "rail terminal", "node_names": ["Verona", "Bologna", "Padua", "Modena", "Parma", "Brescia", "Trento",
                                                "Udine", "Ancona", "Rimini", "Bergamo", "Piacenza"],
        "flow_word": "containers a day", "distance_unit": "km", "money": "euros",
        "rate": "one euro for each kilometre", "link": "block trains between two hubs",
    }),
    Scenario("postal", "national postal services", {
        "intro": "A national post office is selecting the mail centres that will act as sorting hubs.",
        "node": "mail centre", "node_names": ["Aarhus", "Odense", "Aalborg", "Esbjerg", "Randers", "Kolding",
                                              "Horsens", "Vejle", "Roskilde", "Herning", "Silkeborg", "Naestved"],
        "flow_word": "thousand letters a night", "distance_unit": "km", "money": "kroner",
        "rate": "one krone for each km", "link": "night vans between two hubs",
    }),
)

ALPHAS = (0.5, 0.6, 0.65, 0.7, 0.75, 0.8)


def ordered_pairs(nodes: list[str]) -> list[tuple[str, str]]:
    return [(a, b) for a in nodes for b in nodes if a != b]


def leg(data: dict, a: str, b: str) -> float:
    return 0 if a == b else data["distance"][a][b]


def closure(distance: dict[str, dict[str, int]], nodes: list[str]) -> None:
    """Shortest-path closure in place (Floyd-Warshall), so every distance obeys the triangle inequality."""
    for m in nodes:
        for a in nodes:
            for b in nodes:
                if len({a, b, m}) == 3 and distance[a][m] + distance[m][b] < distance[a][b]:
                    distance[a][b] = distance[a][m] + distance[m][b]


class HubLocation(ProblemFamily):
    name = "hub_location"
    title = "p-hub median location"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"assign": "binary", "route": "nonnegative"}
    industrial = True  # 10 nodes: 1,000 variables (single allocation) or 1,910 (multiple), solved in about a second
    data_fields = {
        "nodes": "list of node names",
        "flow": "flow[i][j]: flow from node i to node j (for every i != j)",
        "distance": "distance[i][j]: distance between nodes i and j (symmetric, for every i != j)",
        "alpha": "discount factor on legs between two hubs (their cost is alpha times the distance)",
        "p": "number of hubs to open",
        "allocation": '"single" (each node uses one hub for all its flow) or "multiple" (flows may use any hubs)',
        "hub_cost": "set-up cost of making each node a hub, keyed by node (only when hubs have set-up costs)",
        "candidates": "nodes that may become hubs (only when the choice is restricted)",
    }
    phrasings = (
        Phrasing(r"\(a flow whose origin or destination is itself a hub skips that leg\)",
                 ("(a flow whose origin or destination is itself a hub skips that leg)",),
                 ("(when a flow starts or ends at a hub, that leg is left out)",)),
        Phrasing(r"\bpossibly on to a second hub, and then\b", ("possibly on to a second hub, and then",),
                 ("perhaps continuing to a second hub, and finally",)),
        Phrasing(r"\bare discounted: they cost\b", ("are discounted: they cost",), ("get a discount: their cost is",)),
        Phrasing(r"\bEvery flow travels from its origin to a hub\b",
                 ("Every flow travels from its origin to a hub",
                  "Each flow goes from its origin to a hub"),
                 ("All traffic is first carried from its origin to a hub",)),
        Phrasing(r"\bMoving one unit over a leg costs the leg's distance\b",
                 ("Moving one unit over a leg costs the leg's distance",),
                 ("Carrying one unit along a leg costs as much as the leg is long",)),
        Phrasing(r"\bsends and receives all of its flow through a single hub\b",
                 ("sends and receives all of its flow through a single hub",),
                 ("is attached to a single hub that handles all of its flow",)),
        Phrasing(r"\bmay be routed through any of the open hubs\b",
                 ("may be routed through any of the open hubs",),
                 ("can pass through whichever open hubs are cheapest",)),
        # eval-only rewordings of the fixed sentences (training keeps its text); each stops short of the
        # generic words that training writes two ways ("what is that", "keyed by")
        Phrasing(r"\bof them will be opened as hubs\.", ("of them will be opened as hubs.",),
                 ("of them are to serve as hubs.",)),
        Phrasing(r", except that\b", (", except that",), (", save that",)),
        Phrasing(r"(?<=\d) times the distance\.", (" times the distance.",), (" times the leg's length.",)),
        # "single" is the instance's `allocation` value, kept verbatim (each rule sees the text between such
        # names), so the rule above never spans it: this one ends where the name starts
        Phrasing(r"\bsends and receives all of its flow through a(?= \Z)",
                 ("sends and receives all of its flow through a",), ("routes all of its flow, in and out, via a",)),
        Phrasing(r"\(a hub uses itself\)", ("(a hub uses itself)",), ("(a hub is its own hub)",)),
        Phrasing(r"\bThe flow between two\b", ("The flow between two",), ("Traffic between any two",)),
        Phrasing(r" can become hubs\.", (" can become hubs.",), (" are eligible to be hubs.",)),
        Phrasing(r"\ba hub costs \(in\b", ("a hub costs (in",), ("a hub has a set-up cost (in",)),
        Phrasing(r", which is part of the total cost\.", (", which is part of the total cost.",),
                 (", and this cost counts toward the overall cost.",)),
        Phrasing(r"\bto minimize the total cost, and\b(?= what is that)", ("to minimize the total cost, and",),
                 ("so that the overall cost is as low as possible, and",)),
        Phrasing(r"\ballocated to one of them,", ("allocated to one of them,",), ("assigned to exactly one hub,",)),
        Phrasing(r"\bThe flows\b(?= \()", ("The flows",), ("The traffic volumes",)),
        Phrasing(r"\bThe distances in\b", ("The distances in",), ("The leg lengths in",)),
        Phrasing(r"(?<=\| )flow(?= \()", ("flow",), ("traffic",)),
        Phrasing(r", from \\ to\b", (", from \\ to",), (", rows = origin, columns = destination",)),
        Phrasing(r"(?<=\| )distance(?= \()", ("distance",), ("leg length",)),
        Phrasing(r"\bhub set-up cost(?= \()", ("hub set-up cost",), ("cost to set up a hub",)),
        Phrasing(r"\blist of node names\b", ("list of node names",), ("names of all nodes",)),
        Phrasing(r"\bflow from node i to node j \(for every i != j\)", ("flow from node i to node j (for every i != j)",),
                 ("traffic sent from node i to node j (given for all i != j)",)),
        Phrasing(r"\bdistance between nodes i and j \(symmetric, for every i != j\)",
                 ("distance between nodes i and j (symmetric, for every i != j)",),
                 ("length of the leg joining nodes i and j (the same both ways, given for all i != j)",)),
        Phrasing(r"\bdiscount factor on legs between two hubs \(their cost is alpha times the distance\)",
                 ("discount factor on legs between two hubs (their cost is alpha times the distance)",),
                 ("discount on hub-to-hub legs (such a leg costs alpha times its length)",)),
        Phrasing(r"\bnumber of hubs to open\b", ("number of hubs to open",), ("count of hubs that must be opened",)),
        Phrasing(r"\(each node uses one hub for all its flow\)", ("(each node uses one hub for all its flow)",),
                 ("(all of a node's flow goes through one hub)",)),
        Phrasing(r"\(flows may use any hubs\)", ("(flows may use any hubs)",),
                 ("(flows can pass through whichever hubs)",)),
        Phrasing(r"\bset-up cost of making each node a hub\b", ("set-up cost of making each node a hub",),
                 ("cost of setting up a hub at every node",)),
        Phrasing(r"\bnodes that may become hubs\b", ("nodes that may become hubs",), ("nodes eligible to be hubs",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(included only if",)),
    )
    # the pieces of `model_code_for`: the head, then the allocation rule's model, each optional piece
    # when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.N = pyo.Set(initialize=data["nodes"])
model.pairs = pyo.Set(initialize=[(a, b) for a in data["nodes"] for b in data["nodes"] if a != b], dimen=2)


def leg(a, b):
    """The distance of a leg (zero from a node to itself)."""
    return 0 if a == b else data["distance"][a][b]


outflow = {i: sum(data["flow"][i][j] for j in data["nodes"] if j != i) for i in data["nodes"]}
inflow = {i: sum(data["flow"][j][i] for j in data["nodes"] if j != i) for i in data["nodes"]}
'''
    _SINGLE = '''\
# assign[i, k]: node i sends and receives all its flow through hub k (assign[k, k]: k is a hub)
model.assign = pyo.Var(model.N, model.N, domain=pyo.Binary)
# route[i, k, l]: flow from origin i carried from hub k to hub l
model.route = pyo.Var(model.N, model.pairs, domain=pyo.NonNegativeReals)
transport = (sum(leg(i, k) * (outflow[i] + inflow[i]) * model.assign[i, k] for i in model.N for k in model.N)
             + sum(data["alpha"] * leg(k, l) * model.route[i, k, l] for i in model.N for k, l in model.pairs))
'''
    _SINGLE_OBJ = '''\
model.obj = pyo.Objective(expr=transport, sense=pyo.minimize)
'''
    _SINGLE_OBJ_SETUP = '''\
model.obj = pyo.Objective(expr=transport + sum(data["hub_cost"][k] * model.assign[k, k] for k in model.N),
                          sense=pyo.minimize)
'''
    _SINGLE_ROWS = '''\
model.one_hub = pyo.Constraint(model.N, rule=lambda model, i: sum(model.assign[i, k] for k in model.N) == 1)
model.open_hub = pyo.Constraint(model.pairs, rule=lambda model, i, k: model.assign[i, k] <= model.assign[k, k])
model.p_hubs = pyo.Constraint(expr=sum(model.assign[k, k] for k in model.N) == data["p"])
# at hub k, origin i's flow leaving for other hubs minus the flow arriving from them equals what enters
# at k (i's own flow, when i uses k) minus what leaves the network at k (to destinations that use k)
model.balance = pyo.Constraint(model.N, model.N, rule=lambda model, i, k: (
    sum(model.route[i, k, l] for l in model.N if l != k) - sum(model.route[i, l, k] for l in model.N if l != k)
    == outflow[i] * model.assign[i, k] - sum(data["flow"][i][j] * model.assign[j, k] for j in model.N if j != i)))
'''
    _SINGLE_CANDIDATES = '''\

# only the candidates may become hubs
model.not_hub = pyo.Constraint([k for k in data["nodes"] if k not in data["candidates"]],
                               rule=lambda model, k: model.assign[k, k] == 0)
'''
    _MULTIPLE = '''\
model.legs = pyo.Set(initialize=[(i, l, j) for i in data["nodes"] for l in data["nodes"] for j in data["nodes"]
                                 if j != i], dimen=3)
model.hub = pyo.Var(model.N, domain=pyo.Binary)
model.collect = pyo.Var(model.N, model.N, domain=pyo.NonNegativeReals)  # collect[i, k]: from origin i to hub k
model.route = pyo.Var(model.N, model.pairs, domain=pyo.NonNegativeReals)  # route[i, k, l]: i's flow, hub k to l
model.deliver = pyo.Var(model.legs, domain=pyo.NonNegativeReals)  # deliver[i, l, j]: i's flow, hub l to j
transport = (sum(leg(i, k) * model.collect[i, k] for i in model.N for k in model.N)
             + sum(data["alpha"] * leg(k, l) * model.route[i, k, l] for i in model.N for k, l in model.pairs)
             + sum(leg(l, j) * model.deliver[i, l, j] for i, l, j in model.legs))
'''
    _MULTIPLE_OBJ = '''\
model.obj = pyo.Objective(expr=transport, sense=pyo.minimize)
'''
    _MULTIPLE_OBJ_SETUP = '''\
model.obj = pyo.Objective(expr=transport + sum(data["hub_cost"][k] * model.hub[k] for k in model.N),
                          sense=pyo.minimize)
'''
    _MULTIPLE_ROWS = '''\
model.collected = pyo.Constraint(model.N, rule=lambda model, i: sum(model.collect[i, k] for k in model.N) == outflow[i])
model.delivered = pyo.Constraint(model.pairs, rule=lambda model, i, j: sum(
    model.deliver[i, l, j] for l in model.N) == data["flow"][i][j])
# at hub k, origin i's flow that arrives (collected or from other hubs) also leaves (to hubs or destinations)
model.balance = pyo.Constraint(model.N, model.N, rule=lambda model, i, k: (
    model.collect[i, k] + sum(model.route[i, l, k] for l in model.N if l != k)
    == sum(model.route[i, k, l] for l in model.N if l != k) + sum(model.deliver[i, k, j] for j in model.N if j != i)))
# flow enters and leaves the network only at open hubs
model.collect_open = pyo.Constraint(model.N, model.N, rule=lambda model, i, k: model.collect[i, k]
                                    <= outflow[i] * model.hub[k])
model.deliver_open = pyo.Constraint(model.legs, rule=lambda model, i, l, j: model.deliver[i, l, j]
                                    <= data["flow"][i][j] * model.hub[l])
model.p_hubs = pyo.Constraint(expr=sum(model.hub[k] for k in model.N) == data["p"])
'''
    _MULTIPLE_CANDIDATES = '''\

# only the candidates may become hubs
model.not_hub = pyo.Constraint([k for k in data["nodes"] if k not in data["candidates"]],
                               rule=lambda model, k: model.hub[k] == 0)
'''

    model_code = _HEAD + _SINGLE + _SINGLE_OBJ + _SINGLE_ROWS  # the single-allocation p-hub median

    def model_code_for(self, data: dict) -> str:
        if data["allocation"] == "single":
            code = self._HEAD + self._SINGLE
            code += self._SINGLE_OBJ_SETUP if "hub_cost" in data else self._SINGLE_OBJ
            code += self._SINGLE_ROWS
            return code + (self._SINGLE_CANDIDATES if "candidates" in data else "")
        code = self._HEAD + self._MULTIPLE
        code += self._MULTIPLE_OBJ_SETUP if "hub_cost" in data else self._MULTIPLE_OBJ
        code += self._MULTIPLE_ROWS
        return code + (self._MULTIPLE_CANDIDATES if "candidates" in data else "")

    def domains_for(self, data: dict) -> dict[str, str]:
        if data["allocation"] == "single":
            return self.domains
        return {"hub": "binary", "collect": "nonnegative", "route": "nonnegative", "deliver": "nonnegative"}

    def variant_of(self, data: dict) -> str:
        return "+".join([data["allocation"], *[name for name in ("hub_cost", "candidates") if name in data]])

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_nodes = size_for(difficulty, 4, 6, 8, industrial=10)
        nodes = pick_names(rng, words["node_names"], n_nodes)
        where = {v: (rng.uniform(0, 100), rng.uniform(0, 100)) for v in nodes}
        distance = {a: {b: max(1, round(math.dist(where[a], where[b]))) for b in nodes if b != a} for a in nodes}
        closure(distance, nodes)
        flow = {a: {b: rng.randint(5, 60) for b in nodes if b != a} for a in nodes}
        p = 2 if n_nodes <= 4 else rng.randint(2, 3)
        data = {"nodes": nodes, "flow": flow, "distance": distance, "alpha": rng.choice(ALPHAS), "p": p,
                "allocation": rng.choice(("single", "multiple"))}
        if rng.random() < 0.5:
            # set-up costs of the order of what a hub saves: a few percent of all flow sent directly
            direct = sum(flow[a][b] * distance[a][b] for a, b in ordered_pairs(nodes))
            data["hub_cost"] = {v: round(direct * rng.uniform(0.02, 0.08)) for v in nodes}
        if rng.random() < 0.5:
            data["candidates"] = sorted(rng.sample(nodes, p + 1 + rng.randint(0, max(0, n_nodes - p - 2))),
                                        key=nodes.index)
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # more hubs to open than there are nodes allowed to become one
        allowed = data.get("candidates", data["nodes"])
        return {**data, "p": len(allowed) + 1}

    # ---------------------------------------------------------------- matrix, rows and objective

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        nodes, flow, alpha = data["nodes"], data["flow"], data["alpha"]
        allowed = set(data.get("candidates", nodes))
        hub_cost = data.get("hub_cost", {})
        outflow = {i: sum(flow[i].values()) for i in nodes}
        inflow = {i: sum(flow[j][i] for j in nodes if j != i) for i in nodes}
        pairs = ordered_pairs(nodes)
        route = {}
        if data["allocation"] == "single":
            assign = {}
            for i in nodes:
                for k in nodes:
                    cost = leg(data, i, k) * (outflow[i] + inflow[i]) + (hub_cost.get(k, 0.0) if i == k else 0.0)
                    assign[i, k] = matrix.add_var(f"assign[{i},{k}]", 0.0, 1.0 if k in allowed else 0.0, cost=cost,
                                                  integer=True)
            for i in nodes:
                for k, m in pairs:
                    route[i, k, m] = matrix.add_var(f"route[{i},{k},{m}]", cost=alpha * leg(data, k, m))
            for i in nodes:
                matrix.add_row({assign[i, k]: 1.0 for k in nodes}, 1.0, 1.0, name=f"one_hub[{i}]")
            for i, k in pairs:
                matrix.add_row({assign[i, k]: 1.0, assign[k, k]: -1.0}, upper=0.0, name=f"open_hub[{i},{k}]")
            matrix.add_row({assign[k, k]: 1.0 for k in nodes}, data["p"], data["p"], name="p_hubs")
            for i in nodes:
                for k in nodes:
                    row: dict[int, float] = {}
                    for m in nodes:
                        if m != k:
                            row[route[i, k, m]] = row.get(route[i, k, m], 0.0) + 1.0
                            row[route[i, m, k]] = row.get(route[i, m, k], 0.0) - 1.0
                    row[assign[i, k]] = row.get(assign[i, k], 0.0) - outflow[i]
                    for j in nodes:
                        if j != i:
                            row[assign[j, k]] = row.get(assign[j, k], 0.0) + flow[i][j]
                    matrix.add_row(row, 0.0, 0.0, name=f"balance[{i},{k}]")
            return
        hub = {k: matrix.add_var(f"hub[{k}]", 0.0, 1.0 if k in allowed else 0.0, cost=hub_cost.get(k, 0.0),
                                 integer=True) for k in nodes}
        collect = {(i, k): matrix.add_var(f"collect[{i},{k}]", cost=leg(data, i, k)) for i in nodes for k in nodes}
        for i in nodes:
            for k, m in pairs:
                route[i, k, m] = matrix.add_var(f"route[{i},{k},{m}]", cost=alpha * leg(data, k, m))
        deliver = {(i, m, j): matrix.add_var(f"deliver[{i},{m},{j}]", cost=leg(data, m, j))
                   for i, j in pairs for m in nodes}
        for i in nodes:
            matrix.add_row({collect[i, k]: 1.0 for k in nodes}, outflow[i], outflow[i], name=f"collected[{i}]")
        for i, j in pairs:
            matrix.add_row({deliver[i, m, j]: 1.0 for m in nodes}, flow[i][j], flow[i][j], name=f"delivered[{i},{j}]")
        for i in nodes:
            for k in nodes:
                row = {collect[i, k]: 1.0}
                for m in nodes:
                    if m != k:
                        row[route[i, m, k]] = 1.0
                        row[route[i, k, m]] = -1.0
                for j in nodes:
                    if j != i:
                        row[deliver[i, k, j]] = -1.0
                matrix.add_row(row, 0.0, 0.0, name=f"balance[{i},{k}]")
        for i in nodes:
            for k in nodes:
                matrix.add_row({collect[i, k]: 1.0, hub[k]: -float(outflow[i])}, upper=0.0,
                               name=f"collect_open[{i},{k}]")
        for (i, m, j), column in deliver.items():
            matrix.add_row({column: 1.0, hub[m]: -float(flow[i][j])}, upper=0.0, name=f"deliver_open[{i},{m},{j}]")
        matrix.add_row({hub[k]: 1.0 for k in nodes}, data["p"], data["p"], name="p_hubs")

    def constraint_rows(self, data: dict, x: dict):
        nodes, flow = data["nodes"], data["flow"]
        outflow = {i: sum(flow[i].values()) for i in nodes}
        pairs = ordered_pairs(nodes)
        route = x["route"]
        not_hub = [k for k in nodes if k not in data.get("candidates", nodes)]
        if data["allocation"] == "single":
            assign = x["assign"]
            for i in nodes:
                yield Row(f"one_hub[{i}]", sum(assign[i, k] for k in nodes), "==", 1)
            for i, k in pairs:
                yield Row(f"open_hub[{i},{k}]", assign[i, k], "<=", assign[k, k])
            yield Row("p_hubs", sum(assign[k, k] for k in nodes), "==", data["p"])
            for i in nodes:
                for k in nodes:
                    net = sum(route[i, k, m] - route[i, m, k] for m in nodes if m != k)
                    yield Row(f"balance[{i},{k}]", net, "==",
                              outflow[i] * assign[i, k] - sum(flow[i][j] * assign[j, k] for j in nodes if j != i))
            for k in not_hub:
                yield Row(f"not_hub[{k}]", assign[k, k], "==", 0)
            return
        hub, collect, deliver = x["hub"], x["collect"], x["deliver"]
        for i in nodes:
            yield Row(f"collected[{i}]", sum(collect[i, k] for k in nodes), "==", outflow[i])
        for i, j in pairs:
            yield Row(f"delivered[{i},{j}]", sum(deliver[i, m, j] for m in nodes), "==", flow[i][j])
        for i in nodes:
            for k in nodes:
                arrives = collect[i, k] + sum(route[i, m, k] for m in nodes if m != k)
                leaves = sum(route[i, k, m] for m in nodes if m != k) + sum(deliver[i, k, j] for j in nodes if j != i)
                yield Row(f"balance[{i},{k}]", arrives, "==", leaves)
                yield Row(f"collect_open[{i},{k}]", collect[i, k], "<=", outflow[i] * hub[k])
        for i, j in pairs:
            for m in nodes:
                yield Row(f"deliver_open[{i},{m},{j}]", deliver[i, m, j], "<=", flow[i][j] * hub[m])
        yield Row("p_hubs", sum(hub[k] for k in nodes), "==", data["p"])
        for k in not_hub:
            yield Row(f"not_hub[{k}]", hub[k], "==", 0)

    def hubs_of(self, data: dict, x: dict) -> list[str]:
        if data["allocation"] == "single":
            return [k for k in data["nodes"] if x["assign"][k, k] > 0.5]
        return [k for k in data["nodes"] if x["hub"][k] > 0.5]

    def objective_value(self, data: dict, x: dict) -> float:
        # recomputed from the hubs (and allocations) alone: every flow takes its cheapest allowed hub path
        nodes, flow, alpha = data["nodes"], data["flow"], data["alpha"]
        hubs = self.hubs_of(data, x)
        total = sum(data.get("hub_cost", {}).get(k, 0) for k in hubs)
        if data["allocation"] == "single":
            home = {i: max(nodes, key=lambda k: x["assign"][i, k]) for i in nodes}
            for i, j in ordered_pairs(nodes):
                total += flow[i][j] * (leg(data, i, home[i]) + alpha * leg(data, home[i], home[j])
                                       + leg(data, home[j], j))
            return total
        for i, j in ordered_pairs(nodes):
            total += flow[i][j] * min(leg(data, i, k) + alpha * leg(data, k, m) + leg(data, m, j)
                                      for k in hubs for m in hubs)
        return total

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        hubs = self.hubs_of(data, x)
        lines = [f"- hubs: {join_names(hubs)}"]
        if data["allocation"] == "single":
            for k in hubs:
                lines.append(f"- {k} serves {join_names([i for i in data['nodes'] if x['assign'][i, k] > 0.5])}")
        return "\n".join(lines)

    # ---------------------------------------------------------------- statement and formulation

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        nodes, node, unit, money = data["nodes"], words["node"], words["distance_unit"], words["money"]
        alpha = fmt(data["alpha"])
        intro = (f"{words['intro']} The {plural(node)} are {join_names(nodes)}; exactly {fmt(data['p'])} of them will be "
                 f"opened as hubs. Every flow travels from its origin to a hub, possibly on to a second hub, and "
                 f"then to its destination (a flow whose origin or destination is itself a hub skips that leg). "
                 f"Moving one unit over a leg costs the leg's distance ({words['rate']}), except that "
                 f"{words['link']} are discounted: they cost {alpha} times the distance.")
        if data["allocation"] == "single":
            intro += (f" Each {node} sends and receives all of its flow through a single hub (a hub uses itself).")
        else:
            intro += f" The flow between two {plural(node)} may be routed through any of the open hubs."
        rules = []
        if "candidates" in data:
            rules.append(f"Only {join_names(data['candidates'])} can become hubs.")
        if "hub_cost" in data and representation == "text":
            rules.append(f"Making a {node} a hub costs (in {money}): "
                         + "; ".join(f"{v} {fmt(data['hub_cost'][v])}" for v in nodes) + ".")
        elif "hub_cost" in data:
            rules.append(f"Each hub also has a set-up cost in {money}, which is part of the total cost.")
        allocated = f", with each {node} allocated to one of them," if data["allocation"] == "single" else ""
        question = (f"Which {fmt(data['p'])} {plural(node)} should become hubs{allocated} to minimize the total cost, and "
                    "what is that cost?")
        rules_text = " ".join(rules)
        if representation == "text":
            flows = "; ".join(f"{a} to {b} {fmt(data['flow'][a][b])}" for a, b in ordered_pairs(nodes))
            distances = "; ".join(f"{a}-{b} {fmt(data['distance'][a][b])}"
                                  for k, a in enumerate(nodes) for b in nodes[k + 1:])
            return " ".join(part for part in (
                intro, f"The flows ({words['flow_word']}) are: {flows}.",
                f"The distances in {unit} are: {distances}.", rules_text, question) if part)
        if representation == "table":
            flow_table = markdown_table([f"flow ({words['flow_word']}), from \\ to", *nodes],
                                        [[a, *["-" if a == b else data["flow"][a][b] for b in nodes]] for a in nodes])
            extra = [f"hub set-up cost ({money})"] if "hub_cost" in data else []
            distance_table = markdown_table(
                [f"distance ({unit})", *nodes, *extra],
                [[a, *["-" if a == b else data["distance"][a][b] for b in nodes],
                  *([data["hub_cost"][a]] if extra else [])] for a in nodes])
            return (f"{intro}\n\n{flow_table}\n\n{distance_table}\n\n"
                    + " ".join(part for part in (rules_text, question) if part))
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return (" ".join(part for part in (intro, rules_text) if part)
                    + f"\n\n{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        setup = "hub_cost" in data
        parameters = ("flow $w_{ij}$, distance $d_{ij}$ ($d_{ii} = 0$), discount $\\alpha$, number of hubs $p$, "
                      "$O_i = \\sum_j w_{ij}$, $D_i = \\sum_j w_{ji}$")
        if setup:
            parameters += ", hub set-up cost $f_k$"
        if "candidates" in data:
            parameters += ", candidate hubs $H \\subseteq N$"
        if data["allocation"] == "single":
            objective = ("\\sum_{i, k} d_{ik} (O_i + D_i) z_{ik} + \\sum_{i} \\sum_{k \\ne l} \\alpha d_{kl} y^i_{kl}"
                         + (" + \\sum_k f_k z_{kk}" if setup else ""))
            rows = ["\\text{s.t.}\\ & \\sum_{k} z_{ik} = 1 && \\forall i",
                    "& z_{ik} \\le z_{kk} && \\forall i \\ne k",
                    "& \\sum_k z_{kk} = p",
                    "& \\sum_{l \\ne k} y^i_{kl} - \\sum_{l \\ne k} y^i_{lk} = O_i z_{ik} - \\sum_{j} w_{ij} z_{jk} "
                    "&& \\forall i, k"]
            if "candidates" in data:
                rows.append("& z_{kk} = 0 && \\forall k \\notin H")
            rows.append("& z_{ik} \\in \\{0, 1\\},\\ y^i_{kl} \\ge 0")
            variables = ("$z_{ik} \\in \\{0, 1\\}$ (node $i$ allocated to hub $k$; $z_{kk}$: $k$ is a hub), "
                         "$y^i_{kl} \\ge 0$ (flow from origin $i$ between hubs $k$ and $l$)")
        else:
            objective = ("\\sum_{i, k} d_{ik} c_{ik} + \\sum_i \\sum_{k \\ne l} \\alpha d_{kl} y^i_{kl} "
                         "+ \\sum_{i \\ne j} \\sum_l d_{lj} x^i_{lj}" + (" + \\sum_k f_k h_k" if setup else ""))
            rows = ["\\text{s.t.}\\ & \\sum_k c_{ik} = O_i && \\forall i",
                    "& \\sum_l x^i_{lj} = w_{ij} && \\forall i \\ne j",
                    "& c_{ik} + \\sum_{l \\ne k} y^i_{lk} = \\sum_{l \\ne k} y^i_{kl} + \\sum_{j \\ne i} x^i_{kj} "
                    "&& \\forall i, k",
                    "& c_{ik} \\le O_i h_k,\\ x^i_{kj} \\le w_{ij} h_k && \\forall i, j, k",
                    "& \\sum_k h_k = p"]
            if "candidates" in data:
                rows.append("& h_k = 0 && \\forall k \\notin H")
            rows.append("& h_k \\in \\{0, 1\\},\\ c, y, x \\ge 0")
            variables = ("$h_k \\in \\{0, 1\\}$ (hub open), $c_{ik}$ (flow of origin $i$ collected at hub $k$), "
                         "$y^i_{kl}$ (between hubs), $x^i_{lj}$ (delivered from hub $l$ to $j$)")
        return (
            "**Sets**: nodes $N$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = HubLocation()
