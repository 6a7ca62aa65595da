"""Network revenue management (LP, or MILP with whole seats): a carrier with a hub network decides how many
seats of each fare class to sell on each itinerary (a local leg or a connection through the hub), at
most the forecast demand, so that no leg is booked past its capacity, maximizing fare revenue (the
deterministic seat-allocation LP whose values are the booking limits).

Structure variants (drawn per instance, recorded by the keys present): contracted group and corporate
seats that must be sold (`committed`), a cap on the cheapest class's seats per leg (`discount_class`
with `discount_share`), and whole seats (`whole_seats`: integer variables), each present or absent:
eight program skeletons."""

from __future__ import annotations

import random

from data_synth.family import (
    INDUSTRIAL,
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
    Scenario("airline", "passenger airlines", {
        "company": "a regional airline", "hub": "DEN",
        "origins": ["SEA", "SFO", "LAX", "PDX", "SLC", "PHX", "SAN", "BOI"],
        "destinations": ["ORD", "ATL", "BOS", "JFK", "MIA", "DCA", "MSP", "DTW"],
        "classes": ["business", "flex", "saver"], "seat": "seat", "leg_word": "flight",
        "money": "dollars", "when": "next Friday's departures",
    }),
    Scenario("rail", "high-speed rail", {
        "company": "a high-speed rail operator", "hub": "Frankfurt",
        "origins": ["Cologne", "Mainz", "Bonn", "Aachen", "Kassel", "Trier", "Koblenz", "Siegen"],
        "destinations": ["Munich", "Nuremberg", "Stuttgart", "Augsburg", "Ulm", "Wurzburg", "Passau",
                         "Regensburg"],
        "classes": ["first", "standard", "super saver"], "seat": "seat", "leg_word": "train segment",
        "money": "euros", "when": "the Sunday evening services",
    }),
    Scenario("coach", "intercity coaches", {
        "company": "an intercity coach company", "hub": "Lyon",
        "origins": ["Paris", "Dijon", "Reims", "Metz", "Nancy", "Troyes", "Orleans", "Tours"],
        "destinations": ["Marseille", "Nice", "Montpellier", "Toulon", "Avignon", "Nimes", "Cannes",
                         "Perpignan"],
        "classes": ["premium", "standard", "promo"], "seat": "seat", "leg_word": "coach run",
        "money": "euros", "when": "the holiday weekend",
    }),
)

# eval only: other carriers, hubs, stops and fare products than any training scenario
EVAL_SCENARIOS = (
    Scenario("ferry", "island ferries", {
        "company": "an island ferry operator", "hub": "Piraeus",
        "origins": ["Chios", "Lesbos", "Samos", "Ikaria", "Lemnos", "Kos", "Patmos", "Leros"],
        "destinations": ["Naxos", "Paros", "Milos", "Syros", "Tinos", "Sifnos", "Andros", "Serifos"],
        "classes": ["cabin", "lounge", "deck"], "seat": "berth", "leg_word": "ferry crossing",
        "money": "euros", "when": "the August peak sailings",
    }),
    Scenario("longbus", "long-distance buses", {
        "company": "a long-distance bus line", "hub": "Madrid",
        "origins": ["Bilbao", "Santander", "Oviedo", "Leon", "Burgos", "Gijon", "Vigo", "Zaragoza"],
        "destinations": ["Seville", "Malaga", "Granada", "Cordoba", "Cadiz", "Almeria", "Murcia", "Huelva"],
        "classes": ["supra", "comfort", "basic"], "seat": "seat", "leg_word": "bus route",
        "money": "euros", "when": "the Easter week services",
    }),
)


