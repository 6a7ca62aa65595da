"""Fixed-charge transportation (MILP): ship from supply points to demand points where every route used
incurs a fixed charge (truck hire, contract set-up) on top of its per-unit cost.

Structure variants (drawn per instance, recorded by the keys present): capacities on some routes
(`route_capacity`), a limit on the number of routes used (`max_routes`) and a fixed cost for every
supplier that ships anything (`supplier_cost`, with a binary per supplier), each present or absent, so the
program has eight skeletons. The limits are drawn around a feasible plan (the north-west corner rule), so
every variant stays feasible.

(A minimum load per used route, x >= L y, was tried as a variant and left out: CBC's preprocessing, which
check 2 runs, returns a worse "optimal" objective on a few such instances than the plan HiGHS finds and
check 4 confirms.)"""

from __future__ import annotations

import random

from data_synth.families.transportation import northwest_corner
from data_synth.family import (
    INF,
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
    Scenario("gravel", "construction aggregates", {
        "supplier": "quarry", "supplier_plural": "quarries", "suppliers": ["Granite Ridge", "Stonebrook", "Red Hill", "Flint Valley"],
        "customer": "building site", "customer_prefix": "Site ", "unit": "tonnes", "one_unit": "tonne", "money": "dollars",
        "fixed_words": "a flat charge for dedicating a truck crew to the route",
        "intro": "A construction group moves gravel from its quarries to its building sites this week.",
    }),
    Scenario("grain", "agriculture", {
        "supplier": "grain silo", "supplier_plural": "grain silos", "suppliers": ["Silo North", "Silo South", "Silo Prairie", "Silo Creek"],
        "customer": "flour mill", "customer_prefix": "Mill ", "unit": "tonnes", "one_unit": "tonne", "money": "dollars",
        "fixed_words": "a fixed fee for booking rail wagons on that connection",
        "intro": "A grain cooperative must deliver wheat from its silos to the flour mills it has contracts with.",
    }),
    Scenario("beverages", "beverage distribution", {
        "supplier": "bottling plant", "supplier_plural": "bottling plants", "suppliers": ["Plant Alpha", "Plant Beta", "Plant Gamma", "Plant Delta"],
        "customer": "wholesaler", "customer_prefix": "Wholesaler ", "unit": "pallets", "one_unit": "pallet", "money": "euros",
        "fixed_words": "a fixed set-up charge for contracting a haulier on that lane",
        "intro": "A soft-drink bottler plans next month's shipments from its bottling plants to wholesalers.",
    }),
)
# the eval split's own industries, companies, depot names and units (held out from training)
EVAL_SCENARIOS = (
    Scenario("fuel", "fuel distribution", {
        "supplier": "fuel terminal", "supplier_plural": "fuel terminals",
        "suppliers": ["Harbour Terminal", "Eastgate Terminal", "Bayside Terminal", "Kingsport Terminal"],
        "customer": "filling station", "customer_prefix": "Station ", "unit": "kilolitres", "one_unit": "kilolitre",
        "money": "rand",
        "fixed_words": "a flat fee for scheduling a road tanker onto that run",
        "intro": "A fuel distributor resupplies its filling stations from its storage terminals over the "
                 "coming week.",
    }),
    Scenario("timber", "forestry and sawn timber", {
        "supplier": "sawmill", "supplier_plural": "sawmills",
        "suppliers": ["Pine Hollow Mill", "Cedar Bend Mill", "Birchwood Mill", "Spruce Lake Mill"],
        "customer": "lumber yard", "customer_prefix": "Yard ", "unit": "cubic metres", "one_unit": "cubic metre",
        "money": "pounds",
        "fixed_words": "a one-off fee for chartering a log trailer for that haul",
        "intro": "A timber company sends sawn lumber from its sawmills to the lumber yards that resell it.",
    }),
    Scenario("pharma", "pharmaceutical wholesale", {
        "supplier": "distribution warehouse", "supplier_plural": "distribution warehouses",
        "suppliers": ["Leeds Warehouse", "Bristol Warehouse", "Glasgow Warehouse", "Cardiff Warehouse"],
        "customer": "hospital pharmacy", "customer_prefix": "Hospital ", "unit": "cartons", "one_unit": "carton",
        "money": "pounds",
        "fixed_words": "a set cost for arranging a refrigerated van on that connection",
        "intro": "A pharmaceutical wholesaler schedules tomorrow's deliveries from its distribution warehouses "
                 "to hospital pharmacies.",
    }),
)


