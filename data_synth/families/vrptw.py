"""Vehicle routing with time windows (MILP): a fleet based at one depot visits every customer once,
starting each visit inside the customer's time window, at the least total distance. Arc binaries with
time-propagation constraints (big-M per arc, the tightest the windows allow); as every arc takes time,
they also rule out subtours.

Structure variants (drawn per instance, recorded by the keys present): vehicle capacity with customer
demands and load variables (`capacity`), a fixed cost per vehicle used (`vehicle_cost`) and a depot
closing time every vehicle must be back by (`closing`), each independent: eight program skeletons."""

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
    markdown_table,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("grocery", "grocery delivery", {
        "company": "an online grocer", "depot": "Depot", "vehicle": "van", "vehicles": "vans",
        "customers": ["Alder St", "Birch Rd", "Cedar Ave", "Dune Way", "Elm Ct", "Fir Ln", "Grove Pl", "Hazel Row",
                      "Iris Sq", "Juniper Dr"],
        "load": "crates", "distance": "km",
    }),
    Scenario("pharma", "pharmaceutical logistics", {
        "company": "a pharmacy wholesaler", "depot": "Central Warehouse", "vehicle": "courier car",
        "vehicles": "courier cars",
        "customers": ["Pharmacy North", "Pharmacy Quay", "Clinic West", "Pharmacy Mill", "Care Home Oak",
                      "Clinic East", "Pharmacy Bridge", "Hospital Annex", "Pharmacy Park", "Clinic South"],
        "load": "parcels", "distance": "km",
    }),
    Scenario("technicians", "field service", {
        "company": "a boiler maintenance firm", "depot": "Service Base", "vehicle": "technician van",
        "vehicles": "technician vans",
        "customers": ["Site Anders", "Site Baker", "Site Chen", "Site Duarte", "Site Evans", "Site Fischer",
                      "Site Gupta", "Site Haddad", "Site Ito", "Site Jensen"],
        "load": "spare-part boxes", "distance": "km",
    }),
)

# eval only: other services, companies, depots, vehicles, stops, loads and distance units than any training
# scenario
EVAL_SCENARIOS = (
    Scenario("library", "mobile library services", {
        "company": "a county library service", "depot": "Library HQ", "vehicle": "book bus",
        "vehicles": "book buses",
        "customers": ["Ashby Green", "Brampton", "Colwick", "Dunholme", "Eastwell", "Fenby", "Gedling",
                      "Hemswell", "Ingham", "Kirton"],
        "load": "book crates", "distance": "miles",
    }),
    Scenario("laundry", "hotel linen services", {
        "company": "an industrial laundry", "depot": "Laundry Plant", "vehicle": "linen truck",
        "vehicles": "linen trucks",
        "customers": ["Hotel Aurora", "Hotel Belvedere", "Spa Cascade", "Hotel Dorian", "Inn Evergreen",
                      "Hotel Falcon", "Resort Granite", "Hotel Harbour", "Hostel Indigo", "Hotel Jasmine"],
        "load": "linen carts", "distance": "km",
    }),
    Scenario("vet", "farm veterinary care", {
        "company": "a farm veterinary practice", "depot": "Vet Clinic", "vehicle": "vet pickup",
        "vehicles": "vet pickups",
        "customers": ["Ashgrove Farm", "Bellacre Farm", "Coldbrook Farm", "Deerfold Farm", "Elmstead Farm",
                      "Foxhollow Farm", "Glenmoor Farm", "Hawthorn Farm", "Ivydene Farm", "Larkrise Farm"],
        "load": "vaccine boxes", "distance": "miles",
    }),
)


def _nodes(data: dict) -> list[str]:
    return [data["depot"], *data["customers"]]


def _arcs(data: dict) -> list[tuple[str, str]]:
    nodes = _nodes(data)
    return [(a, b) for a in nodes for b in nodes if a != b]


def _leave_latest(data: dict, node: str) -> float:
    """The latest a vehicle can leave `node`: after serving a customer that started at its window's end,
    or at time 0 from the depot."""
    if node == data["depot"]:
        return 0
    return data["due"][node] + data["service"][node]


def _time_m(data: dict, a: str, b: str) -> float:
    return max(0, _leave_latest(data, a) + data["distance"][a][b] - data["ready"][b])


