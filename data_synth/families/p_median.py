"""p-median (MILP): open exactly p of the candidate sites and serve every customer from an open site,
minimizing the demand-weighted distance travelled."""

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
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("ambulance", "emergency medical services", {
        "intro": "A county ambulance service is choosing where to station its crews.",
        "site": "station", "site_names": ["Ashford", "Brookside", "Claymoor", "Dunmore", "Elmstead", "Fairview",
                                          "Glenwood", "Highbury"],
        "customer": "district", "customer_prefix": "District ", "weight": "expected calls per week",
        "distance_unit": "km",
    }),
    Scenario("libraries", "public libraries", {
        "intro": "A city council will keep only some of its library branches open.",
        "site": "branch", "site_names": ["Central", "Northgate", "Riverside", "Oldtown", "Parkside", "Hillcrest",
                                         "Seaview", "Westend"],
        "customer": "neighbourhood", "customer_prefix": "Neighbourhood ", "weight": "residents (in hundreds)",
        "distance_unit": "km",
    }),
    Scenario("warehouses", "e-commerce fulfilment", {
        "intro": "An online retailer is picking the fulfilment centres it will run next year.",
        "site": "fulfilment centre", "site_names": ["Aurora", "Bayport", "Cedar Falls", "Dover", "Easton",
                                                     "Franklin", "Granite City", "Hampton"],
        "customer": "delivery region", "customer_prefix": "Region ", "weight": "orders per day (in hundreds)",
        "distance_unit": "miles",
    }),
)


