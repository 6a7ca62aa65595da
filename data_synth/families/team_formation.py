"""Team formation (IP): place people into teams so that every team has a size within its bounds and
enough members with each skill it needs, maximizing the total fit of people to their teams.

Structure variants (drawn per instance, recorded by the keys present): pairs of people who may not
share a team (`conflicts`), leaders of whom every team needs exactly one (`leaders`), and whether
everyone must be placed (`place_everyone`) or some may stay out, each independent: eight program
skeletons."""

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
    Scenario("consulting", "management consulting", {
        "company": "a consulting firm", "person": "consultant", "people": "consultants", "team": "project",
        "teams": ["Retail Strategy", "Bank Merger", "Hospital Turnaround", "Energy Audit"],
        "names": ["Ava", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jon", "Kira", "Liam",
                  "Mona", "Nils"],
        "skills": ["finance", "analytics", "operations"],
    }),
    Scenario("hackathon", "software events", {
        "company": "a hackathon organiser", "person": "participant", "people": "participants", "team": "team",
        "teams": ["Team Falcon", "Team Otter", "Team Lynx", "Team Heron"],
        "names": ["Aiko", "Bruno", "Carla", "Dmitri", "Esi", "Felix", "Gita", "Hamid", "Ivy", "Jonas", "Kemal",
                  "Lena", "Mateo", "Noor"],
        "skills": ["backend", "frontend", "design"],
    }),
    Scenario("research", "academic research", {
        "company": "a research institute", "person": "researcher", "people": "researchers", "team": "proposal team",
        "teams": ["Climate Grant", "Genomics Grant", "Robotics Grant", "Education Grant"],
        "names": ["Dr Abe", "Dr Baker", "Dr Cruz", "Dr Diaz", "Dr Eng", "Dr Fox", "Dr Gill", "Dr Hale", "Dr Iqbal",
                  "Dr Jung", "Dr Kovacs", "Dr Lund", "Dr Moreau", "Dr Nagy"],
        "skills": ["statistics", "lab work", "grant writing"],
    }),
)

# eval only: other organisations, people, teams and skills than any training scenario
EVAL_SCENARIOS = (
    Scenario("film", "film and television", {
        "company": "a film studio", "person": "crew member", "people": "crew members", "team": "shooting unit",
        "teams": ["Unit North", "Unit Coast", "Unit Desert", "Unit Harbour"],
        "names": ["Anouk", "Basil", "Celeste", "Dario", "Elif", "Fynn", "Greta", "Hiro", "Isla", "Joaquin", "Kaia",
                  "Lucio", "Maren", "Omar"],
        "skills": ["camera", "lighting", "sound"],
    }),
    Scenario("nursing", "hospital care", {
        "company": "a teaching hospital", "person": "nurse", "people": "nurses", "team": "ward team",
        "teams": ["Cardiology Ward", "Oncology Ward", "Maternity Ward", "Neurology Ward"],
        "names": ["Nurse Adeyemi", "Nurse Bianchi", "Nurse Castro", "Nurse Duarte", "Nurse Eriksen",
                  "Nurse Ferreira", "Nurse Grant", "Nurse Haddad", "Nurse Ibsen", "Nurse Jovanovic", "Nurse Kaur",
                  "Nurse Lindqvist", "Nurse Morales", "Nurse Novak"],
        "skills": ["critical care", "triage", "wound care"],
    }),
    Scenario("robotics", "school robotics competitions", {
        "company": "a school robotics league", "person": "student", "people": "students", "team": "squad",
        "teams": ["Squad Comet", "Squad Nebula", "Squad Quasar", "Squad Pulsar"],
        "names": ["Amara", "Bo", "Cyrus", "Dalia", "Emeka", "Freya", "Gus", "Hana", "Idris", "Juno", "Kofi", "Lotte",
                  "Milan", "Nia"],
        "skills": ["programming", "mechanics", "electronics"],
    }),
)


