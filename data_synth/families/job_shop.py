"""Job shop (MILP): every job visits every machine once, in its own route order; a machine handles one
job at a time. Disjunctive formulation: start times per operation and, for every two jobs on every
machine, a binary saying which goes first, linked by big-M constraints with M the length of a schedule
that runs everything one after another (so it is valid and small).

Structure variants (drawn per instance, recorded by the keys present): the objective (`"objective"`:
the makespan or the total completion time), release times (`release`) and hard due dates (`due`),
each independent: eight program skeletons."""

from __future__ import annotations

import random

from data_synth.family import (
    MatrixModel,
    ProblemFamily,
    Row,
    Scenario,
    describe_data_file,
    fmt,
    markdown_table,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("machining", "precision machining", {
        "company": "a precision machining shop", "job": "part", "jobs": "parts", "job_prefix": "Part ",
        "machines": ["lathe", "mill", "drill press", "grinder"], "time_range": (4, 20), "unit": "hours",
    }),
    Scenario("postproduction", "film post-production", {
        "company": "a post-production studio", "job": "film", "jobs": "films", "job_prefix": "Reel ",
        "machines": ["editing suite", "colour suite", "sound stage", "VFX room"], "time_range": (3, 15),
        "unit": "hours",
    }),
    Scenario("lab", "clinical laboratories", {
        "company": "a clinical laboratory", "job": "sample batch", "jobs": "sample batches", "job_prefix": "Batch ",
        "machines": ["centrifuge", "analyser", "sequencer", "microscope"], "time_range": (10, 45),
        "unit": "minutes",
    }),
)
# the eval split's own industries, companies, job and machine names and units (held out from training)
EVAL_SCENARIOS = (
    Scenario("printing", "commercial printing", {
        "company": "a commercial print house", "job": "print order", "jobs": "print orders",
        "job_prefix": "Order ", "machines": ["offset press", "laminator", "guillotine cutter", "saddle stitcher"],
        "time_range": (5, 25), "unit": "hours",
    }),
    Scenario("joinery", "furniture joinery", {
        "company": "a joinery workshop", "job": "cabinet", "jobs": "cabinets", "job_prefix": "Cabinet ",
        "machines": ["panel saw", "edge bander", "CNC router", "spray booth"], "time_range": (2, 12),
        "unit": "hours",
    }),
    Scenario("dental", "dental prosthetics", {
        "company": "a dental laboratory", "job": "crown case", "jobs": "crown cases", "job_prefix": "Case ",
        "machines": ["intraoral scanner", "milling unit", "sintering furnace", "glazing oven"],
        "time_range": (15, 60), "unit": "minutes",
    }),
)


def _pairs(data: dict) -> list[tuple[str, str]]:
    jobs = data["jobs"]
    return [(jobs[a], jobs[b]) for a in range(len(jobs)) for b in range(a + 1, len(jobs))]


def _horizon(data: dict) -> int:
    """Every operation one after another, after the last release: no schedule needs longer."""
    return max(data.get("release", {"none": 0}).values()) + sum(sum(times.values()) for times in data["time"].values())


