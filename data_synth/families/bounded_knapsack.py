"""Bounded knapsack (IP): choose how many copies of each item type to take (whole copies, up to the
number available, at least any committed minimum) to maximize total value within one capacity."""

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
    Scenario("truck", "wholesale distribution", {
        "company": "a wholesale distributor",
        "items": ["canned tomatoes", "olive oil", "rice sacks", "pasta cases", "coffee beans", "sugar bags",
                  "flour bags", "bottled water", "tea boxes", "cereal cases", "honey jars", "soy sauce"],
        "copy": "case", "capacity_word": "the truck's payload", "unit": "kg", "value_word": "profit",
        "value_unit": "dollars", "weight_range": (8, 45), "value_range": (6, 60),
    }),
    Scenario("shelf", "retail merchandising", {
        "company": "a supermarket",
        "items": ["yogurt", "cheese", "butter", "milk", "cream", "kefir", "pudding", "juice", "hummus",
                  "tofu", "salsa", "pesto"],
        "copy": "facing", "capacity_word": "one chilled shelf", "unit": "cm of shelf width",
        "value_word": "expected weekly profit", "value_unit": "dollars", "weight_range": (6, 30),
        "value_range": (4, 45),
    }),
    Scenario("cloud", "cloud capacity planning", {
        "company": "a hosting provider",
        "items": ["web small", "web large", "db standard", "db memory", "cache node", "batch worker",
                  "gpu inference", "search node", "queue broker", "analytics node", "mail relay", "vpn gateway"],
        "copy": "instance", "capacity_word": "a new server rack", "unit": "GB of memory",
        "value_word": "monthly revenue", "value_unit": "dollars", "weight_range": (2, 64),
        "value_range": (15, 400),
    }),
)


class BoundedKnapsack(ProblemFamily):
    name = "bounded_knapsack"
    title = "Bounded knapsack"
    problem_type = "IP"
    sense = "max"
    scenarios = SCENARIOS
    domains = {"copies": "nonnegative_integer"}
    data_fields = {
        "items": "list of item types",
        "size": "capacity used by one copy of each item type, keyed by item",
        "value": "value of one copy of each item type, keyed by item",
        "available": "most copies of each item type, keyed by item",
        "minimum": "committed least copies of some item types, keyed by item (may be empty)",
        "capacity": "total capacity",
    }
    model_code = '''\
model = pyo.ConcreteModel()
model.I = pyo.Set(initialize=data["items"])
model.copies = pyo.Var(model.I, domain=pyo.NonNegativeIntegers)

model.obj = pyo.Objective(expr=sum(data["value"][i] * model.copies[i] for i in model.I), sense=pyo.maximize)
model.capacity = pyo.Constraint(expr=sum(data["size"][i] * model.copies[i] for i in model.I) <= data["capacity"])
model.available = pyo.Constraint(model.I, rule=lambda model, i: model.copies[i] <= data["available"][i])
model.minimum = pyo.Constraint(list(data["minimum"]), rule=lambda model, i: model.copies[i] >= data["minimum"][i])
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_items = size_for(difficulty, 4, 7, 12)
        items = rng.sample(words["items"], n_items)
        size = {i: rng.randint(*words["weight_range"]) for i in items}
        value = {i: rng.randint(*words["value_range"]) for i in items}
        available = {i: rng.randint(2, 15) for i in items}
        capacity = int(sum(size[i] * available[i] for i in items) * rng.uniform(0.3, 0.6))
        minimum = {}
        if rng.random() < 0.4:
            item = rng.choice(items)
            minimum[item] = min(available[item], rng.randint(1, 3))
        return {"items": items, "size": size, "value": value, "available": available, "minimum": minimum,
                "capacity": capacity}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # commitments to the bulkiest item types that overflow the capacity
        data = dict(data)
        minimum, used = {}, 0
        for i in sorted(data["items"], key=lambda i: -data["size"][i] * data["available"][i]):
            minimum[i] = data["available"][i]
            used += data["size"][i] * data["available"][i]
            if used > data["capacity"]:
                break
        data["minimum"] = minimum
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        columns = {i: matrix.add_var(f"copies[{i}]", data["minimum"].get(i, 0), data["available"][i],
                                     cost=data["value"][i], integer=True) for i in data["items"]}
        matrix.add_row({columns[i]: data["size"][i] for i in data["items"]}, upper=data["capacity"],
                       name="capacity")

    def constraint_rows(self, data: dict, x: dict):
        copies = x["copies"]
        yield Row("capacity", sum(data["size"][i] * copies[i] for i in data["items"]), "<=", data["capacity"])
        for i in data["items"]:
            yield Row(f"available[{i}]", copies[i], "<=", data["available"][i])
        for i, least in data["minimum"].items():
            yield Row(f"minimum[{i}]", copies[i], ">=", least)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["value"][i] * x["copies"][i] for i in data["items"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        items, copy, unit = data["items"], words["copy"], words["unit"]
        intro = {
            "truck": f"{words['company'].capitalize()} is filling {words['capacity_word']} "
                     f"({fmt(data['capacity'])} {unit}) with {copy}s of {join_names(items)}.",
            "shelf": f"{words['company'].capitalize()} is planning {words['capacity_word']} "
                     f"({fmt(data['capacity'])} {unit}) for {join_names(items)}.",
            "cloud": f"{words['company'].capitalize()} is filling {words['capacity_word']} "
                     f"({fmt(data['capacity'])} {unit}) with {copy}s of the types {join_names(items)}.",
        }[scenario.key]
        commitments = " ".join(f"At least {fmt(v)} {copy}s of {i} are already promised." for i, v in
                               data["minimum"].items())
        question = (f"How many whole {copy}s of each type should be chosen to maximize the total "
                    f"{words['value_word']}, and what is that total?")
        if representation == "text":
            listing = "; ".join(f"one {copy} of {i} takes {fmt(data['size'][i])} {unit}, brings "
                                f"{fmt(data['value'][i])} {words['value_unit']}, and up to "
                                f"{fmt(data['available'][i])} are available" for i in items)
            return f"{intro} {listing[0].upper()}{listing[1:]}. {commitments} {question}".replace("  ", " ")
        if representation == "table":
            table = markdown_table(
                ["type", f"size ({unit} per {copy})", f"{words['value_word']} ({words['value_unit']} per {copy})",
                 f"available {copy}s"],
                [[i, data["size"][i], data["value"][i], data["available"][i]] for i in items])
            return f"{intro}\n\n{table}\n\n{commitments} {question}".replace("\n\n ", "\n\n")
        if representation == "file":
            return (f"{words['company'].capitalize()} is filling {words['capacity_word']} with {copy}s of several "
                    f"types. {question}\n\n{describe_data_file(self.data_fields)}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: item types $I$.\n\n"
            "**Parameters**: size $s_i$, value $v_i$, availability $u_i$, committed minimum $l_i$ "
            "(0 when none), capacity $C$.\n\n"
            "**Variables**: $x_i \\in \\mathbb{Z}_{\\ge 0}$, copies of type $i$.\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & \\sum_{i \\in I} v_i x_i \\\\\n"
            "\\text{s.t.}\\ & \\sum_{i \\in I} s_i x_i \\le C \\\\\n"
            "& l_i \\le x_i \\le u_i && \\forall i \\in I \\\\\n"
            "& x_i \\in \\mathbb{Z}_{\\ge 0} && \\forall i \\in I\n\\end{aligned}\n$$"
        )


FAMILY = BoundedKnapsack()
