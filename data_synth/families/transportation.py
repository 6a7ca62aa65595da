"""Transportation (LP): ship goods from sources with limited supply to destinations with demands at the
least total shipping cost."""

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
    pick_names,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("beverages", "beverage distribution", {
        "company": "a brewery group",
        "sources": ["Brewery North", "Brewery South", "Brewery East", "Brewery West", "Brewery Central",
                    "Brewery Harbor"],
        "destinations": ["Warehouse A", "Warehouse B", "Warehouse C", "Warehouse D", "Warehouse E",
                         "Warehouse F", "Warehouse G", "Warehouse H", "Warehouse I"],
        "unit": "pallet", "period": "this week",
    }),
    Scenario("cement", "construction materials", {
        "company": "a cement producer",
        "sources": ["Kiln Plant 1", "Kiln Plant 2", "Kiln Plant 3", "Kiln Plant 4", "Kiln Plant 5",
                    "Kiln Plant 6"],
        "destinations": ["Bridge site", "Airport site", "Tower site", "Harbor site", "Tunnel site",
                         "Stadium site", "Hospital site", "Mall site", "Campus site"],
        "unit": "tonne", "period": "this month",
    }),
    Scenario("grain", "agricultural logistics", {
        "company": "a grain cooperative",
        "sources": ["Silo Ash", "Silo Birch", "Silo Cedar", "Silo Elm", "Silo Maple", "Silo Oak"],
        "destinations": ["Mill 1", "Mill 2", "Mill 3", "Mill 4", "Mill 5", "Mill 6", "Mill 7", "Mill 8",
                         "Mill 9"],
        "unit": "truckload", "period": "this season",
    }),
)


