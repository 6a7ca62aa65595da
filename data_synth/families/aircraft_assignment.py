"""Aircraft assignment (IP): decide how many aircraft of each type fly each route so that every route's
daily demand is carried, no type is used beyond its fleet, and the operating cost is least.

Structure variants (drawn per instance, recorded by the keys present): a minimum number of aircraft on
every route (`min_aircraft`), type-route pairs that may not be flown (`unsuited`) and a limit on the
crews, so on the aircraft flying in all (`crews`), each present or absent: eight program skeletons."""

from __future__ import annotations

import random

from data_synth.family import (
    MatrixModel,
    ProblemFamily,
    Row,
    Scenario,
    describe_data_file,
    fmt,
    markdown_table,
    pick_names,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("airline", "regional aviation", {
        "company": "a regional airline", "vehicle": "aircraft", "vehicles": "aircraft", "type_word": "aircraft type",
        "types": ["ATR 72", "Dash 8", "Embraer 175", "Airbus A220", "Boeing 737", "Airbus A320", "CRJ900"],
        "routes": ["Oslo-Bergen", "Oslo-Tromso", "Bergen-Stavanger", "Oslo-Trondheim", "Bodo-Tromso",
                   "Trondheim-Bodo", "Stavanger-Kristiansand", "Oslo-Alesund"],
        "load": "passengers", "period": "per day", "capacity_range": (60, 190), "cost_range": (1800, 9000),
        "money": "dollars",
    }),
    Scenario("shipping", "container shipping", {
        "company": "a container shipping line", "vehicle": "vessel", "vehicles": "vessels", "type_word": "vessel class",
        "types": ["Feeder 1100", "Feeder 1700", "Panamax 4500", "Neo-Panamax 8000", "Sub-Panamax 2800",
                  "Baltic 1400"],
        "routes": ["Rotterdam-Gdansk", "Hamburg-Oslo", "Antwerp-Dublin", "Bremerhaven-Helsinki",
                   "Le Havre-Lisbon", "Rotterdam-Bilbao", "Hamburg-Riga"],
        "load": "TEU", "period": "per week", "capacity_range": (700, 4000), "cost_range": (40000, 210000),
        "money": "euros",
    }),
    Scenario("buses", "intercity coaches", {
        "company": "an intercity coach operator", "vehicle": "coach", "vehicles": "coaches", "type_word": "coach model",
        "types": ["Setra S 515", "MAN Lion's Coach", "Irizar i6", "Volvo 9700", "Van Hool TX16", "Scania Touring"],
        "routes": ["Lyon-Geneva", "Paris-Lille", "Lyon-Marseille", "Paris-Rouen", "Nantes-Rennes",
                   "Bordeaux-Toulouse", "Nice-Marseille"],
        "load": "riders", "period": "per day", "capacity_range": (90, 260), "cost_range": (300, 1400),
        "money": "euros",
    }),
)
# the eval split's own industries, companies, vehicle types, routes and units (held out from training;
# `render_statement` has an opening sentence for each key)
EVAL_SCENARIOS = (
    Scenario("offshore", "offshore helicopter services", {
        "company": "an offshore helicopter operator", "vehicle": "helicopter", "vehicles": "helicopters",
        "type_word": "helicopter model",
        "types": ["Sikorsky S-92", "Airbus H175", "Leonardo AW139", "Leonardo AW189", "Airbus H160", "Bell 525",
                  "Airbus H225"],
        "routes": ["Aberdeen-Forties", "Aberdeen-Brae", "Sumburgh-Clair", "Aberdeen-Buzzard", "Sumburgh-Magnus",
                   "Aberdeen-Elgin", "Norwich-Leman", "Humberside-Ravenspurn"],
        "load": "offshore workers", "period": "per day", "capacity_range": (24, 80), "cost_range": (6000, 26000),
        "money": "pounds",
    }),
    Scenario("barges", "inland waterway freight", {
        "company": "an inland barge operator", "vehicle": "barge", "vehicles": "barges", "type_word": "barge class",
        "types": ["Kempenaar", "Dortmund-Ems", "Rhine-Herne", "Europa IIa", "Large Rhine Ship", "Spits",
                  "Campine"],
        "routes": ["Rotterdam-Basel", "Antwerp-Liege", "Rotterdam-Mannheim", "Amsterdam-Duisburg", "Ghent-Lille",
                   "Mainz-Strasbourg", "Rotterdam-Nijmegen"],
        "load": "tonnes", "period": "per week", "capacity_range": (350, 3000), "cost_range": (9000, 60000),
        "money": "Swiss francs",
    }),
)


