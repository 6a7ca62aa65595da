"""Unit commitment (MILP): decide which thermal generating units are on in each hour of a short horizon
and how much each produces, so that demand is met exactly at the least fuel, no-load and start-up cost.
A unit that is on produces between its minimum and maximum output; switching a unit on costs its start-up
cost; units may already be running before the first hour.

Structure variants (drawn per instance, recorded by the keys present): a spinning-reserve requirement on
the committed capacity (`reserve`), minimum up and down times through start and stop variables
(`min_up` and `min_down`), and ramp limits between consecutive hours (`ramp`), each present or absent, so
the program has eight skeletons. Demand and reserve are drawn so that keeping every unit on with a
proportional dispatch meets all of them, so every variant stays feasible."""

from __future__ import annotations

import math
import random
from itertools import pairwise

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
    Scenario("grid", "electric power", {
        "intro": "A regional grid operator prepares the day-ahead commitment of its thermal power plants.",
        "units": ["Coal Ridge", "Gas Valley", "Harbour CCGT", "Lakeside Peaker", "Northfield", "Old Mill Steam",
                  "Riverbend"],
        "periods": [f"{h:02d}:00" for h in range(6, 14)], "scale": 10, "money": "dollars", "unit": "plant",
    }),
    Scenario("island", "island utilities", {
        "intro": "An island utility schedules its diesel generators for the evening peak.",
        "units": ["Genset A", "Genset B", "Genset C", "Genset D", "Genset E", "Genset F", "Genset G"],
        "periods": [f"{h:02d}:00" for h in range(16, 24)], "scale": 1, "money": "euros", "unit": "generator",
    }),
    Scenario("mine", "mining", {
        "intro": "A remote mine runs its own power station and plans which gas turbines to run over the "
                 "next shift.",
        "units": ["Turbine 1", "Turbine 2", "Turbine 3", "Turbine 4", "Turbine 5", "Turbine 6", "Turbine 7"],
        "periods": [f"shift hour {h}" for h in range(1, 9)], "scale": 2, "money": "dollars", "unit": "turbine",
    }),
)
# the eval split's own industries, companies, unit names, hours and currencies (held out from training)
EVAL_SCENARIOS = (
    Scenario("district_heating", "district heating", {
        "intro": "A municipal district-heating company commits the gas engines of its combined heat and power "
                 "stations for the night.",
        "units": ["Amager Engine", "Ballerup Engine", "Glostrup Engine", "Herlev Engine", "Hvidovre Engine",
                  "Rodovre Engine", "Valby Engine"],
        "periods": [f"{h % 24:02d}:00" for h in range(22, 30)], "scale": 1, "money": "kroner",
        "unit": "gas engine",
    }),
    Scenario("smelter", "aluminium smelting", {
        "intro": "An aluminium smelter runs a captive power station and commits its steam boilers for the "
                 "morning potline load.",
        "units": ["Boiler A1", "Boiler A2", "Boiler B1", "Boiler B2", "Boiler C1", "Boiler C2", "Boiler D1"],
        "periods": [f"{h:02d}:30" for h in range(5, 13)], "scale": 2, "money": "rand", "unit": "boiler",
    }),
)