class TeamFormation(ProblemFamily):
    name = "team_formation"
    title = "Team formation"
    problem_type = "IP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"member": "binary"}
    phrasings = (
        Phrasing(r"Each person joins at most one team\.",
                 ("Each person joins at most one team.", "Nobody can be on two teams."),
                 ("A person may belong to one team at the most.",)),
        Phrasing(r"\bfit scores\b", ("fit scores", "suitability scores"), ("match ratings",)),
        Phrasing(r"\bmust have between\b", ("must have between", "needs between"), ("shall count between",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text); rules stop
        # before generic phrases with several training wordings ("at least", "needs", "what is that")
        Phrasing(r"(?<=\w )must be placed on some\b", ("must be placed on some",), ("has to be given a",)),
        Phrasing(r"\bmay also stay out of every\b", ("may also stay out of every",),
                 ("may equally be kept off every",)),
        Phrasing(r"\bits minimum and maximum number of members and (?=at least\b)",
                 ("its minimum and maximum number of members and ",),
                 ("its smallest and largest allowed number of members, and hold ",)),
        Phrasing(r"\bthe required number of members with each skill\.",
                 ("the required number of members with each skill.",),
                 ("the stated count of members holding each skill.",)),
        Phrasing(r"\bThese pairs may not be on the same\b", ("These pairs may not be on the same",),
                 ("The following pairs are never to share a",)),
        Phrasing(r"\bcan lead, and every\b", ("can lead, and every",), ("are able to lead, and each",)),
        Phrasing(r"\bexactly one of them as a member\.", ("exactly one of them as a member.",),
                 ("precisely one of them among its members.",)),
        Phrasing(r"\bWho should join which\b", ("Who should join which",), ("Who ought to be put on which",)),
        Phrasing(r"(?<= )to maximize the total of the (?=fit scores\b)", ("to maximize the total of the ",),
                 ("so that the sum of the ",)),
        Phrasing(r", and (?=what is that maximum total\?)", (", and ",), (" is as large as possible, and ",)),
        Phrasing(r"(?<=that )maximum total\?", ("maximum total?",), ("largest sum?",)),
        Phrasing(r"\bmembers, with (?=at least\b)", ("members, with ",), ("members, including ",)),
        Phrasing(r"(?<=\| )need ", ("need ",), ("required ",)),
        Phrasing(r"(?<=\| )fit: ", ("fit: ",), ("rating for ",)),
        Phrasing(r"\bmin members\b", ("min members",), ("smallest size",)),
        Phrasing(r"\bmax members\b", ("max members",), ("largest size",)),
    )
    data_fields = {
        "people": "list of people's names",
        "teams": "list of team names",
        "skills": "list of skill names",
        "has": "has[person]: the skills the person has",
        "score": "score[person][team]: how well the person fits the team (points)",
        "min_size": "fewest members of each team, keyed by team",
        "max_size": "most members of each team, keyed by team",
        "need": "need[team][skill]: fewest members of the team with the skill",
        "conflicts": "[person, person] pairs who may not be on the same team (only when there are such pairs)",
        "leaders": "people who can lead; every team needs exactly one of them (only when teams need a leader)",
        "place_everyone": "true when every person must join a team (only then; otherwise people may stay out)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.P = pyo.Set(initialize=data["people"])
model.T = pyo.Set(initialize=data["teams"])
model.member = pyo.Var(model.P, model.T, domain=pyo.Binary)  # person p is on team t

model.obj = pyo.Objective(expr=sum(data["score"][p][t] * model.member[p, t] for p in model.P for t in model.T),
                          sense=pyo.maximize)
'''
    _AT_MOST_ONE = '''\
model.one_team = pyo.Constraint(model.P, rule=lambda model, p: sum(model.member[p, t] for t in model.T) <= 1)
'''
    _EXACTLY_ONE = '''\
model.one_team = pyo.Constraint(model.P, rule=lambda model, p: sum(model.member[p, t] for t in model.T) == 1)
'''
    _BODY = '''\
model.min_size = pyo.Constraint(model.T, rule=lambda model, t: sum(model.member[p, t] for p in model.P)
                                >= data["min_size"][t])
model.max_size = pyo.Constraint(model.T, rule=lambda model, t: sum(model.member[p, t] for p in model.P)
                                <= data["max_size"][t])


def skill(model, t, s):  # enough members with skill s (nothing to state when nobody has it and none is needed)
    holders = [p for p in model.P if s in data["has"][p]]
    if not holders and data["need"][t][s] == 0:
        return pyo.Constraint.Skip
    return sum(model.member[p, t] for p in holders) >= data["need"][t][s]


model.skill = pyo.Constraint([(t, s) for t in data["teams"] for s in data["skills"]], rule=skill)
'''
    _CONFLICTS = '''\
model.conflicts = pyo.Constraint([(k, t) for k in range(len(data["conflicts"])) for t in data["teams"]],
                                 rule=lambda model, k, t: model.member[data["conflicts"][k][0], t]
                                 + model.member[data["conflicts"][k][1], t] <= 1)
'''
    _LEADERS = '''\
model.leader = pyo.Constraint(model.T, rule=lambda model, t: sum(model.member[p, t] for p in data["leaders"]) == 1)
'''
    model_code = _HEAD + _AT_MOST_ONE + _BODY + _CONFLICTS  # the family's model with conflicting pairs

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._EXACTLY_ONE if data.get("place_everyone") else self._AT_MOST_ONE) + self._BODY
        if "conflicts" in data:
            code += self._CONFLICTS
        if "leaders" in data:
            code += self._LEADERS
        return code

    def variant_of(self, data: dict) -> str:
        return "+".join(key for key in ("conflicts", "leaders", "place_everyone") if key in data) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_people = size_for(difficulty, 6, 9, 12)
        n_teams = size_for(difficulty, 2, 3, 3)
        people = rng.sample(words["names"], n_people)
        teams = rng.sample(words["teams"], n_teams)
        skills = list(words["skills"])
        has = {p: sorted(rng.sample(skills, rng.choice((1, 1, 2))), key=skills.index) for p in people}
        score = {p: {t: rng.randint(1, 10) for t in teams} for p in people}
        everyone = rng.random() < 0.5
        # a witness: people dealt to the teams (all of them, or all but a few), every team at least two
        order = rng.sample(people, n_people)
        placed = order if everyone else order[:n_people - rng.randint(1, n_people // 3)]
        witness = {t: placed[k::n_teams] for k, t in enumerate(teams)}
        data = {"people": people, "teams": teams, "skills": skills, "has": has, "score": score,
                "min_size": {t: max(1, len(witness[t]) - rng.randint(0, 1)) for t in teams},
                "max_size": {t: len(witness[t]) + rng.randint(0, 1) for t in teams},
                "need": {t: {s: max(0, sum(s in has[p] for p in witness[t]) - rng.randint(0, 1)) for s in skills}
                         for t in teams}}
        if rng.random() < 0.5:
            pairs = set()
            for _ in range(max(1, n_people // 3)):
                a, b = rng.sample(people, 2)
                if not any(a in members and b in members for members in witness.values()):
                    pairs.add((a, b) if a < b else (b, a))
            if pairs:
                data["conflicts"] = [list(pair) for pair in sorted(pairs)]
        if rng.random() < 0.5:
            # one witness leader per team, and perhaps someone left out of the witness who could lead too
            leaders = [rng.choice(witness[t]) for t in teams]
            outside = [p for p in people if p not in placed]
            leaders += outside[:1] if rng.random() < 0.5 else []
            data["leaders"] = sorted(leaders, key=people.index)
        if everyone:
            data["place_everyone"] = True
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # teams together need more members with a skill than there are people with it
        held = [s for s in data["skills"] if any(s in data["has"][p] for p in data["people"])]
        s = rng.choice(held)  # a skill somebody has, so the shortfall is a counted one, not an empty row
        holders = sum(s in data["has"][p] for p in data["people"])
        first = data["teams"][0]
        need = {t: dict(data["need"][t]) for t in data["teams"]}
        need[first][s] = holders + 1
        max_size = {**data["max_size"], first: max(data["max_size"][first], holders + 1)}
        return {**data, "need": need, "max_size": max_size}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        people, teams = data["people"], data["teams"]
        member = {(p, t): matrix.add_var(f"member[{p},{t}]", 0, 1, cost=data["score"][p][t], integer=True)
                  for p in people for t in teams}
        lower = 1.0 if data.get("place_everyone") else 0.0
        for p in people:
            matrix.add_row({member[p, t]: 1.0 for t in teams}, lower=lower, upper=1.0, name=f"one_team[{p}]")
        for t in teams:
            matrix.add_row({member[p, t]: 1.0 for p in people}, lower=data["min_size"][t], upper=data["max_size"][t],
                           name=f"size[{t}]")
            for s in data["skills"]:
                matrix.add_row({member[p, t]: 1.0 for p in people if s in data["has"][p]}, lower=data["need"][t][s],
                               name=f"skill[{t},{s}]")
            if "leaders" in data:
                matrix.add_row({member[p, t]: 1.0 for p in data["leaders"]}, 1, 1, name=f"leader[{t}]")
            for a, b in data.get("conflicts", ()):
                matrix.add_row({member[a, t]: 1.0, member[b, t]: 1.0}, upper=1.0, name=f"conflict[{a},{b},{t}]")

    def constraint_rows(self, data: dict, x: dict):
        member, people, teams = x["member"], data["people"], data["teams"]
        for p in people:
            yield Row(f"one_team[{p}]", sum(member[p, t] for t in teams), "==" if data.get("place_everyone") else "<=",
                      1)
        for t in teams:
            size = sum(member[p, t] for p in people)
            yield Row(f"min_size[{t}]", size, ">=", data["min_size"][t])
            yield Row(f"max_size[{t}]", size, "<=", data["max_size"][t])
            for s in data["skills"]:
                if not any(s in data["has"][p] for p in people) and data["need"][t][s] == 0:
                    continue
                yield Row(f"skill[{t},{s}]", sum(member[p, t] for p in people if s in data["has"][p]), ">=",
                          data["need"][t][s])
            if "leaders" in data:
                yield Row(f"leader[{t}]", sum(member[p, t] for p in data["leaders"]), "==", 1)
            for a, b in data.get("conflicts", ()):
                yield Row(f"conflict[{a},{b},{t}]", member[a, t] + member[b, t], "<=", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["score"][p][t] * x["member"][p, t] for p in data["people"] for t in data["teams"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        lines = []
        for t in data["teams"]:
            members = [p for p in data["people"] if x["member"][p, t] > 0.5]
            lines.append(f"- {t}: {join_names(members) if members else 'nobody'}")
        return "\n".join(lines)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        people, teams, skills = data["people"], data["teams"], data["skills"]
        person, plural, team = words["person"], words["people"], words["team"]
        intro = {
            "consulting": f"{words['company'].capitalize()} is staffing {len(teams)} projects from {len(people)} "
                          f"available {plural}.",
            "hackathon": f"{words['company'].capitalize()} forms {len(teams)} teams from {len(people)} registered "
                         f"{plural}.",
            "research": f"{words['company'].capitalize()} assembles {len(teams)} proposal teams from {len(people)} "
                        f"{plural}.",
            "film": f"{words['company'].capitalize()} is splitting {len(people)} {plural} into {len(teams)} "
                    f"shooting units for the next filming block.",
            "nursing": f"{words['company'].capitalize()} is setting up {len(teams)} ward teams for the winter rota, "
                       f"drawing on {len(people)} {plural}.",
            "robotics": f"{words['company'].capitalize()} puts {len(people)} {plural} into {len(teams)} squads "
                        f"for the regional final.",
        }[scenario.key]
        rules = "Each person joins at most one team."
        if data.get("place_everyone"):
            rules += f" Every {person} must be placed on some {team}."
        else:
            rules += f" A {person} may also stay out of every {team}."
        rules += (f" Each {team} must have between its minimum and maximum number of members and at least the "
                  f"required number of members with each skill.")
        if "conflicts" in data:
            pairs = "; ".join(f"{a} and {b}" for a, b in data["conflicts"])
            rules += f" These pairs may not be on the same {team}: {pairs}."
        if "leaders" in data:
            rules += (f" Only {join_names(data['leaders'])} can lead, and every {team} needs exactly one of them "
                      f"as a member.")
        question = (f"Who should join which {team} to maximize the total of the fit scores, and what is that "
                    "maximum total?")
        if representation == "text":
            skills_text = " ".join(f"{p} has {join_names(data['has'][p])}; fit scores " + ", ".join(
                f"{fmt(data['score'][p][t])} for {t}" for t in teams) + "." for p in people)
            needs = " ".join(f"{t} must have between {fmt(data['min_size'][t])} and {fmt(data['max_size'][t])} "
                             "members, with at least " + ", ".join(f"{fmt(data['need'][t][s])} in {s}" for s in skills)
                             + "." for t in teams)
            return f"{intro} {rules} {skills_text} {needs} {question}"
        if representation == "table":
            people_table = markdown_table([person, "skills", *[f"fit: {t}" for t in teams]],
                                          [[p, ", ".join(data["has"][p]), *[data["score"][p][t] for t in teams]]
                                           for p in people])
            team_table = markdown_table([team, "min members", "max members", *[f"need {s}" for s in skills]],
                                        [[t, data["min_size"][t], data["max_size"][t],
                                          *[data["need"][t][s] for s in skills]] for t in teams])
            return f"{intro} {rules}\n\n{people_table}\n\n{team_table}\n\n{question}"
        if representation == "file":
            return f"{intro} {rules} {question}\n\n{describe_data_file(self.data_fields)}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        one = "=" if data.get("place_everyone") else "\\le"
        sets = "people $P$, teams $T$, skills $S$, holders $P_s \\subseteq P$ of skill $s$"
        rows = [f"\\text{{s.t.}}\\ & \\sum_{{t \\in T}} x_{{pt}} {one} 1 && \\forall p \\in P",
                "& m_t \\le \\sum_{p \\in P} x_{pt} \\le M_t && \\forall t \\in T",
                "& \\sum_{p \\in P_s} x_{pt} \\ge n_{ts} && \\forall t \\in T, s \\in S"]
        if "conflicts" in data:
            sets += ", conflicting pairs $C$"
            rows.append("& x_{at} + x_{bt} \\le 1 && \\forall (a, b) \\in C, t \\in T")
        if "leaders" in data:
            sets += ", leaders $\\Lambda \\subseteq P$"
            rows.append("& \\sum_{p \\in \\Lambda} x_{pt} = 1 && \\forall t \\in T")
        rows.append("& x_{pt} \\in \\{0, 1\\}")
        return (f"**Sets**: {sets}.\n\n"
                "**Parameters**: fit $f_{pt}$, size bounds $m_t, M_t$, skill needs $n_{ts}$.\n\n"
                "**Variables**: $x_{pt} = 1$ when person $p$ joins team $t$.\n\n"
                "$$\n\\begin{aligned}\n\\max\\ & \\sum_{p \\in P} \\sum_{t \\in T} f_{pt} x_{pt} \\\\\n"
                + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$")


FAMILY = TeamFormation()