class AircraftAssignment(ProblemFamily):
    name = "aircraft_assignment"
    title = "Aircraft assignment"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"fly": "nonnegative_integer"}
    phrasings = (
        Phrasing(r"Each unit must be assigned whole; a type cannot put more units into service than it has\.",
                 ("Each unit must be assigned whole; a type cannot put more units into service than it has.",
                  "Units are assigned whole, and no type can serve with more units than it owns."),
                 ("Only whole units can be assigned, never more of a type than are in the fleet.",)),
        Phrasing(r"\bcan carry\b", ("can carry", "carries"), ("has room for", "takes up to")),
        Phrasing(r"\bat an operating cost of\b", ("at an operating cost of", "costing"),
                 ("for an operating cost of", "with operating costs of")),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bThe fleet:", ("The fleet:",), ("Fleet on hand:",)),
        Phrasing(r"(?<=\d )units of\b", ("units of",), ("of type",)),
        Phrasing(r"\bunits available\b", ("units available",), ("fleet size",)),
        Phrasing(r"\bEvery route must get enough capacity to carry its demand of\b",
                 ("Every route must get enough capacity to carry its demand of",),
                 ("Each route has to receive sufficient capacity for its demand in",)),
        Phrasing(r"\bDemand per day:", ("Demand per day:",), ("Daily demand:",)),
        Phrasing(r"\bDemand per week:", ("Demand per week:",), ("Weekly demand:",)),
        Phrasing(r"\bper day\b", ("per day",), ("a day",)),
        Phrasing(r"\bper week\b", ("per week",), ("a week",)),
        Phrasing(r"\bcost per unit\b", ("cost per unit",), ("operating cost of one unit",)),
        Phrasing(r"\bper unit\b", ("per unit",), ("carried by one unit",)),
        Phrasing(r"\bFor a minimum service frequency, every route gets\b",
                 ("For a minimum service frequency, every route gets",),
                 ("To keep a minimum service frequency, each route receives",)),
        Phrasing(r"\bThese assignments are not allowed \(the route cannot take that type\):",
                 ("These assignments are not allowed (the route cannot take that type):",),
                 ("The following pairings are ruled out (the route cannot handle that type):",)),
        Phrasing(r"\bcrews are on duty, and each unit in service\b", ("crews are on duty, and each unit in service",),
                 ("crews are available for duty, and every unit in service",)),
        Phrasing(r"\bcan be assigned in all\.", ("can be assigned in all.",), ("can be deployed altogether.",)),
        Phrasing(r"\bof each type should be assigned to each route to meet every demand at the least total operating "
                 r"cost, and(?= what is that)",
                 ("of each type should be assigned to each route to meet every demand at the least total operating "
                  "cost, and",),
                 ("of each type ought to go on each route so that all demand is covered at the smallest overall "
                  "operating cost, and",)),
        Phrasing(r"\blist of type names\b", ("list of type names",), ("names of the types",)),
        Phrasing(r"\blist of route names\b", ("list of route names",), ("names of the routes",)),
        Phrasing(r"\bnumber of units of each type in the fleet,(?= keyed by)",
                 ("number of units of each type in the fleet,",), ("fleet size of every type,",)),
        Phrasing(r"\bload each route must carry,(?= keyed by)", ("load each route must carry,",),
                 ("load to be moved on every route,",)),
        Phrasing(r"\bload one unit of the type carries on the route\b",
                 ("load one unit of the type carries on the route",),
                 ("load a single unit of the type moves on the route",)),
        Phrasing(r"\bcost of flying one unit of the type on the route\b",
                 ("cost of flying one unit of the type on the route",),
                 ("cost of operating a single unit of the type on the route",)),
        Phrasing(r"\bfewest units every route must get\b", ("fewest units every route must get",),
                 ("smallest number of units that every route receives",)),
        Phrasing(r"\bpairs that may not be assigned\b", ("pairs that may not be assigned",),
                 ("pairs that are barred from assignment",)),
        Phrasing(r"\bmost units that can operate in all, one crew each\b",
                 ("most units that can operate in all, one crew each",),
                 ("upper limit on units in operation altogether, each taking one crew",)),
    )
    data_fields = {
        "types": "list of type names",
        "routes": "list of route names",
        "available": "number of units of each type in the fleet, keyed by type",
        "demand": "load each route must carry, keyed by route",
        "capacity": "capacity[type][route]: load one unit of the type carries on the route",
        "cost": "cost[type][route]: cost of flying one unit of the type on the route",
        "min_aircraft": "fewest units every route must get (only when there is such a minimum)",
        "unsuited": "[type, route] pairs that may not be assigned (only when there are such pairs)",
        "crews": "most units that can operate in all, one crew each (only when crews are limited)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.T = pyo.Set(initialize=data["types"])
model.R = pyo.Set(initialize=data["routes"])
model.fly = pyo.Var(model.T, model.R, domain=pyo.NonNegativeIntegers)  # units of type t on route r

model.obj = pyo.Objective(expr=sum(data["cost"][t][r] * model.fly[t, r] for t in model.T for r in model.R),
                          sense=pyo.minimize)
model.fleet = pyo.Constraint(model.T, rule=lambda model, t: sum(model.fly[t, r] for r in model.R) <= data["available"][t])
model.demand = pyo.Constraint(
    model.R, rule=lambda model, r: sum(data["capacity"][t][r] * model.fly[t, r] for t in model.T) >= data["demand"][r])
'''
    _MIN_AIRCRAFT = '''\
model.min_aircraft = pyo.Constraint(
    model.R, rule=lambda model, r: sum(model.fly[t, r] for t in model.T) >= data["min_aircraft"])
'''
    _UNSUITED = '''\
model.unsuited = pyo.Constraint(range(len(data["unsuited"])),
                                rule=lambda model, k: model.fly[data["unsuited"][k][0], data["unsuited"][k][1]] == 0)
'''
    _CREWS = '''\
model.crews = pyo.Constraint(expr=sum(model.fly[t, r] for t in model.T for r in model.R) <= data["crews"])
'''
    model_code = _HEAD + _MIN_AIRCRAFT  # the family's model with a minimum per route

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD
        if "min_aircraft" in data:
            code += self._MIN_AIRCRAFT
        if "unsuited" in data:
            code += self._UNSUITED
        if "crews" in data:
            code += self._CREWS
        return code

    def variant_of(self, data: dict) -> str:
        return "+".join(key for key in ("min_aircraft", "unsuited", "crews") if key in data) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_types = size_for(difficulty, 3, 4, 5)
        n_routes = size_for(difficulty, 3, 5, 7)
        types = pick_names(rng, words["types"], n_types)
        routes = pick_names(rng, words["routes"], n_routes)
        available = {t: rng.randint(2, 5) for t in types}
        low, high = words["capacity_range"]
        capacity = {t: {r: rng.randint(low, high) for r in routes} for t in types}
        c_low, c_high = words["cost_range"]
        # bigger units cost more to operate, with route-by-route noise
        cost = {t: {r: round(c_low + (c_high - c_low) * (capacity[t][r] - low) / (high - low) * rng.uniform(0.7, 1.0)
                             + rng.randint(0, (c_high - c_low) // 10)) for r in routes} for t in types}
        # a witness plan: every route two units where the fleet allows (one at least), then most of the
        # remaining fleet spread at random
        witness = {t: dict.fromkeys(routes, 0) for t in types}
        left = dict(available)
        for r in routes * 2:
            if not any(left.values()):
                break
            t = rng.choice([t for t in types if left[t] > 0])
            witness[t][r] += 1
            left[t] -= 1
        for t in types:
            for _ in range(left[t]):
                if rng.random() < 0.7:
                    witness[t][rng.choice(routes)] += 1
        demand = {r: max(1, round(sum(capacity[t][r] * witness[t][r] for t in types) * rng.uniform(0.6, 0.85)))
                  for r in routes}
        data = {"types": types, "routes": routes, "available": available, "demand": demand,
                "capacity": capacity, "cost": cost}
        if rng.random() < 0.5:
            data["min_aircraft"] = min(sum(witness[t][r] for t in types) for r in routes)
        if rng.random() < 0.5:
            idle = [[t, r] for t in types for r in routes if witness[t][r] == 0]
            if idle:
                data["unsuited"] = sorted(rng.sample(idle, max(1, min(len(idle), n_routes // 2))))
        if rng.random() < 0.5:
            data["crews"] = sum(witness[t][r] for t in types for r in routes)
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one route needs more than the whole fleet could carry on it
        r = rng.choice(data["routes"])
        most = sum(data["available"][t] * data["capacity"][t][r] for t in data["types"])
        return {**data, "demand": {**data["demand"], r: most + 1}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        types, routes = data["types"], data["routes"]
        barred = {(t, r) for t, r in data.get("unsuited", ())}
        column = {(t, r): matrix.add_var(f"fly[{t},{r}]", 0, 0 if (t, r) in barred else data["available"][t],
                                         cost=data["cost"][t][r], integer=True) for t in types for r in routes}
        for t in types:
            matrix.add_row({column[t, r]: 1.0 for r in routes}, upper=data["available"][t], name=f"fleet[{t}]")
        for r in routes:
            matrix.add_row({column[t, r]: data["capacity"][t][r] for t in types}, lower=data["demand"][r],
                           name=f"demand[{r}]")
            if "min_aircraft" in data:
                matrix.add_row({column[t, r]: 1.0 for t in types}, lower=data["min_aircraft"], name=f"min_aircraft[{r}]")
        if "crews" in data:
            matrix.add_row({column[key]: 1.0 for key in column}, upper=data["crews"], name="crews")

    def constraint_rows(self, data: dict, x: dict):
        fly, types, routes = x["fly"], data["types"], data["routes"]
        for t in types:
            yield Row(f"fleet[{t}]", sum(fly[t, r] for r in routes), "<=", data["available"][t])
        for r in routes:
            yield Row(f"demand[{r}]", sum(data["capacity"][t][r] * fly[t, r] for t in types), ">=", data["demand"][r])
            if "min_aircraft" in data:
                yield Row(f"min_aircraft[{r}]", sum(fly[t, r] for t in types), ">=", data["min_aircraft"])
        for t, r in data.get("unsuited", ()):
            yield Row(f"unsuited[{t},{r}]", fly[t, r], "==", 0)
        if "crews" in data:
            yield Row("crews", sum(fly[t, r] for t in types for r in routes), "<=", data["crews"])

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["cost"][t][r] * x["fly"][t, r] for t in data["types"] for r in data["routes"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        lines = []
        for r in data["routes"]:
            used = [f"{round(x['fly'][t, r])} x {t}" for t in data["types"] if x["fly"][t, r] > 0.5]
            carried = sum(data["capacity"][t][r] * round(x["fly"][t, r]) for t in data["types"])
            lines.append(f"- {r}: {', '.join(used)} (capacity {fmt(carried)} for a demand of {fmt(data['demand'][r])})")
        return "\n".join(lines)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        types, routes = data["types"], data["routes"]
        load, period, money, vehicles = words["load"], words["period"], words["money"], words["vehicles"]
        intro = {
            "airline": f"{words['company'].capitalize()} is planning tomorrow's flying: {len(types)} aircraft types "
                       f"serve {len(routes)} routes, and each aircraft assigned to a route flies it all day.",
            "shipping": f"{words['company'].capitalize()} deploys its fleet for the coming week: {len(types)} vessel "
                        f"classes can be placed on {len(routes)} trade lanes, one vessel serving one lane.",
            "buses": f"{words['company'].capitalize()} assigns its coaches for the day: {len(types)} coach models "
                     f"can be put on {len(routes)} lines, each coach staying on its line.",
            "offshore": f"{words['company'].capitalize()} sets up tomorrow's crew-change flights: {len(types)} "
                        f"helicopter models are available for {len(routes)} shuttle routes to the platforms, and "
                        "each helicopter assigned to a route shuttles on it all day.",
            "barges": f"{words['company'].capitalize()} plans the sailings of the next week: {len(types)} barge "
                      f"classes can be deployed on {len(routes)} river corridors, each barge staying on its corridor "
                      "for the week.",
        }[scenario.key]
        rules = ("Each unit must be assigned whole; a type cannot put more units into service than it has. Every route must "
                 f"get enough capacity to carry its demand of {load} {period}.")
        if "min_aircraft" in data:
            rules += (f" For a minimum service frequency, every route gets at least {fmt(data['min_aircraft'])} "
                      f"{words['vehicle'] if data['min_aircraft'] == 1 else vehicles}.")
        if "unsuited" in data:
            pairs = "; ".join(f"{t} on {r}" for t, r in data["unsuited"])
            rules += f" These assignments are not allowed (the route cannot take that type): {pairs}."
        if "crews" in data:
            rules += (f" Only {fmt(data['crews'])} crews are on duty, and each unit in service needs one, so at most "
                      f"{fmt(data['crews'])} {vehicles} can be assigned in all.")
        question = (f"How many {vehicles} of each type should be assigned to each route to meet every demand at the "
                    f"least total operating cost, and what is that cost in {money}?")
        if representation == "text":
            fleet = "; ".join(f"{fmt(data['available'][t])} units of {t}" for t in types)
            demand = "; ".join(f"{r} needs {fmt(data['demand'][r])} {load}" for r in routes)
            offers = " ".join(
                f"One {t} " + ", ".join(f"on {r} can carry {fmt(data['capacity'][t][r])} {load} at an operating cost "
                                        f"of {fmt(data['cost'][t][r])} {money}" for r in routes) + "."
                for t in types)
            return f"{intro} The fleet: {fleet}. Demand {period}: {demand}. {offers} {rules} {question}"
        if representation == "table":
            fleet = markdown_table([words["type_word"], "units available"], [[t, data["available"][t]] for t in types])
            demand = markdown_table(["route", f"demand ({load} {period})"], [[r, data["demand"][r]] for r in routes])
            capacity = markdown_table([f"{load} per unit", *routes], [[t, *[data["capacity"][t][r] for r in routes]]
                                                                      for t in types])
            cost = markdown_table([f"cost per unit ({money})", *routes], [[t, *[data["cost"][t][r] for r in routes]]
                                                                         for t in types])
            return f"{intro}\n\n{fleet}\n\n{demand}\n\n{capacity}\n\n{cost}\n\n{rules} {question}"
        if representation == "file":
            return f"{intro} {rules} {question}\n\n{describe_data_file(self.data_fields)}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        sets, parameters = "types $T$, routes $R$", "fleet $a_t$, demand $d_r$, capacity $q_{tr}$, cost $c_{tr}$"
        rows = ["\\text{s.t.}\\ & \\sum_{r \\in R} x_{tr} \\le a_t && \\forall t \\in T",
                "& \\sum_{t \\in T} q_{tr} x_{tr} \\ge d_r && \\forall r \\in R"]
        if "min_aircraft" in data:
            parameters += ", minimum per route $m$"
            rows.append("& \\sum_{t \\in T} x_{tr} \\ge m && \\forall r \\in R")
        if "unsuited" in data:
            sets += ", barred pairs $U \\subseteq T \\times R$"
            rows.append("& x_{tr} = 0 && \\forall (t, r) \\in U")
        if "crews" in data:
            parameters += ", crews $K$"
            rows.append("& \\sum_{t \\in T} \\sum_{r \\in R} x_{tr} \\le K")
        rows.append("& x_{tr} \\in \\mathbb{Z}_{\\ge 0}")
        return (f"**Sets**: {sets}.\n\n**Parameters**: {parameters}.\n\n"
                "**Variables**: $x_{tr}$, units of type $t$ assigned to route $r$.\n\n"
                "$$\n\\begin{aligned}\n\\min\\ & \\sum_{t \\in T} \\sum_{r \\in R} c_{tr} x_{tr} \\\\\n"
                + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$")


FAMILY = AircraftAssignment()
