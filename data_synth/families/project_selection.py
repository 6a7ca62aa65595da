"""Project selection (binary IP): choose which projects to fund to maximize total net present value
within yearly budgets, where some projects need another project first (precedence) and some pairs
may be alternatives to each other (at most one of the two).

Structure variants (drawn per instance, recorded by the keys present): pairs of alternatives
(`exclusive`), pairs that earn a bonus when both are funded (`synergy`, a linearized product: one binary
per pair that can be 1 only when both projects are), and a limit on how many projects are funded
(`max_projects`), each present or absent, so the program has eight skeletons."""

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

# the eval split's own industries, organisations, project names and money units (held out from training)
EVAL_SCENARIOS = (
    Scenario("airline", "commercial aviation", {
        "organisation": "An airline's investment review panel", "money": "thousand pounds",
        "projects": ["cabin refit", "crew rostering app", "lounge upgrade", "engine wash rig", "baggage tracking",
                     "fuel analytics", "hangar doors", "simulator bay", "catering contract", "loyalty revamp"],
        "value_words": "discounted operating benefit",
    }),
    Scenario("university", "higher education", {
        "organisation": "A university's campus investment panel", "money": "thousand Norwegian kroner",
        "projects": ["lecture hall refit", "student housing", "robotics lab", "campus wifi", "solar roofs",
                     "library archive", "sports field", "biology greenhouse", "exam hall seating", "alumni portal"],
        "value_words": "present value of expected benefits",
    }),
)


