"""Transshipment / minimum-cost flow (LP): move goods from plants through intermediate hubs (or directly)
to customers over capacitated arcs, meeting every demand at the least total transport cost."""

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
    size_for,
)

SCENARIOS = (
    Scenario("retail", "retail supply chain", {
        "company": "a home-goods retailer", "plant_word": "factory", "hub_word": "distribution center",
        "customer_word": "store", "unit": "pallet",
        "plants": ["Factory Leeds", "Factory Porto", "Factory Lodz", "Factory Brno"],
        "hubs": ["DC Lyon", "DC Milan", "DC Ghent", "DC Basel", "DC Graz"],
        "customers": ["Store Paris", "Store Rome", "Store Vienna", "Store Munich", "Store Madrid",
                      "Store Zurich", "Store Prague", "Store Turin"],
    }),
    Scenario("energy", "fuel distribution", {
        "company": "a fuel distributor", "plant_word": "refinery", "hub_word": "storage terminal",
        "customer_word": "depot", "unit": "thousand litres",
        "plants": ["Refinery Gulf", "Refinery Coast", "Refinery Delta", "Refinery Ridge"],
        "hubs": ["Terminal 1", "Terminal 2", "Terminal 3", "Terminal 4", "Terminal 5"],
        "customers": ["Depot Alder", "Depot Brook", "Depot Cliff", "Depot Dune", "Depot Fern", "Depot Glen",
                      "Depot Heath", "Depot Isle"],
    }),
    Scenario("relief", "disaster relief", {
        "company": "an emergency-relief agency", "plant_word": "supply base", "hub_word": "staging area",
        "customer_word": "shelter", "unit": "tonne",
        "plants": ["Base Alpha", "Base Bravo", "Base Charlie", "Base Delta"],
        "hubs": ["Staging East", "Staging West", "Staging North", "Staging South", "Staging Centre"],
        "customers": ["Shelter 1", "Shelter 2", "Shelter 3", "Shelter 4", "Shelter 5", "Shelter 6",
                      "Shelter 7", "Shelter 8"],
    }),
)


def _arc_key(arc: dict) -> tuple[str, str]:
    return arc["from"], arc["to"]


