"""Factory planning (LP, or MILP when maintenance is scheduled): over several months, decide how much of
each product to make, sell and store, where each product needs hours on several machine types, sales are
capped by each month's market and stock is limited and costs to hold, maximizing profit minus holding
cost (the factory planning model of H. P. Williams' textbook, written afresh).

Structure variants (drawn per instance, recorded by the keys present): machines down for maintenance
either on a given plan (`down`) or, when only each type's number of machine-months of maintenance is
given (`maintenance`), on a schedule the model chooses (integer variables); and a stock every product
must end the horizon with (`final_stock`): six program skeletons."""

from __future__ import annotations

import random

from data_synth.family import (
    INDUSTRIAL,
    MatrixModel,
    ProblemFamily,
    Row,
    Scenario,
    describe_data_file,
    fmt,
    join_names,
    markdown_table,
    pick_names,
    size_for,
)
from data_synth.statements import Phrasing

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]

SCENARIOS = (
    Scenario("engineering", "precision engineering", {
        "company": "an engineering factory",
        "products": ["valve", "pump", "gearbox", "bearing", "coupling", "spindle", "flange"],
        "machines": ["grinder", "vertical drill", "horizontal drill", "borer", "planer"],
        "money": "dollars",
    }),
    Scenario("furniture", "furniture making", {
        "company": "a furniture plant",
        "products": ["desk", "wardrobe", "bed frame", "bookcase", "dresser", "sideboard", "cabinet"],
        "machines": ["panel saw", "edge bander", "CNC router", "sander", "press"],
        "money": "euros",
    }),
    Scenario("electronics", "electronics assembly", {
        "company": "an electronics assembler",
        "products": ["router", "modem", "switch", "access point", "gateway", "repeater", "hub"],
        "machines": ["pick-and-place line", "reflow oven", "test bench", "wave solder", "coating booth"],
        "money": "dollars",
    }),
)
# the eval split's own industries, companies, products, machines and money (held out from training)
EVAL_SCENARIOS = (
    Scenario("garments", "apparel manufacturing", {
        "company": "a garment workshop",
        "products": ["parka", "blazer", "shirt", "skirt", "waistcoat", "overcoat", "hoodie"],
        "machines": ["cutting table", "lockstitch machine", "overlocker", "buttonholer", "steam press"],
        "money": "pounds",
    }),
    Scenario("cosmetics", "cosmetics manufacturing", {
        "company": "a cosmetics plant",
        "products": ["shampoo", "conditioner", "face cream", "lip balm", "sunscreen", "body lotion", "hair gel"],
        "machines": ["mixing vessel", "homogeniser", "filling line", "capping machine", "labeller"],
        "money": "Swiss francs",
    }),
    Scenario("bicycles", "bicycle manufacturing", {
        "company": "a bicycle works",
        "products": ["road bike", "mountain bike", "city bike", "cargo bike", "folding bike", "gravel bike",
                     "tandem"],
        "machines": ["tube cutter", "welding jig", "paint line", "wheel truing stand", "assembly stand"],
        "money": "yen",
    }),
)