class ProjectSelection(ProblemFamily):
    name = "project_selection"
    title = "Project selection with budget and precedence"
    problem_type = "IP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    # eval-only rewordings of the family's fixed sentences (training keeps its text); the generic rules with
    # two training wordings ("at most", "may not exceed", "needs", "what is that") are left to themselves
    phrasings = (
        Phrasing(r"\bmust decide which of\b", ("must decide which of",), ("has to choose which of the",)),
        Phrasing(r"\bcandidate projects to fund\.", ("candidate projects to fund.",),
                 ("proposed projects will go ahead.",)),
        Phrasing(r"\bA project is either funded in full or not at all\.",
                 ("A project is either funded in full or not at all.",),
                 ("Partial funding is not possible: each project is taken whole or dropped.",)),
        Phrasing(r"\bcan only be funded if\b", ("can only be funded if",), ("is fundable only when",)),
        Phrasing(r"\bis funded too\b", ("is funded too",), ("is funded as well",)),
        Phrasing(r"\bare alternatives, so\b", ("are alternatives, so",), ("exclude each other, so",)),
        Phrasing(r"\bone of them can be funded\b", ("one of them can be funded",), ("one of the two gets funding",)),
        Phrasing(r"\bfunding both\b", ("funding both",), ("choosing both",)),
        Phrasing(r"\badds a synergy bonus of\b", ("adds a synergy bonus of",), ("earns an extra synergy of",)),
        Phrasing(r"\bto the total value\b", ("to the total value",), ("on top of the projects' own value",)),
        Phrasing(r"\bThe project office can run only a limited number of projects\.",
                 ("The project office can run only a limited number of projects.",),
                 ("The delivery team can handle only so many projects.",)),
        Phrasing(r"\bthe project office can run\b", ("the project office can run",),
                 ("the delivery team can handle",)),
        Phrasing(r"\bis mandatory \(a regulatory commitment\)", ("is mandatory (a regulatory commitment)",),
                 ("has to be funded (a regulatory obligation)",)),
        Phrasing(r"\bFurther rules:", ("Further rules:",), ("Additional conditions:",)),
        Phrasing(r"\bWhich projects should be funded to maximize the total\b",
                 ("Which projects should be funded to maximize the total",),
                 ("Which portfolio of projects yields the greatest possible overall",)),
        Phrasing(r"\bmaximum total, in\b", ("maximum total, in",), ("best total, expressed in",)),
        Phrasing(r"\bAll amounts are in\b", ("All amounts are in",), ("Every amount is given in",)),
        Phrasing(r"\bproject costs\b(?= \d)", ("project costs",), ("project would cost",)),
        Phrasing(r"\band has a value of\b", ("and has a value of",), ("and is worth",)),
        Phrasing(r"\bThe budget is\b", ("The budget is",), ("The budget comes to",)),
        Phrasing(r"\bThe budgets are\b", ("The budgets are",), ("The budgets come to",)),
        Phrasing(r"\bspending in a year\b", ("spending in a year",), ("what is spent in any year",)),
        Phrasing(r"\bthat year's budget\b", ("that year's budget",), ("the budget of that year",)),
        Phrasing(r"\(last row\)", ("(last row)",), ("(see the bottom row)",)),
        Phrasing(r"(?<=\| )project(?= \|)", ("project",), ("proposal",)),
        Phrasing(r"(?<=\| )budget(?= \|)", ("budget",), ("available funds",)),
        Phrasing(r"\bvalue\b(?= \()", ("value",), ("worth",)),
        Phrasing(r"(?<=\| )cost in\b", ("cost in",), ("spend in",)),  # a header cell (the year is a name)
        Phrasing(r"\bThe candidates are\b", ("The candidates are",), ("The options on the table are",)),
        Phrasing(r"\bSome pairs of projects earn a synergy bonus when both are funded\.",
                 ("Some pairs of projects earn a synergy bonus when both are funded.",),
                 ("Certain project pairs bring an extra synergy value when funded together.",)),
        Phrasing(r"\blist of candidate project names\b", ("list of candidate project names",),
                 ("names of the proposed projects",)),
        Phrasing(r"\blist of budget years\b", ("list of budget years",), ("names of the budget years",)),
        Phrasing(r"\bnet present value of each project\b", ("net present value of each project",),
                 ("present value that every project brings",)),
        Phrasing(r"\bspending the project\b(?= needs\b)", ("spending the project",), ("money the project",)),
        Phrasing(r"\bmoney available in each year\b", ("money available in each year",),
                 ("funds on hand in every year",)),
        Phrasing(r"\blist of \[prerequisite, project\] pairs:", ("list of [prerequisite, project] pairs:",),
                 ("[prerequisite, project] pairs, where",)),
        Phrasing(r"\blist of \[project, project\] pairs of alternatives:",
                 ("list of [project, project] pairs of alternatives:",),
                 ("[project, project] pairs that exclude each other:",)),
        Phrasing(r"\bone of each pair is funded\b", ("one of each pair is funded",), ("one per pair receives funding",)),
        Phrasing(r"\blist of \[project, project, bonus\]: extra value earned when both projects are funded\b",
                 ("list of [project, project, bonus]: extra value earned when both projects are funded",),
                 ("[project, project, bonus] triples: additional value gained if both projects receive funding",)),
        Phrasing(r"\bmost projects that can be funded\b", ("most projects that can be funded",),
                 ("largest number of projects that may be funded",)),
        Phrasing(r"\blist of projects that must be funded\b", ("list of projects that must be funded",),
                 ("projects that have to be funded",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(present only if",)),
    )
    domains = {"select": "binary"}
    data_fields = {
        "projects": "list of candidate project names",
        "years": "list of budget years",
        "value": "net present value of each project, keyed by project",
        "cost": "cost[project][year]: spending the project needs in that year",
        "budget": "money available in each year, keyed by year",
        "requires": "list of [prerequisite, project] pairs: the project can only be funded if its "
                    "prerequisite is funded too",
        "exclusive": "list of [project, project] pairs of alternatives: at most one of each pair is funded "
                     "(only when there are alternatives)",
        "synergy": "list of [project, project, bonus]: extra value earned when both projects are funded (only "
                   "when there are synergies)",
        "max_projects": "most projects that can be funded (only when there is such a limit)",
        "mandatory": "list of projects that must be funded (only when some are mandatory)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
projects, years = data["projects"], data["years"]
model.select = pyo.Var(projects, domain=pyo.Binary)
'''
    _OBJECTIVE = '''\

model.obj = pyo.Objective(expr=sum(data["value"][p] * model.select[p] for p in projects), sense=pyo.maximize)
'''
    _SYNERGY = '''\
# a synergy's bonus is earned only when both of its projects are funded: both[k] <= each of the two
model.K = pyo.RangeSet(0, len(data["synergy"]) - 1)
model.both = pyo.Var(model.K, domain=pyo.Binary)

model.obj = pyo.Objective(
    expr=sum(data["value"][p] * model.select[p] for p in projects)
    + sum(data["synergy"][k][2] * model.both[k] for k in model.K),
    sense=pyo.maximize,
)
model.both_first = pyo.Constraint(model.K, rule=lambda model, k: model.both[k] <= model.select[data["synergy"][k][0]])
model.both_second = pyo.Constraint(model.K, rule=lambda model, k: model.both[k] <= model.select[data["synergy"][k][1]])
'''
    _BUDGET = '''\

model.budget = pyo.Constraint(years, rule=lambda model, y: sum(
    data["cost"][p][y] * model.select[p] for p in projects) <= data["budget"][y])

# a project can only go ahead with its prerequisite
pairs = [tuple(pair) for pair in data["requires"]]
model.precedence = pyo.Constraint(
    pairs, rule=lambda model, before, after: model.select[after] <= model.select[before]
)
'''
    _EXCLUSIVE = '''\

# alternatives: at most one of each pair
alternatives = [tuple(pair) for pair in data["exclusive"]]
model.exclusive = pyo.Constraint(alternatives, rule=lambda model, a, b: model.select[a] + model.select[b] <= 1)
'''
    _MAX_PROJECTS = '''\
model.max_projects = pyo.Constraint(expr=sum(model.select[p] for p in projects) <= data["max_projects"])
'''
    _MANDATORY = '''\
model.mandatory = pyo.Constraint(data["mandatory"], rule=lambda model, p: model.select[p] == 1)
'''

    model_code = _HEAD + _OBJECTIVE + _BUDGET + _EXCLUSIVE  # budgets, precedence and alternatives

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._SYNERGY if "synergy" in data else self._OBJECTIVE) + self._BUDGET
        for key, piece in (("exclusive", self._EXCLUSIVE), ("max_projects", self._MAX_PROJECTS),
                           ("mandatory", self._MANDATORY)):
            if key in data:
                code += piece
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("exclusive", "synergy", "max_projects") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "both": "binary"} if "synergy" in data else self.domains

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
        data = {"projects": projects, "years": years, "value": value, "cost": cost, "budget": budget,
                "requires": requires}
        if rng.random() < 0.5:
            exclusive = []
            for _ in range(max(1, n_projects // 5)):
                a, b = rng.sample(projects, 2)
                if frozenset((a, b)) not in linked and [a, b] not in exclusive and [b, a] not in exclusive:
                    exclusive.append([a, b])
                    linked.add(frozenset((a, b)))
            if exclusive:
                data["exclusive"] = exclusive
        if rng.random() < 0.5:
            synergy = []
            for _ in range(max(1, n_projects // 4)):
                a, b = rng.sample(projects, 2)
                if frozenset((a, b)) not in linked:
                    bonus = int(min(value[a], value[b]) * rng.uniform(0.2, 0.6)) // 5 * 5 + 5
                    synergy.append([a, b, bonus])
                    linked.add(frozenset((a, b)))
            if synergy:
                data["synergy"] = synergy
        if rng.random() < 0.5:
            # one fewer than the best portfolio funds (when it funds more than one), so the limit matters
            data["max_projects"] = max(1, len(self._best_portfolio(data)) - 1)
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
            if any(a in chosen and b in chosen for a, b in data.get("exclusive", ())):
                continue
            if len(chosen) > data.get("max_projects", len(projects)):
                continue
            value = sum(data["value"][p] for p in chosen)
            value += sum(bonus for a, b, bonus in data.get("synergy", ()) if a in chosen and b in chosen)
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
        for a, b in data.get("exclusive", ()):
            matrix.add_row({column[a]: 1.0, column[b]: 1.0}, upper=1.0, name=f"exclusive[{a},{b}]")
        for k, (a, b, bonus) in enumerate(data.get("synergy", ())):
            both = matrix.add_var(f"both[{k}]", 0, 1, cost=bonus, integer=True)
            matrix.add_row({both: 1.0, column[a]: -1.0}, upper=0.0, name=f"both_first[{k}]")
            matrix.add_row({both: 1.0, column[b]: -1.0}, upper=0.0, name=f"both_second[{k}]")
        if "max_projects" in data:
            matrix.add_row({column[p]: 1.0 for p in data["projects"]}, upper=data["max_projects"], name="max_projects")
        for p in data.get("mandatory", []):
            matrix.add_row({column[p]: 1.0}, lower=1.0, upper=1.0, name=f"mandatory[{p}]")

    def constraint_rows(self, data: dict, x: dict):
        select = x["select"]
        for y in data["years"]:
            yield Row(f"budget[{y}]", sum(data["cost"][p][y] * select[p] for p in data["projects"]), "<=",
                      data["budget"][y])
        for before, after in data["requires"]:
            yield Row(f"precedence[{before},{after}]", select[after] - select[before], "<=", 0)
        for a, b in data.get("exclusive", ()):
            yield Row(f"exclusive[{a},{b}]", select[a] + select[b], "<=", 1)
        for k, (a, b, _) in enumerate(data.get("synergy", ())):
            yield Row(f"both_first[{k}]", x["both"][k] - select[a], "<=", 0)
            yield Row(f"both_second[{k}]", x["both"][k] - select[b], "<=", 0)
        if "max_projects" in data:
            yield Row("max_projects", sum(select[p] for p in data["projects"]), "<=", data["max_projects"])
        for p in data.get("mandatory", []):
            yield Row(f"mandatory[{p}]", select[p], "==", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        bonus = sum(pair[2] * x["both"][k] for k, pair in enumerate(data.get("synergy", ())))
        return bonus + sum(data["value"][p] * x["select"][p] for p in data["projects"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        money, years = words["money"], data["years"]
        one_year = len(years) == 1
        intro = (f"{words['organisation']} must decide which of {len(data['projects'])} candidate "
                 f"projects to fund. A project is either funded in full or not at all.")
        rules = []
        for before, after in data["requires"]:
            rules.append(f"{after} can only be funded if {before} is funded too")
        for a, b in data.get("exclusive", ()):
            rules.append(f"{a} and {b} are alternatives, so at most one of them can be funded")
        for a, b, bonus in data.get("synergy", ()):
            rules.append(f"funding both {a} and {b} adds a synergy bonus of {fmt(bonus)} to the total value")
        if "max_projects" in data:
            rules.append(f"the project office can run at most {fmt(data['max_projects'])} projects")
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
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            joined = join_names(data["projects"])
            notes = ""
            if "synergy" in data:
                notes += " Some pairs of projects earn a synergy bonus when both are funded."
            if "max_projects" in data:
                notes += " The project office can run only a limited number of projects."
            return (f"{intro} The candidates are {joined}.{notes}\n\n{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        funded = [p for p in data["projects"] if x["select"][p] > 0.5]
        spend = "; ".join(f"{y}: {fmt(sum(data['cost'][p][y] for p in funded))} of {fmt(data['budget'][y])}"
                          for y in data["years"])
        return (f"Funded: {join_names(funded)} (total value {fmt(sum(data['value'][p] for p in funded))} "
                f"{scenario.words['money']}). Spending against budget: {spend}.")

    def formulation(self, data: dict) -> str:
        sets = "projects $P$, years $Y$, precedence pairs $E$ ($(i, j)$: $j$ requires $i$)"
        parameters = "value $v_p$, cost $c_{py}$, budget $B_y$"
        variables = "$x_p \\in \\{0,1\\}$, project $p$ is funded"
        objective = "\\sum_{p \\in P} v_p x_p"
        rows = ["\\text{s.t.}\\ & \\sum_{p \\in P} c_{py} x_p \\le B_y && \\forall y \\in Y",
                "& x_j \\le x_i && \\forall (i, j) \\in E"]
        if "exclusive" in data:
            sets += ", alternative pairs $X$"
            rows.append("& x_a + x_b \\le 1 && \\forall (a, b) \\in X")
        if "synergy" in data:
            sets += ", synergy pairs $K$ (pair $k = (a_k, b_k)$)"
            parameters += ", synergy bonus $g_k$"
            variables += "; $z_k \\in \\{0,1\\}$, both projects of synergy $k$ are funded"
            objective += " + \\sum_{k \\in K} g_k z_k"
            rows.append("& z_k \\le x_{a_k},\\ z_k \\le x_{b_k} && \\forall k \\in K")
        if "max_projects" in data:
            parameters += ", project limit $N$"
            rows.append("& \\sum_{p \\in P} x_p \\le N")
        if "mandatory" in data:
            sets += ", mandatory projects $M$"
            rows.append("& x_p = 1 && \\forall p \\in M \\quad\\text{(mandatory)}")
        rows.append("& x_p \\in \\{0,1\\} && \\forall p \\in P")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\max\\ & {objective} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = ProjectSelection()
