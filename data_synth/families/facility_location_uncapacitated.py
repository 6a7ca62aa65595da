"""Uncapacitated facility location (MILP): decide which facilities to open (each with a fixed cost) and
which open facility serves each customer, minimizing fixed plus delivery costs.

Structure variants (drawn per instance, recorded by the keys present): a limit on the number of facilities
opened (`max_open`), facilities that must be opened in any case (`must_open`) and a most expensive delivery
a customer may be served with (`max_unit_cost`, a service radius), each present or absent, so the program
has eight skeletons. The limits are drawn around a feasible set of open facilities that includes the
mandatory ones, so every variant stays feasible."""

from __future__ import annotations

import math
import random

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
    pick_names,
    plural,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("retail", "grocery retail", {
        "facility": "distribution centre", "facility_names": ["Leeds", "Derby", "Coventry", "Reading",
                                                              "Swindon", "Bristol", "Oxford"],
        "customer": "store", "customer_prefix": "Store ", "unit": "pallets", "one_unit": "pallet",
        "period": "week", "unit_cost_scale": 5,
        "money": "pounds", "fixed_words": "weekly running cost",
        "intro": "A grocery chain is redesigning its distribution network.",
    }),
    Scenario("parcel", "parcel delivery", {
        "facility": "depot", "facility_names": ["North", "South", "East", "West", "Central", "Harbour",
                                                "Airport"],
        "customer": "delivery zone", "customer_prefix": "Zone ", "unit": "parcels", "one_unit": "parcel",
        "period": "day", "unit_cost_scale": 1,
        "money": "dollars", "fixed_words": "daily cost of keeping open",
        "intro": "A parcel company is deciding which of its candidate depots to operate.",
    }),
    Scenario("clinics", "public health", {
        "facility": "clinic", "facility_names": ["Riverside", "Hilltop", "Market Square", "Old Mill",
                                                 "Lakeside", "Station Road", "Parkview"],
        "customer": "village", "customer_prefix": "Village ", "unit": "patient visits",
        "one_unit": "patient visit", "period": "month", "unit_cost_scale": 5,
        "money": "dollars", "fixed_words": "monthly cost of running a part-time outreach clinic",
        "intro": "A regional health authority is choosing where to run part-time outreach clinics; each "
                 "visit costs the authority a patient-transport subsidy that grows with distance.",
    }),
)

# the eval split's own industries and names (see ProblemFamily.eval_scenarios)
EVAL_SCENARIOS = (
    Scenario("seed_depots", "agricultural input supply", {
        "facility": "seed depot", "facility_names": ["Ashwell", "Barnstaple", "Crediton", "Dulverton", "Exmouth",
                                                     "Fenwick", "Grantham"],
        "customer": "farm", "customer_prefix": "Farm ", "unit": "seed bags", "one_unit": "seed bag",
        "period": "season", "unit_cost_scale": 5,
        "money": "pounds", "fixed_words": "seasonal cost of leasing a depot",
        "intro": "An agricultural merchant is planning which seed depots to lease for the planting season.",
    }),
    Scenario("charging_hubs", "electric taxi fleets", {
        "facility": "charging hub", "facility_names": ["Amstel", "Bijlmer", "Diemen", "Noord", "Osdorp",
                                                       "Sloterdijk", "Zuidas"],
        "customer": "sector", "customer_prefix": "Sector ", "unit": "charging sessions",
        "one_unit": "charging session", "period": "day", "unit_cost_scale": 1,
        "money": "euros", "fixed_words": "daily cost of staffing and powering a hub",
        "intro": "An electric-taxi operator is choosing which charging hubs to keep open for its fleet.",
    }),
)


