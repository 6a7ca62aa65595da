"""Multi-period production and inventory planning (LP): meet seasonal demand over several periods with
regular-time and overtime production, storing goods ahead of the peak when that is cheaper than
overtime, within limited storage.

Structure variants (drawn per instance, recorded by the keys present): demand that may be delivered late at
a cost per unit and period, all of it by the end of the horizon (`backorder_cost`, a backlog variable), a
setup cost for every period in which a product is made at all (`setup_cost`, binaries: a MILP lot-sizing
model), and a stock each product must have at the end of the horizon (`final_stock`), each present or
absent, so the program has eight skeletons."""

from __future__ import annotations

import math
import random

from data_synth.family import (
    INF,
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

# the eval split's own industries, companies, products, units, periods and currencies (held out from training)
EVAL_SCENARIOS = (
    Scenario("bicycles", "bicycle manufacturing", {
        "company": "a bicycle works", "products": ["gravel bikes", "cargo bikes", "folding bikes"],
        "unit": "frames", "period": "fortnight",
        "period_names": [f"fortnight {k}" for k in range(1, 9)],
        "money": "Danish kroner", "season": "the spring cycling season",
    }),
    Scenario("fertilizer", "fertilizer blending", {
        "company": "a fertilizer blending plant", "products": ["granular urea", "compound blend", "potash blend"],
        "unit": "tonnes", "period": "month",
        "period_names": ["Oct", "Nov", "Dec", "Jan", "Feb", "Mar", "Apr", "May"],
        "money": "rand", "season": "the spring planting",
    }),
    Scenario("vaccines", "vaccine fill-finish", {
        "company": "a vaccine filling site", "products": ["flu vials", "booster vials", "travel vaccine vials"],
        "unit": "trays", "period": "week",
        "period_names": [f"W{k}" for k in range(35, 43)],
        "money": "pounds", "season": "the winter flu season",
    }),
)


def objective_line(terms: list[str]) -> str:
    """The Pyomo objective over the cost terms the model code has defined."""
    return f"model.obj = pyo.Objective(expr={' + '.join(terms)}, sense=pyo.minimize)\n"


class MultiPeriodProduction(ProblemFamily):
    name = "multi_period_production"
    title = "Multi-period production and inventory planning"
    problem_type = "LP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
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
        "backorder_cost": "cost per unit of demand delivered one period late, keyed by product (only when demand "
                          "may be backordered)",
        "setup_cost": "fixed cost of making a product at all in a period, keyed by product (only when there are "
                      "setup costs)",
        "final_stock": "units of each product that must be in stock at the end of the last period, keyed by "
                       "product (only when such a stock is required)",
    }
    # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
    phrasings = (
        Phrasing(r"\bis planning production of\b", ("is planning production of",), ("sets out how it will make",)),
        Phrasing(r"\bDemand must be met in every\b", ("Demand must be met in every",),
                 ("Orders have to be filled in each",)),
        Phrasing(r"\bgoods can be made in regular time or in overtime \(which costs a premium of\b",
                 ("goods can be made in regular time or in overtime (which costs a premium of",),
                 ("output comes from regular shifts or from overtime (charged at a premium of",)),
        # stops before "at most", which the generic rules word two ways in training
        Phrasing(r"\bper labour hour on top of material\), and goods made early can be stored, but\b",
                 ("per labour hour on top of material), and goods made early can be stored, but",),
                 ("for each labour hour over and above material), and items built ahead of need may be kept "
                  "in store, though",)),
        Phrasing(r"\bin total fit in the warehouse at the end of a\b",
                 ("in total fit in the warehouse at the end of a",), ("overall fit into the store at the close of any",)),
        Phrasing(r"(?<=\d )regular labour hours and up to\b", ("regular labour hours and up to",),
                 ("hours of regular labour and as many as",)),
        Phrasing(r"(?<=\d )regular hours and\b", ("regular hours and",), ("hours of regular time plus",)),
        Phrasing(r"(?<=\d )overtime hours\.", ("overtime hours.",), ("hours of overtime.",)),
        Phrasing(r"\bDemand may be delivered late, in a later\b", ("Demand may be delivered late, in a later",),
                 ("Orders can also be filled late, in a subsequent",)),
        Phrasing(r"\bof delay, but every order must be delivered by the end of\b",
                 ("of delay, but every order must be delivered by the end of",),
                 ("of lateness, yet all orders have to be filled by the close of",)),
        Phrasing(r"\bMaking a product at all in a\b", ("Making a product at all in a",),
                 ("Producing an item at all in a",)),
        Phrasing(r"\brequires a setup, which costs a fixed amount every\b",
                 ("requires a setup, which costs a fixed amount every",),
                 ("calls for a changeover, charged as a flat sum in each",)),
        Phrasing(r"\bthe product is made\.", ("the product is made.",), ("in which it is produced.",)),
        Phrasing(r"\ba stock must remain:", ("a stock must remain:",), ("some stock has to be left over:",)),
        Phrasing(r"\bLate delivery costs, per\b", ("Late delivery costs, per",), ("Lateness penalties, for each",)),
        Phrasing(r"\bof delay:", ("of delay:",), ("of lateness:",)),
        Phrasing(r"\bSetup costs:", ("Setup costs:",), ("Changeover charges:",)),
        Phrasing(r"\bof each product should be made in regular time and in overtime in each\b",
                 ("of each product should be made in regular time and in overtime in each",),
                 ("of every product are to be built on regular time and on overtime in each",)),
        Phrasing(r"\bto meet demand at minimum total cost\b", ("to meet demand at minimum total cost",),
                 ("so that orders are covered as cheaply as possible",)),
        Phrasing(r"\(material, overtime premium\b", ("(material, overtime premium",),
                 ("(counting material, overtime premium",)),
        Phrasing(r"\bWhat is the minimum total cost in\b", ("What is the minimum total cost in",),
                 ("How low can the total cost go, in",)),
        # stops before "are allowed", which the generic rules word two ways in training
        Phrasing(r"\bFractional quantities\b(?= are allowed)", ("Fractional quantities",),
                 ("Non-integer amounts",)),
        Phrasing(r"(?<=: )demand of\b", ("demand of",), ("orders of",)),
        Phrasing(r"(?<=\d )labour hours and\b", ("labour hours and",), ("hours of labour and",)),
        Phrasing(r"\bof material per unit; storage costs\b", ("of material per unit; storage costs",),
                 ("of material for every unit; holding stock costs",)),
        Phrasing(r"\bper unit per\b", ("per unit per",), ("a unit each",)),
        Phrasing(r"\bin stock at the start\.", ("in stock at the start.",), ("on hand at the outset.",)),
        Phrasing(r"\bdemand\b(?= \()", ("demand",), ("orders",)),
        Phrasing(r"(?<=\| )product(?= \|)", ("product",), ("item",)),
        Phrasing(r"(?<=\| )labour hours per unit(?= \|)", ("labour hours per unit",), ("labour h/unit",)),
        Phrasing(r"\bmaterial cost\b(?= \()", ("material cost",), ("materials",)),
        Phrasing(r"\bholding cost\b(?= \()", ("holding cost",), ("storage charge",)),
        Phrasing(r"(?<=\| )initial stock(?= \|)", ("initial stock",), ("opening stock",)),
        Phrasing(r"(?<=\| )hours(?= \|)", ("hours",), ("labour time",)),
        Phrasing(r"(?<=\| )regular(?= \|)", ("regular",), ("regular time",)),
        Phrasing(r"(?<=\| )overtime(?= \|)", ("overtime",), ("overtime allowed",)),
        Phrasing(r"\blist of product names\b", ("list of product names",), ("names of the products",)),
        Phrasing(r"\blist of period names, in time order\b", ("list of period names, in time order",),
                 ("names of the periods, earliest first",)),
        Phrasing(r"(?<=\]: )units to deliver in the period\b", ("units to deliver in the period",),
                 ("quantity due in that period",)),
        Phrasing(r"\bunits of each product in stock before the first period\b",
                 ("units of each product in stock before the first period",),
                 ("opening stock of every product",)),
        Phrasing(r"\blabour hours per unit of each product\b", ("labour hours per unit of each product",),
                 ("labour time one unit of a product takes, in hours",)),
        Phrasing(r"\bmaterial cost per unit of each product\b", ("material cost per unit of each product",),
                 ("materials spend for one unit of a product",)),
        Phrasing(r"\bcost of storing one unit of each product from one period to the next\b",
                 ("cost of storing one unit of each product from one period to the next",),
                 ("expense of carrying one unit of a product over into the following period",)),
        Phrasing(r"\bregular-time labour hours available in each period\b",
                 ("regular-time labour hours available in each period",),
                 ("hours of regular-time labour on hand in every period",)),
        Phrasing(r"\bovertime labour hours available in each period\b",
                 ("overtime labour hours available in each period",),
                 ("hours of overtime labour on hand in every period",)),
        Phrasing(r"\bextra cost per overtime labour hour\b", ("extra cost per overtime labour hour",),
                 ("premium paid on top for one hour of overtime labour",)),
        Phrasing(r"\bmost units \(all products together\) that can be held in stock at the end of a period\b",
                 ("most units (all products together) that can be held in stock at the end of a period",),
                 ("warehouse limit: the largest number of units, summed over products, that may sit in stock when "
                  "a period closes",)),
        Phrasing(r"\bcost per unit of demand delivered one period late\b",
                 ("cost per unit of demand delivered one period late",),
                 ("charge for one unit of demand filled a period late",)),
        Phrasing(r"\bfixed cost of making a product at all in a period\b",
                 ("fixed cost of making a product at all in a period",),
                 ("flat charge for producing a product at all in some period",)),
        Phrasing(r"\bunits of each product that must be in stock at the end of the last period\b",
                 ("units of each product that must be in stock at the end of the last period",),
                 ("stock of every product required when the final period closes",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(present only if",)),
    )
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _VARIABLES = '''\
model = pyo.ConcreteModel()
products, periods = data["products"], data["periods"]
model.regular = pyo.Var(products, periods, domain=pyo.NonNegativeReals)   # units made in regular time
model.overtime = pyo.Var(products, periods, domain=pyo.NonNegativeReals)  # units made in overtime
model.stock = pyo.Var(products, periods, domain=pyo.NonNegativeReals)     # units held at the period's end
'''
    _BACKLOG_VARIABLE = '''\
model.backlog = pyo.Var(products, periods, domain=pyo.NonNegativeReals)   # demand still owed at the period's end
'''
    _SETUP_VARIABLE = '''\
model.produce = pyo.Var(products, periods, domain=pyo.Binary)             # 1 when the product is made at all
'''
    _COSTS = '''\

material = sum(data["unit_cost"][p] * (model.regular[p, t] + model.overtime[p, t])
               for p in products for t in periods)
overtime = sum(data["overtime_premium"] * data["hours_per_unit"][p] * model.overtime[p, t]
               for p in products for t in periods)
holding = sum(data["holding_cost"][p] * model.stock[p, t] for p in products for t in periods)
'''
    _BACKLOG_COST = '''\
late = sum(data["backorder_cost"][p] * model.backlog[p, t] for p in products for t in periods)
'''
    _SETUP_COST = '''\
setups = sum(data["setup_cost"][p] * model.produce[p, t] for p in products for t in periods)
'''
    _BALANCE = '''\

def balance(model, p, t):
    k = periods.index(t)
    before = data["initial_inventory"][p] if k == 0 else model.stock[p, periods[k - 1]]
    return before + model.regular[p, t] + model.overtime[p, t] - model.stock[p, t] == data["demand"][p][t]

model.balance = pyo.Constraint(products, periods, rule=balance)
'''
    _BALANCE_BACKLOG = '''\

def balance(model, p, t):
    k = periods.index(t)
    if k == 0:
        before = data["initial_inventory"][p]
    else:
        before = model.stock[p, periods[k - 1]] - model.backlog[p, periods[k - 1]]
    made = model.regular[p, t] + model.overtime[p, t]
    return before + made - model.stock[p, t] + model.backlog[p, t] == data["demand"][p][t]

model.balance = pyo.Constraint(products, periods, rule=balance)
# every order is delivered by the end of the horizon
model.no_final_backlog = pyo.Constraint(products, rule=lambda model, p: model.backlog[p, periods[-1]] == 0)
'''
    _HOURS = '''\

model.regular_hours = pyo.Constraint(periods, rule=lambda model, t: sum(
    data["hours_per_unit"][p] * model.regular[p, t] for p in products) <= data["regular_hours"][t])
model.overtime_hours = pyo.Constraint(periods, rule=lambda model, t: sum(
    data["hours_per_unit"][p] * model.overtime[p, t] for p in products) <= data["overtime_hours"][t])
model.storage = pyo.Constraint(periods, rule=lambda model, t: sum(
    model.stock[p, t] for p in products) <= data["storage_capacity"])
'''
    _SETUP = '''\
# a product is made in a period only when it is set up then (at most what all the hours can make)
model.setup = pyo.Constraint(products, periods, rule=lambda model, p, t: model.regular[p, t] + model.overtime[p, t]
                             <= (data["regular_hours"][t] + data["overtime_hours"][t]) / data["hours_per_unit"][p]
                             * model.produce[p, t])
'''
    _FINAL_STOCK = '''\
model.final_stock = pyo.Constraint(
    products, rule=lambda model, p: model.stock[p, periods[-1]] >= data["final_stock"][p])
'''

    def model_code_for(self, data: dict) -> str:
        backlog, setup = "backorder_cost" in data, "setup_cost" in data
        code = self._VARIABLES
        code += self._BACKLOG_VARIABLE if backlog else ""
        code += self._SETUP_VARIABLE if setup else ""
        code += self._COSTS
        code += self._BACKLOG_COST if backlog else ""
        code += self._SETUP_COST if setup else ""
        code += objective_line(["material", "overtime", "holding"] + (["late"] if backlog else [])
                               + (["setups"] if setup else []))
        code += (self._BALANCE_BACKLOG if backlog else self._BALANCE) + self._HOURS
        code += self._SETUP if setup else ""
        code += self._FINAL_STOCK if "final_stock" in data else ""
        return code

    model_code = _VARIABLES + _COSTS + objective_line(["material", "overtime", "holding"]) + _BALANCE + _HOURS

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("backorder_cost", "setup_cost", "final_stock") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        domains = dict(self.domains)
        if "backorder_cost" in data:
            domains["backlog"] = "nonnegative"
        if "setup_cost" in data:
            domains["produce"] = "binary"
        return domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "setup_cost" in data else "LP"

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
        data = {"products": products, "periods": periods, "demand": demand,
                "initial_inventory": initial_inventory, "hours_per_unit": hours_per_unit,
                "unit_cost": unit_cost, "holding_cost": holding_cost,
                "regular_hours": {t: regular for t in periods}, "overtime_hours": {t: overtime for t in periods},
                "overtime_premium": rng.randint(12, 30), "storage_capacity": storage_capacity}
        if rng.random() < 0.5:
            data["backorder_cost"] = {p: rng.randint(3, 20) for p in products}
        if rng.random() < 0.5:
            data["setup_cost"] = {p: rng.randint(10, 80) * 10 for p in products}
        if rng.random() < 0.5:
            # made on top of the last period's demand with at most half its spare hours (so it stays feasible)
            spare = regular + overtime - load[periods[-1]]
            share = min(0.5 * spare / sum(hours_per_unit.values()), 0.3 * storage_capacity / n_products)
            data["final_stock"] = {p: max(1, int(share * rng.uniform(0.3, 1.0))) for p in products}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # last-period demand beyond the opening stock plus everything all periods' hours can make (late delivery
        # cannot help: every order is due by the end of the horizon)
        p, last = data["products"][0], data["periods"][-1]
        hours = sum(data["regular_hours"][t] + data["overtime_hours"][t] for t in data["periods"])
        too_much = data["initial_inventory"][p] + int(hours / data["hours_per_unit"][p]) + 10
        return {**data, "demand": {**data["demand"], p: {**data["demand"][p], last: too_much}}}

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
        backlog = {}
        if "backorder_cost" in data:
            for p in products:
                for k, t in enumerate(periods):
                    # the last period's backlog is fixed at zero by its bounds: every order is due by then
                    upper = 0.0 if k == len(periods) - 1 else INF
                    backlog[p, t] = matrix.add_var(f"backlog[{p},{t}]", 0.0, upper, cost=data["backorder_cost"][p])
        if "setup_cost" in data:
            for p in products:
                for t in periods:
                    produce = matrix.add_var(f"produce[{p},{t}]", 0.0, 1.0, cost=data["setup_cost"][p], integer=True)
                    most = (data["regular_hours"][t] + data["overtime_hours"][t]) / data["hours_per_unit"][p]
                    matrix.add_row({regular[p, t]: 1.0, extra[p, t]: 1.0, produce: -most}, upper=0.0,
                                   name=f"setup[{p},{t}]")
        for p in products:
            opening = data["initial_inventory"][p]
            for k, t in enumerate(periods):
                row = {regular[p, t]: 1.0, extra[p, t]: 1.0, stock[p, t]: -1.0}
                if backlog:
                    row[backlog[p, t]] = 1.0
                need = data["demand"][p][t]
                if k == 0:
                    need -= opening
                else:
                    row[stock[p, periods[k - 1]]] = 1.0
                    if backlog:
                        row[backlog[p, periods[k - 1]]] = -1.0
                matrix.add_row(row, lower=need, upper=need, name=f"balance[{p},{t}]")
        for p, amount in data.get("final_stock", {}).items():
            matrix.add_row({stock[p, periods[-1]]: 1.0}, lower=amount, name=f"final_stock[{p}]")
        for t in periods:
            matrix.add_row({regular[p, t]: data["hours_per_unit"][p] for p in products},
                           upper=data["regular_hours"][t], name=f"regular_hours[{t}]")
            matrix.add_row({extra[p, t]: data["hours_per_unit"][p] for p in products},
                           upper=data["overtime_hours"][t], name=f"overtime_hours[{t}]")
            matrix.add_row({stock[p, t]: 1.0 for p in products}, upper=data["storage_capacity"],
                           name=f"storage[{t}]")

    def constraint_rows(self, data: dict, x: dict):
        products, periods = data["products"], data["periods"]
        backlog = x.get("backlog")
        for p in products:
            before = data["initial_inventory"][p]
            for t in periods:
                lhs = before + x["regular"][p, t] + x["overtime"][p, t] - x["stock"][p, t]
                if backlog is not None:
                    lhs += backlog[p, t]
                yield Row(f"balance[{p},{t}]", lhs, "==", data["demand"][p][t])
                before = x["stock"][p, t] - (backlog[p, t] if backlog is not None else 0.0)
            if backlog is not None:
                yield Row(f"no_final_backlog[{p}]", backlog[p, periods[-1]], "==", 0)
            if "setup_cost" in data:
                for t in periods:
                    most = (data["regular_hours"][t] + data["overtime_hours"][t]) / data["hours_per_unit"][p]
                    yield Row(f"setup[{p},{t}]", x["regular"][p, t] + x["overtime"][p, t] - most * x["produce"][p, t],
                              "<=", 0)
            if "final_stock" in data:
                yield Row(f"final_stock[{p}]", x["stock"][p, periods[-1]], ">=", data["final_stock"][p])
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
                if "backorder_cost" in data:
                    total += data["backorder_cost"][p] * x["backlog"][p, t]
                if "setup_cost" in data:
                    total += data["setup_cost"][p] * x["produce"][p, t]
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
                 f"next {len(periods)} {plural(period)}, ahead of {words['season']}. Demand must be met in every "
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
        costs = "material, overtime premium and storage"
        rules = []  # the optional rules, stated in every representation
        if "backorder_cost" in data:
            costs = "material, overtime premium, storage and late delivery"
            rules.append(f"Demand may be delivered late, in a later {period}, at a cost per {unit[:-1]} and "
                         f"{period} of delay, but every order must be delivered by the end of {periods[-1]}.")
        if "setup_cost" in data:
            costs += " and setups" if "backorder_cost" not in data else ", plus setups"
            rules.append(f"Making a product at all in a {period} requires a setup, which costs a fixed amount "
                         f"every {period} the product is made.")
        if "final_stock" in data:
            rules.append(f"At the end of {periods[-1]} a stock must remain: "
                         + ", ".join(f"at least {fmt(v)} {unit} of {p}" for p, v in data["final_stock"].items()) + ".")
        if representation != "file":
            if "backorder_cost" in data:
                rules.append(f"Late delivery costs, per {unit[:-1]} and {period} of delay: "
                             + ", ".join(f"{fmt(v)} {money} for {p}" for p, v in data["backorder_cost"].items()) + ".")
            if "setup_cost" in data:
                rules.append("Setup costs: " + ", ".join(f"{fmt(v)} {money} for {p}"
                                                         for p, v in data["setup_cost"].items()) + ".")
        hours += " " + " ".join(rules) if rules else ""
        question = (f"How many {unit} of each product should be made in regular time and in overtime in each "
                    f"{period} to meet demand at minimum total cost ({costs})? "
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
            stated = f" {' '.join(rules)}" if rules else ""
            return f"{intro}{stated}\n\n{demand}\n\n{products_table}\n\n{hours_table}\n\n{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            stated = f" {' '.join(rules)}" if rules else ""
            return f"{intro}{stated}\n\n{describe_data_file(fields)}\n\n{question}"
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
        backlog = "backorder_cost" in data
        parameters = ("demand $d_{pt}$, opening stock $I_{p0}$, labour hours per unit $a_p$, material cost $c_p$, "
                      "holding cost $h_p$, regular hours $R_t$, overtime hours $O_t$, overtime premium $w$, "
                      "storage capacity $S$")
        variables = ("$r_{pt}, o_{pt} \\ge 0$ (units made in regular time and overtime), "
                     "$I_{pt} \\ge 0$ (stock at the end of $t$)")
        objective = ("\\sum_{p \\in P}\\sum_{t \\in T} \\big(c_p (r_{pt} + o_{pt}) + w a_p o_{pt} + h_p I_{pt}"
                     + (" + b_p B_{pt}" if backlog else "") + (" + f_p y_{pt}" if "setup_cost" in data else "")
                     + "\\big)")
        if backlog:
            parameters += ", backorder cost $b_p$"
            variables += ", $B_{pt} \\ge 0$ (demand still owed at the end of $t$, $B_{p0} = 0$)"
            rows = ["\\text{s.t.}\\ & I_{p,t-1} - B_{p,t-1} + r_{pt} + o_{pt} - I_{pt} + B_{pt} = d_{pt} "
                    "&& \\forall p, t",
                    "& B_{pn} = 0 && \\forall p"]
        else:
            rows = ["\\text{s.t.}\\ & I_{p,t-1} + r_{pt} + o_{pt} - I_{pt} = d_{pt} && \\forall p, t"]
        rows += ["& \\sum_{p \\in P} a_p r_{pt} \\le R_t && \\forall t",
                 "& \\sum_{p \\in P} a_p o_{pt} \\le O_t && \\forall t",
                 "& \\sum_{p \\in P} I_{pt} \\le S && \\forall t"]
        if "setup_cost" in data:
            parameters += ", setup cost $f_p$"
            variables += ", $y_{pt} \\in \\{0, 1\\}$ (1 when $p$ is made in $t$)"
            rows.append("& r_{pt} + o_{pt} \\le \\frac{R_t + O_t}{a_p} y_{pt} && \\forall p, t")
        if "final_stock" in data:
            parameters += ", required final stock $F_p$"
            rows.append("& I_{pn} \\ge F_p && \\forall p")
        rows.append("& r_{pt}, o_{pt}, I_{pt} \\ge 0")
        return (
            "**Sets**: products $P$, periods $T = \\{1, \\dots, n\\}$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = MultiPeriodProduction()
