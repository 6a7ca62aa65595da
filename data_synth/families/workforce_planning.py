"""Workforce planning (IP): choose how many staff to hire and let go at the start of each month so that the
headcount covers every month's required hours, at the least cost of wages, hiring and separations.

Structure variants (drawn per instance, recorded by the keys present): overtime hours per worker at a cost
per hour (`overtime_cost` with `max_overtime_hours`, a continuous variable: a MILP), a limit on separations
per month (`max_releases`), and a minimum headcount every month (`min_staff`, at most today's), each present
or absent, so the program has eight skeletons. None of them can make a feasible instance infeasible."""

from __future__ import annotations

import random

from data_synth.family import (
    INF,
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
    Scenario("call_centre", "customer service", {
        "intro": "A call centre plans its agent headcount for the coming months.",
        "worker": "agent", "money": "dollars", "month_names": ["January", "February", "March", "April", "May",
                                                               "June", "July", "August", "September",
                                                               "October", "November", "December"],
        "hours_range": (120, 160),
    }),
    Scenario("warehouse", "warehouse operations", {
        "intro": "A fulfilment warehouse sets its picker headcount month by month ahead of the peak season.",
        "worker": "picker", "money": "euros", "month_names": ["Jul", "Aug", "Sep", "Oct", "Nov", "Dec", "Jan",
                                                              "Feb", "Mar", "Apr", "May", "Jun"],
        "hours_range": (140, 170),
    }),
    Scenario("clinic", "healthcare staffing", {
        "intro": "A hospital's nursing office decides its nurse headcount for the next months.",
        "worker": "nurse", "money": "dollars", "month_names": ["Month 1", "Month 2", "Month 3", "Month 4",
                                                               "Month 5", "Month 6", "Month 7", "Month 8",
                                                               "Month 9", "Month 10", "Month 11", "Month 12"],
        "hours_range": (130, 150),
    }),
)

# eval only: other industries, workers, currencies and period names than any training scenario
EVAL_SCENARIOS = (
    Scenario("hotel", "hospitality", {
        "intro": "A seaside hotel group sets out its housekeeper headcount for the season ahead.",
        "worker": "housekeeper", "money": "pounds", "month_names": ["Apr 2027", "May 2027", "Jun 2027", "Jul 2027",
                                                                    "Aug 2027", "Sep 2027", "Oct 2027", "Nov 2027",
                                                                    "Dec 2027", "Jan 2028", "Feb 2028", "Mar 2028"],
        "hours_range": (150, 175),
    }),
    Scenario("ground_handling", "airport ground services", {
        "intro": "An airport ground-handling firm settles how many baggage handlers it will employ over the "
                 "months to come.",
        "worker": "baggage handler", "money": "francs", "month_names": ["Period 1", "Period 2", "Period 3",
                                                                        "Period 4", "Period 5", "Period 6",
                                                                        "Period 7", "Period 8", "Period 9",
                                                                        "Period 10", "Period 11", "Period 12"],
        "hours_range": (110, 140),
    }),
    Scenario("bakery", "industrial baking", {
        "intro": "An industrial bakery reviews how many bakers it should keep on its night shifts in the months "
                 "ahead.",
        "worker": "baker", "money": "zloty", "month_names": ["Styczen", "Luty", "Marzec", "Kwiecien", "Maj",
                                                             "Czerwiec", "Lipiec", "Sierpien", "Wrzesien",
                                                             "Pazdziernik", "Listopad", "Grudzien"],
        "hours_range": (125, 155),
    }),
)


