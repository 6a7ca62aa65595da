"""Static line planning (MILP): from candidate public-transport lines, each running over a fixed set of
network sections, choose which lines to open and how many trips per hour each runs, so that every
section's peak-hour passenger load fits into the capacity offered on it, at the least cost (a fixed
cost per open line plus a cost per hourly trip). The cost model of Borndoerfer, Groetschel and
Pfetsch's line-planning models, with integer frequencies linked to the opening binaries.

Structure variants (drawn per instance, recorded by the keys present): a minimum service frequency on
every section (`min_frequency`), a fleet limit counting the vehicles each hourly trip ties up
(`fleet`), and unserved passengers allowed at a penalty (`penalty`: load rows become soft), each
independent: eight program skeletons."""

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
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("bus", "urban public transport", {
        "company": "a city's bus authority", "vehicle": "bus", "vehicles": "buses", "line_prefix": "Bus ",
        "stations": ["Central", "Harbour", "Market", "University", "Stadium", "Old Town", "Hospital", "Airport",
                     "Riverside", "Park"],
        "capacity_range": (60, 110), "money": "euros",
    }),
    Scenario("tram", "light rail", {
        "company": "a tram operator", "vehicle": "tram", "vehicles": "trams", "line_prefix": "Tram ",
        "stations": ["Hauptbahnhof", "Rathaus", "Messe", "Zoo", "Klinikum", "Hafen", "Nordpark", "Uni-Campus",
                     "Westkreuz", "Altstadt"],
        "capacity_range": (150, 260), "money": "euros",
    }),
    Scenario("rail", "regional rail", {
        "company": "a regional rail authority", "vehicle": "train set", "vehicles": "train sets",
        "line_prefix": "RE ",
        "stations": ["Northgate", "Eastfield", "Southport", "Westbury", "Midvale", "Lakeside", "Hillcrest",
                     "Brookton", "Ashford", "Kingsbridge"],
        "capacity_range": (300, 600), "money": "dollars",
    }),
)

# eval only: other operators, vehicles, stops and currencies than any training scenario
EVAL_SCENARIOS = (
    Scenario("trolleybus", "electric trolleybus networks", {
        "company": "a municipal trolleybus company", "vehicle": "trolleybus", "vehicles": "trolleybuses",
        "line_prefix": "Trolley ",
        "stations": ["Cathedral", "Fairground", "Tannery", "Mill Lane", "Canal Basin", "Observatory", "Foundry",
                     "Brewery", "Castle Hill", "Orchard"],
        "capacity_range": (70, 120), "money": "pounds",
    }),
    Scenario("waterbus", "urban waterways", {
        "company": "a harbour waterbus service", "vehicle": "boat", "vehicles": "boats", "line_prefix": "Route ",
        "stations": ["Quayside", "Fish Pier", "Lighthouse", "Marina", "Shipyard", "Opera Wharf", "Naval Dock",
                     "Sandbank", "Customs House", "Boathouse"],
        "capacity_range": (40, 90), "money": "kroner",
    }),
    Scenario("metro", "metro systems", {
        "company": "a metropolitan subway authority", "vehicle": "metro train", "vehicles": "metro trains",
        "line_prefix": "M",
        "stations": ["Plaza Mayor", "Alameda", "Los Pinos", "Retiro Norte", "Las Torres", "San Isidro",
                     "Puerta Sur", "La Ermita", "Villaverde", "El Carmen"],
        "capacity_range": (400, 900), "money": "pesos",
    }),
)