class FactoryPlanning(ProblemFamily):
    name = "factory_planning"
    title = "Factory planning"
    problem_type = "LP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"make": "nonnegative", "sell": "nonnegative", "stock": "nonnegative"}
    industrial = True
    phrasings = (
        Phrasing(r"\bplans production, sales and stock for\b",
                 ("plans production, sales and stock for", "is planning output, sales and storage for"),
                 ("decides what to make, sell and keep in store over",)),
        Phrasing(r"\bMachine hours per unit:", ("Machine hours per unit:", "Hours each unit needs:"),
                 ("Processing time per unit:",)),
        Phrasing(r"\bMarket limits \(most units that can be sold\):",
                 ("Market limits (most units that can be sold):",),
                 ("What the market will take at most:",)),
        Phrasing(r"\bThe factory starts with no stock\.", ("The factory starts with no stock.",),
                 ("Opening inventories are zero.",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text; "at most"
        # and "needs" are left to the generic rules, which vary them in training)
        Phrasing(r"\bInstalled machines:", ("Installed machines:",), ("Machines on the shop floor:",)),
        Phrasing(r"\bEach machine works\b", ("Each machine works",), ("Every single machine is available for",)),
        Phrasing(r"(?<=\d )hours a month\.", ("hours a month.",), ("hours in every month.",)),
        Phrasing(r"\bAt the end of a month\b", ("At the end of a month",), ("When a month closes,",)),
        Phrasing(r"\bunits of each product may be in stock, each costing\b",
                 ("units of each product may be in stock, each costing",),
                 ("units of any one product can be held, and each held unit costs",)),
        Phrasing(r"\bMachines down for maintenance \(the others work\):",
                 ("Machines down for maintenance (the others work):",),
                 ("Machines under maintenance (every other machine runs):",)),
        Phrasing(r"\bMaintenance must take machines down for whole months within the horizon, in months the plan "
                 r"chooses \(a machine down does no work that month\); machine-months of maintenance per type:",
                 ("Maintenance must take machines down for whole months within the horizon, in months the plan "
                  "chooses (a machine down does no work that month); machine-months of maintenance per type:",),
                 ("Within the horizon, a machine under maintenance is out for a whole month, and the plan picks "
                  "those months (during such a month it produces nothing); machine-months of upkeep required for "
                  "each type:",)),
        Phrasing(r"\bunits of each product must be in stock\.", ("units of each product must be in stock.",),
                 ("units of every product have to be held in store.",)),
        Phrasing(r"\bHow much of each product should be made, sold and stored each month to maximize profit minus "
                 r"holding cost, and\b",
                 ("How much of each product should be made, sold and stored each month to maximize profit minus "
                  "holding cost, and",),
                 ("What monthly quantities of every product ought to be produced, sold and kept in stock so that "
                  "profit less holding cost is as large as possible, and",)),
        Phrasing(r"\bQuantities may be fractional\.", ("Quantities may be fractional.",),
                 ("Fractional amounts are acceptable.",)),
        Phrasing(r"\bper unit sold and(?= needs\b)", ("per unit sold and",), ("for every unit it sells, and",)),
        Phrasing(r"(?<=\d )hours on the\b", ("hours on the",), ("hours of the",)),
        Phrasing(r"\bmarket limit\b", ("market limit",), ("sales cap",)),
        Phrasing(r"\bProducts need hours on limited machines; sales are capped by the market\.",
                 ("Products need hours on limited machines; sales are capped by the market.",),
                 ("Each product takes time on machines of limited capacity, and the market caps its sales.",)),
        Phrasing(r"\bMachines down for maintenance do not work in their month\.",
                 ("Machines down for maintenance do not work in their month.",),
                 ("A machine under maintenance is idle for that month.",)),
        Phrasing(r"\bThe plan chooses the month in which each machine of a type is down for maintenance\.",
                 ("The plan chooses the month in which each machine of a type is down for maintenance.",),
                 ("The plan decides in which months the machines of every type are taken out for upkeep.",)),
        Phrasing(r"\bEvery product must end the horizon with the required stock\.",
                 ("Every product must end the horizon with the required stock.",),
                 ("Each product has to finish the horizon holding the required stock.",)),
        Phrasing(r"\blist of product names\b", ("list of product names",), ("names of the products",)),
        Phrasing(r"\blist of machine type names\b", ("list of machine type names",), ("names of the machine types",)),
        Phrasing(r"\blist of months, in order\b", ("list of months, in order",), ("months of the horizon, in sequence",)),
        Phrasing(r"\bmachines of each type installed\b", ("machines of each type installed",),
                 ("number of installed machines for every type",)),
        Phrasing(r"\bhours one machine works in a month\b", ("hours one machine works in a month",),
                 ("monthly working hours of a single machine",)),
        Phrasing(r"\bhours on that machine type per unit\b", ("hours on that machine type per unit",),
                 ("machine hours a unit takes on that type",)),
        Phrasing(r"\bprofit per unit sold(?=, keyed by\b)", ("profit per unit sold",),
                 ("margin earned on every unit sold",)),
        Phrasing(r"(?<=: )most units that can be sold\b", ("most units that can be sold",),
                 ("the sales ceiling in units",)),
        Phrasing(r"\bcost per unit in stock at the end of a month\b", ("cost per unit in stock at the end of a month",),
                 ("holding charge for every unit left in store when a month closes",)),
        Phrasing(r"\bmost units of each product in stock at the end of a month\b",
                 ("most units of each product in stock at the end of a month",),
                 ("stock ceiling for every product when a month closes",)),
        Phrasing(r"\bmachines of the type down for maintenance \(only when maintenance is planned\)",
                 ("machines of the type down for maintenance (only when maintenance is planned)",),
                 ("how many machines of the type are under maintenance (present if a maintenance plan is given)",)),
        Phrasing(r"\bmachine-months of maintenance each type(?= needs over the horizon\b)",
                 ("machine-months of maintenance each type",), ("maintenance machine-months that every type",)),
        Phrasing(r"\(only when the model schedules maintenance\)", ("(only when the model schedules maintenance)",),
                 ("(present if the model picks the maintenance months)",)),
        Phrasing(r"\bunits of each product that must be in stock at the end \(only when there is such a target\)",
                 ("units of each product that must be in stock at the end (only when there is such a target)",),
                 ("units every product has to hold at the close of the horizon (present if such a target is set)",)),
    )
    data_fields = {
        "products": "list of product names",
        "machines": "list of machine type names",
        "periods": "list of months, in order",
        "machine_count": "machines of each type installed, keyed by machine type",
        "hours_per_machine": "hours one machine works in a month",
        "time": "time[product][machine]: hours on that machine type per unit",
        "profit": "profit per unit sold, keyed by product",
        "market": "market[product][month]: most units that can be sold",
        "holding_cost": "cost per unit in stock at the end of a month",
        "max_stock": "most units of each product in stock at the end of a month",
        "down": "down[machine][month]: machines of the type down for maintenance (only when maintenance is "
                "planned)",
        "maintenance": "machine-months of maintenance each type needs over the horizon, keyed by machine type "
                       "(only when the model schedules maintenance)",
        "final_stock": "units of each product that must be in stock at the end (only when there is such a "
                       "target)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.P = pyo.Set(initialize=data["products"])
model.M = pyo.Set(initialize=data["machines"])
model.T = pyo.Set(initialize=data["periods"])
model.make = pyo.Var(model.P, model.T, domain=pyo.NonNegativeReals)
model.sell = pyo.Var(model.P, model.T, domain=pyo.NonNegativeReals)
model.stock = pyo.Var(model.P, model.T, domain=pyo.NonNegativeReals)

model.obj = pyo.Objective(
    expr=sum(data["profit"][p] * model.sell[p, t] - data["holding_cost"] * model.stock[p, t]
             for p in model.P for t in model.T), sense=pyo.maximize)
model.balance = pyo.Constraint(
    model.P, model.T, rule=lambda model, p, t: model.stock[p, t] == model.make[p, t] - model.sell[p, t]
    + (model.stock[p, data["periods"][data["periods"].index(t) - 1]] if data["periods"].index(t) > 0 else 0))
model.market = pyo.Constraint(model.P, model.T, rule=lambda model, p, t: model.sell[p, t] <= data["market"][p][t])
model.max_stock = pyo.Constraint(model.P, model.T, rule=lambda model, p, t: model.stock[p, t] <= data["max_stock"])
'''
    _CAPACITY = '''\
model.capacity = pyo.Constraint(
    model.M, model.T, rule=lambda model, m, t: sum(data["time"][p][m] * model.make[p, t] for p in model.P)
    <= data["hours_per_machine"] * data["machine_count"][m])
'''
    _CAPACITY_DOWN = '''\
model.capacity = pyo.Constraint(
    model.M, model.T, rule=lambda model, m, t: sum(data["time"][p][m] * model.make[p, t] for p in model.P)
    <= data["hours_per_machine"] * (data["machine_count"][m] - data["down"][m][t]))
'''
    _CAPACITY_SCHEDULED = '''\
model.down = pyo.Var(model.M, model.T, domain=pyo.NonNegativeIntegers,
                     bounds=lambda model, m, t: (0, data["machine_count"][m]))
model.capacity = pyo.Constraint(
    model.M, model.T, rule=lambda model, m, t: sum(data["time"][p][m] * model.make[p, t] for p in model.P)
    <= data["hours_per_machine"] * (data["machine_count"][m] - model.down[m, t]))
model.maintenance = pyo.Constraint(
    model.M, rule=lambda model, m: sum(model.down[m, t] for t in model.T) == data["maintenance"][m])
'''
    _FINAL = '''\
model.final_stock = pyo.Constraint(
    model.P, rule=lambda model, p: model.stock[p, data["periods"][-1]] == data["final_stock"])
'''

    model_code = _HEAD + _CAPACITY_DOWN + _FINAL  # a fixed maintenance plan and an end stock

    def model_code_for(self, data: dict) -> str:
        if "down" in data:
            capacity = self._CAPACITY_DOWN
        elif "maintenance" in data:
            capacity = self._CAPACITY_SCHEDULED
        else:
            capacity = self._CAPACITY
        return self._HEAD + capacity + (self._FINAL if "final_stock" in data else "")

    def domains_for(self, data: dict) -> dict[str, str]:
        if "maintenance" in data:
            return {**self.domains, "down": "nonnegative_integer"}
        return self.domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "maintenance" in data else "LP"

    def variant_of(self, data: dict) -> str:
        parts = [key for key in ("down", "maintenance", "final_stock") if key in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_products = size_for(difficulty, 2, 3, 5, industrial=30)
        n_machines = size_for(difficulty, 2, 3, 4, industrial=5)
        n_periods = size_for(difficulty, 3, 4, 6, industrial=12)  # industrial: 1,080 variables
        products = pick_names(rng, words["products"], n_products)
        machines = words["machines"][:n_machines]
        start = rng.randint(0, 12 - n_periods)
        periods = MONTHS[start:start + n_periods]
        machine_count = {m: rng.randint(1, 4) for m in machines}
        hours_per_machine = rng.choice([320, 384, 400])
        time = {p: {m: rng.choice([0, 0.1, 0.2, 0.3, 0.5, 0.6, 0.8]) for m in machines} for p in products}
        for p in products:  # every product needs some machine
            if not any(time[p].values()):
                time[p][rng.choice(machines)] = 0.5
        profit = {p: rng.randint(3, 12) for p in products}
        # markets well above what the machines can make in an average month, so capacity binds
        scale = max(10, int(hours_per_machine * sum(machine_count.values()) / n_products / 2))
        market = {p: {t: rng.randint(scale // 10, scale) // 10 * 10 for t in periods} for p in products}
        data = {"products": products, "machines": machines, "periods": periods, "machine_count": machine_count,
                "hours_per_machine": hours_per_machine, "time": time, "profit": profit, "market": market,
                "holding_cost": rng.choice([0.5, 1, 1.5]), "max_stock": rng.choice([50, 80, 100])}
        choice = rng.random()
        if choice < 1 / 3:
            down = {m: {t: 0 for t in periods} for m in machines}
            for m in machines:
                for _ in range(rng.randint(1, machine_count[m])):
                    t = rng.choice(periods)
                    down[m][t] = min(machine_count[m] - 1, down[m][t] + 1)
            data["down"] = down
        elif choice < 2 / 3 and difficulty != INDUSTRIAL:
            data["maintenance"] = {m: rng.randint(1, machine_count[m]) for m in machines}
        if rng.random() < 0.5:
            data["final_stock"] = rng.choice([10, 20, 30])
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # an end stock above the stock limit
        return {**data, "final_stock": data["max_stock"] + rng.choice([10, 20])}

    def _hours(self, data: dict, m: str, t: str) -> float:
        down = data["down"][m][t] if "down" in data else 0
        return data["hours_per_machine"] * (data["machine_count"][m] - down)

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        products, machines, periods = data["products"], data["machines"], data["periods"]
        make, sell, stock = {}, {}, {}
        for p in products:
            for k, t in enumerate(periods):
                make[p, t] = matrix.add_var(f"make[{p},{t}]")
                sell[p, t] = matrix.add_var(f"sell[{p},{t}]", 0.0, data["market"][p][t], cost=data["profit"][p])
                stock[p, t] = matrix.add_var(f"stock[{p},{t}]", 0.0, data["max_stock"], cost=-data["holding_cost"])
                coefficients = {stock[p, t]: 1.0, make[p, t]: -1.0, sell[p, t]: 1.0}
                if k > 0:
                    coefficients[stock[p, periods[k - 1]]] = -1.0
                matrix.add_row(coefficients, lower=0.0, upper=0.0, name=f"balance[{p},{t}]")
            if "final_stock" in data:
                matrix.add_row({stock[p, periods[-1]]: 1.0}, lower=data["final_stock"], upper=data["final_stock"],
                               name=f"final_stock[{p}]")
        scheduled = "maintenance" in data
        for m in machines:
            down = {t: matrix.add_var(f"down[{m},{t}]", 0.0, data["machine_count"][m], integer=True)
                    for t in periods} if scheduled else {}
            for t in periods:
                coefficients = {make[p, t]: data["time"][p][m] for p in products}
                if scheduled:
                    coefficients[down[t]] = data["hours_per_machine"]
                    matrix.add_row(coefficients, upper=data["hours_per_machine"] * data["machine_count"][m],
                                   name=f"capacity[{m},{t}]")
                else:
                    matrix.add_row(coefficients, upper=self._hours(data, m, t), name=f"capacity[{m},{t}]")
            if scheduled:
                matrix.add_row({down[t]: 1.0 for t in periods}, lower=data["maintenance"][m],
                               upper=data["maintenance"][m], name=f"maintenance[{m}]")

    def constraint_rows(self, data: dict, x: dict):
        products, machines, periods = data["products"], data["machines"], data["periods"]
        make, sell, stock = x["make"], x["sell"], x["stock"]
        for p in products:
            for k, t in enumerate(periods):
                before = stock[p, periods[k - 1]] if k > 0 else 0.0
                yield Row(f"balance[{p},{t}]", stock[p, t] - before - make[p, t] + sell[p, t], "==", 0.0)
                yield Row(f"market[{p},{t}]", sell[p, t], "<=", data["market"][p][t])
                yield Row(f"max_stock[{p},{t}]", stock[p, t], "<=", data["max_stock"])
        for m in machines:
            for t in periods:
                used = sum(data["time"][p][m] * make[p, t] for p in products)
                if "maintenance" in data:
                    yield Row(f"capacity[{m},{t}]", used + data["hours_per_machine"] * x["down"][m, t], "<=",
                              data["hours_per_machine"] * data["machine_count"][m])
                    yield Row(f"down_bound[{m},{t}]", x["down"][m, t], "<=", data["machine_count"][m])
                else:
                    yield Row(f"capacity[{m},{t}]", used, "<=", self._hours(data, m, t))
            if "maintenance" in data:
                yield Row(f"maintenance[{m}]", sum(x["down"][m, t] for t in periods), "==", data["maintenance"][m])
        if "final_stock" in data:
            for p in products:
                yield Row(f"final_stock[{p}]", stock[p, periods[-1]], "==", data["final_stock"])

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["profit"][p] * x["sell"][p, t] - data["holding_cost"] * x["stock"][p, t]
                   for p in data["products"] for t in data["periods"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        products, machines, periods = data["products"], data["machines"], data["periods"]
        money = words["money"]
        intro = {
            "engineering": f"{words['company'].capitalize()} plans production, sales and stock for "
                           f"{join_names(periods)}, making {join_names(products)}.",
            "furniture": f"{words['company'].capitalize()} making {join_names(products)} plans production, sales "
                         f"and stock for {join_names(periods)}.",
            "electronics": f"For {join_names(periods)}, {words['company']} plans production, sales and stock for "
                           f"its products {join_names(products)}.",
            # the eval scenarios' own openings
            "garments": f"{words['company'].capitalize()} sets its monthly output, sales and inventory for "
                        f"{join_names(periods)}; its range is {join_names(products)}.",
            "cosmetics": f"Over {join_names(periods)}, {words['company']} has to settle how much of "
                         f"{join_names(products)} to make, sell and hold in stock.",
            "bicycles": f"{words['company'].capitalize()} builds {join_names(products)} and is drawing up a "
                        f"month-by-month plan for {join_names(periods)}.",
        }[scenario.key]
        plant = ("Installed machines: " + "; ".join(f"{fmt(data['machine_count'][m])} {m}" for m in machines)
                 + f". Each machine works {fmt(data['hours_per_machine'])} hours a month.")
        rules = [f"The factory starts with no stock. At the end of a month at most {fmt(data['max_stock'])} units "
                 f"of each product may be in stock, each costing {fmt(data['holding_cost'])} {money} per month."]
        if "down" in data:
            rules.append("Machines down for maintenance (the others work): " + "; ".join(
                f"{fmt(data['down'][m][t])} {m} in {t}" for m in machines for t in periods) + ".")
        if "maintenance" in data:
            rules.append("Maintenance must take machines down for whole months within the horizon, in months "
                         "the plan chooses (a machine down does no work that month); machine-months of "
                         "maintenance per type: " + "; ".join(
                             f"{m} {fmt(data['maintenance'][m])}" for m in machines) + ".")
        if "final_stock" in data:
            rules.append(f"At the end of {periods[-1]} exactly {fmt(data['final_stock'])} units of each product "
                         "must be in stock.")
        question = ("How much of each product should be made, sold and stored each month to maximize profit minus "
                    "holding cost, and what is that value? Quantities may be fractional.")
        rule_text = " ".join(rules)
        if representation == "text":
            times = "Machine hours per unit: " + " ".join(
                f"{p} earns {fmt(data['profit'][p])} {money} per unit sold and needs "
                + ", ".join(f"{fmt(data['time'][p][m])} hours on the {m}" for m in machines) + "."
                for p in products)
            markets = "Market limits (most units that can be sold): " + " ".join(
                f"{p}: " + ", ".join(f"{fmt(data['market'][p][t])} in {t}" for t in periods) + "." for p in products)
            return f"{intro} {plant} {times} {markets} {rule_text} {question}"
        if representation == "table":
            times = markdown_table(["product", f"profit ({money}/unit)", *[f"{m} hours" for m in machines]],
                                   [[p, data["profit"][p], *[data["time"][p][m] for m in machines]] for p in products])
            markets = markdown_table(["market limit", *periods],
                                     [[p, *[data["market"][p][t] for t in periods]] for p in products])
            return (f"{intro} {plant} Machine hours per unit:\n\n{times}\n\nMarket limits (most units that can be "
                    f"sold):\n\n{markets}\n\n{rule_text} {question}")
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "only when" not in meaning}
            extra = []
            if "down" in data:
                extra.append("Machines down for maintenance do not work in their month.")
            if "maintenance" in data:
                extra.append("The plan chooses the month in which each machine of a type is down for maintenance.")
            if "final_stock" in data:
                extra.append("Every product must end the horizon with the required stock.")
            return (f"{intro} Products need hours on limited machines; sales are capped by the market. "
                    f"{rule_text} {' '.join(extra)}\n\n{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        if "maintenance" in data:
            hours = "H (n_m - z_{mt})"
        elif "down" in data:
            hours = "H (n_m - d_{mt})"
        else:
            hours = "H n_m"
        rows = ["\\max\\ & \\sum_{p \\in P} \\sum_{t \\in T} (\\pi_p s_{pt} - h\\, I_{pt})",
                "\\text{s.t.}\\ & I_{pt} = I_{p,t-1} + x_{pt} - s_{pt},\\ I_{p0} = 0 && \\forall p, t",
                f"& \\sum_{{p \\in P}} a_{{pm}} x_{{pt}} \\le {hours} && \\forall m \\in M, t \\in T",
                "& s_{pt} \\le D_{pt},\\ I_{pt} \\le \\bar I && \\forall p, t"]
        parameters = ("hours per unit $a_{pm}$, machines $n_m$, hours per machine $H$, profit $\\pi_p$, market "
                      "$D_{pt}$, holding cost $h$, stock limit $\\bar I$")
        variables = "$x_{pt}, s_{pt}, I_{pt} \\ge 0$: made, sold, in stock"
        if "down" in data:
            parameters += ", machines down $d_{mt}$"
        if "maintenance" in data:
            parameters += ", maintenance machine-months $r_m$"
            variables += "; $z_{mt} \\in \\{0, \\dots, n_m\\}$ integer, machines down"
            rows.append("& \\sum_{t \\in T} z_{mt} = r_m && \\forall m \\in M")
        if "final_stock" in data:
            parameters += ", end stock $E$"
            rows.append("& I_{p,|T|} = E && \\forall p \\in P")
        return ("**Sets**: products $P$, machine types $M$, months $T$.\n\n"
                f"**Parameters**: {parameters}.\n\n**Variables**: {variables}.\n\n"
                "$$\n\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$")


FAMILY = FactoryPlanning()