class RevenueManagement(ProblemFamily):
    name = "revenue_management"
    title = "Network revenue management"
    problem_type = "LP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"sell": "nonnegative"}
    industrial = True
    phrasings = (
        Phrasing(r"\bsets its booking limits for\b", ("sets its booking limits for", "is fixing booking limits for"),
                 ("decides how many seats to offer on", "plans the seat inventory of")),
        Phrasing(r"\bForecast demand and fares:", ("Forecast demand and fares:", "Demand forecasts and fares:"),
                 ("Expected requests and ticket prices:",)),
        Phrasing(r"\bSeat capacity per\b", ("Seat capacity per",), ("Seats available on each",)),
        Phrasing(r"\bSelling more seats than the forecast demand is pointless\.",
                 ("Selling more seats than the forecast demand is pointless.",),
                 ("Sales cannot exceed the forecast requests.",)),
        Phrasing(r"\bSeat counts may be fractional \(they are booking limits\)\.",
                 ("Seat counts may be fractional (they are booking limits).",),
                 ("The allocation may use fractions of a seat (it sets booking limits).",)),
        Phrasing(r"\bis a leg of the network; a journey between two spokes uses both of its legs\.",
                 ("is a leg of the network; a journey between two spokes uses both of its legs.",),
                 ("counts as one leg, and a trip from one spoke to another takes both of those legs.",)),
        Phrasing(r"\bclass may take no more than\b", ("class may take no more than",),
                 ("class is limited to at most",)),
        Phrasing(r"\bof the leg's seats\.", ("of the leg's seats.",), ("of that leg's capacity.",)),
        Phrasing(r"\bContracted seats that must be sold:", ("Contracted seats that must be sold:",),
                 ("Seats already promised under contract, to be sold in any case:",)),
        Phrasing(r"\bSeats are sold whole\.", ("Seats are sold whole.",), ("Only whole seats can be sold.",)),
        Phrasing(r"\bHow many seats of each class should be sold on each itinerary to maximize fare revenue\b",
                 ("How many seats of each class should be sold on each itinerary to maximize fare revenue",),
                 ("Which numbers of seats per class and itinerary bring in the greatest fare revenue",)),
    )
    data_fields = {
        "legs": "list of leg names (origin-destination of one service)",
        "capacity": "seats on each leg, keyed by leg",
        "itineraries": "list of itinerary names",
        "route": "route[itinerary]: list of the legs the itinerary uses",
        "classes": "list of fare class names",
        "fare": "fare[itinerary][class]: revenue per seat sold",
        "demand": "demand[itinerary][class]: forecast seats requested",
        "committed": "list of [itinerary, class, seats] contracted seats that must be sold (only when there "
                     "are such contracts)",
        "discount_class": "the cheapest fare class, whose seats are capped per leg (only when there is such a "
                          "cap)",
        "discount_share": "largest fraction of each leg's seats the discount class may take (only when there "
                          "is such a cap)",
        "whole_seats": "true: seats are sold in whole numbers (only when seats must be whole)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.L = pyo.Set(initialize=data["legs"])
model.I = pyo.Set(initialize=data["itineraries"])
model.F = pyo.Set(initialize=data["classes"])
'''
    _CONTINUOUS = '''\
model.sell = pyo.Var(model.I, model.F, domain=pyo.NonNegativeReals)
'''
    _WHOLE = '''\
model.sell = pyo.Var(model.I, model.F, domain=pyo.NonNegativeIntegers)
'''
    _BODY = '''\
model.obj = pyo.Objective(
    expr=sum(data["fare"][i][f] * model.sell[i, f] for i in model.I for f in model.F), sense=pyo.maximize)
model.demand = pyo.Constraint(model.I, model.F, rule=lambda model, i, f: model.sell[i, f] <= data["demand"][i][f])
model.capacity = pyo.Constraint(
    model.L, rule=lambda model, leg: sum(model.sell[i, f] for i in model.I if leg in data["route"][i]
                                         for f in model.F) <= data["capacity"][leg])
'''
    _DISCOUNT = '''\
model.discount_cap = pyo.Constraint(
    model.L, rule=lambda model, leg: sum(model.sell[i, data["discount_class"]] for i in model.I
                                         if leg in data["route"][i])
    <= data["discount_share"] * data["capacity"][leg])
'''
    _COMMITTED = '''\
model.committed = pyo.Constraint(
    range(len(data["committed"])),
    rule=lambda model, k: model.sell[data["committed"][k][0], data["committed"][k][1]] >= data["committed"][k][2])
'''

    model_code = _HEAD + _CONTINUOUS + _BODY + _DISCOUNT  # the LP with a discount cap

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._WHOLE if "whole_seats" in data else self._CONTINUOUS) + self._BODY
        if "discount_class" in data:
            code += self._DISCOUNT
        if "committed" in data:
            code += self._COMMITTED
        return code

    def domains_for(self, data: dict) -> dict[str, str]:
        return {"sell": "nonnegative_integer"} if "whole_seats" in data else self.domains

    def problem_type_for(self, data: dict) -> str:
        return "IP" if "whole_seats" in data else "LP"

    def variant_of(self, data: dict) -> str:
        parts = [key for key in ("committed", "discount_class", "whole_seats") if key in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_spokes = size_for(difficulty, 2, 3, 4, industrial=20)  # industrial: 440 itineraries x 3 classes
        classes = words["classes"][1:] if difficulty == "small" else list(words["classes"])
        hub = words["hub"]
        origins = pick_names(rng, words["origins"], n_spokes)
        destinations = pick_names(rng, words["destinations"], n_spokes)
        legs = [f"{o}-{hub}" for o in origins] + [f"{hub}-{d}" for d in destinations]
        route = {leg: [leg] for leg in legs}
        route.update({f"{o}-{d} via {hub}": [f"{o}-{hub}", f"{hub}-{d}"] for o in origins for d in destinations})
        itineraries = list(route)
        multiplier = {"business": 3.0, "first": 2.4, "premium": 1.8}
        local_fare = {leg: rng.randint(40, 160) for leg in legs}
        fare, demand = {}, {}
        for i in itineraries:
            base = sum(local_fare[leg] for leg in route[i]) * (1.0 if len(route[i]) == 1 else 0.8)
            fare[i], demand[i] = {}, {}
            for rank, f in enumerate(reversed(classes)):  # cheapest first
                factor = 1.0 if rank == 0 else multiplier.get(f, 1.6) * rng.uniform(0.9, 1.1)
                fare[i][f] = int(base * factor)
                scale = 30 if len(route[i]) == 1 else 10
                demand[i][f] = rng.randint(scale // 2, scale * 2) // (1 + 2 * rank) + 1
        capacity = {}
        for leg in legs:
            through = sum(demand[i][f] for i in itineraries if leg in route[i] for f in classes)
            capacity[leg] = max(10, int(through * rng.uniform(0.5, 0.8)))
        data = {"legs": legs, "capacity": capacity, "itineraries": itineraries, "route": route,
                "classes": classes, "fare": fare, "demand": demand}
        if rng.random() < 0.5:
            # contracted seats in the dearer classes, at most a third of every leg's capacity in all
            booked = {leg: 0 for leg in legs}
            committed = []
            for i in rng.sample(itineraries, max(1, len(itineraries) // 4)):
                f = rng.choice(classes[:-1])
                seats = max(1, demand[i][f] // 2)
                if all(booked[leg] + seats <= capacity[leg] // 3 for leg in route[i]):
                    committed.append([i, f, seats])
                    for leg in route[i]:
                        booked[leg] += seats
            if committed:
                data["committed"] = sorted(committed)
        if rng.random() < 0.5:
            data["discount_class"] = classes[-1]
            data["discount_share"] = rng.choice([0.2, 0.25, 0.3, 0.35, 0.4])
        if difficulty != INDUSTRIAL and rng.random() < 0.5:
            data["whole_seats"] = True
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # contracts for the whole forecast demand of every itinerary through one leg, which is short of it
        leg = rng.choice(data["legs"])
        committed = [[i, f, data["demand"][i][f]] for i in data["itineraries"] if leg in data["route"][i]
                     for f in data["classes"]]
        return {**data, "committed": committed}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        whole = "whole_seats" in data
        committed = {(i, f): seats for i, f, seats in data.get("committed", ())}
        sell = {(i, f): matrix.add_var(f"sell[{i},{f}]", committed.get((i, f), 0.0), data["demand"][i][f],
                                       cost=data["fare"][i][f], integer=whole)
                for i in data["itineraries"] for f in data["classes"]}
        for leg in data["legs"]:
            through = [i for i in data["itineraries"] if leg in data["route"][i]]
            matrix.add_row({sell[i, f]: 1.0 for i in through for f in data["classes"]},
                           upper=data["capacity"][leg], name=f"capacity[{leg}]")
            if "discount_class" in data:
                matrix.add_row({sell[i, data["discount_class"]]: 1.0 for i in through},
                               upper=data["discount_share"] * data["capacity"][leg], name=f"discount_cap[{leg}]")

    def constraint_rows(self, data: dict, x: dict):
        sell = x["sell"]
        for i in data["itineraries"]:
            for f in data["classes"]:
                yield Row(f"demand[{i},{f}]", sell[i, f], "<=", data["demand"][i][f])
        for leg in data["legs"]:
            through = [i for i in data["itineraries"] if leg in data["route"][i]]
            yield Row(f"capacity[{leg}]", sum(sell[i, f] for i in through for f in data["classes"]), "<=",
                      data["capacity"][leg])
            if "discount_class" in data:
                yield Row(f"discount_cap[{leg}]", sum(sell[i, data["discount_class"]] for i in through), "<=",
                          data["discount_share"] * data["capacity"][leg])
        for i, f, seats in data.get("committed", ()):
            yield Row(f"committed[{i},{f}]", sell[i, f], ">=", seats)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["fare"][i][f] * x["sell"][i, f] for i in data["itineraries"] for f in data["classes"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        legs, itineraries, classes = data["legs"], data["itineraries"], data["classes"]
        money, leg_word = words["money"], words["leg_word"]
        intro = {
            "airline": f"{words['company'].capitalize()} sets its booking limits for {words['when']} through "
                       f"its hub {words['hub']}, in fare classes {join_names(classes)}.",
            "rail": f"{words['company'].capitalize()} sets its booking limits for {words['when']}; every "
                    f"journey runs through {words['hub']} and is sold as {join_names(classes)}.",
            "coach": f"For {words['when']}, {words['company']} sets its booking limits on its network around "
                     f"{words['hub']}, with fares {join_names(classes)}.",
            "ferry": f"{words['company'].capitalize()} plans how many places to sell for {words['when']}, all "
                     f"routed via {words['hub']}, in the classes {join_names(classes)}.",
            "longbus": f"Ahead of {words['when']}, {words['company']} decides how many tickets to release across "
                       f"its network centred on {words['hub']}; its fare products are {join_names(classes)}.",
        }[scenario.key]
        network = (f"Each {leg_word} is a leg of the network; a journey between two spokes uses both of its legs. "
                   "Selling more seats than the forecast demand is pointless.")
        rules = []
        if "discount_class" in data:
            rules.append(f"On every leg, the {data['discount_class']} class may take no more than "
                         f"{fmt(round(data['discount_share'] * 100, 6))}% of the leg's seats.")
        if "committed" in data:
            rules.append("Contracted seats that must be sold: "
                         + "; ".join(f"{fmt(seats)} {f} seats on {i}" for i, f, seats in data["committed"]) + ".")
        if "whole_seats" in data:
            rules.append("Seats are sold whole.")
            question = ("How many seats of each class should be sold on each itinerary to maximize fare revenue, "
                        "and what is that revenue?")
        else:
            question = ("How many seats of each class should be sold on each itinerary to maximize fare revenue, "
                        "and what is that revenue? Seat counts may be fractional (they are booking limits).")
        capacities = f"Seat capacity per {leg_word}: " + "; ".join(
            f"{leg} {fmt(data['capacity'][leg])}" for leg in legs) + "."
        rule_text = " ".join(rules)
        if representation == "text":
            listing = " ".join(f"{i}: " + ", ".join(f"{f} {fmt(data['demand'][i][f])} seats at "
                                                    f"{fmt(data['fare'][i][f])} {money}" for f in classes) + "."
                               for i in itineraries)
            return f"{intro} {network} {capacities} Forecast demand and fares: {listing} {rule_text} {question}"
        if representation == "table":
            table = markdown_table(
                ["itinerary", *[f"{f} demand" for f in classes], *[f"{f} fare ({money})" for f in classes]],
                [[i, *[data["demand"][i][f] for f in classes], *[data["fare"][i][f] for f in classes]]
                 for i in itineraries])
            return (f"{intro} {network} {capacities} Forecast demand and fares:\n\n{table}\n\n"
                    f"{rule_text} {question}")
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "only when" not in meaning}
            return (f"{intro} {network} {rule_text}\n\n{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        domain = "x_{if} \\in \\mathbb{Z}_{\\ge 0}" if "whole_seats" in data else "x_{if} \\ge 0"
        parameters = "fare $r_{if}$, demand $d_{if}$, capacity $C_l$, legs of itinerary $L_i \\subseteq L$"
        rows = ["\\max\\ & \\sum_{i \\in I} \\sum_{f \\in F} r_{if} x_{if}",
                "\\text{s.t.}\\ & x_{if} \\le d_{if} && \\forall i \\in I, f \\in F",
                "& \\sum_{i: l \\in L_i} \\sum_{f \\in F} x_{if} \\le C_l && \\forall l \\in L"]
        if "discount_class" in data:
            parameters += ", discount class $q$ with share $\\alpha$"
            rows.append("& \\sum_{i: l \\in L_i} x_{iq} \\le \\alpha C_l && \\forall l \\in L")
        if "committed" in data:
            parameters += ", contracted seats $k_{if}$ on the pairs $K$"
            rows.append("& x_{if} \\ge k_{if} && \\forall (i, f) \\in K")
        rows.append(f"& {domain}")
        return ("**Sets**: legs $L$, itineraries $I$, fare classes $F$.\n\n"
                f"**Parameters**: {parameters}.\n\n"
                "**Variables**: $x_{if}$, seats of class $f$ sold on itinerary $i$.\n\n"
                "$$\n\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$")


FAMILY = RevenueManagement()
