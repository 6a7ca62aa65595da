"""Permutation flow shop (MILP): every job visits the machines in the same order and the machines process
the jobs in one common sequence; choose the sequence. Positional formulation: `place[j, k]` puts job j
in position k, and `finish[k, m]` is when the job in position k leaves machine m.

Structure variants (drawn per instance, recorded by the keys present): the objective (`"objective"`:
the makespan or the total completion time), release times before which a job cannot start
(`release`) and pairs of jobs that must keep an order (`precedence`), each independent: eight program
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
    Scenario("bakery", "industrial baking", {
        "company": "an industrial bakery", "job": "batch", "jobs": "batches", "job_prefix": "Batch ",
        "machines": ["mixer", "proofer", "oven", "packer"], "time_range": (8, 40),
    }),
    Scenario("electronics", "electronics assembly", {
        "company": "a circuit-board assembler", "job": "board lot", "jobs": "board lots", "job_prefix": "Lot ",
        "machines": ["paste printer", "pick-and-place", "reflow oven", "optical inspection"], "time_range": (5, 30),
    }),
    Scenario("furniture", "furniture making", {
        "company": "a furniture workshop", "job": "order", "jobs": "orders", "job_prefix": "Order ",
        "machines": ["saw", "sander", "paint booth", "assembly bench"], "time_range": (10, 60),
    }),
)

# the eval split's own industries and names (see ProblemFamily.eval_scenarios)
EVAL_SCENARIOS = (
    Scenario("printing", "commercial printing", {
        "company": "a commercial print shop", "job": "print job", "jobs": "print jobs", "job_prefix": "Job ",
        "machines": ["prepress", "offset press", "folder", "binder"], "time_range": (10, 45),
    }),
    Scenario("brewing", "craft brewing", {
        "company": "a contract brewery", "job": "brew", "jobs": "brews", "job_prefix": "Brew ",
        "machines": ["mash tun", "lauter tun", "kettle", "whirlpool"], "time_range": (15, 50),
    }),
)


class FlowShop(ProblemFamily):
    name = "flow_shop"
    title = "Permutation flow shop"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"place": "binary", "finish": "nonnegative"}
    phrasings = (
        Phrasing(r"Every job visits the machines in the order listed, and all machines process the jobs in the same "
                 r"sequence\.",
                 ("Every job visits the machines in the order listed, and all machines process the jobs in the same "
                  "sequence.",),
                 ("The route through the machines is the listed one for every job, and one common job sequence holds "
                  "on all machines.",)),
        Phrasing(r"\bA machine works on one job at a time\b",
                 ("A machine works on one job at a time", "No machine handles two jobs at once"),
                 ("Each machine can hold only one job at any moment",)),
        # eval-only rewordings of the fixed sentences (training keeps its text); each stops short of the
        # generic words that training writes two ways ("what is that", "keyed by")
        Phrasing(r"\bis never interrupted\.", ("is never interrupted.",), ("runs to completion once started.",)),
        Phrasing(r"\bAll times are in minutes, counted from now\.", ("All times are in minutes, counted from now.",),
                 ("Times are given in minutes from the present moment.", "Every time is in minutes, measured from now.")),
        Phrasing(r"\bNot every\b(?= [\w -]+? is ready now:)", ("Not every",), ("Not every single",)),
        Phrasing(r"\bis ready now:", ("is ready now:",), ("is available at once:",)),
        Phrasing(r"\barrive later\.", ("arrive later.",), ("turn up later.",)),
        Phrasing(r"\barrives later\.", ("arrives later.",), ("turns up later.",)),
        Phrasing(r"\bonly from its release time:", ("only from its release time:",),
                 ("no earlier than its release time:",)),
        Phrasing(r"\bmust come earlier in the sequence than others:", ("must come earlier in the sequence than others:",),
                 ("are required to precede certain others:",)),
        Phrasing(r"\bIn which sequence should the\b", ("In which sequence should the",), ("In what order are the",)),
        Phrasing(r" run so that the last one leaves the\b", (" run so that the last one leaves the",),
                 (" to be run so that the final one exits the",)),
        Phrasing(r" run to minimize the sum of their completion times\b",
                 (" run to minimize the sum of their completion times",),
                 (" to be run so that their completion times add up to as little as possible",)),
        Phrasing(r"\(when each leaves the\b", ("(when each leaves the",), ("(the moment each exits the",)),
        Phrasing(r"(?<=what is that )minimum makespan\b", ("minimum makespan",), ("shortest makespan",)),
        Phrasing(r"(?<=what is that )minimum total\b", ("minimum total",), ("smallest sum",)),
        Phrasing(r"\blist of job names\b", ("list of job names",), ("names of the jobs",)),
        Phrasing(r"\blist of machine names, in the order every job visits them\b",
                 ("list of machine names, in the order every job visits them",),
                 ("names of the machines, in the route order shared by all jobs",)),
        Phrasing(r"\bprocessing time of the job on the machine\b", ("processing time of the job on the machine",),
                 ("time that job spends on that machine",)),
        Phrasing(r"\(finish the last job as early as possible\)", ("(finish the last job as early as possible)",),
                 ("(complete the final job soonest)",)),
        Phrasing(r"\(minimize the sum of the jobs' completion times\)",
                 ("(minimize the sum of the jobs' completion times)",),
                 ("(make the completion times add up to as little as possible)",)),
        Phrasing(r"\bearliest start of each job on the first machine\b",
                 ("earliest start of each job on the first machine",),
                 ("first moment every job may begin on the first machine",)),
        Phrasing(r"\[first, second\] pairs: the first job must come before the second in the sequence\b",
                 ("[first, second] pairs: the first job must come before the second in the sequence",),
                 ("[first, second] pairs meaning the first job is sequenced ahead of the second",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(included only if",)),
    )
    data_fields = {
        "jobs": "list of job names",
        "machines": "list of machine names, in the order every job visits them",
        "time": "time[job][machine]: processing time of the job on the machine (minutes)",
        "objective": '"makespan" (finish the last job as early as possible) or "total_completion" (minimize the '
                     "sum of the jobs' completion times)",
        "release": "earliest start of each job on the first machine, keyed by job (only when jobs have release "
                   "times)",
        "precedence": "[first, second] pairs: the first job must come before the second in the sequence (only when "
                      "there are such pairs)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.J = pyo.Set(initialize=data["jobs"])
model.M = pyo.Set(initialize=data["machines"])
model.K = pyo.RangeSet(1, len(data["jobs"]))  # positions in the sequence
first, last = data["machines"][0], data["machines"][-1]
model.place = pyo.Var(model.J, model.K, domain=pyo.Binary)        # job j in position k
model.finish = pyo.Var(model.K, model.M, domain=pyo.NonNegativeReals)  # position k leaves machine m
'''
    _MAKESPAN = '''\
model.obj = pyo.Objective(expr=model.finish[len(data["jobs"]), last], sense=pyo.minimize)
'''
    _TOTAL = '''\
model.obj = pyo.Objective(expr=sum(model.finish[k, last] for k in model.K), sense=pyo.minimize)
'''
    _BODY = '''\
model.one_position = pyo.Constraint(model.J, rule=lambda model, j: sum(model.place[j, k] for k in model.K) == 1)
model.one_job = pyo.Constraint(model.K, rule=lambda model, k: sum(model.place[j, k] for j in model.J) == 1)


def work(model, k, m):  # processing time of the job in position k on machine m
    return sum(data["time"][j][m] * model.place[j, k] for j in model.J)


def after_previous_job(model, k, m):  # the machine is free once the previous position leaves it
    if k == 1:
        return model.finish[k, m] >= work(model, k, m)
    return model.finish[k, m] >= model.finish[k - 1, m] + work(model, k, m)


def after_previous_machine(model, k, m):  # the job arrives once it leaves the machine before
    index = data["machines"].index(m)
    if index == 0:
        return pyo.Constraint.Skip
    return model.finish[k, m] >= model.finish[k, data["machines"][index - 1]] + work(model, k, m)


model.after_previous_job = pyo.Constraint(model.K, model.M, rule=after_previous_job)
model.after_previous_machine = pyo.Constraint(model.K, model.M, rule=after_previous_machine)
'''
    _RELEASE = '''\
model.release = pyo.Constraint(model.K, rule=lambda model, k: model.finish[k, first] >= sum(
    (data["release"][j] + data["time"][j][first]) * model.place[j, k] for j in model.J))
'''
    _PRECEDENCE = '''\
model.precedence = pyo.Constraint(range(len(data["precedence"])), rule=lambda model, p: sum(
    k * model.place[data["precedence"][p][0], k] for k in model.K) + 1 <= sum(
    k * model.place[data["precedence"][p][1], k] for k in model.K))
'''
    model_code = _HEAD + _MAKESPAN + _BODY  # the classic model: makespan, no release times or precedences

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._MAKESPAN if data["objective"] == "makespan" else self._TOTAL) + self._BODY
        if "release" in data:
            code += self._RELEASE
        if "precedence" in data:
            code += self._PRECEDENCE
        return code

    def variant_of(self, data: dict) -> str:
        return "+".join([data["objective"]] + [key for key in ("release", "precedence") if key in data])

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_jobs = size_for(difficulty, 4, 5, 6)
        n_machines = size_for(difficulty, 3, 3, 4)
        jobs = [f"{words['job_prefix']}{k}" for k in sorted(rng.sample(range(1, 60), n_jobs))]
        machines = words["machines"][:n_machines]
        low, high = words["time_range"]
        time = {j: {m: rng.randint(low, high) for m in machines} for j in jobs}
        data = {"jobs": jobs, "machines": machines, "time": time,
                "objective": rng.choice(("makespan", "total_completion"))}
        if rng.random() < 0.5:
            # some jobs arrive later, within the span of the first machine's work
            span = sum(time[j][machines[0]] for j in jobs)
            data["release"] = {j: (rng.randint(0, span // 2) if rng.random() < 0.6 else 0) for j in jobs}
        if rng.random() < 0.5:
            order = rng.sample(jobs, n_jobs)  # precedences follow one hidden order, so no cycle
            pairs = set()
            for _ in range(max(1, n_jobs // 3)):
                a, b = sorted(rng.sample(range(n_jobs), 2))
                pairs.add((order[a], order[b]))
            data["precedence"] = [list(pair) for pair in sorted(pairs)]
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # two jobs that must each come before the other
        a, b = rng.sample(data["jobs"], 2)
        pairs = [pair for pair in data.get("precedence", []) if set(pair) != {a, b}]
        return {**data, "precedence": sorted(pairs + [[a, b], [b, a]])}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        jobs, machines = data["jobs"], data["machines"]
        positions = range(1, len(jobs) + 1)
        first, last = machines[0], machines[-1]
        place = {(j, k): matrix.add_var(f"place[{j},{k}]", 0, 1, integer=True) for j in jobs for k in positions}
        total = data["objective"] == "total_completion"
        finish = {(k, m): matrix.add_var(f"finish[{k},{m}]", 0.0, cost=1.0 if m == last and (total or k == len(jobs))
                                         else 0.0) for k in positions for m in machines}
        for j in jobs:
            matrix.add_row({place[j, k]: 1.0 for k in positions}, 1, 1, name=f"one_position[{j}]")
        for k in positions:
            matrix.add_row({place[j, k]: 1.0 for j in jobs}, 1, 1, name=f"one_job[{k}]")
            for index, m in enumerate(machines):
                # finish[k,m] - finish[k-1,m] - sum_j p_jm place[j,k] >= 0
                row = {finish[k, m]: 1.0, **{place[j, k]: -data["time"][j][m] for j in jobs}}
                if k > 1:
                    row[finish[k - 1, m]] = -1.0
                matrix.add_row(row, lower=0.0, name=f"after_previous_job[{k},{m}]")
                if index > 0:
                    row = {finish[k, m]: 1.0, finish[k, machines[index - 1]]: -1.0,
                           **{place[j, k]: -data["time"][j][m] for j in jobs}}
                    matrix.add_row(row, lower=0.0, name=f"after_previous_machine[{k},{m}]")
            if "release" in data:
                row = {finish[k, first]: 1.0,
                       **{place[j, k]: -(data["release"][j] + data["time"][j][first]) for j in jobs}}
                matrix.add_row(row, lower=0.0, name=f"release[{k}]")
        for a, b in data.get("precedence", ()):
            row: dict[int, float] = {}
            for k in positions:
                row[place[a, k]] = row.get(place[a, k], 0.0) + k
                row[place[b, k]] = row.get(place[b, k], 0.0) - k
            matrix.add_row(row, upper=-1.0, name=f"precedence[{a},{b}]")

    def constraint_rows(self, data: dict, x: dict):
        place, finish = x["place"], x["finish"]
        jobs, machines = data["jobs"], data["machines"]
        positions = range(1, len(jobs) + 1)
        for j in jobs:
            yield Row(f"one_position[{j}]", sum(place[j, k] for k in positions), "==", 1)
        for k in positions:
            yield Row(f"one_job[{k}]", sum(place[j, k] for j in jobs), "==", 1)
            for index, m in enumerate(machines):
                work = sum(data["time"][j][m] * place[j, k] for j in jobs)
                previous = finish[k - 1, m] if k > 1 else 0.0
                yield Row(f"after_previous_job[{k},{m}]", finish[k, m] - previous - work, ">=", 0)
                if index > 0:
                    yield Row(f"after_previous_machine[{k},{m}]",
                              finish[k, m] - finish[k, machines[index - 1]] - work, ">=", 0)
            if "release" in data:
                arrival = sum((data["release"][j] + data["time"][j][machines[0]]) * place[j, k] for j in jobs)
                yield Row(f"release[{k}]", finish[k, machines[0]] - arrival, ">=", 0)
        for a, b in data.get("precedence", ()):
            yield Row(f"precedence[{a},{b}]", sum(k * (place[a, k] - place[b, k]) for k in positions), "<=", -1)

    def objective_value(self, data: dict, x: dict) -> float:
        last, n = data["machines"][-1], len(data["jobs"])
        if data["objective"] == "makespan":
            return x["finish"][n, last]
        return sum(x["finish"][k, last] for k in range(1, n + 1))

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        n, last = len(data["jobs"]), data["machines"][-1]
        order = [j for k in range(1, n + 1) for j in data["jobs"] if x["place"][j, k] > 0.5]
        done = ", ".join(f"{j} at {fmt(round(x['finish'][k + 1, last], 4))}" for k, j in enumerate(order))
        return f"- sequence: {' -> '.join(order)}\n- leaves the {last}: {done}"

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        jobs, machines = data["jobs"], data["machines"]
        job, job_plural = words["job"], words["jobs"]
        intro = {
            "bakery": f"{words['company'].capitalize()} has {len(jobs)} {job_plural} to bake today on its line: "
                      f"{' -> '.join(machines)}.",
            "electronics": f"{words['company'].capitalize()} runs {len(jobs)} {job_plural} through its line "
                           f"({' -> '.join(machines)}) this shift.",
            "furniture": f"{words['company'].capitalize()} must put {len(jobs)} {job_plural} through "
                         f"{len(machines)} stations in a row: {' -> '.join(machines)}.",
            "printing": f"{words['company'].capitalize()} has queued {len(jobs)} {job_plural} for a line made of "
                        f"{' -> '.join(machines)}.",
            "brewing": f"In the brewhouse of {words['company']}, {len(jobs)} {job_plural} pass through the vessels "
                       f"{' -> '.join(machines)}, one vessel after another.",
        }[scenario.key]
        rules = ("Every job visits the machines in the order listed, and all machines process the jobs in the same "
                 f"sequence. A machine works on one job at a time, and a {job} is never interrupted. All times are in "
                 "minutes, counted from now.")
        if "release" in data:
            late = [j for j in jobs if data["release"][j] > 0]
            arrivals = "; ".join(f"{j} at {fmt(data['release'][j])}" for j in jobs)
            rules += (f" Not every {job} is ready now: {join_names(late) if late else 'none'} "
                      f"{'arrives' if len(late) == 1 else 'arrive'} later. Each "
                      f"{job} can start on the {machines[0]} only from its release time: {arrivals}.")
        if "precedence" in data:
            pairs = "; ".join(f"{a} before {b}" for a, b in data["precedence"])
            rules += f" Some {job_plural} must come earlier in the sequence than others: {pairs}."
        if data["objective"] == "makespan":
            goal = (f"In which sequence should the {job_plural} run so that the last one leaves the {machines[-1]} "
                    "as early as possible? What is that minimum makespan, in minutes?")
        else:
            goal = (f"In which sequence should the {job_plural} run to minimize the sum of their completion times "
                    f"(when each leaves the {machines[-1]})? What is that minimum total, in minutes?")
        if representation == "text":
            times = " ".join(f"{j} needs " + ", ".join(f"{fmt(data['time'][j][m])} on the {m}" for m in machines) + "."
                             for j in jobs)
            return f"{intro} {rules} {times} {goal}"
        if representation == "table":
            table = markdown_table([f"{job} (minutes)", *machines], [[j, *[data["time"][j][m] for m in machines]]
                                                                     for j in jobs])
            return f"{intro} {rules}\n\n{table}\n\n{goal}"
        if representation == "file":
            return f"{intro} {rules} {goal}\n\n{describe_data_file(self.data_fields)}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        objective = "C_{n,\\bar m}" if data["objective"] == "makespan" else "\\sum_{k} C_{k,\\bar m}"
        parameters = "processing time $p_{jm}$, last machine $\\bar m$, $n = |J|$"
        rows = ["\\text{s.t.}\\ & \\sum_{k} x_{jk} = 1,\\ \\sum_{j} x_{jk} = 1 && \\forall j, k",
                "& C_{km} \\ge C_{k-1,m} + \\sum_j p_{jm} x_{jk} && \\forall k, m \\quad (C_{0m} = 0)",
                "& C_{km} \\ge C_{k,m-1} + \\sum_j p_{jm} x_{jk} && \\forall k, m > 1"]
        if "release" in data:
            parameters += ", release time $r_j$"
            rows.append("& C_{k,1} \\ge \\sum_j (r_j + p_{j1}) x_{jk} && \\forall k")
        if "precedence" in data:
            rows.append("& \\sum_k k\\, x_{ak} + 1 \\le \\sum_k k\\, x_{bk} && \\forall (a, b) \\in \\Pi")
        rows.append("& x_{jk} \\in \\{0, 1\\},\\ C_{km} \\ge 0")
        sets = "jobs $J$, machines $M$ in route order, positions $k = 1..n$"
        if "precedence" in data:
            sets += ", precedence pairs $\\Pi$"
        return (f"**Sets**: {sets}.\n\n**Parameters**: {parameters}.\n\n"
                "**Variables**: $x_{jk} = 1$ when job $j$ is in position $k$; $C_{km}$, when the job in position $k$ "
                "leaves machine $m$.\n\n"
                f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows)
                + "\n\\end{aligned}\n$$")


FAMILY = FlowShop()
