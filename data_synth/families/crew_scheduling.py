"""Crew scheduling (IP): choose pairings (the sequences of flights one crew can legally work, generated
beforehand) so that every flight is covered by exactly one chosen pairing, at the least total cost:
the set-partitioning model airlines solve after pairing generation.

Structure variants (drawn per instance, recorded by the keys present): crews riding along as
passengers on a flight already covered, at a cost per extra crew (`deadhead_cost`: the rows become
covering rows with deadhead variables), a limit on the crews available (`crews`), and a limit on the
pairings each crew base can start (`base_limit`, with each pairing's `base`), each independent: eight
program skeletons."""

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
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("airline", "airline crew planning", {
        "company": "an airline's crew planning office", "task": "flight", "tasks": "flights",
        "prefixes": ["SK", "DY"], "duty": "pairing", "duties": "pairings", "bases": ["Oslo", "Copenhagen"],
        "money": "dollars", "cost": (900, 160),
    }),
    Scenario("rail", "rail operations", {
        "company": "a rail operator", "task": "train service", "tasks": "train services",
        "prefixes": ["IC", "RE"], "duty": "crew roster", "duties": "crew rosters", "bases": ["Utrecht", "Zwolle"],
        "money": "euros", "cost": (500, 110),
    }),
    Scenario("bus", "bus operations", {
        "company": "a bus company", "task": "trip", "tasks": "trips", "prefixes": ["T", "X"],
        "duty": "driver duty", "duties": "driver duties", "bases": ["North Garage", "South Garage"],
        "money": "euros", "cost": (200, 45),
    }),
)

# eval only: other operators, tasks, duty words, task prefixes, bases and currencies than any training scenario
EVAL_SCENARIOS = (
    Scenario("helicopter", "offshore helicopter services", {
        "company": "an offshore helicopter operator", "task": "sortie", "tasks": "sorties",
        "prefixes": ["HX", "NH"], "duty": "crew rotation", "duties": "crew rotations",
        "bases": ["Aberdeen", "Sumburgh"], "money": "pounds", "cost": (1200, 220),
    }),
    Scenario("tram", "urban tram networks", {
        "company": "a city tram operator", "task": "tram service", "tasks": "tram services", "prefixes": ["L", "M"],
        "duty": "duty block", "duties": "duty blocks", "bases": ["Depot East", "Depot West"],
        "money": "Swiss francs", "cost": (300, 60),
    }),
    Scenario("cargo", "air freight operations", {
        "company": "a cargo airline's scheduling desk", "task": "cargo leg", "tasks": "cargo legs",
        "prefixes": ["CV", "QY"], "duty": "crew trip", "duties": "crew trips", "bases": ["Luxembourg", "Leipzig"],
        "money": "euros", "cost": (1100, 190),
    }),
)


