"""Transportation (LP): ship goods from sources with limited supply to destinations with demands at the
least total shipping cost.

Structure variants (drawn per instance, recorded by the keys present): capacities on some routes
(`route_capacity`), routes that may not be used (`forbidden`) and a fixed cost for every route that is
used at all (`fixed_cost`, the model becomes a MILP with a binary per route; not at the industrial size),
each present or absent, so the program has eight skeletons. The demo trains on this family, so `sample`
keeps the base model (none of the three) in 45% of the instances. Route limits are drawn around a
feasible plan (the north-west corner rule), so every variant stays feasible."""

from __future__ import annotations

import random

from data_synth.family import (
    INDUSTRIAL,
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

# eval only: other companies, sources and destinations than any training scenario, in the same style
# (short numbered or lettered names, the same kinds of units) for the demo's tiny model
EVAL_SCENARIOS = (
    Scenario("dairy", "dairy distribution", {
        "company": "a dairy cooperative",
        "sources": ["Dairy Hill", "Dairy Vale", "Dairy Brook", "Dairy Moor", "Dairy Ridge", "Dairy Glen"],
        "destinations": ["Store 1", "Store 2", "Store 3", "Store 4", "Store 5", "Store 6", "Store 7", "Store 8",
                         "Store 9"],
        "unit": "crate", "period": "this week",
    }),
    Scenario("steel", "metals distribution", {
        "company": "a steel stockist",
        "sources": ["Depot Alpha", "Depot Beta", "Depot Gamma", "Depot Delta", "Depot Sigma", "Depot Omega"],
        "destinations": ["Yard A", "Yard B", "Yard C", "Yard D", "Yard E", "Yard F", "Yard G", "Yard H", "Yard I"],
        "unit": "tonne", "period": "this month",
    }),
    Scenario("fuel", "fuel supply", {
        "company": "a fuel distributor",
        "sources": ["Terminal Bay", "Terminal Cove", "Terminal Point", "Terminal Quay", "Terminal Sands",
                    "Terminal Dune"],
        "destinations": ["Station 1", "Station 2", "Station 3", "Station 4", "Station 5", "Station 6",
                         "Station 7", "Station 8", "Station 9"],
        "unit": "tanker load", "period": "this fortnight",
    }),
)


class Transportation(ProblemFamily):
    name = "transportation"
    title = "Transportation"
    problem_type = "LP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
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
        Phrasing(r"Using a route at all adds a fixed cost, whatever it carries",
                 ("Using a route at all adds a fixed cost, whatever it carries",
                  "Each route used at all carries a fixed charge, however much it ships"),
                 ("Opening any route incurs a one-off charge independent of volume",)),
        Phrasing(r"\bRoute limits:", ("Route limits:", "Route capacities:"), ("Lane caps:",)),
        Phrasing(r"These routes are closed and cannot be used:", ("These routes are closed and cannot be used:",),
                 ("No shipments are possible on these lanes:",)),
        Phrasing(r"\bsupplies\b(?= [A-Z])", ("supplies",), ("serves",)),
        Phrasing(r"Each source has a limited supply, each destination a demand, and every route a cost per",
                 ("Each source has a limited supply, each destination a demand, and every route a cost per",),
                 ("Sources are limited, destinations have requirements, and a route is priced by the",)),
        # eval-only plain rewordings of the other fixed sentences (training keeps its text); rules stop before
        # generic phrases with several training wordings ("the lowest", "keyed by")
        Phrasing(r"\bshould go from each source to each destination to meet every demand at (?=the lowest\b)",
                 ("should go from each source to each destination to meet every demand at ",),
                 ("should be sent from each source to each destination so that all demand is met at ",)),
        Phrasing(r"(?<=s )can go from\b", ("can go from",), ("may be sent from",)),
        Phrasing(r"\bmost units each source can ship(?=, keyed by)", ("most units each source can ship",),
                 ("largest number of units each source can send",)),
        Phrasing(r"\bshipping cost per unit \(dollars\)", ("shipping cost per unit (dollars)",),
                 ("cost of sending one unit (USD)",)),
        Phrasing(r"\bmost units on that route\b", ("most units on that route",),
                 ("largest number of units that route can take",)),
        Phrasing(r"\broutes that cannot be used\b", ("routes that cannot be used",), ("routes that are closed",)),
    )
    data_fields = {
        "sources": "list of source names",
        "destinations": "list of destination names",
        "supply": "most units each source can ship, keyed by source",
        "demand": "units each destination must receive (at least), keyed by destination",
        "cost": "cost[source][destination]: shipping cost per unit (dollars)",
        "route_capacity": "route_capacity[source][destination]: most units on that route (only when some routes "
                          "have a capacity; routes not listed have none)",
        "forbidden": "list of [source, destination] routes that cannot be used (only when some are closed)",
        "fixed_cost": "fixed_cost[source][destination]: cost (dollars) of using the route at all (only when "
                      "routes have fixed costs)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _SETS = '''\
model = pyo.ConcreteModel()
model.S = pyo.Set(initialize=data["sources"])
model.D = pyo.Set(initialize=data["destinations"])
model.ship = pyo.Var(model.S, model.D, domain=pyo.NonNegativeReals)
'''
    _OBJECTIVE = '''\

model.obj = pyo.Objective(
    expr=sum(data["cost"][s][d] * model.ship[s, d] for s in model.S for d in model.D), sense=pyo.minimize
)
'''
    _FIXED_COST = '''\
model.use = pyo.Var(model.S, model.D, domain=pyo.Binary)  # 1 when the route carries anything

model.obj = pyo.Objective(
    expr=sum(data["cost"][s][d] * model.ship[s, d] + data["fixed_cost"][s][d] * model.use[s, d]
             for s in model.S for d in model.D),
    sense=pyo.minimize,
)
# a route ships only when it is used; a source never ships more than its supply on one route
model.use_route = pyo.Constraint(
    model.S, model.D, rule=lambda model, s, d: model.ship[s, d] <= data["supply"][s] * model.use[s, d]
)
'''
    _SUPPLY_DEMAND = '''\
model.supply = pyo.Constraint(
    model.S, rule=lambda model, s: sum(model.ship[s, d] for d in model.D) <= data["supply"][s]
)
model.demand = pyo.Constraint(
    model.D, rule=lambda model, d: sum(model.ship[s, d] for s in model.S) >= data["demand"][d]
)
'''
    _ROUTE_CAPACITY = '''\
model.capped = pyo.Set(
    initialize=[(s, d) for s in data["route_capacity"] for d in data["route_capacity"][s]], dimen=2
)
model.route_capacity = pyo.Constraint(
    model.capped, rule=lambda model, s, d: model.ship[s, d] <= data["route_capacity"][s][d]
)
'''
    _FORBIDDEN = '''\
model.closed = pyo.Set(initialize=[tuple(route) for route in data["forbidden"]], dimen=2)
model.forbidden = pyo.Constraint(model.closed, rule=lambda model, s, d: model.ship[s, d] == 0)
'''

    model_code = _SETS + _OBJECTIVE + _SUPPLY_DEMAND  # the base model (the other pieces are optional)

    # the same model in gurobipy, piece by piece as `model_code_for`
    _GP_VARS = '''\
S, D = data["sources"], data["destinations"]
model = gp.Model("transportation")
ship = model.addVars(S, D, lb=0.0, name="ship")
'''
    _GP_OBJECTIVE = '''\

model.setObjective(gp.quicksum(data["cost"][s][d] * ship[s, d] for s in S for d in D), GRB.MINIMIZE)
'''
    _GP_FIXED_COST = '''\
use = model.addVars(S, D, vtype=GRB.BINARY, name="use")  # 1 when the route carries anything

model.setObjective(
    gp.quicksum(data["cost"][s][d] * ship[s, d] + data["fixed_cost"][s][d] * use[s, d] for s in S for d in D),
    GRB.MINIMIZE,
)
# a route ships only when it is used; a source never ships more than its supply on one route
model.addConstrs((ship[s, d] <= data["supply"][s] * use[s, d] for s in S for d in D), name="use_route")
'''
    _GP_SUPPLY_DEMAND = '''\
model.addConstrs((ship.sum(s, "*") <= data["supply"][s] for s in S), name="supply")
model.addConstrs((ship.sum("*", d) >= data["demand"][d] for d in D), name="demand")
'''
    _GP_ROUTE_CAPACITY = '''\
model.addConstrs(
    (ship[s, d] <= data["route_capacity"][s][d] for s in data["route_capacity"] for d in data["route_capacity"][s]),
    name="route_capacity",
)
'''
    _GP_FORBIDDEN = '''\
model.addConstrs((ship[s, d] == 0 for s, d in data["forbidden"]), name="forbidden")
'''
    gurobipy_code = _GP_VARS + _GP_OBJECTIVE + _GP_SUPPLY_DEMAND

    def gurobipy_code_for(self, data: dict) -> str:
        code = self._GP_VARS + (self._GP_FIXED_COST if "fixed_cost" in data else self._GP_OBJECTIVE)
        code += self._GP_SUPPLY_DEMAND
        if "route_capacity" in data:
            code += self._GP_ROUTE_CAPACITY
        if "forbidden" in data:
            code += self._GP_FORBIDDEN
        return code

    def model_code_for(self, data: dict) -> str:
        code = self._SETS + (self._FIXED_COST if "fixed_cost" in data else self._OBJECTIVE) + self._SUPPLY_DEMAND
        if "route_capacity" in data:
            code += self._ROUTE_CAPACITY
        if "forbidden" in data:
            code += self._FORBIDDEN
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("route_capacity", "forbidden", "fixed_cost") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "use": "binary"} if "fixed_cost" in data else self.domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "fixed_cost" in data else "LP"

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
        data = {"sources": sources, "destinations": destinations, "supply": supply, "demand": demand,
                "cost": cost}
        if rng.random() < 0.45:
            return data  # the base model (the demo's), kept common
        parts = ("route_capacity", "forbidden") if difficulty == INDUSTRIAL else (
            "route_capacity", "forbidden", "fixed_cost")
        chosen = []
        while not chosen:
            chosen = [part for part in parts if rng.random() < 0.5]
        plan = northwest_corner(sources, destinations, supply, demand)
        routes = [(s, d) for s in sources for d in destinations]
        if "route_capacity" in chosen:
            # a quarter of the routes get a capacity, never below what the feasible plan ships on them
            capped = sorted(rng.sample(routes, max(1, len(routes) // 4)), key=routes.index)
            data["route_capacity"] = {}
            for s, d in capped:
                limit = max(plan.get((s, d), 0), int(demand[d] * rng.uniform(0.3, 0.7)))
                data["route_capacity"].setdefault(s, {})[d] = limit
        if "forbidden" in chosen:
            unused = [route for route in routes if plan.get(route, 0) == 0]
            closed = sorted(rng.sample(unused, min(len(unused), max(1, len(routes) // 6))), key=routes.index)
            if closed:
                data["forbidden"] = [list(route) for route in closed]
        if "fixed_cost" in chosen:
            data["fixed_cost"] = {s: {d: rng.randint(40, 400) for d in destinations} for s in sources}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one destination's demand grows past everything the sources can ship together
        data = dict(data)
        destination = rng.choice(data["destinations"])
        others = sum(v for d, v in data["demand"].items() if d != destination)
        data["demand"] = {**data["demand"],
                          destination: sum(data["supply"].values()) - others + rng.randint(1, 30)}
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        closed = {tuple(route) for route in data.get("forbidden", ())}
        capacity = data.get("route_capacity", {})
        columns = {}
        for s in data["sources"]:
            for d in data["destinations"]:
                upper = 0.0 if (s, d) in closed else capacity.get(s, {}).get(d, INF)
                columns[s, d] = matrix.add_var(f"ship[{s},{d}]", 0.0, upper, cost=data["cost"][s][d])
        if "fixed_cost" in data:
            for s in data["sources"]:
                for d in data["destinations"]:
                    use = matrix.add_var(f"use[{s},{d}]", 0.0, 1.0, cost=data["fixed_cost"][s][d], integer=True)
                    matrix.add_row({columns[s, d]: 1.0, use: -float(data["supply"][s])}, upper=0.0,
                                   name=f"use_route[{s},{d}]")
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
        for s, limits in data.get("route_capacity", {}).items():
            for d, limit in limits.items():
                yield Row(f"route_capacity[{s},{d}]", ship[s, d], "<=", limit)
        for s, d in data.get("forbidden", ()):
            yield Row(f"forbidden[{s},{d}]", ship[s, d], "==", 0)
        if "fixed_cost" in data:
            for s in data["sources"]:
                for d in data["destinations"]:
                    yield Row(f"use_route[{s},{d}]", ship[s, d] - data["supply"][s] * x["use"][s, d], "<=", 0)

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["cost"][s][d] * x["ship"][s, d] for s in data["sources"] for d in data["destinations"])
        if "fixed_cost" in data:
            total += sum(data["fixed_cost"][s][d] * x["use"][s, d]
                         for s in data["sources"] for d in data["destinations"])
        return total

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
            "dairy": f"{words['company'].capitalize()} sends crates of milk from {join_names(sources)} to "
                     f"{join_names(destinations)} {words['period']}.",
            "steel": f"{words['company'].capitalize()} moves steel from {join_names(sources)} to "
                     f"{join_names(destinations)} {words['period']}.",
            "fuel": f"{words['company'].capitalize()} has to deliver fuel from {join_names(sources)} to "
                    f"{join_names(destinations)} {words['period']}.",
        }[scenario.key]
        question = (f"How many {plural(unit)} should go from each source to each destination to meet every demand at "
                    "the lowest total shipping cost, and what is that cost? Fractional amounts are allowed.")
        if "fixed_cost" in data:
            question = question.replace("shipping cost", "cost (shipping plus the fixed costs of the routes used)")
        routes = []  # the optional route rules, stated in words in every representation
        if "route_capacity" in data:
            routes.append("Route limits: " + "; ".join(
                f"at most {fmt(limit)} {plural(unit)} can go from {s} to {d}"
                for s, limits in data["route_capacity"].items() for d, limit in limits.items()) + ".")
        if "forbidden" in data:
            routes.append("These routes are closed and cannot be used: "
                          + "; ".join(f"{s} to {d}" for s, d in data["forbidden"]) + ".")
        if "fixed_cost" in data and representation == "text":
            for s in sources:
                fixed = ", ".join(f"${fmt(data['fixed_cost'][s][d])} to {d}" for d in destinations)
                routes.append(f"Using a route at all adds a fixed cost, whatever it carries: from {s}, {fixed}.")
        if representation == "text":
            parts = [intro]
            parts.append("Supplies: " + "; ".join(f"{s} can ship at most {fmt(data['supply'][s])} {plural(unit)}"
                                                 for s in sources) + ".")
            parts.append("Demands: " + "; ".join(f"{d} needs {fmt(data['demand'][d])} {plural(unit)}"
                                                for d in destinations) + ".")
            for s in sources:
                costs = ", ".join(f"${fmt(data['cost'][s][d])} to {d}" for d in destinations)
                parts.append(f"Shipping one {unit} from {s} costs {costs}.")
            parts += routes
            parts.append(question)
            return " ".join(parts)
        if representation == "table":
            table = markdown_table(
                ["cost ($/" + unit + ")", *destinations, "supply"],
                [[s, *[data["cost"][s][d] for d in destinations], data["supply"][s]] for s in sources]
                + [["demand", *[data["demand"][d] for d in destinations], ""]])
            text = f"{intro} Unit shipping costs, supplies and demands ({plural(unit)}):\n\n{table}\n\n"
            if "fixed_cost" in data:
                fixed = markdown_table(["fixed cost ($)", *destinations],
                                       [[s, *[data["fixed_cost"][s][d] for d in destinations]] for s in sources])
                text += ("Using a route at all adds a fixed cost, whatever it carries:\n\n"
                         f"{fixed}\n\n")
            if routes:
                text += " ".join(routes) + "\n\n"
            return text + question
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            if "fixed_cost" in data:
                routes.append("Using a route at all adds a fixed cost, whatever it carries.")
            rules = " " + " ".join(routes) if routes else ""
            return (f"{intro} Each source has a limited supply, each destination a demand, and every route a "
                    f"cost per {unit}.{rules}\n\n{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        sets = "sources $S$, destinations $D$"
        parameters = "supply $a_s$, demand $b_d$, unit cost $c_{sd}$"
        variables = "$x_{sd} \\ge 0$, units shipped from $s$ to $d$"
        objective = "\\sum_{s \\in S} \\sum_{d \\in D} c_{sd} x_{sd}"
        rows = ["\\text{s.t.}\\ & \\sum_{d \\in D} x_{sd} \\le a_s && \\forall s \\in S",
                "& \\sum_{s \\in S} x_{sd} \\ge b_d && \\forall d \\in D"]
        if "fixed_cost" in data:
            parameters += ", fixed cost $f_{sd}$ of using a route"
            variables += "; $y_{sd} \\in \\{0, 1\\}$, 1 when route $(s, d)$ is used"
            objective += " + \\sum_{s \\in S} \\sum_{d \\in D} f_{sd} y_{sd}"
            rows.append("& x_{sd} \\le a_s y_{sd} && \\forall s \\in S, d \\in D")
        if "route_capacity" in data:
            sets += ", capacitated routes $K \\subseteq S \\times D$"
            parameters += ", route capacity $u_{sd}$"
            rows.append("& x_{sd} \\le u_{sd} && \\forall (s, d) \\in K")
        if "forbidden" in data:
            sets += ", closed routes $F \\subseteq S \\times D$"
            rows.append("& x_{sd} = 0 && \\forall (s, d) \\in F")
        rows.append("& x_{sd} \\ge 0 && \\forall s \\in S, d \\in D")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


def northwest_corner(sources: list[str], destinations: list[str], supply: dict, demand: dict) -> dict:
    """A feasible plan (route -> amount) by the north-west corner rule: fill destinations in order from
    sources in order. It needs total supply >= total demand, which `sample` guarantees."""
    plan, left = {}, dict(supply)
    k = 0
    for d in destinations:
        need = demand[d]
        while need > 0:
            amount = min(need, left[sources[k]])
            if amount > 0:
                plan[sources[k], d] = amount
                left[sources[k]] -= amount
                need -= amount
            if left[sources[k]] == 0:
                k += 1
    return plan


FAMILY = Transportation()