class WorkforcePlanning(ProblemFamily):
    name = "workforce_planning"
    title = "Workforce planning"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"staff": "nonnegative_integer", "hire": "nonnegative_integer", "release": "nonnegative_integer"}
    data_fields = {
        "months": "list of month names, in order",
        "initial_staff": "staff employed before the first month",
        "required_hours": "work hours needed in each month, keyed by month",
        "hours_per_worker": "hours one worker provides in a month",
        "wage": "monthly wage of one worker",
        "hire_cost": "cost of hiring one worker",
        "release_cost": "cost of letting one worker go",
        "max_hires": "most workers that can be hired in any one month",
        "overtime_cost": "cost of one overtime hour (only when overtime is allowed)",
        "max_overtime_hours": "most overtime hours one worker can do in a month (only when overtime is allowed)",
        "max_releases": "most workers that can be let go in any one month (only when there is such a limit)",
        "min_staff": "fewest workers that must be on staff in every month (only when there is such a floor)",
    }
    phrasings = (
        Phrasing(r"\bat the start of each month\b", ("at the start of each month", "as each month begins"),
                 ("on the first day of every month", "when a month opens")),
        Phrasing(r"\blet go\b", ("let go", "released"), ("laid off", "dismissed")),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text); rules stop
        # before generic phrases with several training wordings ("at least", "at most", "the lowest",
        # "what is that") and before the family's own rules above
        Phrasing(r"\bIt employs\b", ("It employs",), ("At present it has",)),
        Phrasing(r"(?<=s )today\.", ("today.",), ("on the payroll.",)),
        Phrasing(r"\bStaff can be hired or\b", ("Staff can be hired or",), ("Staff may be taken on or",)),
        Phrasing(r"\bhires in any month\.", ("hires in any month.",), ("hires a month.",)),
        Phrasing(r"(?<=[a-z] )works\b", ("works",), ("puts in",)),
        Phrasing(r"\bhours a month and is paid\b", ("hours a month and is paid",), ("hours in a month and earns",)),
        Phrasing(r"\ba month; hiring one costs\b", ("a month; hiring one costs",), ("monthly; taking one on costs",)),
        Phrasing(r"\band letting one go costs\b", ("and letting one go costs",), ("and laying one off costs",)),
        Phrasing(r"\bEvery month, the\b", ("Every month, the",), ("In each month the",)),
        Phrasing(r"\bon staff must provide (?=at least\b)", ("on staff must provide ",), ("employed have to supply ",)),
        Phrasing(r"\bthe hours required\.", ("the hours required.",), ("the required hours.",)),
        Phrasing(r"\bon staff can also work up to\b", ("on staff can also work up to",),
                 ("employed may additionally do up to",)),
        Phrasing(r"\bovertime hours a month, at\b", ("overtime hours a month, at",),
                 ("hours of overtime monthly, paid at",)),
        Phrasing(r"\bper overtime hour\.", ("per overtime hour.",), ("for every overtime hour.",)),
        Phrasing(r"\bA labour agreement allows (?=at most\b)", ("A labour agreement allows ",),
                 ("Under a union contract there can be ",)),
        Phrasing(r"\bseparations in any month\.", ("separations in any month.",), ("separations a month.",)),
        Phrasing(r"\bA labour agreement limits the separations in any month\.",
                 ("A labour agreement limits the separations in any month.",),
                 ("A union contract caps how many separations a month there can be.",)),
        Phrasing(r"\bmust be on staff in every month\.", ("must be on staff in every month.",),
                 ("have to be employed in each month.",)),
        Phrasing(r"\bshould be hired and (?=let go\b)", ("should be hired and ",), ("ought to be taken on and ",)),
        Phrasing(r"\beach month to cover the work at (?=the lowest\b)", ("each month to cover the work at ",),
                 ("in every month so that the work is covered at ",)),
        Phrasing(r"\bcost of wages, hiring and separations, and (?=what is that\b)",
                 ("cost of wages, hiring and separations, and ",), ("bill for wages, hires and separations, and ",)),
        Phrasing(r"\bHeadcounts are whole numbers\.", ("Headcounts are whole numbers.",),
                 ("Staff numbers have to be integers.",)),
        Phrasing(r", up to a monthly hiring limit\.", (", up to a monthly hiring limit.",),
                 (", within a cap on hires per month.",)),
        Phrasing(r"\bprovides a fixed number of hours a month and earns a monthly wage; hiring and letting go cost a "
                 r"fixed amount per\b",
                 ("provides a fixed number of hours a month and earns a monthly wage; hiring and letting go cost a "
                  "fixed amount per",),
                 ("supplies a set number of monthly hours for a monthly wage; each hire and each separation has a "
                  "set price per",)),
        Phrasing(r"\bon staff can also work a limited number of overtime hours, at a cost per hour\.",
                 ("on staff can also work a limited number of overtime hours, at a cost per hour.",),
                 ("employed may additionally do a capped number of overtime hours, paid by the hour.",)),
        Phrasing(r"\bRequired hours: ", ("Required hours: ",), ("Hours of work needed: ",)),
        Phrasing(r"(?<=\| )required hours\b", ("required hours",), ("hours of work needed",)),
    )
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
months = data["months"]
model.staff = pyo.Var(months, domain=pyo.NonNegativeIntegers)
model.hire = pyo.Var(months, domain=pyo.NonNegativeIntegers, bounds=(0, data["max_hires"]))
'''
    _RELEASE = '''\
