"""Capacitated lot sizing with setups (MILP): decide in which periods to set up production of each
product and how much to make, trading setup costs against inventory holding costs, within a shared
production capacity that setups also consume."""

from __future__ import annotations

import math
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
    Scenario("bottling", "beverage bottling", {
        "company": "a craft brewery", "resource": "the bottling line", "products": ["pale ale", "stout",
                                                                                   "lager"],
        "unit": "crates", "one_unit": "crate", "period": "week", "on": "in", "period_names": [f"week {k}" for k in range(1, 9)],
        "setup_words": "cleaning and changing over the bottling line", "money": "dollars",
    }),
    Scenario("plastics", "plastic injection moulding", {
        "company": "a plastics moulder", "resource": "the injection press", "products": ["housing A",
                                                                                         "lid B", "clip C"],
        "unit": "boxes", "one_unit": "box", "period": "day", "on": "on", "period_names": ["Monday", "Tuesday", "Wednesday", "Thursday",
                                                          "Friday", "Saturday", "Sunday", "next Monday"],
        "setup_words": "mounting the mould and heating the press", "money": "dollars",
    }),
    Scenario("pharma", "pharmaceuticals", {
        "company": "a generic-drug manufacturer", "resource": "the tablet press", "products": ["ibuprofen",
                                                                                              "paracetamol",
                                                                                              "cetirizine"],
        "unit": "cartons", "one_unit": "carton", "period": "month", "on": "in", "period_names": ["January", "February", "March", "April", "May",
                                                              "June", "July", "August"],
        "setup_words": "validating and cleaning the press for a new product", "money": "euros",
    }),
)


