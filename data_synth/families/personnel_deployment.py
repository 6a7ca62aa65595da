"""Personnel deployment (MILP): send people of several skills from home bases to missions so that
every mission gets the people of each skill it needs. People travel on transport flights of limited
seats between a base and a mission; the cost is a per-person allowance plus a cost per flight. The
flights couple the skills, so it is not a set of independent transportation problems.

Structure variants (drawn per instance, recorded by the keys present): a minimum number of people every
base keeps at home (`keep`), a limit on the flights each base can fly (`aircraft`), and unmet needs
allowed at a penalty per missing person (`shortfall_penalty`: need rows become soft), each independent:
eight program skeletons."""

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
    plural,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("military", "military logistics", {
        "company": "a defence ministry", "base_word": "base", "mission_word": "mission", "flight": "airlift",
        "bases": ["Fort Alder", "Camp Birch", "Fort Cedar", "Camp Dunmore"],
        "missions": ["Mission North", "Mission Coast", "Mission Valley", "Mission Delta"],
        "skills": ["infantry", "medics", "engineers"], "money": "thousand dollars",
        "person_cost": (2, 6), "flight_cost": (30, 80), "seats": (20, 40),
    }),
    Scenario("relief", "humanitarian relief", {
        "company": "an international relief agency", "base_word": "hub", "mission_word": "disaster site",
        "flight": "charter flight",
        "bases": ["Hub Nairobi", "Hub Dubai", "Hub Panama", "Hub Kuala Lumpur"],
        "missions": ["Flood Zone East", "Quake Zone West", "Cyclone Coast", "Drought Region"],
        "skills": ["doctors", "nurses", "logisticians"], "money": "thousand euros",
        "person_cost": (1, 5), "flight_cost": (20, 60), "seats": (12, 30),
    }),
    Scenario("utility", "power utilities", {
        "company": "a power utility restoring service after a storm", "base_word": "depot",
        "mission_word": "outage area", "flight": "crew bus",
        "bases": ["Depot Ashby", "Depot Brent", "Depot Colne", "Depot Darwen"],
        "missions": ["Area Riverside", "Area Hilltop", "Area Old Mill", "Area Moorland"],
        "skills": ["line workers", "tree crews", "electricians"], "money": "hundred dollars",
        "person_cost": (2, 7), "flight_cost": (5, 15), "seats": (8, 16),
    }),
)

# the eval split's own industries, bases, missions, skills and currencies (held out from training)
EVAL_SCENARIOS = (
    Scenario("wildland", "wildland firefighting", {
        "company": "a provincial wildfire service", "base_word": "station", "mission_word": "fire zone",
        "flight": "crew helicopter",
        "bases": ["Station Pinecrest", "Station Cold Creek", "Station Sawtooth", "Station Bear Valley"],
        "missions": ["Fire Ridgeback", "Fire Canyon Run", "Fire Lost Lake", "Fire Juniper Flats"],
        "skills": ["smokejumpers", "sawyers", "paramedics"], "money": "thousand CAD",
        "person_cost": (1, 4), "flight_cost": (10, 35), "seats": (6, 14),
    }),
    Scenario("offshore", "offshore wind maintenance", {
        "company": "an offshore wind operator", "base_word": "port", "mission_word": "wind farm",
        "flight": "crew transfer vessel",
        "bases": ["Port Esbjerg", "Port Eemshaven", "Port Grimsby", "Port Cuxhaven"],
        "missions": ["Farm Dogger East", "Farm Sandbank", "Farm Hornsea Rise", "Farm Borkum Reef"],
        "skills": ["turbine technicians", "blade specialists", "crane operators"],
        "money": "thousand Danish kroner", "person_cost": (3, 9), "flight_cost": (40, 110), "seats": (12, 24),
    }),
)


