"""Makespan scheduling on parallel machines (MILP): assign every job to one machine, where the machines
differ in speed per job (unrelated parallel machines), so that the last machine finishes as early as
possible.

Structure variants (drawn per instance, recorded by the keys present): job-machine pairs that are not
possible (`unavailable`), machines that are still busy at the start and become free later (`ready_time`),
and an objective variant: the least running cost at a price per minute of each machine, with every job done
by a deadline (`machine_cost` with `deadline`), each present or absent, so the program has eight skeletons.
Every job keeps a machine it can run on, and the deadline is at least the makespan of a greedy assignment
that respects the other rules, so every variant stays feasible. Without `machine_cost` a deadline appears
only in the infeasible variant."""

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
    Scenario("printshop", "commercial printing", {
        "company": "a print shop", "job": "print order", "jobs_word": "print orders", "job_prefix": "Order ", "machine": "press", "machines_word": "presses",
        "machines": ["Heidelberg press", "Komori press", "digital press", "Ryobi press"], "unit": "minutes",
        "time_unit": "minute", "base": (20, 120),
    }),
    Scenario("cnc", "metalworking", {
        "company": "a machine shop", "job": "part batch", "jobs_word": "part batches", "job_prefix": "Batch ", "machine": "CNC machine", "machines_word": "CNC machines",
        "machines": ["Mill-1", "Mill-2", "Lathe-Mill", "5-axis centre"], "unit": "minutes",
        "time_unit": "minute", "base": (30, 150),
    }),
    Scenario("render", "visual effects", {
        "company": "a visual-effects studio", "job": "render job", "jobs_word": "render jobs", "job_prefix": "Shot ", "machine": "render node", "machines_word": "render nodes",
        "machines": ["node-a", "node-b", "node-gpu", "node-c"], "unit": "minutes",
        "time_unit": "minute", "base": (15, 90),
    }),
)
# the eval split's own industries, companies and machine names (held out from training)
EVAL_SCENARIOS = (
    Scenario("bakery", "industrial baking", {
        "company": "an industrial bakery", "job": "dough lot", "jobs_word": "dough lots", "job_prefix": "Lot ", "machine": "baking oven", "machines_word": "baking ovens",
        "machines": ["Tunnel Oven North", "Deck Oven East", "Rack Oven West", "Convection Oven South"], "unit": "minutes",
        "time_unit": "minute", "base": (25, 110),
    }),
    Scenario("lab", "clinical diagnostics", {
        "company": "a diagnostics laboratory", "job": "assay tray", "jobs_word": "assay trays", "job_prefix": "Tray ", "machine": "blood analyser", "machines_word": "blood analysers",
        "machines": ["Cobas unit", "Alinity unit", "Atellica unit", "Vitros unit"], "unit": "minutes",
        "time_unit": "minute", "base": (20, 100),
    }),
)