class Transportation(ProblemFamily):
    name = "transportation"
    title = "Transportation"
    problem_type = "LP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"ship": "nonnegative"}
    industrial = True
    # the family's fixed sentences, in other words for each split (data_synth.statements)
    phrasings = (
        Phrasing(r"\bSupplies:", ("Supplies:", "Supply limits:"), ("Capacities of the sources:", "Availability:")),
        Phrasing(r"\bDemands:", ("Demands:", "Requirements:"), ("Orders to fill:", "Quantities needed:")),
        Phrasing(r"\bcan ship at most\b", ("can ship at most", "can send no more than"),
                 ("has capacity for", "is able to dispatch up to")),
        Phrasing(r"\bShipping one\b", ("Shipping one", "Sending one"), ("Moving one", "Transporting one")),
        Phrasing(r"Fractional amounts are allowed\.", ("Fractional amounts are allowed.", "Shipments may be fractional."),
                 ("Quantities need not be whole numbers.", "Non-integer amounts are acceptable.")),
        Phrasing(r"Unit shipping costs, supplies and demands",
                 ("Unit shipping costs, supplies and demands",),
                 ("Per-unit transport costs together with supplies and requirements",)),
        Phrasing(r"\bsupplies\b(?= [A-Z])", ("supplies",), ("serves",)),
        Phrasing(r"Each source has a limited supply, each destination a demand, and every route a cost per",
                 ("Each source has a limited supply, each destination a demand, and every route a cost per",),
                 ("Sources are limited, destinations have requirements, and a route is priced by the",)),
    )
    data_fields = {
        "sources": "list of source names",
        "destinations": "list of destination names",
        "supply": "most units each source can ship, keyed by source",
        "demand": "units each destination must receive (at least), keyed by destination",
        "cost": "cost[source][destination]: shipping cost per unit (dollars)",
    }
    model_code = '''\
model = pyo.ConcreteModel()
model.S = pyo.Set(initialize=data["sources"])
model.D = pyo.Set(initialize=data["destinations"])
model.ship = pyo.Var(model.S, model.D, domain=pyo.NonNegativeReals)

model.obj = pyo.Objective(
    expr=sum(data["cost"][s][d] * model.ship[s, d] for s in model.S for d in model.D), sense=pyo.minimize
)
model.supply = pyo.Constraint(
    model.S, rule=lambda model, s: sum(model.ship[s, d] for d in model.D) <= data["supply"][s]
)
model.demand = pyo.Constraint(
    model.D, rule=lambda model, d: sum(model.ship[s, d] for s in model.S) >= data["demand"][d]
)
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        n_sources = size_for(difficulty, 2, 4, 6, industrial=30)
        n_destinations = size_for(difficulty, 3, 5, 9, industrial=40)  # industrial: 1,200 routes
        sources = pick_names(rng, scenario.words["sources"], n_sources)
        destinations = pick_names(rng, scenario.words["destinations"], n_destinations)
        demand = {d: rng.randint(20, 200) for d in destinations}
        total = sum(demand.values())
        # total supply exceeds total demand by 5-40%, spread unevenly over the sources
        shares = [rng.uniform(0.5, 1.5) for _ in sources]
        slack = rng.uniform(1.05, 1.4)
        supply = {s: int(total * slack * share / sum(shares)) + 1 for s, share in zip(sources, shares, strict=True)}
        cost = {s: {d: rng.randint(2, 40) for d in destinations} for s in sources}
        return {"sources": sources, "destinations": destinations, "supply": supply, "demand": demand,
                "cost": cost}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one destination's demand grows past everything the sources can ship together
        data = dict(data)
        destination = rng.choice(data["destinations"])
        others = sum(v for d, v in data["demand"].items() if d != destination)
        data["demand"] = {**data["demand"],
                          destination: sum(data["supply"].values()) - others + rng.randint(1, 30)}
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        columns = {(s, d): matrix.add_var(f"ship[{s},{d}]", cost=data["cost"][s][d])
                   for s in data["sources"] for d in data["destinations"]}
        for s in data["sources"]:
            matrix.add_row({columns[s, d]: 1.0 for d in data["destinations"]}, upper=data["supply"][s],
                           name=f"supply[{s}]")
        for d in data["destinations"]:
            matrix.add_row({columns[s, d]: 1.0 for s in data["sources"]}, lower=data["demand"][d],
                           name=f"demand[{d}]")

    def constraint_rows(self, data: dict, x: dict):
        ship = x["ship"]
        for s in data["sources"]:
            yield Row(f"supply[{s}]", sum(ship[s, d] for d in data["destinations"]), "<=", data["supply"][s])
        for d in data["destinations"]:
            yield Row(f"demand[{d}]", sum(ship[s, d] for s in data["sources"]), ">=", data["demand"][d])

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["cost"][s][d] * x["ship"][s, d] for s in data["sources"] for d in data["destinations"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        sources, destinations, unit = data["sources"], data["destinations"], words["unit"]
        intro = {
            "beverages": f"{words['company'].capitalize()} supplies {join_names(destinations)} from "
                         f"{join_names(sources)} {words['period']}.",
            "cement": f"{words['company'].capitalize()} delivers cement from {join_names(sources)} to "
                      f"{join_names(destinations)} {words['period']}.",
            "grain": f"{words['company'].capitalize()} must move grain from {join_names(sources)} to "
                     f"{join_names(destinations)} {words['period']}.",
        }[scenario.key]
        question = (f"How many {unit}s should go from each source to each destination to meet every demand at "
                    "the lowest total shipping cost, and what is that cost? Fractional amounts are allowed.")
        if representation == "text":
            parts = [intro]
            parts.append("Supplies: " + "; ".join(f"{s} can ship at most {fmt(data['supply'][s])} {unit}s"
                                                 for s in sources) + ".")
            parts.append("Demands: " + "; ".join(f"{d} needs {fmt(data['demand'][d])} {unit}s"
                                                for d in destinations) + ".")
            for s in sources:
                costs = ", ".join(f"${fmt(data['cost'][s][d])} to {d}" for d in destinations)
                parts.append(f"Shipping one {unit} from {s} costs {costs}.")
            parts.append(question)
            return " ".join(parts)
        if representation == "table":
            table = markdown_table(
                ["cost ($/" + unit + ")", *destinations, "supply"],
                [[s, *[data["cost"][s][d] for d in destinations], data["supply"][s]] for s in sources]
                + [["demand", *[data["demand"][d] for d in destinations], ""]])
            return f"{intro} Unit shipping costs, supplies and demands ({unit}s):\n\n{table}\n\n{question}"
        if representation == "file":
            return (f"{intro} Each source has a limited supply, each destination a demand, and every route a "
                    f"cost per {unit}.\n\n{describe_data_file(self.data_fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: sources $S$, destinations $D$.\n\n"
            "**Parameters**: supply $a_s$, demand $b_d$, unit cost $c_{sd}$.\n\n"
            "**Variables**: $x_{sd} \\ge 0$, units shipped from $s$ to $d$.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{s \\in S} \\sum_{d \\in D} c_{sd} x_{sd} \\\\\n"
            "\\text{s.t.}\\ & \\sum_{d \\in D} x_{sd} \\le a_s && \\forall s \\in S \\\\\n"
            "& \\sum_{s \\in S} x_{sd} \\ge b_d && \\forall d \\in D \\\\\n"
            "& x_{sd} \\ge 0 && \\forall s \\in S, d \\in D\n\\end{aligned}\n$$"
        )


FAMILY = Transportation()