class PersonnelDeployment(ProblemFamily):
    name = "personnel_deployment"
    title = "Personnel deployment"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"send": "nonnegative_integer", "flights": "nonnegative_integer", "short": "nonnegative"}
    phrasings = (
        Phrasing(r"People and flights come in whole numbers\.",
                 ("People and flights come in whole numbers.", "Only whole people and whole flights count."),
                 ("Numbers of people and of trips are integers.",)),
        Phrasing(r"\bseats for\b", ("seats for", "room for"), ("capacity for",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text); a rule never
        # takes in a phrase the generic lexicon words two ways in training ("needs", "at least", "what is that")
        Phrasing(r"\bPeople travel from a\b", ("People travel from a",), ("Staff get from a", "Personnel move from a")),
        Phrasing(r"\bpeople of any skill\.", ("people of any skill.",),
                 ("people, whatever their skill.", "persons regardless of skill.")),
        Phrasing(r"\bCosts are in\b", ("Costs are in",), ("All amounts are stated in", "Money is counted in")),
        Phrasing(r"\ban allowance per person sent, and a cost per\b", ("an allowance per person sent, and a cost per",),
                 ("a per-person allowance for everyone sent, plus a charge for every",
                  "an allowance for each person dispatched and a fee for each")),
        Phrasing(r"\bmay end up short of its need; each missing person costs\b",
                 ("may end up short of its need; each missing person costs",),
                 ("may be left below its need; every person missing is charged",
                  "is allowed to fall short of its need, at a charge for every missing person of")),
        Phrasing(r"\bmust get\b(?= at least)", ("must get",), ("shall receive", "has to receive")),
        Phrasing(r"\bthe people of each skill it\b(?= needs\.)", ("the people of each skill it",),
                 ("the headcount for every skill that it", "the number of people in every skill that it")),
        Phrasing(r"\bmust keep a minimum number of its people \(of any skill\) at home\.",
                 ("must keep a minimum number of its people (of any skill) at home.",),
                 ("has to hold back a minimum headcount (any skill) as a home reserve.",
                  "shall retain a set minimum of its people, of whatever skill, at home.")),
        Phrasing(r"\bcan run only a limited number of\b", ("can run only a limited number of",),
                 ("has a cap on the number of", "is allowed just a limited count of")),
        Phrasing(r"\bin all\.", ("in all.",), ("altogether.", "in total.")),
        Phrasing(r"\bWhom should each\b", ("Whom should each",), ("Which people should every",)),
        Phrasing(r"\bsend where to minimize the total cost, and\b", ("send where to minimize the total cost, and",),
                 ("dispatch to which destination so that the overall cost is as low as possible, and",
                  "send to each destination for the cheapest overall plan, and")),
        Phrasing(r", must keep\b(?= \d)", (", must keep",), (", holds back",)),
        Phrasing(r", can run\b(?= \d)", (", can run",), (", may use",)),
        Phrasing(r"\bper person and\b(?= \d)", ("per person and",), ("for each person plus", "a head and")),
        Phrasing(r"\bkeep at home\b", ("keep at home",), ("home reserve",)),
        Phrasing(r"\bcost per person / per\b", ("cost per person / per",), ("allowance per person / cost per",)),
        # the data.json field descriptions
        Phrasing(r"\blist of home base names\b", ("list of home base names",), ("names of the home bases",)),
        Phrasing(r"\blist of mission names\b", ("list of mission names",), ("names of the missions",)),
        Phrasing(r"\blist of skill names\b", ("list of skill names",), ("names of the skills",)),
        Phrasing(r"\bpeople of the skill stationed at the base\b", ("people of the skill stationed at the base",),
                 ("headcount with that skill at the base",)),
        Phrasing(r"\bpeople of the skill the mission\b(?= needs)", ("people of the skill the mission",),
                 ("headcount with that skill that the mission",)),
        Phrasing(r"\bcost of sending one person from the base to the mission\b",
                 ("cost of sending one person from the base to the mission",),
                 ("allowance for one person sent from the base to the mission",)),
        Phrasing(r"\bcost of one flight from the base to the mission\b",
                 ("cost of one flight from the base to the mission",),
                 ("charge for a single flight between the base and the mission",)),
        Phrasing(r"\bpeople one flight carries\b", ("people one flight carries",),
                 ("seat capacity of a flight, in people",)),
        Phrasing(r"\bfewest people \(of any skill\) each base keeps at home,",
                 ("fewest people (of any skill) each base keeps at home,",),
                 ("smallest home reserve of people (any skill) for every base,",)),
        Phrasing(r"\(only when bases keep a reserve\)", ("(only when bases keep a reserve)",),
                 ("(present if bases hold back a reserve)",)),
        Phrasing(r"\bmost flights each base can fly in all,", ("most flights each base can fly in all,",),
                 ("upper limit on the flights of every base, summed over its destinations,",)),
        Phrasing(r"\(only when flights are limited\)", ("(only when flights are limited)",),
                 ("(present if flights are capped)",)),
        # then "needs may go unmet)", whose "needs" the generic lexicon rewords ("calls for", "asks for")
        Phrasing(r"\bcost per person a mission is short of its need \(only when\b(?= needs may go unmet\))",
                 ("cost per person a mission is short of its need (only when",),
                 ("penalty for every person a mission goes without (present if what a mission",)),
    )
    data_fields = {
        "bases": "list of home base names",
        "missions": "list of mission names",
        "skills": "list of skill names",
        "available": "available[base][skill]: people of the skill stationed at the base",
        "need": "need[mission][skill]: people of the skill the mission needs",
        "person_cost": "person_cost[base][mission]: cost of sending one person from the base to the mission",
        "flight_cost": "flight_cost[base][mission]: cost of one flight from the base to the mission",
        "seats": "people one flight carries",
        "keep": "fewest people (of any skill) each base keeps at home, keyed by base (only when bases keep a reserve)",
        "aircraft": "most flights each base can fly in all, keyed by base (only when flights are limited)",
        "shortfall_penalty": "cost per person a mission is short of its need (only when needs may go unmet)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.B = pyo.Set(initialize=data["bases"])
model.M = pyo.Set(initialize=data["missions"])
model.S = pyo.Set(initialize=data["skills"])
model.send = pyo.Var(model.B, model.M, model.S, domain=pyo.NonNegativeIntegers)  # people of skill s from b to m
model.flights = pyo.Var(model.B, model.M, domain=pyo.NonNegativeIntegers)
cost = sum(data["person_cost"][b][m] * model.send[b, m, s] for b in model.B for m in model.M for s in model.S) + sum(
    data["flight_cost"][b][m] * model.flights[b, m] for b in model.B for m in model.M)

model.available = pyo.Constraint(model.B, model.S, rule=lambda model, b, s: sum(
    model.send[b, m, s] for m in model.M) <= data["available"][b][s])
model.seats = pyo.Constraint(model.B, model.M, rule=lambda model, b, m: sum(
    model.send[b, m, s] for s in model.S) <= data["seats"] * model.flights[b, m])
'''
    _HARD = '''\
model.obj = pyo.Objective(expr=cost, sense=pyo.minimize)
model.need = pyo.Constraint(model.M, model.S, rule=lambda model, m, s: sum(
    model.send[b, m, s] for b in model.B) >= data["need"][m][s])
'''
    _SOFT = '''\
model.short = pyo.Var(model.M, model.S, domain=pyo.NonNegativeReals)  # people the mission goes without
model.obj = pyo.Objective(expr=cost + data["shortfall_penalty"] * sum(model.short[m, s] for m in model.M
                                                                         for s in model.S), sense=pyo.minimize)
model.need = pyo.Constraint(model.M, model.S, rule=lambda model, m, s: sum(
    model.send[b, m, s] for b in model.B) + model.short[m, s] >= data["need"][m][s])
'''
    _KEEP = '''\
model.keep = pyo.Constraint(model.B, rule=lambda model, b: sum(model.send[b, m, s] for m in model.M for s in model.S)
                            <= sum(data["available"][b][s] for s in model.S) - data["keep"][b])
'''
    _AIRCRAFT = '''\
model.aircraft = pyo.Constraint(model.B, rule=lambda model, b: sum(model.flights[b, m] for m in model.M)
                                <= data["aircraft"][b])
'''
    model_code = _HEAD + _HARD + _AIRCRAFT  # the family's model with limited flights

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._SOFT if "shortfall_penalty" in data else self._HARD)
        if "keep" in data:
            code += self._KEEP
        if "aircraft" in data:
            code += self._AIRCRAFT
        return code

    def domains_for(self, data: dict) -> dict[str, str]:
        return {name: domain for name, domain in self.domains.items()
                if name != "short" or "shortfall_penalty" in data}

    def variant_of(self, data: dict) -> str:
        return "+".join(key for key in ("keep", "aircraft", "shortfall_penalty") if key in data) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_bases = size_for(difficulty, 2, 3, 4)
        n_missions = size_for(difficulty, 2, 3, 4)
        n_skills = size_for(difficulty, 2, 3, 3)
        bases = rng.sample(words["bases"], n_bases)
        missions = rng.sample(words["missions"], n_missions)
        skills = words["skills"][:n_skills]
        seats = rng.randint(*words["seats"])
        # a witness deployment; needs are what it delivers and availability what it uses plus a margin
        witness = {(b, m, s): rng.choice((0, 0, rng.randint(1, seats // 2))) for b in bases for m in missions
                   for s in skills}
        for m in missions:  # every mission needs somebody
            if not any(witness[b, m, s] for b in bases for s in skills):
                witness[rng.choice(bases), m, rng.choice(skills)] = rng.randint(1, seats // 2)
        need = {m: {s: sum(witness[b, m, s] for b in bases) for s in skills} for m in missions}
        margin = {b: {s: rng.randint(0, 6) for s in skills} for b in bases}
        available = {b: {s: sum(witness[b, m, s] for m in missions) + margin[b][s] for s in skills} for b in bases}
        c_low, c_high = words["person_cost"]
        f_low, f_high = words["flight_cost"]
        data = {"bases": bases, "missions": missions, "skills": skills, "available": available, "need": need,
                "person_cost": {b: {m: rng.randint(c_low, c_high) for m in missions} for b in bases},
                "flight_cost": {b: {m: rng.randint(f_low, f_high) for m in missions} for b in bases},
                "seats": seats}
        if rng.random() < 0.5:
            data["keep"] = {b: rng.randint(0, sum(margin[b].values())) for b in bases}
        if rng.random() < 0.5:
            flights = {b: sum(math.ceil(sum(witness[b, m, s] for s in skills) / seats) for m in missions)
                       for b in bases}
            data["aircraft"] = {b: flights[b] + rng.randint(0, 1) for b in bases}
        if rng.random() < 0.5:
            data["shortfall_penalty"] = rng.randint(3, 6) * c_high
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a mission needs more people of a skill than all bases have, and every need is hard
        m, s = rng.choice(data["missions"]), rng.choice(data["skills"])
        variant = {key: value for key, value in data.items() if key != "shortfall_penalty"}
        need = {mission: dict(row) for mission, row in data["need"].items()}
        need[m][s] = sum(data["available"][b][s] for b in data["bases"]) + 1
        variant["need"] = need
        return variant

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        bases, missions, skills = data["bases"], data["missions"], data["skills"]
        send = {(b, m, s): matrix.add_var(f"send[{b},{m},{s}]", 0.0, cost=data["person_cost"][b][m], integer=True)
                for b in bases for m in missions for s in skills}
        flights = {(b, m): matrix.add_var(f"flights[{b},{m}]", 0.0, cost=data["flight_cost"][b][m], integer=True)
                   for b in bases for m in missions}
        for b in bases:
            for s in skills:
                matrix.add_row({send[b, m, s]: 1.0 for m in missions}, upper=data["available"][b][s],
                               name=f"available[{b},{s}]")
            for m in missions:
                matrix.add_row({**{send[b, m, s]: 1.0 for s in skills}, flights[b, m]: -data["seats"]}, upper=0.0,
                               name=f"seats[{b},{m}]")
            if "keep" in data:
                matrix.add_row({send[b, m, s]: 1.0 for m in missions for s in skills},
                               upper=sum(data["available"][b].values()) - data["keep"][b], name=f"keep[{b}]")
            if "aircraft" in data:
                matrix.add_row({flights[b, m]: 1.0 for m in missions}, upper=data["aircraft"][b], name=f"aircraft[{b}]")
        for m in missions:
            for s in skills:
                row = {send[b, m, s]: 1.0 for b in bases}
                if "shortfall_penalty" in data:
                    row[matrix.add_var(f"short[{m},{s}]", 0.0, cost=data["shortfall_penalty"])] = 1.0
                matrix.add_row(row, lower=data["need"][m][s], name=f"need[{m},{s}]")

    def constraint_rows(self, data: dict, x: dict):
        send, flights = x["send"], x["flights"]
        bases, missions, skills = data["bases"], data["missions"], data["skills"]
        for b in bases:
            for s in skills:
                yield Row(f"available[{b},{s}]", sum(send[b, m, s] for m in missions), "<=", data["available"][b][s])
            for m in missions:
                yield Row(f"seats[{b},{m}]", sum(send[b, m, s] for s in skills) - data["seats"] * flights[b, m], "<=",
                          0)
            if "keep" in data:
                yield Row(f"keep[{b}]", sum(send[b, m, s] for m in missions for s in skills), "<=",
                          sum(data["available"][b].values()) - data["keep"][b])
            if "aircraft" in data:
                yield Row(f"aircraft[{b}]", sum(flights[b, m] for m in missions), "<=", data["aircraft"][b])
        for m in missions:
            for s in skills:
                sent = sum(send[b, m, s] for b in bases)
                if "shortfall_penalty" in data:
                    sent += x["short"][m, s]
                yield Row(f"need[{m},{s}]", sent, ">=", data["need"][m][s])

    def objective_value(self, data: dict, x: dict) -> float:
        bases, missions, skills = data["bases"], data["missions"], data["skills"]
        total = sum(data["person_cost"][b][m] * x["send"][b, m, s] for b in bases for m in missions for s in skills)
        total += sum(data["flight_cost"][b][m] * x["flights"][b, m] for b in bases for m in missions)
        if "shortfall_penalty" in data:
            total += data["shortfall_penalty"] * sum(x["short"][m, s] for m in missions for s in skills)
        return total

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        lines = []
        for b in data["bases"]:
            for m in data["missions"]:
                people = {s: round(x["send"][b, m, s]) for s in data["skills"] if x["send"][b, m, s] > 0.5}
                if people:
                    lines.append(f"- {b} -> {m}: " + ", ".join(f"{n} {s}" for s, n in people.items())
                                 + f" on {round(x['flights'][b, m])} flights")
        return "\n".join(lines) or "- nobody is sent"

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        bases, missions, skills = data["bases"], data["missions"], data["skills"]
        base_word, mission_word, flight, money = (words["base_word"], words["mission_word"], words["flight"],
                                                  words["money"])
        intro = {
            "military": f"{words['company'].capitalize()} must staff {len(missions)} missions with personnel from "
                        f"{len(bases)} bases.",
            "relief": f"{words['company'].capitalize()} deploys staff from {len(bases)} hubs to {len(missions)} "
                      "disaster sites.",
            "utility": f"{words['company'].capitalize()} sends crews from {len(bases)} depots to {len(missions)} "
                       "outage areas.",
            # the eval scenarios
            "wildland": f"{words['company'].capitalize()} has to send firefighters from {len(bases)} stations to "
                        f"{len(missions)} active fire zones.",
            "offshore": f"{words['company'].capitalize()} dispatches maintenance staff from {len(bases)} ports to "
                        f"{len(missions)} offshore wind farms.",
        }[scenario.key]
        rules = (f"People travel from a {base_word} to a {mission_word} by {flight}; each {flight} has seats for "
                 f"{fmt(data['seats'])} people of any skill. People and flights come in whole numbers. Costs are in "
                 f"{money}: an allowance per person sent, and a cost per {flight}.")
        if "shortfall_penalty" in data:
            rules += (f" A {mission_word} may end up short of its need; each missing person costs "
                      f"{fmt(data['shortfall_penalty'])}.")
        else:
            rules += f" Every {mission_word} must get at least the people of each skill it needs."
        if "keep" in data:
            rules += f" Each {base_word} must keep a minimum number of its people (of any skill) at home."
        if "aircraft" in data:
            rules += f" Each {base_word} can run only a limited number of {plural(flight)} in all."
        question = f"Whom should each {base_word} send where to minimize the total cost, and what is that cost?"
        if representation == "text":
            home = " ".join(f"{b} has " + ", ".join(f"{fmt(data['available'][b][s])} {s}" for s in skills)
                            + (f", must keep {fmt(data['keep'][b])} at home" if "keep" in data else "")
                            + (f", can run {fmt(data['aircraft'][b])} {plural(flight)}" if "aircraft" in data else "")
                            + "." for b in bases)
            needs = " ".join(f"{m} needs " + ", ".join(f"{fmt(data['need'][m][s])} {s}" for s in skills) + "."
                             for m in missions)
            costs = " ".join(f"From {b}: " + ", ".join(
                f"to {m} {fmt(data['person_cost'][b][m])} per person and {fmt(data['flight_cost'][b][m])} per {flight}"
                for m in missions) + "." for b in bases)
            return f"{intro} {rules} {home} {needs} {costs} {question}"
        if representation == "table":
            headers = [base_word, *skills]
            extra = []
            if "keep" in data:
                headers.append("keep at home")
                extra.append("keep")
            if "aircraft" in data:
                headers.append(f"{plural(flight)} available")
                extra.append("aircraft")
            home = markdown_table(headers, [[b, *[data["available"][b][s] for s in skills],
                                             *[data[key][b] for key in extra]] for b in bases])
            needs = markdown_table([mission_word, *skills], [[m, *[data["need"][m][s] for s in skills]]
                                                             for m in missions])
            costs = markdown_table([f"cost per person / per {flight}", *missions],
                                   [[b, *[f"{fmt(data['person_cost'][b][m])} / {fmt(data['flight_cost'][b][m])}"
                                          for m in missions]] for b in bases])
            return f"{intro} {rules}\n\n{home}\n\n{needs}\n\n{costs}\n\n{question}"
        if representation == "file":
            return f"{intro} {rules} {question}\n\n{describe_data_file(self.data_fields)}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        objective = "\\sum_{b,m} \\big(c_{bm} \\sum_s x_{bms} + g_{bm} y_{bm}\\big)"
        need = "& \\sum_b x_{bms} \\ge n_{ms} && \\forall m, s"
        parameters = "available $a_{bs}$, need $n_{ms}$, person cost $c_{bm}$, flight cost $g_{bm}$, seats $Q$"
        variables = "people sent $x_{bms} \\in \\mathbb{Z}_{\\ge 0}$, flights $y_{bm} \\in \\mathbb{Z}_{\\ge 0}$"
        if "shortfall_penalty" in data:
            objective += " + \\pi \\sum_{m,s} u_{ms}"
            need = "& \\sum_b x_{bms} + u_{ms} \\ge n_{ms} && \\forall m, s"
            parameters += ", shortfall penalty $\\pi$"
            variables += ", shortfall $u_{ms} \\ge 0$"
        rows = ["\\text{s.t.}\\ & \\sum_m x_{bms} \\le a_{bs} && \\forall b, s",
                "& \\sum_s x_{bms} \\le Q\\, y_{bm} && \\forall b, m", need]
        if "keep" in data:
            parameters += ", reserve $k_b$"
            rows.append("& \\sum_{m,s} x_{bms} \\le \\sum_s a_{bs} - k_b && \\forall b")
        if "aircraft" in data:
            parameters += ", flight limit $F_b$"
            rows.append("& \\sum_m y_{bm} \\le F_b && \\forall b")
        return ("**Sets**: bases $B$, missions $M$, skills $S$.\n\n"
                f"**Parameters**: {parameters}.\n\n**Variables**: {variables}.\n\n"
                f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows)
                + "\n\\end{aligned}\n$$")


FAMILY = PersonnelDeployment()
