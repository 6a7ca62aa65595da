"""Assignment (IP): give every task to exactly one agent, each agent taking at most one task, at the least
total cost (some agent-task pairs are not allowed)."""

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
    Scenario("consulting", "professional services", {
        "company": "a consulting firm",
        "agents": ["Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun"],
        "tasks": ["audit", "market study", "IT review", "tax plan", "merger memo", "pricing study",
                  "risk model", "training day"],
        "agent_word": "consultant", "task_word": "engagement", "cost_word": "hours of work",
        "cost_unit": "hours", "cost_range": (12, 60),
    }),
    Scenario("machining", "manufacturing", {
        "company": "a machine shop",
        "agents": ["Lathe 1", "Lathe 2", "Mill A", "Mill B", "CNC 1", "CNC 2", "Grinder", "Drill press",
                   "Router", "EDM"],
        "tasks": ["shaft", "flange", "bracket", "housing", "gear blank", "spindle", "valve body", "bushing"],
        "agent_word": "machine", "task_word": "job", "cost_word": "processing cost",
        "cost_unit": "dollars", "cost_range": (40, 250),
    }),
    Scenario("ambulances", "emergency services", {
        "company": "a city ambulance service",
        "agents": ["Unit 11", "Unit 12", "Unit 14", "Unit 21", "Unit 23", "Unit 31", "Unit 32", "Unit 40",
                   "Unit 45", "Unit 52"],
        "tasks": ["Harbor call", "Market call", "School call", "Station call", "Park call", "Mall call",
                  "Airport call", "Clinic call"],
        "agent_word": "ambulance", "task_word": "emergency call", "cost_word": "travel time",
        "cost_unit": "minutes", "cost_range": (3, 35),
    }),
)


