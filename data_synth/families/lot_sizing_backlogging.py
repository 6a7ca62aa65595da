"""Multi-item capacitated lot sizing with backlogging (MILP): plan the production of several products on one
shared resource over a horizon whose demand peaks exceed the capacity of a period. A product needs a setup
(a cost and hours of the resource) in every period it is made; demand may be met late at a backlog cost
per unit and period, or early from stock at a holding cost, and every order must be delivered by the end
of the horizon.

Unlike `lot_sizing` (demand met on time, capacity enough for each period's own demand), the net inventory
here is split into stock and backlog, and the capacity only suffices on average, so the model must shift
production in time in both directions.

Structure variants (drawn per instance, recorded by the keys present): paid overtime hours up to a limit per
period (`overtime_cost` with `max_overtime`), a minimum lot size when a product is set up (`min_lot`), and a
ceiling on each product's backlog (`max_backlog`), each present or absent, so the program has eight
skeletons. Capacities and limits are drawn around a level plan (every product made in every period at its
average rate) that meets them, so every variant stays feasible."""

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
    plural,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("furniture", "furniture making", {
        "company": "a furniture workshop", "resource": "the CNC router",
        "products": ["oak table", "pine chair", "walnut desk", "bookcase"],
        "unit": "pieces", "one_unit": "piece", "period": "week",
        "period_names": [f"week {k}" for k in range(1, 9)], "money": "dollars",
        "setup_words": "loading the cutting program and changing the tooling",
        "late_words": "a discount to the customer",
    }),
    Scenario("electronics", "electronics manufacturing", {
        "company": "a contract electronics maker", "resource": "the surface-mount line",
        "products": ["control board", "sensor board", "power board", "display board"],
        "unit": "boards", "one_unit": "board", "period": "week",
        "period_names": [f"week {k}" for k in range(14, 22)], "money": "euros",
        "setup_words": "changing the feeder reels and the stencil",
        "late_words": "a contractual penalty",
    }),
    Scenario("garments", "apparel", {
        "company": "a garment factory", "resource": "the cutting room",
        "products": ["jacket", "trousers", "shirt", "coat"],
        "unit": "garments", "one_unit": "garment", "period": "month",
        "period_names": ["January", "February", "March", "April", "May", "June", "July", "August"],
        "money": "dollars", "setup_words": "laying out the fabric and the patterns",
        "late_words": "a markdown granted to the retailer",
    }),
)

# eval only: other industries, companies, resources, products, units, periods and currencies than any
# training scenario
EVAL_SCENARIOS = (
    Scenario("porcelain", "ceramic tableware", {
        "company": "a porcelain manufacturer", "resource": "the tunnel kiln",
        "products": ["dinner plate", "soup bowl", "serving platter", "espresso cup"],
        "unit": "items", "one_unit": "item", "period": "week",
        "period_names": [f"W{k}" for k in range(36, 44)], "money": "pounds",
        "setup_words": "switching the glaze and resetting the firing curve",
        "late_words": "a credit note issued to the hotel chain",
    }),
    Scenario("pumps", "pump manufacturing", {
        "company": "an industrial pump maker", "resource": "the hydraulic test bench",
        "products": ["booster pump", "dosing pump", "sump pump", "borehole pump"],
        "unit": "pumps", "one_unit": "pump", "period": "quarter",
        "period_names": ["2027 Q1", "2027 Q2", "2027 Q3", "2027 Q4", "2028 Q1", "2028 Q2", "2028 Q3", "2028 Q4"],
        "money": "Swiss francs", "setup_words": "fitting the rig adapters and recalibrating the sensors",
        "late_words": "liquidated damages owed to the utility",
    }),
    Scenario("cosmetics", "cosmetics filling", {
        "company": "a skincare contract filler", "resource": "the tube filling line",
        "products": ["face cream", "body lotion", "hand serum", "lip balm"],
        "unit": "cases", "one_unit": "case", "period": "fortnight",
        "period_names": [f"fortnight {k}" for k in range(1, 9)], "money": "kronor",
        "setup_words": "sanitising the nozzles and swapping the tube magazine",
        "late_words": "a service-level penalty owed to the brand owner",
    }),
)