def _closing_m(data: dict, a: str) -> float:
    return max(0, _leave_latest(data, a) + data["distance"][a][data["depot"]] - data["closing"])


class VehicleRoutingTimeWindows(ProblemFamily):
    name = "vrptw"
    title = "Vehicle routing with time windows"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"route": "binary", "arrive": "nonnegative", "carried": "nonnegative"}
    phrasings = (
        Phrasing(r"Vehicles leave the depot at time 0\.",
                 ("Vehicles leave the depot at time 0.", "All vehicles set off from the depot at time 0."),
                 ("Departure from the depot is at time 0 for every vehicle.",)),
        Phrasing(r"\bmay wait\b", ("may wait", "can wait"), ("is allowed to wait", "may idle")),
        Phrasing(r"Travel times in minutes equal the distances\.",
                 ("Travel times in minutes equal the distances.", "Driving takes one minute per distance unit."),
                 ("Each distance unit takes a minute to drive.",)),
        # eval-only wordings of the other fixed sentences ("at most" and "what is that" are left to the generic
        # rules, whose training wordings vary)
        Phrasing(r"\bEvery customer is visited exactly once by one\b", ("Every customer is visited exactly once by one",),
                 ("Each client gets precisely one visit, from a single",)),
        Phrasing(r"\bused starts and ends at the\b", ("used starts and ends at the",),
                 ("that is used leaves from and returns to the",)),
        Phrasing(r"\bService must start within the customer's time window;",
                 ("Service must start within the customer's time window;",),
                 ("Each visit has to begin inside the client's time window;",)),
        Phrasing(r"\bthat arrives early\b", ("that arrives early",), ("arriving ahead of time",)),
        Phrasing(r"\bcarries\b(?= at most)", ("carries",), ("holds",)),
        Phrasing(r", and each customer receives a given number of\b", (", and each customer receives a given number of",),
                 (", and every client is owed a set number of",)),
        Phrasing(r"\bcloses at minute\b", ("closes at minute",), ("shuts at minute",)),
        Phrasing(r"\bmust be back by then\.", ("must be back by then.",), ("has to have returned by that time.",)),
        Phrasing(r"\bthe total distance driven\b", ("the total distance driven",), ("the overall driving distance",)),
        Phrasing(r"\bplus a fixed charge of\b", ("plus a fixed charge of",), ("together with a flat charge of",)),
        Phrasing(r"-equivalents for\b", ("-equivalents for",), (" of equivalent distance for",)),
        Phrasing(r"\bWhich routes minimize\b", ("Which routes minimize",), ("What routes minimise",)),
        Phrasing(r"\bwindow\b(?= \d)", ("window",), ("time window",)),
        Phrasing(r"(?<=, )service(?= \d)", ("service",), ("on-site time",)),
        Phrasing(r"\bFrom\b(?= [^:.]+: \d)", ("From",), ("Leaving",)),
        Phrasing(r"\bDistances \(", ("Distances (",), ("Driving distances (",)),
        # table headers and the data.json field descriptions
        Phrasing(r"\bwindow opens\b", ("window opens",), ("earliest start",)),
        Phrasing(r"\bwindow closes\b", ("window closes",), ("latest start",)),
        Phrasing(r"\bservice \(min\)", ("service (min)",), ("time on site (min)",)),
        Phrasing(r"\bdistance between two places\b", ("distance between two places",), ("separation of two places",)),
        Phrasing(r"\btravel takes one minute per unit\b", ("travel takes one minute per unit",),
                 ("driving one unit takes a minute",)),
        Phrasing(r"\bstart of each customer's time window\b", ("start of each customer's time window",),
                 ("opening time of a client's window",)),
        Phrasing(r"\bend of each customer's time window \(minutes\): service must start by then\b",
                 ("end of each customer's time window (minutes): service must start by then",),
                 ("closing time of a client's window (minutes): the visit has to begin by then",)),
        Phrasing(r"\bminutes spent at each customer\b", ("minutes spent at each customer",),
                 ("time in minutes on site at a client",)),
        Phrasing(r"\bnumber of vehicles available\b", ("number of vehicles available",), ("size of the fleet",)),
        Phrasing(r"\bload one vehicle can carry\b", ("load one vehicle can carry",), ("load a single vehicle can hold",)),
        Phrasing(r"\bload each customer receives\b", ("load each customer receives",), ("load delivered to a client",)),
        Phrasing(r"\bfixed cost per vehicle used\b", ("fixed cost per vehicle used",),
                 ("flat charge for a vehicle in use",)),
        Phrasing(r"\btime by which every vehicle must be back at the depot\b",
                 ("time by which every vehicle must be back at the depot",),
                 ("deadline for all vehicles to return to the depot",)),
        Phrasing(r"\(only when vehicles have a capacity\)", ("(only when vehicles have a capacity)",),
                 ("(present if vehicles are capacitated)",)),
        Phrasing(r"\(only when using a vehicle costs extra\)", ("(only when using a vehicle costs extra)",),
                 ("(present if vehicles carry a charge)",)),
        Phrasing(r"\(only when the depot closes\)", ("(only when the depot closes)",),
                 ("(present if the depot has a closing time)",)),
    )
    data_fields = {
        "depot": "name of the depot",
        "customers": "list of customer names",
        "distance": "distance[from][to]: distance between two places (the depot or customers); travel takes one "
                    "minute per unit",
        "ready": "start of each customer's time window (minutes), keyed by customer",
        "due": "end of each customer's time window (minutes): service must start by then",
        "service": "minutes spent at each customer",
        "vehicles": "number of vehicles available",
        "capacity": "load one vehicle can carry (only when vehicles have a capacity)",
        "demand": "load each customer receives, keyed by customer (only when vehicles have a capacity)",
        "vehicle_cost": "fixed cost per vehicle used, in distance units (only when using a vehicle costs extra)",
        "closing": "time by which every vehicle must be back at the depot (only when the depot closes)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.C = pyo.Set(initialize=data["customers"])
depot, customers = data["depot"], data["customers"]
nodes = [depot, *customers]
arcs = [(a, b) for a in nodes for b in nodes if a != b]
model.route = pyo.Var(arcs, domain=pyo.Binary)  # a vehicle drives from a to b
model.arrive = pyo.Var(model.C, bounds=lambda model, c: (data["ready"][c], data["due"][c]))  # service starts


def leave_latest(a):  # the latest a vehicle can leave a: the depot at 0, a customer after a late service
    return 0 if a == depot else data["due"][a] + data["service"][a]


'''
    _DISTANCE = '''\
model.obj = pyo.Objective(expr=sum(data["distance"][a][b] * model.route[a, b] for a, b in arcs), sense=pyo.minimize)
'''
    _VEHICLE_COST = '''\
model.obj = pyo.Objective(expr=sum(data["distance"][a][b] * model.route[a, b] for a, b in arcs)
                          + data["vehicle_cost"] * sum(model.route[depot, c] for c in model.C), sense=pyo.minimize)
'''
    _BODY = '''\
model.enter = pyo.Constraint(model.C, rule=lambda model, c: sum(model.route[a, c] for a in nodes if a != c) == 1)
model.leave = pyo.Constraint(model.C, rule=lambda model, c: sum(model.route[c, b] for b in nodes if b != c) == 1)
model.fleet = pyo.Constraint(expr=sum(model.route[depot, c] for c in model.C) <= data["vehicles"])


def timing(model, a, b):  # b's service starts after a's service and the drive; void when the arc is unused
    big_m = max(0, leave_latest(a) + data["distance"][a][b] - data["ready"][b])
    start_a = 0 if a == depot else model.arrive[a] + data["service"][a]
    return model.arrive[b] >= start_a + data["distance"][a][b] - big_m * (1 - model.route[a, b])


model.timing = pyo.Constraint([(a, b) for a, b in arcs if b != depot], rule=timing)
'''
    _CAPACITY = '''\
model.carried = pyo.Var(model.C, bounds=lambda model, c: (data["demand"][c], data["capacity"]))  # delivered so far
model.loading = pyo.Constraint(
    [(a, b) for a in customers for b in customers if a != b], rule=lambda model, a, b: model.carried[b]
    >= model.carried[a] + data["demand"][b] - data["capacity"] * (1 - model.route[a, b]))
'''
    _CLOSING = '''\


def back_by_closing(model, c):  # void unless c is the last stop; M is the latest return minus the closing
    back = model.arrive[c] + data["service"][c] + data["distance"][c][depot]
    big_m = max(0, leave_latest(c) + data["distance"][c][depot] - data["closing"])
    return back <= data["closing"] + big_m * (1 - model.route[c, depot])


model.closing = pyo.Constraint(model.C, rule=back_by_closing)
'''
    model_code = _HEAD + _DISTANCE + _BODY + _CAPACITY  # the classic model: capacity and windows

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._VEHICLE_COST if "vehicle_cost" in data else self._DISTANCE) + self._BODY
        if "capacity" in data:
            code += self._CAPACITY
        if "closing" in data:
            code += self._CLOSING
        return code

    def domains_for(self, data: dict) -> dict[str, str]:
        return {name: domain for name, domain in self.domains.items() if name != "carried" or "capacity" in data}

    def variant_of(self, data: dict) -> str:
        return "+".join(key for key in ("capacity", "vehicle_cost", "closing") if key in data) or "windows-only"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_customers = size_for(difficulty, 4, 6, 8)
        n_vehicles = size_for(difficulty, 2, 2, 3)
        customers = rng.sample(words["customers"], n_customers)
        depot = words["depot"]
        nodes = [depot, *customers]
        where = {node: (rng.randint(0, 30), rng.randint(0, 30)) for node in nodes}
        distance = {a: {b: max(1, round(math.dist(where[a], where[b]))) for b in nodes if b != a} for a in nodes}
        service = {c: rng.choice((5, 10, 15)) for c in customers}
        # a witness plan: customers split among the vehicles, each route driven in a random order; windows are
        # drawn around the witness's arrival times, so the instance is feasible yet the windows matter
        order = rng.sample(customers, n_customers)
        cuts = sorted(rng.sample(range(1, n_customers), n_vehicles - 1))
        routes = [order[a:b] for a, b in zip([0, *cuts], [*cuts, n_customers], strict=True)]
        ready, due, back = {}, {}, 0
        for route in routes:
            clock, here = 0, depot
            for c in route:
                clock += distance[here][c]
                ready[c] = max(0, clock - rng.randint(0, 15))
                due[c] = clock + rng.randint(5, 25)
                clock, here = clock + service[c], c
            back = max(back, clock + distance[here][depot])
        data = {"depot": depot, "customers": customers, "distance": distance, "ready": ready, "due": due,
                "service": service, "vehicles": n_vehicles}
        if rng.random() < 0.5:
            demand = {c: rng.randint(2, 9) for c in customers}
            data["demand"] = demand
            data["capacity"] = max(sum(demand[c] for c in route) for route in routes) + rng.randint(0, 3)
        if rng.random() < 0.5:
            data["vehicle_cost"] = rng.randint(10, 40)
        if rng.random() < 0.5:
            data["closing"] = back + rng.randint(0, 10)
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a customer whose window closes before a vehicle could even drive there from the depot
        c = rng.choice(data["customers"])
        reach = data["distance"][data["depot"]][c]
        return {**data, "ready": {**data["ready"], c: 0}, "due": {**data["due"], c: reach - 1}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        depot, customers, distance = data["depot"], data["customers"], data["distance"]
        fixed = data.get("vehicle_cost", 0)
        route = {(a, b): matrix.add_var(f"route[{a},{b}]", 0, 1, integer=True,
                                        cost=distance[a][b] + (fixed if a == depot else 0)) for a, b in _arcs(data)}
        arrive = {c: matrix.add_var(f"arrive[{c}]", data["ready"][c], data["due"][c]) for c in customers}
        nodes = _nodes(data)
        for c in customers:
            matrix.add_row({route[a, c]: 1.0 for a in nodes if a != c}, 1, 1, name=f"enter[{c}]")
            matrix.add_row({route[c, b]: 1.0 for b in nodes if b != c}, 1, 1, name=f"leave[{c}]")
        matrix.add_row({route[depot, c]: 1.0 for c in customers}, upper=data["vehicles"], name="fleet")
        for a, b in _arcs(data):
            if b == depot:
                continue
            big_m = _time_m(data, a, b)
            # arrive_b - arrive_a - M route_ab >= service_a + distance_ab - M   (arrive_depot = service = 0)
            row = {arrive[b]: 1.0, route[a, b]: -big_m}
            offset = 0
            if a != depot:
                row[arrive[a]] = -1.0
                offset = data["service"][a]
            matrix.add_row(row, lower=offset + distance[a][b] - big_m, name=f"timing[{a},{b}]")
        if "capacity" in data:
            load = {c: matrix.add_var(f"carried[{c}]", data["demand"][c], data["capacity"]) for c in customers}
            for a in customers:
                for b in customers:
                    if a != b:
                        matrix.add_row({load[b]: 1.0, load[a]: -1.0, route[a, b]: -data["capacity"]},
                                       lower=data["demand"][b] - data["capacity"], name=f"loading[{a},{b}]")
        if "closing" in data:
            for c in customers:
                big_m = _closing_m(data, c)
                matrix.add_row({arrive[c]: 1.0, route[c, depot]: big_m},
                               upper=data["closing"] + big_m - data["service"][c] - distance[c][depot],
                               name=f"closing[{c}]")

    def constraint_rows(self, data: dict, x: dict):
        route, arrive = x["route"], x["arrive"]
        depot, customers, distance = data["depot"], data["customers"], data["distance"]
        nodes = _nodes(data)
        for c in customers:
            yield Row(f"enter[{c}]", sum(route[a, c] for a in nodes if a != c), "==", 1)
            yield Row(f"leave[{c}]", sum(route[c, b] for b in nodes if b != c), "==", 1)
            yield Row(f"ready[{c}]", arrive[c], ">=", data["ready"][c])
            yield Row(f"due[{c}]", arrive[c], "<=", data["due"][c])
        yield Row("fleet", sum(route[depot, c] for c in customers), "<=", data["vehicles"])
        for a, b in _arcs(data):
            if b == depot:
                continue
            done_a = 0 if a == depot else arrive[a] + data["service"][a]
            yield Row(f"timing[{a},{b}]", arrive[b] - done_a + _time_m(data, a, b) * (1 - route[a, b]), ">=",
                      distance[a][b])
        if "capacity" in data:
            load, capacity = x["carried"], data["capacity"]
            for c in customers:
                yield Row(f"carried_low[{c}]", load[c], ">=", data["demand"][c])
                yield Row(f"carried_high[{c}]", load[c], "<=", capacity)
            for a in customers:
                for b in customers:
                    if a != b:
                        yield Row(f"loading[{a},{b}]", load[b] - load[a] + capacity * (1 - route[a, b]), ">=",
                                  data["demand"][b])
        if "closing" in data:
            for c in customers:
                back = arrive[c] + data["service"][c] + distance[c][depot]
                yield Row(f"closing[{c}]", back - _closing_m(data, c) * (1 - route[c, depot]), "<=", data["closing"])

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["distance"][a][b] * x["route"][a, b] for a, b in _arcs(data))
        if "vehicle_cost" in data:
            total += data["vehicle_cost"] * sum(x["route"][data["depot"], c] for c in data["customers"])
        return total

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        depot, lines = data["depot"], []
        for first in data["customers"]:
            if x["route"][depot, first] < 0.5:
                continue
            stops, here = [], first
            while here != depot and len(stops) <= len(data["customers"]):
                stops.append(f"{here} at {fmt(round(x['arrive'][here], 4))}")
                here = next(b for b in _nodes(data) if b != here and x["route"][here, b] > 0.5)
            lines.append(f"- {depot} -> " + " -> ".join(stops) + f" -> {depot}")
        return "\n".join(lines)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        depot, customers = data["depot"], data["customers"]
        vehicle, vehicles, unit = words["vehicle"], words["vehicles"], words["distance"]
        intro = {
            "grocery": f"{words['company'].capitalize()} delivers today's orders to {len(customers)} addresses from "
                       f"its {depot} with up to {fmt(data['vehicles'])} {vehicles}.",
            "pharma": f"{words['company'].capitalize()} must supply {len(customers)} sites from its {depot}, using "
                      f"at most {fmt(data['vehicles'])} {vehicles}.",
            "technicians": f"{words['company'].capitalize()} sends its {vehicles} (no more than "
                           f"{fmt(data['vehicles'])}) from the {depot} to {len(customers)} booked visits.",
            "library": f"From {depot}, {words['company']} will serve {len(customers)} village stops today, using no "
                       f"more than {fmt(data['vehicles'])} {vehicles}.",
            "laundry": f"{words['company'].capitalize()} collects and returns linen at {len(customers)} hotels, "
                       f"dispatching up to {fmt(data['vehicles'])} {vehicles} from its {depot}.",
            "vet": f"{words['company'].capitalize()} has {len(customers)} farm calls booked for today; its {depot} can "
                   f"send out as many as {fmt(data['vehicles'])} {vehicles}.",
        }[scenario.key]
        rules = (f"Every customer is visited exactly once by one {vehicle}, and every {vehicle} used starts and ends "
                 f"at the {depot}. Vehicles leave the depot at time 0. Travel times in minutes equal the distances. "
                 f"Service must start within the customer's time window; a {vehicle} that arrives early may wait.")
        if "capacity" in data:
            rules += (f" Each {vehicle} carries at most {fmt(data['capacity'])} {words['load']}, and each customer "
                      f"receives a given number of {words['load']}.")
        if "closing" in data:
            rules += f" The {depot} closes at minute {fmt(data['closing'])}: every {vehicle} must be back by then."
        cost = f"the total distance driven (in {unit})"
        if "vehicle_cost" in data:
            cost = (f"the total distance driven plus a fixed charge of {fmt(data['vehicle_cost'])} {unit}-equivalents "
                    f"for each {vehicle} used")
        question = f"Which routes minimize {cost}, and what is that minimum?"
        places = [depot, *customers]
        if representation == "text":
            visits = " ".join(
                f"{c}: window {fmt(data['ready'][c])} to {fmt(data['due'][c])}, service {fmt(data['service'][c])} "
                f"minutes" + (f", {fmt(data['demand'][c])} {words['load']}" if "capacity" in data else "") + "."
                for c in customers)
            gaps = " ".join(f"From {a}: " + ", ".join(f"{fmt(data['distance'][a][b])} to {b}" for b in places if b != a)
                            + "." for a in places)
            return f"{intro} {rules} {visits} Distances ({unit}): {gaps} {question}"
        if representation == "table":
            headers = ["customer", "window opens", "window closes", "service (min)"]
            if "capacity" in data:
                headers.append(words["load"])
            rows = [[c, data["ready"][c], data["due"][c], data["service"][c]]
                    + ([data["demand"][c]] if "capacity" in data else []) for c in customers]
            gaps = markdown_table([f"from \\ to ({unit})", *places],
                                  [[a, *[data["distance"][a][b] if b != a else "-" for b in places]] for a in places])
            return f"{intro} {rules}\n\n{markdown_table(headers, rows)}\n\n{gaps}\n\n{question}"
        if representation == "file":
            return f"{intro} {rules} {question}\n\n{describe_data_file(self.data_fields)}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        objective = "\\sum_{(a,b) \\in A} d_{ab} x_{ab}"
        parameters = ("distance $d_{ab}$, window $[e_c, l_c]$, service $s_c$, vehicles $K$, "
                      "$M_{ab} = \\max(0, l_a + s_a + d_{ab} - e_b)$ (depot: $l_0 + s_0 = 0$)")
        if "vehicle_cost" in data:
            objective += " + F \\sum_{c \\in C} x_{0c}"
            parameters += ", vehicle charge $F$"
        rows = ["\\text{s.t.}\\ & \\sum_{a} x_{ac} = \\sum_{b} x_{cb} = 1 && \\forall c \\in C",
                "& \\sum_{c \\in C} x_{0c} \\le K",
                "& t_b \\ge t_a + s_a + d_{ab} - M_{ab}(1 - x_{ab}) && \\forall (a, b) \\in A, b \\ne 0 \\quad (t_0 = 0)",
                "& e_c \\le t_c \\le l_c && \\forall c \\in C"]
        variables = "$x_{ab} \\in \\{0,1\\}$ (a vehicle drives $a \\to b$), service start $t_c$"
        if "capacity" in data:
            parameters += ", capacity $Q$, demand $q_c$"
            variables += ", load delivered so far $u_c$"
            rows.append("& u_b \\ge u_a + q_b - Q(1 - x_{ab}),\\ q_c \\le u_c \\le Q && \\forall a, b \\in C")
        if "closing" in data:
            parameters += ", depot closing $T$"
            rows.append("& t_c + s_c + d_{c0} \\le T + M'_c (1 - x_{c0}) && \\forall c \\in C")
        return ("**Sets**: depot $0$, customers $C$, arcs $A$ between all places.\n\n"
                f"**Parameters**: {parameters}.\n\n**Variables**: {variables}.\n\n"
                f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows)
                + "\n\\end{aligned}\n$$")


FAMILY = VehicleRoutingTimeWindows()
