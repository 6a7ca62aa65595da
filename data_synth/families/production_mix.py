"""Production mix (LP): choose how much of each product to make to maximize profit, subject to limited
resources (machine hours, labour, materials) and market limits per product.

Structure variants (drawn per instance, recorded by the keys present): whole units only (`integer_units`,
the model becomes a MILP), contracted minimum outputs (`min_output`) and extra capacity that can be bought
for some resources at a cost per unit (`extra_capacity` with `extra_cost`), each present or absent, so the
program has eight skeletons. The demo trains on this family, so `sample` keeps the base model (none of
the three) in 45% of the instances."""

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

# eval only: other companies, products and resources than any training scenario, in the same style (short
# product names, the same kinds of units) for the demo's tiny model
EVAL_SCENARIOS = (
    Scenario("brewery", "craft brewing", {
        "company": "a craft brewery",
        "products": ["pale ale", "lager", "stout", "porter", "wheat beer", "pilsner", "amber ale", "cider"],
        "resources": [("brewhouse time", "hours"), ("malt", "kg"), ("hops", "kg"), ("cellar space", "tank-days"),
                      ("bottling time", "hours")],
        "unit": "keg",
    }),
    Scenario("garments", "garment making", {
        "company": "a clothing factory",
        "products": ["shirts", "jackets", "trousers", "skirts", "coats", "vests", "scarves", "hoodies"],
        "resources": [("cutting hours", "hours"), ("sewing hours", "hours"), ("cotton fabric", "yards"),
                      ("pressing hours", "hours"), ("thread", "spools")],
        "unit": "bundle",
    }),
    Scenario("pottery", "ceramics", {
        "company": "a ceramics studio",
        "products": ["mugs", "bowls", "plates", "vases", "teapots", "jugs", "platters", "planters"],
        "resources": [("kiln time", "hours"), ("clay", "kg"), ("glaze", "kg"), ("throwing time", "minutes"),
                      ("drying-shelf space", "shelf-slots")],
        "unit": "crate",
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
        Phrasing(r"Only whole \w+s can be made\.", ("Only whole units can be made.", "Output comes in whole units."),
                 ("Production is in whole units only.", "No fractional units can be produced.")),
        Phrasing(r"which is deducted from the profit\.", ("which is deducted from the profit.",),
                 ("a cost that reduces the profit.",)),
        Phrasing(r"\bcan be bought: up to\b", ("can be bought: up to",), ("is purchasable, at most",)),
        Phrasing(r"Fractional quantities are allowed\.", ("Fractional quantities are allowed.", "Quantities may be fractional."),
                 ("Non-integer production amounts are acceptable.", "Output need not be a whole number.")),
        Phrasing(r"earns a profit and uses some of each limited resource; sales of each product are capped by "
                 r"demand\.",
                 ("earns a profit and uses some of each limited resource; sales of each product are capped by demand.",),
                 ("yields a profit and draws on the limited resources; market demand caps the sales of each product.",)),
        # eval-only plain rewordings of the other fixed sentences (training keeps its text); none covers a
        # generic phrase with several training wordings ("amount of", "keyed by", "at least")
        Phrasing(r"\bSome products have contracted minimum outputs\.", ("Some products have contracted minimum outputs.",),
                 ("A few products have a contracted minimum output.",)),
        Phrasing(r"\bSome resources can be extended by buying extra capacity, up to a limit, at a cost per unit that "
                 r"is deducted from the profit\.",
                 ("Some resources can be extended by buying extra capacity, up to a limit, at a cost per unit that is "
                  "deducted from the profit.",),
                 ("For some resources more capacity can be bought, within a limit, and the cost of each extra unit "
                  "is taken from the profit.",)),
        Phrasing(r"\bof each product should be made to maximize total profit, and what is the maximum profit\?",
                 ("of each product should be made to maximize total profit, and what is the maximum profit?",),
                 ("of each product should be made for the highest total profit, and how much is that profit?",)),
        Phrasing(r"\bmost units of each product the market takes\b", ("most units of each product the market takes",),
                 ("largest number of units of each product that can be sold",)),
    )
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"make": "nonnegative"}
    data_fields = {
        "products": "list of product names",
        "resources": "list of resource names",
        "profit": "profit per unit of each product (dollars), keyed by product",
        "usage": "usage[resource][product]: amount of the resource one unit of the product uses",
        "capacity": "available amount of each resource in the planning period, keyed by resource",
        "max_demand": "most units of each product the market takes, keyed by product",
        "min_output": "contracted minimum output, keyed by product (only when there are contracts)",
        "extra_capacity": "most extra amount of a resource that can be bought, keyed by resource (only when "
                          "some resource can be extended)",
        "extra_cost": "cost per unit of extra resource (dollars), keyed by resource (only when `extra_capacity` "
                      "is given)",
        "integer_units": "true when only whole units can be made (only when that holds)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _SETS = '''\
model = pyo.ConcreteModel()
model.P = pyo.Set(initialize=data["products"])
model.R = pyo.Set(initialize=data["resources"])
'''
    _MAKE = '''\
model.make = pyo.Var(model.P, domain=pyo.NonNegativeReals)
'''
    _MAKE_INTEGER = '''\
model.make = pyo.Var(model.P, domain=pyo.NonNegativeIntegers)  # whole units only
'''
    _OBJECTIVE = '''\

model.obj = pyo.Objective(
    expr=sum(data["profit"][p] * model.make[p] for p in model.P), sense=pyo.maximize
)

def resource_limit(model, r):
    return sum(data["usage"][r][p] * model.make[p] for p in model.P) <= data["capacity"][r]

model.resource_limit = pyo.Constraint(model.R, rule=resource_limit)
'''
    _EXTRA_CAPACITY = '''\
# extra capacity that can be bought for some resources, up to a limit, at a cost per unit
model.X = pyo.Set(initialize=sorted(data["extra_capacity"]))
model.extra = pyo.Var(model.X, bounds=lambda model, r: (0, data["extra_capacity"][r]))

model.obj = pyo.Objective(
    expr=sum(data["profit"][p] * model.make[p] for p in model.P)
    - sum(data["extra_cost"][r] * model.extra[r] for r in model.X),
    sense=pyo.maximize,
)

def resource_limit(model, r):
    bought = model.extra[r] if r in data["extra_capacity"] else 0
    return sum(data["usage"][r][p] * model.make[p] for p in model.P) <= data["capacity"][r] + bought

model.resource_limit = pyo.Constraint(model.R, rule=resource_limit)
'''
    _DEMAND = '''\

def demand_limit(model, p):
    return model.make[p] <= data["max_demand"][p]

model.demand_limit = pyo.Constraint(model.P, rule=demand_limit)
'''
    _MIN_OUTPUT = '''\

# contracted minimum outputs
model.C = pyo.Set(initialize=sorted(data["min_output"]))
model.min_output = pyo.Constraint(model.C, rule=lambda model, p: model.make[p] >= data["min_output"][p])
'''

    model_code = _SETS + _MAKE + _OBJECTIVE + _DEMAND + _MIN_OUTPUT  # the LP with contracted minimum outputs

    def model_code_for(self, data: dict) -> str:
        code = self._SETS + (self._MAKE_INTEGER if "integer_units" in data else self._MAKE)
        code += self._EXTRA_CAPACITY if "extra_capacity" in data else self._OBJECTIVE
        code += self._DEMAND
        if "min_output" in data:
            code += self._MIN_OUTPUT
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("integer_units", "min_output", "extra_capacity") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        domains = {"make": "nonnegative_integer" if "integer_units" in data else "nonnegative"}
        if "extra_capacity" in data:
            domains["extra"] = "nonnegative"
        return domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "integer_units" in data else "LP"

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
        data = {"products": products, "resources": resources, "profit": profit, "usage": usage,
                "capacity": capacity, "max_demand": max_demand}
        if rng.random() < 0.45:
            return data  # the base model (the demo's), kept common
        chosen = []
        while not chosen:
            chosen = [part for part in ("integer_units", "min_output", "extra_capacity") if rng.random() < 0.5]
        if "integer_units" in chosen:
            data["integer_units"] = True
        if "min_output" in chosen:
            # one or two contracts, together using at most 30% of every resource (so the plan stays feasible)
            contracted = sorted(rng.sample(products, min(len(products), rng.randint(1, 2))), key=products.index)
            data["min_output"] = {}
            for p in contracted:
                fits = min([max_demand[p]] + [capacity[r] / usage[r][p] for r in resources])
                data["min_output"][p] = max(1, int(fits * rng.uniform(0.1, 0.3) / len(contracted)))
        if "extra_capacity" in chosen:
            bought = sorted(rng.sample(resources, rng.randint(1, min(2, len(resources)))), key=resources.index)
            data["extra_capacity"] = {r: max(1, int(capacity[r] * rng.uniform(0.1, 0.3))) for r in bought}
            # a unit of extra resource costs about what it earns, so buying it is a real trade-off
            data["extra_cost"] = {r: rng.randint(1, max(2, max(profit.values()) // max(1, min(usage[r].values()))))
                                  for r in bought}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a contract forces a minimum output that the first resource cannot support
        data = dict(data)
        resource = data["resources"][0]
        product = min(data["products"], key=lambda p: data["usage"][resource][p])
        available = data["capacity"][resource] + data.get("extra_capacity", {}).get(resource, 0)
        data["min_output"] = {product: available // data["usage"][resource][product] + 5}
        data["max_demand"] = {**data["max_demand"], product: data["min_output"][product] + 10}
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        integer = "integer_units" in data
        columns = {p: matrix.add_var(f"make[{p}]", 0.0, data["max_demand"][p], cost=data["profit"][p],
                                     integer=integer) for p in data["products"]}
        extra = {r: matrix.add_var(f"extra[{r}]", 0.0, limit, cost=-data["extra_cost"][r])
                 for r, limit in data.get("extra_capacity", {}).items()}
        for r in data["resources"]:
            row = {columns[p]: data["usage"][r][p] for p in data["products"]}
            if r in extra:
                row[extra[r]] = -1.0
            matrix.add_row(row, upper=data["capacity"][r], name=f"resource_limit[{r}]")
        for p, amount in data.get("min_output", {}).items():
            matrix.add_row({columns[p]: 1.0}, lower=amount, name=f"min_output[{p}]")

    def constraint_rows(self, data: dict, x: dict):
        make = x["make"]
        extra = x.get("extra", {})
        for r in data["resources"]:
            yield Row(f"resource_limit[{r}]", sum(data["usage"][r][p] * make[p] for p in data["products"]),
                      "<=", data["capacity"][r] + (extra[r] if r in data.get("extra_capacity", {}) else 0))
        for r, limit in data.get("extra_capacity", {}).items():
            yield Row(f"extra_limit[{r}]", extra[r], "<=", limit)
        for p in data["products"]:
            yield Row(f"demand_limit[{p}]", make[p], "<=", data["max_demand"][p])
        for p, amount in data.get("min_output", {}).items():
            yield Row(f"min_output[{p}]", make[p], ">=", amount)

    def objective_value(self, data: dict, x: dict) -> float:
        bought = sum(data["extra_cost"][r] * x["extra"][r] for r in data.get("extra_capacity", {}))
        return sum(data["profit"][p] * x["make"][p] for p in data["products"]) - bought

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
            "brewery": f"{words['company'].capitalize()} is deciding this month's brewing of {join_names(products)}.",
            "garments": f"{words['company'].capitalize()} plans the coming run of {join_names(products)}.",
            "pottery": f"{words['company'].capitalize()} is setting the week's output of {join_names(products)}.",
        }[scenario.key]
        whole = (f"Only whole {plural(unit)} can be made." if "integer_units" in data
                 else "Fractional quantities are allowed.")
        question = (f"How many {plural(unit)} of each product should be made to maximize total profit, and what is "
                    f"the maximum profit? {whole}")
        contract = ""
        if "min_output" in data:
            contract = " " + " ".join(f"A signed contract requires at least {fmt(v)} {plural(unit)} of {p}."
                                      for p, v in data["min_output"].items())
        if "extra_capacity" in data:
            contract += " " + " ".join(
                f"Extra {r} can be bought: up to {fmt(limit)} more {units[r]} at ${fmt(data['extra_cost'][r])} "
                f"per {units[r][:-1] if units[r].endswith('s') else units[r]}, "
                "which is deducted from the profit."
                for r, limit in data["extra_capacity"].items())
        if representation == "text":
            parts = [intro]
            for p in products:
                uses = ", ".join(f"{fmt(data['usage'][r][p])} {units[r]} of {r}" for r in resources)
                parts.append(f"Each {unit} of {p} earns ${fmt(data['profit'][p])} of profit, uses {uses}, "
                             f"and at most {fmt(data['max_demand'][p])} {plural(unit)} can be sold.")
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
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            notes = ""
            if "min_output" in data:
                notes += " Some products have contracted minimum outputs."
            if "extra_capacity" in data:
                notes += (" Some resources can be extended by buying extra capacity, up to a limit, at a cost per "
                          "unit that is deducted from the profit.")
            return (f"{intro} Each {unit} of a product earns a profit and uses some of each limited resource; "
                    f"sales of each product are capped by demand.{notes}\n\n"
                    f"{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        sets = "products $P$, resources $R$"
        parameters = ("profit $c_p$, usage $a_{rp}$ of resource $r$ per unit of $p$, capacity $b_r$, "
                      "demand cap $u_p$")
        variables = "$x_p \\ge 0$, units of product $p$ to make"
        objective = "\\sum_{p \\in P} c_p x_p"
        resource = "\\sum_{p \\in P} a_{rp} x_p \\le b_r && \\forall r \\in R"
        rows = []
        if "extra_capacity" in data:
            sets += ", resources $E \\subseteq R$ that can be extended"
            parameters += ", extra limit $e_r$ and cost $k_r$ per unit for $r \\in E$"
            variables += "; $y_r$, extra units of resource $r \\in E$ bought ($y_r = 0$ for $r \\notin E$)"
            objective += " - \\sum_{r \\in E} k_r y_r"
            resource = "\\sum_{p \\in P} a_{rp} x_p \\le b_r + y_r && \\forall r \\in R"
            rows.append("& 0 \\le y_r \\le e_r && \\forall r \\in E")
        rows.append("& x_p \\le u_p && \\forall p \\in P")
        if "min_output" in data:
            sets += ", contracted products $C \\subseteq P$"
            parameters += ", contracted minimum $m_p$"
            rows.append("& x_p \\ge m_p && \\forall p \\in C \\quad\\text{(contracted minimum output)}")
        if "integer_units" in data:
            rows.append("& x_p \\in \\mathbb{Z}_{\\ge 0} && \\forall p \\in P")
        else:
            rows.append("& x_p \\ge 0 && \\forall p \\in P")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\max\\ & {objective} \\\\\n"
            f"\\text{{s.t.}}\\ & {resource} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = ProductionMix()
