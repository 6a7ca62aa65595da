"""Shift scheduling (IP): decide how many workers start each shift of a 24-hour operation so that every
time block of the day has at least its required staff, at minimum wage cost. Shifts span several
consecutive blocks and wrap around midnight (the same roster repeats every day)."""

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
    Scenario("callcentre", "customer service", {
        "organisation": "a 24-hour customer-support call centre", "worker": "agent", "money": "dollars",
        "wage_range": (18, 26), "need": "agents on the phones",
    }),
    Scenario("hospital", "healthcare", {
        "organisation": "a hospital emergency department", "worker": "nurse", "money": "dollars",
        "wage_range": (38, 52), "need": "nurses on duty",
    }),
    Scenario("transit", "public transport", {
        "organisation": "a metropolitan bus operator", "worker": "driver", "money": "euros",
        "wage_range": (22, 30), "need": "drivers at the wheel",
    }),
)

# the shape of demand over a day: quiet at night, peaks late morning and early evening
DAY_PROFILE = [0.35, 0.3, 0.3, 0.45, 0.75, 0.95, 1.0, 0.9, 0.85, 0.95, 1.0, 0.8, 0.55]


def _clock(hour: int) -> str:
    return f"{hour:02d}:00"


class ShiftScheduling(ProblemFamily):
    name = "shift_scheduling"
    title = "Shift scheduling"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"staff": "nonnegative_integer"}
    data_fields = {
        "blocks": "list of the time blocks of the day, in order",
        "required": "minimum number of workers on duty in each block, keyed by block",
        "shifts": "list of shift names",
        "covers": "covers[shift]: list of the blocks a worker on that shift is on duty",
        "cost": "wage cost of one worker on each shift for one day, keyed by shift",
    }
    model_code = '''\
model = pyo.ConcreteModel()
model.staff = pyo.Var(data["shifts"], domain=pyo.NonNegativeIntegers)  # workers starting each shift

model.obj = pyo.Objective(
    expr=sum(data["cost"][s] * model.staff[s] for s in data["shifts"]), sense=pyo.minimize
)

# every block of the day has enough workers on duty
def cover(model, block):
    on_duty = [s for s in data["shifts"] if block in data["covers"][s]]
    return sum(model.staff[s] for s in on_duty) >= data["required"][block]

model.cover = pyo.Constraint(data["blocks"], rule=cover)

# a headcount limit, when the instance has one
if "max_staff" in data:
    model.headcount = pyo.Constraint(expr=sum(model.staff[s] for s in data["shifts"]) <= data["max_staff"])
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        block_hours = size_for(difficulty, 4, 3, 2)
        n_blocks = 24 // block_hours
        blocks = [f"{_clock(k * block_hours)}-{_clock((k + 1) * block_hours)}" for k in range(n_blocks)]
        peak = rng.randint(6, 30) if scenario.key != "hospital" else rng.randint(6, 16)
        required = {}
        for k, block in enumerate(blocks):
            middle_hour = k * block_hours + block_hours / 2
            shape = DAY_PROFILE[min(12, round(middle_hour / 2))]
            required[block] = max(1, round(peak * shape * rng.uniform(0.85, 1.15)))
        wage = rng.randint(*words["wage_range"])
        night_premium = rng.choice([1.15, 1.2, 1.25, 1.3])

        def hourly(start_hour: int, hours: int) -> float:
            # hours between 22:00 and 06:00 are paid at the night rate
            night = sum(1 for h in range(start_hour, start_hour + hours) if h % 24 >= 22 or h % 24 < 6)
            return wage * (hours - night) + wage * night_premium * night

        full_blocks = 8 // block_hours + (1 if block_hours == 3 else 0)  # 8-hour shifts, 9 with 3-hour blocks
        shifts, covers, cost = [], {}, {}
        for k in range(n_blocks):
            name = f"{_clock(k * block_hours)} ({full_blocks * block_hours} h)"
            shifts.append(name)
            covers[name] = [blocks[(k + j) % n_blocks] for j in range(full_blocks)]
            cost[name] = round(hourly(k * block_hours, full_blocks * block_hours))
        if difficulty == "large":
            # 4-hour part-time shifts, paid a little more per hour, starting every other block
            for k in range(0, n_blocks, 2):
                name = f"{_clock(k * block_hours)} ({2 * block_hours} h part-time)"
                shifts.append(name)
                covers[name] = [blocks[(k + j) % n_blocks] for j in range(2)]
                cost[name] = round(hourly(k * block_hours, 2 * block_hours) * 1.1)
        return {"blocks": blocks, "required": required, "shifts": shifts, "covers": covers, "cost": cost}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a hiring freeze caps the headcount below the busiest block's requirement
        return {**data, "max_staff": max(data["required"].values()) - 1}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        column = {s: matrix.add_var(f"staff[{s}]", cost=data["cost"][s], integer=True) for s in data["shifts"]}
        for block in data["blocks"]:
            matrix.add_row({column[s]: 1.0 for s in data["shifts"] if block in data["covers"][s]},
                           lower=data["required"][block], name=f"cover[{block}]")
        if "max_staff" in data:
            matrix.add_row({c: 1.0 for c in column.values()}, upper=data["max_staff"], name="headcount")

    def constraint_rows(self, data: dict, x: dict):
        staff = x["staff"]
        for block in data["blocks"]:
            on_duty = sum(staff[s] for s in data["shifts"] if block in data["covers"][s])
            yield Row(f"cover[{block}]", on_duty, ">=", data["required"][block])
        if "max_staff" in data:
            yield Row("headcount", sum(staff[s] for s in data["shifts"]), "<=", data["max_staff"])

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["cost"][s] * x["staff"][s] for s in data["shifts"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        worker, money = words["worker"], words["money"]
        intro = (f"{words['organisation'].capitalize()} runs around the clock and the same roster repeats every "
                 f"day, so shifts that start late in the evening continue past midnight into the next "
                 f"morning's blocks. The day is split into {len(data['blocks'])} blocks, each with a minimum "
                 f"number of {words['need']}.")
        limit = ""
        if "max_staff" in data:
            limit = f" Because of a hiring freeze, at most {fmt(data['max_staff'])} {worker}s can be rostered in total."
        question = (f"How many {worker}s should start each shift so that every block is covered, at minimum total "
                    f"daily wage cost? What is that minimum cost in {money} per day?")
        if representation == "text":
            need = ", ".join(f"{fmt(data['required'][b])} during {b}" for b in data["blocks"])
            shifts = " ".join(f"The {s} shift covers {join_names(data['covers'][s])} and costs "
                              f"{fmt(data['cost'][s])} {money} per {worker}." for s in data["shifts"])
            return f"{intro} Minimum {worker}s needed: {need}. {shifts}{limit} {question}"
        if representation == "table":
            need = markdown_table(["block", f"{worker}s needed"], [[b, data["required"][b]] for b in data["blocks"]])
            shifts = markdown_table(["shift", "blocks covered", f"cost per {worker} ({money})"],
                                    [[s, ", ".join(data["covers"][s]), data["cost"][s]] for s in data["shifts"]])
            return f"{intro}{limit}\n\n{need}\n\n{shifts}\n\n{question}"
        if representation == "file":
            fields = dict(self.data_fields)
            if "max_staff" in data:
                fields["max_staff"] = f"most {worker}s that can be rostered in total"
            return f"{intro}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        worker = scenario.words["worker"]
        staffed = [(s, round(x["staff"][s])) for s in data["shifts"] if x["staff"][s] > 0.5]
        lines = [f"- shift {s}: {n} {worker}{'s' if n != 1 else ''}" for s, n in staffed]
        on_duty = [f"{b}: {sum(n for s, n in staffed if b in data['covers'][s])} "
                   f"(needs {fmt(data['required'][b])})" for b in data["blocks"]]
        return "\n".join(lines) + "\n\nOn duty per block: " + "; ".join(on_duty) + "."

    def formulation(self, data: dict) -> str:
        headcount = ""
        if "max_staff" in data:
            headcount = "& \\sum_{s \\in S} x_s \\le H \\quad\\text{(headcount limit)} \\\\\n"
        return (
            "**Sets**: blocks $T$, shifts $S$; $S_t \\subseteq S$ are the shifts on duty in block $t$.\n\n"
            "**Parameters**: required staff $r_t$, cost per worker $c_s$"
            + (", headcount limit $H$" if headcount else "") + ".\n\n"
            "**Variables**: $x_s \\in \\mathbb{Z}_{\\ge 0}$, workers on shift $s$.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{s \\in S} c_s x_s \\\\\n"
            "\\text{s.t.}\\ & \\sum_{s \\in S_t} x_s \\ge r_t && \\forall t \\in T \\\\\n" + headcount +
            "& x_s \\in \\mathbb{Z}_{\\ge 0} && \\forall s \\in S\n\\end{aligned}\n$$"
        )


FAMILY = ShiftScheduling()
