"""Car selection (IP): participants of an event each name the cars they are willing to ride in; assign
every participant to at most one car they like, and each car to at most one participant, maximizing
the number of participants placed (a maximum bipartite matching over the preference pairs).

Structure variants (drawn per instance, recorded by the keys present): preference scores that the
assignment maximizes instead of the head count (`score`), cars with several seats (`seats`), and
priority participants who must be placed (`priority`), each present or absent: eight program
skeletons."""

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
    Scenario("rally", "classic car rallies", {
        "company": "a classic car club", "event": "its spring rally",
        "participants": ["Ana", "Ben", "Chloe", "Dev", "Elif", "Femi", "Gus", "Hana", "Ivan", "Jade", "Kofi",
                         "Lena", "Milo", "Nora", "Omar", "Pia", "Quin", "Rosa"],
        "cars": ["Jaguar E-Type", "Porsche 356", "Mini Cooper", "Alfa Spider", "VW Beetle", "Citroen DS",
                 "Fiat 500", "Triumph TR6", "MG B", "Volvo P1800", "Lancia Fulvia", "Saab 96", "Austin Healey"],
        "person": "member", "vehicle": "car",
    }),
    Scenario("test_drive", "car dealerships", {
        "company": "a car dealership", "event": "its weekend test-drive day",
        "participants": ["Customer A", "Customer B", "Customer C", "Customer D", "Customer E", "Customer F",
                         "Customer G", "Customer H", "Customer I", "Customer J", "Customer K", "Customer L",
                         "Customer M", "Customer N", "Customer O", "Customer P", "Customer Q", "Customer R"],
        "cars": ["Demo Sedan", "Demo Hatchback", "Demo SUV", "Demo Coupe", "Demo Wagon", "Demo Pickup",
                 "Demo Minivan", "Demo Roadster", "Demo Crossover", "Demo EV", "Demo Hybrid", "Demo Van",
                 "Demo Cabrio"],
        "person": "customer", "vehicle": "demo car",
    }),
    Scenario("carpool", "corporate commuting", {
        "company": "a company's commuter programme", "event": "next month's carpool rota",
        "participants": ["Aiko", "Bruno", "Carla", "Dmitri", "Esra", "Farid", "Greta", "Hugo", "Ines", "Jonas",
                         "Kira", "Luca", "Maya", "Nils", "Olga", "Pavel", "Rania", "Sami"],
        "cars": ["Car 1", "Car 2", "Car 3", "Car 4", "Car 5", "Car 6", "Car 7", "Car 8", "Car 9", "Car 10",
                 "Car 11", "Car 12", "Car 13"],
        "person": "employee", "vehicle": "pool car",
    }),
)

# the eval split's own industries, events, participant and vehicle names (held out from training)
EVAL_SCENARIOS = (
    Scenario("safari", "wildlife tourism", {
        "company": "a safari lodge", "event": "tomorrow's dawn game drive",
        "participants": ["Abena", "Bjorn", "Catalina", "Dario", "Eshe", "Florian", "Gaia", "Haruto", "Imani",
                         "Jasper", "Keanu", "Liesel", "Mirela", "Nikhil", "Odile", "Paolo", "Roza", "Soren"],
        "cars": ["Kudu", "Eland", "Impala", "Oryx", "Sable", "Nyala", "Duiker", "Gemsbok", "Steenbok", "Bushbuck",
                 "Waterbuck", "Reedbuck", "Klipspringer"],
        "person": "guest", "vehicle": "safari truck",
    }),
    Scenario("film_shoot", "film production", {
        "company": "a film studio", "event": "the location shoot",
        "participants": ["Adaeze", "Bastien", "Coralie", "Dagny", "Emeric", "Fenna", "Gideon", "Henrike",
                         "Ignacio", "Jovana", "Kasimir", "Ludmila", "Marius", "Nadia", "Orrin", "Perla", "Radek",
                         "Selma"],
        "cars": ["Shuttle Alpha", "Shuttle Bravo", "Shuttle Charlie", "Shuttle Delta", "Shuttle Echo",
                 "Shuttle Foxtrot", "Shuttle Golf", "Shuttle Hotel", "Shuttle India", "Shuttle Juliet",
                 "Shuttle Kilo", "Shuttle Lima", "Shuttle Mike"],
        "person": "crew member", "vehicle": "unit shuttle",
    }),
    Scenario("wine_tour", "wine tourism", {
        "company": "a wine-tour operator", "event": "Saturday's vineyard tour",
        "participants": ["Arlo", "Brigid", "Cosimo", "Delphine", "Eero", "Fleur", "Gwyn", "Hollis", "Isadora",
                         "Jarek", "Kalani", "Lorcan", "Marisol", "Niamh", "Osric", "Petra", "Rhys", "Solveig"],
        "cars": ["Cart Merlot", "Cart Syrah", "Cart Malbec", "Cart Riesling", "Cart Gamay",
                 "Cart Tempranillo", "Cart Grenache", "Cart Viognier", "Cart Nebbiolo", "Cart Sangiovese",
                 "Cart Carmenere", "Cart Semillon", "Cart Zinfandel"],
        "person": "visitor", "vehicle": "tour cart",
    }),
)


