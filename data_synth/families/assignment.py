"""Assignment (IP): give every task to exactly one agent, each agent taking at most one task, at the least
total cost (some agent-task pairs are not allowed).

Structure variants (drawn per instance, recorded by the keys present): agents that may take up to
`max_tasks` tasks instead of one, and a bottleneck objective (`"objective": "bottleneck"`: minimize the
largest single cost, a MILP with one continuous variable) instead of the total, so the program has four
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
    plural,
    size_for,
)
from data_synth.statements import Phrasing

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

# the eval split's own industries, companies, agent and task names and cost units (held out from training)
EVAL_SCENARIOS = (
    Scenario("translation", "language services", {
        "company": "a translation bureau",
        "agents": ["Ines", "Kofi", "Lena", "Mateo", "Noor", "Oskar", "Priya", "Quinn", "Rafael", "Sanna"],
        "tasks": ["patent filing", "user manual", "court ruling", "film script", "menu card", "annual report",
                  "product label", "press release"],
        "agent_word": "translator", "task_word": "document", "cost_word": "translation fee",
        "cost_unit": "euros", "cost_range": (80, 400),
    }),
    Scenario("quay_cranes", "port operations", {
        "company": "a container terminal",
        "agents": ["Crane Q1", "Crane Q2", "Crane Q3", "Crane Q4", "Crane Q5", "Crane Q6", "Crane Q7", "Crane Q8",
                   "Crane Q9", "Crane Q10"],
        "tasks": ["MV Aurora", "MV Boreas", "MV Calypso", "MV Delphine", "MV Eos", "MV Fortuna", "MV Galene",
                  "MV Helios"],
        "agent_word": "quay crane", "task_word": "vessel", "cost_word": "handling time",
        "cost_unit": "hours", "cost_range": (4, 30),
    }),
    Scenario("home_care", "home nursing", {
        "company": "a home-care agency",
        "agents": ["Amaru", "Birgit", "Cyrus", "Delia", "Eitan", "Freya", "Gwen", "Hamid", "Ilse", "Joaquim"],
        "tasks": ["Birch Road visit", "Cedar Lane visit", "Elm Court visit", "Hazel Drive visit",
                  "Linden Way visit", "Maple Row visit", "Poplar Close visit", "Willow Walk visit"],
        "agent_word": "nurse", "task_word": "home visit", "cost_word": "driving distance",
        "cost_unit": "kilometres", "cost_range": (2, 40),
    }),
)


class Assignment(ProblemFamily):
    name = "assignment"
    title = "Assignment"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"assign": "binary"}
    # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
    phrasings = (
        Phrasing(r"\bcan take up to\b", ("can take up to",), ("may be given as many as",)),
        # stops before "at most", which the generic rules word two ways in training
        Phrasing(r"\bcan take\b(?= at most)", ("can take",), ("may be given",)),
        Phrasing(r"\bshould take which\b", ("should take which",), ("is to get which",)),
        # stops before "what is that", which the generic rules word two ways in training
        Phrasing(r"\bof any chosen pair is as small as possible, and\b",
                 ("of any chosen pair is as small as possible, and",),
                 ("over all chosen pairs is kept as low as possible, and",)),
        Phrasing(r"(?<=what is that )largest value\?", ("largest value?",), ("maximum?",)),
        Phrasing(r"\bso that the largest single\b", ("so that the largest single",),
                 ("so that the biggest individual",)),
        Phrasing(r"\bto minimize the total\b", ("to minimize the total",), ("so as to keep down the overall",)),
        Phrasing(r"\bcannot take\b", ("cannot take",), ("is not available for",)),
        Phrasing(r"\bnot allowed\b", ("not allowed",), ("excluded",)),
        Phrasing(r"\blist of agent names\b", ("list of agent names",), ("names of the agents",)),
        # stops before "needs", which the generic rules word two ways in training
        Phrasing(r"\blist of task names \(each\b(?= needs)", ("list of task names (each",),
                 ("names of the tasks (every one",)),
        Phrasing(r"(?<=\]: )cost of the agent doing the task; a pair that\b",
                 ("cost of the agent doing the task; a pair that",),
                 ("cost when that agent handles the task; any pair that",)),
        Phrasing(r"\bmost tasks one agent may take \(only when agents may take more than one; otherwise one\)",
                 ("most tasks one agent may take (only when agents may take more than one; otherwise one)",),
                 ("cap on the tasks a single agent can accept (present only if agents can accept more than one; "
                  "one otherwise)",)),
        Phrasing(r"\bwhen the largest single cost is minimized \(only then; otherwise the total\)",
                 ("when the largest single cost is minimized (only then; otherwise the total)",),
                 ("if the objective is the biggest individual cost (present only then; the overall cost "
                  "otherwise)",)),
    )
    data_fields = {
        "agents": "list of agent names",
        "tasks": "list of task names (each needs exactly one agent)",
        "cost": "cost[agent][task]: cost of the agent doing the task; a pair that is not listed is not allowed",
        "max_tasks": "most tasks one agent may take (only when agents may take more than one; otherwise one)",
        "objective": '"bottleneck" when the largest single cost is minimized (only then; otherwise the total)',
    }
    # the pieces of `model_code_for`: the head, one objective, the task rows, one agent limit
    _HEAD = '''\
model = pyo.ConcreteModel()
pairs = [(a, t) for a in data["agents"] for t in data["tasks"] if t in data["cost"][a]]
model.PAIRS = pyo.Set(initialize=pairs, dimen=2)
model.assign = pyo.Var(model.PAIRS, domain=pyo.Binary)

'''
    _TOTAL = '''\
model.obj = pyo.Objective(
    expr=sum(data["cost"][a][t] * model.assign[a, t] for a, t in model.PAIRS), sense=pyo.minimize
)
'''
    _BOTTLENECK = '''\
model.worst = pyo.Var(domain=pyo.NonNegativeReals)  # the largest cost of any chosen pair
model.obj = pyo.Objective(expr=model.worst, sense=pyo.minimize)
model.worst_bound = pyo.Constraint(
    model.PAIRS, rule=lambda model, a, t: model.worst >= data["cost"][a][t] * model.assign[a, t]
)
'''
    _TASKS = '''\
model.one_agent_per_task = pyo.Constraint(
    data["tasks"], rule=lambda model, t: sum(model.assign[a, u] for a, u in model.PAIRS if u == t) == 1
)

'''
    _ONE_TASK = '''\
def one_task_per_agent(model, a):
    options = [model.assign[b, t] for b, t in model.PAIRS if b == a]
    return sum(options) <= 1 if options else pyo.Constraint.Skip  # an agent allowed nothing stays idle

model.one_task_per_agent = pyo.Constraint(data["agents"], rule=one_task_per_agent)
'''
    _MAX_TASKS = '''\
def max_tasks_per_agent(model, a):
    options = [model.assign[b, t] for b, t in model.PAIRS if b == a]
    return sum(options) <= data["max_tasks"] if options else pyo.Constraint.Skip  # an agent allowed nothing

model.max_tasks_per_agent = pyo.Constraint(data["agents"], rule=max_tasks_per_agent)
'''
    model_code = _HEAD + _TOTAL + _TASKS + _ONE_TASK  # the classic model: one task per agent, total cost

    def model_code_for(self, data: dict) -> str:
        objective = self._BOTTLENECK if data.get("objective") == "bottleneck" else self._TOTAL
        limit = self._MAX_TASKS if "max_tasks" in data else self._ONE_TASK
        return self._HEAD + objective + self._TASKS + limit

    def domains_for(self, data: dict) -> dict[str, str]:
        if data.get("objective") == "bottleneck":
            return {"assign": "binary", "worst": "nonnegative"}
        return self.domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if data.get("objective") == "bottleneck" else "IP"

    def variant_of(self, data: dict) -> str:
        parts = [part for part, present in (("max_tasks", "max_tasks" in data),
                                            ("bottleneck", data.get("objective") == "bottleneck")) if present]
        return "+".join(parts) or "base"

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
        data = {"agents": agents, "tasks": tasks, "cost": cost}
        if rng.random() < 0.5:
            # agents share the work: with 2 or more tasks each, some agents may stay idle
            data["max_tasks"] = rng.randint(2, max(2, n_tasks // 2))
        if rng.random() < 0.5:
            data["objective"] = "bottleneck"
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # more tasks than an agent may take that only one and the same agent may do
        data = dict(data)
        limit = data.get("max_tasks", 1)
        crowded = rng.sample(data["tasks"], min(limit + 1, len(data["tasks"])))
        if len(crowded) <= limit:  # too few tasks to overload one agent: lower the limit instead
            data["max_tasks"] = limit = len(crowded) - 1
        agent = rng.choice(data["agents"])
        cost = {a: dict(row) for a, row in data["cost"].items()}
        for a in data["agents"]:
            for t in crowded:
                if a != agent:
                    cost[a].pop(t, None)
                else:
                    cost[a].setdefault(t, rng.randint(5, 50))
        data["cost"] = cost
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        bottleneck = data.get("objective") == "bottleneck"
        columns = {}
        for a in data["agents"]:
            for t, value in data["cost"][a].items():
                columns[a, t] = matrix.add_var(f"assign[{a},{t}]", 0.0, 1.0, cost=0.0 if bottleneck else value,
                                               integer=True)
        if bottleneck:
            worst = matrix.add_var("worst", 0.0, cost=1.0)
            for (a, t), column in columns.items():
                matrix.add_row({worst: 1.0, column: -data["cost"][a][t]}, lower=0.0, name=f"worst[{a},{t}]")
        for t in data["tasks"]:
            matrix.add_row({c: 1.0 for (a, u), c in columns.items() if u == t}, lower=1.0, upper=1.0,
                           name=f"task[{t}]")
        limit = data.get("max_tasks", 1)
        for a in data["agents"]:
            matrix.add_row({c: 1.0 for (b, t), c in columns.items() if b == a}, upper=limit, name=f"agent[{a}]")

    def constraint_rows(self, data: dict, x: dict):
        assign = x["assign"]
        allowed = {(a, t) for a in data["agents"] for t in data["cost"][a]}
        if set(assign) != allowed:
            raise ValueError("the solution's assignment variables do not match the allowed pairs")
        for t in data["tasks"]:
            yield Row(f"one_agent_per_task[{t}]", sum(v for (a, u), v in assign.items() if u == t), "==", 1)
        limit = data.get("max_tasks", 1)
        for a in data["agents"]:
            yield Row(f"tasks_per_agent[{a}]", sum(v for (b, t), v in assign.items() if b == a), "<=", limit)
        if data.get("objective") == "bottleneck":
            worst = x["worst"][None]
            for (a, t), value in assign.items():
                yield Row(f"worst_bound[{a},{t}]", worst - data["cost"][a][t] * value, ">=", 0)

    def objective_value(self, data: dict, x: dict) -> float:
        if data.get("objective") == "bottleneck":
            return x["worst"][None]
        return sum(data["cost"][a][t] * value for (a, t), value in x["assign"].items())

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        chosen = [(a, t) for (a, t), value in x["assign"].items() if value > 0.5]
        lines = [f"- {a} takes {t} ({fmt(data['cost'][a][t])} {scenario.words['cost_unit']})" for a, t in chosen]
        if data.get("objective") == "bottleneck":
            lines.append(f"- the largest single {scenario.words['cost_word']} is "
                         f"{fmt(max(data['cost'][a][t] for a, t in chosen))} {scenario.words['cost_unit']}")
        return "\n".join(lines)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        agents, tasks = data["agents"], data["tasks"]
        agent_word, task_word, unit = words["agent_word"], words["task_word"], words["cost_unit"]
        intro = {
            "consulting": f"{words['company'].capitalize()} must staff {len(tasks)} client {plural(task_word)} "
                          f"({join_names(tasks)}) with its {plural(agent_word)} {join_names(agents)}.",
            "machining": f"{words['company'].capitalize()} has {len(tasks)} {plural(task_word)} ({join_names(tasks)}) "
                         f"to place on its {plural(agent_word)} {join_names(agents)}.",
            "ambulances": f"{words['company'].capitalize()} has {len(tasks)} open {plural(task_word)} "
                          f"({join_names(tasks)}) and free {plural(agent_word)} {join_names(agents)}.",
            # the eval scenarios' own openings
            "translation": f"{words['company'].capitalize()} is handing out {len(tasks)} {plural(task_word)} "
                           f"({join_names(tasks)}) to its freelance {plural(agent_word)} {join_names(agents)}.",
            "quay_cranes": f"{words['company'].capitalize()} is lining up its {plural(agent_word)} {join_names(agents)} "
                           f"for {len(tasks)} arriving {plural(task_word)} ({join_names(tasks)}).",
            "home_care": f"{words['company'].capitalize()} is sharing out {len(tasks)} {plural(task_word)} "
                         f"({join_names(tasks)}) among its {plural(agent_word)} {join_names(agents)}.",
        }[scenario.key]
        if "max_tasks" in data:
            rule = (f"Every {task_word} needs exactly one {agent_word}, and each {agent_word} can take up to "
                    f"{fmt(data['max_tasks'])} {plural(task_word)}.")
        else:
            rule = (f"Every {task_word} needs exactly one {agent_word}, and each {agent_word} can take at most "
                    f"one {task_word}.")
        if data.get("objective") == "bottleneck":
            question = (f"Which {agent_word} should take which {task_word} so that the largest single "
                        f"{words['cost_word']} of any chosen pair is as small as possible, and what is that "
                        "largest value?")
        else:
            question = (f"Which {agent_word} should take which {task_word} to minimize the total "
                        f"{words['cost_word']}, and what is that total?")
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
        parameters = "cost $c_{at}$ for $(a, t) \\in E$"
        variables = "$x_{at} \\in \\{0, 1\\}$, 1 when agent $a$ takes task $t$"
        if data.get("objective") == "bottleneck":
            variables += "; $z \\ge 0$, the largest cost of a chosen pair"
            rows = ["\\min\\ & z", "\\text{s.t.}\\ & z \\ge c_{at} x_{at} && \\forall (a,t) \\in E",
                    "& \\sum_{a : (a,t) \\in E} x_{at} = 1 && \\forall t \\in T"]
        else:
            rows = ["\\min\\ & \\sum_{(a,t) \\in E} c_{at} x_{at}",
                    "\\text{s.t.}\\ & \\sum_{a : (a,t) \\in E} x_{at} = 1 && \\forall t \\in T"]
        if "max_tasks" in data:
            parameters += ", most tasks per agent $K$"
            rows.append("& \\sum_{t : (a,t) \\in E} x_{at} \\le K && \\forall a \\in A")
        else:
            rows.append("& \\sum_{t : (a,t) \\in E} x_{at} \\le 1 && \\forall a \\in A")
        rows.append("& x_{at} \\in \\{0, 1\\} && \\forall (a,t) \\in E")
        return (
            "**Sets**: agents $A$, tasks $T$, allowed pairs $E \\subseteq A \\times T$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            "$$\n\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = Assignment()
