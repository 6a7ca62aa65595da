"""Shift scheduling (IP): decide how many workers start each shift of a 24-hour operation so that every
time block of the day has at least its required staff, at minimum wage cost. Shifts span several
consecutive blocks and wrap around midnight (the same roster repeats every day).

Structure variants (drawn per instance, recorded by the keys present): a headcount limit (`max_staff`), a
limit on the workers starting any one shift (`max_per_shift`), and a minimum crew for every shift that is
used at all (`min_crew`, a binary per shift: a MILP), each present or absent, so the program has eight
skeletons. The limits are drawn around a greedy roster that meets them, so every variant stays feasible."""

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
    plural,
    size_for,
)
from data_synth.statements import Phrasing

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

# eval only: other organisations and workers than any training scenario; their blocks are labelled
# "00:00 to 04:00", so a run of clock times is no run that training also has
EVAL_SCENARIOS = (
    Scenario("parcel_hub", "parcel logistics", {
        "organisation": "an overnight parcel sorting hub", "worker": "sorter", "money": "euros",
        "wage_range": (16, 23), "need": "sorters at the belts",
    }),
    Scenario("checkpoint", "airport security", {
        "organisation": "an airport security checkpoint", "worker": "screener", "money": "pounds",
        "wage_range": (17, 25), "need": "screeners staffing the lanes",
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
    eval_scenarios = EVAL_SCENARIOS
    domains = {"staff": "nonnegative_integer"}
    # the blocks a shift covers are names (kept verbatim): eval joins them with words, so that a listing
    # of clock times is no run of 13 tokens that training also has
    phrasings = (
        Phrasing(r"(?<![\w)\]]), (?![\w(])", (", ",), (", then ",)),
        Phrasing(r"\bshift covers\b", ("shift covers",), ("shift spans",)),
        Phrasing(r"\bruns around the clock and the same roster repeats every day, so shifts that start late in the "
                 r"evening continue past midnight into the next morning's blocks\.",
                 ("runs around the clock and the same roster repeats every day, so shifts that start late in the "
                  "evening continue past midnight into the next morning's blocks.",),
                 ("operates day and night with one daily roster, so a shift beginning late in the evening carries "
                  "on after midnight into the following morning's blocks.",)),
        Phrasing(r"\bThe day is split into\b", ("The day is split into",), ("Each day is cut into",)),
        Phrasing(r"\bblocks, each with a minimum number of\b", ("blocks, each with a minimum number of",),
                 ("blocks, and every block needs at least a set number of",)),
        Phrasing(r"\bBecause of a hiring freeze,", ("Because of a hiring freeze,",), ("With hiring frozen,",)),
        Phrasing(r"\bcan be rostered in total\.", ("can be rostered in total.",),
                 ("may appear on the roster overall.",)),
        Phrasing(r"\bWorkstations are limited:", ("Workstations are limited:",),
                 ("Only so many workstations exist:",)),
        Phrasing(r"\bcan start the same shift\.", ("can start the same shift.",), ("may begin any single shift.",)),
        Phrasing(r"\bA shift that is used at all\b", ("A shift that is used at all",),
                 ("Any shift that is staffed",)),
        Phrasing(r"; a shift may also stay empty\.", ("; a shift may also stay empty.",),
                 ("; leaving a shift unstaffed is allowed too.",)),
        Phrasing(r"\bshould start each shift so that every block is covered, at minimum total daily wage cost\?",
                 ("should start each shift so that every block is covered, at minimum total daily wage cost?",),
                 ("are to begin each shift so that all blocks are staffed at the lowest total daily wage bill?",)),
    )
    data_fields = {
        "blocks": "list of the time blocks of the day, in order",
        "required": "minimum number of workers on duty in each block, keyed by block",
        "shifts": "list of shift names",
        "covers": "covers[shift]: list of the blocks a worker on that shift is on duty",
        "cost": "wage cost of one worker on each shift for one day, keyed by shift",
        "max_staff": "most workers that can be rostered in total (only when there is a headcount limit)",
        "max_per_shift": "most workers that can start any one shift (only when there is such a limit)",
        "min_crew": "fewest workers a shift can have if it is used at all (only when there is a minimum crew)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
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
'''
    _HEADCOUNT = '''\
model.headcount = pyo.Constraint(expr=sum(model.staff[s] for s in data["shifts"]) <= data["max_staff"])
'''
    _PER_SHIFT = '''\
model.per_shift = pyo.Constraint(data["shifts"], rule=lambda model, s: model.staff[s] <= data["max_per_shift"])
'''
    _MIN_CREW = '''\

# a shift is used or not; a used shift has at least the minimum crew, and never more workers than the
# busiest block needs (more could not lower the cost)
model.used = pyo.Var(data["shifts"], domain=pyo.Binary)
busiest = max(data["required"].values())
model.crew_min = pyo.Constraint(data["shifts"], rule=lambda model, s: model.staff[s] >= data["min_crew"] * model.used[s])
model.crew_max = pyo.Constraint(data["shifts"], rule=lambda model, s: model.staff[s] <= busiest * model.used[s])
'''

    model_code = _HEAD  # the base cover model (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD
        for key, piece in (("max_staff", self._HEADCOUNT), ("max_per_shift", self._PER_SHIFT),
                           ("min_crew", self._MIN_CREW)):
            if key in data:
                code += piece
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("max_staff", "max_per_shift", "min_crew") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "used": "binary"} if "min_crew" in data else self.domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "min_crew" in data else "IP"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        block_hours = size_for(difficulty, 4, 3, 2)
        n_blocks = 24 // block_hours
        dash = " to " if scenario in self.eval_scenarios else "-"
        blocks = [f"{_clock(k * block_hours)}{dash}{_clock((k + 1) * block_hours)}" for k in range(n_blocks)]
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
        data = {"blocks": blocks, "required": required, "shifts": shifts, "covers": covers, "cost": cost}
        chosen = [key for key in ("max_staff", "max_per_shift", "min_crew") if rng.random() < 0.5]
        if chosen:
            roster = greedy_roster(data)
            if "min_crew" in chosen:
                data["min_crew"] = min(rng.randint(2, 4), max(required.values()))
                roster = {s: max(n, data["min_crew"]) if n > 0 else 0 for s, n in roster.items()}
            if "max_staff" in chosen:
                data["max_staff"] = sum(roster.values())
            if "max_per_shift" in chosen:
                data["max_per_shift"] = max(roster.values())
        return data

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
        if "max_per_shift" in data:
            for s in data["shifts"]:
                matrix.col_upper[column[s]] = float(data["max_per_shift"])  # a bound, not a row
        if "min_crew" in data:
            busiest = max(data["required"].values())
            for s in data["shifts"]:
                used = matrix.add_var(f"used[{s}]", 0, 1, integer=True)
                matrix.add_row({column[s]: 1.0, used: -float(data["min_crew"])}, lower=0.0, name=f"crew_min[{s}]")
                matrix.add_row({column[s]: 1.0, used: -float(busiest)}, upper=0.0, name=f"crew_max[{s}]")

    def constraint_rows(self, data: dict, x: dict):
        staff = x["staff"]
        for block in data["blocks"]:
            on_duty = sum(staff[s] for s in data["shifts"] if block in data["covers"][s])
            yield Row(f"cover[{block}]", on_duty, ">=", data["required"][block])
        if "max_staff" in data:
            yield Row("headcount", sum(staff[s] for s in data["shifts"]), "<=", data["max_staff"])
        for s in data["shifts"] if "max_per_shift" in data else ():
            yield Row(f"per_shift[{s}]", staff[s], "<=", data["max_per_shift"])
        if "min_crew" in data:
            busiest = max(data["required"].values())
            for s in data["shifts"]:
                yield Row(f"crew_min[{s}]", staff[s] - data["min_crew"] * x["used"][s], ">=", 0)
                yield Row(f"crew_max[{s}]", staff[s] - busiest * x["used"][s], "<=", 0)

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
            limit = f" Because of a hiring freeze, at most {fmt(data['max_staff'])} {plural(worker)} can be rostered in total."
        if "max_per_shift" in data:
            limit += (f" Workstations are limited: no more than {fmt(data['max_per_shift'])} {plural(worker)} can start the "
                      "same shift.")
        if "min_crew" in data:
            limit += (f" A shift that is used at all needs a crew of at least {fmt(data['min_crew'])} {plural(worker)}; a "
                      "shift may also stay empty.")
        question = (f"How many {plural(worker)} should start each shift so that every block is covered, at minimum total "
                    f"daily wage cost? What is that minimum cost in {money} per day?")
        if representation == "text":
            need = ", ".join(f"{fmt(data['required'][b])} during {b}" for b in data["blocks"])
            shifts = " ".join(f"The {s} shift covers {join_names(data['covers'][s])} and costs "
                              f"{fmt(data['cost'][s])} {money} per {worker}." for s in data["shifts"])
            return f"{intro} Minimum {plural(worker)} needed: {need}. {shifts}{limit} {question}"
        if representation == "table":
            need = markdown_table(["block", f"{plural(worker)} needed"], [[b, data["required"][b]] for b in data["blocks"]])
            shifts = markdown_table(["shift", "blocks covered", f"cost per {worker} ({money})"],
                                    [[s, ", ".join(data["covers"][s]), data["cost"][s]] for s in data["shifts"]])
            return f"{intro}{limit}\n\n{need}\n\n{shifts}\n\n{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro}{limit}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        worker = scenario.words["worker"]
        staffed = [(s, round(x["staff"][s])) for s in data["shifts"] if x["staff"][s] > 0.5]
        lines = [f"- shift {s}: {n} {worker}{'s' if n != 1 else ''}" for s, n in staffed]
        on_duty = [f"{b}: {sum(n for s, n in staffed if b in data['covers'][s])} "
                   f"(needs {fmt(data['required'][b])})" for b in data["blocks"]]
        return "\n".join(lines) + "\n\nOn duty per block: " + "; ".join(on_duty) + "."

    def formulation(self, data: dict) -> str:
        parameters = "required staff $r_t$, cost per worker $c_s$"
        variables = "$x_s \\in \\mathbb{Z}_{\\ge 0}$, workers on shift $s$"
        rows = ["\\text{s.t.}\\ & \\sum_{s \\in S_t} x_s \\ge r_t && \\forall t \\in T"]
        if "max_staff" in data:
            parameters += ", headcount limit $H$"
            rows.append("& \\sum_{s \\in S} x_s \\le H \\quad\\text{(headcount limit)}")
        if "max_per_shift" in data:
            parameters += ", per-shift limit $U$"
            rows.append("& x_s \\le U && \\forall s \\in S")
        if "min_crew" in data:
            parameters += ", minimum crew $m$ ($\\bar r = \\max_t r_t$)"
            variables += "; $y_s \\in \\{0,1\\}$, shift $s$ is used"
            rows.append("& m y_s \\le x_s \\le \\bar r y_s && \\forall s \\in S")
        rows.append("& x_s \\in \\mathbb{Z}_{\\ge 0} && \\forall s \\in S")
        return (
            "**Sets**: blocks $T$, shifts $S$; $S_t \\subseteq S$ are the shifts on duty in block $t$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{s \\in S} c_s x_s \\\\\n" + " \\\\\n".join(rows)
            + "\n\\end{aligned}\n$$"
        )


def greedy_roster(data: dict) -> dict[str, int]:
    """A feasible roster: walk the blocks in order and start the missing workers on a shift that begins
    in the block (every block has a full shift starting in it)."""
    roster = {s: 0 for s in data["shifts"]}
    for block in data["blocks"]:
        on_duty = sum(n for s, n in roster.items() if block in data["covers"][s])
        missing = data["required"][block] - on_duty
        if missing > 0:
            start = next(s for s in data["shifts"] if data["covers"][s][0] == block)
            roster[start] += missing
    return roster


FAMILY = ShiftScheduling()