class FixedChargeTransportation(ProblemFamily):
    name = "fixed_charge_transportation"
    title = "Fixed-charge transportation"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"ship": "nonnegative", "use": "binary"}
    # the family's own sentences of the optional rules, in other words for each split (data_synth.statements)
    phrasings = (
        Phrasing(r"Some routes have a capacity:", ("Some routes have a capacity:", "Some routes are capacitated:"),
                 ("A few lanes are limited:",)),
        Phrasing(r"\broutes may be used in total\b", ("routes may be used in total", "routes can be used overall"),
                 ("lanes are allowed altogether",)),
        Phrasing(r"that ships anything also costs a fixed amount", ("that ships anything also costs a fixed amount",
                                                                    "used at all also carries a fixed charge"),
                 ("dispatching any goods incurs a flat running cost",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bShipping on a route costs a per-unit rate plus\b",
                 ("Shipping on a route costs a per-unit rate plus",),
                 ("Each route in use is billed a rate for every unit moved, together with",)),
        Phrasing(r"\bpaid once if the route carries any\b", ("paid once if the route carries any",),
                 ("which falls due a single time when the route moves any",)),
        Phrasing(r"\bHow much should be shipped on each route so that every\b",
                 ("How much should be shipped on each route so that every",),
                 ("What quantity ought to travel along every route such that each",)),
        Phrasing(r"\breceives exactly its requirement, no\b", ("receives exactly its requirement, no",),
                 ("gets precisely the amount it ordered, not a single",)),
        Phrasing(r"\bships more than it has, and the total cost \(per-unit plus fixed charges\) is as small as "
                 r"possible\?",
                 ("ships more than it has, and the total cost (per-unit plus fixed charges) is as small as possible?",),
                 ("sends out more than it holds, and the sum of unit rates and fixed charges is kept to a minimum?",)),
        Phrasing(r"\bWhat is the minimum total cost in\b", ("What is the minimum total cost in",),
                 ("How large is the lowest combined cost, stated in",)),
        Phrasing(r"\bsupply and demand are in\b", ("supply and demand are in",),
                 ("quantities on offer and ordered are measured in",)),
        # "at most" and "routes may be used in total" are left to their own rules (training varies them)
        Phrasing(r"\bthey carry(?= at most a given amount\b)", ("they carry",), ("each of them moves",)),
        Phrasing(r"(?<=at most )a given amount\b", ("a given amount",), ("a stated quantity",)),
        Phrasing(r"\bcarries(?= at most\b)", ("carries",), ("may move",)),
        Phrasing(r"\bNo more than (?=\d)", ("No more than ",), ("Up to ",)),
        Phrasing(r"\bNo more than a given number of(?= routes\b)", ("No more than a given number of",),
                 ("Only a stated number of",)),
        Phrasing(r"\blist of supply point names\b", ("list of supply point names",),
                 ("names of the places that send goods",)),
        Phrasing(r"\blist of demand point names\b", ("list of demand point names",),
                 ("names of the places that receive goods",)),
        Phrasing(r"\bunits available at each supply point\b", ("units available at each supply point",),
                 ("quantity every sending place can release",)),
        Phrasing(r"\bunits required by each demand point\b", ("units required by each demand point",),
                 ("quantity every receiving place has ordered",)),
        Phrasing(r"\bcost per unit shipped on the route\b", ("cost per unit shipped on the route",),
                 ("rate charged for every unit moved along that lane",)),
        Phrasing(r"\bfixed charge paid if the route carries anything\b",
                 ("fixed charge paid if the route carries anything",),
                 ("one-off fee owed as soon as that lane moves any quantity",)),
        Phrasing(r"\bmost units on that route \(only when some routes have a capacity; routes not listed have "
                 r"none\)",
                 ("most units on that route (only when some routes have a capacity; routes not listed have none)",),
                 ("largest quantity that lane may take (present if some lanes are limited; an unlisted lane is "
                  "unlimited)",)),
        Phrasing(r"\bmost routes that may carry anything \(only when there is such a limit\)",
                 ("most routes that may carry anything (only when there is such a limit)",),
                 ("largest number of lanes allowed to move goods (present if such a cap applies)",)),
        Phrasing(r"\bfixed cost of a supply point that ships anything\b",
                 ("fixed cost of a supply point that ships anything",),
                 ("flat running cost of a sending place that dispatches any goods",)),
        Phrasing(r"\(only when supply points have one\)", ("(only when supply points have one)",),
                 ("(present if sending places carry such a cost)",)),
    )
    data_fields = {
        "suppliers": "list of supply point names",
        "customers": "list of demand point names",
        "supply": "units available at each supply point, keyed by supplier",
        "demand": "units required by each demand point, keyed by customer",
        "unit_cost": "unit_cost[supplier][customer]: cost per unit shipped on the route",
        "fixed_cost": "fixed_cost[supplier][customer]: fixed charge paid if the route carries anything",
        "route_capacity": "route_capacity[supplier][customer]: most units on that route (only when some routes "
                          "have a capacity; routes not listed have none)",
        "max_routes": "most routes that may carry anything (only when there is such a limit)",
        "supplier_cost": "fixed cost of a supply point that ships anything, keyed by supplier (only when supply "
                         "points have one)",
    }
    # the pieces of `model_code_for`: the sets and variables, one of the two objectives, supply and demand,
    # one of the two route bounds, and the route limit when its key is present
    _BASE = '''\
model = pyo.ConcreteModel()
model.S = pyo.Set(initialize=data["suppliers"])
model.C = pyo.Set(initialize=data["customers"])
model.ship = pyo.Var(model.S, model.C, domain=pyo.NonNegativeReals)
model.use = pyo.Var(model.S, model.C, domain=pyo.Binary)  # the route s -> c is used
'''
    _OBJECTIVE = '''\

model.obj = pyo.Objective(
    expr=sum(data["unit_cost"][s][c] * model.ship[s, c] + data["fixed_cost"][s][c] * model.use[s, c]
             for s in model.S for c in model.C),
    sense=pyo.minimize,
)
'''
    # replaces _OBJECTIVE: a supplier's own fixed cost is paid when any of its routes is used
    _SUPPLIER_COST = '''\
model.dispatch = pyo.Var(model.S, domain=pyo.Binary)  # supplier s ships anything

routes = sum(data["unit_cost"][s][c] * model.ship[s, c] + data["fixed_cost"][s][c] * model.use[s, c]
             for s in model.S for c in model.C)
suppliers = sum(data["supplier_cost"][s] * model.dispatch[s] for s in model.S)
model.obj = pyo.Objective(expr=routes + suppliers, sense=pyo.minimize)
model.supplier_dispatch = pyo.Constraint(
    model.S, model.C, rule=lambda model, s, c: model.use[s, c] <= model.dispatch[s]
)
'''
    _SUPPLY_DEMAND = '''\

model.supply = pyo.Constraint(
    model.S, rule=lambda model, s: sum(model.ship[s, c] for c in model.C) <= data["supply"][s]
)
model.demand = pyo.Constraint(
    model.C, rule=lambda model, c: sum(model.ship[s, c] for s in model.S) == data["demand"][c]
)
'''
    _ROUTE_OPEN = '''\

# a route carries goods only if its fixed charge is paid; it never needs to carry more than
# the smaller of the supply and the demand it connects
def route_open(model, s, c):
    return model.ship[s, c] <= min(data["supply"][s], data["demand"][c]) * model.use[s, c]

model.route_open = pyo.Constraint(model.S, model.C, rule=route_open)
'''
    # replaces _ROUTE_OPEN: a capacitated route's bound is its capacity where that is smaller
    _ROUTE_CAPACITY = '''\

# a route carries goods only if its fixed charge is paid; it never carries more than its capacity (where
# it has one) nor than the smaller of the supply and the demand it connects
def route_open(model, s, c):
    most = min(data["supply"][s], data["demand"][c], data["route_capacity"].get(s, {}).get(c, data["supply"][s]))
    return model.ship[s, c] <= most * model.use[s, c]

model.route_open = pyo.Constraint(model.S, model.C, rule=route_open)
'''
    _MAX_ROUTES = '''\
model.max_routes = pyo.Constraint(expr=sum(model.use[s, c] for s in model.S for c in model.C) <= data["max_routes"])
'''

    model_code = _BASE + _OBJECTIVE + _SUPPLY_DEMAND + _ROUTE_OPEN  # the base model (the others are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._BASE + (self._SUPPLIER_COST if "supplier_cost" in data else self._OBJECTIVE)
        code += self._SUPPLY_DEMAND + (self._ROUTE_CAPACITY if "route_capacity" in data else self._ROUTE_OPEN)
        if "max_routes" in data:
            code += self._MAX_ROUTES
        return code

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "dispatch": "binary"} if "supplier_cost" in data else self.domains

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("route_capacity", "max_routes", "supplier_cost") if name in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_suppliers = size_for(difficulty, 2, 3, 4)
        n_customers = size_for(difficulty, 3, 4, 6)
        suppliers = words["suppliers"][:n_suppliers]
        customers = [f"{words['customer_prefix']}{k + 1}" for k in range(n_customers)]
        demand = {c: rng.randint(5, 40) * 10 for c in customers}
        total = sum(demand.values())
        weights = [rng.uniform(0.6, 1.4) for _ in suppliers]
        slack = rng.uniform(1.1, 1.4)
        supply = {s: int(total * slack * w / sum(weights)) // 10 * 10 + 10
                  for s, w in zip(suppliers, weights, strict=True)}
        unit_cost = {s: {c: rng.randint(2, 20) for c in customers} for s in suppliers}
        fixed_cost = {s: {c: rng.randint(10, 60) * 10 for c in customers} for s in suppliers}
        data = {"suppliers": suppliers, "customers": customers, "supply": supply, "demand": demand,
                "unit_cost": unit_cost, "fixed_cost": fixed_cost}
        route_capacity, max_routes, supplier_cost = (rng.random() < 0.5 for _ in range(3))
        # a feasible plan (amounts in tens, as supplies and demands are); every limit below lets it through
        plan = northwest_corner(suppliers, customers, supply, demand)
        if route_capacity:
            # a third of the routes get a capacity, never below what the plan ships on them
            routes = [(s, c) for s in suppliers for c in customers]
            capped = sorted(rng.sample(routes, max(1, len(routes) // 3)), key=routes.index)
            data["route_capacity"] = {}
            for s, c in capped:
                limit = max(10, plan.get((s, c), 0), int(demand[c] * rng.uniform(0.3, 0.7)) // 10 * 10)
                data["route_capacity"].setdefault(s, {})[c] = limit
        if max_routes:
            data["max_routes"] = len(plan) + rng.choice([0, 1])
        if supplier_cost:
            # of the order of a few route charges, so whether to use a supplier at all is a trade-off
            data["supplier_cost"] = {s: rng.randint(40, 150) * 10 for s in suppliers}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one customer's order grows beyond what all suppliers together hold
        shortfall = sum(data["supply"].values()) - sum(data["demand"].values()) + 10
        customer = rng.choice(data["customers"])
        return {**data, "demand": {**data["demand"], customer: data["demand"][customer] + shortfall}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        suppliers, customers = data["suppliers"], data["customers"]
        amount, route = {}, {}
        for s in suppliers:
            for c in customers:
                amount[s, c] = matrix.add_var(f"ship[{s},{c}]", cost=data["unit_cost"][s][c])
                route[s, c] = matrix.add_var(f"use[{s},{c}]", 0, 1, cost=data["fixed_cost"][s][c], integer=True)
        for s in suppliers:
            matrix.add_row({amount[s, c]: 1.0 for c in customers}, upper=data["supply"][s], name=f"supply[{s}]")
        for c in customers:
            matrix.add_row({amount[s, c]: 1.0 for s in suppliers}, lower=data["demand"][c],
                           upper=data["demand"][c], name=f"demand[{c}]")
        for s in suppliers:
            for c in customers:
                big = self._most_on_route(data, s, c)
                matrix.add_row({amount[s, c]: 1.0, route[s, c]: -big}, upper=0.0, name=f"route_open[{s},{c}]")
        if "supplier_cost" in data:
            for s in suppliers:
                dispatch = matrix.add_var(f"dispatch[{s}]", 0, 1, cost=data["supplier_cost"][s], integer=True)
                for c in customers:
                    matrix.add_row({route[s, c]: 1.0, dispatch: -1.0}, upper=0.0, name=f"supplier_dispatch[{s},{c}]")
        if "max_routes" in data:
            matrix.add_row({route[s, c]: 1.0 for s in suppliers for c in customers}, upper=data["max_routes"],
                           name="max_routes")

    def _most_on_route(self, data: dict, s: str, c: str) -> float:
        """The most route s -> c can carry: its capacity (when it has one), the supply and the demand."""
        return min(data["supply"][s], data["demand"][c], data.get("route_capacity", {}).get(s, {}).get(c, INF))

    def constraint_rows(self, data: dict, x: dict):
        ship, use = x["ship"], x["use"]
        suppliers, customers = data["suppliers"], data["customers"]
        for s in suppliers:
            yield Row(f"supply[{s}]", sum(ship[s, c] for c in customers), "<=", data["supply"][s])
        for c in customers:
            yield Row(f"demand[{c}]", sum(ship[s, c] for s in suppliers), "==", data["demand"][c])
        for s in suppliers:
            for c in customers:
                big = self._most_on_route(data, s, c)
                yield Row(f"route_open[{s},{c}]", ship[s, c], "<=", big * use[s, c])
                if "supplier_cost" in data:
                    yield Row(f"supplier_dispatch[{s},{c}]", use[s, c], "<=", x["dispatch"][s])
        if "max_routes" in data:
            yield Row("max_routes", sum(use[s, c] for s in suppliers for c in customers), "<=", data["max_routes"])

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["unit_cost"][s][c] * x["ship"][s, c] + data["fixed_cost"][s][c] * x["use"][s, c]
                    for s in data["suppliers"] for c in data["customers"])
        if "supplier_cost" in data:
            total += sum(data["supplier_cost"][s] * x["dispatch"][s] for s in data["suppliers"])
        return total

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        supplier, customer, unit, money = words["supplier"], words["customer"], words["unit"], words["money"]
        suppliers, customers = data["suppliers"], data["customers"]
        rule = (f"Shipping on a route costs a per-unit rate plus {words['fixed_words']}, paid once if the route "
                f"carries any {unit} at all.")
        question = (f"How much should be shipped on each route so that every {customer} receives exactly its "
                    f"requirement, no {supplier} ships more than it has, and the total cost (per-unit plus "
                    f"fixed charges) is as small as possible? What is the minimum total cost in {money}?")
        limits = []  # the optional rules, stated in words in every representation (numbers not in a file one)
        if "route_capacity" in data:
            if representation == "file":
                limits.append("Some routes have a capacity: they carry at most a given amount.")
            else:
                limits.append("Some routes have a capacity: " + "; ".join(
                    f"{s} to {c} carries at most {fmt(limit)} {unit}"
                    for s, row in data["route_capacity"].items() for c, limit in row.items()) + ".")
        if "max_routes" in data:
            limit = fmt(data["max_routes"]) if representation != "file" else "a given number of"
            limits.append(f"No more than {limit} routes may be used in total.")
        if "supplier_cost" in data:
            if representation == "file":
                limits.append(f"A {supplier} that ships anything also costs a fixed amount.")
            else:
                limits.append(f"A {supplier} that ships anything also costs a fixed amount: " + "; ".join(
                    f"{s} {fmt(data['supplier_cost'][s])} {money}" for s in suppliers) + ".")
        if limits:
            rule += " " + " ".join(limits)
        if representation == "text":
            supply = ", ".join(f"{s} has {fmt(data['supply'][s])} {unit}" for s in suppliers)
            demand = ", ".join(f"{c} needs {fmt(data['demand'][c])} {unit}" for c in customers)
            routes = " ".join(
                f"From {s}: " + "; ".join(
                    f"to {c}, {fmt(data['unit_cost'][s][c])} {money} per {words['one_unit']} plus "
                    f"{fmt(data['fixed_cost'][s][c])} {money} fixed" for c in customers) + "."
                for s in suppliers)
            return f"{words['intro']} {supply}. {demand}. {rule} {routes} {question}"
        if representation == "table":
            unit_table = markdown_table([f"cost per {words['one_unit']} ({money})", *customers, "supply"],
                                        [[s, *[data["unit_cost"][s][c] for c in customers], data["supply"][s]]
                                         for s in suppliers]
                                        + [["demand", *[data["demand"][c] for c in customers], ""]])
            fixed_table = markdown_table([f"fixed charge ({money})", *customers],
                                         [[s, *[data["fixed_cost"][s][c] for c in customers]] for s in suppliers])
            return (f"{words['intro']} The {words['supplier_plural']} are {join_names(suppliers)}; supply and demand are in "
                    f"{unit}. {rule}\n\n{unit_table}\n\n{fixed_table}\n\n{question}")
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{words['intro']} {rule}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        unit = scenario.words["unit"]
        routes = [f"- {s} -> {c}: {fmt(round(x['ship'][s, c], 6))} {unit}" for s in data["suppliers"]
                  for c in data["customers"] if x["use"][s, c] > 0.5 and x["ship"][s, c] > 1e-6]
        return f"{len(routes)} routes are used:\n" + "\n".join(routes)

    def formulation(self, data: dict) -> str:
        sets = "suppliers $S$, customers $C$"
        parameters = "supply $a_i$, demand $b_j$, unit cost $c_{ij}$, fixed charge $f_{ij}$"
        bound = "$M_{ij} = \\min(a_i, b_j)$"
        rows = ["\\text{s.t.}\\ & \\sum_{j \\in C} x_{ij} \\le a_i && \\forall i \\in S",
                "& \\sum_{i \\in S} x_{ij} = b_j && \\forall j \\in C",
                "& x_{ij} \\le M_{ij} y_{ij} && \\forall i \\in S, j \\in C"]
        if "route_capacity" in data:
            sets += ", capacitated routes $K \\subseteq S \\times C$"
            parameters += ", route capacity $u_{ij}$"
            bound = "$M_{ij} = \\min(a_i, b_j, u_{ij})$ ($u_{ij} = \\infty$ for $(i, j) \\notin K$)"
        if "max_routes" in data:
            parameters += ", most routes used $R$"
            rows.append("& \\sum_{i \\in S}\\sum_{j \\in C} y_{ij} \\le R")
        variables = "$x_{ij} \\ge 0$ (units shipped), $y_{ij} \\in \\{0,1\\}$ (route used)"
        objective = "\\sum_{i \\in S}\\sum_{j \\in C} (c_{ij} x_{ij} + f_{ij} y_{ij})"
        domains = "& x_{ij} \\ge 0,\\ y_{ij} \\in \\{0,1\\}"
        if "supplier_cost" in data:
            parameters += ", fixed cost $g_i$ of a supplier that ships"
            variables += ", $z_i \\in \\{0,1\\}$ (supplier ships anything)"
            objective += " + \\sum_{i \\in S} g_i z_i"
            rows.append("& y_{ij} \\le z_i && \\forall i \\in S, j \\in C")
            domains += ",\\ z_i \\in \\{0,1\\}"
        rows.append(domains)
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}, {bound}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n"
            + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = FixedChargeTransportation()
