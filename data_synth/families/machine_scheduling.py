"""Makespan scheduling on parallel machines (MILP): assign every job to one machine, where the machines
differ in speed per job (unrelated parallel machines), so that the last machine finishes as early as
possible."""

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
    Scenario("printshop", "commercial printing", {
        "company": "a print shop", "job": "print order", "jobs_word": "print orders", "job_prefix": "Order ", "machine": "press", "machines_word": "presses",
        "machines": ["Heidelberg press", "Komori press", "digital press", "Ryobi press"], "unit": "minutes",
        "base": (20, 120),
    }),
    Scenario("cnc", "metalworking", {
        "company": "a machine shop", "job": "part batch", "jobs_word": "part batches", "job_prefix": "Batch ", "machine": "CNC machine", "machines_word": "CNC machines",
        "machines": ["Mill-1", "Mill-2", "Lathe-Mill", "5-axis centre"], "unit": "minutes",
        "base": (30, 150),
    }),
    Scenario("render", "visual effects", {
        "company": "a visual-effects studio", "job": "render job", "jobs_word": "render jobs", "job_prefix": "Shot ", "machine": "render node", "machines_word": "render nodes",
        "machines": ["node-a", "node-b", "node-gpu", "node-c"], "unit": "minutes",
        "base": (15, 90),
    }),
)