class PMedian(ProblemFamily):
    name = "p_median"
    title = "p-median location"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"open": "binary", "serve": "nonnegative"}
    industrial = True
    data_fields = {
        "sites": "list of candidate site names",
        "customers": "list of customer names",
        "p": "number of sites to open",
        "weight": "weight (demand) of each customer, keyed by customer",
        "distance": "distance[site][customer]: distance from the site to the customer",
    }
    phrasings = (
        Phrasing(r"\bof them will be opened\b", ("of them will be opened",), ("among them are to be opened",)),
        Phrasing(r"\bis served from the nearest open\b", ("is served from the nearest open",
                                                          "is covered by the closest open"),
                 ("gets its service from whichever open", "is looked after by the nearest operating")),
    )
    model_code = '''\
model = pyo.ConcreteModel()
model.S = pyo.Set(initialize=data["sites"])
model.C = pyo.Set(initialize=data["customers"])
model.open = pyo.Var(model.S, domain=pyo.Binary)
# share of customer c served from site s (an optimal plan serves each customer from one site)
model.serve = pyo.Var(model.S, model.C, domain=pyo.NonNegativeReals)

model.obj = pyo.Objective(
    expr=sum(data["weight"][c] * data["distance"][s][c] * model.serve[s, c] for s in model.S for c in model.C),
    sense=pyo.minimize,
)
model.served = pyo.Constraint(model.C, rule=lambda model, c: sum(model.serve[s, c] for s in model.S) == 1)
model.only_open = pyo.Constraint(model.S, model.C, rule=lambda model, s, c: model.serve[s, c] <= model.open[s])
model.open_p = pyo.Constraint(expr=sum(model.open[s] for s in model.S) == data["p"])
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_sites = size_for(difficulty, 4, 6, 8, industrial=20)
        n_customers = size_for(difficulty, 6, 12, 20, industrial=60)  # industrial: 1,220 variables
        sites = pick_names(rng, words["site_names"], n_sites)
        numbers = sorted(rng.sample(range(1, max(60, 3 * n_customers)), n_customers))
        customers = [f"{words['customer_prefix']}{k}" for k in numbers]
        where = {name: (rng.uniform(0, 50), rng.uniform(0, 50)) for name in sites + customers}
        distance = {s: {c: max(1, round(math.dist(where[s], where[c]))) for c in customers} for s in sites}
        weight = {c: rng.randint(1, 30) for c in customers}
        p = max(1, round(n_sites * rng.uniform(0.3, 0.6)))
        return {"sites": sites, "customers": customers, "p": p, "weight": weight, "distance": distance}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # more sites to open than there are candidates
        return {**data, "p": len(data["sites"]) + rng.randint(1, 3)}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        sites, customers = data["sites"], data["customers"]
        opened = {s: matrix.add_var(f"open[{s}]", 0.0, 1.0, integer=True) for s in sites}
        serve = {(s, c): matrix.add_var(f"serve[{s},{c}]", cost=data["weight"][c] * data["distance"][s][c])
                 for s in sites for c in customers}
        for c in customers:
            matrix.add_row({serve[s, c]: 1.0 for s in sites}, 1.0, 1.0, name=f"served[{c}]")
        for s in sites:
            for c in customers:
                matrix.add_row({serve[s, c]: 1.0, opened[s]: -1.0}, upper=0.0, name=f"only_open[{s},{c}]")
        matrix.add_row({opened[s]: 1.0 for s in sites}, data["p"], data["p"], name="open_p")

    def constraint_rows(self, data: dict, x: dict):
        serve, opened = x["serve"], x["open"]
        for c in data["customers"]:
            yield Row(f"served[{c}]", sum(serve[s, c] for s in data["sites"]), "==", 1)
        for s in data["sites"]:
            for c in data["customers"]:
                yield Row(f"only_open[{s},{c}]", serve[s, c] - opened[s], "<=", 0)
        yield Row("open_p", sum(opened[s] for s in data["sites"]), "==", data["p"])

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["weight"][c] * data["distance"][s][c] * x["serve"][s, c]
                   for s in data["sites"] for c in data["customers"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        opened = [s for s in data["sites"] if x["open"][s] > 0.5]
        lines = [f"- open {join_names(opened)}"]
        for s in opened:
            served = [c for c in data["customers"] if x["serve"][s, c] > 0.5]
            lines.append(f"- {s} serves {join_names(served) or 'no one'}")
        return "\n".join(lines)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        sites, customers, unit = data["sites"], data["customers"], words["distance_unit"]
        site, customer = words["site"], words["customer"]
        intro = (f"{words['intro']} The candidate {site}s are {join_names(sites)}, and exactly {fmt(data['p'])} of "
                 f"them will be opened. Each {customer} is served from the nearest open {site}; the "
                 f"{customer}s are {join_names(customers)}.")
        question = (f"Which {fmt(data['p'])} {site}s should be opened to minimize the total weighted distance "
                    f"(weight times distance, summed over all {customer}s), and what is that total?")
        if representation == "text":
            parts = [intro, f"The weights ({words['weight']}) are: "
                     + "; ".join(f"{c} {fmt(data['weight'][c])}" for c in customers) + "."]
            for s in sites:
                parts.append(f"Distances from {s} in {unit}: "
                             + ", ".join(f"{fmt(data['distance'][s][c])} to {c}" for c in customers) + ".")
            parts.append(question)
            return " ".join(parts)
        if representation == "table":
            table = markdown_table([f"distance ({unit})", *customers],
                                   [[s, *[data["distance"][s][c] for c in customers]] for s in sites]
                                   + [[f"weight ({words['weight']})", *[data["weight"][c] for c in customers]]])
            return f"{intro}\n\n{table}\n\n{question}"
        if representation == "file":
            return f"{intro}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: candidate sites $S$, customers $C$.\n\n"
            "**Parameters**: weight $w_c$, distance $d_{sc}$, number of sites to open $p$.\n\n"
            "**Variables**: $y_s \\in \\{0, 1\\}$ (site open), $x_{sc} \\ge 0$ (share of $c$ served from $s$).\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{s \\in S} \\sum_{c \\in C} w_c d_{sc} x_{sc} \\\\\n"
            "\\text{s.t.}\\ & \\sum_{s \\in S} x_{sc} = 1 && \\forall c \\in C \\\\\n"
            "& x_{sc} \\le y_s && \\forall s \\in S, c \\in C \\\\\n"
            "& \\sum_{s \\in S} y_s = p \\\\\n"
            "& y_s \\in \\{0, 1\\},\\ x_{sc} \\ge 0\n\\end{aligned}\n$$"
        )


FAMILY = PMedian()
