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
    data_fields = {
        "jobs": "list of job names",
        "machines": "list of machine names",
        "time": "time[job][machine]: processing time of the job if it runs on that machine",
    }
    model_code = '''\
model = pyo.ConcreteModel()
jobs, machines = data["jobs"], data["machines"]
model.assign = pyo.Var(jobs, machines, domain=pyo.Binary)  # job j runs on machine m
model.makespan = pyo.Var(domain=pyo.NonNegativeReals)       # time when the last machine finishes

model.obj = pyo.Objective(expr=model.makespan, sense=pyo.minimize)

model.run_once = pyo.Constraint(jobs, rule=lambda model, j: sum(model.assign[j, m] for m in machines) == 1)

# every machine finishes its jobs (run one after another) by the makespan
def finish(model, m):
    return sum(data["time"][j][m] * model.assign[j, m] for j in jobs) <= model.makespan

model.finish = pyo.Constraint(machines, rule=finish)

# a hard deadline for the whole batch, when the instance has one
if "deadline" in data:
    model.deadline = pyo.Constraint(expr=model.makespan <= data["deadline"])
'''

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
        return {"jobs": jobs, "machines": machines, "time": time}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a deadline shorter than the longest job takes even on its fastest machine
        longest = max(min(data["time"][j].values()) for j in data["jobs"])
        return {**data, "deadline": longest - 1}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        jobs, machines = data["jobs"], data["machines"]
        run = {(j, m): matrix.add_var(f"assign[{j},{m}]", 0, 1, integer=True) for j in jobs for m in machines}
        upper = data.get("deadline", float("inf"))
        last = matrix.add_var("makespan", 0.0, upper, cost=1.0)
        for j in jobs:
            matrix.add_row({run[j, m]: 1.0 for m in machines}, lower=1, upper=1, name=f"run_once[{j}]")
        for m in machines:
            row = {run[j, m]: data["time"][j][m] for j in jobs}
            row[last] = -1.0
            matrix.add_row(row, upper=0.0, name=f"finish[{m}]")

    def constraint_rows(self, data: dict, x: dict):
        assign, makespan = x["assign"], x["makespan"][None]
        for j in data["jobs"]:
            yield Row(f"run_once[{j}]", sum(assign[j, m] for m in data["machines"]), "==", 1)
        for m in data["machines"]:
            load = sum(data["time"][j][m] * assign[j, m] for j in data["jobs"])
            yield Row(f"finish[{m}]", load, "<=", makespan)
        if "deadline" in data:
            yield Row("deadline", makespan, "<=", data["deadline"])

    def objective_value(self, data: dict, x: dict) -> float:
        return x["makespan"][None]

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        job, machine, unit = words["job"], words["machine"], words["unit"]
        job_plural, machine_plural = words["jobs_word"], words["machines_word"]
        jobs, machines = data["jobs"], data["machines"]
        intro = (f"{words['company'].capitalize()} has {len(jobs)} {job_plural} to run on {len(machines)} {machine_plural} "
                 f"({join_names(machines)}). Every {job} runs on exactly one {machine}, without interruption; a "
                 f"{machine} handles one {job} at a time, and all {machine_plural} start now. The {machine_plural} are not "
                 f"identical, so the processing time depends on the {machine}.")
        if "deadline" in data:
            intro += f" Everything must be finished within {fmt(data['deadline'])} {unit}."
        question = (f"How should the {job_plural} be assigned to the {machine_plural} so that all work is finished as early as "
                    f"possible? What is the minimum makespan (the time at which the last {machine} finishes), in "
                    f"{unit}?")
        if representation == "text":
            lines = " ".join(f"{j} takes " + ", ".join(f"{fmt(data['time'][j][m])} {unit} on {m}" for m in machines)
                             + "." for j in jobs)
            return f"{intro} {lines} {question}"
        if representation == "table":
            table = markdown_table([f"{job} (time in {unit})", *machines],
                                   [[j, *[data["time"][j][m] for m in machines]] for j in jobs])
            return f"{intro}\n\n{table}\n\n{question}"
        if representation == "file":
            fields = dict(self.data_fields)
            if "deadline" in data:
                fields["deadline"] = f"time by which all work must be finished ({unit})"
            return f"{intro}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        unit = scenario.words["unit"]
        lines = []
        for m in data["machines"]:
            mine = [j for j in data["jobs"] if x["assign"][j, m] > 0.5]
            load = sum(data["time"][j][m] for j in mine)
            lines.append(f"- {m}: {join_names(mine) if mine else 'nothing'} (busy {fmt(load)} {unit})")
        return "\n".join(lines)

    def formulation(self, data: dict) -> str:
        deadline = "& C \\le D \\quad\\text{(deadline)} \\\\\n" if "deadline" in data else ""
        return (
            "**Sets**: jobs $J$, machines $M$.\n\n"
            "**Parameters**: processing time $p_{jm}$" + (", deadline $D$" if deadline else "") + ".\n\n"
            "**Variables**: $x_{jm} \\in \\{0,1\\}$ (job $j$ runs on machine $m$), $C \\ge 0$ (makespan).\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & C \\\\\n"
            "\\text{s.t.}\\ & \\sum_{m \\in M} x_{jm} = 1 && \\forall j \\in J \\\\\n"
            "& \\sum_{j \\in J} p_{jm} x_{jm} \\le C && \\forall m \\in M \\\\\n" + deadline +
            "& x_{jm} \\in \\{0,1\\},\\ C \\ge 0\n\\end{aligned}\n$$"
        )


FAMILY = MachineScheduling()
