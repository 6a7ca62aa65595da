"""Set cover (IP): choose the cheapest set of sites (fire stations, cell towers, experts) so that every
area (district, village, skill) is covered by at least its required number of chosen sites."""

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

SCENARIOS = (
    Scenario("fire", "municipal emergency services", {
        "site": "candidate fire station", "site_prefix": "Station ", "area": "district", "area_prefix": "D",
        "cost_words": "annual operating cost", "unit": "thousand dollars",
        "covers": "can reach {areas} within eight minutes",
        "intro": "A city council is redrawing its fire service. Each candidate fire station, if opened, "
                 "can reach some districts within the eight-minute response target.",
    }),
    Scenario("telecom", "telecommunications", {
        "site": "candidate tower site", "site_prefix": "Site ", "area": "village", "area_prefix": "V",
        "cost_words": "cost to build and equip", "unit": "thousand euros",
        "covers": "provides signal to {areas}",
        "intro": "A mobile operator is extending coverage into a rural region. Each candidate tower site, if "
                 "built, provides signal to some of the villages.",
    }),
    Scenario("staffing", "consulting", {
        "site": "freelance consultant", "site_prefix": "Consultant ", "area": "skill", "area_prefix": "Skill ",
        "cost_words": "fee for the engagement", "unit": "thousand dollars",
        "covers": "is certified in {areas}",
        "intro": "A consulting firm is staffing a transformation project from a pool of freelance "
                 "consultants. Each consultant is certified in some of the skills the project needs.",
    }),
)


class SetCover(ProblemFamily):
    name = "set_cover"
    title = "Set cover"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"choose": "binary"}
    data_fields = {
        "sites": "list of candidate names",
        "areas": "list of names of the things to cover",
        "cost": "cost of choosing each candidate, keyed by candidate",
        "covers": "covers[candidate]: list of the areas that candidate covers",
        "required": "required[area]: how many chosen candidates must cover the area",
    }
    model_code = '''\
model = pyo.ConcreteModel()
model.S = pyo.Set(initialize=data["sites"])
model.A = pyo.Set(initialize=data["areas"])
model.choose = pyo.Var(model.S, domain=pyo.Binary)

model.obj = pyo.Objective(expr=sum(data["cost"][s] * model.choose[s] for s in model.S), sense=pyo.minimize)

# every area is covered by at least the required number of chosen candidates
def coverage(model, a):
    covering = [s for s in model.S if a in data["covers"][s]]
    return sum(model.choose[s] for s in covering) >= data["required"][a]

model.coverage = pyo.Constraint(model.A, rule=coverage)
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_sites = size_for(difficulty, 5, 8, 12)
        n_areas = size_for(difficulty, 6, 10, 15)
        sites = [f"{words['site_prefix']}{chr(ord('A') + k)}" for k in range(n_sites)]
        areas = [f"{words['area_prefix']}{k + 1}" for k in range(n_areas)]
        covers = {s: sorted(rng.sample(range(n_areas), rng.randint(2, max(2, n_areas * 2 // 5))))
                  for s in sites}
        # a few areas need double coverage (high-risk districts, key skills)
        required = [1] * n_areas
        for a in rng.sample(range(n_areas), max(1, n_areas // 5)):
            required[a] = 2
        # every area gets at least one more covering site than it requires, so the instance is feasible
        # and the choice is not forced
        for a in range(n_areas):
            while sum(a in covers[s] for s in sites) < required[a] + 1:
                site = rng.choice([s for s in sites if a not in covers[s]])
                covers[site] = sorted([*covers[site], a])
        cost = {s: rng.randint(4, 12) * 10 + 3 * len(covers[s]) for s in sites}
        return {"sites": sites, "areas": areas, "cost": cost,
                "covers": {s: [areas[a] for a in covers[s]] for s in sites},
                "required": dict(zip(areas, required, strict=True))}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one area requires more covering candidates than exist
        area = rng.choice(data["areas"])
        available = sum(area in data["covers"][s] for s in data["sites"])
        return {**data, "required": {**data["required"], area: available + 1}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        column = {s: matrix.add_var(f"choose[{s}]", 0, 1, cost=data["cost"][s], integer=True)
                  for s in data["sites"]}
        for a in data["areas"]:
            matrix.add_row({column[s]: 1.0 for s in data["sites"] if a in data["covers"][s]},
                           lower=data["required"][a], name=f"coverage[{a}]")

    def constraint_rows(self, data: dict, x: dict):
        for a in data["areas"]:
            covered = sum(x["choose"][s] for s in data["sites"] if a in data["covers"][s])
            yield Row(f"coverage[{a}]", covered, ">=", data["required"][a])

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["cost"][s] * x["choose"][s] for s in data["sites"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        site, area, unit = words["site"], words["area"], words["unit"]
        doubles = [a for a in data["areas"] if data["required"][a] != 1]
        singles = [a for a in data["areas"] if data["required"][a] == 1]
        parts = []
        if singles:
            parts.append(f"{join_names(singles)} must each be covered by at least 1 chosen {site}")
        for a in doubles:
            parts.append(f"{a} must be covered by at least {fmt(data['required'][a])} chosen {site}s")
        requirement = "Coverage requirements: " + "; ".join(parts) + "."
        question = (f"Which {site}s should be chosen to meet every requirement at minimum total cost, and what "
                    f"is that minimum total cost (in {unit})?")
        if representation == "text":
            lines = [f"{s} costs {fmt(data['cost'][s])} {unit} ({words['cost_words']}) and "
                     f"{words['covers'].format(areas=join_names(data['covers'][s]))}." for s in data["sites"]]
            return f"{words['intro']} {' '.join(lines)} {requirement} {question}"
        if representation == "table":
            table = markdown_table(
                [site, f"{words['cost_words']} ({unit})", *data["areas"]],
                [[s, data["cost"][s], *["x" if a in data["covers"][s] else "" for a in data["areas"]]]
                 for s in data["sites"]],
            )
            required = markdown_table([area, "required coverage"], [[a, data["required"][a]]
                                                                      for a in data["areas"]])
            return (f"{words['intro']} An x marks the {area}s each {site} covers.\n\n{table}\n\n"
                    f"{required}\n\n{question}")
        if representation == "file":
            return f"{words['intro']}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        chosen = [s for s in data["sites"] if x["choose"][s] > 0.5]
        lines = [f"Chosen: {join_names(chosen)}."]
        for a in data["areas"]:
            by = [s for s in chosen if a in data["covers"][s]]
            lines.append(f"- {a}: covered by {join_names(by)} (required {fmt(data['required'][a])})")
        return "\n".join(lines)

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: candidates $S$, areas $A$; $S_a \\subseteq S$ are the candidates that cover area $a$.\n\n"
            "**Parameters**: cost $c_s$, required coverage $r_a$.\n\n"
            "**Variables**: $x_s \\in \\{0,1\\}$, candidate $s$ is chosen.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{s \\in S} c_s x_s \\\\\n"
            "\\text{s.t.}\\ & \\sum_{s \\in S_a} x_s \\ge r_a && \\forall a \\in A \\\\\n"
            "& x_s \\in \\{0,1\\} && \\forall s \\in S\n\\end{aligned}\n$$"
        )


FAMILY = SetCover()
