"""Production mix (LP): choose how much of each product to make to maximize profit, subject to limited
resources (machine hours, labour, materials) and market limits per product."""

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
    Scenario("furniture", "furniture manufacturing", {
        "company": "a furniture workshop",
        "products": ["chairs", "tables", "desks", "bookcases", "cabinets", "stools", "benches", "shelves"],
        "resources": [("carpentry hours", "hours"), ("finishing hours", "hours"), ("oak boards", "board-feet"),
                      ("packaging hours", "hours"), ("varnish", "litres")],
        "unit": "unit",
    }),
    Scenario("chemicals", "specialty chemicals", {
        "company": "a specialty chemicals plant",
        "products": ["solvent A", "solvent B", "resin C", "coating D", "adhesive E", "cleaner F", "sealant G",
                     "primer H"],
        "resources": [("reactor time", "hours"), ("distillation capacity", "hours"), ("raw feedstock", "kg"),
                      ("catalyst", "grams"), ("quality-lab time", "hours")],
        "unit": "batch",
    }),
    Scenario("bakery", "industrial bakery", {
        "company": "an industrial bakery",
        "products": ["sourdough loaves", "baguettes", "croissants", "muffins", "bagels", "rye loaves",
                     "brioche", "scones"],
        "resources": [("oven time", "minutes"), ("flour", "kg"), ("butter", "kg"), ("baker labour", "minutes"),
                      ("cooling-rack space", "rack-slots")],
        "unit": "tray",
    }),
)


