"""Transshipment / minimum-cost flow (LP): move goods from plants through intermediate hubs (or directly)
to customers over capacitated arcs, meeting every demand at the least total transport cost.

Structure variants (drawn per instance, recorded by the keys present): a fixed cost for using some lanes at
all (`fixed_cost`, the model becomes a MILP with a binary per such lane), throughput limits at some hubs
(`hub_capacity`), and a handling fee per unit passing through each hub (`handling_cost`), each present or
absent, so the program has eight skeletons. Hub limits are at least what the reference flow `sample` builds
sends through them, so every variant stays feasible."""

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
    plural,
    size_for,
)
from data_synth.statements import Phrasing

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
# the eval split's own industries, companies, node names and units (held out from training)
EVAL_SCENARIOS = (
    Scenario("grain", "grain logistics", {
        "company": "a grain cooperative", "plant_word": "country elevator", "hub_word": "river terminal",
        "customer_word": "flour mill", "unit": "wagonload",
        "plants": ["Elevator Dalby", "Elevator Moree", "Elevator Narrabri", "Elevator Goondiwindi"],
        "hubs": ["Wharf Ashford", "Wharf Bellata", "Wharf Croppa", "Wharf Delungra", "Wharf Emmaville"],
        "customers": ["Mill Tamworth", "Mill Armidale", "Mill Gunnedah", "Mill Inverell", "Mill Walcha",
                      "Mill Quirindi", "Mill Uralla", "Mill Manilla"],
    }),
    Scenario("vaccine", "pharmaceutical distribution", {
        "company": "a vaccine distributor", "plant_word": "manufacturing site", "hub_word": "cold-chain hub",
        "customer_word": "clinic", "unit": "shipper",
        "plants": ["Plant Kalundborg", "Plant Geel", "Plant Puurs", "Plant Marburg"],
        "hubs": ["Hub Aarhus", "Hub Liege", "Hub Venlo", "Hub Erfurt", "Hub Kassel"],
        "customers": ["Clinic Odense", "Clinic Namur", "Clinic Tilburg", "Clinic Jena", "Clinic Fulda",
                      "Clinic Aalborg", "Clinic Hasselt", "Clinic Breda"],
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
    eval_scenarios = EVAL_SCENARIOS
    domains = {"flow": "nonnegative"}
    # the family's fixed sentences of the optional rules, in other words for each split (data_synth.statements)
    phrasings = (
        Phrasing(r"using such a lane at all costs a fixed amount, however much it carries",
                 ("using such a lane at all costs a fixed amount, however much it carries",
                  "such a lane, once used at all, adds a fixed charge whatever its volume"),
                 ("opening such a lane incurs a one-off charge independent of volume",)),
        Phrasing(r"\bcan handle only a limited amount in total\b", ("can handle only a limited amount in total",),
                 ("have a cap on their total throughput",)),
        Phrasing(r"\bcosts a handling fee\b", ("costs a handling fee",), ("is charged a handling fee",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bneither produce nor keep goods: what arrives leaves\.",
                 ("neither produce nor keep goods: what arrives leaves.",),
                 ("hold no stock and make nothing: everything that comes in goes out again.",)),
        Phrasing(r"\bEvery lane has a cost per\b", ("Every lane has a cost per",),
                 ("Each lane charges a price for each",)),
        Phrasing(r"\band a capacity\.", ("and a capacity.",), ("and has a capacity.",)),
        Phrasing(r"\bSome lanes have a fixed cost:", ("Some lanes have a fixed cost:",),
                 ("A few lanes carry a fixed charge:",)),
        Phrasing(r"\(the fixed cost column below\)", ("(the fixed cost column below)",),
                 ("(see the fixed cost column below)",)),
        Phrasing(r"\(given for the lanes that have one\)", ("(given for the lanes that have one)",),
                 ("(listed for the lanes concerned)",)),
        Phrasing(r"\bThe other lanes have none\.", ("The other lanes have none.",),
                 ("All remaining lanes are free of it.",)),
        Phrasing(r"\(given per limited hub\)", ("(given per limited hub)",),
                 ("(stated for each limited hub)",)),
        Phrasing(r"\(given per hub\)", ("(given per hub)",), ("(stated for each hub)",)),
        Phrasing(r"\bHow much should travel on each lane to meet every\b",
                 ("How much should travel on each lane to meet every",),
                 ("What quantity ought to move along each lane so as to satisfy each",)),
        # "are allowed" has two training wordings: the rule stops before it
        Phrasing(r"\bcost\? Fractional amounts (?=are allowed\.)", ("cost? Fractional amounts ",),
                 ("cost? Flows in fractions ",)),
        Phrasing(r"\bSupplies:", ("Supplies:",), ("Available supply:",)),
        Phrasing(r"\bcan send up to\b", ("can send up to",), ("is able to ship as many as",)),
        Phrasing(r"\bLanes:", ("Lanes:",), ("Routes available:",)),
        # table headers
        Phrasing(r"(?<=\| )location(?= \|)", ("location",), ("site",)),
        Phrasing(r"(?<=\| )role(?= \|)", ("role",), ("function",)),
        Phrasing(r"(?<=\| )supply \(", ("supply (",), ("availability (",)),
        Phrasing(r"(?<=\| )from(?= \|)", ("from",), ("origin",)),
        Phrasing(r"(?<=\| )to(?= \|)", ("to",), ("destination",)),
        Phrasing(r"(?<=\| )cost \(\$/", ("cost ($/",), ("unit price ($/",)),
        Phrasing(r"(?<=\| )fixed cost \(\$\)", ("fixed cost ($)",), ("fixed charge ($)",)),
        # data.json fields
        Phrasing(r"\blist of supply nodes\b", ("list of supply nodes",), ("names of the supply nodes",)),
        Phrasing(r"\blist of transshipment nodes \(no supply, no demand\)",
                 ("list of transshipment nodes (no supply, no demand)",),
                 ("names of the transshipment nodes, which neither supply nor demand",)),
        Phrasing(r"\blist of demand nodes\b", ("list of demand nodes",), ("names of the demand nodes",)),
        Phrasing(r"\bmost units each plant can send out\b", ("most units each plant can send out",),
                 ("largest quantity a plant can ship",)),
        Phrasing(r"\bunits each customer must receive\b", ("units each customer must receive",),
                 ("quantity a customer has to receive",)),
        Phrasing(r"\blist of arcs \{from, to, cost \(dollars per unit\), capacity \(most units\)\}",
                 ("list of arcs {from, to, cost (dollars per unit), capacity (most units)}",),
                 ("arcs as objects {from, to, cost (in dollars for one unit), capacity (upper limit in units)}",)),
        Phrasing(r"\blist of \[from, to, dollars\] triples: the fixed cost of using that lane at all; lanes not listed have none\b",
                 ("list of [from, to, dollars] triples: the fixed cost of using that lane at all; lanes not listed have none",),
                 ("fixed charges, written as [from, to, dollars], for using a lane at all; a lane that is absent has no fixed charge",)),
        Phrasing(r"\(only when some lanes have fixed costs\)", ("(only when some lanes have fixed costs)",),
                 ("(present only if some lanes carry fixed charges)",)),
        Phrasing(r"\bmost units that may pass through each limited hub\b",
                 ("most units that may pass through each limited hub",),
                 ("throughput cap of every limited hub",)),
        Phrasing(r"\(only when some hubs have a throughput limit\)",
                 ("(only when some hubs have a throughput limit)",),
                 ("(present only if some hubs are capped)",)),
        Phrasing(r"\bdollars per unit passing through each hub\b",
                 ("dollars per unit passing through each hub",),
                 ("handling fee in dollars for one unit going via a hub",)),
        Phrasing(r"\(only when hubs charge a handling fee\)", ("(only when hubs charge a handling fee)",),
                 ("(present only if hubs charge handling fees)",)),
    )
    data_fields = {
        "plants": "list of supply nodes",
        "hubs": "list of transshipment nodes (no supply, no demand)",
        "customers": "list of demand nodes",
        "supply": "most units each plant can send out, keyed by plant",
        "demand": "units each customer must receive, keyed by customer",
        "arcs": "list of arcs {from, to, cost (dollars per unit), capacity (most units)}",
        "fixed_cost": "list of [from, to, dollars] triples: the fixed cost of using that lane at all; lanes not "
                      "listed have none (only when some lanes have fixed costs)",
        "hub_capacity": "most units that may pass through each limited hub, keyed by hub (only when some hubs "
                        "have a throughput limit)",
        "handling_cost": "dollars per unit passing through each hub, keyed by hub (only when hubs charge a "
                         "handling fee)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = """\
model = pyo.ConcreteModel()
arcs = {(a["from"], a["to"]): a for a in data["arcs"]}
model.A = pyo.Set(initialize=list(arcs), dimen=2)
model.flow = pyo.Var(model.A, domain=pyo.NonNegativeReals)
"""
    _OPEN_VARIABLE = """\
fixed = {(a[0], a[1]): a[2] for a in data["fixed_cost"]}
model.F = pyo.Set(initialize=list(fixed), dimen=2)  # the lanes with a fixed cost
model.open = pyo.Var(model.F, domain=pyo.Binary)  # 1 when the lane carries anything
"""
    _COST = """\

cost = sum(arcs[a]["cost"] * model.flow[a] for a in model.A)
"""
    _FIXED_COST = """\
cost += sum(fixed[a] * model.open[a] for a in model.F)
"""
    _HANDLING_COST = """\
cost += sum(data["handling_cost"][j] * model.flow[i, j] for i, j in model.A if j in data["handling_cost"])
"""
    _BALANCES = """\
model.obj = pyo.Objective(expr=cost, sense=pyo.minimize)

def net_outflow(model, n):
    out = sum(model.flow[i, j] for i, j in model.A if i == n)
    into = sum(model.flow[i, j] for i, j in model.A if j == n)
    return out - into

model.supply = pyo.Constraint(data["plants"], rule=lambda model, n: net_outflow(model, n) <= data["supply"][n])
model.balance = pyo.Constraint(data["hubs"], rule=lambda model, n: net_outflow(model, n) == 0)
model.demand = pyo.Constraint(data["customers"], rule=lambda model, n: -net_outflow(model, n) >= data["demand"][n])
"""
    _ARC_CAPACITY = """\
model.arc_capacity = pyo.Constraint(model.A, rule=lambda model, i, j: model.flow[i, j] <= arcs[i, j]["capacity"])
"""
    _OPEN_LANE = """\
# a lane with a fixed cost carries goods only when it is used
model.open_lane = pyo.Constraint(
    model.F, rule=lambda model, i, j: model.flow[i, j] <= arcs[i, j]["capacity"] * model.open[i, j]
)
"""
    _HUB_CAPACITY = """\
model.hub_capacity = pyo.Constraint(
    list(data["hub_capacity"]),
    rule=lambda model, h: sum(model.flow[i, j] for i, j in model.A if j == h) <= data["hub_capacity"][h],
)
"""

    model_code = _HEAD + _COST + _BALANCES + _ARC_CAPACITY  # the base model (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        fixed = "fixed_cost" in data
        code = self._HEAD + (self._OPEN_VARIABLE if fixed else "") + self._COST
        code += self._FIXED_COST if fixed else ""
        code += self._HANDLING_COST if "handling_cost" in data else ""
        code += self._BALANCES + self._ARC_CAPACITY + (self._OPEN_LANE if fixed else "")
        if "hub_capacity" in data:
            code += self._HUB_CAPACITY
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("fixed_cost", "hub_capacity", "handling_cost") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "open": "binary"} if "fixed_cost" in data else self.domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "fixed_cost" in data else "LP"

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
        data = {"plants": plants, "hubs": hubs, "customers": customers, "supply": supply, "demand": demand,
                "arcs": arcs}
        if rng.random() < 0.5:
            # about a third of the lanes (so the MILP stays quick to solve at every size)
            charged = sorted(rng.sample(range(len(arcs)), max(2, len(arcs) // 3)))
            data["fixed_cost"] = [[arcs[k]["from"], arcs[k]["to"], rng.randint(6, 50) * 5] for k in charged]
        if rng.random() < 0.5:
            # about half the hubs get a limit, never below what the reference flow sends through them
            through = {h: sum(v for (_, j), v in reference.items() if j == h) for h in hubs}
            limited = sorted(rng.sample(hubs, max(1, len(hubs) // 2)), key=hubs.index)
            data["hub_capacity"] = {h: max(through[h], math.ceil(through[h] * rng.uniform(1.0, 1.3)), 10)
                                    for h in limited}
        if rng.random() < 0.5:
            data["handling_cost"] = {h: rng.randint(1, 6) for h in hubs}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # the lanes into one customer together carry less than its demand
        data = dict(data)
        customer = rng.choice(data["customers"])
        incoming = [a for a in data["arcs"] if a["to"] == customer]
        share = data["demand"][customer] // (len(incoming) + 1)
        data["arcs"] = [dict(a, capacity=share) if a["to"] == customer else a for a in data["arcs"]]
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        handling = data.get("handling_cost", {})
        columns = {}
        for arc in data["arcs"]:
            cost = arc["cost"] + handling.get(arc["to"], 0)  # the fee is paid on the way into a hub
            columns[_arc_key(arc)] = matrix.add_var(f"flow[{arc['from']},{arc['to']}]", 0.0, arc["capacity"],
                                                    cost=cost)
        for i, j, fixed in data.get("fixed_cost", ()):
            capacity = next(arc["capacity"] for arc in data["arcs"] if _arc_key(arc) == (i, j))
            used = matrix.add_var(f"open[{i},{j}]", 0.0, 1.0, cost=fixed, integer=True)
            matrix.add_row({columns[i, j]: 1.0, used: -float(capacity)}, upper=0.0, name=f"open_lane[{i},{j}]")

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
        for h, limit in data.get("hub_capacity", {}).items():
            matrix.add_row({column: 1.0 for (_, j), column in columns.items() if j == h}, upper=limit,
                           name=f"hub_capacity[{h}]")

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
        if "fixed_cost" in data:
            capacity = {_arc_key(arc): arc["capacity"] for arc in data["arcs"]}
            for i, j, _ in data["fixed_cost"]:
                yield Row(f"open_lane[{i},{j}]", flow[i, j], "<=", capacity[i, j] * x["open"][i, j])
        for h, limit in data.get("hub_capacity", {}).items():
            yield Row(f"hub_capacity[{h}]", sum(v for (_, j), v in flow.items() if j == h), "<=", limit)

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(arc["cost"] * x["flow"][_arc_key(arc)] for arc in data["arcs"])
        for i, j, fixed in data.get("fixed_cost", ()):
            total += fixed * x["open"][i, j]
        for (_, j), value in x["flow"].items():
            total += data.get("handling_cost", {}).get(j, 0) * value
        return total

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        unit = scenario.words["unit"]
        return "\n".join(f"- {i} -> {j}: {fmt(round(v, 6))} {plural(unit)}" for (i, j), v in x["flow"].items() if v > 1e-9)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        unit, hub_word = words["unit"], words["hub_word"]
        plants, hubs, customers = data["plants"], data["hubs"], data["customers"]
        intro = {
            "retail": f"{words['company'].capitalize()} ships from its factories ({join_names(plants)}) through "
                      f"distribution centers ({join_names(hubs)}) to its stores ({join_names(customers)}).",
            "energy": f"{words['company'].capitalize()} moves fuel from refineries ({join_names(plants)}) via "
                      f"storage terminals ({join_names(hubs)}) to depots ({join_names(customers)}).",
            "relief": f"{words['company'].capitalize()} routes supplies from {join_names(plants)} through the "
                      f"staging areas {join_names(hubs)} to {join_names(customers)}.",
            "grain": f"{words['company'].capitalize()} hauls wheat from its country elevators ({join_names(plants)}) "
                     f"by way of river terminals ({join_names(hubs)}) to flour mills ({join_names(customers)}).",
            "vaccine": f"{words['company'].capitalize()} distributes vaccines from manufacturing sites "
                       f"({join_names(plants)}) by way of cold-chain hubs ({join_names(hubs)}) to clinics "
                       f"({join_names(customers)}).",
        }[scenario.key]
        rules = (f"Intermediate {plural(hub_word)} neither produce nor keep goods: what arrives leaves. Every "
                 f"lane has a cost per {unit} and a capacity.")
        listed = representation != "file"
        extra = []  # the optional rules, stated in words in every representation
        if "fixed_cost" in data:
            fixed = ("; ".join(f"{i} to {j} ${fmt(amount)}" for i, j, amount in data["fixed_cost"])
                     if representation == "text" else "")
            where = {"text": f": {fixed}", "table": " (the fixed cost column below)",
                     "file": " (given for the lanes that have one)"}[representation]
            extra.append(f"Some lanes have a fixed cost: using such a lane at all costs a fixed amount, however "
                         f"much it carries{where}. The other lanes have none.")
        if "hub_capacity" in data:
            limits = "; ".join(f"{h} at most {fmt(limit)} {plural(unit)}" for h, limit in data["hub_capacity"].items())
            extra.append(f"Some {plural(hub_word)} can handle only a limited amount in total"
                         + (f": {limits}." if listed else " (given per limited hub)."))
        if "handling_cost" in data:
            fees = "; ".join(f"{h} ${fmt(fee)}" for h, fee in data["handling_cost"].items())
            extra.append(f"Every {unit} passing through a {hub_word} costs a handling fee"
                         + (f": {fees}." if listed else " (given per hub)."))
        costs = ["transport"] + (["handling"] if "handling_cost" in data else []) + (
            ["fixed lane"] if "fixed_cost" in data else [])
        what = "transport cost" if len(costs) == 1 else f"cost ({join_names(costs)} costs)"
        question = (f"How much should travel on each lane to meet every {words['customer_word']}'s demand at the "
                    f"lowest total {what}, and what is that cost? Fractional amounts are allowed.")
        extra_text = "".join(f" {rule}" for rule in extra)
        if representation == "text":
            parts = [intro, rules]
            parts.append("Supplies: " + "; ".join(f"{p} can send up to {fmt(data['supply'][p])} {plural(unit)}"
                                                 for p in plants) + ".")
            parts.append("Demands: " + "; ".join(f"{c} needs {fmt(data['demand'][c])} {plural(unit)}"
                                                for c in customers) + ".")
            parts.append("Lanes: " + "; ".join(f"{a['from']} to {a['to']} costs ${fmt(a['cost'])} per {unit}, at "
                                              f"most {fmt(a['capacity'])} {plural(unit)}" for a in data["arcs"]) + ".")
            parts += extra
            parts.append(question)
            return " ".join(parts)
        if representation == "table":
            nodes = markdown_table(["location", "role", f"supply ({plural(unit)})", f"demand ({plural(unit)})"],
                                   [[p, words["plant_word"], data["supply"][p], ""] for p in plants]
                                   + [[h, hub_word, "", ""] for h in hubs]
                                   + [[c, words["customer_word"], "", data["demand"][c]] for c in customers])
            headers = ["from", "to", f"cost ($/{unit})", f"capacity ({plural(unit)})"]
            rows = [[a["from"], a["to"], a["cost"], a["capacity"]] for a in data["arcs"]]
            if "fixed_cost" in data:
                charged = {(i, j): amount for i, j, amount in data["fixed_cost"]}
                headers.append("fixed cost ($)")
                rows = [row + [charged.get((row[0], row[1]), "none")] for row in rows]
            lanes = markdown_table(headers, rows)
            return f"{intro} {rules}{extra_text}\n\n{nodes}\n\nLanes:\n\n{lanes}\n\n{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro} {rules}{extra_text}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        sets = "plants $P$, hubs $H$, customers $C$, arcs $A$"
        parameters = "supply $s_p$, demand $d_c$, arc cost $c_a$, arc capacity $u_a$"
        variables = "$x_a \\ge 0$, units on arc $a$"
        objective = "\\sum_{a \\in A} c_a x_a"
        capacity = "& 0 \\le x_a \\le u_a && \\forall a \\in A"
        rows = [
            "\\text{s.t.}\\ & \\sum_{a \\in \\delta^+(p)} x_a - \\sum_{a \\in \\delta^-(p)} x_a \\le s_p && \\forall p \\in P",
            "& \\sum_{a \\in \\delta^+(h)} x_a - \\sum_{a \\in \\delta^-(h)} x_a = 0 && \\forall h \\in H",
            "& \\sum_{a \\in \\delta^-(c)} x_a - \\sum_{a \\in \\delta^+(c)} x_a \\ge d_c && \\forall c \\in C",
        ]
        if "handling_cost" in data:
            parameters += ", handling fee $g_h$ per unit entering hub $h$"
            objective += " + \\sum_{h \\in H} g_h \\sum_{a \\in \\delta^-(h)} x_a"
        if "fixed_cost" in data:
            parameters += ", fixed lane cost $f_a$"
            sets += ", lanes with a fixed cost $F \\subseteq A$"
            variables += "; $y_a \\in \\{0, 1\\}$, 1 when arc $a \\in F$ is used"
            objective += " + \\sum_{a \\in F} f_a y_a"
        rows.append(capacity)
        if "fixed_cost" in data:
            rows.append("& x_a \\le u_a y_a && \\forall a \\in F")
        if "hub_capacity" in data:
            sets += ", limited hubs $L \\subseteq H$"
            parameters += ", hub throughput limit $q_h$"
            rows.append("& \\sum_{a \\in \\delta^-(h)} x_a \\le q_h && \\forall h \\in L")
        return (
            f"**Sets**: {sets}; $\\delta^+(n)$ and $\\delta^-(n)$ are the arcs leaving and entering node $n$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = MinCostFlow()
