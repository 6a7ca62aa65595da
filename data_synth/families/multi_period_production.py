"""Multi-period production and inventory planning (LP): meet seasonal demand over several periods with
regular-time and overtime production, storing goods ahead of the peak when that is cheaper than
overtime, within limited storage."""

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
    Scenario("toys", "toy manufacturing", {
        "company": "a toy maker", "products": ["wooden trains", "puzzle boxes", "plush bears"],
        "unit": "units", "period": "month",
        "period_names": ["July", "August", "September", "October", "November", "December", "January", "February"],
        "money": "dollars", "season": "the holiday season",
    }),
    Scenario("cooling", "appliance manufacturing", {
        "company": "an appliance factory", "products": ["window air conditioners", "portable fans",
                                                        "dehumidifiers"],
        "unit": "units", "period": "month",
        "period_names": ["February", "March", "April", "May", "June", "July", "August", "September"],
        "money": "euros", "season": "the summer heat",
    }),
    Scenario("icecream", "frozen desserts", {
        "company": "an ice-cream producer", "products": ["vanilla tubs", "chocolate tubs", "sorbet tubs"],
        "unit": "cases", "period": "week",
        "period_names": [f"week {k}" for k in range(1, 9)],
        "money": "dollars", "season": "the summer festivals",
    }),
)


