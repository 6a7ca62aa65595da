"""Capacitated facility location (MILP): open facilities with fixed costs and limited capacities and ship
from them to customers, meeting every demand at minimum fixed plus shipping cost.

Structure variants (drawn per instance, recorded by the keys present): every customer supplied by a
single facility (`single_source`: binary assignments replace the shipped amounts, the model becomes an
IP), a limit on the number of facilities that operate (`max_open`) and a minimum throughput for every
facility that operates (`min_throughput`), each present or absent, so the program has eight skeletons.
The limits are drawn around a feasible plan (the largest facilities filled in turn), so every variant
stays feasible."""

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
    Scenario("concrete", "building materials", {
        "facility": "batching plant", "facility_names": ["Aston", "Brookfield", "Carlow", "Dunmore", "Elmwood",
                                                         "Fairport", "Glenside"],
        "customer": "construction site", "customer_prefix": "Site ", "unit": "cubic metres",
        "one_unit": "cubic metre", "period": "week", "money": "dollars",
        "intro": "A ready-mix concrete supplier can lease mobile batching plants at several candidate yards "
                 "for a large building programme.",
    }),
    Scenario("cold_storage", "food distribution", {
        "facility": "cold-storage warehouse", "facility_names": ["Harbourside", "Northgate", "Westfield",
                                                                 "Eastbank", "Millbrook", "Southport", "Kingsway"],
        "customer": "supermarket", "customer_prefix": "Supermarket ", "unit": "pallets", "one_unit": "pallet",
        "period": "week", "money": "euros",
        "intro": "A frozen-food distributor is choosing which cold-storage warehouses to lease.",
    }),
    Scenario("datacenter", "cloud services", {
        "facility": "data centre", "facility_names": ["Dublin", "Frankfurt", "Madrid", "Milan", "Stockholm",
                                                      "Warsaw", "Zurich"],
        "customer": "customer region", "customer_prefix": "Region ", "unit": "compute units",
        "one_unit": "compute unit", "period": "day", "money": "dollars",
        "intro": "A cloud provider decides which data centres to keep online; serving a region from a data "
                 "centre costs network transit per compute unit.",
    }),
)

# the eval split's own industries, companies, facility and customer names, units and currencies (held out
# from training)
EVAL_SCENARIOS = (
    Scenario("hospital_linen", "healthcare laundry", {
        "facility": "laundry plant", "facility_names": ["Ashby", "Bramley", "Colwick", "Denholme", "Eskdale",
                                                        "Fenwick", "Grantham"],
        "customer": "hospital", "customer_prefix": "Hospital ", "unit": "linen carts", "one_unit": "linen cart",
        "period": "day", "money": "pounds",
        "intro": "A healthcare linen service is deciding which of its laundry plants to keep running for the "
                 "region's hospitals.",
    }),
    Scenario("water", "drinking water supply", {
        "facility": "pumping station", "facility_names": ["Kestrel Ridge", "Otter Creek", "Heron Lake",
                                                          "Badger Hill", "Falcon Rise", "Marten Vale",
                                                          "Plover Point"],
        "customer": "town", "customer_prefix": "Town ", "unit": "megalitres", "one_unit": "megalitre",
        "period": "day", "money": "dollars",
        "intro": "A regional water authority is deciding which pumping stations to commission for the towns "
                 "it serves.",
    }),
    Scenario("printing", "book printing and distribution", {
        "facility": "print shop", "facility_names": ["Lindenau", "Plagwitz", "Gohlis", "Connewitz", "Reudnitz",
                                                     "Lausen", "Schleussig"],
        "customer": "bookstore", "customer_prefix": "Store ", "unit": "cartons", "one_unit": "carton",
        "period": "week", "money": "euros",
        "intro": "A book distributor is weighing which regional print shops to put under contract for its "
                 "stores.",
    }),
)