class MachineScheduling(ProblemFamily):
    name = "machine_scheduling"
    title = "Makespan scheduling on unrelated parallel machines"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"assign": "binary", "makespan": "nonnegative"}
    # the family's fixed sentences of the optional rules, in other words for each split (data_synth.statements)
    phrasings = (
        Phrasing(r"Some combinations are not possible:", ("Some combinations are not possible:",
                                                          "Not every pairing is possible:"),
                 ("A few pairings are ruled out:",)),
        Phrasing(r"\bis free now:", ("is free now:",), ("is idle at the start:",)),
        Phrasing(r"\bworks is paid at its running rate\b", ("works is paid at its running rate",
                                                              "is in use costs its running rate"),
                 ("operates is charged at its running rate",)),
        Phrasing(r"\bthat are free start now\b", ("that are free start now", "that are idle begin at once"),
                 ("without earlier work start immediately",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bto run on\b", ("to run on",), ("waiting for",)),
        Phrasing(r"\bruns on exactly one\b", ("runs on exactly one",), ("is processed by a single",)),
        Phrasing(r"\bwithout interruption; a\b", ("without interruption; a",), ("in one go with no pauses; each",)),
        Phrasing(r"\bhandles one\b", ("handles one",), ("processes a single",)),
        Phrasing(r"\bat a time, and\b", ("at a time, and",), ("at any moment, and",)),
        Phrasing(r"\bare not identical, so the processing time depends on the\b",
                 ("are not identical, so the processing time depends on the",),
                 ("differ from one another, hence the duration varies with the chosen",)),
        Phrasing(r"\bbe assigned to the\b", ("be assigned to the",), ("be allocated among the",)),
        Phrasing(r"\bso that all work is finished as early as possible\?",
                 ("so that all work is finished as early as possible?",),
                 ("for the whole workload to be completed at the earliest moment?",)),
        Phrasing(r"\bminimum makespan \(the time at which the last\b",
                 ("minimum makespan (the time at which the last",),
                 ("smallest achievable makespan (the moment when the final",)),
        Phrasing(r"\bso that everything is finished in time at\b", ("so that everything is finished in time at",),
                 ("so that the whole workload meets the time limit at",)),
        Phrasing(r"\btotal running cost\b", ("total running cost",), ("bill for machine running time",)),
        Phrasing(r"\bEverything must be finished within\b", ("Everything must be finished within",),
                 ("The complete workload has to be done inside",)),
        Phrasing(r"\bbecomes available after\b", ("becomes available after",), ("is free only after",)),
        Phrasing(r"\bit then runs its\b", ("it then runs its",), ("only afterwards can it take its",)),
        Phrasing(r"\bcannot run on\b", ("cannot run on",), ("is not allowed on",)),
        Phrasing(r"\btakes\b", ("takes",), ("needs",)),
        Phrasing(r"\bprocessing time of the job if it runs on that machine\b",
                 ("processing time of the job if it runs on that machine",),
                 ("duration of each job when it is placed on each machine",)),
        Phrasing(r"\bjob names\b", ("job names",), ("the jobs' names",)),
        Phrasing(r"\bmachine names\b", ("machine names",), ("the machines' names",)),
    )
    data_fields = {
        "jobs": "list of job names",
        "machines": "list of machine names",
        "time": "time[job][machine]: processing time of the job if it runs on that machine",
        "unavailable": "list of [job, machine] pairs: the job cannot run on that machine (only when some pairs "
                       "are not possible)",
        "machine_cost": "dollars per minute each machine works, keyed by machine (only when the goal is the "
                        "least running cost)",
        "ready_time": "time at which each busy machine becomes free, keyed by machine; machines not listed are "
                      "free at once (only when some machines are busy at the start)",
        "deadline": "time by which all work must be finished (only when there is a deadline)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _VARIABLES = """\
model = pyo.ConcreteModel()
jobs, machines = data["jobs"], data["machines"]
model.assign = pyo.Var(jobs, machines, domain=pyo.Binary)  # job j runs on machine m
model.makespan = pyo.Var(domain=pyo.NonNegativeReals)       # time when the last machine finishes
"""
    _MAKESPAN_OBJECTIVE = """\

model.obj = pyo.Objective(expr=model.makespan, sense=pyo.minimize)
"""
    _COST_OBJECTIVE = """\

# the running cost: every minute a machine works is paid at its rate
model.obj = pyo.Objective(
    expr=sum(data["machine_cost"][m] * data["time"][j][m] * model.assign[j, m] for j in jobs for m in machines),
    sense=pyo.minimize,
)
"""
    _RUN_ONCE = """\

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
    _DEADLINE = """\

# a hard deadline for the whole batch
model.deadline = pyo.Constraint(expr=model.makespan <= data["deadline"])
"""

    model_code = _VARIABLES + _MAKESPAN_OBJECTIVE + _RUN_ONCE + _FINISH  # the base model (no optional piece)

    def model_code_for(self, data: dict) -> str:
        code = self._VARIABLES + (self._COST_OBJECTIVE if "machine_cost" in data else self._MAKESPAN_OBJECTIVE)
        code += self._RUN_ONCE + (self._READY_FINISH if "ready_time" in data else self._FINISH)
        if "unavailable" in data:
            code += self._UNAVAILABLE
        if "deadline" in data:
            code += self._DEADLINE
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("unavailable", "ready_time", "machine_cost") if name in data]
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
        # a reference assignment (jobs dealt to the machines in turn): ruling pairs out, every job keeps its own
        order = rng.sample(machines, len(machines))
        reference = {j: order[k % len(order)] for k, j in enumerate(jobs)}
        if rng.random() < 0.5:
            # about a third of the other pairings are ruled out; a job keeps its reference machine
            others = [(j, m) for j in jobs for m in machines if m != reference[j]]
            ruled_out = sorted(rng.sample(others, max(1, len(others) // 3)), key=others.index)
            data["unavailable"] = [list(pair) for pair in ruled_out]
        if rng.random() < 0.5:
            # some machines finish earlier work first, for a tenth to a half of an even share of the load
            share = sum(min(time[j].values()) for j in jobs) / n_machines
            busy = sorted(rng.sample(machines, rng.randint(1, n_machines - 1)), key=machines.index)
            data["ready_time"] = {m: max(5, round(share * rng.uniform(0.1, 0.5) / 5) * 5) for m in busy}
        if rng.random() < 0.5:
            # slower machines are cheaper per minute, so the deadline is what keeps work on the fast ones
            data["machine_cost"] = {m: round(3.0 / speed[m] * rng.uniform(0.8, 1.2), 1) for m in machines}
            data["deadline"] = math.ceil(greedy_makespan(data) * rng.uniform(1.0, 1.15))
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a deadline shorter than the longest job takes even on its fastest machine
        longest = max(min(data["time"][j].values()) for j in data["jobs"])
        return {**data, "deadline": longest - 1}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        jobs, machines = data["jobs"], data["machines"]
        ruled_out = {tuple(pair) for pair in data.get("unavailable", ())}
        rate = data.get("machine_cost")
        run = {(j, m): matrix.add_var(f"assign[{j},{m}]", 0, 0 if (j, m) in ruled_out else 1,
                                      cost=rate[m] * data["time"][j][m] if rate else 0.0, integer=True)
               for j in jobs for m in machines}
        upper = data.get("deadline", float("inf"))
        last = matrix.add_var("makespan", 0.0, upper, cost=0.0 if rate else 1.0)
        ready = data.get("ready_time", {})
        for j in jobs:
            matrix.add_row({run[j, m]: 1.0 for m in machines}, lower=1, upper=1, name=f"run_once[{j}]")
        for m in machines:
            row = {run[j, m]: data["time"][j][m] for j in jobs}
            row[last] = -1.0
            matrix.add_row(row, upper=-ready.get(m, 0), name=f"finish[{m}]")

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
        if "deadline" in data:
            yield Row("deadline", makespan, "<=", data["deadline"])

    def objective_value(self, data: dict, x: dict) -> float:
        if "machine_cost" in data:
            return sum(data["machine_cost"][m] * data["time"][j][m] * x["assign"][j, m]
                       for j in data["jobs"] for m in data["machines"])
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
        if "ready_time" in data:
            busy = "; ".join(f"{m} becomes available after {fmt(t)} {unit}" for m, t in data["ready_time"].items())
            rules.append(f"Not every {machine} is free now: {busy}; it then runs its {job_plural}." if not file else
                         f"Not every {machine} is free now: a busy {machine} becomes available after its ready time "
                         f"and then runs its {job_plural}.")
        if "deadline" in data:
            rules.append(f"Everything must be finished within {fmt(data['deadline'])} {unit}.")
        if "machine_cost" in data:
            rates = "; ".join(f"{m} ${fmt(rate)}" for m, rate in data["machine_cost"].items())
            rules.append(f"Every {words['time_unit']} a {machine} works is paid at its running rate"
                         + (f": {rates}." if not file else f" (given per {machine})."))
            question = (f"How should the {job_plural} be assigned to the {machine_plural} so that everything is "
                        f"finished in time at the lowest total running cost? What is that cost, in dollars?")
        else:
            question = (f"How should the {job_plural} be assigned to the {machine_plural} so that all work is finished "
                        f"as early as possible? What is the minimum makespan (the time at which the last {machine} "
                        f"finishes), in {unit}?")
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
        if "deadline" in data:
            parameters += ", deadline $D$"
            rows.append("& C \\le D")
        objective = "C"
        if "machine_cost" in data:
            parameters += ", running cost $c_m$ per minute"
            objective = "\\sum_{j \\in J} \\sum_{m \\in M} c_m p_{jm} x_{jm}"
        rows.append("& x_{jm} \\in \\{0,1\\},\\ C \\ge 0")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            "**Variables**: $x_{jm} \\in \\{0,1\\}$ (job $j$ runs on machine $m$), $C \\ge 0$ (makespan).\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n"
            "\\text{s.t.}\\ & \\sum_{m \\in M} x_{jm} = 1 && \\forall j \\in J \\\\\n"
            f"& {finish} && \\forall m \\in M \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


def greedy_makespan(data: dict) -> float:
    """The makespan of a feasible assignment: longest jobs first, each to the allowed machine where it would
    finish earliest (ready times included); the deadline of the cost variant is drawn above it."""
    ruled_out = {tuple(pair) for pair in data.get("unavailable", ())}
    machines, time = data["machines"], data["time"]
    finish = {m: data.get("ready_time", {}).get(m, 0) for m in machines}
    for j in sorted(data["jobs"], key=lambda j: (-min(time[j].values()), data["jobs"].index(j))):
        allowed = [m for m in machines if (j, m) not in ruled_out]
        best = min(allowed, key=lambda m: (finish[m] + time[j][m], machines.index(m)))
        finish[best] += time[j][best]
    return max(finish.values())


FAMILY = MachineScheduling()
