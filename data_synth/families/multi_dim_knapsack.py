"""Multi-dimensional knapsack (IP): choose items, each taken whole or not at all, to maximize total value
while several resources (weight, volume, power, ...) each stay within their capacity."""

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

SCENARIOS = (
    Scenario("container", "ocean freight", {
        "company": "a freight consolidator", "item_prefix": "Lot ", "item_word": "lot",
        "container": "a 40-foot container",
        "resources": [("weight", "kg", (200, 3000)), ("volume", "cubic metres", (1, 12)),
                      ("floor area", "square metres", (1, 6)), ("declared value", "thousand dollars", (5, 80))],
        "value_word": "freight revenue", "value_unit": "dollars", "value_range": (400, 6000),
        "count_limit": "the crane crew can handle at most {k} lots",
    }),
    Scenario("relief", "humanitarian logistics", {
        "company": "a relief agency", "item_prefix": "Kit ", "item_word": "aid package",
        "container": "tomorrow's airlift",
        "resources": [("weight", "kg", (50, 900)), ("volume", "cubic metres", (1, 8)),
                      ("handling time", "minutes", (5, 60)), ("cold storage", "litres", (0, 400))],
        "value_word": "people served", "value_unit": "people", "value_range": (20, 900),
        "count_limit": "the loading team can prepare at most {k} packages",
    }),
    Scenario("imaging", "earth observation", {
        "company": "a satellite operator", "item_prefix": "Request ", "item_word": "imaging request",
        "container": "the next orbit",
        "resources": [("battery energy", "Wh", (20, 300)), ("onboard memory", "GB", (2, 40)),
                      ("slew time", "seconds", (10, 120)), ("downlink time", "seconds", (5, 90))],
        "value_word": "priority score", "value_unit": "points", "value_range": (10, 100),
        "count_limit": "the mission plan allows at most {k} requests per orbit",
    }),
)


