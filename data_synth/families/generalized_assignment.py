"""Generalized assignment (IP): give every task to exactly one agent, each agent within its capacity (a task
uses a different amount of capacity depending on the agent), at the least total cost.

Structure variants (drawn per instance, recorded by the keys present): a most number of tasks per agent
(`max_tasks`), agent-task pairs that are not allowed (`forbidden`) and pairs of tasks that must go to
different agents (`conflicts`), each present or absent, so the program has eight skeletons. The limits are
drawn around a feasible assignment found greedily, so every variant stays feasible."""

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
    Scenario("consulting", "management consulting", {
        "intro": "A consulting firm must staff its incoming client engagements.",
        "agent": "consultant", "agents": ["Avery", "Blake", "Casey", "Devon", "Emery", "Finley", "Harper"],
        "task": "engagement", "task_prefix": "Engagement ", "load_unit": "days", "money": "dollars",
        "period": "this quarter",
    }),
    Scenario("cloud", "cloud computing", {
        "intro": "A cloud operator is placing batch jobs on its servers for tonight's run.",
        "agent": "server", "agents": ["srv-a", "srv-b", "srv-c", "srv-d", "srv-e", "srv-f", "srv-g"],
        "task": "job", "task_prefix": "Job ", "load_unit": "GB of memory", "money": "cents",
        "period": "tonight",
    }),
    Scenario("trucks", "freight forwarding", {
        "intro": "A freight forwarder allocates this week's shipments to its contracted hauliers.",
        "agent": "haulier", "agents": ["Nordline", "Westway", "Southcargo", "Eastfreight", "Midroute",
                                       "Coastal", "Ridge"],
        "task": "shipment", "task_prefix": "Shipment ", "load_unit": "truck-hours", "money": "euros",
        "period": "this week",
    }),
)

# the eval split's own industries, companies, agent names and units (held out from training)
EVAL_SCENARIOS = (
    Scenario("translation", "translation services", {
        "intro": "A translation agency is handing out this month's document orders to its freelance translators.",
        "agent": "translator", "agents": ["Ingrid", "Tomasz", "Amara", "Joaquin", "Mei", "Oskar", "Priya"],
        "task": "document", "task_prefix": "Doc ", "load_unit": "pages", "money": "pounds",
        "period": "this month",
    }),
    Scenario("utility", "electric utilities", {
        "intro": "A power utility is sending its field crews out to inspect substations.",
        "agent": "crew", "agents": ["Crew Alder", "Crew Birch", "Crew Cedar", "Crew Larch", "Crew Maple",
                                    "Crew Rowan", "Crew Spruce"],
        "task": "inspection", "task_prefix": "Substation ", "load_unit": "person-days", "money": "Swiss francs",
        "period": "this month",
    }),
)


