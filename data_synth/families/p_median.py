"""p-median (MILP): open exactly p of the candidate sites and serve every customer from an open site,
minimizing the demand-weighted distance travelled.

Structure variants (drawn per instance, recorded by the keys present): a service radius beyond which a
site may not serve a customer (`max_distance`) and a capacity per site on the weight it serves
(`capacity`, the capacitated p-median: a customer's demand may then be split between sites), each present
or absent, so the program has four skeletons. Both are drawn around a random set of p sites that satisfies
them, so every variant stays feasible."""

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


# the eval split's own industries and names (see ProblemFamily.eval_scenarios)
EVAL_SCENARIOS = (
    Scenario("fire_halls", "rural fire protection", {
        "intro": "A regional fire authority is deciding which volunteer fire halls to keep staffed.",
        "site": "fire hall", "site_names": ["Kestrel Ridge", "Larchmont", "Millbrook", "Northcott", "Oakhurst",
                                            "Pinecrest", "Quarry Hill", "Redwater"],
        "customer": "township", "customer_prefix": "Township ", "weight": "incidents a year",
        "distance_unit": "km",
    }),
    Scenario("cross_docks", "grocery wholesale", {
        "intro": "A grocery wholesaler is settling which cross-dock depots to lease for the coming season.",
        "site": "cross-dock depot", "site_names": ["Alder Park", "Birchfield", "Copperton", "Driftwood", "Emberly",
                                                   "Foxhollow", "Goldcrest", "Hollins"],
        "customer": "store cluster", "customer_prefix": "Cluster ", "weight": "pallets a day",
        "distance_unit": "miles",
    }),
)