model.release = pyo.Var(months, domain=pyo.NonNegativeIntegers)
'''
    _RELEASE_LIMITED = '''\
model.release = pyo.Var(months, domain=pyo.NonNegativeIntegers, bounds=(0, data["max_releases"]))
'''
    _OBJECTIVE = '''\

model.obj = pyo.Objective(
    expr=sum(data["wage"] * model.staff[m] + data["hire_cost"] * model.hire[m] + data["release_cost"] * model.release[m]
             for m in months),
    sense=pyo.minimize,
)
'''
    _OBJECTIVE_OVERTIME = '''\
model.overtime = pyo.Var(months, domain=pyo.NonNegativeReals)  # overtime hours worked in the month

model.obj = pyo.Objective(
    expr=sum(data["wage"] * model.staff[m] + data["hire_cost"] * model.hire[m] + data["release_cost"] * model.release[m]
             + data["overtime_cost"] * model.overtime[m] for m in months),
    sense=pyo.minimize,
)
'''
    _BALANCE = '''\


def balance(model, k):
    # this month's staff: last month's (or the initial headcount), plus hires, minus separations
    before = data["initial_staff"] if k == 0 else model.staff[months[k - 1]]
    return model.staff[months[k]] == before + model.hire[months[k]] - model.release[months[k]]


model.balance = pyo.Constraint(range(len(months)), rule=balance)
'''
    _COVER = '''\
model.cover = pyo.Constraint(
    months, rule=lambda model, m: data["hours_per_worker"] * model.staff[m] >= data["required_hours"][m]
)
'''
    _COVER_OVERTIME = '''\
model.cover = pyo.Constraint(
    months, rule=lambda model, m: data["hours_per_worker"] * model.staff[m] + model.overtime[m]
    >= data["required_hours"][m]
)
# overtime is done by the staff on hand, each up to a monthly limit
model.overtime_limit = pyo.Constraint(
    months, rule=lambda model, m: model.overtime[m] <= data["max_overtime_hours"] * model.staff[m]
)
'''
    _MIN_STAFF = '''\