class FacilityLocationCapacitated(ProblemFamily):
    name = "facility_location_capacitated"
    title = "Capacitated facility location"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"open": "binary", "ship": "nonnegative"}
    # the family's own sentences of the optional rules, in other words for each split (data_synth.statements)
    phrasings = (
        Phrasing(r"must be supplied entirely by a single", ("must be supplied entirely by a single",
                                                            "must receive all its units from one"),
                 ("is to be served in full by just one", "takes its whole demand from one")),
        Phrasing(r"\bmay operate\b(?=\.)", ("may operate", "can be operated"), ("are allowed to run",)),
        Phrasing(r"that operates must supply at least its minimum throughput",
                 ("that operates must supply at least its minimum throughput",
                  "that is operated has to deliver at least its minimum throughput"),
                 ("kept running is obliged to deliver no less than its minimum volume",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bThe candidates are\b", ("The candidates are",), ("The locations on the shortlist are",)),
        Phrasing(r"\bmay be supplied from several\b", ("may be supplied from several",),
                 ("can draw its supply from more than one of the",)),
        Phrasing(r"\bthat is not operated supplies nothing\.", ("that is not operated supplies nothing.",),
                 ("left closed delivers nothing.",)),
        Phrasing(r"\bshould operate, and\b", ("should operate, and",), ("are to be kept open, and",)),
        Phrasing(r"\bshould supply each\b", ("should supply each",), ("is to serve every",)),
        Phrasing(r"\bshould each send to each\b", ("should each send to each",),
                 ("ought each open one to ship to every",)),
        Phrasing(r"\bto minimize the total cost \(fixed costs plus shipping costs\) per\b",
                 ("to minimize the total cost (fixed costs plus shipping costs) per",),
                 ("at the least combined cost (fixed charges and transport) for each",)),
        Phrasing(r"\bWhat is the minimum total cost in\b", ("What is the minimum total cost in",),
                 ("How low can the total cost go, in",)),
        Phrasing(r"\bhas a fixed cost of\b", ("has a fixed cost of",), ("carries a fixed charge of",)),
        # stops before "at most", which the generic rules word two ways in training
        Phrasing(r"\band can supply\b(?= at most)", ("and can supply",), ("and can deliver",)),
        Phrasing(r"\bshipping costs per\b", ("shipping costs per",), ("transport costs for each",)),
        Phrasing(r"\bDemand per\b", ("Demand per",), ("Requirements for each",)),
        Phrasing(r"\bfixed cost\b(?= \()", ("fixed cost",), ("fixed charge",)),
        Phrasing(r"\bcapacity\b(?= \()", ("capacity",), ("max supply",)),
        Phrasing(r"\bThe shipping costs are in\b", ("The shipping costs are in",), ("Transport prices are quoted in",)),
        Phrasing(r"\blist of candidate facility names\b", ("list of candidate facility names",),
                 ("names of the facilities that could be opened",)),
        Phrasing(r"\blist of customer names\b", ("list of customer names",), ("names of the customers",)),
        Phrasing(r"\bcost of operating each facility for the period\b",
                 ("cost of operating each facility for the period",),
                 ("fixed charge for running a facility over the period",)),
        Phrasing(r"\bmost units each facility can supply in the period\b",
                 ("most units each facility can supply in the period",),
                 ("largest quantity a facility can deliver in the period",)),
        # stops before "needs", which the generic rules word two ways in training
        Phrasing(r"\bunits each customer\b(?= needs in the period)", ("units each customer",),
                 ("quantity that a customer",)),
        Phrasing(r"(?<=\]: )cost per unit shipped from the facility to the customer\b",
                 ("cost per unit shipped from the facility to the customer",),
                 ("transport cost of one unit from that facility to that customer",)),
        Phrasing(r"\btrue: each customer is supplied entirely by one facility\b",
                 ("true: each customer is supplied entirely by one facility",),
                 ("flag, true when every customer takes all of its supply from one facility",)),
        Phrasing(r"\bmost facilities that may operate\b", ("most facilities that may operate",),
                 ("cap on how many facilities can be open",)),
        Phrasing(r"\bfewest units each facility must supply if it operates\b",
                 ("fewest units each facility must supply if it operates",),
                 ("smallest quantity a facility has to deliver once it is open",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(present only if",)),
    )
    data_fields = {
        "facilities": "list of candidate facility names",
        "customers": "list of customer names",
        "fixed_cost": "cost of operating each facility for the period, keyed by facility",
        "capacity": "most units each facility can supply in the period, keyed by facility",
        "demand": "units each customer needs in the period, keyed by customer",
        "unit_cost": "unit_cost[facility][customer]: cost per unit shipped from the facility to the customer",
        "single_source": "true: each customer is supplied entirely by one facility (only when this rule applies)",
        "max_open": "most facilities that may operate (only when there is such a limit)",
        "min_throughput": "fewest units each facility must supply if it operates, keyed by facility (only when "
                          "operated facilities have a minimum)",
    }
    # the pieces of `model_code_for`: the head, one of the two ways of serving a customer, and the capacity
    # always; each optional group when its key is present. Both ways define `supplied[f]`, the units
    # facility f supplies, so the capacity and the minimum throughput read the same in every variant.
    _HEAD = '''\
model = pyo.ConcreteModel()
model.F = pyo.Set(initialize=data["facilities"])
model.C = pyo.Set(initialize=data["customers"])
model.open = pyo.Var(model.F, domain=pyo.Binary)
'''
    _SPLIT = '''\
model.ship = pyo.Var(model.F, model.C, domain=pyo.NonNegativeReals)  # units from f to c

fixed = sum(data["fixed_cost"][f] * model.open[f] for f in model.F)
shipping = sum(data["unit_cost"][f][c] * model.ship[f, c] for f in model.F for c in model.C)
model.obj = pyo.Objective(expr=fixed + shipping, sense=pyo.minimize)

model.meet_demand = pyo.Constraint(
    model.C, rule=lambda model, c: sum(model.ship[f, c] for f in model.F) == data["demand"][c]
)
model.supplied = pyo.Expression(model.F, rule=lambda model, f: sum(model.ship[f, c] for c in model.C))

# implied by the capacity rule, but stating it per customer tightens the relaxation (the "strong"
# formulation), which makes HiGHS prove optimality faster
model.serve_if_open = pyo.Constraint(
    model.F, model.C, rule=lambda model, f, c: model.ship[f, c] <= data["demand"][c] * model.open[f]
)
'''
    _SINGLE_SOURCE = '''\
model.assign = pyo.Var(model.F, model.C, domain=pyo.Binary)  # 1 when f supplies all of c's demand

fixed = sum(data["fixed_cost"][f] * model.open[f] for f in model.F)
shipping = sum(data["unit_cost"][f][c] * data["demand"][c] * model.assign[f, c] for f in model.F for c in model.C)
model.obj = pyo.Objective(expr=fixed + shipping, sense=pyo.minimize)

model.one_source = pyo.Constraint(model.C, rule=lambda model, c: sum(model.assign[f, c] for f in model.F) == 1)
model.supplied = pyo.Expression(
    model.F, rule=lambda model, f: sum(data["demand"][c] * model.assign[f, c] for c in model.C)
)

# implied by the capacity rule, but tightens the relaxation
model.serve_if_open = pyo.Constraint(
    model.F, model.C, rule=lambda model, f, c: model.assign[f, c] <= model.open[f]
)
'''
    _CAPACITY = '''\
# a closed facility supplies nothing; an open one at most its capacity
model.capacity = pyo.Constraint(
    model.F, rule=lambda model, f: model.supplied[f] <= data["capacity"][f] * model.open[f]
)
'''
    _MAX_OPEN = '''\
model.max_open = pyo.Constraint(expr=sum(model.open[f] for f in model.F) <= data["max_open"])
'''
    _MIN_THROUGHPUT = '''\
# a facility that operates supplies at least its minimum
model.min_throughput = pyo.Constraint(
    model.F, rule=lambda model, f: model.supplied[f] >= data["min_throughput"][f] * model.open[f]
)
'''

    model_code = _HEAD + _SPLIT + _CAPACITY  # the base model (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._SINGLE_SOURCE if "single_source" in data else self._SPLIT) + self._CAPACITY
        if "max_open" in data:
            code += self._MAX_OPEN
        if "min_throughput" in data:
            code += self._MIN_THROUGHPUT
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("single_source", "max_open", "min_throughput") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {"open": "binary", "assign": "binary"} if "single_source" in data else self.domains

    def problem_type_for(self, data: dict) -> str:
        return "IP" if "single_source" in data else "MILP"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_facilities = size_for(difficulty, 3, 5, 7)
        n_customers = size_for(difficulty, 4, 7, 10)
        facilities = words["facility_names"][:n_facilities]
        customers = [f"{words['customer_prefix']}{k + 1}" for k in range(n_customers)]
        place = {name: (rng.uniform(0, 100), rng.uniform(0, 100)) for name in facilities + customers}
        rate = rng.choice([0.1, 0.15, 0.2, 0.3])
        unit_cost = {f: {c: max(1, round(rate * math.dist(place[f], place[c]))) for c in customers}
                     for f in facilities}
        demand = {c: rng.randint(6, 30) * 10 for c in customers}
        total = sum(demand.values())
        # no single facility can serve everyone, but together they have 40-100% slack
        share = [rng.uniform(0.3, 0.7) for _ in facilities]
        scale = rng.uniform(1.4, 2.0) / max(sum(share), 1.0)
        capacity = {f: max(50, int(total * s * scale) // 10 * 10) for f, s in zip(facilities, share, strict=True)}
        while sum(capacity.values()) < 1.3 * total:
            smallest = min(facilities, key=lambda f: capacity[f])
            capacity[smallest] += 50
        # a facility's fixed cost is of the order of the shipping bill it saves, so which ones to
        # operate is a real trade-off
        average_unit_cost = sum(sum(row.values()) for row in unit_cost.values()) / (n_facilities * n_customers)
        fixed_cost = {f: int(capacity[f] * average_unit_cost * rng.uniform(0.4, 1.2)) // 10 * 10 + 100
                      for f in facilities}
        data = {"facilities": facilities, "customers": customers, "fixed_cost": fixed_cost, "capacity": capacity,
                "demand": demand, "unit_cost": unit_cost}
        single_source, max_open, min_throughput = (rng.random() < 0.5 for _ in range(3))
        plan = feasible_loads(facilities, customers, capacity, demand, single_source)
        if plan is None:  # no single-source plan on the largest facilities: the amounts may split
            single_source, plan = False, feasible_loads(facilities, customers, capacity, demand, False)
        opened, load = plan
        if single_source:
            data["single_source"] = True
        if max_open:
            # as few facilities as the plan needs, or one more
            data["max_open"] = min(len(facilities), opened + rng.choice([0, 1]))
        if min_throughput:
            # a fifth to two fifths of the capacity, never above what the plan's open facilities supply
            data["min_throughput"] = {
                f: max(10, int(min(capacity[f] * rng.uniform(0.2, 0.4), load[f] or capacity[f])) // 10 * 10)
                for f in facilities}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # demand grows beyond what all facilities together can supply
        total_capacity = sum(data["capacity"].values())
        customer = max(data["customers"], key=lambda c: data["demand"][c])
        extra = total_capacity - sum(data["demand"].values()) + 10
        return {**data, "demand": {**data["demand"], customer: data["demand"][customer] + extra}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        facilities, customers = data["facilities"], data["customers"]
        demand = data["demand"]
        opened = {f: matrix.add_var(f"open[{f}]", 0, 1, cost=data["fixed_cost"][f], integer=True)
                  for f in facilities}
        # the columns of the amounts, and the units one unit of each column supplies
        if "single_source" in data:
            amount = {(f, c): matrix.add_var(f"assign[{f},{c}]", 0, 1, cost=data["unit_cost"][f][c] * demand[c],
                                             integer=True) for f in facilities for c in customers}
            units = {(f, c): float(demand[c]) for f in facilities for c in customers}
            for c in customers:
                matrix.add_row({amount[f, c]: 1.0 for f in facilities}, lower=1.0, upper=1.0, name=f"one_source[{c}]")
        else:
            amount = {(f, c): matrix.add_var(f"ship[{f},{c}]", cost=data["unit_cost"][f][c])
                      for f in facilities for c in customers}
            units = {(f, c): 1.0 for f in facilities for c in customers}
            for c in customers:
                matrix.add_row({amount[f, c]: 1.0 for f in facilities}, lower=demand[c], upper=demand[c],
                               name=f"meet_demand[{c}]")
        for f in facilities:
            supplied = {amount[f, c]: units[f, c] for c in customers}
            matrix.add_row({**supplied, opened[f]: -data["capacity"][f]}, upper=0.0, name=f"capacity[{f}]")
            if "min_throughput" in data:
                matrix.add_row({**supplied, opened[f]: -data["min_throughput"][f]}, lower=0.0,
                               name=f"min_throughput[{f}]")
            for c in customers:
                matrix.add_row({amount[f, c]: units[f, c], opened[f]: -demand[c]}, upper=0.0,
                               name=f"serve_if_open[{f},{c}]")
        if "max_open" in data:
            matrix.add_row({opened[f]: 1.0 for f in facilities}, upper=data["max_open"], name="max_open")

    def _supplied(self, data: dict, x: dict) -> dict:
        """facility -> units it supplies in the solution `x`."""
        if "single_source" in data:
            return {f: sum(data["demand"][c] * x["assign"][f, c] for c in data["customers"])
                    for f in data["facilities"]}
        return {f: sum(x["ship"][f, c] for c in data["customers"]) for f in data["facilities"]}

    def constraint_rows(self, data: dict, x: dict):
        opened, facilities, customers = x["open"], data["facilities"], data["customers"]
        if "single_source" in data:
            for c in customers:
                yield Row(f"one_source[{c}]", sum(x["assign"][f, c] for f in facilities), "==", 1)
            for f in facilities:
                for c in customers:
                    yield Row(f"serve_if_open[{f},{c}]", x["assign"][f, c], "<=", opened[f])
        else:
            for c in customers:
                yield Row(f"meet_demand[{c}]", sum(x["ship"][f, c] for f in facilities), "==", data["demand"][c])
            for f in facilities:
                for c in customers:
                    yield Row(f"serve_if_open[{f},{c}]", x["ship"][f, c], "<=", data["demand"][c] * opened[f])
        supplied = self._supplied(data, x)
        for f in facilities:
            yield Row(f"capacity[{f}]", supplied[f], "<=", data["capacity"][f] * opened[f])
            if "min_throughput" in data:
                yield Row(f"min_throughput[{f}]", supplied[f], ">=", data["min_throughput"][f] * opened[f])
        if "max_open" in data:
            yield Row("max_open", sum(opened[f] for f in facilities), "<=", data["max_open"])

    def objective_value(self, data: dict, x: dict) -> float:
        fixed = sum(data["fixed_cost"][f] * x["open"][f] for f in data["facilities"])
        if "single_source" in data:
            return fixed + sum(data["unit_cost"][f][c] * data["demand"][c] * x["assign"][f, c]
                               for f in data["facilities"] for c in data["customers"])
        return fixed + sum(data["unit_cost"][f][c] * x["ship"][f, c]
                           for f in data["facilities"] for c in data["customers"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        facility, customer, unit, period, money = (words["facility"], words["customer"], words["unit"],
                                                   words["period"], words["money"])
        facilities, customers = data["facilities"], data["customers"]
        intro = f"{words['intro']} The candidates are {join_names(facilities)}."
        if "single_source" in data:
            sourcing = f"Each {customer} must be supplied entirely by a single {facility}, and"
            decision = f"which {facility} should supply each {customer}"
        else:
            sourcing = f"A {customer} may be supplied from several {plural(facility)}, and"
            decision = f"how many {unit} should each send to each {customer}"
        question = (f"{sourcing} a {facility} that is not operated supplies nothing. Which {plural(facility)} should "
                    f"operate, and {decision}, to minimize the total cost (fixed costs plus shipping "
                    f"costs) per {period}? What is the minimum total cost in {money}?")
        rules = []  # the optional limits, stated in words in every representation (numbers not in a file one)
        if "max_open" in data:
            limit = fmt(data["max_open"]) if representation != "file" else "a given number of"
            many = facility if data["max_open"] == 1 and representation != "file" else plural(facility)
            rules.append(f"At most {limit} {many} may operate.")
        if "min_throughput" in data:
            minimum = f"A {facility} that operates must supply at least its minimum throughput per {period}"
            if representation == "file":
                rules.append(f"{minimum}.")
            else:
                rules.append(f"{minimum}: " + "; ".join(f"{f} {fmt(data['min_throughput'][f])} {unit}"
                                                       for f in facilities) + ".")
        limits = " ".join(rules)
        if representation == "text":
            sites = " ".join(
                f"{f} has a fixed cost of {fmt(data['fixed_cost'][f])} {money} per {period} and can supply at "
                f"most {fmt(data['capacity'][f])} {unit} per {period}; shipping costs per {words['one_unit']} from "
                f"{f} are " + ", ".join(f"{fmt(data['unit_cost'][f][c])} {money} to {c}" for c in customers) + "."
                for f in facilities)
            demand = ", ".join(f"{c} needs {fmt(data['demand'][c])} {unit}" for c in customers)
            return " ".join(part for part in (intro, sites, f"Demand per {period}: {demand}.", limits, question)
                            if part)
        if representation == "table":
            table = markdown_table(
                [facility, f"fixed cost ({money}/{period})", f"capacity ({unit}/{period})",
                 *[f"to {c}" for c in customers]],
                [[f, data["fixed_cost"][f], data["capacity"][f], *[data["unit_cost"][f][c] for c in customers]]
                 for f in facilities],
            )
            demand = markdown_table([customer, f"demand ({unit}/{period})"],
                                    [[c, data["demand"][c]] for c in customers])
            return (f"{intro} The shipping costs are in {money} per {words['one_unit']}.\n\n{table}\n\n{demand}"
                    f"\n\n{limits + ' ' if limits else ''}{question}")
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return (f"{intro}{' ' + limits if limits else ''}\n\n{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        words = scenario.words
        opened = [f for f in data["facilities"] if x["open"][f] > 0.5]
        supplied = self._supplied(data, x)
        lines = [f"Operating {words['facility']}s: {join_names(opened)}."]
        for f in opened:
            if "single_source" in data:
                sent = [(c, data["demand"][c]) for c in data["customers"] if x["assign"][f, c] > 0.5]
            else:
                sent = [(c, x["ship"][f, c]) for c in data["customers"] if x["ship"][f, c] > 1e-6]
            lines.append(f"- {f} ships {fmt(round(supplied[f], 6))} of {fmt(data['capacity'][f])} {words['unit']}: "
                         + ", ".join(f"{fmt(round(amount, 6))} to {c}" for c, amount in sent))
        return "\n".join(lines)

    def formulation(self, data: dict) -> str:
        parameters = "fixed cost $f_i$, capacity $u_i$, demand $d_j$, unit shipping cost $c_{ij}$"
        if "single_source" in data:
            variables = ("$y_i \\in \\{0,1\\}$ (facility $i$ operates), $z_{ij} \\in \\{0,1\\}$ (facility "
                         "$i$ supplies all of customer $j$'s demand)")
            objective = "\\sum_{i \\in F} f_i y_i + \\sum_{i \\in F}\\sum_{j \\in C} c_{ij} d_j z_{ij}"
            supplied = "\\sum_{j \\in C} d_j z_{ij}"
            rows = ["\\text{s.t.}\\ & \\sum_{i \\in F} z_{ij} = 1 && \\forall j \\in C",
                    f"& {supplied} \\le u_i y_i && \\forall i \\in F",
                    "& z_{ij} \\le y_i && \\forall i \\in F, j \\in C \\quad\\text{(strengthening)}"]
            domains = "& y_i, z_{ij} \\in \\{0,1\\}"
        else:
            variables = ("$y_i \\in \\{0,1\\}$ (facility $i$ operates), $x_{ij} \\ge 0$ (units shipped "
                         "from $i$ to $j$)")
            objective = "\\sum_{i \\in F} f_i y_i + \\sum_{i \\in F}\\sum_{j \\in C} c_{ij} x_{ij}"
            supplied = "\\sum_{j \\in C} x_{ij}"
            rows = ["\\text{s.t.}\\ & \\sum_{i \\in F} x_{ij} = d_j && \\forall j \\in C",
                    f"& {supplied} \\le u_i y_i && \\forall i \\in F",
                    "& x_{ij} \\le d_j y_i && \\forall i \\in F, j \\in C \\quad\\text{(strengthening)}"]
            domains = "& x_{ij} \\ge 0,\\ y_i \\in \\{0,1\\}"
        if "max_open" in data:
            parameters += ", most operating facilities $K$"
            rows.append("& \\sum_{i \\in F} y_i \\le K")
        if "min_throughput" in data:
            parameters += ", minimum throughput $l_i$"
            rows.append(f"& {supplied} \\ge l_i y_i && \\forall i \\in F")
        rows.append(domains)
        return (
            "**Sets**: facilities $F$, customers $C$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows)
            + "\n\\end{aligned}\n$$"
        )


def feasible_loads(facilities: list[str], customers: list[str], capacity: dict, demand: dict,
                   single_source: bool) -> tuple[int, dict] | None:
    """A feasible plan on as few of the largest facilities as possible: (how many operate, facility ->
    units supplied). Amounts that may split fill the facilities in turn; a single-source plan packs the
    customers, largest first, into the facility with the most room left. None when no single-source
    plan is found."""
    order = sorted(facilities, key=lambda f: (-capacity[f], facilities.index(f)))
    for count in range(1, len(order) + 1):
        chosen = order[:count]
        if sum(capacity[f] for f in chosen) < sum(demand.values()):
            continue
        load = dict.fromkeys(facilities, 0)
        if not single_source:
            left = sum(demand.values())
            for f in chosen:
                load[f] = min(capacity[f], left)
                left -= load[f]
            return sum(1 for f in chosen if load[f] > 0), load
        for c in sorted(customers, key=lambda c: (-demand[c], customers.index(c))):
            room = max(chosen, key=lambda f: capacity[f] - load[f])
            if capacity[room] - load[room] < demand[c]:
                break
            load[room] += demand[c]
        else:
            return sum(1 for f in chosen if load[f] > 0), load
    return None


FAMILY = FacilityLocationCapacitated()
