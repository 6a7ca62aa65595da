"""Capacitated facility location (MILP): open facilities with fixed costs and limited capacities and ship
from them to customers, meeting every demand at minimum fixed plus shipping cost."""

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


class FacilityLocationCapacitated(ProblemFamily):
    name = "facility_location_capacitated"
    title = "Capacitated facility location"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"open": "binary", "ship": "nonnegative"}
    data_fields = {
        "facilities": "list of candidate facility names",
        "customers": "list of customer names",
        "fixed_cost": "cost of operating each facility for the period, keyed by facility",
        "capacity": "most units each facility can supply in the period, keyed by facility",
        "demand": "units each customer needs in the period, keyed by customer",
        "unit_cost": "unit_cost[facility][customer]: cost per unit shipped from the facility to the customer",
    }
    model_code = '''\
model = pyo.ConcreteModel()
model.F = pyo.Set(initialize=data["facilities"])
model.C = pyo.Set(initialize=data["customers"])
model.open = pyo.Var(model.F, domain=pyo.Binary)
model.ship = pyo.Var(model.F, model.C, domain=pyo.NonNegativeReals)  # units from f to c

fixed = sum(data["fixed_cost"][f] * model.open[f] for f in model.F)
shipping = sum(data["unit_cost"][f][c] * model.ship[f, c] for f in model.F for c in model.C)
model.obj = pyo.Objective(expr=fixed + shipping, sense=pyo.minimize)

model.meet_demand = pyo.Constraint(
    model.C, rule=lambda model, c: sum(model.ship[f, c] for f in model.F) == data["demand"][c]
)

# a closed facility ships nothing; an open one at most its capacity
def capacity(model, f):
    return sum(model.ship[f, c] for c in model.C) <= data["capacity"][f] * model.open[f]

model.capacity = pyo.Constraint(model.F, rule=capacity)

# implied by the capacity rule, but stating it per customer tightens the relaxation (the "strong"
# formulation), which makes HiGHS prove optimality faster
model.serve_if_open = pyo.Constraint(
    model.F, model.C, rule=lambda model, f, c: model.ship[f, c] <= data["demand"][c] * model.open[f]
)
'''

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
        return {"facilities": facilities, "customers": customers, "fixed_cost": fixed_cost, "capacity": capacity,
                "demand": demand, "unit_cost": unit_cost}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # demand grows beyond what all facilities together can supply
        total_capacity = sum(data["capacity"].values())
        customer = max(data["customers"], key=lambda c: data["demand"][c])
        extra = total_capacity - sum(data["demand"].values()) + 10
        return {**data, "demand": {**data["demand"], customer: data["demand"][customer] + extra}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        facilities, customers = data["facilities"], data["customers"]
        opened = {f: matrix.add_var(f"open[{f}]", 0, 1, cost=data["fixed_cost"][f], integer=True)
                  for f in facilities}
        amount = {(f, c): matrix.add_var(f"ship[{f},{c}]", cost=data["unit_cost"][f][c])
                  for f in facilities for c in customers}
        for c in customers:
            matrix.add_row({amount[f, c]: 1.0 for f in facilities}, lower=data["demand"][c],
                           upper=data["demand"][c], name=f"meet_demand[{c}]")
        for f in facilities:
            row = {amount[f, c]: 1.0 for c in customers}
            row[opened[f]] = -data["capacity"][f]
            matrix.add_row(row, upper=0.0, name=f"capacity[{f}]")
            for c in customers:
                matrix.add_row({amount[f, c]: 1.0, opened[f]: -data["demand"][c]}, upper=0.0,
                               name=f"serve_if_open[{f},{c}]")

    def constraint_rows(self, data: dict, x: dict):
        ship, opened = x["ship"], x["open"]
        for c in data["customers"]:
            yield Row(f"meet_demand[{c}]", sum(ship[f, c] for f in data["facilities"]), "==", data["demand"][c])
        for f in data["facilities"]:
            yield Row(f"capacity[{f}]", sum(ship[f, c] for c in data["customers"]), "<=",
                      data["capacity"][f] * opened[f])
            for c in data["customers"]:
                yield Row(f"serve_if_open[{f},{c}]", ship[f, c], "<=", data["demand"][c] * opened[f])

    def objective_value(self, data: dict, x: dict) -> float:
        return (sum(data["fixed_cost"][f] * x["open"][f] for f in data["facilities"])
                + sum(data["unit_cost"][f][c] * x["ship"][f, c]
                      for f in data["facilities"] for c in data["customers"]))

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        facility, customer, unit, period, money = (words["facility"], words["customer"], words["unit"],
                                                   words["period"], words["money"])
        facilities, customers = data["facilities"], data["customers"]
        intro = f"{words['intro']} The candidates are {join_names(facilities)}."
        question = (f"A {customer} may be supplied from several {facility}s, and a {facility} that is not "
                    f"operated supplies nothing. Which {facility}s should operate, and how many {unit} should "
                    f"each send to each {customer}, to minimize the total cost (fixed costs plus shipping "
                    f"costs) per {period}? What is the minimum total cost in {money}?")
        if representation == "text":
            sites = " ".join(
                f"{f} has a fixed cost of {fmt(data['fixed_cost'][f])} {money} per {period} and can supply at "
                f"most {fmt(data['capacity'][f])} {unit} per {period}; shipping costs per {words['one_unit']} from "
                f"{f} are " + ", ".join(f"{fmt(data['unit_cost'][f][c])} {money} to {c}" for c in customers) + "."
                for f in facilities)
            demand = ", ".join(f"{c} needs {fmt(data['demand'][c])} {unit}" for c in customers)
            return f"{intro} {sites} Demand per {period}: {demand}. {question}"
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
                    f"\n\n{question}")
        if representation == "file":
            return f"{intro}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        words = scenario.words
        opened = [f for f in data["facilities"] if x["open"][f] > 0.5]
        lines = [f"Operating {words['facility']}s: {join_names(opened)}."]
        for f in opened:
            sent = [(c, x["ship"][f, c]) for c in data["customers"] if x["ship"][f, c] > 1e-6]
            total = sum(amount for _, amount in sent)
            lines.append(f"- {f} ships {fmt(round(total, 6))} of {fmt(data['capacity'][f])} {words['unit']}: "
                         + ", ".join(f"{fmt(round(amount, 6))} to {c}" for c, amount in sent))
        return "\n".join(lines)

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: facilities $F$, customers $C$.\n\n"
            "**Parameters**: fixed cost $f_i$, capacity $u_i$, demand $d_j$, unit shipping cost $c_{ij}$.\n\n"
            "**Variables**: $y_i \\in \\{0,1\\}$ (facility $i$ operates), $x_{ij} \\ge 0$ (units shipped "
            "from $i$ to $j$).\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{i \\in F} f_i y_i + \\sum_{i \\in F}\\sum_{j \\in C} "
            "c_{ij} x_{ij} \\\\\n"
            "\\text{s.t.}\\ & \\sum_{i \\in F} x_{ij} = d_j && \\forall j \\in C \\\\\n"
            "& \\sum_{j \\in C} x_{ij} \\le u_i y_i && \\forall i \\in F \\\\\n"
            "& x_{ij} \\le d_j y_i && \\forall i \\in F, j \\in C \\quad\\text{(strengthening)} \\\\\n"
            "& x_{ij} \\ge 0,\\ y_i \\in \\{0,1\\}\n\\end{aligned}\n$$"
        )


FAMILY = FacilityLocationCapacitated()