class FacilityLocationUncapacitated(ProblemFamily):
    name = "facility_location_uncapacitated"
    title = "Uncapacitated facility location"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"open": "binary", "serve": "nonnegative"}
    industrial = True
    # the family's own sentences of the optional rules, in other words for each split (data_synth.statements)
    phrasings = (
        Phrasing(r"\bcan be opened\.", ("can be opened.", "may be opened."), ("are allowed to open.",)),
        Phrasing(r"\bmust be opened in any case\b", ("must be opened in any case", "must open whatever the cost"),
                 ("shall be opened regardless",)),
        Phrasing(r"\bmay only be served by\b", ("may only be served by", "can be served only by"),
                 ("is to be served solely by",)),
        # eval-only rewordings of the fixed sentences (training keeps its text); each stops short of the
        # generic words that training writes two ways ("at most")
        Phrasing(r"\bThe candidate\b(?= [\w-]+(?: [\w-]+)? are\b)", ("The candidate",), ("The possible",)),
        Phrasing(r"\bthere is no limit on how much an open\b", ("there is no limit on how much an open",),
                 ("any open",)),
        Phrasing(r" can handle\.", (" can handle.",), (" can take on any volume.",)),
        Phrasing(r", to minimize the total cost\b(?= per)", (", to minimize the total cost",),
                 (", so that the overall cost",)),
        Phrasing(r"\(opening costs plus delivery costs\)\?", ("(opening costs plus delivery costs)?",),
                 ("(the opening costs together with the delivery costs) stays as small as possible?",)),
        Phrasing(r"\bWhat is the minimum total cost in\b", ("What is the minimum total cost in",),
                 ("How low can the overall cost go, in", "What would be the least achievable overall cost in")),
        Phrasing(r"\bdelivered to it is\b(?= at most)", ("delivered to it is",), ("shipped to it comes to",)),
        Phrasing(r"\bcost in\b(?= \w+ per)", ("cost in",), ("delivery cost in",)),
        Phrasing(r"\bThe table gives each\b", ("The table gives each",), ("Shown below: every",)),
        Phrasing(r"; the last row is the demand\.", ("; the last row is the demand.",),
                 ("; the bottom row holds the requirement.",)),
        Phrasing(r"\blist of candidate facility names\b", ("list of candidate facility names",),
                 ("names of all candidate facilities",)),
        Phrasing(r"\blist of customer names\b", ("list of customer names",), ("names of all customers",)),
        Phrasing(r"\bcost of opening each facility for the period\b", ("cost of opening each facility for the period",),
                 ("outlay for opening every facility in the period",)),
        Phrasing(r"\bdemand of each customer in the period\b", ("demand of each customer in the period",),
                 ("quantity every customer calls for in the period",)),
        Phrasing(r"\bcost per unit delivered from the facility to the customer\b",
                 ("cost per unit delivered from the facility to the customer",),
                 ("price of delivering one unit from that facility to that customer",)),
        Phrasing(r"\bmost facilities that can be opened\b", ("most facilities that can be opened",),
                 ("largest count of facilities permitted to open",)),
        Phrasing(r"\blist of facilities that must be opened\b", ("list of facilities that must be opened",),
                 ("facilities that have to be opened",)),
        Phrasing(r"\ba customer is served only from facilities whose unit cost to it is\b",
                 ("a customer is served only from facilities whose unit cost to it is",),
                 ("every customer can be served solely by facilities whose unit cost to it is",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(included only if",)),
    )
    data_fields = {
        "facilities": "list of candidate facility names",
        "customers": "list of customer names",
        "fixed_cost": "cost of opening each facility for the period, keyed by facility",
        "demand": "demand of each customer in the period, keyed by customer",
        "unit_cost": "unit_cost[facility][customer]: cost per unit delivered from the facility to the customer",
        "max_open": "most facilities that can be opened (only when there is such a limit)",
        "must_open": "list of facilities that must be opened (only when some must)",
        "max_unit_cost": "a customer is served only from facilities whose unit cost to it is at most this (only "
                         "when there is such a limit)",
    }
    # the pieces of `model_code_for`: the base model always, each optional group when its key is present
    _BASE = '''\
model = pyo.ConcreteModel()
model.F = pyo.Set(initialize=data["facilities"])
model.C = pyo.Set(initialize=data["customers"])
model.open = pyo.Var(model.F, domain=pyo.Binary)
# share of customer c's demand delivered from facility f
model.serve = pyo.Var(model.F, model.C, domain=pyo.NonNegativeReals)

fixed = sum(data["fixed_cost"][f] * model.open[f] for f in model.F)
delivery = sum(data["demand"][c] * data["unit_cost"][f][c] * model.serve[f, c] for f in model.F for c in model.C)
model.obj = pyo.Objective(expr=fixed + delivery, sense=pyo.minimize)

# each customer's demand is fully served
model.served = pyo.Constraint(model.C, rule=lambda model, c: sum(model.serve[f, c] for f in model.F) == 1)

# only open facilities deliver
model.only_open = pyo.Constraint(
    model.F, model.C, rule=lambda model, f, c: model.serve[f, c] <= model.open[f]
)
'''
    _MAX_OPEN = '''\
model.max_open = pyo.Constraint(expr=sum(model.open[f] for f in model.F) <= data["max_open"])
'''
    _MUST_OPEN = '''\
model.must_open = pyo.Constraint(data["must_open"], rule=lambda model, f: model.open[f] == 1)
'''
    _MAX_UNIT_COST = '''\
# a customer is never served from a facility whose unit cost to it is above the limit
def out_of_reach(model, f, c):
    if data["unit_cost"][f][c] <= data["max_unit_cost"]:
        return pyo.Constraint.Skip
    return model.serve[f, c] == 0

model.out_of_reach = pyo.Constraint(model.F, model.C, rule=out_of_reach)
'''

    model_code = _BASE  # the base model (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._BASE
        if "max_open" in data:
            code += self._MAX_OPEN
        if "must_open" in data:
            code += self._MUST_OPEN
        if "max_unit_cost" in data:
            code += self._MAX_UNIT_COST
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("max_open", "must_open", "max_unit_cost") if name in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_facilities = size_for(difficulty, 3, 5, 7, industrial=25)
        n_customers = size_for(difficulty, 5, 8, 12, industrial=60)  # industrial: 1,525 variables
        names = words["facility_names"]
        facilities = names[:n_facilities] if n_facilities <= len(names) else pick_names(rng, names, n_facilities)
        customers = [f"{words['customer_prefix']}{k + 1}" for k in range(n_customers)]
        # positions on a 100 km square; the unit cost grows with distance
        place = {name: (rng.uniform(0, 100), rng.uniform(0, 100)) for name in facilities + customers}
        rate = rng.choice([0.1, 0.15, 0.2, 0.25])
        scale = words["unit_cost_scale"]
        unit_cost = {f: {c: max(1, round(rate * math.dist(place[f], place[c]))) * scale for c in customers}
                     for f in facilities}
        demand = {c: rng.randint(4, 24) * 5 for c in customers}
        # opening costs comparable to the delivery bill, so opening more facilities is a real trade-off
        typical_delivery = sum(demand.values()) * 20 * rate * scale
        fixed_cost = {f: int(rng.uniform(0.2, 0.6) * typical_delivery) // 10 * 10 + 100 for f in facilities}
        data = {"facilities": facilities, "customers": customers, "fixed_cost": fixed_cost, "demand": demand,
                "unit_cost": unit_cost}
        max_open, must_open, max_unit_cost = (rng.random() < 0.5 for _ in range(3))
        # a feasible set of open facilities: the mandatory ones and a few more, never all of them
        must = sorted(rng.sample(facilities, max(1, n_facilities // 4)), key=facilities.index) if must_open else []
        others = [f for f in facilities if f not in must]
        # (at least two when the delivery cost is limited, so that the limit cuts off the far pairs)
        size = max(len(must), rng.randint(2 if max_unit_cost else 1, max(2, (n_facilities + 1) // 2)))
        feasible = must + rng.sample(others, size - len(must))
        if must:
            data["must_open"] = must
        if max_open:
            data["max_open"] = min(n_facilities - 1, len(feasible) + rng.choice([0, 1]))
        if max_unit_cost:
            # the dearest delivery the feasible set needs: its nearest open facility serves every customer
            data["max_unit_cost"] = max(min(unit_cost[f][c] for f in feasible) for c in customers)
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        facilities, customers = data["facilities"], data["customers"]
        must = set(data.get("must_open", ()))
        limit = data.get("max_unit_cost", INF)
        opened = {f: matrix.add_var(f"open[{f}]", 1 if f in must else 0, 1, cost=data["fixed_cost"][f], integer=True)
                  for f in facilities}
        # a pair out of reach is a column fixed at zero
        share = {(f, c): matrix.add_var(f"serve[{f},{c}]", 0, 1 if data["unit_cost"][f][c] <= limit else 0,
                                        cost=data["demand"][c] * data["unit_cost"][f][c])
                 for f in facilities for c in customers}
        for c in customers:
            matrix.add_row({share[f, c]: 1.0 for f in facilities}, lower=1.0, upper=1.0, name=f"served[{c}]")
        for f in facilities:
            for c in customers:
                matrix.add_row({share[f, c]: 1.0, opened[f]: -1.0}, upper=0.0, name=f"only_open[{f},{c}]")
        if "max_open" in data:
            matrix.add_row({opened[f]: 1.0 for f in facilities}, upper=data["max_open"], name="max_open")

    def constraint_rows(self, data: dict, x: dict):
        for c in data["customers"]:
            yield Row(f"served[{c}]", sum(x["serve"][f, c] for f in data["facilities"]), "==", 1)
        for f in data["facilities"]:
            for c in data["customers"]:
                yield Row(f"only_open[{f},{c}]", x["serve"][f, c] - x["open"][f], "<=", 0)
                if "max_unit_cost" in data and data["unit_cost"][f][c] > data["max_unit_cost"]:
                    yield Row(f"out_of_reach[{f},{c}]", x["serve"][f, c], "==", 0)
        if "max_open" in data:
            yield Row("max_open", sum(x["open"][f] for f in data["facilities"]), "<=", data["max_open"])
        for f in data.get("must_open", ()):
            yield Row(f"must_open[{f}]", x["open"][f], "==", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        fixed = sum(data["fixed_cost"][f] * x["open"][f] for f in data["facilities"])
        return fixed + sum(data["demand"][c] * data["unit_cost"][f][c] * x["serve"][f, c]
                           for f in data["facilities"] for c in data["customers"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        facility, customer, unit, period, money = (words["facility"], words["customer"], words["unit"],
                                                   words["period"], words["money"])
        facilities, customers = data["facilities"], data["customers"]
        intro = (f"{words['intro']} The candidate {plural(facility)} are {join_names(facilities)}; there is no limit on "
                 f"how much an open {facility} can handle.")
        question = (f"Which {plural(facility)} should be opened, and which {facility} should serve each {customer}, to "
                    f"minimize the total cost per {period} (opening costs plus delivery costs)? What is the "
                    f"minimum total cost in {money} per {period}?")
        rules = []  # the optional rules, stated in words in every representation (numbers not in a file one)
        if "must_open" in data:
            rules.append(f"{join_names(data['must_open'])} must be opened in any case." if representation != "file"
                         else f"Some {plural(facility)} must be opened in any case.")
        if "max_open" in data:
            limit = fmt(data["max_open"]) if representation != "file" else "a given number of"
            many = facility if data["max_open"] == 1 and representation != "file" else plural(facility)
            rules.append(f"At most {limit} {many} can be opened.")
        if "max_unit_cost" in data:
            limit = f"{fmt(data['max_unit_cost'])} {money}" if representation != "file" else "a given limit"
            rules.append(f"A {customer} may only be served by a {facility} whose cost per {words['one_unit']} "
                         f"delivered to it is at most {limit}.")
        if rules:
            question = " ".join(rules) + " " + question
        if representation == "text":
            fixed = "; ".join(f"{f}: {fmt(data['fixed_cost'][f])}" for f in facilities)
            demand = "; ".join(f"{c}: {fmt(data['demand'][c])}" for c in customers)
            costs = " ".join(
                f"From {f}: " + ", ".join(f"{fmt(data['unit_cost'][f][c])} to {c}" for c in customers) + "."
                for f in facilities)
            return (f"{intro} The {words['fixed_words']} per {facility} ({money} per {period}) is {fixed}. Demand ({unit} per "
                    f"{period}): {demand}. Cost in {money} per {words['one_unit']} delivered: {costs} {question}")
        if representation == "table":
            table = markdown_table(
                [f"{facility}", f"{words['fixed_words']} ({money})", *customers],
                [[f, data["fixed_cost"][f], *[data["unit_cost"][f][c] for c in customers]] for f in facilities]
                + [[f"demand ({unit} per {period})", "", *[data["demand"][c] for c in customers]]],
            )
            return (f"{intro} The table gives each {facility}'s {words['fixed_words']} and the cost in {money} "
                    f"per {words['one_unit']} delivered to each {customer}; the last row is the demand.\n\n{table}"
                    f"\n\n{question}")
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        words = scenario.words
        opened = [f for f in data["facilities"] if x["open"][f] > 0.5]
        lines = [f"Open {words['facility']}s: {join_names(opened)}."]
        for f in opened:
            served = [c for c in data["customers"] if x["serve"][f, c] > 1e-6]
            if served:
                lines.append(f"- {f} serves {join_names(served)}")
        return "\n".join(lines)

    def formulation(self, data: dict) -> str:
        sets = "facilities $F$, customers $C$"
        parameters = "opening cost $f_i$, demand $d_j$, unit delivery cost $c_{ij}$"
        rows = ["\\text{s.t.}\\ & \\sum_{i \\in F} x_{ij} = 1 && \\forall j \\in C",
                "& x_{ij} \\le y_i && \\forall i \\in F, j \\in C"]
        if "max_open" in data:
            parameters += ", most open facilities $K$"
            rows.append("& \\sum_{i \\in F} y_i \\le K")
        if "must_open" in data:
            sets += ", mandatory facilities $M \\subseteq F$"
            rows.append("& y_i = 1 && \\forall i \\in M")
        if "max_unit_cost" in data:
            parameters += ", most unit cost of a delivery $\\bar c$"
            rows.append("& x_{ij} = 0 && \\forall i \\in F, j \\in C: c_{ij} > \\bar c")
        rows.append("& x_{ij} \\ge 0,\\ y_i \\in \\{0,1\\}")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            "**Variables**: $y_i \\in \\{0,1\\}$ (facility $i$ is open), $x_{ij} \\ge 0$ (share of customer "
            "$j$'s demand served from $i$).\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{i \\in F} f_i y_i + \\sum_{i \\in F}\\sum_{j \\in C} "
            "d_j c_{ij} x_{ij} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = FacilityLocationUncapacitated()
