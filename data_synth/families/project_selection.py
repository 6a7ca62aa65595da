"""Project selection (binary IP): choose which projects to fund to maximize total net present value
within yearly budgets, where some projects need another project first (precedence) and some pairs
are alternatives to each other (at most one of the two)."""

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
    Scenario("it", "corporate IT", {
        "organisation": "A bank's IT steering committee", "money": "thousand dollars",
        "projects": ["cloud migration", "data warehouse", "mobile app", "CRM upgrade", "fraud analytics",
                     "core banking API", "chatbot", "identity platform", "payments hub", "BI dashboards"],
        "value_words": "net present value",
    }),
    Scenario("rnd", "pharmaceutical research", {
        "organisation": "The R&D board of a mid-size drug maker", "money": "thousand euros",
        "projects": ["assay platform", "compound A trial", "compound B trial", "biomarker study",
                     "formulation lab", "compound C trial", "AI screening", "pediatric study", "pilot plant",
                     "regulatory dossier"],
        "value_words": "risk-adjusted net present value",
    }),
    Scenario("city", "municipal infrastructure", {
        "organisation": "A city's capital-planning office", "money": "thousand dollars",
        "projects": ["water main renewal", "bridge repair", "bus rapid transit", "bike lanes",
                     "library expansion", "street lighting", "flood barrier", "park renovation",
                     "traffic signals", "sports centre"],
        "value_words": "estimated social benefit (net present value)",
    }),
)