class StaticLinePlanning(ProblemFamily):
    name = "static_line_planning"
    title = "Static line planning"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"open": "binary", "trips": "nonnegative_integer", "unserved": "nonnegative"}
    phrasings = (
        Phrasing(r"A line that is not opened runs no trips\.",
                 ("A line that is not opened runs no trips.", "Closed lines run no trips at all."),
                 ("Only an opened line may run trips.",)),
        Phrasing(r"\bpeak-hour load\b", ("peak-hour load", "rush-hour load"), ("load at the busiest hour",)),
        Phrasing(r"\bruns over the sections\b", ("runs over the sections", "serves the sections"),
                 ("covers the sections", "travels along the sections")),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text); rules stop
        # before generic phrases with several training wordings ("at most", "what is that", "keyed by")
        Phrasing(r"\bOpening a line costs its fixed cost per hour, and each hourly trip costs its trip cost, both in\b",
                 ("Opening a line costs its fixed cost per hour, and each hourly trip costs its trip cost, both in",),
                 ("An opened line is charged its fixed cost for every hour and every hourly trip is charged its "
                  "trip cost, all amounts in",)),
        Phrasing(r"\bAn open line runs a whole number of trips per hour, (?=at most\b)",
                 ("An open line runs a whole number of trips per hour, ",),
                 ("Trips per hour of an open line come in whole numbers, ",)),
        Phrasing(r"\bEach trip of a line carries up to its capacity in passengers on every section of its route\.",
                 ("Each trip of a line carries up to its capacity in passengers on every section of its route.",),
                 ("On every section along its route, a single trip of a line takes as many passengers as its "
                  "capacity.",)),
        Phrasing(r"\bof a section should be carried by the lines over it; every passenger per hour left unserved "
                 r"costs\b",
                 ("of a section should be carried by the lines over it; every passenger per hour left unserved costs",),
                 ("of a section ought to be taken by the lines crossing it; for each passenger an hour left behind, "
                  "the operator pays",)),
        Phrasing(r"\bThe lines over each section must together carry its whole (?=peak-hour load\b)",
                 ("The lines over each section must together carry its whole ",),
                 ("Together, the lines crossing a section have to move all of its ",)),
        Phrasing(r"\bEvery section must see (?=at least\b)", ("Every section must see ",),
                 ("Each section is to be served by ",)),
        Phrasing(r"\btrips per hour in total\.", ("trips per hour in total.",), ("hourly trips, all lines combined.",)),
        Phrasing(r"\bOne hourly trip of a line ties up the number of\b", ("One hourly trip of a line ties up the number of",),
                 ("Each hourly trip of a line keeps busy the count of",)),
        Phrasing(r"\bgiven for it, and only\b", ("given for it, and only",), ("stated for that line, and just",)),
        Phrasing(r"(?<=[a-z] )are available\.", ("are available.",), ("are in service.",)),
        Phrasing(r"\bWhich lines should be opened, with how many trips per hour, to minimize the total hourly cost, "
                 r"and (?=what is that\b)",
                 ("Which lines should be opened, with how many trips per hour, to minimize the total hourly cost, and ",),
                 ("Which lines are best opened, and at how many trips an hour, so that the overall hourly cost is as "
                  "small as possible, and ",)),
        Phrasing(r"; a trip carries\b", ("; a trip carries",), ("; one trip takes",)),
        Phrasing(r"\bpassengers, opening costs\b", ("passengers, opening costs",), ("passengers, its opening cost is",)),
        Phrasing(r", a trip costs\b", (", a trip costs",), (", its trip cost is",)),
        Phrasing(r", and a trip ties up\b", (", and a trip ties up",), (", and one trip occupies",)),
        Phrasing(r"\bPeak-hour loads \(passengers per hour\):", ("Peak-hour loads (passengers per hour):",),
                 ("Passengers an hour at the peak, by section:",)),
        Phrasing(r"\bcapacity per trip\b", ("capacity per trip",), ("passengers a trip",)),
        Phrasing(r"\(passengers/hour\)", ("(passengers/hour)",), ("(riders an hour)",)),
    )
    data_fields = {
        "lines": "list of candidate line names",
        "sections": "list of network section names",
        "route": "route[line]: the sections the line runs over",
        "load": "passengers per hour that must travel over each section at the peak, keyed by section",
        "capacity": "passengers one trip of the line carries, keyed by line",
        "fixed_cost": "cost of opening each line (per hour of operation), keyed by line",
        "trip_cost": "cost of each hourly trip of the line, keyed by line",
        "max_trips": "most trips per hour any open line can run",
        "min_frequency": "fewest trips per hour every section must see (only when there is such a minimum)",
        "vehicles_per_trip": "vehicles tied up by one hourly trip of each line (only when the fleet is limited)",
        "fleet": "vehicles available in all (only when the fleet is limited)",
        "penalty": "cost per passenger per hour left unserved on a section (only when passengers may be left "
                   "unserved)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.L = pyo.Set(initialize=data["lines"])
model.S = pyo.Set(initialize=data["sections"])
model.open = pyo.Var(model.L, domain=pyo.Binary)                 # the line is operated
model.trips = pyo.Var(model.L, domain=pyo.NonNegativeIntegers)   # trips per hour
cost = sum(data["fixed_cost"][line] * model.open[line] + data["trip_cost"][line] * model.trips[line] for line in model.L)


def offered(model, s):  # passengers per hour the open lines carry over section s
    return sum(data["capacity"][line] * model.trips[line] for line in model.L if s in data["route"][line])


model.only_if_open = pyo.Constraint(model.L, rule=lambda model, line: model.trips[line] <= data["max_trips"] * model.open[line])
'''
    _HARD = '''\
model.obj = pyo.Objective(expr=cost, sense=pyo.minimize)
model.carry = pyo.Constraint(model.S, rule=lambda model, s: offered(model, s) >= data["load"][s])
'''
    _SOFT = '''\
model.unserved = pyo.Var(model.S, domain=pyo.NonNegativeReals)  # passengers per hour left behind
model.obj = pyo.Objective(expr=cost + sum(data["penalty"] * model.unserved[s] for s in model.S), sense=pyo.minimize)
model.carry = pyo.Constraint(model.S, rule=lambda model, s: offered(model, s) + model.unserved[s] >= data["load"][s])
'''
    _MIN_FREQUENCY = '''\
model.min_frequency = pyo.Constraint(model.S, rule=lambda model, s: sum(
    model.trips[line] for line in model.L if s in data["route"][line]) >= data["min_frequency"])
'''
    _FLEET = '''\
model.fleet = pyo.Constraint(expr=sum(data["vehicles_per_trip"][line] * model.trips[line] for line in model.L) <= data["fleet"])
'''
    model_code = _HEAD + _HARD + _MIN_FREQUENCY  # the classic cost model with a service frequency

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._SOFT if "penalty" in data else self._HARD)
        if "min_frequency" in data:
            code += self._MIN_FREQUENCY
        if "fleet" in data:
            code += self._FLEET
        return code

    def domains_for(self, data: dict) -> dict[str, str]:
        return {name: domain for name, domain in self.domains.items() if name != "unserved" or "penalty" in data}

    def variant_of(self, data: dict) -> str:
        return "+".join(key for key in ("min_frequency", "fleet", "penalty") if key in data) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_stations = size_for(difficulty, 5, 7, 9)
        n_lines = size_for(difficulty, 4, 6, 8)
        stations = rng.sample(words["stations"], n_stations)
        # the network: a chain through the stations and a few cross links
        links = [(stations[k], stations[k + 1]) for k in range(n_stations - 1)]
        while len(links) < n_stations - 1 + n_stations // 3:
            a, b = rng.sample(stations, 2)
            if (a, b) not in links and (b, a) not in links:
                links.append((a, b))
        sections = [f"{a}-{b}" for a, b in links]
        neighbours = {s: [] for s in stations}
        for (a, b), name in zip(links, sections, strict=True):
            neighbours[a].append((b, name))
            neighbours[b].append((a, name))
        # candidate lines: walks of 2-4 sections without revisiting a station; the first ones start on sections
        # no line covers yet, so every section is served by some line
        routes: list[list[str]] = []
        covered: set[str] = set()
        while len(routes) < n_lines or len(covered) < len(sections):
            uncovered = [k for k, name in enumerate(sections) if name not in covered]
            a, b = links[uncovered[0]] if uncovered else links[rng.randrange(len(links))]
            walk, seen, here = [f"{a}-{b}"], {a, b}, b
            for _ in range(rng.randint(1, 3)):
                options = [(c, name) for c, name in neighbours[here] if c not in seen]
                if not options:
                    break
                here, name = rng.choice(options)
                walk.append(name)
                seen.add(here)
            routes.append(sorted(walk, key=sections.index))
            covered.update(walk)
        lines = [f"{words['line_prefix']}{k + 1}" for k in range(len(routes))]
        route = dict(zip(lines, routes, strict=True))
        low, high = words["capacity_range"]
        capacity = {line: rng.randrange(low, high + 1, 10) for line in lines}
        max_trips = rng.randint(6, 10)
        # a witness: every line runs some trips; loads are drawn below what the witness offers
        witness = {line: rng.randint(2, max_trips) for line in lines}
        load = {s: round(sum(capacity[line] * witness[line] for line in lines if s in route[line]) * rng.uniform(0.4, 0.8))
                for s in sections}
        data = {"lines": lines, "sections": sections, "route": route, "load": load, "capacity": capacity,
                "fixed_cost": {line: rng.randint(20, 60) * 10 for line in lines},
                "trip_cost": {line: rng.randint(8, 30) * len(route[line]) for line in lines}, "max_trips": max_trips}
        if rng.random() < 0.5:
            data["min_frequency"] = min(sum(witness[line] for line in lines if s in route[line]) for s in sections)
        if rng.random() < 0.5:
            per_trip = {line: len(route[line]) + rng.randint(0, 1) for line in lines}
            data["vehicles_per_trip"] = per_trip
            data["fleet"] = sum(per_trip[line] * witness[line] for line in lines)  # the witness's fleet: it stays feasible
        if rng.random() < 0.5:
            data["penalty"] = rng.randint(2, 6)
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a section loaded beyond what all its lines at full frequency could carry, with no one left behind
        s = rng.choice(data["sections"])
        most = sum(data["capacity"][line] * data["max_trips"] for line in data["lines"] if s in data["route"][line])
        variant = {key: value for key, value in data.items() if key != "penalty"}
        variant["load"] = {**data["load"], s: most + 1}
        return variant

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        lines = data["lines"]
        opened = {line: matrix.add_var(f"open[{line}]", 0, 1, cost=data["fixed_cost"][line], integer=True) for line in lines}
        trips = {line: matrix.add_var(f"trips[{line}]", 0, data["max_trips"], cost=data["trip_cost"][line], integer=True)
                 for line in lines}
        for line in lines:
            matrix.add_row({trips[line]: 1.0, opened[line]: -data["max_trips"]}, upper=0.0, name=f"only_if_open[{line}]")
        for s in data["sections"]:
            serving = [line for line in lines if s in data["route"][line]]
            row = {trips[line]: data["capacity"][line] for line in serving}
            if "penalty" in data:
                row[matrix.add_var(f"unserved[{s}]", 0.0, cost=data["penalty"])] = 1.0
            matrix.add_row(row, lower=data["load"][s], name=f"carry[{s}]")
            if "min_frequency" in data:
                matrix.add_row({trips[line]: 1.0 for line in serving}, lower=data["min_frequency"], name=f"min_frequency[{s}]")
        if "fleet" in data:
            matrix.add_row({trips[line]: data["vehicles_per_trip"][line] for line in lines}, upper=data["fleet"], name="fleet")

    def constraint_rows(self, data: dict, x: dict):
        opened, trips = x["open"], x["trips"]
        for line in data["lines"]:
            yield Row(f"only_if_open[{line}]", trips[line] - data["max_trips"] * opened[line], "<=", 0)
        for s in data["sections"]:
            serving = [line for line in data["lines"] if s in data["route"][line]]
            offered = sum(data["capacity"][line] * trips[line] for line in serving)
            if "penalty" in data:
                offered += x["unserved"][s]
            yield Row(f"carry[{s}]", offered, ">=", data["load"][s])
            if "min_frequency" in data:
                yield Row(f"min_frequency[{s}]", sum(trips[line] for line in serving), ">=", data["min_frequency"])
        if "fleet" in data:
            yield Row("fleet", sum(data["vehicles_per_trip"][line] * trips[line] for line in data["lines"]), "<=",
                      data["fleet"])

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["fixed_cost"][line] * x["open"][line] + data["trip_cost"][line] * x["trips"][line] for line in data["lines"])
        if "penalty" in data:
            total += sum(data["penalty"] * x["unserved"][s] for s in data["sections"])
        return total

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        opened = [f"{line} ({round(x['trips'][line])} trips per hour)" for line in data["lines"] if x["open"][line] > 0.5]
        return "- open " + (join_names(opened) if opened else "no line")

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        lines, sections, money = data["lines"], data["sections"], words["money"]
        vehicles = words["vehicles"]
        intro = {
            "bus": f"{words['company'].capitalize()} is redrawing its network: {len(lines)} candidate bus lines "
                   f"cover {len(sections)} road sections.",
            "tram": f"{words['company'].capitalize()} plans next year's service: it may operate any of "
                    f"{len(lines)} candidate lines over its {len(sections)} track sections.",
            "rail": f"{words['company'].capitalize()} tenders its regional service: {len(lines)} possible lines "
                    f"over {len(sections)} rail sections.",
            "trolleybus": f"{words['company'].capitalize()} is reviewing its timetable: {len(lines)} trolleybus lines "
                          f"are proposed along {len(sections)} wired street sections.",
            "waterbus": f"{words['company'].capitalize()} is drawing up its summer timetable, with {len(lines)} "
                        f"proposed boat routes over {len(sections)} stretches of water between its piers.",
            "metro": f"{words['company'].capitalize()} is reshaping its service pattern: {len(lines)} possible lines "
                     f"could share its {len(sections)} tunnel sections.",
        }[scenario.key]
        rules = (f"Opening a line costs its fixed cost per hour, and each hourly trip costs its trip cost, both in "
                 f"{money}. A line that is not opened runs no trips. An open line runs a whole number of trips per hour, "
                 f"at most {fmt(data['max_trips'])}. Each trip of a line carries up to its capacity in passengers on "
                 "every section of its route.")
        if "penalty" in data:
            rules += (f" The peak-hour load of a section should be carried by the lines over it; every passenger per "
                      f"hour left unserved costs {fmt(data['penalty'])} {money}.")
        else:
            rules += " The lines over each section must together carry its whole peak-hour load."
        if "min_frequency" in data:
            rules += f" Every section must see at least {fmt(data['min_frequency'])} trips per hour in total."
        if "fleet" in data:
            rules += (f" One hourly trip of a line ties up the number of {vehicles} given for it, and only "
                      f"{fmt(data['fleet'])} {vehicles} are available.")
        question = (f"Which lines should be opened, with how many trips per hour, to minimize the total hourly cost, "
                    f"and what is that cost in {money}?")
        if representation == "text":
            offers = " ".join(
                f"{line} runs over the sections {join_names(data['route'][line])}; a trip carries "
                f"{fmt(data['capacity'][line])} passengers, opening costs {fmt(data['fixed_cost'][line])}, a trip costs "
                f"{fmt(data['trip_cost'][line])}"
                + (f", and a trip ties up {fmt(data['vehicles_per_trip'][line])} {vehicles}" if "fleet" in data else "")
                + "." for line in lines)
            loads = "; ".join(f"{s}: {fmt(data['load'][s])}" for s in sections)
            return f"{intro} {rules} {offers} Peak-hour loads (passengers per hour): {loads}. {question}"
        if representation == "table":
            headers = ["line", "sections", "capacity per trip", f"fixed cost ({money})", f"trip cost ({money})"]
            if "fleet" in data:
                headers.append(f"{vehicles} per trip")
            rows = [[line, ", ".join(data["route"][line]), data["capacity"][line], data["fixed_cost"][line], data["trip_cost"][line]]
                    + ([data["vehicles_per_trip"][line]] if "fleet" in data else []) for line in lines]
            loads = markdown_table(["section", "peak-hour load (passengers/hour)"], [[s, data["load"][s]]
                                                                                      for s in sections])
            return f"{intro} {rules}\n\n{markdown_table(headers, rows)}\n\n{loads}\n\n{question}"
        if representation == "file":
            return f"{intro} {rules} {question}\n\n{describe_data_file(self.data_fields)}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        objective = "\\sum_{l \\in L} (c_l y_l + b_l f_l)"
        parameters = ("route $R_l \\subseteq S$, load $d_s$, capacity $\\kappa_l$, fixed cost $c_l$, trip cost $b_l$, "
                      "frequency cap $F$")
        load = "& \\sum_{l : s \\in R_l} \\kappa_l f_l \\ge d_s && \\forall s \\in S"
        variables = "$y_l \\in \\{0,1\\}$ (line open), $f_l \\in \\mathbb{Z}_{\\ge 0}$ (trips per hour)"
        if "penalty" in data:
            objective += " + \\pi \\sum_{s \\in S} u_s"
            parameters += ", penalty $\\pi$"
            load = "& \\sum_{l : s \\in R_l} \\kappa_l f_l + u_s \\ge d_s && \\forall s \\in S"
            variables += ", unserved load $u_s \\ge 0$"
        rows = ["\\text{s.t.}\\ & f_l \\le F y_l && \\forall l \\in L", load]
        if "min_frequency" in data:
            parameters += ", minimum frequency $\\phi$"
            rows.append("& \\sum_{l : s \\in R_l} f_l \\ge \\phi && \\forall s \\in S")
        if "fleet" in data:
            parameters += ", vehicles per trip $v_l$, fleet $V$"
            rows.append("& \\sum_{l \\in L} v_l f_l \\le V")
        return ("**Sets**: lines $L$, sections $S$.\n\n"
                f"**Parameters**: {parameters}.\n\n**Variables**: {variables}.\n\n"
                f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows)
                + "\n\\end{aligned}\n$$")


FAMILY = StaticLinePlanning()