class Assignment(ProblemFamily):
    name = "assignment"
    title = "Assignment"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"assign": "binary"}
    data_fields = {
        "agents": "list of agent names (each takes at most one task)",
        "tasks": "list of task names (each needs exactly one agent)",
        "cost": "cost[agent][task]: cost of the agent doing the task; a pair that is not listed is not allowed",
    }
    model_code = '''\
model = pyo.ConcreteModel()
pairs = [(a, t) for a in data["agents"] for t in data["tasks"] if t in data["cost"][a]]
model.PAIRS = pyo.Set(initialize=pairs, dimen=2)
model.assign = pyo.Var(model.PAIRS, domain=pyo.Binary)

model.obj = pyo.Objective(
    expr=sum(data["cost"][a][t] * model.assign[a, t] for a, t in model.PAIRS), sense=pyo.minimize
)
model.one_agent_per_task = pyo.Constraint(
    data["tasks"], rule=lambda model, t: sum(model.assign[a, u] for a, u in model.PAIRS if u == t) == 1
)

def one_task_per_agent(model, a):
    options = [model.assign[b, t] for b, t in model.PAIRS if b == a]
    return sum(options) <= 1 if options else pyo.Constraint.Skip  # an agent allowed nothing stays idle

model.one_task_per_agent = pyo.Constraint(data["agents"], rule=one_task_per_agent)
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_tasks = size_for(difficulty, 3, 5, 8)
        n_agents = n_tasks + size_for(difficulty, 1, 2, 2)
        agents = rng.sample(words["agents"], n_agents)
        tasks = rng.sample(words["tasks"], n_tasks)
        low, high = words["cost_range"]
        # a hidden feasible assignment keeps every forbidden pair off it, so the instance stays feasible
        hidden = dict(zip(tasks, rng.sample(agents, n_tasks), strict=True))
        cost = {}
        for a in agents:
            cost[a] = {}
            for t in tasks:
                if hidden[t] == a or rng.random() > 0.15:
                    cost[a][t] = rng.randint(low, high)
        return {"agents": agents, "tasks": tasks, "cost": cost}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # two tasks that only one and the same agent may do
        data = dict(data)
        first, second = rng.sample(data["tasks"], 2)
        agent = rng.choice(data["agents"])
        cost = {a: dict(row) for a, row in data["cost"].items()}
        for a in data["agents"]:
            for t in (first, second):
                if a != agent:
                    cost[a].pop(t, None)
                else:
                    cost[a].setdefault(t, rng.randint(5, 50))
        data["cost"] = cost
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        columns = {}
        for a in data["agents"]:
            for t, value in data["cost"][a].items():
                columns[a, t] = matrix.add_var(f"assign[{a},{t}]", 0.0, 1.0, cost=value, integer=True)
        for t in data["tasks"]:
            matrix.add_row({c: 1.0 for (a, u), c in columns.items() if u == t}, lower=1.0, upper=1.0,
                           name=f"task[{t}]")
        for a in data["agents"]:
            matrix.add_row({c: 1.0 for (b, t), c in columns.items() if b == a}, upper=1.0, name=f"agent[{a}]")

    def constraint_rows(self, data: dict, x: dict):
        assign = x["assign"]
        allowed = {(a, t) for a in data["agents"] for t in data["cost"][a]}
        if set(assign) != allowed:
            raise ValueError("the solution's assignment variables do not match the allowed pairs")
        for t in data["tasks"]:
            yield Row(f"one_agent_per_task[{t}]", sum(v for (a, u), v in assign.items() if u == t), "==", 1)
        for a in data["agents"]:
            yield Row(f"one_task_per_agent[{a}]", sum(v for (b, t), v in assign.items() if b == a), "<=", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["cost"][a][t] * value for (a, t), value in x["assign"].items())

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        lines = [f"- {a} takes {t} ({fmt(data['cost'][a][t])} {scenario.words['cost_unit']})"
                 for (a, t), value in x["assign"].items() if value > 0.5]
        return "\n".join(lines)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        agents, tasks = data["agents"], data["tasks"]
        agent_word, task_word, unit = words["agent_word"], words["task_word"], words["cost_unit"]
        intro = {
            "consulting": f"{words['company'].capitalize()} must staff {len(tasks)} client {task_word}s "
                          f"({join_names(tasks)}) with its {agent_word}s {join_names(agents)}.",
            "machining": f"{words['company'].capitalize()} has {len(tasks)} {task_word}s ({join_names(tasks)}) "
                         f"to place on its {agent_word}s {join_names(agents)}.",
            "ambulances": f"{words['company'].capitalize()} has {len(tasks)} open {task_word}s "
                          f"({join_names(tasks)}) and free {agent_word}s {join_names(agents)}.",
        }[scenario.key]
        rule = (f"Every {task_word} needs exactly one {agent_word}, and each {agent_word} can take at most one "
                f"{task_word}.")
        question = (f"Which {agent_word} should take which {task_word} to minimize the total {words['cost_word']}, "
                    "and what is that total?")
        if representation == "text":
            parts = [intro, rule]
            for a in agents:
                options = ", ".join(f"{t} {fmt(data['cost'][a][t])} {unit}" for t in tasks if t in data["cost"][a])
                banned = [t for t in tasks if t not in data["cost"][a]]
                sentence = f"{words['cost_word'].capitalize()} for {a}: {options}."
                if banned:
                    sentence += f" {a} cannot take {join_names(banned)}."
                parts.append(sentence)
            parts.append(question)
            return " ".join(parts)
        if representation == "table":
            table = markdown_table(
                [f"{words['cost_word']} ({unit})", *tasks],
                [[a, *[data["cost"][a][t] if t in data["cost"][a] else "not allowed" for t in tasks]]
                 for a in agents])
            return f"{intro} {rule}\n\n{table}\n\n{question}"
        if representation == "file":
            return f"{intro} {rule}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: agents $A$, tasks $T$, allowed pairs $E \\subseteq A \\times T$.\n\n"
            "**Parameters**: cost $c_{at}$ for $(a, t) \\in E$.\n\n"
            "**Variables**: $x_{at} \\in \\{0, 1\\}$, 1 when agent $a$ takes task $t$.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{(a,t) \\in E} c_{at} x_{at} \\\\\n"
            "\\text{s.t.}\\ & \\sum_{a : (a,t) \\in E} x_{at} = 1 && \\forall t \\in T \\\\\n"
            "& \\sum_{t : (a,t) \\in E} x_{at} \\le 1 && \\forall a \\in A \\\\\n"
            "& x_{at} \\in \\{0, 1\\} && \\forall (a,t) \\in E\n\\end{aligned}\n$$"
        )


FAMILY = Assignment()