class UnitCommitment(ProblemFamily):
    name = "unit_commitment"
    title = "Unit commitment"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"on": "binary", "start": "binary", "output": "nonnegative"}
    phrasings = (
        Phrasing(r"prepares the day-ahead commitment of its thermal power plants\.",
                 ("prepares the day-ahead commitment of its thermal power plants.",),
                 ("is deciding tomorrow's commitment of its thermal power plants.",)),
        Phrasing(r"schedules its diesel generators for the evening peak\.",
                 ("schedules its diesel generators for the evening peak.",),
                 ("plans how its diesel generators cover the evening peak.",)),
        Phrasing(r"Demand must be met exactly in every hour\.",
                 ("Demand must be met exactly in every hour.", "Supply must equal demand in every hour."),
                 ("In each hour, generation has to match demand exactly.",)),
        Phrasing(r"\bwhile it is on\b", ("while it is on", "whenever it runs"), ("as long as it is running",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bThe plan covers\b", ("The plan covers",), ("The schedule spans",)),
        Phrasing(r"\bone-hour periods\b", ("one-hour periods",), ("hourly intervals",)),
        Phrasing(r"\bthat is on produces between its minimum and maximum output and costs its no-load cost per "
                 r"hour\b", ("that is on produces between its minimum and maximum output and costs its no-load "
                          "cost per hour",),
                 ("that is committed delivers an output between its lower and upper limit and is charged its "
                  "no-load cost for every hour",)),
        Phrasing(r"\bplus its fuel cost per MWh; switching a\b", ("plus its fuel cost per MWh; switching a",),
                 ("on top of its fuel cost for every MWh generated; turning a",)),
        Phrasing(r"\bon from off costs its start-up cost\.", ("on from off costs its start-up cost.",),
                 ("on after it was off incurs its start-up charge.",)),
        Phrasing(r"\balready on before the first hour; the others are off\.",
                 ("already on before the first hour; the others are off.",),
                 ("running when the horizon opens, and every other one is off.",)),
        Phrasing(r"\balready on before the first hour\b", ("already on before the first hour",),
                 ("running when the horizon opens",)),
        Phrasing(r"\bis off before the first hour\.", ("is off before the first hour.",),
                 ("is off when the horizon opens.",)),
        Phrasing(r"\bFor security, the\b", ("For security, the",), ("As a safety margin, the",)),
        Phrasing(r"\bthat are on must together be able to produce\b",
                 ("that are on must together be able to produce",),
                 ("that are committed shall jointly be capable of generating",)),
        Phrasing(r"\ba spinning reserve above the demand in every hour\b",
                 ("a spinning reserve above the demand in every hour",),
                 ("the demand plus a spinning reserve in each hour",)),
        Phrasing(r"\bOnce started, a\b", ("Once started, a",), ("When switched on, a",)),
        Phrasing(r"\bmust stay on for a minimum number of hours, and once stopped it must stay off for a minimum "
                 r"number of hours, counted within the plan\b",
                 ("must stay on for a minimum number of hours, and once stopped it must stay off for a minimum "
                  "number of hours, counted within the plan",),
                 ("has to keep running for some minimum number of hours, and after a stop it has to remain off "
                  "for some minimum number of hours, both counted inside the planning horizon",)),
        Phrasing(r"\bBetween two consecutive hours in which a\b", ("Between two consecutive hours in which a",),
                 ("For any two successive hours during which a",)),
        Phrasing(r"\bis on, its output may change by\b", ("is on, its output may change by",),
                 ("stays on, its output can move by",)),
        Phrasing(r"\bproduces between\b", ("produces between",), ("has an output range between",)),
        Phrasing(r"\bper start\b", ("per start",), ("for every start-up",)),
        Phrasing(r"\bshould be on in each hour, and how much should each produce, to minimize the total cost\?",
                 ("should be on in each hour, and how much should each produce, to minimize the total cost?",),
                 ("ought to run in every hour, and what output ought each one deliver, so that the overall cost "
                  "is as small as possible?",)),
        Phrasing(r"\bminimum cost \(in\b", ("minimum cost (in",), ("smallest achievable cost (in",)),
        Phrasing(r"\bmin MW\b", ("min MW",), ("lower limit (MW)",)),
        Phrasing(r"\bmax MW\b", ("max MW",), ("upper limit (MW)",)),
        Phrasing(r"\bspinning reserve \(MW\)", ("spinning reserve (MW)",), ("reserve margin (MW)",)),
        Phrasing(r"\blist of the generating unit names\b", ("list of the generating unit names",),
                 ("names of all generating units",)),
        Phrasing(r"\blist of the hours, in time order\b", ("list of the hours, in time order",),
                 ("hour labels in chronological order",)),
        Phrasing(r"\bdemand in MW,(?= keyed by hour)", ("demand in MW,",), ("load to be served in MW,",)),
        Phrasing(r"\boutput in MW of a unit that is on,", ("output in MW of a unit that is on,",),
                 ("output in MW of a committed unit,",)),
        Phrasing(r"\bof keeping a unit on,", ("of keeping a unit on,",), ("of leaving a unit committed,",)),
        Phrasing(r"\blist of the units already on before the first hour\b",
                 ("list of the units already on before the first hour",),
                 ("names of the units that are running when the horizon opens",)),
    )
    data_fields = {
        "units": "list of the generating unit names",
        "periods": "list of the hours, in time order",
        "demand": "demand in MW, keyed by hour",
        "min_output": "lowest output in MW of a unit that is on, keyed by unit",
        "max_output": "highest output in MW of a unit, keyed by unit",
        "fuel_cost": "cost per MWh produced, keyed by unit",
        "no_load_cost": "cost per hour of keeping a unit on, keyed by unit",
        "start_cost": "cost of each start of a unit, keyed by unit",
        "initially_on": "list of the units already on before the first hour",
        "reserve": "spinning reserve in MW the units that are on must hold above demand, keyed by hour (only "
                   "when there is such a requirement)",
        "min_up": "hours a unit must stay on once started, keyed by unit (only when there are minimum up and "
                  "down times)",
        "min_down": "hours a unit must stay off once stopped, keyed by unit (only when there are minimum up "
                    "and down times)",
        "ramp": "most MW a unit's output may change between consecutive hours in which it is on, keyed by unit "
                "(only when there are ramp limits)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.G = pyo.Set(initialize=data["units"])
model.T = pyo.Set(initialize=data["periods"])
periods = data["periods"]
model.on = pyo.Var(model.G, model.T, domain=pyo.Binary)
model.start = pyo.Var(model.G, model.T, domain=pyo.Binary)
model.output = pyo.Var(model.G, model.T, domain=pyo.NonNegativeReals)  # MW, for one hour

model.obj = pyo.Objective(
    expr=sum(data["fuel_cost"][g] * model.output[g, t] + data["no_load_cost"][g] * model.on[g, t]
             + data["start_cost"][g] * model.start[g, t] for g in model.G for t in model.T),
    sense=pyo.minimize,
)

def was_on(model, g, t):
    k = periods.index(t)
    return (1 if g in data["initially_on"] else 0) if k == 0 else model.on[g, periods[k - 1]]

model.balance = pyo.Constraint(model.T, rule=lambda model, t: sum(model.output[g, t] for g in model.G)
                               == data["demand"][t])
model.lowest = pyo.Constraint(model.G, model.T, rule=lambda model, g, t: model.output[g, t]
                              >= data["min_output"][g] * model.on[g, t])
model.highest = pyo.Constraint(model.G, model.T, rule=lambda model, g, t: model.output[g, t]
                               <= data["max_output"][g] * model.on[g, t])
'''
    _STARTS = '''\
# a unit that is on now but was off an hour before has started
model.starts = pyo.Constraint(model.G, model.T, rule=lambda model, g, t: model.start[g, t]
                              >= model.on[g, t] - was_on(model, g, t))
'''
    _MIN_UP_DOWN = '''\
# starts and stops follow the on/off status; a started unit stays on min_up hours, a stopped one off min_down
model.stop = pyo.Var(model.G, model.T, domain=pyo.Binary)
model.switching = pyo.Constraint(model.G, model.T, rule=lambda model, g, t: model.on[g, t] - was_on(model, g, t)
                                 == model.start[g, t] - model.stop[g, t])

def min_up(model, g, t):
    k = periods.index(t)
    recent = periods[max(0, k - data["min_up"][g] + 1):k + 1]
    return sum(model.start[g, u] for u in recent) <= model.on[g, t]

def min_down(model, g, t):
    k = periods.index(t)
    recent = periods[max(0, k - data["min_down"][g] + 1):k + 1]
    return sum(model.stop[g, u] for u in recent) <= 1 - model.on[g, t]

model.min_up = pyo.Constraint(model.G, model.T, rule=min_up)
model.min_down = pyo.Constraint(model.G, model.T, rule=min_down)
'''
    _RESERVE = '''\
# the units that are on can together produce the demand plus the spinning reserve
model.reserve = pyo.Constraint(model.T, rule=lambda model, t: sum(data["max_output"][g] * model.on[g, t]
                                                                  for g in model.G)
                               >= data["demand"][t] + data["reserve"][t])
'''
    _RAMP = '''\
# between two consecutive hours in which a unit is on, its output changes by at most its ramp limit
later = [(g, t) for g in data["units"] for t in periods[1:]]

def ramp_up(model, g, t):
    before = periods[periods.index(t) - 1]
    return (model.output[g, t] - model.output[g, before]
            <= data["ramp"][g] + data["max_output"][g] * (1 - model.on[g, before]))

def ramp_down(model, g, t):
    before = periods[periods.index(t) - 1]
    return (model.output[g, before] - model.output[g, t]
            <= data["ramp"][g] + data["max_output"][g] * (1 - model.on[g, t]))

model.ramp_up = pyo.Constraint(later, rule=ramp_up)
model.ramp_down = pyo.Constraint(later, rule=ramp_down)
'''

    model_code = _HEAD + _STARTS + _RESERVE  # the model with a spinning reserve, no minimum times, no ramps

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._MIN_UP_DOWN if "min_up" in data else self._STARTS)
        if "reserve" in data:
            code += self._RESERVE
        if "ramp" in data:
            code += self._RAMP
        return code

    def variant_of(self, data: dict) -> str:
        parts = [label for key, label in (("reserve", "reserve"), ("min_up", "min_up_down"), ("ramp", "ramp"))
                 if key in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "stop": "binary"} if "min_up" in data else self.domains

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        scale = words["scale"]
        n_units = size_for(difficulty, 3, 4, 5)
        n_periods = size_for(difficulty, 4, 6, 8)
        units = sorted(rng.sample(words["units"], n_units), key=words["units"].index)
        periods = words["periods"][:n_periods]
        max_output = {g: rng.randint(4, 30) * 5 * scale for g in units}
        min_output = {g: max(scale, round(max_output[g] * rng.uniform(0.25, 0.45) / scale) * scale) for g in units}
        # large units are cheaper per MWh but dearer to keep on and to start
        fuel_cost = {g: rng.randint(18, 45) + round(600 * scale / max_output[g]) for g in units}
        no_load_cost = {g: rng.randint(2, 12) * 5 * scale for g in units}
        start_cost = {g: rng.randint(2, 16) * 25 * scale for g in units}
        initially_on = [g for g in units if rng.random() < 0.4]
        # with every unit on and a proportional dispatch, the output of unit g is min + share * (max - min);
        # a share between 0.2 and 0.7 keeps every variant's limits satisfiable
        lowest, spread = sum(min_output.values()), sum(max_output[g] - min_output[g] for g in units)
        demand = {t: round(lowest + rng.uniform(0.2, 0.7) * spread) for t in periods}
        data = {"units": units, "periods": periods, "demand": demand, "min_output": min_output,
                "max_output": max_output, "fuel_cost": fuel_cost, "no_load_cost": no_load_cost,
                "start_cost": start_cost, "initially_on": initially_on}
        if rng.random() < 0.5:
            headroom = {t: sum(max_output.values()) - demand[t] for t in periods}
            data["reserve"] = {t: min(headroom[t], int(math.ceil(demand[t] * rng.uniform(0.08, 0.15))))
                               for t in periods}
        if rng.random() < 0.5:
            data["min_up"] = {g: rng.randint(2, 3) for g in units}
            data["min_down"] = {g: rng.randint(1, 3) for g in units}
        if rng.random() < 0.5:
            data["ramp"] = {g: int(math.ceil((max_output[g] - min_output[g]) * rng.uniform(0.55, 0.8)))
                            for g in units}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one hour's demand exceeds what all units together can produce
        t = rng.choice(data["periods"])
        return {**data, "demand": {**data["demand"], t: sum(data["max_output"].values()) + 10}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        units, periods = data["units"], data["periods"]
        on, start, stop, output = {}, {}, {}, {}
        for g in units:
            for t in periods:
                on[g, t] = matrix.add_var(f"on[{g},{t}]", 0, 1, cost=data["no_load_cost"][g], integer=True)
                start[g, t] = matrix.add_var(f"start[{g},{t}]", 0, 1, cost=data["start_cost"][g], integer=True)
                output[g, t] = matrix.add_var(f"output[{g},{t}]", cost=data["fuel_cost"][g])
                if "min_up" in data:
                    stop[g, t] = matrix.add_var(f"stop[{g},{t}]", 0, 1, integer=True)
        for t in periods:
            matrix.add_row({output[g, t]: 1.0 for g in units}, lower=data["demand"][t], upper=data["demand"][t],
                           name=f"balance[{t}]")
        for g in units:
            initially = 1.0 if g in data["initially_on"] else 0.0
            for k, t in enumerate(periods):
                matrix.add_row({output[g, t]: 1.0, on[g, t]: -data["min_output"][g]}, lower=0.0, name=f"lowest[{g},{t}]")
                matrix.add_row({output[g, t]: 1.0, on[g, t]: -data["max_output"][g]}, upper=0.0,
                               name=f"highest[{g},{t}]")
                # on[t] - on[t-1] (the status before the first hour is a constant on the right-hand side)
                row = {on[g, t]: 1.0}
                rhs = initially if k == 0 else 0.0
                if k > 0:
                    row[on[g, periods[k - 1]]] = -1.0
                if "min_up" in data:
                    row[start[g, t]] = -1.0
                    row[stop[g, t]] = 1.0
                    matrix.add_row(row, lower=rhs, upper=rhs, name=f"switching[{g},{t}]")
                    ups = periods[max(0, k - data["min_up"][g] + 1):k + 1]
                    matrix.add_row({**{start[g, u]: 1.0 for u in ups}, on[g, t]: -1.0}, upper=0.0,
                                   name=f"min_up[{g},{t}]")
                    downs = periods[max(0, k - data["min_down"][g] + 1):k + 1]
                    matrix.add_row({**{stop[g, u]: 1.0 for u in downs}, on[g, t]: 1.0}, upper=1.0,
                                   name=f"min_down[{g},{t}]")
                else:
                    row[start[g, t]] = -1.0
                    matrix.add_row(row, upper=rhs, name=f"starts[{g},{t}]")
        if "reserve" in data:
            for t in periods:
                matrix.add_row({on[g, t]: data["max_output"][g] for g in units},
                               lower=data["demand"][t] + data["reserve"][t], name=f"reserve[{t}]")
        if "ramp" in data:
            for g in units:
                big = data["max_output"][g]
                for before, t in pairwise(periods):
                    matrix.add_row({output[g, t]: 1.0, output[g, before]: -1.0, on[g, before]: big},
                                   upper=data["ramp"][g] + big, name=f"ramp_up[{g},{t}]")
                    matrix.add_row({output[g, before]: 1.0, output[g, t]: -1.0, on[g, t]: big},
                                   upper=data["ramp"][g] + big, name=f"ramp_down[{g},{t}]")

    def constraint_rows(self, data: dict, x: dict):
        units, periods = data["units"], data["periods"]
        on, start, output = x["on"], x["start"], x["output"]
        for t in periods:
            yield Row(f"balance[{t}]", sum(output[g, t] for g in units), "==", data["demand"][t])
        for g in units:
            before = 1.0 if g in data["initially_on"] else 0.0
            for k, t in enumerate(periods):
                yield Row(f"lowest[{g},{t}]", output[g, t] - data["min_output"][g] * on[g, t], ">=", 0)
                yield Row(f"highest[{g},{t}]", output[g, t] - data["max_output"][g] * on[g, t], "<=", 0)
                if "min_up" in data:
                    stop = x["stop"]
                    yield Row(f"switching[{g},{t}]", on[g, t] - before - start[g, t] + stop[g, t], "==", 0)
                    ups = periods[max(0, k - data["min_up"][g] + 1):k + 1]
                    yield Row(f"min_up[{g},{t}]", sum(start[g, u] for u in ups), "<=", on[g, t])
                    downs = periods[max(0, k - data["min_down"][g] + 1):k + 1]
                    yield Row(f"min_down[{g},{t}]", sum(stop[g, u] for u in downs), "<=", 1 - on[g, t])
                else:
                    yield Row(f"starts[{g},{t}]", start[g, t], ">=", on[g, t] - before)
                before = on[g, t]
        if "reserve" in data:
            for t in periods:
                yield Row(f"reserve[{t}]", sum(data["max_output"][g] * on[g, t] for g in units), ">=",
                          data["demand"][t] + data["reserve"][t])
        if "ramp" in data:
            for g in units:
                big = data["max_output"][g]
                for before, t in pairwise(periods):
                    yield Row(f"ramp_up[{g},{t}]", output[g, t] - output[g, before], "<=",
                              data["ramp"][g] + big * (1 - on[g, before]))
                    yield Row(f"ramp_down[{g},{t}]", output[g, before] - output[g, t], "<=",
                              data["ramp"][g] + big * (1 - on[g, t]))

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["fuel_cost"][g] * x["output"][g, t] + data["no_load_cost"][g] * x["on"][g, t]
                   + data["start_cost"][g] * x["start"][g, t] for g in data["units"] for t in data["periods"])

    def _rules(self, data: dict, words: dict, representation: str) -> list[str]:
        unit = words["unit"]
        listed = representation == "text"
        rules = []
        if "reserve" in data:
            amounts = "" if not listed else ": " + ", ".join(
                f"{fmt(data['reserve'][t])} MW at {t}" for t in data["periods"])
            rules.append(f"For security, the {plural(unit)} that are on must together be able to produce at least a "
                         f"spinning reserve above the demand in every hour{amounts}.")
        if "min_up" in data:
            times = "" if not listed else " (" + "; ".join(
                f"{g}: on for at least {fmt(data['min_up'][g])} hours, off for at least "
                f"{fmt(data['min_down'][g])} hours" for g in data["units"]) + ")"
            rules.append(f"Once started, a {unit} must stay on for a minimum number of hours, and once stopped it "
                         f"must stay off for a minimum number of hours, counted within the plan{times}.")
        if "ramp" in data:
            limits = "" if not listed else ": " + ", ".join(
                f"{fmt(data['ramp'][g])} MW for {g}" for g in data["units"])
            rules.append(f"Between two consecutive hours in which a {unit} is on, its output may change by at "
                         f"most its ramp limit{limits}.")
        return rules

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        unit, money = words["unit"], words["money"]
        units, periods = data["units"], data["periods"]
        if representation == "file":
            running = f"The list `initially_on` names the {plural(unit)} already on before the first hour."
        elif data["initially_on"]:
            running = (f"{join_names(data['initially_on'])} {'is' if len(data['initially_on']) == 1 else 'are'} "
                       "already on before the first hour; the others are off.")
        else:
            running = f"Every {unit} is off before the first hour."
        setting = (f"{words['intro']} The plan covers {len(periods)} one-hour periods ({join_names(periods)}) and "
                   f"{len(units)} {plural(unit)}. A {unit} that is on produces between its minimum and maximum output "
                   f"and costs its no-load cost per hour while it is on, plus its fuel cost per MWh; switching a "
                   f"{unit} on from off costs its start-up cost. {running} Demand must be met exactly in every "
                   "hour.")
        rules = " ".join(self._rules(data, words, representation))
        question = (f"Which {plural(unit)} should be on in each hour, and how much should each produce, to minimize the "
                    f"total cost? What is that minimum cost (in {money})?")
        if representation == "text":
            lines = [f"{g} produces between {fmt(data['min_output'][g])} and {fmt(data['max_output'][g])} MW at "
                     f"{fmt(data['fuel_cost'][g])} {money} per MWh, costs {fmt(data['no_load_cost'][g])} {money} "
                     f"per hour while it is on and {fmt(data['start_cost'][g])} {money} per start."
                     for g in units]
            demand = ", ".join(f"{fmt(data['demand'][t])} MW at {t}" for t in periods)
            return f"{setting} {' '.join(lines)} Demand: {demand}. {rules} {question}"
        if representation == "table":
            headers = [unit, "min MW", "max MW", f"fuel ({money}/MWh)", f"no-load ({money}/h)",
                       f"start-up ({money})"]
            extra = [("min_up", "min up (h)"), ("min_down", "min down (h)"), ("ramp", "ramp (MW/h)")]
            headers += [label for key, label in extra if key in data]
            table = markdown_table(headers, [
                [g, data["min_output"][g], data["max_output"][g], data["fuel_cost"][g], data["no_load_cost"][g],
                 data["start_cost"][g], *[data[key][g] for key, _ in extra if key in data]] for g in units])
            hourly = [["demand (MW)", *[data["demand"][t] for t in periods]]]
            if "reserve" in data:
                hourly.append(["spinning reserve (MW)", *[data["reserve"][t] for t in periods]])
            hours = markdown_table(["hour", *periods], hourly)
            return f"{setting}\n\n{table}\n\n{hours}\n\n{rules} {question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{setting} {rules}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        lines = []
        for t in data["periods"]:
            on = [f"{g} {fmt(round(x['output'][g, t], 4))} MW" for g in data["units"] if x["on"][g, t] > 0.5]
            lines.append(f"- {t}: {', '.join(on) or 'none on'}")
        return "\n".join(lines)

    def formulation(self, data: dict) -> str:
        parameters = ("demand $d_t$, output limits $\\underline{P}_g, \\overline{P}_g$, fuel cost $c_g$, no-load "
                      "cost $n_g$, start-up cost $s_g$, status before the first hour $u_{g0} \\in \\{0,1\\}$")
        variables = ("$u_{gt} \\in \\{0,1\\}$ (on), $v_{gt} \\in \\{0,1\\}$ (start), $p_{gt} \\ge 0$ (output in "
                     "MW)")
        rows = [
            "\\text{s.t.}\\ & \\sum_{g \\in G} p_{gt} = d_t && \\forall t",
            "& \\underline{P}_g u_{gt} \\le p_{gt} \\le \\overline{P}_g u_{gt} && \\forall g, t",
        ]
        if "min_up" in data:
            parameters += ", minimum up and down times $U_g, D_g$"
            variables += ", $w_{gt} \\in \\{0,1\\}$ (stop)"
            rows += ["& u_{gt} - u_{g,t-1} = v_{gt} - w_{gt} && \\forall g, t",
                     "& \\sum_{\\tau = t - U_g + 1}^{t} v_{g\\tau} \\le u_{gt} && \\forall g, t",
                     "& \\sum_{\\tau = t - D_g + 1}^{t} w_{g\\tau} \\le 1 - u_{gt} && \\forall g, t"]
        else:
            rows.append("& v_{gt} \\ge u_{gt} - u_{g,t-1} && \\forall g, t")
        if "reserve" in data:
            parameters += ", spinning reserve $r_t$"
            rows.append("& \\sum_{g \\in G} \\overline{P}_g u_{gt} \\ge d_t + r_t && \\forall t")
        if "ramp" in data:
            parameters += ", ramp limit $R_g$"
            rows += ["& p_{gt} - p_{g,t-1} \\le R_g + \\overline{P}_g (1 - u_{g,t-1}) && \\forall g, t > 1",
                     "& p_{g,t-1} - p_{gt} \\le R_g + \\overline{P}_g (1 - u_{gt}) && \\forall g, t > 1"]
        return (
            "**Sets**: units $G$, hours $T = \\{1, \\dots, n\\}$ (sums over $\\tau$ start at hour 1).\n\n"
            f"**Parameters**: {parameters}.\n\n**Variables**: {variables}.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{g \\in G}\\sum_{t \\in T} (c_g p_{gt} + n_g u_{gt} + s_g v_{gt})"
            " \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = UnitCommitment()