class ProjectSelection(ProblemFamily):
    name = "project_selection"
    title = "Project selection with budget and precedence"
    problem_type = "IP"
    sense = "max"
    scenarios = SCENARIOS
    domains = {"select": "binary"}
    data_fields = {
        "projects": "list of candidate project names",
        "years": "list of budget years",
        "value": "net present value of each project, keyed by project",
        "cost": "cost[project][year]: spending the project needs in that year",
        "budget": "money available in each year, keyed by year",
        "requires": "list of [prerequisite, project] pairs: the project can only be funded if its "
                    "prerequisite is funded too",
        "exclusive": "list of [project, project] pairs of alternatives: at most one of each pair is funded",
    }
    model_code = '''\
model = pyo.ConcreteModel()
projects, years = data["projects"], data["years"]
model.select = pyo.Var(projects, domain=pyo.Binary)

model.obj = pyo.Objective(expr=sum(data["value"][p] * model.select[p] for p in projects), sense=pyo.maximize)

model.budget = pyo.Constraint(years, rule=lambda model, y: sum(
    data["cost"][p][y] * model.select[p] for p in projects) <= data["budget"][y])

# a project can only go ahead with its prerequisite
pairs = [tuple(pair) for pair in data["requires"]]
model.precedence = pyo.Constraint(
    pairs, rule=lambda model, before, after: model.select[after] <= model.select[before]
)

# alternatives: at most one of each pair
alternatives = [tuple(pair) for pair in data["exclusive"]]
model.exclusive = pyo.Constraint(alternatives, rule=lambda model, a, b: model.select[a] + model.select[b] <= 1)

# projects that must go ahead, when the instance has any
mandatory = data.get("mandatory", [])
model.mandatory = pyo.Constraint(mandatory, rule=lambda model, p: model.select[p] == 1)
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_projects = size_for(difficulty, 5, 7, 10)
        n_years = size_for(difficulty, 1, 2, 3)
        projects = words["projects"][:n_projects]
        years = [f"year {k + 1}" for k in range(n_years)]
        cost = {}
        for p in projects:
            total = rng.randint(10, 80) * 10
            # spending is spread over the years, front-loaded
            shares = sorted((rng.uniform(0.2, 1.0) for _ in years), reverse=True)
            cost[p] = {y: int(total * s / sum(shares)) // 5 * 5 for y, s in zip(years, shares, strict=True)}
        value = {p: int(sum(cost[p].values()) * rng.uniform(0.6, 2.2)) // 5 * 5 + 20 for p in projects}
        # each year's budget is exactly what one random half of the portfolio would spend, so the budget
        # is tight for some selections rather than always leaving money over
        reference = rng.sample(projects, n_projects // 2 + rng.randint(0, 1))
        budget = {y: sum(cost[p][y] for p in reference) for y in years}
        # precedence: a later project may need an earlier one; every instance has at least one such rule
        requires = []
        for k in range(1, n_projects):
            if rng.random() < 0.35:
                requires.append([projects[rng.randrange(k)], projects[k]])
        if not requires:
            k = rng.randrange(1, n_projects)
            requires.append([projects[rng.randrange(k)], projects[k]])
        linked = {frozenset(pair) for pair in requires}
        exclusive = []
        if n_projects >= 7:
            for _ in range(n_projects // 5):
                a, b = rng.sample(projects, 2)
                if frozenset((a, b)) not in linked and [a, b] not in exclusive and [b, a] not in exclusive:
                    exclusive.append([a, b])
        data = {"projects": projects, "years": years, "value": value, "cost": cost, "budget": budget,
                "requires": requires, "exclusive": exclusive}
        # trim the first year's budget to what the best portfolio spends in that year: the best portfolio
        # stays feasible and optimal, and the budget binds, so the instance is never decided by the
        # rules alone
        best = self._best_portfolio(data)
        budget[years[0]] = sum(cost[p][years[0]] for p in best)
        return data

    @staticmethod
    def _best_portfolio(data: dict) -> list[str]:
        """The most valuable allowed set of projects, by enumeration (at most 2^10 subsets)."""
        projects = data["projects"]
        best, best_value = [], -1
        for mask in range(1 << len(projects)):
            chosen = {p for k, p in enumerate(projects) if mask >> k & 1}
            if any(sum(data["cost"][p][y] for p in chosen) > data["budget"][y] for y in data["years"]):
                continue
            if any(after in chosen and before not in chosen for before, after in data["requires"]):
                continue
            if any(a in chosen and b in chosen for a, b in data["exclusive"]):
                continue
            value = sum(data["value"][p] for p in chosen)
            if value > best_value:
                best, best_value = [p for p in projects if p in chosen], value
        return best

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # the board declares projects mandatory whose first-year spending exceeds the first-year budget
        first = data["years"][0]
        mandatory, spent = [], 0
        for p in sorted(data["projects"], key=lambda p: -data["cost"][p][first]):
            mandatory.append(p)
            spent += data["cost"][p][first]
            if spent > data["budget"][first]:
                return {**data, "mandatory": mandatory}
        return None

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        column = {p: matrix.add_var(f"select[{p}]", 0, 1, cost=data["value"][p], integer=True)
                  for p in data["projects"]}
        for y in data["years"]:
            matrix.add_row({column[p]: data["cost"][p][y] for p in data["projects"]}, upper=data["budget"][y],
                           name=f"budget[{y}]")
        for before, after in data["requires"]:
            matrix.add_row({column[after]: 1.0, column[before]: -1.0}, upper=0.0,
                           name=f"precedence[{before},{after}]")
        for a, b in data["exclusive"]:
            matrix.add_row({column[a]: 1.0, column[b]: 1.0}, upper=1.0, name=f"exclusive[{a},{b}]")
        for p in data.get("mandatory", []):
            matrix.add_row({column[p]: 1.0}, lower=1.0, upper=1.0, name=f"mandatory[{p}]")

    def constraint_rows(self, data: dict, x: dict):
        select = x["select"]
        for y in data["years"]:
            yield Row(f"budget[{y}]", sum(data["cost"][p][y] * select[p] for p in data["projects"]), "<=",
                      data["budget"][y])
        for before, after in data["requires"]:
            yield Row(f"precedence[{before},{after}]", select[after] - select[before], "<=", 0)
        for a, b in data["exclusive"]:
            yield Row(f"exclusive[{a},{b}]", select[a] + select[b], "<=", 1)
        for p in data.get("mandatory", []):
            yield Row(f"mandatory[{p}]", select[p], "==", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["value"][p] * x["select"][p] for p in data["projects"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        money, years = words["money"], data["years"]
        one_year = len(years) == 1
        intro = (f"{words['organisation']} must decide which of {len(data['projects'])} candidate "
                 f"projects to fund. A project is either funded in full or not at all.")
        rules = []
        for before, after in data["requires"]:
            rules.append(f"{after} can only be funded if {before} is funded too")
        for a, b in data["exclusive"]:
            rules.append(f"{a} and {b} are alternatives, so at most one of them can be funded")
        for p in data.get("mandatory", []):
            rules.append(f"{p} is mandatory (a regulatory commitment)")
        rules_text = ("Further rules: " + "; ".join(rules) + ".") if rules else ""
        question = (f"Which projects should be funded to maximize the total {words['value_words']}, and what is "
                    f"that maximum total, in {money}?")
        if representation == "text":
            lines = []
            for p in data["projects"]:
                spend = (f"costs {fmt(data['cost'][p][years[0]])}" if one_year else
                         "needs " + ", ".join(f"{fmt(data['cost'][p][y])} in {y}" for y in years))
                lines.append(f"The {p} project {spend} and has a value of {fmt(data['value'][p])}.")
            budget = ("The budget is " + fmt(data["budget"][years[0]]) if one_year else
                      "The budgets are " + ", ".join(f"{fmt(data['budget'][y])} in {y}" for y in years))
            return (f"{intro} All amounts are in {money}. {' '.join(lines)} {budget}, and spending in a year may "
                    f"not exceed that year's budget. {rules_text} {question}").replace("  ", " ")
        if representation == "table":
            table = markdown_table(
                ["project", f"value ({money})", *[f"cost in {y} ({money})" for y in years]],
                [[p, data["value"][p], *[data["cost"][p][y] for y in years]] for p in data["projects"]]
                + [["budget", "", *[data["budget"][y] for y in years]]])
            return (f"{intro} Spending in a year may not exceed that year's budget (last row).\n\n{table}\n\n"
                    f"{rules_text}\n\n{question}").replace("\n\n\n\n", "\n\n")
        if representation == "file":
            fields = dict(self.data_fields)
            if "mandatory" in data:
                fields["mandatory"] = "list of projects that must be funded"
            joined = join_names(data["projects"])
            return (f"{intro} The candidates are {joined}.\n\n{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        funded = [p for p in data["projects"] if x["select"][p] > 0.5]
        spend = "; ".join(f"{y}: {fmt(sum(data['cost'][p][y] for p in funded))} of {fmt(data['budget'][y])}"
                          for y in data["years"])
        return (f"Funded: {join_names(funded)} (total value {fmt(sum(data['value'][p] for p in funded))} "
                f"{scenario.words['money']}). Spending against budget: {spend}.")

    def formulation(self, data: dict) -> str:
        mandatory = ""
        if "mandatory" in data:
            mandatory = "& x_p = 1 && \\forall p \\in M \\quad\\text{(mandatory)} \\\\\n"
        return (
            "**Sets**: projects $P$, years $Y$, precedence pairs $E$ ($(i, j)$: $j$ requires $i$), "
            "alternative pairs $X$.\n\n"
            "**Parameters**: value $v_p$, cost $c_{py}$, budget $B_y$.\n\n"
            "**Variables**: $x_p \\in \\{0,1\\}$, project $p$ is funded.\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & \\sum_{p \\in P} v_p x_p \\\\\n"
            "\\text{s.t.}\\ & \\sum_{p \\in P} c_{py} x_p \\le B_y && \\forall y \\in Y \\\\\n"
            "& x_j \\le x_i && \\forall (i, j) \\in E \\\\\n"
            "& x_a + x_b \\le 1 && \\forall (a, b) \\in X \\\\\n" + mandatory +
            "& x_p \\in \\{0,1\\} && \\forall p \\in P\n\\end{aligned}\n$$"
        )


FAMILY = ProjectSelection()