class JobShop(ProblemFamily):
    name = "job_shop"
    title = "Job shop scheduling"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"start": "nonnegative", "before": "binary", "makespan": "nonnegative"}
    phrasings = (
        Phrasing(r"Each job follows its own route through the machines\.",
                 ("Each job follows its own route through the machines.",
                  "Every job has its own order of machines."),
                 ("The machine sequence differs from job to job.",)),
        Phrasing(r"\bno operation is interrupted\b", ("no operation is interrupted", "operations run without a break"),
                 ("an operation, once started, runs to the end",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bTimes are in\b", ("Times are in",), ("All times are expressed in",)),
        Phrasing(r"\bcannot start before its release time:", ("cannot start before its release time:",),
                 ("can begin no earlier than the moment it is released:",)),
        Phrasing(r"\bmust be complete by its due time:", ("must be complete by its due time:",),
                 ("has to be finished no later than its deadline:",)),
        Phrasing(r"\bHow should the operations be scheduled so that all\b",
                 ("How should the operations be scheduled so that all",), ("Which operation schedule lets all",)),
        Phrasing(r"\bare done as early as possible\?", ("are done as early as possible?",),
                 ("be finished at the earliest moment?",)),
        # "makespan" is a value of data["objective"], so it is kept verbatim and the rule sees the text up to it
        Phrasing(r"\bWhat is the minimum (?=$)", ("What is the minimum ",),
                 ("How long, at the least, is the ",)),
        Phrasing(r"\bHow should the operations be scheduled to minimize the sum of the\b",
                 ("How should the operations be scheduled to minimize the sum of the",),
                 ("Which operation schedule gives the smallest sum of the",)),
        Phrasing(r"\bminimum total, in\b", ("minimum total, in",), ("smallest possible sum, in",)),
        Phrasing(r"\bRoutes with processing times:", ("Routes with processing times:",),
                 ("Machine sequence and processing time of every job:",)),
        Phrasing(r"\bstep (?=\d+ \(machine, )", ("step ",), ("operation ",)),
        Phrasing(r"\blist of job names\b", ("list of job names",), ("names of all jobs",)),
        Phrasing(r"\blist of machine names\b", ("list of machine names",), ("names of all machines",)),
        Phrasing(r"\bthe machines in the order the job visits them \(each once\)",
                 ("the machines in the order the job visits them (each once)",),
                 ("machine sequence of the job, in visiting order, with every machine exactly once",)),
        Phrasing(r"\bprocessing time of the job's operation on the machine\b",
                 ("processing time of the job's operation on the machine",),
                 ("duration of the job's operation on that machine",)),
        Phrasing(r"\(finish everything as early as possible\)", ("(finish everything as early as possible)",),
                 ("(complete all work at the earliest)",)),
        Phrasing(r"\(minimize the sum of the jobs' completion times\)",
                 ("(minimize the sum of the jobs' completion times)",),
                 ("(make the completion times of the jobs add up to as little as possible)",)),
        Phrasing(r"\bearliest start of each job's first operation\b", ("earliest start of each job's first operation",),
                 ("first moment at which a job's first operation may begin",)),
        Phrasing(r"\btime by which each job must be complete\b", ("time by which each job must be complete",),
                 ("deadline for finishing a job",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(present only if",)),
    )
    data_fields = {
        "jobs": "list of job names",
        "machines": "list of machine names",
        "route": "route[job]: the machines in the order the job visits them (each once)",
        "time": "time[job][machine]: processing time of the job's operation on the machine",
        "objective": '"makespan" (finish everything as early as possible) or "total_completion" (minimize the sum '
                     "of the jobs' completion times)",
        "release": "earliest start of each job's first operation, keyed by job (only when jobs have release times)",
        "due": "time by which each job must be complete, keyed by job (only when there are due dates)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.J = pyo.Set(initialize=data["jobs"])
model.M = pyo.Set(initialize=data["machines"])
jobs = data["jobs"]
pairs = [(jobs[a], jobs[b], m) for a in range(len(jobs)) for b in range(a + 1, len(jobs)) for m in data["machines"]]
# a schedule that runs every operation one after another, after the last release, is never longer
horizon = max(data.get("release", {"none": 0}).values()) + sum(sum(t.values()) for t in data["time"].values())
model.start = pyo.Var(model.J, model.M, domain=pyo.NonNegativeReals)
model.before = pyo.Var(pairs, domain=pyo.Binary)  # 1 when job j precedes job k on machine m


def completion(model, j):
    last = data["route"][j][-1]
    return model.start[j, last] + data["time"][j][last]


'''
    _MAKESPAN = '''\
model.makespan = pyo.Var(domain=pyo.NonNegativeReals)
model.obj = pyo.Objective(expr=model.makespan, sense=pyo.minimize)
model.last_job = pyo.Constraint(model.J, rule=lambda model, j: model.makespan >= completion(model, j))
'''
    _TOTAL = '''\
model.obj = pyo.Objective(expr=sum(completion(model, j) for j in model.J), sense=pyo.minimize)
'''
    _BODY = '''\


def route_order(model, j, step):  # the next machine of the route starts once the previous one is done
    here, after = data["route"][j][step], data["route"][j][step + 1]
    return model.start[j, after] >= model.start[j, here] + data["time"][j][here]


model.route_order = pyo.Constraint([(j, s) for j in jobs for s in range(len(data["machines"]) - 1)],
                                   rule=route_order)
model.j_first = pyo.Constraint(pairs, rule=lambda model, j, k, m: model.start[k, m] >= model.start[j, m]
                               + data["time"][j][m] - horizon * (1 - model.before[j, k, m]))
model.k_first = pyo.Constraint(pairs, rule=lambda model, j, k, m: model.start[j, m] >= model.start[k, m]
                               + data["time"][k][m] - horizon * model.before[j, k, m])
'''
    _RELEASE = '''\
model.release = pyo.Constraint(model.J, rule=lambda model, j: model.start[j, data["route"][j][0]] >= data["release"][j])
'''
    _DUE = '''\
model.due = pyo.Constraint(model.J, rule=lambda model, j: completion(model, j) <= data["due"][j])
'''
    model_code = _HEAD + _MAKESPAN + _BODY  # the classic job shop: makespan, no release or due times

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._MAKESPAN if data["objective"] == "makespan" else self._TOTAL) + self._BODY
        if "release" in data:
            code += self._RELEASE
        if "due" in data:
            code += self._DUE
        return code

    def domains_for(self, data: dict) -> dict[str, str]:
        if data["objective"] == "makespan":
            return self.domains
        return {name: domain for name, domain in self.domains.items() if name != "makespan"}

    def variant_of(self, data: dict) -> str:
        return "+".join([data["objective"]] + [key for key in ("release", "due") if key in data])

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_jobs = size_for(difficulty, 3, 4, 5)
        n_machines = size_for(difficulty, 3, 3, 4)
        jobs = [f"{words['job_prefix']}{k}" for k in sorted(rng.sample(range(1, 40), n_jobs))]
        machines = words["machines"][:n_machines]
        low, high = words["time_range"]
        route = {j: rng.sample(machines, n_machines) for j in jobs}
        time = {j: {m: rng.randint(low, high) for m in machines} for j in jobs}
        data = {"jobs": jobs, "machines": machines, "route": route, "time": time,
                "objective": rng.choice(("makespan", "total_completion"))}
        if rng.random() < 0.5:
            data["release"] = {j: (rng.randint(1, 2 * high) if rng.random() < 0.6 else 0) for j in jobs}
        if rng.random() < 0.5:
            # due dates that a simple dispatching schedule meets, some of them with little slack
            witness = self._dispatch(data)
            data["due"] = {j: witness[j] + rng.choice((0, rng.randint(1, high))) for j in jobs}
        return data

    @staticmethod
    def _dispatch(data: dict) -> dict[str, int]:
        """Completion times of a feasible schedule: operations taken round by round along the routes, each
        as early as its job and its machine allow."""
        machine_free = dict.fromkeys(data["machines"], 0)
        job_free = {j: data.get("release", {}).get(j, 0) for j in data["jobs"]}
        for step in range(len(data["machines"])):
            for j in data["jobs"]:
                m = data["route"][j][step]
                begin = max(machine_free[m], job_free[j])
                machine_free[m] = job_free[j] = begin + data["time"][j][m]
        return job_free

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one job due before even its own operations, run back to back from its release, can be done
        j = rng.choice(data["jobs"])
        own = data.get("release", {}).get(j, 0) + sum(data["time"][j].values())
        due = dict(data.get("due", dict.fromkeys(data["jobs"], _horizon(data))))
        due[j] = own - 1
        return {**data, "due": due}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        jobs, machines, time = data["jobs"], data["machines"], data["time"]
        total = data["objective"] == "total_completion"
        last = {j: data["route"][j][-1] for j in jobs}
        start = {(j, m): matrix.add_var(f"start[{j},{m}]", 0.0, cost=1.0 if total and m == last[j] else 0.0)
                 for j in jobs for m in machines}
        if total:
            matrix.objective_offset = sum(time[j][last[j]] for j in jobs)
        else:
            makespan = matrix.add_var("makespan", 0.0, cost=1.0)
            for j in jobs:
                matrix.add_row({makespan: 1.0, start[j, last[j]]: -1.0}, lower=time[j][last[j]], name=f"last_job[{j}]")
        for j in jobs:
            for here, after in zip(data["route"][j], data["route"][j][1:], strict=False):
                matrix.add_row({start[j, after]: 1.0, start[j, here]: -1.0}, lower=time[j][here],
                               name=f"route_order[{j},{here}]")
            if "release" in data:
                matrix.add_row({start[j, data["route"][j][0]]: 1.0}, lower=data["release"][j], name=f"release[{j}]")
            if "due" in data:
                matrix.add_row({start[j, last[j]]: 1.0}, upper=data["due"][j] - time[j][last[j]], name=f"due[{j}]")
        horizon = _horizon(data)
        for j, k in _pairs(data):
            for m in machines:
                before = matrix.add_var(f"before[{j},{k},{m}]", 0, 1, integer=True)
                # start_k - start_j - H before >= p_j - H
                matrix.add_row({start[k, m]: 1.0, start[j, m]: -1.0, before: -horizon}, lower=time[j][m] - horizon,
                               name=f"j_first[{j},{k},{m}]")
                # start_j - start_k + H before >= p_k
                matrix.add_row({start[j, m]: 1.0, start[k, m]: -1.0, before: horizon}, lower=time[k][m],
                               name=f"k_first[{j},{k},{m}]")

    def _completion(self, data: dict, x: dict, j: str) -> float:
        last = data["route"][j][-1]
        return x["start"][j, last] + data["time"][j][last]

    def constraint_rows(self, data: dict, x: dict):
        start, before, time = x["start"], x["before"], data["time"]
        horizon = _horizon(data)
        for j in data["jobs"]:
            for here, after in zip(data["route"][j], data["route"][j][1:], strict=False):
                yield Row(f"route_order[{j},{here}]", start[j, after] - start[j, here], ">=", time[j][here])
            if data["objective"] == "makespan":
                yield Row(f"last_job[{j}]", x["makespan"][None], ">=", self._completion(data, x, j))
            if "release" in data:
                yield Row(f"release[{j}]", start[j, data["route"][j][0]], ">=", data["release"][j])
            if "due" in data:
                yield Row(f"due[{j}]", self._completion(data, x, j), "<=", data["due"][j])
        for j, k in _pairs(data):
            for m in data["machines"]:
                b = before[j, k, m]
                yield Row(f"j_first[{j},{k},{m}]", start[k, m] - start[j, m] + horizon * (1 - b), ">=", time[j][m])
                yield Row(f"k_first[{j},{k},{m}]", start[j, m] - start[k, m] + horizon * b, ">=", time[k][m])

    def objective_value(self, data: dict, x: dict) -> float:
        if data["objective"] == "makespan":
            return x["makespan"][None]
        return sum(self._completion(data, x, j) for j in data["jobs"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        lines = []
        for m in data["machines"]:
            order = sorted(data["jobs"], key=lambda j: x["start"][j, m])
            lines.append(f"- {m}: " + ", ".join(f"{j} from {fmt(round(x['start'][j, m], 4))}" for j in order))
        return "\n".join(lines)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        jobs, machines, unit = data["jobs"], data["machines"], words["unit"]
        job, job_plural = words["job"], words["jobs"]
        intro = {
            "machining": f"{words['company'].capitalize()} has {len(jobs)} {job_plural} to make, each needing one "
                         f"operation on every machine ({', '.join(machines)}).",
            "postproduction": f"{words['company'].capitalize()} must finish {len(jobs)} {job_plural}; each passes "
                              f"through the {', '.join(machines)} once.",
            "lab": f"{words['company'].capitalize()} has {len(jobs)} {job_plural} waiting, each to be processed "
                   f"once on each instrument: {', '.join(machines)}.",
            "printing": f"{words['company'].capitalize()} has {len(jobs)} {job_plural} in its queue; every one of "
                        f"them goes once through all of these machines: {', '.join(machines)}.",
            "joinery": f"This week {words['company']} is building {len(jobs)} {job_plural}, and every {job} gets "
                       f"one operation on all of its machines ({', '.join(machines)}).",
            "dental": f"At {words['company']}, {len(jobs)} {job_plural} are waiting; each one has to pass once "
                      f"through every station, namely the {', '.join(machines)}.",
        }[scenario.key]
        rules = (f"Each job follows its own route through the machines. A machine handles one {job} at a time and "
                 f"no operation is interrupted. Times are in {unit} from now.")
        if "release" in data:
            rules += f" A {job} cannot start before its release time: " + "; ".join(
                f"{j} at {fmt(data['release'][j])}" for j in jobs) + "."
        if "due" in data:
            rules += f" Each {job} must be complete by its due time: " + "; ".join(
                f"{j} by {fmt(data['due'][j])}" for j in jobs) + "."
        if data["objective"] == "makespan":
            goal = (f"How should the operations be scheduled so that all {job_plural} are done as early as possible? "
                    f"What is the minimum makespan, in {unit}?")
        else:
            goal = (f"How should the operations be scheduled to minimize the sum of the {job_plural}' completion "
                    f"times? What is that minimum total, in {unit}?")
        if representation == "text":
            routes = " ".join(f"{j}: " + ", then ".join(f"{m} ({fmt(data['time'][j][m])})" for m in data["route"][j])
                              + "." for j in jobs)
            return f"{intro} {rules} Routes with processing times: {routes} {goal}"
        if representation == "table":
            rows = [[j, *[f"{m} ({fmt(data['time'][j][m])})" for m in data["route"][j]]] for j in jobs]
            table = markdown_table([job, *[f"step {s + 1} (machine, {unit})" for s in range(len(machines))]], rows)
            return f"{intro} {rules}\n\n{table}\n\n{goal}"
        if representation == "file":
            return f"{intro} {rules} {goal}\n\n{describe_data_file(self.data_fields)}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        makespan = data["objective"] == "makespan"
        objective = "C_{\\max}" if makespan else "\\sum_{j} (S_{j,\\ell_j} + p_{j,\\ell_j})"
        parameters = ("route $\\sigma_j$ (last machine $\\ell_j$), processing time $p_{jm}$, "
                      "$H = \\max_j r_j + \\sum_{j,m} p_{jm}$")
        rows = ["\\text{s.t.}\\ & S_{j,\\sigma_j(s+1)} \\ge S_{j,\\sigma_j(s)} + p_{j,\\sigma_j(s)} && \\forall j, s",
                "& S_{km} \\ge S_{jm} + p_{jm} - H (1 - y_{jkm}) && \\forall j < k, m",
                "& S_{jm} \\ge S_{km} + p_{km} - H y_{jkm} && \\forall j < k, m"]
        if makespan:
            rows.append("& C_{\\max} \\ge S_{j,\\ell_j} + p_{j,\\ell_j} && \\forall j")
        if "release" in data:
            parameters += ", release $r_j$"
            rows.append("& S_{j,\\sigma_j(1)} \\ge r_j && \\forall j")
        if "due" in data:
            parameters += ", due time $d_j$"
            rows.append("& S_{j,\\ell_j} + p_{j,\\ell_j} \\le d_j && \\forall j")
        rows.append("& S_{jm} \\ge 0,\\ y_{jkm} \\in \\{0, 1\\}")
        variables = "; makespan $C_{\\max}$" if makespan else ""
        return ("**Sets**: jobs $J$, machines $M$.\n\n"
                f"**Parameters**: {parameters}.\n\n"
                "**Variables**: start $S_{jm}$ of job $j$ on machine $m$; $y_{jkm} = 1$ when $j$ precedes $k$ on "
                f"$m${variables}.\n\n"
                f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows)
                + "\n\\end{aligned}\n$$")


FAMILY = JobShop()