class CrewScheduling(ProblemFamily):
    name = "crew_scheduling"
    title = "Crew scheduling (set partitioning of pairings)"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"use": "binary", "deadhead": "nonnegative"}
    phrasings = (
        Phrasing(r"Each pairing is worked by one crew and is chosen whole or not at all\.",
                 ("Each pairing is worked by one crew and is chosen whole or not at all.",
                  "A pairing is taken as a whole, by one crew, or not used."),
                 ("One crew works a chosen pairing from start to end; pairings cannot be split.",)),
        Phrasing(r"\bcovers the\b", ("covers the", "works the"), ("is made of the", "takes in the")),
        # eval-only wordings of the other fixed sentences ("needs", "at most" and "what is that" are left to the
        # generic rules, whose training wordings vary)
        Phrasing(r"\bis worked by one crew and is chosen whole or not at all\.",
                 ("is worked by one crew and is chosen whole or not at all.",),
                 ("is staffed by a single crew and is either taken in full or left out.",)),
        Phrasing(r"(?<=needs )a working crew; if several chosen\b", ("a working crew; if several chosen",),
                 ("an operating crew; if two or more selected",)),
        Phrasing(r"\binclude the same\b", ("include the same",), ("contain the same",)),
        Phrasing(r", the extra crews ride along as passengers \(deadheading\) at\b",
                 (", the extra crews ride along as passengers (deadheading) at",),
                 (", every additional crew travels on it as passengers (deadheading), costing",)),
        Phrasing(r"\bmust be in exactly one chosen\b", ("must be in exactly one chosen",),
                 ("has to belong to precisely one selected",)),
        Phrasing(r"\bcrews are available, so\b", ("crews are available, so",), ("crews can be called on, hence",)),
        Phrasing(r"\bcan be chosen\.", ("can be chosen.",), ("may be selected.",)),
        Phrasing(r"\bstarts from its crew base, and the bases can start only so many:",
                 ("starts from its crew base, and the bases can start only so many:",),
                 ("begins at the home base of its crew, and every base has a cap on how many it may begin:",)),
        Phrasing(r"\bshould be chosen at the least total cost\b", ("should be chosen at the least total cost",),
                 ("ought to be selected to keep the overall cost as low as possible",)),
        Phrasing(r", starts from\b", (", starts from",), (", begins at",)),
        Phrasing(r"\band costs\b", ("and costs",), ("and its cost is",)),
        # the data.json field descriptions
        Phrasing(r"\blist of flight names to staff\b", ("list of flight names to staff",),
                 ("names of the flights needing a crew",)),
        Phrasing(r"\blist of candidate pairing names\b", ("list of candidate pairing names",),
                 ("names of the pairings on offer",)),
        Phrasing(r"\bthe flights the pairing works\b", ("the flights the pairing works",),
                 ("the flights that make up the pairing",)),
        Phrasing(r"\bcost of each pairing\b", ("cost of each pairing",), ("price of a pairing",)),
        Phrasing(r"\bcost of each crew riding a flight beyond the one working it\b",
                 ("cost of each crew riding a flight beyond the one working it",),
                 ("charge for every crew on a flight besides the crew operating it",)),
        Phrasing(r"\(only when crews may deadhead; otherwise every flight is covered exactly once\)",
                 ("(only when crews may deadhead; otherwise every flight is covered exactly once)",),
                 ("(present if deadheading is allowed; without it each flight is covered precisely once)",)),
        Phrasing(r"\bmost pairings that can be chosen, one per crew\b", ("most pairings that can be chosen, one per crew",),
                 ("largest number of pairings selectable, one for each crew",)),
        Phrasing(r"\(only when crews are limited\)", ("(only when crews are limited)",), ("(present if crews are scarce)",)),
        Phrasing(r"\bhome base of each pairing\b", ("home base of each pairing",), ("base a pairing starts from",)),
        Phrasing(r"\bmost pairings each base can start\b", ("most pairings each base can start",),
                 ("cap on the pairings a base may start",)),
        Phrasing(r"\(only when bases have limits\)", ("(only when bases have limits)",), ("(present if bases are capped)",)),
    )
    data_fields = {
        "tasks": "list of flight names to staff",
        "pairings": "list of candidate pairing names",
        "covers": "covers[pairing]: the flights the pairing works",
        "cost": "cost of each pairing, keyed by pairing",
        "deadhead_cost": "cost of each crew riding a flight beyond the one working it (only when crews may "
                         "deadhead; otherwise every flight is covered exactly once)",
        "crews": "most pairings that can be chosen, one per crew (only when crews are limited)",
        "base": "home base of each pairing, keyed by pairing (only when bases have limits)",
        "base_limit": "most pairings each base can start, keyed by base (only when bases have limits)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.F = pyo.Set(initialize=data["tasks"])
model.P = pyo.Set(initialize=data["pairings"])
model.use = pyo.Var(model.P, domain=pyo.Binary)  # the pairing is chosen


def crews_on(model, f):  # chosen pairings that include flight f
    return sum(model.use[p] for p in model.P if f in data["covers"][p])


'''
    _PARTITION = '''\
model.obj = pyo.Objective(expr=sum(data["cost"][p] * model.use[p] for p in model.P), sense=pyo.minimize)
model.cover = pyo.Constraint(model.F, rule=lambda model, f: crews_on(model, f) == 1)
'''
    _DEADHEAD = '''\
model.deadhead = pyo.Var(model.F, domain=pyo.NonNegativeReals)  # extra crews riding the flight as passengers
model.obj = pyo.Objective(expr=sum(data["cost"][p] * model.use[p] for p in model.P)
                          + data["deadhead_cost"] * sum(model.deadhead[f] for f in model.F), sense=pyo.minimize)
model.cover = pyo.Constraint(model.F, rule=lambda model, f: crews_on(model, f) - model.deadhead[f] == 1)
'''
    _CREWS = '''\
model.crews = pyo.Constraint(expr=sum(model.use[p] for p in model.P) <= data["crews"])
'''
    _BASE_LIMIT = '''\
model.base_limit = pyo.Constraint(sorted(data["base_limit"]), rule=lambda model, b: sum(
    model.use[p] for p in model.P if data["base"][p] == b) <= data["base_limit"][b])
'''
    model_code = _HEAD + _PARTITION + _CREWS  # set partitioning with a crew limit

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._DEADHEAD if "deadhead_cost" in data else self._PARTITION)
        if "crews" in data:
            code += self._CREWS
        if "base_limit" in data:
            code += self._BASE_LIMIT
        return code

    def domains_for(self, data: dict) -> dict[str, str]:
        return {name: domain for name, domain in self.domains.items() if name != "deadhead" or "deadhead_cost" in data}

    def variant_of(self, data: dict) -> str:
        return "+".join(key for key in ("deadhead_cost", "crews", "base_limit") if key in data) or "partition"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_tasks = size_for(difficulty, 6, 9, 12)
        n_extra = size_for(difficulty, 5, 8, 12)
        numbers = sorted(rng.sample(range(100, 999), n_tasks))
        tasks = [f"{rng.choice(words['prefixes'])}{number}" for number in numbers]
        # a witness partition into pairings of two to four flights
        shuffled, groups = rng.sample(tasks, n_tasks), []
        while shuffled:
            size = min(rng.choice((2, 3)), len(shuffled))
            if len(shuffled) - size == 1:
                size += 1
            groups.append(shuffled[:size])
            shuffled = shuffled[size:]
        witness_count = len(groups)
        seen = {tuple(sorted(group, key=tasks.index)) for group in groups}
        tries = 0
        while len(groups) < witness_count + n_extra and tries < 500:
            tries += 1
            group = tuple(sorted(rng.sample(tasks, rng.randint(2, 4)), key=tasks.index))
            if group not in seen:
                seen.add(group)
                groups.append(list(group))
        order = rng.sample(range(len(groups)), len(groups))  # the witness pairings are not listed first
        pairings = [f"{words['duty'].split()[-1].capitalize()} {k + 1}" for k in range(len(groups))]
        covers = {pairings[rank]: sorted(groups[index], key=tasks.index) for rank, index in enumerate(order)}
        fixed, per_task = words["cost"]
        cost = {p: fixed + per_task * len(covers[p]) + rng.randint(0, fixed // 3) for p in pairings}
        data = {"tasks": tasks, "pairings": pairings, "covers": covers, "cost": cost}
        witness = [pairings[rank] for rank, index in enumerate(order) if index < witness_count]
        if rng.random() < 0.5:
            data["deadhead_cost"] = rng.randint(fixed // 4, fixed // 2)
        if rng.random() < 0.5:
            data["crews"] = witness_count + rng.randint(0, 1)
        if rng.random() < 0.5:
            data["base"] = {p: rng.choice(words["bases"]) for p in pairings}
            data["base_limit"] = {b: max(1, sum(data["base"][p] == b for p in witness) + rng.randint(0, 1))
                                  for b in words["bases"]}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # fewer crews than the longest pairings could cover the flights with
        longest = max(len(flights) for flights in data["covers"].values())
        return {**data, "crews": math.ceil(len(data["tasks"]) / longest) - 1}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        use = {p: matrix.add_var(f"use[{p}]", 0, 1, cost=data["cost"][p], integer=True) for p in data["pairings"]}
        for f in data["tasks"]:
            row = {use[p]: 1.0 for p in data["pairings"] if f in data["covers"][p]}
            if "deadhead_cost" in data:
                row[matrix.add_var(f"deadhead[{f}]", 0.0, cost=data["deadhead_cost"])] = -1.0
            matrix.add_row(row, 1, 1, name=f"cover[{f}]")
        if "crews" in data:
            matrix.add_row({column: 1.0 for column in use.values()}, upper=data["crews"], name="crews")
        for b in sorted(data.get("base_limit", {})):
            matrix.add_row({use[p]: 1.0 for p in data["pairings"] if data["base"][p] == b},
                           upper=data["base_limit"][b], name=f"base_limit[{b}]")

    def constraint_rows(self, data: dict, x: dict):
        use = x["use"]
        for f in data["tasks"]:
            on = sum(use[p] for p in data["pairings"] if f in data["covers"][p])
            if "deadhead_cost" in data:
                on -= x["deadhead"][f]
            yield Row(f"cover[{f}]", on, "==", 1)
        if "crews" in data:
            yield Row("crews", sum(use[p] for p in data["pairings"]), "<=", data["crews"])
        for b in sorted(data.get("base_limit", {})):
            yield Row(f"base_limit[{b}]", sum(use[p] for p in data["pairings"] if data["base"][p] == b), "<=",
                      data["base_limit"][b])

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["cost"][p] * x["use"][p] for p in data["pairings"])
        if "deadhead_cost" in data:
            total += data["deadhead_cost"] * sum(x["deadhead"][f] for f in data["tasks"])
        return total

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        chosen = [p for p in data["pairings"] if x["use"][p] > 0.5]
        return "\n".join(f"- {p}: {', '.join(data['covers'][p])}" for p in chosen)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        tasks, pairings, money = data["tasks"], data["pairings"], words["money"]
        task, task_plural, duty, duties = words["task"], words["tasks"], words["duty"], words["duties"]
        intro = {
            "airline": f"{words['company'].capitalize()} must staff tomorrow's {len(tasks)} {task_plural} "
                       f"({join_names(tasks)}) from {len(pairings)} legal {duties} generated overnight.",
            "rail": f"{words['company'].capitalize()} has {len(tasks)} {task_plural} to staff ({join_names(tasks)}) "
                    f"and {len(pairings)} candidate {duties}.",
            "bus": f"{words['company'].capitalize()} needs a driver on each of {len(tasks)} {task_plural} "
                   f"({join_names(tasks)}); {len(pairings)} possible {duties} have been drawn up.",
            "helicopter": f"{words['company'].capitalize()} has to crew {len(tasks)} {task_plural} for the coming "
                          f"day ({join_names(tasks)}) and has built {len(pairings)} feasible {duties} for them.",
            "tram": f"For the Monday timetable, {words['company']} must give each of its {len(tasks)} {task_plural} "
                    f"({join_names(tasks)}) a driver, choosing among {len(pairings)} prepared {duties}.",
            "cargo": f"{words['company'].capitalize()} plans the crews of {len(tasks)} {task_plural} "
                     f"({join_names(tasks)}) with {len(pairings)} rule-compliant {duties} built by its optimizer.",
        }[scenario.key]
        rules = ("Each pairing is worked by one crew and is chosen whole or not at all." if duty == "pairing" else
                 f"Each {duty} is worked by one crew and is chosen whole or not at all.")
        if "deadhead_cost" in data:
            rules += (f" Every {task} needs a working crew; if several chosen {duties} include the same {task}, the "
                      f"extra crews ride along as passengers (deadheading) at {fmt(data['deadhead_cost'])} {money} "
                      "each.")
        else:
            rules += f" Every {task} must be in exactly one chosen {duty}."
        if "crews" in data:
            rules += f" Only {fmt(data['crews'])} crews are available, so at most that many {duties} can be chosen."
        if "base_limit" in data:
            limits = "; ".join(f"{b} at most {fmt(data['base_limit'][b])}" for b in sorted(data["base_limit"]))
            rules += f" Each {duty} starts from its crew base, and the bases can start only so many: {limits}."
        question = f"Which {duties} should be chosen at the least total cost, and what is that cost in {money}?"
        based = "base" in data
        if representation == "text":
            listing = " ".join(
                f"{p} covers the {task_plural} {join_names(data['covers'][p])}"
                + (f", starts from {data['base'][p]}" if based else "") + f" and costs {fmt(data['cost'][p])}."
                for p in pairings)
            return f"{intro} {rules} {listing} {question}"
        if representation == "table":
            headers = [duty, task_plural, f"cost ({money})"] + (["base"] if based else [])
            rows = [[p, ", ".join(data["covers"][p]), data["cost"][p]] + ([data["base"][p]] if based else [])
                    for p in pairings]
            return f"{intro} {rules}\n\n{markdown_table(headers, rows)}\n\n{question}"
        if representation == "file":
            return f"{intro} {rules} {question}\n\n{describe_data_file(self.data_fields)}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        objective = "\\sum_{p \\in P} c_p x_p"
        cover = "\\text{s.t.}\\ & \\sum_{p \\ni f} x_p = 1 && \\forall f \\in F"
        parameters = "cost $c_p$, flights $F_p \\subseteq F$ of pairing $p$"
        variables = "$x_p \\in \\{0, 1\\}$ (pairing chosen)"
        if "deadhead_cost" in data:
            objective += " + h \\sum_{f \\in F} d_f"
            cover = "\\text{s.t.}\\ & \\sum_{p \\ni f} x_p - d_f = 1 && \\forall f \\in F"
            parameters += ", deadhead cost $h$"
            variables += ", deadheading crews $d_f \\ge 0$"
        rows = [cover]
        if "crews" in data:
            parameters += ", crews $K$"
            rows.append("& \\sum_{p \\in P} x_p \\le K")
        if "base_limit" in data:
            parameters += ", base of each pairing, base limit $L_b$"
            rows.append("& \\sum_{p \\in P_b} x_p \\le L_b && \\forall b")
        return ("**Sets**: flights $F$, pairings $P$" + (", pairings $P_b$ of base $b$" if "base" in data else "")
                + f".\n\n**Parameters**: {parameters}.\n\n**Variables**: {variables}.\n\n"
                f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows)
                + "\n\\end{aligned}\n$$")


FAMILY = CrewScheduling()
