"""Capacitated lot sizing with setups (MILP): decide in which periods to set up production of each
product and how much to make, trading setup costs against inventory holding costs, within a shared
production capacity that setups also consume.

Structure variants (drawn per instance, recorded by the keys present): demand that may be delivered late at a
cost per unit and period, all of it by the last period (`backorder_cost`, a backlog variable), a batch size
that limits every production run (`max_lot`), and overtime hours bought at a cost up to a limit per period
(`overtime_cost` with `max_overtime`; the regular hours are then fewer), each present or absent, so the
program has eight skeletons. Overtime always suffices to make every period's demand in that period and a
batch holds at least the largest such run, so the lot-for-lot plan keeps every variant feasible."""

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
# the eval split's own industries, companies, products, periods and currencies (held out from training)
EVAL_SCENARIOS = (
    Scenario("dairy", "dairy processing", {
        "company": "a cooperative dairy", "resource": "the filling machine", "products": ["skimmed milk",
                                                                                          "yoghurt", "kefir"],
        "unit": "trays", "one_unit": "tray", "period": "fortnight", "on": "in",
        "period_names": [f"fortnight {k}" for k in range(1, 9)],
        "setup_words": "sterilising the filling heads and loading new cartons", "money": "Danish kroner",
    }),
    Scenario("paint", "industrial coatings", {
        "company": "an industrial paint maker", "resource": "the mixing vessel", "products": ["primer", "enamel",
                                                                                              "varnish"],
        "unit": "drums", "one_unit": "drum", "period": "season", "on": "in",
        "period_names": ["spring 2027", "summer 2027", "autumn 2027", "winter 2027", "spring 2028",
                         "summer 2028", "autumn 2028", "winter 2028"],
        "setup_words": "flushing the vessel and recalibrating the pigment dosing", "money": "pounds",
    }),
    Scenario("bakery", "industrial baking", {
        "company": "an industrial bakery", "resource": "the tunnel oven", "products": ["rye loaf", "baguette",
                                                                                       "brioche"],
        "unit": "racks", "one_unit": "rack", "period": "day", "on": "on",
        "period_names": [f"{k} March" for k in range(1, 9)],
        "setup_words": "swapping the baking trays and re-profiling the oven temperature",
        "money": "Swiss francs",
    }),
)