model.min_staff = pyo.Constraint(months, rule=lambda model, m: model.staff[m] >= data["min_staff"])
'''

    model_code = _HEAD + _RELEASE + _OBJECTIVE + _BALANCE + _COVER  # the base model

    def model_code_for(self, data: dict) -> str:
        overtime = "overtime_cost" in data
        code = self._HEAD + (self._RELEASE_LIMITED if "max_releases" in data else self._RELEASE)
        code += (self._OBJECTIVE_OVERTIME if overtime else self._OBJECTIVE) + self._BALANCE
        code += self._COVER_OVERTIME if overtime else self._COVER
        if "min_staff" in data:
            code += self._MIN_STAFF
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("overtime_cost", "max_releases", "min_staff") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "overtime": "nonnegative"} if "overtime_cost" in data else self.domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "overtime_cost" in data else "IP"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_months = size_for(difficulty, 4, 6, 12)
        months = words["month_names"][:n_months]
        hours_per_worker = rng.randint(*words["hours_range"])
        base = rng.randint(15, 60)
        required = {m: int(hours_per_worker * base * rng.uniform(0.7, 1.5)) for m in months}
        data = {
            "months": months,
            "initial_staff": int(base * rng.uniform(0.8, 1.1)),
            "required_hours": required,
            "hours_per_worker": hours_per_worker,
            "wage": rng.randint(30, 60) * 100,
            "hire_cost": rng.randint(10, 40) * 100,
            "release_cost": rng.randint(5, 30) * 100,
            "max_hires": max(3, int(base * rng.uniform(0.4, 0.8))),
        }
        if rng.random() < 0.5:
            # an overtime hour costs 1.3 to 1.8 times the hourly wage
            data["overtime_cost"] = round(data["wage"] / hours_per_worker * rng.uniform(1.3, 1.8))
            data["max_overtime_hours"] = rng.choice([10, 15, 20, 25, 30])
        if rng.random() < 0.5:
            data["max_releases"] = max(1, int(base * rng.uniform(0.05, 0.2)))
        if rng.random() < 0.5:
            # at most today's headcount, so keeping everyone always meets it
            data["min_staff"] = max(1, round(data["initial_staff"] * rng.uniform(0.85, 1.0)))
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # the first month needs more staff than the initial headcount plus the most hires can give
        data = dict(data)
        first = data["months"][0]
        workers = data["initial_staff"] + data["max_hires"] + rng.randint(2, 6)
        hours = data["hours_per_worker"] + data.get("max_overtime_hours", 0)  # overtime cannot close the gap
        data["required_hours"] = {**data["required_hours"], first: workers * hours}
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        months = data["months"]
        staff = {m: matrix.add_var(f"staff[{m}]", cost=data["wage"], integer=True) for m in months}
        hire = {m: matrix.add_var(f"hire[{m}]", 0.0, data["max_hires"], cost=data["hire_cost"], integer=True)
                for m in months}
        release = {m: matrix.add_var(f"release[{m}]", 0.0, data.get("max_releases", INF), cost=data["release_cost"],
                                     integer=True) for m in months}
        for m in months:
            if "min_staff" in data:
                matrix.col_lower[staff[m]] = float(data["min_staff"])  # the floor as a bound
        overtime = {}
        if "overtime_cost" in data:
            for m in months:
                overtime[m] = matrix.add_var(f"overtime[{m}]", cost=data["overtime_cost"])
                matrix.add_row({overtime[m]: 1.0, staff[m]: -float(data["max_overtime_hours"])}, upper=0.0,
                               name=f"overtime_limit[{m}]")
        for k, m in enumerate(months):
            row = {staff[m]: 1.0, hire[m]: -1.0, release[m]: 1.0}
            if k == 0:
                matrix.add_row(row, data["initial_staff"], data["initial_staff"], name=f"balance[{k}]")
            else:
                row[staff[months[k - 1]]] = -1.0
                matrix.add_row(row, 0.0, 0.0, name=f"balance[{k}]")
            cover = {staff[m]: data["hours_per_worker"]}
            if overtime:
                cover[overtime[m]] = 1.0
            matrix.add_row(cover, lower=data["required_hours"][m], name=f"cover[{m}]")

    def constraint_rows(self, data: dict, x: dict):
        months, staff, hire, release = data["months"], x["staff"], x["hire"], x["release"]
        for k, m in enumerate(months):
            before = data["initial_staff"] if k == 0 else staff[months[k - 1]]
            yield Row(f"balance[{k}]", staff[m] - before - hire[m] + release[m], "==", 0)
            extra = x["overtime"][m] if "overtime_cost" in data else 0.0
            yield Row(f"cover[{m}]", data["hours_per_worker"] * staff[m] + extra, ">=", data["required_hours"][m])
            yield Row(f"max_hires[{m}]", hire[m], "<=", data["max_hires"])
            if "overtime_cost" in data:
                yield Row(f"overtime_limit[{m}]", extra - data["max_overtime_hours"] * staff[m], "<=", 0)
            if "max_releases" in data:
                yield Row(f"max_releases[{m}]", release[m], "<=", data["max_releases"])
            if "min_staff" in data:
                yield Row(f"min_staff[{m}]", staff[m], ">=", data["min_staff"])

    def objective_value(self, data: dict, x: dict) -> float:
        overtime = sum(data["overtime_cost"] * x["overtime"][m] for m in data["months"]) if "overtime_cost" in data else 0
        return overtime + sum(data["wage"] * x["staff"][m] + data["hire_cost"] * x["hire"][m]
                              + data["release_cost"] * x["release"][m] for m in data["months"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        return "\n".join(f"- {m}: {fmt(round(x['staff'][m]))} staff (hire {fmt(round(x['hire'][m]))}, "
                         f"let go {fmt(round(x['release'][m]))})" for m in data["months"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        worker, money, months = words["worker"], words["money"], data["months"]
        intro = (f"{words['intro']} It employs {fmt(data['initial_staff'])} {plural(worker)} today. Staff can be hired or "
                 f"let go at the start of each month, at most {fmt(data['max_hires'])} hires in any month. Each "
                 f"{worker} works {fmt(data['hours_per_worker'])} hours a month and is paid {fmt(data['wage'])} "
                 f"{money} a month; hiring one costs {fmt(data['hire_cost'])} {money} and letting one go costs "
                 f"{fmt(data['release_cost'])} {money}. Every month, the {plural(worker)} on staff must provide at least "
                 "the hours required.")
        rules = []
        if "overtime_cost" in data:
            rules.append(f"Each {worker} on staff can also work up to {fmt(data['max_overtime_hours'])} overtime hours "
                         f"a month, at {fmt(data['overtime_cost'])} {money} per overtime hour.")
        if "max_releases" in data:
            rules.append(f"A labour agreement allows at most {fmt(data['max_releases'])} separations in any month.")
        if "min_staff" in data:
            rules.append(f"At least {fmt(data['min_staff'])} {plural(worker)} must be on staff in every month.")
        if rules:
            intro += " " + " ".join(rules)
        question = (f"How many {plural(worker)} should be hired and let go each month to cover the work at the lowest "
                    "total cost of wages, hiring and separations, and what is that cost? Headcounts are whole "
                    "numbers.")
        if representation == "text":
            hours = "; ".join(f"{m} {fmt(data['required_hours'][m])} hours" for m in months)
            return f"{intro} Required hours: {hours}. {question}"
        if representation == "table":
            table = markdown_table(["month", "required hours"], [[m, data["required_hours"][m]] for m in months])
            return f"{intro}\n\n{table}\n\n{question}"
        if representation == "file":
            rules = (f"{words['intro']} Staff can be hired or let go at the start of each month, up to a monthly "
                     f"hiring limit. Every {worker} provides a fixed number of hours a month and earns a monthly "
                     f"wage; hiring and letting go cost a fixed amount per {worker}. Every month, the {plural(worker)} on "
                     "staff must provide at least the hours required.")
            if "overtime_cost" in data:
                rules += f" Each {worker} on staff can also work a limited number of overtime hours, at a cost per hour."
            if "max_releases" in data:
                rules += " A labour agreement limits the separations in any month."
            if "min_staff" in data:
                rules += f" A minimum number of {plural(worker)} must be on staff in every month."
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{rules}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        overtime = "overtime_cost" in data
        parameters = ("initial staff $s_0$, required hours $r_t$, hours per worker $h$, wage $w$, hiring cost $c^h$, "
                      "separation cost $c^f$, hiring limit $H$")
        variables = "staff $s_t$, hires $a_t$, separations $f_t$, all non-negative integers"
        objective = "\\sum_t (w s_t + c^h a_t + c^f f_t" + (" + c^o o_t" if overtime else "") + ")"
        rows = ["\\text{s.t.}\\ & s_t = s_{t-1} + a_t - f_t && \\forall t"]
        if overtime:
            parameters += ", overtime cost $c^o$ per hour, overtime limit $v$ hours per worker"
            variables += "; overtime hours $o_t \\ge 0$"
            rows += ["& h s_t + o_t \\ge r_t && \\forall t", "& o_t \\le v s_t && \\forall t"]
        else:
            rows.append("& h s_t \\ge r_t && \\forall t")
        if "max_releases" in data:
            parameters += ", separation limit $F$"
            rows.append("& f_t \\le F && \\forall t")
        if "min_staff" in data:
            parameters += ", minimum headcount $m$"
            rows.append("& s_t \\ge m && \\forall t")
        rows.append("& 0 \\le a_t \\le H,\\ s_t, a_t, f_t \\in \\mathbb{Z}_{\\ge 0} && \\forall t")
        return (
            "**Sets**: months $t = 1, \\dots, T$ in order.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = WorkforcePlanning()