class LotSizingBacklogging(ProblemFamily):
    name = "lot_sizing_backlogging"
    title = "Capacitated lot sizing with backlogging"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"make": "nonnegative", "stock": "nonnegative", "backlog": "nonnegative", "setup": "binary"}
    phrasings = (
        Phrasing(r"Orders may be delivered late\b", ("Orders may be delivered late",),
                 ("Demand may be served after its period",)),
        Phrasing(r"but every order must be delivered by the end of the plan\.",
                 ("but every order must be delivered by the end of the plan.",
                  "but nothing may remain undelivered when the plan ends."),
                 ("but all orders have to be filled by the last period.",)),
        Phrasing(r"\bis needed in every period a product is made\b",
                 ("is needed in every period a product is made",),
                 ("must precede production in any period",)),
        Phrasing(r"\bplans production of\b", ("plans production of",), ("schedules the making of",)),
        Phrasing(r"\bit costs money and uses hours of\b", ("it costs money and uses hours of",),
                 ("each one is charged for and takes up time on",)),
        Phrasing(r"\bUnits left in stock at the end of a\b", ("Units left in stock at the end of a",),
                 ("Inventory carried over past the close of a",)),
        Phrasing(r"\bincur a holding cost\.", ("incur a holding cost.",), ("is charged for storage.",)),
        Phrasing(r"\ba backlog cost per\b", ("a backlog cost per",), ("a late charge for every",)),
        Phrasing(r"\bfor every (?=\w+ it is late\))", ("for every ",), ("in each ",)),
        Phrasing(r"\borders are\b", ("orders are",), ("the quantities ordered are",)),
        Phrasing(r"\bare in stock at the start\.", ("are in stock at the start.",),
                 ("sit in inventory when the plan begins.",)),
        Phrasing(r"\bRegular hours of\b", ("Regular hours of",), ("Normal working time on",)),
        Phrasing(r"\bOvertime can add hours of\b", ("Overtime can add hours of",),
                 ("Extra overtime hours are available on",)),
        # ("at least" and "may not exceed" are left to the generic rules, whose training wordings vary)
        Phrasing(r"\ba product is set up, (?=at least its minimum lot)", ("a product is set up, ",),
                 ("in which a product is set up, ",)),
        Phrasing(r"\bits minimum lot must be made\b", ("its minimum lot must be made",),
                 ("its minimum lot has to be produced",)),
        Phrasing(r"\bthe late orders of a product(?= may not exceed)", ("the late orders of a product",),
                 ("the overdue quantity of any product",)),
        Phrasing(r"\bshould each product be set up, and how many\b", ("should each product be set up, and how many",),
                 ("is each product to be set up, and what number of",)),
        Phrasing(r"\bsetup, holding and backlog cost\b", ("setup, holding and backlog cost",),
                 ("bill for setups, storage and late deliveries",)),
        # table headers and the data.json field descriptions (a longer rule before a shorter one it contains)
        Phrasing(r"\binitial stock\b", ("initial stock",), ("opening inventory",)),
        Phrasing(r"\bunits ordered for delivery in the period\b", ("units ordered for delivery in the period",),
                 ("quantity due in that period",)),
        Phrasing(r"\bunits of each product in stock before the first period\b",
                 ("units of each product in stock before the first period",),
                 ("opening inventory of every product",)),
        Phrasing(r"\bresource hours per unit of each product\b", ("resource hours per unit of each product",),
                 ("time on the resource that one unit of a product takes",)),
        Phrasing(r"\bresource hours of one setup of each product\b", ("resource hours of one setup of each product",),
                 ("time on the resource that a product's setup takes",)),
        Phrasing(r"\bcost of one setup of each product\b", ("cost of one setup of each product",),
                 ("price of setting a product up once",)),
        Phrasing(r"\bcost per unit in stock at the end of a period\b", ("cost per unit in stock at the end of a period",),
                 ("storage charge on a unit still on hand when a period closes",)),
        Phrasing(r"\bcost per unit delivered late, for each period it is late\b",
                 ("cost per unit delivered late, for each period it is late",),
                 ("charge on a late unit for every period of delay",)),
        Phrasing(r"\bregular resource hours in each period\b", ("regular resource hours in each period",),
                 ("normal working time of the resource in a period",)),
        Phrasing(r"\bcost per overtime hour\b", ("cost per overtime hour",), ("price of one overtime hour",)),
        Phrasing(r"\bmost overtime hours in each period\b", ("most overtime hours in each period",),
                 ("cap on the overtime of a period",)),
        Phrasing(r"\bfewest units made of a product in a period it is set up\b",
                 ("fewest units made of a product in a period it is set up",),
                 ("smallest run of a product whenever it is set up",)),
        Phrasing(r"\bmost units of a product that may be late at the end of any period\b",
                 ("most units of a product that may be late at the end of any period",),
                 ("largest overdue quantity of a product allowed when a period closes",)),
        Phrasing(r"\bmost overtime hours\b", ("most overtime hours",), ("overtime hour cap",)),
        Phrasing(r"\(only when overtime is possible\)", ("(only when overtime is possible)",),
                 ("(present if overtime can be bought)",)),
        Phrasing(r"\(only when there are minimum lots\)", ("(only when there are minimum lots)",),
                 ("(present if lots have a minimum)",)),
        Phrasing(r"\(only when backlogs are limited\)", ("(only when backlogs are limited)",),
                 ("(present if backlogs are capped)",)),
    )
    data_fields = {
        "products": "list of product names",
        "periods": "list of period names, in time order",
        "demand": "demand[product][period]: units ordered for delivery in the period",
        "initial_inventory": "units of each product in stock before the first period, keyed by product",
        "hours_per_unit": "resource hours per unit of each product, keyed by product",
        "setup_hours": "resource hours of one setup of each product, keyed by product",
        "setup_cost": "cost of one setup of each product, keyed by product",
        "holding_cost": "cost per unit in stock at the end of a period, keyed by product",
        "backlog_cost": "cost per unit delivered late, for each period it is late, keyed by product",
        "capacity_hours": "regular resource hours in each period, keyed by period",
        "overtime_cost": "cost per overtime hour (only when overtime is possible)",
        "max_overtime": "most overtime hours in each period, keyed by period (only when overtime is possible)",
        "min_lot": "fewest units made of a product in a period it is set up, keyed by product (only when there "
                   "are minimum lots)",
        "max_backlog": "most units of a product that may be late at the end of any period, keyed by product "
                       "(only when backlogs are limited)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.P = pyo.Set(initialize=data["products"])
model.T = pyo.Set(initialize=data["periods"])
periods = data["periods"]
model.make = pyo.Var(model.P, model.T, domain=pyo.NonNegativeReals)
model.stock = pyo.Var(model.P, model.T, domain=pyo.NonNegativeReals)  # on hand at the end of the period
model.backlog = pyo.Var(model.P, model.T, domain=pyo.NonNegativeReals)  # still owed at the end of the period
model.setup = pyo.Var(model.P, model.T, domain=pyo.Binary)
'''
    _COSTS = '''\
costs = sum(data["setup_cost"][p] * model.setup[p, t] + data["holding_cost"][p] * model.stock[p, t]
            + data["backlog_cost"][p] * model.backlog[p, t] for p in model.P for t in model.T)
'''
    _OBJECTIVE = '''\
model.obj = pyo.Objective(expr=costs, sense=pyo.minimize)
'''
    _OVERTIME_OBJECTIVE = '''\
model.overtime = pyo.Var(model.T, domain=pyo.NonNegativeReals, bounds=lambda model, t: (0, data["max_overtime"][t]))
model.obj = pyo.Objective(expr=costs + data["overtime_cost"] * sum(model.overtime[t] for t in model.T),
                          sense=pyo.minimize)
'''
    _BALANCE = '''\

# net inventory (stock minus backlog) moves by production minus demand
def balance(model, p, t):
    k = periods.index(t)
    if k == 0:
        before = data["initial_inventory"][p]
    else:
        before = model.stock[p, periods[k - 1]] - model.backlog[p, periods[k - 1]]
    return before + model.make[p, t] - model.stock[p, t] + model.backlog[p, t] == data["demand"][p][t]

model.balance = pyo.Constraint(model.P, model.T, rule=balance)
model.all_delivered = pyo.Constraint(model.P, rule=lambda model, p: model.backlog[p, periods[-1]] == 0)

# production needs a setup; a lot exceeds neither the product's total demand nor what the period's hours
# (with all their overtime) can make after the setup
def needs_setup(model, p, t):
    hours = data["capacity_hours"][t] + data.get("max_overtime", {}).get(t, 0) - data["setup_hours"][p]
    largest = min(sum(data["demand"][p].values()), hours / data["hours_per_unit"][p])
    return model.make[p, t] <= largest * model.setup[p, t]

model.needs_setup = pyo.Constraint(model.P, model.T, rule=needs_setup)
'''
    _CAPACITY = '''\

def capacity(model, t):
    return sum(data["hours_per_unit"][p] * model.make[p, t] + data["setup_hours"][p] * model.setup[p, t]
               for p in model.P) <= data["capacity_hours"][t]

model.capacity = pyo.Constraint(model.T, rule=capacity)
'''
    _OVERTIME_CAPACITY = '''\

def capacity(model, t):
    return sum(data["hours_per_unit"][p] * model.make[p, t] + data["setup_hours"][p] * model.setup[p, t]
               for p in model.P) <= data["capacity_hours"][t] + model.overtime[t]

model.capacity = pyo.Constraint(model.T, rule=capacity)
'''
    _MIN_LOT = '''\
model.min_lot = pyo.Constraint(model.P, model.T, rule=lambda model, p, t: model.make[p, t]
                               >= data["min_lot"][p] * model.setup[p, t])
'''
    _MAX_BACKLOG = '''\
model.max_backlog = pyo.Constraint(model.P, model.T, rule=lambda model, p, t: model.backlog[p, t]
                                   <= data["max_backlog"][p])
'''

    model_code = _HEAD + _COSTS + _OBJECTIVE + _BALANCE + _CAPACITY  # the base model

    def model_code_for(self, data: dict) -> str:
        overtime = "overtime_cost" in data
        code = self._HEAD + self._COSTS + (self._OVERTIME_OBJECTIVE if overtime else self._OBJECTIVE)
        code += self._BALANCE + (self._OVERTIME_CAPACITY if overtime else self._CAPACITY)
        if "min_lot" in data:
            code += self._MIN_LOT
        if "max_backlog" in data:
            code += self._MAX_BACKLOG
        return code

    def variant_of(self, data: dict) -> str:
        parts = [label for key, label in (("overtime_cost", "overtime"), ("min_lot", "min_lot"),
                                          ("max_backlog", "max_backlog")) if key in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "overtime": "nonnegative"} if "overtime_cost" in data else self.domains

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_products = size_for(difficulty, 2, 2, 3)
        n_periods = size_for(difficulty, 4, 6, 6)
        products = words["products"][:n_products]
        periods = words["period_names"][:n_periods]
        hours_per_unit = {p: rng.choice([0.25, 0.5, 0.75, 1.0, 1.5]) for p in products}
        setup_hours = {p: rng.choice([2, 3, 4, 6, 8]) for p in products}
        # lumpy demand: quiet periods and peaks
        demand = {p: {t: rng.choice([0, rng.randint(2, 8) * 5, rng.randint(10, 30) * 5]) for t in periods}
                  for p in products}
        for p in products:
            demand[p][periods[rng.randrange(n_periods)]] = rng.randint(16, 36) * 5  # at least one peak
        initial_inventory = {p: rng.randint(0, 3) * 5 for p in products}
        # the level plan makes every product in every period at its average net rate
        level = {p: (sum(demand[p].values()) - initial_inventory[p]) / n_periods for p in products}
        level_hours = sum(hours_per_unit[p] * level[p] + setup_hours[p] for p in products)
        capacity_hours = {t: int(math.ceil(level_hours * rng.uniform(1.0, 1.25) / 5)) * 5 for t in periods}
        setup_cost = {p: rng.randint(15, 60) * 10 for p in products}
        holding_cost = {p: rng.choice([1.0, 1.5, 2.0, 2.5, 3.0]) for p in products}
        backlog_cost = {p: holding_cost[p] * rng.choice([2, 3, 4]) for p in products}
        data = {"products": products, "periods": periods, "demand": demand,
                "initial_inventory": initial_inventory, "hours_per_unit": hours_per_unit,
                "setup_hours": setup_hours, "setup_cost": setup_cost, "holding_cost": holding_cost,
                "backlog_cost": backlog_cost, "capacity_hours": capacity_hours}
        if rng.random() < 0.5:
            data["overtime_cost"] = rng.randint(4, 12) * 5
            data["max_overtime"] = {t: rng.randint(1, 4) * 4 for t in periods}
        if rng.random() < 0.5:
            data["min_lot"] = {p: max(5, int(level[p] * rng.uniform(0.5, 0.9) / 5) * 5) if level[p] >= 5 else 0
                               for p in products}
        if rng.random() < 0.5:
            # at least the backlog the level plan runs up (so the level plan meets the ceiling)
            ceiling = {}
            for p in products:
                net, worst = initial_inventory[p], 0.0
                for t in periods:
                    net += level[p] - demand[p][t]
                    worst = max(worst, -net)
                ceiling[p] = int(math.ceil(worst / 5 + 1e-9)) * 5 + rng.randint(1, 4) * 5
            data["max_backlog"] = ceiling
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # the last period's orders of one product need more hours than the whole plan has
        p, last = data["products"][0], data["periods"][-1]
        hours = sum(data["capacity_hours"].values()) + sum(data.get("max_overtime", {}).values())
        extra = int(math.ceil(hours / data["hours_per_unit"][p])) + 5
        demand = {**data["demand"], p: {**data["demand"][p], last: data["demand"][p][last] + extra}}
        return {**data, "demand": demand}

    def _largest_lot(self, data: dict, p: str, t: str) -> float:
        """The most of product p period t can make: its total demand, or the hours left after the setup."""
        hours = data["capacity_hours"][t] + data.get("max_overtime", {}).get(t, 0) - data["setup_hours"][p]
        return min(sum(data["demand"][p].values()), hours / data["hours_per_unit"][p])

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        products, periods = data["products"], data["periods"]
        make, stock, backlog, setup = {}, {}, {}, {}
        for p in products:
            for t in periods:
                make[p, t] = matrix.add_var(f"make[{p},{t}]")
                stock[p, t] = matrix.add_var(f"stock[{p},{t}]", cost=data["holding_cost"][p])
                upper = data["max_backlog"][p] if "max_backlog" in data else math.inf
                if t == periods[-1]:
                    upper = 0.0  # every order is delivered by the end of the plan
                backlog[p, t] = matrix.add_var(f"backlog[{p},{t}]", 0.0, upper, cost=data["backlog_cost"][p])
                setup[p, t] = matrix.add_var(f"setup[{p},{t}]", 0, 1, cost=data["setup_cost"][p], integer=True)
        overtime = ({t: matrix.add_var(f"overtime[{t}]", 0.0, data["max_overtime"][t], cost=data["overtime_cost"])
                     for t in periods} if "overtime_cost" in data else {})
        for p in products:
            for k, t in enumerate(periods):
                row = {make[p, t]: 1.0, stock[p, t]: -1.0, backlog[p, t]: 1.0}
                rhs = data["demand"][p][t]
                if k == 0:
                    rhs -= data["initial_inventory"][p]
                else:
                    row[stock[p, periods[k - 1]]] = 1.0
                    row[backlog[p, periods[k - 1]]] = -1.0
                matrix.add_row(row, lower=rhs, upper=rhs, name=f"balance[{p},{t}]")
                matrix.add_row({make[p, t]: 1.0, setup[p, t]: -self._largest_lot(data, p, t)}, upper=0.0,
                               name=f"needs_setup[{p},{t}]")
                if "min_lot" in data:
                    matrix.add_row({make[p, t]: 1.0, setup[p, t]: -data["min_lot"][p]}, lower=0.0,
                                   name=f"min_lot[{p},{t}]")
        for t in periods:
            row = {}
            for p in products:
                row[make[p, t]] = data["hours_per_unit"][p]
                row[setup[p, t]] = data["setup_hours"][p]
            if overtime:
                row[overtime[t]] = -1.0
            matrix.add_row(row, upper=data["capacity_hours"][t], name=f"capacity[{t}]")

    def constraint_rows(self, data: dict, x: dict):
        make, stock, backlog, setup = x["make"], x["stock"], x["backlog"], x["setup"]
        products, periods = data["products"], data["periods"]
        for p in products:
            net = data["initial_inventory"][p]
            for t in periods:
                yield Row(f"balance[{p},{t}]", net + make[p, t] - stock[p, t] + backlog[p, t], "==",
                          data["demand"][p][t])
                net = stock[p, t] - backlog[p, t]
                yield Row(f"needs_setup[{p},{t}]", make[p, t] - self._largest_lot(data, p, t) * setup[p, t], "<=", 0)
                if "min_lot" in data:
                    yield Row(f"min_lot[{p},{t}]", make[p, t] - data["min_lot"][p] * setup[p, t], ">=", 0)
                if "max_backlog" in data:
                    yield Row(f"max_backlog[{p},{t}]", backlog[p, t], "<=", data["max_backlog"][p])
            yield Row(f"all_delivered[{p}]", backlog[p, periods[-1]], "==", 0)
        for t in periods:
            hours = sum(data["hours_per_unit"][p] * make[p, t] + data["setup_hours"][p] * setup[p, t]
                        for p in products)
            available = data["capacity_hours"][t]
            if "overtime_cost" in data:
                available += x["overtime"][t]
                yield Row(f"max_overtime[{t}]", x["overtime"][t], "<=", data["max_overtime"][t])
            yield Row(f"capacity[{t}]", hours, "<=", available)

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["setup_cost"][p] * x["setup"][p, t] + data["holding_cost"][p] * x["stock"][p, t]
                    + data["backlog_cost"][p] * x["backlog"][p, t]
                    for p in data["products"] for t in data["periods"])
        if "overtime_cost" in data:
            total += data["overtime_cost"] * sum(x["overtime"][t] for t in data["periods"])
        return total

    def _rules(self, data: dict, words: dict, representation: str) -> list[str]:
        unit, period, money, resource = words["unit"], words["period"], words["money"], words["resource"]
        listed = representation == "text"
        rules = []
        if "overtime_cost" in data:
            limits = "" if not listed else " (" + ", ".join(
                f"{fmt(data['max_overtime'][t])} in {t}" for t in data["periods"]) + ")"
            rules.append(f"Overtime can add hours of {resource} in any {period}, up to a limit per {period}"
                         f"{limits}, at {fmt(data['overtime_cost'])} {money} per overtime hour.")
        if "min_lot" in data:
            lots = "" if not listed else ": " + ", ".join(
                f"{fmt(data['min_lot'][p])} {unit} of {p}" for p in data["products"])
            rules.append(f"In a {period} a product is set up, at least its minimum lot must be made{lots}.")
        if "max_backlog" in data:
            ceilings = "" if not listed else ": " + ", ".join(
                f"{fmt(data['max_backlog'][p])} {unit} of {p}" for p in data["products"])
            rules.append(f"At the end of any {period}, the late orders of a product may not exceed its backlog "
                         f"ceiling{ceilings}.")
        return rules

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        products, periods = data["products"], data["periods"]
        unit, period, money, resource = words["unit"], words["period"], words["money"], words["resource"]
        intro = (f"{words['company'].capitalize()} plans production of {join_names(products)} on {resource} over "
                 f"the next {len(periods)} {plural(period)} ({join_names(periods)}). A setup ({words['setup_words']}) "
                 f"is needed in every period a product is made; it costs money and uses hours of {resource}. "
                 f"Units left in stock at the end of a {period} incur a holding cost. Orders may be delivered "
                 f"late, with {words['late_words']} (a backlog cost per {words['one_unit']} for every {period} it "
                 "is late), but every order must be delivered by the end of the plan.")
        rules = " ".join(self._rules(data, words, representation))
        cost_words = "setup, holding and backlog cost" + (" plus overtime" if "overtime_cost" in data else "")
        question = (f"In which {plural(period)} should each product be set up, and how many {unit} should be made, to "
                    f"minimize the total {cost_words}? What is that minimum (in {money})?")
        if representation == "text":
            lines = []
            for p in products:
                demand = ", ".join(f"{fmt(data['demand'][p][t])} in {t}" for t in periods)
                lines.append(
                    f"For {p}: orders are {demand} ({unit}); each {words['one_unit']} takes "
                    f"{fmt(data['hours_per_unit'][p])} hours; a setup costs {fmt(data['setup_cost'][p])} {money} "
                    f"and takes {fmt(data['setup_hours'][p])} hours; holding costs "
                    f"{fmt(data['holding_cost'][p])} {money} and backlog {fmt(data['backlog_cost'][p])} {money} "
                    f"per {words['one_unit']} and {period}; {fmt(data['initial_inventory'][p])} {unit} are in "
                    "stock at the start.")
            hours = ", ".join(f"{fmt(data['capacity_hours'][t])} in {t}" for t in periods)
            return f"{intro} {' '.join(lines)} Regular hours of {resource}: {hours}. {rules} {question}"
        if representation == "table":
            hourly = [[p, *[data["demand"][p][t] for t in periods]] for p in products]
            hourly.append(["regular hours", *[data["capacity_hours"][t] for t in periods]])
            if "overtime_cost" in data:
                hourly.append(["most overtime hours", *[data["max_overtime"][t] for t in periods]])
            demand = markdown_table([f"orders ({unit})", *periods], hourly)
            headers = ["product", "hours per unit", "setup hours", f"setup cost ({money})",
                       f"holding ({money}/unit/{period})", f"backlog ({money}/unit/{period})", "initial stock"]
            extra = [("min_lot", "minimum lot"), ("max_backlog", "backlog ceiling")]
            headers += [label for key, label in extra if key in data]
            costs = markdown_table(headers, [
                [p, data["hours_per_unit"][p], data["setup_hours"][p], data["setup_cost"][p],
                 data["holding_cost"][p], data["backlog_cost"][p], data["initial_inventory"][p],
                 *[data[key][p] for key, _ in extra if key in data]] for p in products])
            return f"{intro}\n\n{demand}\n\n{costs}\n\n{rules} {question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro} {rules}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        unit = scenario.words["unit"]
        lines = []
        for p in data["products"]:
            runs = [f"{fmt(round(x['make'][p, t], 4))} {unit} in {t}" for t in data["periods"]
                    if x["setup"][p, t] > 0.5 and x["make"][p, t] > 1e-6]
            late = sum(x["backlog"][p, t] for t in data["periods"])
            lines.append(f"- {p}: {'; '.join(runs) or 'no production'} (unit-periods late: {fmt(round(late, 4))})")
        return "\n".join(lines)

    def formulation(self, data: dict) -> str:
        parameters = ("demand $d_{pt}$, initial stock $I_{p0}$, hours per unit $a_p$, setup hours $s_p$, setup "
                      "cost $f_p$, holding cost $h_p$, backlog cost $b_p$, regular hours $C_t$, total demand "
                      "$D_p = \\sum_t d_{pt}$, largest lot $M_{pt} = \\min(D_p, (C_t + O_t - s_p) / a_p)$ ($O_t = 0$ "
                      "without overtime)")
        variables = ("$x_{pt} \\ge 0$ (made), $I_{pt} \\ge 0$ (stock), $B_{pt} \\ge 0$ (backlog) at the end of "
                     "$t$, $y_{pt} \\in \\{0,1\\}$ (setup)")
        objective = "\\sum_{p \\in P}\\sum_{t \\in T} (f_p y_{pt} + h_p I_{pt} + b_p B_{pt})"
        capacity = "& \\sum_{p \\in P} (a_p x_{pt} + s_p y_{pt}) \\le C_t && \\forall t"
        rows = []
        if "overtime_cost" in data:
            parameters += ", overtime cost $o$, overtime limit $O_t$"
            variables += ", $z_t \\in [0, O_t]$ (overtime hours)"
            objective += " + o \\sum_{t \\in T} z_t"
            capacity = "& \\sum_{p \\in P} (a_p x_{pt} + s_p y_{pt}) \\le C_t + z_t && \\forall t"
        if "min_lot" in data:
            parameters += ", minimum lot $m_p$"
            rows.append("& x_{pt} \\ge m_p y_{pt} && \\forall p, t")
        if "max_backlog" in data:
            parameters += ", backlog ceiling $\\overline{B}_p$"
            rows.append("& B_{pt} \\le \\overline{B}_p && \\forall p, t")
        return (
            "**Sets**: products $P$, periods $T = \\{1, \\dots, n\\}$ ($B_{p0} = 0$).\n\n"
            f"**Parameters**: {parameters}.\n\n**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n"
            "\\text{s.t.}\\ & I_{p,t-1} - B_{p,t-1} + x_{pt} - I_{pt} + B_{pt} = d_{pt} && \\forall p, t \\\\\n"
            "& B_{pn} = 0 && \\forall p \\\\\n"
            f"{capacity} \\\\\n"
            "& x_{pt} \\le M_{pt}\\, y_{pt} && \\forall p, t \\\\\n"
            + "".join(f"{row} \\\\\n" for row in rows)
            + "& y_{pt} \\in \\{0,1\\}\n\\end{aligned}\n$$"
        )


FAMILY = LotSizingBacklogging()