class LotSizing(ProblemFamily):
    name = "lot_sizing"
    title = "Capacitated lot sizing with setups"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"make": "nonnegative", "stock": "nonnegative", "setup": "binary"}
    # the family's fixed sentences, in other words for each split (data_synth.statements)
    phrasings = (
        Phrasing(r"\bwhich costs money and uses hours of\b",
                 ("which costs money and uses hours of", "which has a cost and takes up hours of"),
                 ("which is paid for and consumes hours of",)),
        Phrasing(r"Demand must be met on time \(no backorders\)\.",
                 ("Demand must be met on time (no backorders).", "Every demand is due in its own period."),
                 ("Late deliveries are not allowed.",)),
        Phrasing(r"\bshould each product be set up, and how many\b",
                 ("should each product be set up, and how many",),
                 ("is each product to be set up, and how many",)),
        Phrasing(r"\bare in stock at the start\b", ("are in stock at the start", "are on hand at the start"),
                 ("are available initially",)),
        Phrasing(r"\bcan meet that\b", ("can meet that",), ("may serve that",)),
        Phrasing(r"Demand that is not met on time may be delivered late",
                 ("Demand that is not met on time may be delivered late",
                  "Orders that cannot be met on time may be delivered late"),
                 ("Demand missed in its own period may still be delivered late",)),
        Phrasing(r"A production run can make at most one batch:",
                 ("A production run can make at most one batch:", "One production run yields at most a batch:"),
                 ("No run can exceed a single batch:",)),
        Phrasing(r"overtime hours can be added in any",
                 ("overtime hours can be added in any",), ("overtime hours may be bought for any",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bplans production of\b", ("plans production of",),
                 ("draws up a production schedule for",)),
        Phrasing(r"\bProducing a product in a\b", ("Producing a product in a",),
                 ("Making any product in a",)),
        Phrasing(r"\brequires a setup \(", ("requires a setup (",), ("first calls for a setup (",)),
        Phrasing(r"\bUnits made in a\b", ("Units made in a",), ("Whatever is made in a",)),
        Phrasing(r"'s demand or be stored for later\b", ("'s demand or be stored for later",),
                 ("'s demand or go into stock for later",)),
        Phrasing(r"\(backordered\), at a cost per\b", ("(backordered), at a cost per",),
                 ("(as a backorder), with a penalty for each",)),
        Phrasing(r"\bit is late; everything must be delivered by\b",
                 ("it is late; everything must be delivered by",),
                 ("of delay; all demand has to be delivered by",)),
        # "at most" has two training wordings: the rule stops before it
        Phrasing(r"\bA production run can make (?=at most one batch \()", ("A production run can make ",),
                 ("A single production run yields ",)),
        Phrasing(r"\(the batch size is given per product\)", ("(the batch size is given per product)",),
                 ("(every product has a batch size of its own)",)),
        Phrasing(r"\bA limited number of (?=overtime hours)", ("A limited number of ",),
                 ("A bounded number of ",)),
        Phrasing(r"\bat a cost per hour\.", ("at a cost per hour.",), ("at an hourly price.",)),
        Phrasing(r"\bshould be made, to minimize the total\b", ("should be made, to minimize the total",),
                 ("ought to be produced, so as to minimise the combined",)),
        Phrasing(r"\bminimum cost in\b", ("minimum cost in",), ("lowest achievable cost, expressed in",)),
        Phrasing(r"(?<=: )demand is\b", ("demand is",), ("the demand comes to",)),
        Phrasing(r"\btakes (?=[\d.]+ hours of\b)", ("takes ",), ("occupies ",)),
        Phrasing(r"\ba setup costs\b", ("a setup costs",), ("every setup is charged",)),
        Phrasing(r"\band takes (?=[\d.]+ hours;)", ("and takes ",), ("and lasts ",)),
        Phrasing(r"\bholding one\b", ("holding one",), ("keeping one",)),
        Phrasing(r"\bto the next costs\b", ("to the next costs",), ("into the following one is charged",)),
        Phrasing(r"\bdelivering one\b", ("delivering one",), ("supplying one",)),
        Phrasing(r"\blate costs\b", ("late costs",), ("behind schedule is charged",)),
        Phrasing(r"\bHours of (?=the [\w -]+ available:)", ("Hours of ",), ("Capacity, in hours, of ",)),
        Phrasing(r"(?<=[a-z]) available:(?= \d)", (" available:",), (" period by period:",)),
        # table headers
        Phrasing(r"(?<=\| )product(?= \|)", ("product",), ("item",)),
        Phrasing(r"\bhours per unit(?= \|)", ("hours per unit",), ("machine hours per unit",)),
        Phrasing(r"\bsetup hours(?= \|)", ("setup hours",), ("changeover hours",)),
        Phrasing(r"\bsetup cost \(", ("setup cost (",), ("changeover cost (",)),
        Phrasing(r"\bholding cost \(", ("holding cost (",), ("storage cost (",)),
        Phrasing(r"/unit/", ("/unit/",), (" per unit per ",)),
        Phrasing(r"\binitial stock(?= \|)", ("initial stock",), ("opening stock",)),
        Phrasing(r"\bbackorder cost \(", ("backorder cost (",), ("late-delivery cost (",)),
        Phrasing(r"\bhours available(?= \|)", ("hours available",), ("capacity (hours)",)),
        # data.json fields
        Phrasing(r"\blist of product names\b", ("list of product names",), ("names of the products",)),
        Phrasing(r"\blist of period names, in time order\b", ("list of period names, in time order",),
                 ("period names in chronological order",)),
        Phrasing(r"\bunits to deliver at the end of the period\b",
                 ("units to deliver at the end of the period",),
                 ("units due for delivery at the close of the period",)),
        Phrasing(r"\bunits of each product in stock before the first period\b",
                 ("units of each product in stock before the first period",),
                 ("opening stock of a product before the first period",)),
        Phrasing(r"\bproduction hours per unit of each product\b",
                 ("production hours per unit of each product",),
                 ("hours of capacity that one unit of a product takes",)),
        Phrasing(r"\bhours lost to a setup of each product\b", ("hours lost to a setup of each product",),
                 ("capacity hours a setup of a product consumes",)),
        Phrasing(r"\bcost of one setup of each product\b", ("cost of one setup of each product",),
                 ("price of a single setup of a product",)),
        Phrasing(r"\bcost of carrying one unit of each product from one period to the next\b",
                 ("cost of carrying one unit of each product from one period to the next",),
                 ("expense of keeping one unit of a product in stock from a period to the following one",)),
        Phrasing(r"\bproduction hours available in each period\b",
                 ("production hours available in each period",),
                 ("capacity hours a period offers",)),
        Phrasing(r"\bcost per unit of demand delivered one period late\b",
                 ("cost per unit of demand delivered one period late",),
                 ("penalty for each unit of demand supplied one period behind",)),
        Phrasing(r"\(only when demand may be delivered late\)", ("(only when demand may be delivered late)",),
                 ("(present only if late delivery is allowed)",)),
        Phrasing(r"\bmost units one production run of each product can make \(its batch size\)",
                 ("most units one production run of each product can make (its batch size)",),
                 ("batch size: the largest quantity one production run of a product can make",)),
        Phrasing(r"\(only when runs are limited to a batch\)", ("(only when runs are limited to a batch)",),
                 ("(present only if runs are capped at a batch)",)),
        Phrasing(r"\bcost per overtime hour\b", ("cost per overtime hour",), ("price of an overtime hour",)),
        Phrasing(r"\(only when overtime can be bought\)", ("(only when overtime can be bought)",),
                 ("(present only if overtime is for sale)",)),
        Phrasing(r"\bmost overtime hours that can be added in one period\b",
                 ("most overtime hours that can be added in one period",),
                 ("upper limit on overtime hours in a single period",)),
    )
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
        "backorder_cost": "cost per unit of demand delivered one period late, keyed by product (only when demand "
                          "may be delivered late)",
        "max_lot": "most units one production run of each product can make (its batch size), keyed by product "
                   "(only when runs are limited to a batch)",
        "overtime_cost": "cost per overtime hour (only when overtime can be bought)",
        "max_overtime": "most overtime hours that can be added in one period (only when overtime can be bought)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _VARIABLES = """\
model = pyo.ConcreteModel()
products, periods = data["products"], data["periods"]
model.make = pyo.Var(products, periods, domain=pyo.NonNegativeReals)
model.stock = pyo.Var(products, periods, domain=pyo.NonNegativeReals)  # left at the end of the period
model.setup = pyo.Var(products, periods, domain=pyo.Binary)
"""
    _BACKLOG_VARIABLE = """\
model.backlog = pyo.Var(products, periods, domain=pyo.NonNegativeReals)  # demand still owed at the period's end
"""
    _OVERTIME_VARIABLE = """\
model.overtime = pyo.Var(periods, domain=pyo.NonNegativeReals, bounds=(0, data["max_overtime"]))  # hours bought
"""
    _COST = """\

cost = sum(data["setup_cost"][p] * model.setup[p, t] + data["holding_cost"][p] * model.stock[p, t]
           for p in products for t in periods)
"""
    _BACKLOG_COST = """\
cost += sum(data["backorder_cost"][p] * model.backlog[p, t] for p in products for t in periods)
"""
    _OVERTIME_COST = """\
cost += sum(data["overtime_cost"] * model.overtime[t] for t in periods)
"""
    _OBJECTIVE = """\
model.obj = pyo.Objective(expr=cost, sense=pyo.minimize)
"""
    _BALANCE = """\

def balance(model, p, t):
    k = periods.index(t)
    before = data["initial_inventory"][p] if k == 0 else model.stock[p, periods[k - 1]]
    return before + model.make[p, t] - model.stock[p, t] == data["demand"][p][t]

model.balance = pyo.Constraint(products, periods, rule=balance)
"""
    _BACKLOG_BALANCE = """\

# demand not met in its period is owed (backlogged) and delivered later, all of it by the last period
def balance(model, p, t):
    k = periods.index(t)
    if k == 0:
        before = data["initial_inventory"][p]
    else:
        before = model.stock[p, periods[k - 1]] - model.backlog[p, periods[k - 1]]
    return before + model.make[p, t] - model.stock[p, t] + model.backlog[p, t] == data["demand"][p][t]

model.balance = pyo.Constraint(products, periods, rule=balance)
model.cleared = pyo.Constraint(products, rule=lambda model, p: model.backlog[p, periods[-1]] == 0)
"""
    _CAPACITY = """\

def capacity(model, t):
    hours = sum(data["hours_per_unit"][p] * model.make[p, t] + data["setup_hours"][p] * model.setup[p, t]
                for p in products)
    return hours <= data["capacity_hours"][t]

model.capacity = pyo.Constraint(periods, rule=capacity)
"""
    _OVERTIME_CAPACITY = """\

def capacity(model, t):
    hours = sum(data["hours_per_unit"][p] * model.make[p, t] + data["setup_hours"][p] * model.setup[p, t]
                for p in products)
    return hours <= data["capacity_hours"][t] + model.overtime[t]

model.capacity = pyo.Constraint(periods, rule=capacity)
"""
    _NEEDS_SETUP = """\

# production needs a setup; there is never a reason to make more than the demand still to come
def needs_setup(model, p, t):
    remaining = sum(data["demand"][p][u] for u in periods[periods.index(t):])
    return model.make[p, t] <= remaining * model.setup[p, t]

model.needs_setup = pyo.Constraint(products, periods, rule=needs_setup)
"""
    _BACKLOG_NEEDS_SETUP = """\

# production needs a setup; a run never makes more than the whole horizon's demand (backlogs included)
def needs_setup(model, p, t):
    return model.make[p, t] <= sum(data["demand"][p][u] for u in periods) * model.setup[p, t]

model.needs_setup = pyo.Constraint(products, periods, rule=needs_setup)
"""
    _MAX_LOT = """\

# a production run makes at most one batch of the product
model.max_lot = pyo.Constraint(
    products, periods, rule=lambda model, p, t: model.make[p, t] <= data["max_lot"][p] * model.setup[p, t]
)
"""

    # the base model (no optional key)
    model_code = _VARIABLES + _COST + _OBJECTIVE + _BALANCE + _CAPACITY + _NEEDS_SETUP

    def model_code_for(self, data: dict) -> str:
        backlog, overtime = "backorder_cost" in data, "overtime_cost" in data
        code = self._VARIABLES
        code += self._BACKLOG_VARIABLE if backlog else ""
        code += self._OVERTIME_VARIABLE if overtime else ""
        code += self._COST
        code += self._BACKLOG_COST if backlog else ""
        code += self._OVERTIME_COST if overtime else ""
        code += self._OBJECTIVE
        code += self._BACKLOG_BALANCE if backlog else self._BALANCE
        code += self._OVERTIME_CAPACITY if overtime else self._CAPACITY
        code += self._BACKLOG_NEEDS_SETUP if backlog else self._NEEDS_SETUP
        if "max_lot" in data:
            code += self._MAX_LOT
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("backorder_cost", "max_lot", "overtime_cost") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        domains = dict(self.domains)
        if "backorder_cost" in data:
            domains["backlog"] = "nonnegative"
        if "overtime_cost" in data:
            domains["overtime"] = "nonnegative"
        return domains

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
        capacity_hours, lot_for_lot = {}, {}
        for t in periods:
            lot_for_lot[t] = sum(hours_per_unit[p] * demand[p][t] + setup_hours[p] for p in products)
            capacity_hours[t] = int(math.ceil(lot_for_lot[t] * rng.uniform(1.1, 1.6) / 5)) * 5 + 10
        setup_cost = {p: rng.randint(10, 60) * 10 for p in products}
        holding_cost = {p: rng.choice([0.5, 1.0, 1.5, 2.0, 2.5, 3.0]) for p in products}
        data = {"products": products, "periods": periods, "demand": demand,
                "initial_inventory": initial_inventory, "hours_per_unit": hours_per_unit,
                "setup_hours": setup_hours, "setup_cost": setup_cost, "holding_cost": holding_cost,
                "capacity_hours": capacity_hours}
        if rng.random() < 0.5:
            # late delivery costs more than holding, so storing ahead stays a real alternative
            data["backorder_cost"] = {p: holding_cost[p] * rng.choice([2, 3, 4]) for p in products}
        if rng.random() < 0.5:
            # fewer regular hours, and overtime enough to make every period's demand in that period
            for t in periods:
                capacity_hours[t] = max(5, int(capacity_hours[t] * rng.uniform(0.6, 0.85)) // 5 * 5)
            shortfall = max(lot_for_lot[t] - capacity_hours[t] for t in periods)
            data["overtime_cost"] = rng.randint(2, 10)
            data["max_overtime"] = max(rng.randint(2, 6) * 5, int(math.ceil(shortfall / 5)) * 5)
        if rng.random() < 0.5:
            # a batch holds at least the largest run of the lot-for-lot plan, which fits every period's hours
            data["max_lot"] = {}
            for p in products:
                runs = [demand[p][periods[0]] - initial_inventory[p]] + [demand[p][t] for t in periods[1:]]
                data["max_lot"][p] = int(math.ceil(max(runs) * rng.uniform(1.0, 1.6) / 5)) * 5
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # the last period's demand of one product exceeds its stock plus all it can make over the whole
        # horizon (overtime included), so neither storing ahead nor delivering late can meet it
        p, last = data["products"][0], data["periods"][-1]
        extra = data.get("max_overtime", 0) if "overtime_cost" in data else 0
        makeable = sum((data["capacity_hours"][t] + extra - data["setup_hours"][p]) / data["hours_per_unit"][p]
                       for t in data["periods"])
        new_demand = data["initial_inventory"][p] + int(makeable) + 5
        return {**data, "demand": {**data["demand"], p: {**data["demand"][p], last: new_demand}}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        products, periods = data["products"], data["periods"]
        backlog_cost = data.get("backorder_cost")
        make, stock, setup, backlog, overtime = {}, {}, {}, {}, {}
        for p in products:
            for t in periods:
                make[p, t] = matrix.add_var(f"make[{p},{t}]")
                stock[p, t] = matrix.add_var(f"stock[{p},{t}]", cost=data["holding_cost"][p])
                setup[p, t] = matrix.add_var(f"setup[{p},{t}]", 0, 1, cost=data["setup_cost"][p], integer=True)
                if backlog_cost is not None:
                    # nothing may still be owed after the last period
                    upper = 0.0 if t == periods[-1] else INF
                    backlog[p, t] = matrix.add_var(f"backlog[{p},{t}]", 0.0, upper, cost=backlog_cost[p])
        if "overtime_cost" in data:
            for t in periods:
                overtime[t] = matrix.add_var(f"overtime[{t}]", 0.0, data["max_overtime"], cost=data["overtime_cost"])
        for p in products:
            for k, t in enumerate(periods):
                # stock[t-1] - backlog[t-1] + make[t] - stock[t] + backlog[t] = demand[t]
                row = {make[p, t]: 1.0, stock[p, t]: -1.0}
                rhs = data["demand"][p][t]
                if k == 0:
                    rhs -= data["initial_inventory"][p]
                else:
                    row[stock[p, periods[k - 1]]] = 1.0
                if backlog:
                    row[backlog[p, t]] = 1.0
                    if k > 0:
                        row[backlog[p, periods[k - 1]]] = -1.0
                matrix.add_row(row, lower=rhs, upper=rhs, name=f"balance[{p},{t}]")
        for t in periods:
            row = {}
            for p in products:
                row[make[p, t]] = data["hours_per_unit"][p]
                row[setup[p, t]] = data["setup_hours"][p]
            if overtime:
                row[overtime[t]] = -1.0
            matrix.add_row(row, upper=data["capacity_hours"][t], name=f"capacity[{t}]")
        for p in products:
            for k, t in enumerate(periods):
                bound = sum(data["demand"][p][u] for u in (periods if backlog else periods[k:]))
                matrix.add_row({make[p, t]: 1.0, setup[p, t]: -bound}, upper=0.0, name=f"needs_setup[{p},{t}]")
                if "max_lot" in data:
                    matrix.add_row({make[p, t]: 1.0, setup[p, t]: -data["max_lot"][p]}, upper=0.0,
                                   name=f"max_lot[{p},{t}]")

    def constraint_rows(self, data: dict, x: dict):
        make, stock, setup = x["make"], x["stock"], x["setup"]
        products, periods = data["products"], data["periods"]
        backlogged = "backorder_cost" in data
        owed = x["backlog"] if backlogged else {(p, t): 0.0 for p in products for t in periods}
        for p in products:
            carried, owed_before = data["initial_inventory"][p], 0.0
            for t in periods:
                yield Row(f"balance[{p},{t}]", carried - owed_before + make[p, t] - stock[p, t] + owed[p, t], "==",
                          data["demand"][p][t])
                carried, owed_before = stock[p, t], owed[p, t]
            if backlogged:
                yield Row(f"cleared[{p}]", owed[p, periods[-1]], "==", 0)
        for t in periods:
            hours = sum(data["hours_per_unit"][p] * make[p, t] + data["setup_hours"][p] * setup[p, t]
                        for p in products)
            available = data["capacity_hours"][t] + (x["overtime"][t] if "overtime_cost" in data else 0.0)
            yield Row(f"capacity[{t}]", hours, "<=", available)
            if "overtime_cost" in data:
                yield Row(f"overtime_limit[{t}]", x["overtime"][t], "<=", data["max_overtime"])
        for p in products:
            for k, t in enumerate(periods):
                bound = sum(data["demand"][p][u] for u in (periods if backlogged else periods[k:]))
                yield Row(f"needs_setup[{p},{t}]", make[p, t], "<=", bound * setup[p, t])
                if "max_lot" in data:
                    yield Row(f"max_lot[{p},{t}]", make[p, t], "<=", data["max_lot"][p] * setup[p, t])

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["setup_cost"][p] * x["setup"][p, t] + data["holding_cost"][p] * x["stock"][p, t]
                    for p in data["products"] for t in data["periods"])
        if "backorder_cost" in data:
            total += sum(data["backorder_cost"][p] * x["backlog"][p, t]
                         for p in data["products"] for t in data["periods"])
        if "overtime_cost" in data:
            total += sum(data["overtime_cost"] * x["overtime"][t] for t in data["periods"])
        return total

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        products, periods = data["products"], data["periods"]
        unit, period, money, resource = words["unit"], words["period"], words["money"], words["resource"]
        late = ("Demand that is not met on time may be delivered late (backordered), at a cost per "
                f"{words['one_unit']} for every {period} it is late; everything must be delivered by the end of "
                f"{periods[-1]}." if "backorder_cost" in data else "Demand must be met on time (no backorders).")
        intro = (f"{words['company'].capitalize()} plans production of {join_names(products)} on {resource} over "
                 f"the next {len(periods)} {plural(period)} ({join_names(periods)}). Producing a product in a {period} "
                 f"requires a setup ({words['setup_words']}), which costs money and uses hours of {resource}. "
                 f"Units made in a {period} can meet that {period}'s demand or be stored for later {plural(period)}. "
                 f"{late}")
        rules = []  # the optional rules, stated in words in every representation
        if "max_lot" in data:
            lots = "; ".join(f"{fmt(data['max_lot'][p])} {unit} of {p}" for p in products)
            rules.append(f"A production run can make at most one batch: {lots}." if representation != "file" else
                         "A production run can make at most one batch (the batch size is given per product).")
        if "overtime_cost" in data:
            rules.append(f"Up to {fmt(data['max_overtime'])} overtime hours can be added in any {period}, at "
                         f"{fmt(data['overtime_cost'])} {money} per hour." if representation != "file" else
                         f"A limited number of overtime hours can be added in any {period}, at a cost per hour.")
        costs = ["setup", "holding"] + (["backorder"] if "backorder_cost" in data else []) + (
            ["overtime"] if "overtime_cost" in data else [])
        question = (f"In which {plural(period)} should each product be set up, and how many {unit} should be made, to "
                    f"minimize the total {join_names(costs)} cost? What is that minimum cost in {money}?")
        rules_text = " ".join(rules)
        if representation == "text":
            lines = []
            for p in products:
                demand = ", ".join(f"{fmt(data['demand'][p][t])} {words['on']} {t}" for t in periods)
                late_cost = (f"delivering one {words['one_unit']} a {period} late costs "
                             f"{fmt(data['backorder_cost'][p])} {money}; " if "backorder_cost" in data else "")
                lines.append(
                    f"For {p}: demand is {demand} ({unit}); each {words['one_unit']} takes "
                    f"{fmt(data['hours_per_unit'][p])} hours of {resource}; a setup costs "
                    f"{fmt(data['setup_cost'][p])} {money} and takes {fmt(data['setup_hours'][p])} hours; holding "
                    f"one {words['one_unit']} from one {period} to the next costs {fmt(data['holding_cost'][p])} {money}; "
                    f"{late_cost}{fmt(data['initial_inventory'][p])} {unit} are in stock at the start.")
            hours = ", ".join(f"{fmt(data['capacity_hours'][t])} {words['on']} {t}" for t in periods)
            return " ".join([intro, *lines, f"Hours of {resource} available: {hours}.", *rules, question])
        if representation == "table":
            demand = markdown_table([f"demand ({unit})", *periods],
                                    [[p, *[data["demand"][p][t] for t in periods]] for p in products]
                                    + [["hours available", *[data["capacity_hours"][t] for t in periods]]])
            headers = ["product", "hours per unit", "setup hours", f"setup cost ({money})",
                       f"holding cost ({money}/unit/{period})", "initial stock"]
            if "backorder_cost" in data:
                headers.append(f"backorder cost ({money}/unit/{period})")
            rows = []
            for p in products:
                row = [p, data["hours_per_unit"][p], data["setup_hours"][p], data["setup_cost"][p],
                       data["holding_cost"][p], data["initial_inventory"][p]]
                rows.append(row + ([data["backorder_cost"][p]] if "backorder_cost" in data else []))
            costs_table = markdown_table(headers, rows)
            tail = f"{rules_text}\n\n" if rules else ""
            return f"{intro}\n\n{demand}\n\n{costs_table}\n\n{tail}{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            tail = f" {rules_text}" if rules else ""
            return f"{intro}{tail}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        unit = scenario.words["unit"]
        lines = []
        for p in data["products"]:
            runs = [f"{fmt(round(x['make'][p, t], 6))} {unit} {scenario.words['on']} {t}" for t in data["periods"]
                    if x["setup"][p, t] > 0.5 and x["make"][p, t] > 1e-6]
            lines.append(f"- {p}: {len(runs)} production run{'s' if len(runs) != 1 else ''} "
                         f"({'; '.join(runs) or 'none'})")
        if "overtime_cost" in data:
            bought = sum(x["overtime"][t] for t in data["periods"])
            lines.append(f"- overtime bought: {fmt(round(bought, 6))} hours")
        return "\n".join(lines)

    def formulation(self, data: dict) -> str:
        backlog, overtime = "backorder_cost" in data, "overtime_cost" in data
        parameters = ("demand $d_{pt}$, initial stock $I_{p0}$, hours per unit $a_p$, setup hours $s_p$, "
                      "setup cost $f_p$, holding cost $h_p$, hours available $C_t$")
        variables = "$x_{pt} \\ge 0$ (units made), $I_{pt} \\ge 0$ (stock at the end of $t$), $y_{pt} \\in \\{0,1\\}$ (setup)"
        objective = "\\sum_{p \\in P}\\sum_{t \\in T} (f_p y_{pt} + h_p I_{pt}"
        balance = "I_{p,t-1} + x_{pt} - I_{pt} = d_{pt} && \\forall p, t"
        capacity = "\\sum_{p \\in P} (a_p x_{pt} + s_p y_{pt}) \\le C_t"
        if backlog:
            parameters += ", backorder cost $b_p$, total demand $D_p = \\sum_{t} d_{pt}$"
            variables += ", $B_{pt} \\ge 0$ (demand owed at the end of $t$, $B_{p0} = 0$)"
            objective += " + b_p B_{pt}"
            balance = "I_{p,t-1} - B_{p,t-1} + x_{pt} - I_{pt} + B_{pt} = d_{pt} && \\forall p, t"
            bound = "x_{pt} \\le D_p\\, y_{pt} && \\forall p, t"
        else:
            parameters += ", remaining demand $D_{pt} = \\sum_{u \\ge t} d_{pu}$"
            bound = "x_{pt} \\le D_{pt}\\, y_{pt} && \\forall p, t"
        objective += ")"
        if overtime:
            parameters += ", overtime cost $g$ per hour, overtime limit $O$ per period"
            variables += ", $0 \\le o_t \\le O$ (overtime hours)"
            objective += " + \\sum_{t \\in T} g\\, o_t"
            capacity += " + o_t"
        rows = [f"\\text{{s.t.}}\\ & {balance}", f"& {capacity} && \\forall t", f"& {bound}"]
        if backlog:
            rows.append("& B_{pn} = 0 && \\forall p")
        if "max_lot" in data:
            parameters += ", batch size $L_p$"
            rows.append("& x_{pt} \\le L_p\\, y_{pt} && \\forall p, t")
        rows.append("& x_{pt}, I_{pt} \\ge 0,\\ y_{pt} \\in \\{0,1\\}")
        return (
            "**Sets**: products $P$, periods $T = \\{1, \\dots, n\\}$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = LotSizing()