class MinCostFlow(ProblemFamily):
    name = "min_cost_flow"
    title = "Transshipment (minimum-cost flow)"
    problem_type = "LP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"flow": "nonnegative"}
    data_fields = {
        "plants": "list of supply nodes",
        "hubs": "list of transshipment nodes (no supply, no demand)",
        "customers": "list of demand nodes",
        "supply": "most units each plant can send out, keyed by plant",
        "demand": "units each customer must receive, keyed by customer",
        "arcs": "list of arcs {from, to, cost (dollars per unit), capacity (most units)}",
    }
    model_code = '''\
model = pyo.ConcreteModel()
arcs = {(a["from"], a["to"]): a for a in data["arcs"]}
model.A = pyo.Set(initialize=list(arcs), dimen=2)
model.flow = pyo.Var(model.A, domain=pyo.NonNegativeReals)

model.obj = pyo.Objective(expr=sum(arcs[a]["cost"] * model.flow[a] for a in model.A), sense=pyo.minimize)

def net_outflow(model, n):
    out = sum(model.flow[i, j] for i, j in model.A if i == n)
    into = sum(model.flow[i, j] for i, j in model.A if j == n)
    return out - into

model.supply = pyo.Constraint(data["plants"], rule=lambda model, n: net_outflow(model, n) <= data["supply"][n])
model.balance = pyo.Constraint(data["hubs"], rule=lambda model, n: net_outflow(model, n) == 0)
model.demand = pyo.Constraint(data["customers"], rule=lambda model, n: -net_outflow(model, n) >= data["demand"][n])
model.arc_capacity = pyo.Constraint(model.A, rule=lambda model, i, j: model.flow[i, j] <= arcs[i, j]["capacity"])
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        plants = rng.sample(words["plants"], size_for(difficulty, 2, 3, 4))
        hubs = rng.sample(words["hubs"], size_for(difficulty, 2, 3, 5))
        customers = rng.sample(words["customers"], size_for(difficulty, 3, 5, 8))
        demand = {c: rng.randint(20, 120) for c in customers}
        shares = [rng.uniform(0.6, 1.4) for _ in plants]
        total = sum(demand.values()) * rng.uniform(1.1, 1.35)
        supply = {p: math.ceil(total * share / sum(shares)) for p, share in zip(plants, shares, strict=True)}
        # a reference flow (plants fill customers in turn, each pair through a random hub) keeps it feasible
        reference: dict[tuple[str, str], int] = {}
        remaining = dict(supply)
        for c in customers:
            need = demand[c]
            for p in plants:
                amount = min(need, remaining[p])
                if amount <= 0:
                    continue
                hub = rng.choice(hubs)
                reference[p, hub] = reference.get((p, hub), 0) + amount
                reference[hub, c] = reference.get((hub, c), 0) + amount
                remaining[p] -= amount
                need -= amount
                if need == 0:
                    break
        pairs = [(p, h) for p in plants for h in hubs] + [(h, c) for h in hubs for c in customers]
        pairs += [(p, c) for p in plants for c in customers if rng.random() < 0.2]  # a few direct lanes
        pairs += [(g, h) for g in hubs for h in hubs if g != h and rng.random() < 0.15]  # hub to hub
        arcs = []
        for i, j in pairs:
            direct = i in plants and j in customers
            cost = rng.randint(6, 25) if direct else rng.randint(1, 12)
            used = reference.get((i, j), 0)
            capacity = math.ceil(used * rng.uniform(1.0, 1.5)) + rng.randint(0, 15) if used else rng.randint(15, 90)
            arcs.append({"from": i, "to": j, "cost": cost, "capacity": capacity})
        return {"plants": plants, "hubs": hubs, "customers": customers, "supply": supply, "demand": demand,
                "arcs": arcs}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # the lanes into one customer together carry less than its demand
        data = dict(data)
        customer = rng.choice(data["customers"])
        incoming = [a for a in data["arcs"] if a["to"] == customer]
        share = data["demand"][customer] // (len(incoming) + 1)
        data["arcs"] = [dict(a, capacity=share) if a["to"] == customer else a for a in data["arcs"]]
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        columns = {}
        for arc in data["arcs"]:
            columns[_arc_key(arc)] = matrix.add_var(f"flow[{arc['from']},{arc['to']}]", 0.0, arc["capacity"],
                                                    cost=arc["cost"])

        def net_outflow(node: str) -> dict[int, float]:
            coefficients: dict[int, float] = {}
            for (i, j), column in columns.items():
                if i == node:
                    coefficients[column] = coefficients.get(column, 0.0) + 1.0
                if j == node:
                    coefficients[column] = coefficients.get(column, 0.0) - 1.0
            return coefficients

        for p in data["plants"]:
            matrix.add_row(net_outflow(p), upper=data["supply"][p], name=f"supply[{p}]")
        for h in data["hubs"]:
            matrix.add_row(net_outflow(h), lower=0.0, upper=0.0, name=f"balance[{h}]")
        for c in data["customers"]:
            matrix.add_row(net_outflow(c), upper=-data["demand"][c], name=f"demand[{c}]")

    def constraint_rows(self, data: dict, x: dict):
        flow = x["flow"]
        if set(flow) != {_arc_key(a) for a in data["arcs"]}:
            raise ValueError("the solution's flow variables do not match the instance's arcs")

        def net_outflow(node: str) -> float:
            return sum(v for (i, _), v in flow.items() if i == node) - sum(v for (_, j), v in flow.items() if j == node)

        for p in data["plants"]:
            yield Row(f"supply[{p}]", net_outflow(p), "<=", data["supply"][p])
        for h in data["hubs"]:
            yield Row(f"balance[{h}]", net_outflow(h), "==", 0)
        for c in data["customers"]:
            yield Row(f"demand[{c}]", -net_outflow(c), ">=", data["demand"][c])
        for arc in data["arcs"]:
            yield Row(f"arc_capacity[{arc['from']},{arc['to']}]", flow[_arc_key(arc)], "<=", arc["capacity"])

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(arc["cost"] * x["flow"][_arc_key(arc)] for arc in data["arcs"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        unit = scenario.words["unit"]
        return "\n".join(f"- {i} -> {j}: {fmt(round(v, 6))} {unit}s" for (i, j), v in x["flow"].items() if v > 1e-9)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        unit = words["unit"]
        plants, hubs, customers = data["plants"], data["hubs"], data["customers"]
        intro = {
            "retail": f"{words['company'].capitalize()} ships from its factories ({join_names(plants)}) through "
                      f"distribution centers ({join_names(hubs)}) to its stores ({join_names(customers)}).",
            "energy": f"{words['company'].capitalize()} moves fuel from refineries ({join_names(plants)}) via "
                      f"storage terminals ({join_names(hubs)}) to depots ({join_names(customers)}).",
            "relief": f"{words['company'].capitalize()} routes supplies from {join_names(plants)} through the "
                      f"staging areas {join_names(hubs)} to {join_names(customers)}.",
        }[scenario.key]
        rules = (f"Intermediate {words['hub_word']}s neither produce nor keep goods: what arrives leaves. Every "
                 f"lane has a cost per {unit} and a capacity.")
        question = (f"How much should travel on each lane to meet every {words['customer_word']}'s demand at the "
                    "lowest total transport cost, and what is that cost? Fractional amounts are allowed.")
        if representation == "text":
            parts = [intro, rules]
            parts.append("Supplies: " + "; ".join(f"{p} can send up to {fmt(data['supply'][p])} {unit}s"
                                                 for p in plants) + ".")
            parts.append("Demands: " + "; ".join(f"{c} needs {fmt(data['demand'][c])} {unit}s"
                                                for c in customers) + ".")
            parts.append("Lanes: " + "; ".join(f"{a['from']} to {a['to']} costs ${fmt(a['cost'])} per {unit}, at "
                                              f"most {fmt(a['capacity'])} {unit}s" for a in data["arcs"]) + ".")
            parts.append(question)
            return " ".join(parts)
        if representation == "table":
            nodes = markdown_table(["location", "role", f"supply ({unit}s)", f"demand ({unit}s)"],
                                   [[p, words["plant_word"], data["supply"][p], ""] for p in plants]
                                   + [[h, words["hub_word"], "", ""] for h in hubs]
                                   + [[c, words["customer_word"], "", data["demand"][c]] for c in customers])
            lanes = markdown_table(["from", "to", f"cost ($/{unit})", f"capacity ({unit}s)"],
                                   [[a["from"], a["to"], a["cost"], a["capacity"]] for a in data["arcs"]])
            return f"{intro} {rules}\n\n{nodes}\n\nLanes:\n\n{lanes}\n\n{question}"
        if representation == "file":
            return f"{intro} {rules}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: plants $P$, hubs $H$, customers $C$, arcs $A$; "
            "$\\delta^+(n)$ and $\\delta^-(n)$ are the arcs leaving and entering node $n$.\n\n"
            "**Parameters**: supply $s_p$, demand $d_c$, arc cost $c_a$, arc capacity $u_a$.\n\n"
            "**Variables**: $x_a \\ge 0$, units on arc $a$.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{a \\in A} c_a x_a \\\\\n"
            "\\text{s.t.}\\ & \\sum_{a \\in \\delta^+(p)} x_a - \\sum_{a \\in \\delta^-(p)} x_a \\le s_p && \\forall p \\in P \\\\\n"
            "& \\sum_{a \\in \\delta^+(h)} x_a - \\sum_{a \\in \\delta^-(h)} x_a = 0 && \\forall h \\in H \\\\\n"
            "& \\sum_{a \\in \\delta^-(c)} x_a - \\sum_{a \\in \\delta^+(c)} x_a \\ge d_c && \\forall c \\in C \\\\\n"
            "& 0 \\le x_a \\le u_a && \\forall a \\in A\n\\end{aligned}\n$$"
        )


FAMILY = MinCostFlow()