class PMedian(ProblemFamily):
    name = "p_median"
    title = "p-median location"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"open": "binary", "serve": "nonnegative"}
    industrial = True
    data_fields = {
        "sites": "list of candidate site names",
        "customers": "list of customer names",
        "p": "number of sites to open",
        "weight": "weight (demand) of each customer, keyed by customer",
        "distance": "distance[site][customer]: distance from the site to the customer",
        "max_distance": "largest distance at which a site may serve a customer (only when there is a service "
                        "radius)",
        "capacity": "most total weight each site can serve, keyed by site (only when sites have capacities)",
    }
    phrasings = (
        Phrasing(r"\bof them will be opened\b", ("of them will be opened",), ("of them will open",)),
        Phrasing(r"\bis served from the nearest open\b", ("is served from the nearest open",
                                                          "is covered by the closest open"),
                 ("gets its service from the closest operating", "is looked after by the nearest operating")),
        Phrasing(r"\(the service radius\)\.", ("(the service radius).", "(its service radius)."),
                 ("(the coverage limit).",)),
        Phrasing(r"\bmay be split between several of them\b", ("may be split between several of them",),
                 ("can be divided among several of them",)),
        # eval-only rewordings of the fixed sentences (training keeps its text); each stops short of the
        # generic words that training writes two ways ("what is that", "keyed by")
        Phrasing(r"\bThe candidate\b(?= [\w-]+(?: [\w-]+)? are\b)", ("The candidate",), ("The possible",)),
        Phrasing(r"\bto minimize the total weighted distance\b", ("to minimize the total weighted distance",),
                 ("so that the overall demand-weighted distance is as small as possible",)),
        Phrasing(r"\(weight times distance, summed over all\b", ("(weight times distance, summed over all",),
                 ("(every weight multiplied by its distance, added up across all",)),
        Phrasing(r"\bCapacities \(most total weight served\):", ("Capacities (most total weight served):",),
                 ("Capacity, the largest weight each can take on:",)),
        Phrasing(r"\bThe weights\b(?= \()", ("The weights",), ("The demand weights",)),
        Phrasing(r"\bDistances from\b", ("Distances from",), ("Distance measured from",)),
        Phrasing(r"(?<=\| )distance(?= \()", ("distance",), ("dist.",)),
        Phrasing(r"(?<=\| )weight(?= \()", ("weight",), ("demand weight",)),
        Phrasing(r"(?<=\| )capacity(?= \|)", ("capacity",), ("capacity limit",)),
        Phrasing(r"\blist of candidate site names\b", ("list of candidate site names",),
                 ("names of all candidate sites",)),
        Phrasing(r"\blist of customer names\b", ("list of customer names",), ("names of all customers",)),
        Phrasing(r"\bnumber of sites to open\b", ("number of sites to open",), ("count of sites that must open",)),
        Phrasing(r"\bweight \(demand\) of each customer\b", ("weight (demand) of each customer",),
                 ("demand weight of every customer",)),
        Phrasing(r"\bdistance from the site to the customer\b", ("distance from the site to the customer",),
                 ("how far that customer lies from that site",)),
        Phrasing(r"\blargest distance at which a site may serve a customer\b",
                 ("largest distance at which a site may serve a customer",),
                 ("greatest distance over which a site can still serve a customer",)),
        Phrasing(r"\bmost total weight each site can serve\b", ("most total weight each site can serve",),
                 ("upper limit on the weight a site can serve",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(included only if",)),
    )
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.S = pyo.Set(initialize=data["sites"])
model.C = pyo.Set(initialize=data["customers"])
model.open = pyo.Var(model.S, domain=pyo.Binary)
model.serve = pyo.Var(model.S, model.C, domain=pyo.NonNegativeReals)  # share of customer c served from site s

model.obj = pyo.Objective(
    expr=sum(data["weight"][c] * data["distance"][s][c] * model.serve[s, c] for s in model.S for c in model.C),
    sense=pyo.minimize,
)
model.served = pyo.Constraint(model.C, rule=lambda model, c: sum(model.serve[s, c] for s in model.S) == 1)
model.only_open = pyo.Constraint(model.S, model.C, rule=lambda model, s, c: model.serve[s, c] <= model.open[s])
model.open_p = pyo.Constraint(expr=sum(model.open[s] for s in model.S) == data["p"])
'''
    _RADIUS = '''\

# no service beyond the radius
model.far = pyo.Set(initialize=[(s, c) for s in data["sites"] for c in data["customers"]
                                if data["distance"][s][c] > data["max_distance"]], dimen=2)
model.radius = pyo.Constraint(model.far, rule=lambda model, s, c: model.serve[s, c] == 0)
'''
    _CAPACITY = '''\

# an open site serves at most its capacity of weight; a closed one serves nothing
model.capacity = pyo.Constraint(model.S, rule=lambda model, s: sum(
    data["weight"][c] * model.serve[s, c] for c in model.C) <= data["capacity"][s] * model.open[s])
'''

    model_code = _HEAD  # the base model (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD
        if "max_distance" in data:
            code += self._RADIUS
        if "capacity" in data:
            code += self._CAPACITY
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("max_distance", "capacity") if name in data]
        return "+".join(parts) or "base"

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
        data = {"sites": sites, "customers": customers, "p": p, "weight": weight, "distance": distance}
        radius, capacitated = rng.random() < 0.5, rng.random() < 0.5
        if radius or capacitated:
            # a random set of p sites, each customer served by its nearest one: the limits admit this plan
            chosen = rng.sample(sites, p)
            nearest = {c: min(chosen, key=lambda s: (distance[s][c], sites.index(s))) for c in customers}
            if radius:
                data["max_distance"] = max(distance[nearest[c]][c] for c in customers)
            if capacitated:
                load = {s: sum(weight[c] for c in customers if nearest[c] == s) for s in sites}
                share = sum(weight.values()) / p
                data["capacity"] = {s: max(load[s], int(share * rng.uniform(1.0, 1.5))) for s in sites}
        return data

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
        if "max_distance" in data:
            for s in sites:
                for c in customers:
                    if data["distance"][s][c] > data["max_distance"]:
                        matrix.col_upper[serve[s, c]] = 0.0  # out of range: a bound, not a row
        for s, limit in data.get("capacity", {}).items():
            matrix.add_row({**{serve[s, c]: float(data["weight"][c]) for c in customers}, opened[s]: -float(limit)},
                           upper=0.0, name=f"capacity[{s}]")

    def constraint_rows(self, data: dict, x: dict):
        serve, opened = x["serve"], x["open"]
        for c in data["customers"]:
            yield Row(f"served[{c}]", sum(serve[s, c] for s in data["sites"]), "==", 1)
        for s in data["sites"]:
            for c in data["customers"]:
                yield Row(f"only_open[{s},{c}]", serve[s, c] - opened[s], "<=", 0)
        yield Row("open_p", sum(opened[s] for s in data["sites"]), "==", data["p"])
        if "max_distance" in data:
            for s in data["sites"]:
                for c in data["customers"]:
                    if data["distance"][s][c] > data["max_distance"]:
                        yield Row(f"radius[{s},{c}]", serve[s, c], "==", 0)
        for s, limit in data.get("capacity", {}).items():
            yield Row(f"capacity[{s}]", sum(data["weight"][c] * serve[s, c] for c in data["customers"]), "<=",
                      limit * opened[s])

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["weight"][c] * data["distance"][s][c] * x["serve"][s, c]
                   for s in data["sites"] for c in data["customers"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        opened = [s for s in data["sites"] if x["open"][s] > 0.5]
        lines = [f"- open {join_names(opened)}"]
        for s in opened:
            served = [c for c in data["customers"] if x["serve"][s, c] > 1e-6]
            lines.append(f"- {s} serves {join_names(served) or 'no one'}")
        return "\n".join(lines)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        sites, customers, unit = data["sites"], data["customers"], words["distance_unit"]
        site, customer = words["site"], words["customer"]
        if "capacity" in data:
            serving = (f"Each {customer} is served from open {plural(site)}; its weight may be split between several of "
                       f"them, and each {site} can serve a limited total weight; the ")
        else:
            serving = f"Each {customer} is served from the nearest open {site}; the "
        intro = (f"{words['intro']} The candidate {plural(site)} are {join_names(sites)}, and exactly {fmt(data['p'])} of "
                 f"them will be opened. {serving}{plural(customer)} are {join_names(customers)}.")
        if "max_distance" in data:
            intro += (f" A {site} may only serve a {customer} within {fmt(data['max_distance'])} {unit} of it "
                      "(the service radius).")
        if "capacity" in data and representation == "text":
            intro += (" Capacities (most total weight served): "
                      + ", ".join(f"{s} {fmt(v)}" for s, v in data["capacity"].items()) + ".")
        question = (f"Which {fmt(data['p'])} {plural(site)} should be opened to minimize the total weighted distance "
                    f"(weight times distance, summed over all {plural(customer)}), and what is that total?")
        if representation == "text":
            parts = [intro, f"The weights ({words['weight']}) are: "
                     + "; ".join(f"{c} {fmt(data['weight'][c])}" for c in customers) + "."]
            for s in sites:
                parts.append(f"Distances from {s} in {unit}: "
                             + ", ".join(f"{fmt(data['distance'][s][c])} to {c}" for c in customers) + ".")
            parts.append(question)
            return " ".join(parts)
        if representation == "table":
            capacity = ["capacity"] if "capacity" in data else []
            table = markdown_table([f"distance ({unit})", *customers, *capacity],
                                   [[s, *[data["distance"][s][c] for c in customers],
                                     *([data["capacity"][s]] if capacity else [])] for s in sites]
                                   + [[f"weight ({words['weight']})", *[data["weight"][c] for c in customers],
                                       *([""] if capacity else [])]])
            return f"{intro}\n\n{table}\n\n{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        parameters = "weight $w_c$, distance $d_{sc}$, number of sites to open $p$"
        rows = ["\\text{s.t.}\\ & \\sum_{s \\in S} x_{sc} = 1 && \\forall c \\in C",
                "& x_{sc} \\le y_s && \\forall s \\in S, c \\in C",
                "& \\sum_{s \\in S} y_s = p"]
        if "max_distance" in data:
            parameters += ", service radius $R$"
            rows.append("& x_{sc} = 0 && \\forall s \\in S, c \\in C: d_{sc} > R")
        if "capacity" in data:
            parameters += ", site capacity $Q_s$"
            rows.append("& \\sum_{c \\in C} w_c x_{sc} \\le Q_s y_s && \\forall s \\in S")
        rows.append("& y_s \\in \\{0, 1\\},\\ x_{sc} \\ge 0")
        return (
            "**Sets**: candidate sites $S$, customers $C$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            "**Variables**: $y_s \\in \\{0, 1\\}$ (site open), $x_{sc} \\ge 0$ (share of $c$ served from $s$).\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{s \\in S} \\sum_{c \\in C} w_c d_{sc} x_{sc} \\\\\n"
            + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = PMedian()
