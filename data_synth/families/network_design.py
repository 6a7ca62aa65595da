"""Fixed-charge network design (MILP): choose which candidate links of a network to open (each with a
fixed opening cost and a capacity) and route flow from supply nodes through hubs to demand nodes,
minimizing opening plus per-unit flow costs.

Structure variants (drawn per instance, recorded by the keys present): a throughput limit at every hub
(`hub_capacity`) and a fixed cost for using a hub at all (`hub_cost`, one more binary per hub: the hubs are
chosen too), each present or absent, so the program has four skeletons (the hub limit with a hub cost
becomes a capacity of the opened hub)."""

from __future__ import annotations

import random
from collections import deque

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
    Scenario("freight", "freight logistics", {
        "company": "a less-than-truckload carrier", "link": "linehaul lane", "open": "operate",
        "sources": ["Port Gate", "Rail Yard", "Airport Cargo"], "hubs": ["Hub North", "Hub South", "Hub West"],
        "sinks": ["Springfield", "Riverton", "Lakeview", "Hillcrest"], "unit": "pallets per day",
        "money": "dollars", "fixed_words": "daily cost of running the lane",
    }),
    Scenario("gas", "energy infrastructure", {
        "company": "a regional gas utility", "link": "pipeline segment", "open": "build",
        "sources": ["Well Field A", "Well Field B", "LNG Terminal"], "hubs": ["Compressor 1", "Compressor 2",
                                                                            "Compressor 3"],
        "sinks": ["Power Plant", "Steel Mill", "City Gate East", "City Gate West"], "unit": "thousand m3 per day",
        "money": "dollars per day", "fixed_words": "daily capital charge for building it",
    }),
    Scenario("fibre", "telecommunications", {
        "company": "a fibre network operator", "link": "fibre link", "open": "lease",
        "sources": ["Data Centre 1", "Data Centre 2", "Cable Landing"], "hubs": ["Exchange A", "Exchange B",
                                                                               "Exchange C"],
        "sinks": ["Business Park", "University", "Hospital", "Suburb"], "unit": "Gbps",
        "money": "dollars per month", "fixed_words": "monthly lease",
    }),
)
# the eval split's own industries, companies, node names, units and currencies (held out from training)
EVAL_SCENARIOS = (
    Scenario("water", "water utilities", {
        "company": "a county water board", "link": "transfer main", "open": "lay",
        "sources": ["Reservoir Alder", "Borehole Cedar", "Desalination Plant"],
        "hubs": ["Pump House 1", "Pump House 2", "Pump House 3"],
        "sinks": ["Old Town", "Mill Quarter", "Harbour District", "Airport Park"], "unit": "megalitres a day",
        "money": "pounds a day", "fixed_words": "daily financing charge for laying it",
    }),
    Scenario("parcel", "parcel delivery", {
        "company": "a parcel courier", "link": "trunk route", "open": "run",
        "sources": ["Sorting Centre Leipzig", "Sorting Centre Kassel", "Air Hub Cologne"],
        "hubs": ["Depot Fulda", "Depot Gotha", "Depot Hof"], "sinks": ["Erfurt", "Jena", "Weimar", "Zwickau"],
        "unit": "parcel cages a night", "money": "euros a night", "fixed_words": "nightly cost of driving the route",
    }),
    Scenario("heat", "district heating", {
        "company": "a district-heating utility", "link": "heat pipe", "open": "install",
        "sources": ["Waste Incinerator", "Biomass Boiler", "Heat Pump Station"],
        "hubs": ["Substation K1", "Substation K2", "Substation K3"],
        "sinks": ["Hospital Campus", "Housing Estate", "Swimming Hall", "Town Hall"], "unit": "megawatts",
        "money": "kronor a year", "fixed_words": "annualised installation cost",
    }),
)