class GeneralizedAssignment(ProblemFamily):
    name = "generalized_assignment"
    title = "Generalized assignment"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"assign": "binary"}
    data_fields = {
        "agents": "list of agent names",
        "tasks": "list of task names",
        "capacity": "capacity of each agent for the period, keyed by agent",
        "load": "load[agent][task]: capacity the task uses when that agent does it",
        "cost": "cost[agent][task]: cost of that agent doing the task",
        "max_tasks": "most tasks one agent may take (only when there is such a limit)",
        "forbidden": "list of [agent, task] pairs: the agent may not do the task (only when some pairs are not "
                     "allowed)",
        "conflicts": "list of [task, task] pairs that must go to different agents (only when there are such pairs)",
    }
    phrasings = (
        Phrasing(r"\bmust be given to exactly one\b", ("must be given to exactly one", "goes to exactly one"),
                 ("is handled by a single", "is placed with precisely one")),
        Phrasing(r"\bwithout exceeding\b", ("without exceeding", "while staying within"),
                 ("keeping under or at", "never going over")),
        Phrasing(r"\bmay take on more than\b", ("may take on more than", "can be given more than"),
                 ("is allowed over",)),
        Phrasing(r"Some assignments are not allowed:", ("Some assignments are not allowed:",
                                                        "A few assignments are ruled out:"),
                 ("Certain pairings are excluded:",)),
        Phrasing(r"\bmust go to different\b", ("must go to different", "have to go to different"),
                 ("are to be split between two distinct",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bThere are\b(?= \d)", ("There are",), ("The work involves",)),
        Phrasing(r"\btakes on\b", ("takes on",), ("accepts",)),
        Phrasing(r"\bits capacity\b", ("its capacity",), ("the capacity available",)),
        Phrasing(r"\bHow much capacity one\b", ("How much capacity one",), ("The capacity that one",)),
        Phrasing(r"\buses and what it costs depend on the\b", ("uses and what it costs depend on the",),
                 ("consumes, and its cost, vary with the",)),
        Phrasing(r"\bwho does it\.", ("who does it.",), ("assigned to it.",)),
        Phrasing(r"\bthey are listed in the data file\.", ("they are listed in the data file.",),
                 ("the data file names them.",)),
        Phrasing(r"\bcannot do\b", ("cannot do",), ("is barred from",)),
        Phrasing(r"\bSome pairs of\b", ("Some pairs of",), ("Certain pairs of",)),
        Phrasing(r"\bshould do each\b", ("should do each",), ("is to handle each",)),
        # stops before "what is that", which the generic rules word two ways in training
        Phrasing(r"\bto minimize the total cost, and\b", ("to minimize the total cost, and",),
                 ("so that the cost adds up to as little as possible, and",)),
        Phrasing(r"\bCapacities:", ("Capacities:",), ("Available capacity:",)),
        Phrasing(r"\bhas\b(?= \d)", ("has",), ("can take",)),
        Phrasing(r"\bdoes them:", ("does them:",), ("is given them:",)),
        Phrasing(r"\buses\b(?= \d)", ("uses",), ("takes up",)),
        Phrasing(r"\band costs\b(?= \d)", ("and costs",), ("for a price of",)),
        Phrasing(r"\bload\b(?= \()", ("load",), ("usage",)),
        Phrasing(r"(?<=\| )capacity(?= \|)", ("capacity",), ("limit",)),
        Phrasing(r"\bcost\b(?= \()", ("cost",), ("price",)),
        Phrasing(r"\blist of agent names\b", ("list of agent names",), ("names of the agents",)),
        Phrasing(r"\blist of task names\b", ("list of task names",), ("names of the tasks",)),
        Phrasing(r"\bcapacity of each agent for the period\b", ("capacity of each agent for the period",),
                 ("amount of work every agent can handle in the period",)),
        Phrasing(r"\bcapacity the task uses when that agent does it\b",
                 ("capacity the task uses when that agent does it",),
                 ("capacity consumed by the task if that agent handles it",)),
        Phrasing(r"\bcost of that agent doing the task\b", ("cost of that agent doing the task",),
                 ("price charged when that agent handles the task",)),
        Phrasing(r"\bmost tasks one agent may take\b", ("most tasks one agent may take",),
                 ("largest number of tasks a single agent can accept",)),
        Phrasing(r"\blist of \[agent, task\] pairs: the agent may not do the task\b",
                 ("list of [agent, task] pairs: the agent may not do the task",),
                 ("[agent, task] pairs in which the agent is barred from the task",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(present only if",)),
    )
    # the pieces of `model_code_for`: the base model always, each optional group when its key is present
    _BASE = '''\
model = pyo.ConcreteModel()
model.A = pyo.Set(initialize=data["agents"])
model.T = pyo.Set(initialize=data["tasks"])
model.assign = pyo.Var(model.A, model.T, domain=pyo.Binary)

model.obj = pyo.Objective(
    expr=sum(data["cost"][a][t] * model.assign[a, t] for a in model.A for t in model.T), sense=pyo.minimize
)
# every task goes to exactly one agent
model.one_agent = pyo.Constraint(model.T, rule=lambda model, t: sum(model.assign[a, t] for a in model.A) == 1)
# an agent's load stays within its capacity
model.capacity = pyo.Constraint(
    model.A, rule=lambda model, a: sum(data["load"][a][t] * model.assign[a, t] for t in model.T) <= data["capacity"][a]
)
'''
    _MAX_TASKS = '''\
model.max_tasks = pyo.Constraint(
    model.A, rule=lambda model, a: sum(model.assign[a, t] for t in model.T) <= data["max_tasks"]
)
'''
    _FORBIDDEN = '''\
model.banned = pyo.Set(initialize=[tuple(pair) for pair in data["forbidden"]], dimen=2)
model.forbidden = pyo.Constraint(model.banned, rule=lambda model, a, t: model.assign[a, t] == 0)
'''
    _CONFLICTS = '''\
# two conflicting tasks never go to the same agent
model.conflicting = pyo.Set(initialize=[tuple(pair) for pair in data["conflicts"]], dimen=2)
model.conflicts = pyo.Constraint(
    model.A, model.conflicting, rule=lambda model, a, t, u: model.assign[a, t] + model.assign[a, u] <= 1
)
'''

    model_code = _BASE  # the base model (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._BASE
        if "max_tasks" in data:
            code += self._MAX_TASKS
        if "forbidden" in data:
            code += self._FORBIDDEN
        if "conflicts" in data:
            code += self._CONFLICTS
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("max_tasks", "forbidden", "conflicts") if name in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_agents = size_for(difficulty, 3, 5, 7)
        n_tasks = size_for(difficulty, 7, 14, 24)
        agents = rng.sample(words["agents"], n_agents)
        tasks = [f"{words['task_prefix']}{k}" for k in sorted(rng.sample(range(1, 100), n_tasks))]
        load = {a: {t: rng.randint(3, 20) for t in tasks} for a in agents}
        cost = {a: {t: rng.randint(10, 90) for t in tasks} for a in agents}
        # capacities leave 15-45% slack over an even share of the average load, so the instance is
        # feasible but the cheapest agent cannot take everything
        average = sum(load[a][t] for a in agents for t in tasks) / n_agents
        capacity = {a: int(average / n_agents * rng.uniform(1.15, 1.45)) + 20 for a in agents}
        data = {"agents": agents, "tasks": tasks, "capacity": capacity, "load": load, "cost": cost}
        max_tasks, forbidden, conflicts = (rng.random() < 0.5 for _ in range(3))
        plan = greedy_assignment(agents, tasks, capacity, load)
        if plan is None:  # no assignment found greedily: no limit can be drawn around one
            return data
        if max_tasks:
            # as many tasks as the busiest agent of the plan has, or one more
            data["max_tasks"] = max(sum(1 for t in tasks if plan[t] == a) for a in agents) + rng.choice([0, 1])
        if forbidden:
            # about a fifth of the tasks lose an agent the plan does not use for them
            pairs = [(a, t) for a in agents for t in tasks if plan[t] != a]
            chosen = rng.sample(pairs, max(1, n_tasks // 5))
            data["forbidden"] = [[a, t] for a, t in pairs if (a, t) in chosen]
        if conflicts:
            # pairs of tasks the plan gives to different agents
            pairs = [(t, u) for k, t in enumerate(tasks) for u in tasks[k + 1:] if plan[t] != plan[u]]
            chosen = rng.sample(pairs, max(1, n_tasks // 4))
            data["conflicts"] = [[t, u] for t, u in pairs if (t, u) in chosen]
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # capacities shrink below what the lightest assignment of every task needs in total
        data = dict(data)
        lightest = sum(min(data["load"][a][t] for a in data["agents"]) for t in data["tasks"])
        scale = rng.uniform(0.5, 0.9) * lightest / sum(data["capacity"].values())
        data["capacity"] = {a: int(c * scale) for a, c in data["capacity"].items()}
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        agents, tasks = data["agents"], data["tasks"]
        columns = {(a, t): matrix.add_var(f"assign[{a},{t}]", 0.0, 1.0, cost=data["cost"][a][t], integer=True)
                   for a in agents for t in tasks}
        for t in tasks:
            matrix.add_row({columns[a, t]: 1.0 for a in agents}, 1.0, 1.0, name=f"one_agent[{t}]")
        for a in agents:
            matrix.add_row({columns[a, t]: data["load"][a][t] for t in tasks}, upper=data["capacity"][a],
                           name=f"capacity[{a}]")
            if "max_tasks" in data:
                matrix.add_row({columns[a, t]: 1.0 for t in tasks}, upper=data["max_tasks"], name=f"max_tasks[{a}]")
            for t, u in data.get("conflicts", ()):
                matrix.add_row({columns[a, t]: 1.0, columns[a, u]: 1.0}, upper=1.0, name=f"conflicts[{a},{t},{u}]")
        for a, t in data.get("forbidden", ()):
            matrix.add_row({columns[a, t]: 1.0}, 0.0, 0.0, name=f"forbidden[{a},{t}]")

    def constraint_rows(self, data: dict, x: dict):
        assign = x["assign"]
        for t in data["tasks"]:
            yield Row(f"one_agent[{t}]", sum(assign[a, t] for a in data["agents"]), "==", 1)
        for a in data["agents"]:
            yield Row(f"capacity[{a}]", sum(data["load"][a][t] * assign[a, t] for t in data["tasks"]), "<=",
                      data["capacity"][a])
            if "max_tasks" in data:
                yield Row(f"max_tasks[{a}]", sum(assign[a, t] for t in data["tasks"]), "<=", data["max_tasks"])
            for t, u in data.get("conflicts", ()):
                yield Row(f"conflicts[{a},{t},{u}]", assign[a, t] + assign[a, u], "<=", 1)
        for a, t in data.get("forbidden", ()):
            yield Row(f"forbidden[{a},{t}]", assign[a, t], "==", 0)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["cost"][a][t] * x["assign"][a, t] for a in data["agents"] for t in data["tasks"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        lines = []
        for a in data["agents"]:
            tasks = [t for t in data["tasks"] if x["assign"][a, t] > 0.5]
            used = sum(data["load"][a][t] for t in tasks)
            lines.append(f"- {a}: {join_names(tasks) or 'nothing'} ({fmt(used)} of {fmt(data['capacity'][a])} "
                         f"{scenario.words['load_unit']})")
        return "\n".join(lines)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        agents, tasks = data["agents"], data["tasks"]
        agent, task, unit, money = words["agent"], words["task"], words["load_unit"], words["money"]
        intro = (f"{words['intro']} There are {len(tasks)} {plural(task)} ({join_names(tasks)}) and {len(agents)} "
                 f"{plural(agent)} ({join_names(agents)}).")
        rules = (f"Each {task} must be given to exactly one {agent}, and every {agent} takes on {plural(task)} without "
                 f"exceeding its capacity {words['period']}. How much capacity one {task} uses and what it costs "
                 f"depend on the {agent} who does it.")
        limits = []  # the optional rules, stated in words in every representation (numbers not in a file one)
        if "max_tasks" in data:
            limit = fmt(data["max_tasks"]) if representation != "file" else "a given number of"
            limits.append(f"No {agent} may take on more than {limit} {plural(task)}.")
        if "forbidden" in data:
            limits.append("Some assignments are not allowed: " + ("they are listed in the data file." if
                          representation == "file" else "; ".join(f"{a} cannot do {t}" for a, t in data["forbidden"])
                          + "."))
        if "conflicts" in data:
            limits.append(f"Some pairs of {plural(task)} must go to different {plural(agent)}: " + (
                "they are listed in the data file." if representation == "file"
                else "; ".join(f"{t} and {u}" for t, u in data["conflicts"]) + "."))
        if limits:
            rules += " " + " ".join(limits)
        question = (f"Which {agent} should do each {task} to minimize the total cost, and what is that cost?")
        if representation == "text":
            parts = [intro, rules]
            parts.append("Capacities: " + "; ".join(f"{a} has {fmt(data['capacity'][a])} {unit}" for a in agents)
                         + ".")
            for a in agents:
                listing = ", ".join(f"{t} uses {fmt(data['load'][a][t])} {unit} and costs {fmt(data['cost'][a][t])} "
                                    f"{money}" for t in tasks)
                parts.append(f"If {a} does them: {listing}.")
            parts.append(question)
            return " ".join(parts)
        if representation == "table":
            load = markdown_table([f"load ({unit})", *tasks, "capacity"],
                                  [[a, *[data["load"][a][t] for t in tasks], data["capacity"][a]] for a in agents])
            cost = markdown_table([f"cost ({money})", *tasks], [[a, *[data["cost"][a][t] for t in tasks]]
                                                                 for a in agents])
            return f"{intro} {rules}\n\n{load}\n\n{cost}\n\n{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro} {rules}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        sets = "agents $A$, tasks $T$"
        parameters = "capacity $b_a$, load $w_{at}$, cost $c_{at}$"
        rows = ["\\text{s.t.}\\ & \\sum_{a \\in A} x_{at} = 1 && \\forall t \\in T",
                "& \\sum_{t \\in T} w_{at} x_{at} \\le b_a && \\forall a \\in A"]
        if "max_tasks" in data:
            parameters += ", most tasks per agent $K$"
            rows.append("& \\sum_{t \\in T} x_{at} \\le K && \\forall a \\in A")
        if "forbidden" in data:
            sets += ", pairs not allowed $F \\subseteq A \\times T$"
            rows.append("& x_{at} = 0 && \\forall (a, t) \\in F")
        if "conflicts" in data:
            sets += ", conflicting task pairs $P \\subseteq T \\times T$"
            rows.append("& x_{at} + x_{au} \\le 1 && \\forall a \\in A, (t, u) \\in P")
        rows.append("& x_{at} \\in \\{0, 1\\} && \\forall a \\in A, t \\in T")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            "**Variables**: $x_{at} \\in \\{0, 1\\}$, 1 when agent $a$ does task $t$.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{a \\in A} \\sum_{t \\in T} c_{at} x_{at} \\\\\n"
            + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


def greedy_assignment(agents: list[str], tasks: list[str], capacity: dict, load: dict) -> dict | None:
    """task -> agent within every capacity, or None when the greedy rule finds none: the heaviest tasks
    first, each to the agent with the most room left after taking it."""
    room = dict(capacity)
    plan = {}
    for t in sorted(tasks, key=lambda t: (-min(load[a][t] for a in agents), tasks.index(t))):
        fits = [a for a in agents if room[a] >= load[a][t]]
        if not fits:
            return None
        best = max(fits, key=lambda a: (room[a] - load[a][t], -agents.index(a)))
        plan[t] = best
        room[best] -= load[best][t]
    return plan


FAMILY = GeneralizedAssignment()