class LotSizing(ProblemFamily):
    name = "lot_sizing"
    title = "Capacitated lot sizing with setups"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"make": "nonnegative", "stock": "nonnegative", "setup": "binary"}
    data_fields = {
        "products": "list of product names",
        "periods": "list of period names, in time order",
        "demand": "demand[product][period]: units to deliver at the end of the period",
        "initial_inventory": "units of each product in stock before the first period, keyed by product",
        "hours_per_unit": "production hours per unit of each product, keyed by product",
        "setup_hours": "hours lost to a setup of each product, keyed by product",
        "setup_cost": "cost of one setup of each product, keyed by product",
        "holding_cost": "cost of carrying one unit of each product from one period to the next, keyed by product",
        "capacity_hours": "production hours available in each period, keyed by period",
    }
    model_code = '''\
model = pyo.ConcreteModel()
products, periods = data["products"], data["periods"]
model.make = pyo.Var(products, periods, domain=pyo.NonNegativeReals)
model.stock = pyo.Var(products, periods, domain=pyo.NonNegativeReals)  # left at the end of the period
model.setup = pyo.Var(products, periods, domain=pyo.Binary)

model.obj = pyo.Objective(
    expr=sum(data["setup_cost"][p] * model.setup[p, t] + data["holding_cost"][p] * model.stock[p, t]
             for p in products for t in periods),
    sense=pyo.minimize,
)

def balance(model, p, t):
    k = periods.index(t)
    before = data["initial_inventory"][p] if k == 0 else model.stock[p, periods[k - 1]]
    return before + model.make[p, t] - model.stock[p, t] == data["demand"][p][t]

model.balance = pyo.Constraint(products, periods, rule=balance)

def capacity(model, t):
    hours = sum(data["hours_per_unit"][p] * model.make[p, t] + data["setup_hours"][p] * model.setup[p, t]
                for p in products)
    return hours <= data["capacity_hours"][t]

model.capacity = pyo.Constraint(periods, rule=capacity)

# production needs a setup; there is never a reason to make more than the demand still to come
def needs_setup(model, p, t):
    remaining = sum(data["demand"][p][u] for u in periods[periods.index(t):])
    return model.make[p, t] <= remaining * model.setup[p, t]

model.needs_setup = pyo.Constraint(products, periods, rule=needs_setup)
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_products = size_for(difficulty, 1, 2, 3)
        n_periods = size_for(difficulty, 4, 5, 6)
        products = words["products"][:n_products]
        periods = words["period_names"][:n_periods]
        hours_per_unit = {p: rng.choice([0.25, 0.5, 0.75, 1.0, 1.25]) for p in products}
        setup_hours = {p: rng.choice([2, 3, 4, 5, 6]) for p in products}
        demand = {p: {t: rng.choice([0, rng.randint(4, 30) * 5, rng.randint(4, 30) * 5]) for t in periods}
                  for p in products}
        for p in products:
            # the opening stock never covers the first period, so every product needs production
            demand[p][periods[0]] = rng.randint(6, 30) * 5
        initial_inventory = {p: rng.randint(0, 4) * 5 for p in products}
        # enough hours in every period to produce that period's demand with one setup per product
        # (so the instance is feasible), but not so many that all production fits in one batch
        capacity_hours = {}
        for t in periods:
            lot_for_lot = sum(hours_per_unit[p] * demand[p][t] + setup_hours[p] for p in products)
            capacity_hours[t] = int(math.ceil(lot_for_lot * rng.uniform(1.1, 1.6) / 5)) * 5 + 10
        setup_cost = {p: rng.randint(10, 60) * 10 for p in products}
        holding_cost = {p: rng.choice([0.5, 1.0, 1.5, 2.0, 2.5, 3.0]) for p in products}
        return {"products": products, "periods": periods, "demand": demand,
                "initial_inventory": initial_inventory, "hours_per_unit": hours_per_unit,
                "setup_hours": setup_hours, "setup_cost": setup_cost, "holding_cost": holding_cost,
                "capacity_hours": capacity_hours}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # the first period's demand of one product exceeds its stock plus all it can make in that period
        p, first = data["products"][0], data["periods"][0]
        makeable = (data["capacity_hours"][first] - data["setup_hours"][p]) / data["hours_per_unit"][p]
        new_demand = data["initial_inventory"][p] + int(makeable) + 5
        return {**data, "demand": {**data["demand"], p: {**data["demand"][p], first: new_demand}}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        products, periods = data["products"], data["periods"]
        make, stock, setup = {}, {}, {}
        for p in products:
            for t in periods:
                make[p, t] = matrix.add_var(f"make[{p},{t}]")
                stock[p, t] = matrix.add_var(f"stock[{p},{t}]", cost=data["holding_cost"][p])
                setup[p, t] = matrix.add_var(f"setup[{p},{t}]", 0, 1, cost=data["setup_cost"][p], integer=True)
        for p in products:
            for k, t in enumerate(periods):
                # stock[t-1] + make[t] - stock[t] = demand[t]; the initial stock moves to the right-hand side
                row = {make[p, t]: 1.0, stock[p, t]: -1.0}
                rhs = data["demand"][p][t]
                if k == 0:
                    rhs -= data["initial_inventory"][p]
                else:
                    row[stock[p, periods[k - 1]]] = 1.0
                matrix.add_row(row, lower=rhs, upper=rhs, name=f"balance[{p},{t}]")
        for t in periods:
            row = {}
            for p in products:
                row[make[p, t]] = data["hours_per_unit"][p]
                row[setup[p, t]] = data["setup_hours"][p]
            matrix.add_row(row, upper=data["capacity_hours"][t], name=f"capacity[{t}]")
        for p in products:
            for k, t in enumerate(periods):
                still_due = sum(data["demand"][p][u] for u in periods[k:])
                matrix.add_row({make[p, t]: 1.0, setup[p, t]: -still_due}, upper=0.0, name=f"needs_setup[{p},{t}]")

    def constraint_rows(self, data: dict, x: dict):
        make, stock, setup = x["make"], x["stock"], x["setup"]
        products, periods = data["products"], data["periods"]
        for p in products:
            carried = data["initial_inventory"][p]
            for t in periods:
                yield Row(f"balance[{p},{t}]", carried + make[p, t] - stock[p, t], "==", data["demand"][p][t])
                carried = stock[p, t]
        for t in periods:
            hours = sum(data["hours_per_unit"][p] * make[p, t] + data["setup_hours"][p] * setup[p, t]
                        for p in products)
            yield Row(f"capacity[{t}]", hours, "<=", data["capacity_hours"][t])
        for p in products:
            for k, t in enumerate(periods):
                still_due = sum(data["demand"][p][u] for u in periods[k:])
                yield Row(f"needs_setup[{p},{t}]", make[p, t], "<=", still_due * setup[p, t])

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["setup_cost"][p] * x["setup"][p, t] + data["holding_cost"][p] * x["stock"][p, t]
                   for p in data["products"] for t in data["periods"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        products, periods = data["products"], data["periods"]
        unit, period, money, resource = words["unit"], words["period"], words["money"], words["resource"]
        intro = (f"{words['company'].capitalize()} plans production of {join_names(products)} on {resource} over "
                 f"the next {len(periods)} {period}s ({join_names(periods)}). Producing a product in a {period} "
                 f"requires a setup ({words['setup_words']}), which costs money and uses hours of {resource}. "
                 f"Units made in a {period} can meet that {period}'s demand or be stored for later {period}s; "
                 f"demand must be met on time (no backorders).")
        question = (f"In which {period}s should each product be set up, and how many {unit} should be made, to "
                    f"minimize the total setup and holding cost? What is that minimum cost in {money}?")
        if representation == "text":
            lines = []
            for p in products:
                demand = ", ".join(f"{fmt(data['demand'][p][t])} {words['on']} {t}" for t in periods)
                lines.append(
                    f"For {p}: demand is {demand} ({unit}); each {words['one_unit']} takes "
                    f"{fmt(data['hours_per_unit'][p])} hours of {resource}; a setup costs "
                    f"{fmt(data['setup_cost'][p])} {money} and takes {fmt(data['setup_hours'][p])} hours; holding "
                    f"one {words['one_unit']} from one {period} to the next costs {fmt(data['holding_cost'][p])} {money}; "
                    f"{fmt(data['initial_inventory'][p])} {unit} are in stock at the start.")
            hours = ", ".join(f"{fmt(data['capacity_hours'][t])} {words['on']} {t}" for t in periods)
            return f"{intro} {' '.join(lines)} Hours of {resource} available: {hours}. {question}"
        if representation == "table":
            demand = markdown_table([f"demand ({unit})", *periods],
                                    [[p, *[data["demand"][p][t] for t in periods]] for p in products]
                                    + [["hours available", *[data["capacity_hours"][t] for t in periods]]])
            costs = markdown_table(
                ["product", "hours per unit", "setup hours", f"setup cost ({money})",
                 f"holding cost ({money}/unit/{period})", "initial stock"],
                [[p, data["hours_per_unit"][p], data["setup_hours"][p], data["setup_cost"][p],
                  data["holding_cost"][p], data["initial_inventory"][p]] for p in products])
            return f"{intro}\n\n{demand}\n\n{costs}\n\n{question}"
        if representation == "file":
            return f"{intro}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        unit = scenario.words["unit"]
        lines = []
        for p in data["products"]:
            runs = [f"{fmt(round(x['make'][p, t], 6))} {unit} {scenario.words['on']} {t}" for t in data["periods"]
                    if x["setup"][p, t] > 0.5 and x["make"][p, t] > 1e-6]
            lines.append(f"- {p}: {len(runs)} production run{'s' if len(runs) != 1 else ''} "
                         f"({'; '.join(runs) or 'none'})")
        return "\n".join(lines)

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: products $P$, periods $T = \\{1, \\dots, n\\}$.\n\n"
            "**Parameters**: demand $d_{pt}$, initial stock $I_{p0}$, hours per unit $a_p$, setup hours $s_p$, "
            "setup cost $f_p$, holding cost $h_p$, hours available $C_t$, remaining demand "
            "$D_{pt} = \\sum_{u \\ge t} d_{pu}$.\n\n"
            "**Variables**: $x_{pt} \\ge 0$ (units made), $I_{pt} \\ge 0$ (stock at the end of $t$), "
            "$y_{pt} \\in \\{0,1\\}$ (setup).\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{p \\in P}\\sum_{t \\in T} (f_p y_{pt} + h_p I_{pt}) \\\\\n"
            "\\text{s.t.}\\ & I_{p,t-1} + x_{pt} - I_{pt} = d_{pt} && \\forall p, t \\\\\n"
            "& \\sum_{p \\in P} (a_p x_{pt} + s_p y_{pt}) \\le C_t && \\forall t \\\\\n"
            "& x_{pt} \\le D_{pt}\\, y_{pt} && \\forall p, t \\\\\n"
            "& x_{pt}, I_{pt} \\ge 0,\\ y_{pt} \\in \\{0,1\\}\n\\end{aligned}\n$$"
        )


FAMILY = LotSizing()