class CarSelection(ProblemFamily):
    name = "car_selection"
    title = "Car selection"
    problem_type = "IP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"assign": "binary"}
    industrial = True  # a bipartite matching: its LP relaxation is integral, so large instances solve fast
    phrasings = (
        Phrasing(r"\bis placing\b", ("is placing", "is assigning"), ("must seat", "allocates")),
        Phrasing(r"\bnamed the cars they are willing to take:", ("named the cars they are willing to take:",),
                 ("listed the cars acceptable to them:",)),
        Phrasing(r"\bNobody is placed in a car they did not name\.",
                 ("Nobody is placed in a car they did not name.",),
                 ("Only cars from a participant's own list may be used for them.",)),
        Phrasing(r"\bEach participant gets one car or none\.", ("Each participant gets one car or none.",),
                 ("No participant takes more than a single car.",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bSeats per car:", ("Seats per car:",), ("Seat count of every car:",)),
        Phrasing(r"\bEach car takes one participant\.", ("Each car takes one participant.",),
                 ("A car carries a single participant.",)),
        Phrasing(r"\bThese participants must be placed:", ("These participants must be placed:",),
                 ("The following participants have to get a car:",)),
        # stops before "at most", which the generic rules word two ways in training
        Phrasing(r"\bEach car takes\b(?= at most its number of seats)", ("Each car takes",), ("A car holds",)),
        Phrasing(r"(?<=at most )its number of seats\.", ("its number of seats.",), ("its seat count.",)),
        Phrasing(r"\bThe priority participants must be placed\.", ("The priority participants must be placed.",),
                 ("Every priority participant has to get a car.",)),
        # stops before "what is that", which the generic rules word two ways in training
        Phrasing(r"\bshould go in which car to\b", ("should go in which car to",),
                 ("is to ride in which car so as to",)),
        Phrasing(r"\bmaximize the total preference score of the placements\b",
                 ("maximize the total preference score of the placements",),
                 ("make the summed preference score of the placements as large as possible",)),
        Phrasing(r"\bplace as many participants as possible\b", ("place as many participants as possible",),
                 ("seat the largest possible number of participants",)),
        Phrasing(r"(?<=what is that )optimal value\?", ("optimal value?",), ("optimum?",)),
        Phrasing(r"\bThe participants\b(?= named the cars)", ("The participants",), ("Every participant has",)),
        Phrasing(r"\bnamed the cars they are willing to take \(", ("named the cars they are willing to take (",),
                 ("listed the cars acceptable to them (",)),
        Phrasing(r"\bwith a preference score for each\)", ("with a preference score for each)",),
                 ("each given a preference score)",)),
        Phrasing(r"\bpreference scores; - marks a car not accepted\b",
                 ("preference scores; - marks a car not accepted",),
                 ("cells give preference scores, - means not acceptable",)),
        Phrasing(r"\byes marks an accepted car\b", ("yes marks an accepted car",),
                 ("yes means the car is acceptable",)),
        Phrasing(r"\(score\b(?= \d)", ("(score",), ("(preference",)),
        Phrasing(r"\blist of participant names\b", ("list of participant names",), ("names of the participants",)),
        Phrasing(r"\blist of car names\b", ("list of car names",), ("names of the cars",)),
        Phrasing(r"(?<=\]: )list of the cars the participant accepts\b",
                 ("list of the cars the participant accepts",), ("cars acceptable to that participant",)),
        Phrasing(r"(?<=\]: )preference score of each accepted car \(only when the assignment maximizes preference "
                 r"scores\)",
                 ("preference score of each accepted car (only when the assignment maximizes preference scores)",),
                 ("degree to which the participant likes an acceptable car (present only if the preference scores are "
                  "maximized)",)),
        Phrasing(r"\bnumber of participants each car takes\b", ("number of participants each car takes",),
                 ("seat count of a car",)),
        Phrasing(r"\(only when cars have several seats; otherwise one\)",
                 ("(only when cars have several seats; otherwise one)",),
                 ("(present only if cars have more than one seat; one otherwise)",)),
        Phrasing(r"\bparticipants who must be placed \(only when some are\)",
                 ("participants who must be placed (only when some are)",),
                 ("participants that have to get a car (present only if there are any)",)),
    )
    data_fields = {
        "participants": "list of participant names",
        "cars": "list of car names",
        "likes": "likes[participant]: list of the cars the participant accepts",
        "score": "score[participant][car]: preference score of each accepted car (only when the assignment "
                 "maximizes preference scores)",
        "seats": "number of participants each car takes, keyed by car (only when cars have several seats; "
                 "otherwise one)",
        "priority": "participants who must be placed (only when some are)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.P = pyo.Set(initialize=data["participants"])
model.C = pyo.Set(initialize=data["cars"])
model.A = pyo.Set(initialize=[(p, c) for p in data["participants"] for c in data["likes"][p]], dimen=2)
model.assign = pyo.Var(model.A, domain=pyo.Binary)
'''
    _COUNT = '''\
model.obj = pyo.Objective(expr=sum(model.assign[p, c] for (p, c) in model.A), sense=pyo.maximize)
'''
    _SCORE = '''\
model.obj = pyo.Objective(expr=sum(data["score"][p][c] * model.assign[p, c] for (p, c) in model.A),
                          sense=pyo.maximize)
'''
    _PARTICIPANT = '''\
model.one_car = pyo.Constraint(
    model.P, rule=lambda model, p: sum(model.assign[p, c] for c in data["likes"][p]) <= 1)
'''
    _PRIORITY = '''\
model.priority = pyo.Constraint(
    data["priority"], rule=lambda model, p: sum(model.assign[p, c] for c in data["likes"][p]) == 1)
'''
    _CAR = '''\
model.car = pyo.Constraint(
    model.C, rule=lambda model, c: sum(model.assign[p, c] for p in model.P if c in data["likes"][p]) <= 1)
'''
    _SEATS = '''\
model.car = pyo.Constraint(
    model.C, rule=lambda model, c: sum(model.assign[p, c] for p in model.P if c in data["likes"][p])
    <= data["seats"][c])
'''

    model_code = _HEAD + _COUNT + _PARTICIPANT + _CAR  # the plain maximum matching

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._SCORE if "score" in data else self._COUNT) + self._PARTICIPANT
        if "priority" in data:
            code += self._PRIORITY
        return code + (self._SEATS if "seats" in data else self._CAR)

    def variant_of(self, data: dict) -> str:
        parts = [key for key in ("score", "seats", "priority") if key in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_participants = size_for(difficulty, 6, 10, 16, industrial=260)
        n_cars = size_for(difficulty, 5, 8, 12, industrial=180)  # industrial: about 1,000 preference pairs
        participants = pick_names(rng, words["participants"], n_participants)
        with_seats = rng.random() < 0.5
        if with_seats:  # fewer, larger cars, still fewer seats than participants in all
            n_cars = max(3, n_cars * 3 // 5)
        cars = pick_names(rng, words["cars"], n_cars)
        fewest, most = (3, 6) if difficulty == INDUSTRIAL else (1, 3)
        likes = {p: rng.sample(cars, rng.randint(fewest, most)) for p in participants}
        for c in cars:  # every car is wanted by someone
            if not any(c in chosen for chosen in likes.values()):
                likes[rng.choice(participants)].append(c)
        likes = {p: sorted(chosen, key=cars.index) for p, chosen in likes.items()}
        data = {"participants": participants, "cars": cars, "likes": likes}
        if rng.random() < 0.5:
            data["score"] = {p: {c: rng.randint(1, 10) for c in likes[p]} for p in participants}
        if with_seats:
            # a few seats per car, fewer seats than participants in all (so some are left out)
            seats = {c: rng.choice([1, 2, 3, 3]) for c in cars}
            while sum(seats.values()) >= n_participants:
                largest = max(cars, key=lambda c: (seats[c], cars.index(c)))
                seats[largest] -= 1
            data["seats"] = seats
        capacity = dict(data.get("seats", {c: 1 for c in cars}))
        if rng.random() < 0.5:
            # priority participants, placed greedily first so that a placement of all of them exists
            priority = []
            for p in rng.sample(participants, n_participants):
                free = [c for c in likes[p] if capacity[c] > 0]
                if free and len(priority) < max(1, n_participants // 4):
                    capacity[rng.choice(free)] -= 1
                    priority.append(p)
            data["priority"] = sorted(priority, key=participants.index)
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # every participant is a priority one, but the cars have fewer seats than there are participants
        return {**data, "priority": list(data["participants"])}

    def _pairs(self, data: dict) -> list[tuple[str, str]]:
        return [(p, c) for p in data["participants"] for c in data["likes"][p]]

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        columns = {(p, c): matrix.add_var(f"assign[{p},{c}]", 0.0, 1.0,
                                          cost=data["score"][p][c] if "score" in data else 1.0, integer=True)
                   for p, c in self._pairs(data)}
        priority = set(data.get("priority", ()))
        for p in data["participants"]:
            matrix.add_row({columns[p, c]: 1.0 for c in data["likes"][p]}, lower=1.0 if p in priority else -INF,
                           upper=1.0, name=f"one_car[{p}]")
        for c in data["cars"]:
            riders = {columns[p, car]: 1.0 for p, car in columns if car == c}
            if riders:
                matrix.add_row(riders, upper=data.get("seats", {}).get(c, 1), name=f"car[{c}]")

    def constraint_rows(self, data: dict, x: dict):
        assign = x["assign"]
        for p in data["participants"]:
            yield Row(f"one_car[{p}]", sum(assign[p, c] for c in data["likes"][p]), "<=", 1)
        for p in data.get("priority", ()):
            yield Row(f"priority[{p}]", sum(assign[p, c] for c in data["likes"][p]), "==", 1)
        for c in data["cars"]:
            yield Row(f"car[{c}]", sum(assign[p, c] for p in data["participants"] if c in data["likes"][p]), "<=",
                      data.get("seats", {}).get(c, 1))

    def objective_value(self, data: dict, x: dict) -> float:
        if "score" in data:
            return sum(data["score"][p][c] * x["assign"][p, c] for p, c in self._pairs(data))
        return sum(x["assign"][p, c] for p, c in self._pairs(data))

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        placed = [f"{p} in {c}" for p, c in self._pairs(data) if x["assign"][p, c] > 0.5]
        return f"- {len(placed)} of {len(data['participants'])} placed: " + "; ".join(placed)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        participants, cars = data["participants"], data["cars"]
        person, vehicle = words["person"], words["vehicle"]
        intro = {
            "rally": f"{words['company'].capitalize()} is placing {len(participants)} {plural(person)} in "
                     f"{len(cars)} {plural(vehicle)} for {words['event']}.",
            "test_drive": f"For {words['event']}, {words['company']} is placing {len(participants)} {plural(person)} "
                          f"in {len(cars)} {plural(vehicle)} ({join_names(cars)}).",
            "carpool": f"{words['company'].capitalize()} is placing {len(participants)} {plural(person)} in "
                       f"{len(cars)} {plural(vehicle)} for {words['event']}.",
            # the eval scenarios' own openings
            "safari": f"{words['company'].capitalize()} is sharing {len(participants)} {plural(person)} among "
                      f"{len(cars)} {plural(vehicle)} for {words['event']}.",
            "film_shoot": f"For {words['event']}, {words['company']} has to fit {len(participants)} {plural(person)} into "
                          f"{len(cars)} {plural(vehicle)} ({join_names(cars)}).",
            "wine_tour": f"{words['company'].capitalize()} is matching {len(participants)} {plural(person)} with "
                         f"{len(cars)} {plural(vehicle)} for {words['event']}.",
        }[scenario.key]
        rules = ["Each participant gets one car or none. Nobody is placed in a car they did not name."]
        if "seats" in data:
            rules.append("Seats per car: " + "; ".join(f"{c} {fmt(data['seats'][c])}" for c in cars) + ".")
        else:
            rules.append("Each car takes one participant.")
        if "priority" in data:
            rules.append(f"These participants must be placed: {join_names(data['priority'])}.")
        if "score" in data:
            goal = "maximize the total preference score of the placements"
        else:
            goal = "place as many participants as possible"
        question = f"Which participant should go in which car to {goal}, and what is that optimal value?"
        rule_text = " ".join(rules)
        scored = "score" in data
        if representation == "text":
            lead = ("The participants named the cars they are willing to take (with a preference score for each):"
                    if scored else "The participants named the cars they are willing to take:")
            listing = "; ".join(
                f"{p}: " + ", ".join(f"{c} (score {fmt(data['score'][p][c])})" if scored else c
                                     for c in data["likes"][p]) for p in participants)
            return f"{intro} {lead} {listing}. {rule_text} {question}"
        if representation == "table":
            cell = (lambda p, c: fmt(data["score"][p][c]) if c in data["likes"][p] else "-") if scored else \
                (lambda p, c: "yes" if c in data["likes"][p] else "-")
            what = "preference scores; - marks a car not accepted" if scored else "yes marks an accepted car"
            table = markdown_table([person, *cars], [[p, *[cell(p, c) for c in cars]] for p in participants])
            return (f"{intro} The participants named the cars they are willing to take ({what}):\n\n{table}\n\n"
                    f"{rule_text} {question}")
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "only when" not in meaning}
            seat_rule = rules[1] if "seats" not in data else "Each car takes at most its number of seats."
            priority = " The priority participants must be placed." if "priority" in data else ""
            return (f"{intro} {rules[0]} {seat_rule}{priority}\n\n{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        objective = ("\\max\\ & \\sum_{(p, c) \\in A} s_{pc} x_{pc}" if "score" in data
                     else "\\max\\ & \\sum_{(p, c) \\in A} x_{pc}")
        capacity = "k_c" if "seats" in data else "1"
        parameters = "accepted pairs $A \\subseteq P \\times C$"
        if "score" in data:
            parameters += ", preference score $s_{pc}$"
        if "seats" in data:
            parameters += ", seats $k_c$"
        rows = [objective,
                "\\text{s.t.}\\ & \\sum_{c: (p, c) \\in A} x_{pc} \\le 1 && \\forall p \\in P",
                f"& \\sum_{{p: (p, c) \\in A}} x_{{pc}} \\le {capacity} && \\forall c \\in C"]
        if "priority" in data:
            parameters += ", priority participants $Q \\subseteq P$"
            rows.append("& \\sum_{c: (p, c) \\in A} x_{pc} = 1 && \\forall p \\in Q")
        rows.append("& x_{pc} \\in \\{0, 1\\} && \\forall (p, c) \\in A")
        return ("**Sets**: participants $P$, cars $C$.\n\n"
                f"**Parameters**: {parameters}.\n\n"
                "**Variables**: $x_{pc} \\in \\{0, 1\\}$, 1 when participant $p$ rides in car $c$.\n\n"
                "$$\n\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$")


FAMILY = CarSelection()
