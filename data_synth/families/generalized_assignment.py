"""Generalized assignment (IP): give every task to exactly one agent, each agent within its capacity (a task
uses a different amount of capacity depending on the agent), at the least total cost."""

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


class GeneralizedAssignment(ProblemFamily):
    name = "generalized_assignment"
    title = "Generalized assignment"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"assign": "binary"}
    data_fields = {
        "agents": "list of agent names",
        "tasks": "list of task names",
        "capacity": "capacity of each agent for the period, keyed by agent",
        "load": "load[agent][task]: capacity the task uses when that agent does it",
        "cost": "cost[agent][task]: cost of that agent doing the task",
    }
    phrasings = (
        Phrasing(r"\bmust be given to exactly one\b", ("must be given to exactly one", "goes to exactly one"),
                 ("is handled by a single", "is placed with precisely one")),
        Phrasing(r"\bwithout exceeding\b", ("without exceeding", "while staying within"),
                 ("keeping under or at", "never going over")),
    )
    model_code = '''\
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
        return {"agents": agents, "tasks": tasks, "capacity": capacity, "load": load, "cost": cost}

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

    def constraint_rows(self, data: dict, x: dict):
        assign = x["assign"]
        for t in data["tasks"]:
            yield Row(f"one_agent[{t}]", sum(assign[a, t] for a in data["agents"]), "==", 1)
        for a in data["agents"]:
            yield Row(f"capacity[{a}]", sum(data["load"][a][t] * assign[a, t] for t in data["tasks"]), "<=",
                      data["capacity"][a])

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
        intro = (f"{words['intro']} There are {len(tasks)} {task}s ({join_names(tasks)}) and {len(agents)} "
                 f"{agent}s ({join_names(agents)}).")
        rules = (f"Each {task} must be given to exactly one {agent}, and every {agent} takes on {task}s without "
                 f"exceeding its capacity {words['period']}. How much capacity one {task} uses and what it costs "
                 f"depend on the {agent} who does it.")
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
            return f"{intro} {rules}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: agents $A$, tasks $T$.\n\n"
            "**Parameters**: capacity $b_a$, load $w_{at}$, cost $c_{at}$.\n\n"
            "**Variables**: $x_{at} \\in \\{0, 1\\}$, 1 when agent $a$ does task $t$.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{a \\in A} \\sum_{t \\in T} c_{at} x_{at} \\\\\n"
            "\\text{s.t.}\\ & \\sum_{a \\in A} x_{at} = 1 && \\forall t \\in T \\\\\n"
            "& \\sum_{t \\in T} w_{at} x_{at} \\le b_a && \\forall a \\in A \\\\\n"
            "& x_{at} \\in \\{0, 1\\} && \\forall a \\in A, t \\in T\n\\end{aligned}\n$$"
        )


FAMILY = GeneralizedAssignment()