def max_flow_value(nodes: list[str], capacity: dict[tuple[str, str], float], source: str, sink: str) -> float:
    """Edmonds-Karp maximum flow, used only to make sure a sampled network can carry all demand."""
    residual = dict(capacity)
    for (a, b) in list(capacity):
        residual.setdefault((b, a), 0.0)
    neighbours: dict[str, list[str]] = {n: [] for n in nodes}
    for (a, b) in residual:
        neighbours[a].append(b)
    total = 0.0
    while True:
        parent = {source: source}
        queue = deque([source])
        while queue and sink not in parent:
            a = queue.popleft()
            for b in neighbours[a]:
                if b not in parent and residual[a, b] > 1e-9:
                    parent[b] = a
                    queue.append(b)
        if sink not in parent:
            return total
        path, b = [], sink
        while b != source:
            path.append((parent[b], b))
            b = parent[b]
        push = min(residual[edge] for edge in path)
        for a, b in path:
            residual[a, b] -= push
            residual[b, a] += push
        total += push


class NetworkDesign(ProblemFamily):
    name = "network_design"
    title = "Fixed-charge network design"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"flow": "nonnegative", "build": "binary"}
    phrasings = (
        # eval-only rewordings of the family's fixed sentences (training keeps its text)
        Phrasing(r"\bis designing its network\.", ("is designing its network.",),
                 ("is planning the layout of its network.",)),
        Phrasing(r"\bFlow starts at\b", ("Flow starts at",), ("Flow originates at",)),
        Phrasing(r", can pass through\b", (", can pass through",), (", may be routed via",)),
        Phrasing(r", and must reach\b", (", and must reach",), (", and has to arrive at",)),
        Phrasing(r"\bis one-way; it can only carry flow if the company decides to\b",
                 ("is one-way; it can only carry flow if the company decides to",),
                 ("only works in one direction and carries flow only once the firm chooses to",)),
        Phrasing(r"\bit, which costs a fixed amount \(the\b", ("it, which costs a fixed amount (the",),
                 ("it, which incurs a fixed charge (the",)),
        Phrasing(r"\), and then it carries (?=at most its capacity)", ("), and then it carries ",),
                 ("), after which it can take ",)),
        Phrasing(r"\bits capacity at a cost per unit of flow\.",
                 ("its capacity at a cost per unit of flow.",),
                 ("its capacity, paying a price for every unit of flow.",)),
        Phrasing(r"\bnodes neither create nor absorb flow\.", ("nodes neither create nor absorb flow.",),
                 ("nodes keep no flow and add none.",)),
        Phrasing(r"\bUsing an intermediate node at all also costs a fixed amount; flow can pass through it only when it is used\.",
                 ("Using an intermediate node at all also costs a fixed amount; flow can pass through it only when it is used.",),
                 ("A transit node also carries a fixed charge as soon as it is used at all, and only a used node can carry flow.",)),
        Phrasing(r"\bEach intermediate node has a throughput limit on all the flow it receives\.",
                 ("Each intermediate node has a throughput limit on all the flow it receives.",),
                 ("The total flow entering any transit node is capped by its throughput limit.",)),
        Phrasing(r"\bThroughput limits:", ("Throughput limits:",), ("Caps on hub throughput:",)),
        Phrasing(r"\bFixed costs of using a hub:", ("Fixed costs of using a hub:",),
                 ("Fixed charges for using each hub:",)),
        Phrasing(r"\bWhich hubs should be used, which\b", ("Which hubs should be used, which",),
                 ("Which hubs ought to be used and which",)),
        Phrasing(r"\bopened, and how much should flow on each, to deliver every\b",
                 ("opened, and how much should flow on each, to deliver every",),
                 ("opened, and what flow ought each to carry, so as to serve each",)),
        Phrasing(r"\bdemand at minimum total cost \(", ("demand at minimum total cost (",),
                 ("requirement at the least overall cost (",)),
        Phrasing(r"\bfixed costs plus flow costs\)\?", ("fixed costs plus flow costs)?",),
                 ("fixed charges together with flow costs)?",)),
        Phrasing(r"\bWhat is the minimum total cost in\b", ("What is the minimum total cost in",),
                 ("How low can the overall cost go, in",)),
        Phrasing(r"\bAmounts are in\b", ("Amounts are in",), ("Quantities are given in",)),
        Phrasing(r"\band costs in\b", ("and costs in",), ("and money in",)),
        Phrasing(r"\bcan send (?=at most\b)", ("can send ",), ("is able to ship ",)),
        Phrasing(r"\bper unit, fixed cost\b", ("per unit, fixed cost",),
                 ("for each unit of flow, opening cost",)),
        # table headers
        Phrasing(r"(?<=\| )node(?= \|)", ("node",), ("location",)),
        Phrasing(r"(?<=\| )supply \(", ("supply (",), ("availability (",)),
        Phrasing(r"(?<=\| )from(?= \|)", ("from",), ("origin",)),
        Phrasing(r"(?<=\| )to(?= \|)", ("to",), ("destination",)),
        Phrasing(r"(?<=\| )cost per unit \(", ("cost per unit (",), ("flow cost per unit (",)),
        Phrasing(r"(?<=\| )fixed cost \(", ("fixed cost (",), ("opening cost (",)),
        # data.json fields
        Phrasing(r"\blist of node names\b", ("list of node names",), ("names of all nodes",)),
        Phrasing(r"\bmost each supply node can send\b", ("most each supply node can send",),
                 ("largest amount a supply node can ship",)),
        Phrasing(r"\bamount each demand node must receive\b", ("amount each demand node must receive",),
                 ("quantity a demand node has to receive",)),
        Phrasing(r"\(hubs are in neither\)", ("(hubs are in neither)",), ("(hubs appear in neither)",)),
        Phrasing(r'\blist of candidate links, each \{"from", "to", "capacity", "unit_cost", "fixed_cost"\}: a one-way link, its capacity, its cost per unit of flow and its fixed cost if opened',
                 ('list of candidate links, each {"from", "to", "capacity", "unit_cost", "fixed_cost"}: a one-way link, its capacity, its cost per unit of flow and its fixed cost if opened',),
                 ('candidate links as objects {"from", "to", "capacity", "unit_cost", "fixed_cost"} giving a one-directional link with its capacity, its flow cost per unit and the fixed cost of opening it',)),
        Phrasing(r"\bmost flow that can pass through each hub\b",
                 ("most flow that can pass through each hub",),
                 ("throughput cap of every hub",)),
        Phrasing(r"\(only when hubs have a limit\)", ("(only when hubs have a limit)",),
                 ("(present only if hubs are capped)",)),
        Phrasing(r"\bfixed cost of using each hub at all\b", ("fixed cost of using each hub at all",),
                 ("fixed charge for using a hub at all",)),
        Phrasing(r"\(only when hubs have a cost\)", ("(only when hubs have a cost)",),
                 ("(present only if hubs carry a charge)",)),
    )
    data_fields = {
        "nodes": "list of node names",
        "supply": "most each supply node can send, keyed by supply node",
        "demand": "amount each demand node must receive, keyed by demand node (hubs are in neither)",
        "links": "list of candidate links, each {\"from\", \"to\", \"capacity\", \"unit_cost\", \"fixed_cost\"}: "
                 "a one-way link, its capacity, its cost per unit of flow and its fixed cost if opened",
        "hub_capacity": "most flow that can pass through each hub, keyed by hub (only when hubs have a limit)",
        "hub_cost": "fixed cost of using each hub at all, keyed by hub (only when hubs have a cost)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
links = [(link["from"], link["to"]) for link in data["links"]]
info = {(link["from"], link["to"]): link for link in data["links"]}
model.flow = pyo.Var(links, domain=pyo.NonNegativeReals)
model.build = pyo.Var(links, domain=pyo.Binary)  # the link is opened
'''
    _OBJECTIVE = '''\

model.obj = pyo.Objective(
    expr=sum(info[a]["fixed_cost"] * model.build[a] + info[a]["unit_cost"] * model.flow[a] for a in links),
    sense=pyo.minimize,
)
'''
    _OBJECTIVE_HUBS = '''\
hubs = list(data["hub_cost"])
model.use_hub = pyo.Var(hubs, domain=pyo.Binary)  # the hub is used

model.obj = pyo.Objective(
    expr=sum(info[a]["fixed_cost"] * model.build[a] + info[a]["unit_cost"] * model.flow[a] for a in links)
    + sum(data["hub_cost"][h] * model.use_hub[h] for h in hubs),
    sense=pyo.minimize,
)
'''
    _BALANCE = '''\

def net_outflow(model, node):
    return (sum(model.flow[i, j] for (i, j) in links if i == node)
            - sum(model.flow[i, j] for (i, j) in links if j == node))

# supply nodes send at most their supply; demand nodes receive exactly their demand; hubs pass flow on
def balance(model, node):
    if node in data["supply"]:
        return net_outflow(model, node) <= data["supply"][node]
    return net_outflow(model, node) == -data["demand"].get(node, 0)

model.balance = pyo.Constraint(data["nodes"], rule=balance)

# flow only on opened links, up to their capacity
def capacity(model, i, j):
    return model.flow[i, j] <= info[i, j]["capacity"] * model.build[i, j]

model.capacity = pyo.Constraint(links, rule=capacity)
'''
    _HUB_CAPACITY = '''\

# the flow through a hub (all it receives) stays within its throughput limit
model.hub_capacity = pyo.Constraint(list(data["hub_capacity"]), rule=lambda model, h: sum(
    model.flow[i, j] for (i, j) in links if j == h) <= data["hub_capacity"][h])
'''
    _HUB_USE = '''\

# flow passes through a hub only when the hub is used (at most all its inbound links can carry)
model.hub_use = pyo.Constraint(hubs, rule=lambda model, h: sum(model.flow[i, j] for (i, j) in links if j == h)
                               <= sum(info[i, j]["capacity"] for (i, j) in links if j == h) * model.use_hub[h])
'''
    _HUB_USE_CAPACITY = '''\

# flow passes through a hub only when the hub is used, and then within its throughput limit
model.hub_capacity = pyo.Constraint(hubs, rule=lambda model, h: sum(
    model.flow[i, j] for (i, j) in links if j == h) <= data["hub_capacity"][h] * model.use_hub[h])
'''

    model_code = _HEAD + _OBJECTIVE + _BALANCE  # the base model (links only)

    def model_code_for(self, data: dict) -> str:
        limited, costly = "hub_capacity" in data, "hub_cost" in data
        code = self._HEAD + (self._OBJECTIVE_HUBS if costly else self._OBJECTIVE) + self._BALANCE
        if limited and costly:
            return code + self._HUB_USE_CAPACITY
        if costly:
            return code + self._HUB_USE
        return code + self._HUB_CAPACITY if limited else code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("hub_capacity", "hub_cost") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "use_hub": "binary"} if "hub_cost" in data else self.domains

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_sources = size_for(difficulty, 2, 2, 3)
        n_hubs = size_for(difficulty, 2, 3, 3)
        n_sinks = size_for(difficulty, 2, 3, 4)
        sources = words["sources"][:n_sources]
        hubs = words["hubs"][:n_hubs]
        sinks = words["sinks"][:n_sinks]
        demand = {k: rng.randint(4, 20) * 10 for k in sinks}
        total = sum(demand.values())
        supply = {s: int(total * rng.uniform(0.6, 0.9)) // 10 * 10 for s in sources}
        candidate = [(s, h) for s in sources for h in hubs] + [(h, k) for h in hubs for k in sinks]
        # a few direct links that skip the hubs
        direct = [(s, k) for s in sources for k in sinks]
        candidate += rng.sample(direct, n_sinks // 2 + 1)
        capacity, unit_cost, fixed_cost = {}, {}, {}
        for a, b in candidate:
            through = supply[a] if a in supply else demand[b]
            capacity[a, b] = max(20, int(through * rng.uniform(0.5, 1.1)) // 10 * 10)
            unit_cost[a, b] = rng.randint(2, 9) if (a in supply) == (b in demand) else rng.randint(1, 5)
            fixed_cost[a, b] = rng.randint(10, 60) * 10
        # raise capacities until the whole network can carry all demand (checked with a max-flow)
        nodes = [*sources, *hubs, *sinks]
        while True:
            arcs = dict(capacity)
            arcs.update({("super source", s): supply[s] for s in sources})
            arcs.update({(k, "super sink"): demand[k] for k in sinks})
            if max_flow_value([*nodes, "super source", "super sink"], arcs, "super source", "super sink") >= total:
                break
            for key in capacity:
                capacity[key] += 10
        links = [{"from": a, "to": b, "capacity": capacity[a, b], "unit_cost": unit_cost[a, b],
                  "fixed_cost": fixed_cost[a, b]} for a, b in candidate]
        data = {"nodes": nodes, "supply": supply, "demand": demand, "links": links}
        if rng.random() < 0.5:
            # hub limits below their share of the demand, raised until all demand fits again (a max-flow
            # with each hub split into an entry and an exit joined by its limit)
            limit = {h: max(20, int(total * rng.uniform(0.3, 0.6)) // 10 * 10) for h in hubs}
            while True:
                arcs = {(a, f"{b} (in)" if b in limit else b): c for (a, b), c in capacity.items()}
                arcs.update({(f"{h} (in)", h): limit[h] for h in hubs})
                arcs.update({("super source", s): supply[s] for s in sources})
                arcs.update({(k, "super sink"): demand[k] for k in sinks})
                split = [*nodes, *[f"{h} (in)" for h in hubs], "super source", "super sink"]
                if max_flow_value(split, arcs, "super source", "super sink") >= total:
                    break
                for h in hubs:
                    limit[h] += 10
            data["hub_capacity"] = limit
        if rng.random() < 0.5:
            data["hub_cost"] = {h: rng.randint(20, 100) * 10 for h in hubs}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one demand node needs more than all links into it can carry
        sink = rng.choice(sorted(data["demand"]))
        inbound = sum(link["capacity"] for link in data["links"] if link["to"] == sink)
        return {**data, "demand": {**data["demand"], sink: inbound + 10}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        moved, opened = {}, {}
        for link in data["links"]:
            key = (link["from"], link["to"])
            moved[key] = matrix.add_var(f"flow[{key[0]},{key[1]}]", cost=link["unit_cost"])
            opened[key] = matrix.add_var(f"build[{key[0]},{key[1]}]", 0, 1, cost=link["fixed_cost"], integer=True)
            matrix.add_row({moved[key]: 1.0, opened[key]: -link["capacity"]}, upper=0.0,
                           name=f"capacity[{key[0]},{key[1]}]")
        hubs = list(data.get("hub_cost", data.get("hub_capacity", {})))
        used = {h: matrix.add_var(f"use_hub[{h}]", 0, 1, cost=data["hub_cost"][h], integer=True)
                for h in data.get("hub_cost", {})}
        for h in hubs:
            inbound = {column: 1.0 for (a, b), column in moved.items() if b == h}
            if h in used:
                limit = data["hub_capacity"][h] if "hub_capacity" in data else sum(
                    link["capacity"] for link in data["links"] if link["to"] == h)
                matrix.add_row({**inbound, used[h]: -float(limit)}, upper=0.0, name=f"hub[{h}]")
            else:
                matrix.add_row(inbound, upper=data["hub_capacity"][h], name=f"hub[{h}]")
        for node in data["nodes"]:
            row: dict[int, float] = {}
            for (a, b), column in moved.items():
                if a == node:
                    row[column] = row.get(column, 0.0) + 1.0
                if b == node:
                    row[column] = row.get(column, 0.0) - 1.0
            if node in data["supply"]:
                matrix.add_row(row, upper=data["supply"][node], name=f"balance[{node}]")
            else:
                need = -data["demand"].get(node, 0)
                matrix.add_row(row, lower=need, upper=need, name=f"balance[{node}]")

    def constraint_rows(self, data: dict, x: dict):
        flow, build = x["flow"], x["build"]
        for node in data["nodes"]:
            out = sum(flow[link["from"], link["to"]] for link in data["links"] if link["from"] == node)
            into = sum(flow[link["from"], link["to"]] for link in data["links"] if link["to"] == node)
            if node in data["supply"]:
                yield Row(f"balance[{node}]", out - into, "<=", data["supply"][node])
            else:
                yield Row(f"balance[{node}]", out - into, "==", -data["demand"].get(node, 0))
        for link in data["links"]:
            key = (link["from"], link["to"])
            yield Row(f"capacity[{key[0]},{key[1]}]", flow[key], "<=", link["capacity"] * build[key])
        for h in data.get("hub_cost", data.get("hub_capacity", {})):
            into = sum(flow[link["from"], link["to"]] for link in data["links"] if link["to"] == h)
            if "hub_cost" in data:
                limit = data["hub_capacity"][h] if "hub_capacity" in data else sum(
                    link["capacity"] for link in data["links"] if link["to"] == h)
                yield Row(f"hub[{h}]", into - limit * x["use_hub"][h], "<=", 0)
            else:
                yield Row(f"hub[{h}]", into, "<=", data["hub_capacity"][h])

    def objective_value(self, data: dict, x: dict) -> float:
        hubs = sum(cost * x["use_hub"][h] for h, cost in data.get("hub_cost", {}).items())
        return hubs + sum(link["fixed_cost"] * x["build"][link["from"], link["to"]]
                          + link["unit_cost"] * x["flow"][link["from"], link["to"]] for link in data["links"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        link_word, unit, money = words["link"], words["unit"], words["money"]
        sources, sinks = list(data["supply"]), list(data["demand"])
        hubs = [n for n in data["nodes"] if n not in data["supply"] and n not in data["demand"]]
        intro = (f"{words['company'][0].upper()}{words['company'][1:]} is designing its network. Flow starts at "
                 f"{join_names(sources)}, can pass through {join_names(hubs)}, and must reach {join_names(sinks)}. "
                 f"Each candidate {link_word} is one-way; it can only carry flow if the company decides to "
                 f"{words['open']} it, which costs a fixed amount (the {words['fixed_words']}), and then it carries "
                 f"at most its capacity at a cost per unit of flow. Intermediate nodes neither create nor absorb flow.")
        question = (f"Which {plural(link_word)} should be opened, and how much should flow on each, to deliver every "
                    f"demand at minimum total cost (fixed costs plus flow costs)? What is the minimum total cost "
                    f"in {money}?")
        if "hub_cost" in data:
            question = question.replace(f"Which {plural(link_word)} should be opened", f"Which hubs should be used, which "
                                        f"{plural(link_word)} opened").replace("(fixed costs", "(hub and link fixed costs")
            intro += (" Using an intermediate node at all also costs a fixed amount; flow can pass through it only "
                      "when it is used.")
        if "hub_capacity" in data:
            intro += " Each intermediate node has a throughput limit on all the flow it receives."
        hub_text = []
        if representation != "file":
            if "hub_capacity" in data:
                hub_text.append("Throughput limits: " + ", ".join(
                    f"{h} at most {fmt(v)}" for h, v in data["hub_capacity"].items()) + ".")
            if "hub_cost" in data:
                hub_text.append("Fixed costs of using a hub: " + ", ".join(
                    f"{h} {fmt(v)}" for h, v in data["hub_cost"].items()) + ".")
        if hub_text:
            question = " ".join(hub_text) + " " + question
        if representation == "text":
            supply = ", ".join(f"{s} can send at most {fmt(data['supply'][s])}" for s in sources)
            demand = ", ".join(f"{k} needs {fmt(data['demand'][k])}" for k in sinks)
            links = " ".join(f"{link['from']} to {link['to']}: capacity {fmt(link['capacity'])}, "
                             f"{fmt(link['unit_cost'])} per unit, fixed cost {fmt(link['fixed_cost'])}."
                             for link in data["links"])
            return (f"{intro} Amounts are in {unit} and costs in {money}. {supply}; {demand}. Candidate "
                    f"{plural(link_word)}: {links} {question}")
        if representation == "table":
            nodes = markdown_table(["node", f"supply ({unit})", f"demand ({unit})"],
                                   [[s, data["supply"][s], ""] for s in sources]
                                   + [[k, "", data["demand"][k]] for k in sinks])
            links = markdown_table(["from", "to", f"capacity ({unit})", f"cost per unit ({money})",
                                    f"fixed cost ({money})"],
                                   [[link["from"], link["to"], link["capacity"], link["unit_cost"], link["fixed_cost"]]
                                    for link in data["links"]])
            return f"{intro}\n\n{nodes}\n\n{links}\n\n{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        words = scenario.words
        lines = []
        for link in data["links"]:
            key = (link["from"], link["to"])
            if x["build"][key] > 0.5:
                lines.append(f"- {key[0]} -> {key[1]}: {fmt(round(x['flow'][key], 6))} of "
                             f"{fmt(link['capacity'])} {words['unit']}")
        return f"Opened {words['link']}s and their flows:\n" + "\n".join(lines)

    def formulation(self, data: dict) -> str:
        limited, costly = "hub_capacity" in data, "hub_cost" in data
        parameters = "supply $s_i$, demand $d_i$, capacity $u_{ij}$, unit cost $c_{ij}$, fixed cost $f_{ij}$"
        variables = "$x_{ij} \\ge 0$ (flow on link $(i,j)$), $y_{ij} \\in \\{0,1\\}$ (link opened)"
        objective = "\\sum_{(i,j) \\in A} (f_{ij} y_{ij} + c_{ij} x_{ij})"
        rows = ["\\text{s.t.}\\ & \\sum_{(i,j) \\in A} x_{ij} - \\sum_{(j,i) \\in A} x_{ji} \\le s_i && "
                "\\forall i \\in S",
                "& \\sum_{(i,j) \\in A} x_{ij} - \\sum_{(j,i) \\in A} x_{ji} = -d_i && \\forall i \\in N \\setminus S "
                "\\quad (d_i = 0 \\text{ at hubs})",
                "& x_{ij} \\le u_{ij} y_{ij} && \\forall (i,j) \\in A"]
        if limited:
            parameters += ", hub throughput limit $q_h$"
        if costly:
            parameters += ", hub fixed cost $g_h$"
            variables += ", $z_h \\in \\{0,1\\}$ (hub $h$ used)"
            objective += " + \\sum_{h \\in H} g_h z_h"
            limit = "q_h" if limited else "\\sum_{(i,h) \\in A} u_{ih}"
            rows.append(f"& \\sum_{{(i,h) \\in A}} x_{{ih}} \\le {limit} z_h && \\forall h \\in H")
        elif limited:
            rows.append("& \\sum_{(i,h) \\in A} x_{ih} \\le q_h && \\forall h \\in H")
        rows.append("& x_{ij} \\ge 0,\\ y_{ij} \\in \\{0,1\\}")
        return (
            "**Sets**: nodes $N$ (supply nodes $S$, demand nodes $D$, hubs $H$), candidate links $A$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = NetworkDesign()
