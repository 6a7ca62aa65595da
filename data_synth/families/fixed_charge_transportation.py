"""Fixed-charge transportation (MILP): ship from supply points to demand points where every route used
incurs a fixed charge (truck hire, contract set-up) on top of its per-unit cost."""

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


class FixedChargeTransportation(ProblemFamily):
    name = "fixed_charge_transportation"
    title = "Fixed-charge transportation"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"ship": "nonnegative", "use": "binary"}
    data_fields = {
        "suppliers": "list of supply point names",
        "customers": "list of demand point names",
        "supply": "units available at each supply point, keyed by supplier",
        "demand": "units required by each demand point, keyed by customer",
        "unit_cost": "unit_cost[supplier][customer]: cost per unit shipped on the route",
        "fixed_cost": "fixed_cost[supplier][customer]: fixed charge paid if the route carries anything",
    }
    model_code = '''\
model = pyo.ConcreteModel()
model.S = pyo.Set(initialize=data["suppliers"])
model.C = pyo.Set(initialize=data["customers"])
model.ship = pyo.Var(model.S, model.C, domain=pyo.NonNegativeReals)
model.use = pyo.Var(model.S, model.C, domain=pyo.Binary)  # the route s -> c is used

model.obj = pyo.Objective(
    expr=sum(data["unit_cost"][s][c] * model.ship[s, c] + data["fixed_cost"][s][c] * model.use[s, c]
             for s in model.S for c in model.C),
    sense=pyo.minimize,
)

model.supply = pyo.Constraint(
    model.S, rule=lambda model, s: sum(model.ship[s, c] for c in model.C) <= data["supply"][s]
)
model.demand = pyo.Constraint(
    model.C, rule=lambda model, c: sum(model.ship[s, c] for s in model.S) == data["demand"][c]
)

# a route carries goods only if its fixed charge is paid; it never needs to carry more than
# the smaller of the supply and the demand it connects
def route_open(model, s, c):
    return model.ship[s, c] <= min(data["supply"][s], data["demand"][c]) * model.use[s, c]

model.route_open = pyo.Constraint(model.S, model.C, rule=route_open)
'''

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
        return {"suppliers": suppliers, "customers": customers, "supply": supply, "demand": demand,
                "unit_cost": unit_cost, "fixed_cost": fixed_cost}

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
                big = min(data["supply"][s], data["demand"][c])
                matrix.add_row({amount[s, c]: 1.0, route[s, c]: -big}, upper=0.0, name=f"route_open[{s},{c}]")

    def constraint_rows(self, data: dict, x: dict):
        ship, use = x["ship"], x["use"]
        suppliers, customers = data["suppliers"], data["customers"]
        for s in suppliers:
            yield Row(f"supply[{s}]", sum(ship[s, c] for c in customers), "<=", data["supply"][s])
        for c in customers:
            yield Row(f"demand[{c}]", sum(ship[s, c] for s in suppliers), "==", data["demand"][c])
        for s in suppliers:
            for c in customers:
                big = min(data["supply"][s], data["demand"][c])
                yield Row(f"route_open[{s},{c}]", ship[s, c], "<=", big * use[s, c])

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["unit_cost"][s][c] * x["ship"][s, c] + data["fixed_cost"][s][c] * x["use"][s, c]
                   for s in data["suppliers"] for c in data["customers"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        supplier, customer, unit, money = words["supplier"], words["customer"], words["unit"], words["money"]
        suppliers, customers = data["suppliers"], data["customers"]
        rule = (f"Shipping on a route costs a per-unit rate plus {words['fixed_words']}, paid once if the route "
                f"carries any {unit} at all.")
        question = (f"How much should be shipped on each route so that every {customer} receives exactly its "
                    f"requirement, no {supplier} ships more than it has, and the total cost (per-unit plus "
                    f"fixed charges) is as small as possible? What is the minimum total cost in {money}?")
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
            return f"{words['intro']} {rule}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        unit = scenario.words["unit"]
        routes = [f"- {s} -> {c}: {fmt(round(x['ship'][s, c], 6))} {unit}" for s in data["suppliers"]
                  for c in data["customers"] if x["use"][s, c] > 0.5 and x["ship"][s, c] > 1e-6]
        return f"{len(routes)} routes are used:\n" + "\n".join(routes)

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: suppliers $S$, customers $C$.\n\n"
            "**Parameters**: supply $a_i$, demand $b_j$, unit cost $c_{ij}$, fixed charge $f_{ij}$, "
            "$M_{ij} = \\min(a_i, b_j)$.\n\n"
            "**Variables**: $x_{ij} \\ge 0$ (units shipped), $y_{ij} \\in \\{0,1\\}$ (route used).\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{i \\in S}\\sum_{j \\in C} (c_{ij} x_{ij} + f_{ij} y_{ij}) \\\\\n"
            "\\text{s.t.}\\ & \\sum_{j \\in C} x_{ij} \\le a_i && \\forall i \\in S \\\\\n"
            "& \\sum_{i \\in S} x_{ij} = b_j && \\forall j \\in C \\\\\n"
            "& x_{ij} \\le M_{ij} y_{ij} && \\forall i \\in S, j \\in C \\\\\n"
            "& x_{ij} \\ge 0,\\ y_{ij} \\in \\{0,1\\}\n\\end{aligned}\n$$"
        )


FAMILY = FixedChargeTransportation()