class MultiPeriodProduction(ProblemFamily):
    name = "multi_period_production"
    title = "Multi-period production and inventory planning"
    problem_type = "LP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"regular": "nonnegative", "overtime": "nonnegative", "stock": "nonnegative"}
    data_fields = {
        "products": "list of product names",
        "periods": "list of period names, in time order",
        "demand": "demand[product][period]: units to deliver in the period",
        "initial_inventory": "units of each product in stock before the first period, keyed by product",
        "hours_per_unit": "labour hours per unit of each product, keyed by product",
        "unit_cost": "material cost per unit of each product, keyed by product",
        "holding_cost": "cost of storing one unit of each product from one period to the next, keyed by product",
        "regular_hours": "regular-time labour hours available in each period, keyed by period",
        "overtime_hours": "overtime labour hours available in each period, keyed by period",
        "overtime_premium": "extra cost per overtime labour hour",
        "storage_capacity": "most units (all products together) that can be held in stock at the end of a period",
    }
    model_code = '''\
model = pyo.ConcreteModel()
products, periods = data["products"], data["periods"]
model.regular = pyo.Var(products, periods, domain=pyo.NonNegativeReals)   # units made in regular time
model.overtime = pyo.Var(products, periods, domain=pyo.NonNegativeReals)  # units made in overtime
model.stock = pyo.Var(products, periods, domain=pyo.NonNegativeReals)     # units held at the period's end

material = sum(data["unit_cost"][p] * (model.regular[p, t] + model.overtime[p, t])
               for p in products for t in periods)
overtime = sum(data["overtime_premium"] * data["hours_per_unit"][p] * model.overtime[p, t]
               for p in products for t in periods)
holding = sum(data["holding_cost"][p] * model.stock[p, t] for p in products for t in periods)
model.obj = pyo.Objective(expr=material + overtime + holding, sense=pyo.minimize)

def balance(model, p, t):
    k = periods.index(t)
    before = data["initial_inventory"][p] if k == 0 else model.stock[p, periods[k - 1]]
    return before + model.regular[p, t] + model.overtime[p, t] - model.stock[p, t] == data["demand"][p][t]

model.balance = pyo.Constraint(products, periods, rule=balance)

model.regular_hours = pyo.Constraint(periods, rule=lambda model, t: sum(
    data["hours_per_unit"][p] * model.regular[p, t] for p in products) <= data["regular_hours"][t])
model.overtime_hours = pyo.Constraint(periods, rule=lambda model, t: sum(
    data["hours_per_unit"][p] * model.overtime[p, t] for p in products) <= data["overtime_hours"][t])
model.storage = pyo.Constraint(periods, rule=lambda model, t: sum(
    model.stock[p, t] for p in products) <= data["storage_capacity"])
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_products = size_for(difficulty, 1, 2, 3)
        n_periods = size_for(difficulty, 4, 6, 8)
        products = words["products"][:n_products]
        periods = words["period_names"][:n_periods]
        hours_per_unit = {p: rng.choice([0.5, 1.0, 1.5, 2.0, 2.5]) for p in products}
        # demand rises towards a peak late in the horizon
        peak = rng.randint(n_periods // 2, n_periods - 1)
        demand = {}
        for p in products:
            base = rng.randint(10, 40) * 5
            demand[p] = {t: int(base * (1 + 1.5 * max(0.0, 1 - abs(k - peak) / 2.5)) * rng.uniform(0.8, 1.2))
                         for k, t in enumerate(periods)}
        load = {t: sum(hours_per_unit[p] * demand[p][t] for p in products) for t in periods}
        average = sum(load.values()) / n_periods
        regular = int(average * rng.uniform(0.85, 1.05)) // 10 * 10 + 10
        # regular plus overtime covers every period on its own, so the plan is always feasible,
        # but at the peak overtime or stock built earlier is needed
        overtime = max(int(0.2 * regular), math.ceil(max(load.values()) - regular)) // 10 * 10 + 10
        unit_cost = {p: rng.randint(8, 40) for p in products}
        holding_cost = {p: rng.choice([0.5, 1.0, 1.5, 2.0, 3.0]) for p in products}
        initial_inventory = {p: rng.randint(0, 6) * 5 for p in products}
        storage_capacity = int(sum(sum(d.values()) for d in demand.values()) / n_periods * rng.uniform(0.6, 1.2)) // 10 * 10 + 10
        return {"products": products, "periods": periods, "demand": demand,
                "initial_inventory": initial_inventory, "hours_per_unit": hours_per_unit,
                "unit_cost": unit_cost, "holding_cost": holding_cost,
                "regular_hours": {t: regular for t in periods}, "overtime_hours": {t: overtime for t in periods},
                "overtime_premium": rng.randint(12, 30), "storage_capacity": storage_capacity}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # first-period demand beyond the opening stock plus everything regular and overtime hours can make
        p, first = data["products"][0], data["periods"][0]
        hours = data["regular_hours"][first] + data["overtime_hours"][first]
        too_much = data["initial_inventory"][p] + int(hours / data["hours_per_unit"][p]) + 10
        return {**data, "demand": {**data["demand"], p: {**data["demand"][p], first: too_much}}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        products, periods = data["products"], data["periods"]
        regular, extra, stock = {}, {}, {}
        for p in products:
            for t in periods:
                regular[p, t] = matrix.add_var(f"regular[{p},{t}]", cost=data["unit_cost"][p])
                extra[p, t] = matrix.add_var(
                    f"overtime[{p},{t}]",
                    cost=data["unit_cost"][p] + data["overtime_premium"] * data["hours_per_unit"][p])
                stock[p, t] = matrix.add_var(f"stock[{p},{t}]", cost=data["holding_cost"][p])
        for p in products:
            opening = data["initial_inventory"][p]
            for k, t in enumerate(periods):
                row = {regular[p, t]: 1.0, extra[p, t]: 1.0, stock[p, t]: -1.0}
                need = data["demand"][p][t]
                if k == 0:
                    need -= opening
                else:
                    row[stock[p, periods[k - 1]]] = 1.0
                matrix.add_row(row, lower=need, upper=need, name=f"balance[{p},{t}]")
        for t in periods:
            matrix.add_row({regular[p, t]: data["hours_per_unit"][p] for p in products},
                           upper=data["regular_hours"][t], name=f"regular_hours[{t}]")
            matrix.add_row({extra[p, t]: data["hours_per_unit"][p] for p in products},
                           upper=data["overtime_hours"][t], name=f"overtime_hours[{t}]")
            matrix.add_row({stock[p, t]: 1.0 for p in products}, upper=data["storage_capacity"],
                           name=f"storage[{t}]")

    def constraint_rows(self, data: dict, x: dict):
        products, periods = data["products"], data["periods"]
        for p in products:
            before = data["initial_inventory"][p]
            for t in periods:
                lhs = before + x["regular"][p, t] + x["overtime"][p, t] - x["stock"][p, t]
                yield Row(f"balance[{p},{t}]", lhs, "==", data["demand"][p][t])
                before = x["stock"][p, t]
        for t in periods:
            yield Row(f"regular_hours[{t}]", sum(data["hours_per_unit"][p] * x["regular"][p, t] for p in products),
                      "<=", data["regular_hours"][t])
            yield Row(f"overtime_hours[{t}]",
                      sum(data["hours_per_unit"][p] * x["overtime"][p, t] for p in products),
                      "<=", data["overtime_hours"][t])
            yield Row(f"storage[{t}]", sum(x["stock"][p, t] for p in products), "<=", data["storage_capacity"])

    def objective_value(self, data: dict, x: dict) -> float:
        total = 0.0
        for p in data["products"]:
            for t in data["periods"]:
                made = x["regular"][p, t] + x["overtime"][p, t]
                total += data["unit_cost"][p] * made
                total += data["overtime_premium"] * data["hours_per_unit"][p] * x["overtime"][p, t]
                total += data["holding_cost"][p] * x["stock"][p, t]
        return total

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        products, periods = data["products"], data["periods"]
        unit, period, money = words["unit"], words["period"], words["money"]
        first_regular = data["regular_hours"][periods[0]]
        first_overtime = data["overtime_hours"][periods[0]]
        same_hours = all(data["regular_hours"][t] == first_regular and data["overtime_hours"][t] == first_overtime
                         for t in periods)
        intro = (f"{words['company'].capitalize()} is planning production of {join_names(products)} for the "
                 f"next {len(periods)} {period}s, ahead of {words['season']}. Demand must be met in every "
                 f"{period}; goods can be made in regular time or in overtime (which costs a premium of "
                 f"{fmt(data['overtime_premium'])} {money} per labour hour on top of material), and goods made "
                 f"early can be stored, but at most {fmt(data['storage_capacity'])} {unit} in total fit in the "
                 f"warehouse at the end of a {period}.")
        if same_hours:
            hours = (f"Each {period} has {fmt(first_regular)} regular labour hours and up to "
                     f"{fmt(first_overtime)} overtime hours.")
        else:
            hours = " ".join(f"In {t}: {fmt(data['regular_hours'][t])} regular hours and "
                             f"{fmt(data['overtime_hours'][t])} overtime hours." for t in periods)
        question = (f"How many {unit} of each product should be made in regular time and in overtime in each "
                    f"{period} to meet demand at minimum total cost (material, overtime premium and storage)? "
                    f"What is the minimum total cost in {money}? Fractional quantities are allowed.")
        if representation == "text":
            lines = []
            for p in products:
                demand = ", ".join(f"{fmt(data['demand'][p][t])} in {t}" for t in periods)
                lines.append(f"{p.capitalize()}: demand of {demand}; {fmt(data['hours_per_unit'][p])} labour hours "
                             f"and {fmt(data['unit_cost'][p])} {money} of material per unit; storage costs "
                             f"{fmt(data['holding_cost'][p])} {money} per unit per {period}; "
                             f"{fmt(data['initial_inventory'][p])} {unit} in stock at the start.")
            return f"{intro} {hours} {' '.join(lines)} {question}"
        if representation == "table":
            demand = markdown_table([f"demand ({unit})", *periods],
                                    [[p, *[data["demand"][p][t] for t in periods]] for p in products])
            products_table = markdown_table(
                ["product", "labour hours per unit", f"material cost ({money}/unit)",
                 f"holding cost ({money}/unit/{period})", "initial stock"],
                [[p, data["hours_per_unit"][p], data["unit_cost"][p], data["holding_cost"][p],
                  data["initial_inventory"][p]] for p in products])
            if same_hours:
                return f"{intro} {hours}\n\n{demand}\n\n{products_table}\n\n{question}"
            hours_table = markdown_table(["hours", *periods],
                                         [["regular", *[data["regular_hours"][t] for t in periods]],
                                          ["overtime", *[data["overtime_hours"][t] for t in periods]]])
            return f"{intro}\n\n{demand}\n\n{products_table}\n\n{hours_table}\n\n{question}"
        if representation == "file":
            return f"{intro}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        unit = scenario.words["unit"]
        lines = []
        for p in data["products"]:
            plan = "; ".join(
                f"{t}: {fmt(round(x['regular'][p, t], 4))} regular + {fmt(round(x['overtime'][p, t], 4))} overtime, "
                f"{fmt(round(x['stock'][p, t], 4))} left in stock" for t in data["periods"])
            lines.append(f"- {p} ({unit}): {plan}")
        return "\n".join(lines)

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: products $P$, periods $T = \\{1, \\dots, n\\}$.\n\n"
            "**Parameters**: demand $d_{pt}$, opening stock $I_{p0}$, labour hours per unit $a_p$, material "
            "cost $c_p$, holding cost $h_p$, regular hours $R_t$, overtime hours $O_t$, overtime premium $w$, "
            "storage capacity $S$.\n\n"
            "**Variables**: $r_{pt}, o_{pt} \\ge 0$ (units made in regular time and overtime), "
            "$I_{pt} \\ge 0$ (stock at the end of $t$).\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{p \\in P}\\sum_{t \\in T} \\big(c_p (r_{pt} + o_{pt}) "
            "+ w a_p o_{pt} + h_p I_{pt}\\big) \\\\\n"
            "\\text{s.t.}\\ & I_{p,t-1} + r_{pt} + o_{pt} - I_{pt} = d_{pt} && \\forall p, t \\\\\n"
            "& \\sum_{p \\in P} a_p r_{pt} \\le R_t && \\forall t \\\\\n"
            "& \\sum_{p \\in P} a_p o_{pt} \\le O_t && \\forall t \\\\\n"
            "& \\sum_{p \\in P} I_{pt} \\le S && \\forall t \\\\\n"
            "& r_{pt}, o_{pt}, I_{pt} \\ge 0\n\\end{aligned}\n$$"
        )


FAMILY = MultiPeriodProduction()