class MultiDimKnapsack(ProblemFamily):
    name = "multi_dim_knapsack"
    title = "Multi-dimensional knapsack"
    problem_type = "IP"
    sense = "max"
    scenarios = SCENARIOS
    domains = {"pick": "binary"}
    data_fields = {
        "items": "list of item names",
        "resources": "list of resource names",
        "value": "value of each item, keyed by item",
        "usage": "usage[resource][item]: amount of the resource the item uses",
        "capacity": "available amount of each resource, keyed by resource",
        "max_items": "most items that can be chosen",
        "required": "items that must be chosen (may be empty)",
    }
    model_code = '''\
model = pyo.ConcreteModel()
model.I = pyo.Set(initialize=data["items"])
model.R = pyo.Set(initialize=data["resources"])
model.pick = pyo.Var(model.I, domain=pyo.Binary)

model.obj = pyo.Objective(expr=sum(data["value"][i] * model.pick[i] for i in model.I), sense=pyo.maximize)
model.capacity = pyo.Constraint(
    model.R,
    rule=lambda model, r: sum(data["usage"][r][i] * model.pick[i] for i in model.I) <= data["capacity"][r],
)
model.max_items = pyo.Constraint(expr=sum(model.pick[i] for i in model.I) <= data["max_items"])
model.required = pyo.Constraint(data["required"], rule=lambda model, i: model.pick[i] == 1)
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_items = size_for(difficulty, 6, 12, 25)
        n_resources = size_for(difficulty, 2, 3, 4)
        items = [f"{words['item_prefix']}{k}" for k in sorted(rng.sample(range(1, 100), n_items))]
        chosen = words["resources"][:n_resources]
        resources = [name for name, _, _ in chosen]
        usage = {name: {i: rng.randint(*bounds) for i in items} for name, _, bounds in chosen}
        value = {i: rng.randint(*words["value_range"]) for i in items}
        capacity = {r: max(1, int(sum(usage[r].values()) * rng.uniform(0.3, 0.55))) for r in resources}
        max_items = max(2, round(n_items * rng.uniform(0.2, 0.4)))
        return {"items": items, "resources": resources, "value": value, "usage": usage, "capacity": capacity,
                "max_items": max_items, "required": []}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # mandatory items whose use of one resource already exceeds its capacity
        data = dict(data)
        resource = rng.choice(data["resources"])
        required, used = [], 0
        for i in sorted(data["items"], key=lambda i: -data["usage"][resource][i]):
            required.append(i)
            used += data["usage"][resource][i]
            if used > data["capacity"][resource]:
                break
        if used <= data["capacity"][resource]:
            return None
        data["required"] = required
        data["max_items"] = max(data["max_items"], len(required))
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        required = set(data["required"])
        columns = {i: matrix.add_var(f"pick[{i}]", 1.0 if i in required else 0.0, 1.0, cost=data["value"][i],
                                     integer=True) for i in data["items"]}
        for r in data["resources"]:
            matrix.add_row({columns[i]: data["usage"][r][i] for i in data["items"]}, upper=data["capacity"][r],
                           name=f"capacity[{r}]")
        matrix.add_row({columns[i]: 1.0 for i in data["items"]}, upper=data["max_items"], name="max_items")

    def constraint_rows(self, data: dict, x: dict):
        pick = x["pick"]
        for r in data["resources"]:
            yield Row(f"capacity[{r}]", sum(data["usage"][r][i] * pick[i] for i in data["items"]), "<=",
                      data["capacity"][r])
        yield Row("max_items", sum(pick[i] for i in data["items"]), "<=", data["max_items"])
        for i in data["required"]:
            yield Row(f"required[{i}]", pick[i], "==", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["value"][i] * x["pick"][i] for i in data["items"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        units = {name: unit for name, unit, _ in words["resources"]}
        items, resources = data["items"], data["resources"]
        item_word = words["item_word"]
        intro = {
            "container": f"{words['company'].capitalize()} is deciding which of {len(items)} {item_word}s to "
                         f"load into {words['container']}.",
            "relief": f"{words['company'].capitalize()} must choose which of {len(items)} {item_word}s go on "
                      f"{words['container']}.",
            "imaging": f"{words['company'].capitalize()} must pick which of {len(items)} {item_word}s to serve "
                       f"during {words['container']}.",
        }[scenario.key]
        limits = "Available: " + ", ".join(f"{fmt(data['capacity'][r])} {units[r]} of {r}" for r in resources) + "; "
        limits += words["count_limit"].format(k=fmt(data["max_items"])) + "."
        if data["required"]:
            limits += " " + ", ".join(data["required"]) + " must be chosen."
        question = (f"Each {item_word} is taken whole or not at all. Which should be chosen to maximize the total "
                    f"{words['value_word']} without exceeding any limit, and what is that total?")
        if representation == "text":
            listing = " ".join(
                f"{i} is worth {fmt(data['value'][i])} {words['value_unit']} and needs "
                + ", ".join(f"{fmt(data['usage'][r][i])} {units[r]} of {r}" for r in resources) + "."
                for i in items)
            return f"{intro} {listing} {limits} {question}"
        if representation == "table":
            table = markdown_table(
                [item_word, f"{words['value_word']} ({words['value_unit']})", *[f"{r} ({units[r]})" for r in resources]],
                [[i, data["value"][i], *[data["usage"][r][i] for r in resources]] for i in items])
            return f"{intro}\n\n{table}\n\n{limits} {question}"
        if representation == "file":
            return (f"{intro} Every {item_word} has a value and uses several limited resources. {question}\n\n"
                    f"{describe_data_file(self.data_fields)}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: items $I$, resources $R$, mandatory items $M \\subseteq I$.\n\n"
            "**Parameters**: value $v_i$, usage $a_{ri}$, capacity $b_r$, item limit $K$.\n\n"
            "**Variables**: $x_i \\in \\{0, 1\\}$, 1 when item $i$ is chosen.\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & \\sum_{i \\in I} v_i x_i \\\\\n"
            "\\text{s.t.}\\ & \\sum_{i \\in I} a_{ri} x_i \\le b_r && \\forall r \\in R \\\\\n"
            "& \\sum_{i \\in I} x_i \\le K \\\\\n"
            "& x_i = 1 && \\forall i \\in M \\\\\n"
            "& x_i \\in \\{0, 1\\} && \\forall i \\in I\n\\end{aligned}\n$$"
        )


FAMILY = MultiDimKnapsack()