class ProductionMix(ProblemFamily):
    name = "production_mix"
    title = "Production mix"
    problem_type = "LP"
    # the family's fixed sentences, in other words for each split (data_synth.statements)
    phrasings = (
        Phrasing(r"of profit, uses", ("of profit, uses", "of profit, consumes"), ("in profit and needs",)),
        Phrasing(r"\bcan be sold\b", ("can be sold",), ("will find buyers",)),
        Phrasing(r"Available this period:", ("Available this period:", "Available in this period:"),
                 ("Resource limits for the period:", "On hand for the period:")),
        Phrasing(r"The data per\b", ("The data per",), ("Figures for each",)),
        Phrasing(r"Resources available:", ("Resources available:",), ("Resource capacities:",)),
        Phrasing(r"A signed contract requires", ("A signed contract requires",),
                 ("Under a signed contract, the plan includes",)),
        Phrasing(r"Fractional quantities are allowed\.", ("Fractional quantities are allowed.", "Quantities may be fractional."),
                 ("Non-integer production amounts are acceptable.", "Output need not be a whole number.")),
        Phrasing(r"earns a profit and uses some of each limited resource; sales of each product are capped by "
                 r"demand\.",
                 ("earns a profit and uses some of each limited resource; sales of each product are capped by demand.",),
                 ("yields a profit and draws on the limited resources; market demand caps the sales of each product.",)),
    )
    sense = "max"
    scenarios = SCENARIOS
    domains = {"make": "nonnegative"}
    data_fields = {
        "products": "list of product names",
        "resources": "list of resource names",
        "profit": "profit per unit of each product (dollars), keyed by product",
        "usage": "usage[resource][product]: amount of the resource one unit of the product uses",
        "capacity": "available amount of each resource in the planning period, keyed by resource",
        "max_demand": "most units of each product the market takes, keyed by product",
    }
    model_code = '''\
model = pyo.ConcreteModel()
model.P = pyo.Set(initialize=data["products"])
model.R = pyo.Set(initialize=data["resources"])
model.make = pyo.Var(model.P, domain=pyo.NonNegativeReals)

model.obj = pyo.Objective(
    expr=sum(data["profit"][p] * model.make[p] for p in model.P), sense=pyo.maximize
)

def resource_limit(model, r):
    return sum(data["usage"][r][p] * model.make[p] for p in model.P) <= data["capacity"][r]

model.resource_limit = pyo.Constraint(model.R, rule=resource_limit)

def demand_limit(model, p):
    return model.make[p] <= data["max_demand"][p]

model.demand_limit = pyo.Constraint(model.P, rule=demand_limit)

# contracted minimum outputs, when the instance has any
minimum = data.get("min_output", {})
model.min_output = pyo.Constraint(
    list(minimum), rule=lambda model, p: model.make[p] >= minimum[p]
)
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        n_products = size_for(difficulty, 3, 5, 8)
        n_resources = size_for(difficulty, 2, 3, 5)
        products = scenario.words["products"][:n_products]
        resources = [name for name, _ in scenario.words["resources"][:n_resources]]
        profit = {p: rng.randint(8, 90) for p in products}
        usage = {r: {p: rng.randint(1, 12) for p in products} for r in resources}
        # capacity: enough for a mix, not for the whole demand, so resources bind
        max_demand = {p: rng.randint(20, 150) for p in products}
        capacity = {
            r: int(sum(usage[r][p] * max_demand[p] for p in products) * rng.uniform(0.25, 0.6))
            for r in resources
        }
        return {"products": products, "resources": resources, "profit": profit, "usage": usage,
                "capacity": capacity, "max_demand": max_demand}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a contract forces a minimum output that the first resource cannot support
        data = dict(data)
        resource = data["resources"][0]
        product = min(data["products"], key=lambda p: data["usage"][resource][p])
        data["min_output"] = {product: data["capacity"][resource] // data["usage"][resource][product] + 5}
        data["max_demand"] = {**data["max_demand"], product: data["min_output"][product] + 10}
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        columns = {p: matrix.add_var(f"make[{p}]", 0.0, data["max_demand"][p], cost=data["profit"][p])
                   for p in data["products"]}
        for r in data["resources"]:
            matrix.add_row({columns[p]: data["usage"][r][p] for p in data["products"]},
                           upper=data["capacity"][r], name=f"resource_limit[{r}]")
        for p, amount in data.get("min_output", {}).items():
            matrix.add_row({columns[p]: 1.0}, lower=amount, name=f"min_output[{p}]")

    def constraint_rows(self, data: dict, x: dict):
        make = x["make"]
        for r in data["resources"]:
            yield Row(f"resource_limit[{r}]", sum(data["usage"][r][p] * make[p] for p in data["products"]),
                      "<=", data["capacity"][r])
        for p in data["products"]:
            yield Row(f"demand_limit[{p}]", make[p], "<=", data["max_demand"][p])
        for p, amount in data.get("min_output", {}).items():
            yield Row(f"min_output[{p}]", make[p], ">=", amount)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["profit"][p] * x["make"][p] for p in data["products"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        units = dict(words["resources"])
        products, resources = data["products"], data["resources"]
        unit = words["unit"]
        intro = {
            "furniture": f"{words['company'].capitalize()} makes {join_names(products)}.",
            "chemicals": f"The planning team of {words['company']} must set next week's output of "
                         f"{join_names(products)}.",
            "bakery": f"{words['company'].capitalize()} is planning tomorrow's production of "
                      f"{join_names(products)}.",
        }[scenario.key]
        question = (f"How many {unit}s of each product should be made to maximize total profit, and what is "
                    "the maximum profit? Fractional quantities are allowed.")
        contract = ""
        if "min_output" in data:
            contract = " " + " ".join(f"A signed contract requires at least {fmt(v)} {unit}s of {p}."
                                      for p, v in data["min_output"].items())
        if representation == "text":
            parts = [intro]
            for p in products:
                uses = ", ".join(f"{fmt(data['usage'][r][p])} {units[r]} of {r}" for r in resources)
                parts.append(f"Each {unit} of {p} earns ${fmt(data['profit'][p])} of profit, uses {uses}, "
                             f"and at most {fmt(data['max_demand'][p])} {unit}s can be sold.")
            available = ", ".join(f"{fmt(data['capacity'][r])} {units[r]} of {r}" for r in resources)
            parts.append(f"Available this period: {available}.{contract}")
            parts.append(question)
            return " ".join(parts)
        if representation == "table":
            table = markdown_table(
                ["product", "profit ($/" + unit + ")", *[f"{r} ({units[r]}/{unit})" for r in resources],
                 "max sales"],
                [[p, data["profit"][p], *[data["usage"][r][p] for r in resources], data["max_demand"][p]]
                 for p in products],
            )
            capacity = markdown_table(["resource", "available"],
                                      [[r, f"{fmt(data['capacity'][r])} {units[r]}"] for r in resources])
            return f"{intro} The data per {unit}:\n\n{table}\n\nResources available:\n\n{capacity}\n\n" \
                   f"{contract.strip()}\n\n{question}".replace("\n\n\n\n", "\n\n")
        if representation == "file":
            fields = dict(self.data_fields)
            if "min_output" in data:
                fields["min_output"] = "contracted minimum output, keyed by product"
            return (f"{intro} Each {unit} of a product earns a profit and uses some of each limited resource; "
                    f"sales of each product are capped by demand.{' Some products have contracted minimum outputs.' if 'min_output' in data else ''}\n\n"
                    f"{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        extra = ""
        if "min_output" in data:
            extra = r"  x_p &\ge m_p && \forall p \in C \quad\text{(contracted minimum output)}\\" + "\n"
        return (
            "**Sets**: products $P$, resources $R$.\n\n"
            "**Parameters**: profit $c_p$, usage $a_{rp}$ of resource $r$ per unit of $p$, capacity $b_r$, "
            "demand cap $u_p$.\n\n"
            "**Variables**: $x_p \\ge 0$, units of product $p$ to make.\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & \\sum_{p \\in P} c_p x_p \\\\\n"
            "\\text{s.t.}\\ & \\sum_{p \\in P} a_{rp} x_p \\le b_r && \\forall r \\in R \\\\\n"
            "& x_p \\le u_p && \\forall p \\in P \\\\\n" + extra +
            "& x_p \\ge 0 && \\forall p \\in P\n\\end{aligned}\n$$"
        )


FAMILY = ProductionMix()