class MachineScheduling(ProblemFamily):
    name = "machine_scheduling"
    title = "Makespan scheduling on unrelated parallel machines"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"assign": "binary", "makespan": "nonnegative"}
    # the family's fixed sentences of the optional rules, in other words for each split (data_synth.statements)
    phrasings = (
        Phrasing(r"Some combinations are not possible:", ("Some combinations are not possible:",
                                                          "Not every pairing is possible:"),
                 ("A few pairings are ruled out:",)),
        Phrasing(r"\bis free now:", ("is free now:",), ("is idle at the start:",)),
        Phrasing(r"\bthat are free start now\b", ("that are free start now", "that are idle begin at once"),
                 ("without earlier work start immediately",)),
    )
    data_fields = {
        "jobs": "list of job names",
        "machines": "list of machine names",
        "time": "time[job][machine]: processing time of the job if it runs on that machine",
        "unavailable": "list of [job, machine] pairs: the job cannot run on that machine (only when some pairs "
                       "are not possible)",
        "max_jobs": "most jobs any one machine may take (only when there is such a limit)",
        "ready_time": "time at which each busy machine becomes free, keyed by machine; machines not listed are "
                      "free at once (only when some machines are busy at the start)",
        "deadline": "time by which all work must be finished (only when there is a deadline)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = """\
model = pyo.ConcreteModel()
jobs, machines = data["jobs"], data["machines"]
model.assign = pyo.Var(jobs, machines, domain=pyo.Binary)  # job j runs on machine m
model.makespan = pyo.Var(domain=pyo.NonNegativeReals)       # time when the last machine finishes

model.obj = pyo.Objective(expr=model.makespan, sense=pyo.minimize)

model.run_once = pyo.Constraint(jobs, rule=lambda model, j: sum(model.assign[j, m] for m in machines) == 1)
"""
    _FINISH = """\

# every machine finishes its jobs (run one after another) by the makespan
def finish(model, m):
    return sum(data["time"][j][m] * model.assign[j, m] for j in jobs) <= model.makespan

model.finish = pyo.Constraint(machines, rule=finish)
"""
    _READY_FINISH = """\

# every machine starts when it is free (busy machines later) and runs its jobs one after another
def finish(model, m):
    ready = data["ready_time"].get(m, 0)
    return ready + sum(data["time"][j][m] * model.assign[j, m] for j in jobs) <= model.makespan

model.finish = pyo.Constraint(machines, rule=finish)
"""
    _UNAVAILABLE = """\

model.U = pyo.Set(initialize=[tuple(pair) for pair in data["unavailable"]], dimen=2)
model.unavailable = pyo.Constraint(model.U, rule=lambda model, j, m: model.assign[j, m] == 0)
"""
    _MAX_JOBS = """\

model.max_jobs = pyo.Constraint(
    machines, rule=lambda model, m: sum(model.assign[j, m] for j in jobs) <= data["max_jobs"]
)
"""
    _DEADLINE = """\

# a hard deadline for the whole batch
model.deadline = pyo.Constraint(expr=model.makespan <= data["deadline"])
"""

    model_code = _HEAD + _FINISH  # the base model (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._READY_FINISH if "ready_time" in data else self._FINISH)
        if "unavailable" in data:
            code += self._UNAVAILABLE
        if "max_jobs" in data:
            code += self._MAX_JOBS
        if "deadline" in data:
            code += self._DEADLINE
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("unavailable", "max_jobs", "ready_time") if name in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_jobs = size_for(difficulty, 5, 7, 10)
        n_machines = size_for(difficulty, 2, 3, 3)
        jobs = [f"{words['job_prefix']}{k + 1}" for k in range(n_jobs)]
        machines = words["machines"][:n_machines]
        speed = {m: rng.uniform(0.75, 1.35) for m in machines}
        time = {}
        for j in jobs:
            base = rng.randint(*words["base"])
            # machines differ overall, and some jobs suit some machines better
            time[j] = {m: max(5, round(base * speed[m] * rng.uniform(0.85, 1.2))) for m in machines}
        data = {"jobs": jobs, "machines": machines, "time": time}
        # a balanced reference assignment (jobs dealt to the machines in turn) that every limit allows
        order = rng.sample(machines, len(machines))
        reference = {j: order[k % len(order)] for k, j in enumerate(jobs)}
        if rng.random() < 0.5:
            # about a third of the other pairings are ruled out; a job keeps its reference machine
            others = [(j, m) for j in jobs for m in machines if m != reference[j]]
            ruled_out = sorted(rng.sample(others, max(1, len(others) // 3)), key=others.index)
            data["unavailable"] = [list(pair) for pair in ruled_out]
        if rng.random() < 0.5:
            data["max_jobs"] = -(-n_jobs // n_machines) + rng.choice([0, 0, 1])
        if rng.random() < 0.5:
            # some machines finish earlier work first, for a tenth to a half of an even share of the load
            share = sum(min(time[j].values()) for j in jobs) / n_machines
            busy = sorted(rng.sample(machines, rng.randint(1, n_machines - 1)), key=machines.index)
            data["ready_time"] = {m: max(5, round(share * rng.uniform(0.1, 0.5) / 5) * 5) for m in busy}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a deadline shorter than the longest job takes even on its fastest machine
        longest = max(min(data["time"][j].values()) for j in data["jobs"])
        return {**data, "deadline": longest - 1}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        jobs, machines = data["jobs"], data["machines"]
        ruled_out = {tuple(pair) for pair in data.get("unavailable", ())}
        run = {(j, m): matrix.add_var(f"assign[{j},{m}]", 0, 0 if (j, m) in ruled_out else 1, integer=True)
               for j in jobs for m in machines}
        upper = data.get("deadline", float("inf"))
        last = matrix.add_var("makespan", 0.0, upper, cost=1.0)
        ready = data.get("ready_time", {})
        for j in jobs:
            matrix.add_row({run[j, m]: 1.0 for m in machines}, lower=1, upper=1, name=f"run_once[{j}]")
        for m in machines:
            row = {run[j, m]: data["time"][j][m] for j in jobs}
            row[last] = -1.0
            matrix.add_row(row, upper=-ready.get(m, 0), name=f"finish[{m}]")
        if "max_jobs" in data:
            for m in machines:
                matrix.add_row({run[j, m]: 1.0 for j in jobs}, upper=data["max_jobs"], name=f"max_jobs[{m}]")

    def constraint_rows(self, data: dict, x: dict):
        assign, makespan = x["assign"], x["makespan"][None]
        ready = data.get("ready_time", {})
        for j in data["jobs"]:
            yield Row(f"run_once[{j}]", sum(assign[j, m] for m in data["machines"]), "==", 1)
        for m in data["machines"]:
            load = sum(data["time"][j][m] * assign[j, m] for j in data["jobs"])
            yield Row(f"finish[{m}]", ready.get(m, 0) + load, "<=", makespan)
        for j, m in data.get("unavailable", ()):
            yield Row(f"unavailable[{j},{m}]", assign[j, m], "==", 0)
        if "max_jobs" in data:
            for m in data["machines"]:
                yield Row(f"max_jobs[{m}]", sum(assign[j, m] for j in data["jobs"]), "<=", data["max_jobs"])
        if "deadline" in data:
            yield Row("deadline", makespan, "<=", data["deadline"])

    def objective_value(self, data: dict, x: dict) -> float:
        return x["makespan"][None]

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        job, machine, unit = words["job"], words["machine"], words["unit"]
        job_plural, machine_plural = words["jobs_word"], words["machines_word"]
        jobs, machines = data["jobs"], data["machines"]
        start = (f"the {machine_plural} that are free start now" if "ready_time" in data
                 else f"all {machine_plural} start now")
        intro = (f"{words['company'].capitalize()} has {len(jobs)} {job_plural} to run on {len(machines)} {machine_plural} "
                 f"({join_names(machines)}). Every {job} runs on exactly one {machine}, without interruption; a "
                 f"{machine} handles one {job} at a time, and {start}. The {machine_plural} are not "
                 f"identical, so the processing time depends on the {machine}.")
        file = representation == "file"
        rules = []  # the optional rules, stated in words in every representation
        if "unavailable" in data:
            pairs = "; ".join(f"{j} cannot run on {m}" for j, m in data["unavailable"])
            rules.append(f"Some combinations are not possible: {pairs}." if not file else
                         f"Some combinations are not possible: a listed {job} cannot run on the listed {machine}.")
        if "max_jobs" in data:
            rules.append(f"No {machine} may take more than {fmt(data['max_jobs'])} {job_plural}." if not file else
                         f"No {machine} may take more than a given number of {job_plural}.")
        if "ready_time" in data:
            busy = "; ".join(f"{m} becomes available after {fmt(t)} {unit}" for m, t in data["ready_time"].items())
            rules.append(f"Not every {machine} is free now: {busy}; it then runs its {job_plural}." if not file else
                         f"Not every {machine} is free now: a busy {machine} becomes available after its ready time "
                         "and then runs its jobs.")
        if "deadline" in data:
            rules.append(f"Everything must be finished within {fmt(data['deadline'])} {unit}.")
        question = (f"How should the {job_plural} be assigned to the {machine_plural} so that all work is finished as early as "
                    f"possible? What is the minimum makespan (the time at which the last {machine} finishes), in "
                    f"{unit}?")
        rules_text = "".join(f" {rule}" for rule in rules)
        if representation == "text":
            lines = " ".join(f"{j} takes " + ", ".join(f"{fmt(data['time'][j][m])} {unit} on {m}" for m in machines)
                             + "." for j in jobs)
            return f"{intro} {lines}{rules_text} {question}"
        if representation == "table":
            table = markdown_table([f"{job} (time in {unit})", *machines],
                                   [[j, *[data["time"][j][m] for m in machines]] for j in jobs])
            return f"{intro}{rules_text}\n\n{table}\n\n{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro}{rules_text}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        unit = scenario.words["unit"]
        ready = data.get("ready_time", {})
        lines = []
        for m in data["machines"]:
            mine = [j for j in data["jobs"] if x["assign"][j, m] > 0.5]
            load = sum(data["time"][j][m] for j in mine)
            start = f", from {fmt(ready[m])} {unit}" if m in ready else ""
            lines.append(f"- {m}: {join_names(mine) if mine else 'nothing'} (busy {fmt(load)} {unit}{start})")
        return "\n".join(lines)

    def formulation(self, data: dict) -> str:
        sets = "jobs $J$, machines $M$"
        parameters = "processing time $p_{jm}$"
        finish = "\\sum_{j \\in J} p_{jm} x_{jm} \\le C"
        rows = []
        if "ready_time" in data:
            parameters += ", ready time $r_m$ (0 for a machine that is free at once)"
            finish = "r_m + " + finish
        if "unavailable" in data:
            sets += ", impossible pairs $U \\subseteq J \\times M$"
            rows.append("& x_{jm} = 0 && \\forall (j, m) \\in U")
        if "max_jobs" in data:
            parameters += ", job limit $K$ per machine"
            rows.append("& \\sum_{j \\in J} x_{jm} \\le K && \\forall m \\in M")
        if "deadline" in data:
            parameters += ", deadline $D$"
            rows.append("& C \\le D")
        rows.append("& x_{jm} \\in \\{0,1\\},\\ C \\ge 0")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            "**Variables**: $x_{jm} \\in \\{0,1\\}$ (job $j$ runs on machine $m$), $C \\ge 0$ (makespan).\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & C \\\\\n"
            "\\text{s.t.}\\ & \\sum_{m \\in M} x_{jm} = 1 && \\forall j \\in J \\\\\n"
            f"& {finish} && \\forall m \\in M \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = MachineScheduling()
