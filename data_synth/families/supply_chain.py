"""Multi-echelon supply chain (LP, or MILP when warehouses may be closed): buy raw material from suppliers,
turn it into product at plants (a fixed amount of raw material per unit), ship through warehouses to
customers and meet every demand, within supplier, plant and warehouse capacities, at the least total
purchase, production and transport cost.

Structure variants (drawn per instance, recorded by the keys present): warehouses that are opened at a
fixed cost (`open_cost`: binary decisions), direct plant-to-customer shipments (`direct_cost`), and a
minimum production run at every plant (`min_run`), each present or absent: eight program skeletons."""

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
    plural,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("paper", "paper and packaging", {
        "company": "a packaging group", "raw": "pulp", "product": "cartonboard", "unit": "tonne",
        "suppliers": ["Pulp Mill Nord", "Pulp Mill Sud", "Pulp Mill Est", "Pulp Mill Ouest", "Pulp Mill Alpes"],
        "plants": ["Board Plant A", "Board Plant B", "Board Plant C", "Board Plant D"],
        "warehouses": ["DC Lyon", "DC Lille", "DC Nantes", "DC Toulouse", "DC Metz"],
        "customers": ["Carton Co", "BoxWorks", "PackRight", "FoldPak", "Crate Ltd", "WrapIt", "CaseMakers",
                      "ShipSafe", "Pakt"],
        "money": "euros",
    }),
    Scenario("food", "food processing", {
        "company": "a tomato processor", "raw": "fresh tomatoes", "product": "tomato paste", "unit": "tonne",
        "suppliers": ["Grower Valley", "Grower Delta", "Grower Mesa", "Grower Plains", "Grower Coast"],
        "plants": ["Cannery 1", "Cannery 2", "Cannery 3", "Cannery 4"],
        "warehouses": ["Depot Fresno", "Depot Reno", "Depot Phoenix", "Depot Denver", "Depot Boise"],
        "customers": ["FreshMart", "ValueFoods", "Pasta House", "Pizza Chain", "Soup Co", "Deli Group",
                      "Corner Stores", "School Meals", "Army Rations"],
        "money": "dollars",
    }),
    Scenario("chemicals", "fertiliser production", {
        "company": "a fertiliser producer", "raw": "ammonia", "product": "granular fertiliser", "unit": "tonne",
        "suppliers": ["Ammonia Works X", "Ammonia Works Y", "Ammonia Works Z", "Ammonia Works Q",
                      "Ammonia Works R"],
        "plants": ["Granulator North", "Granulator South", "Granulator East", "Granulator West"],
        "warehouses": ["Terminal River", "Terminal Rail", "Terminal Port", "Terminal Hill", "Terminal Lake"],
        "customers": ["Farm Coop 1", "Farm Coop 2", "Farm Coop 3", "Farm Coop 4", "Farm Coop 5", "Farm Coop 6",
                      "Farm Coop 7", "Farm Coop 8", "Farm Coop 9"],
        "money": "dollars",
    }),
)

# the eval split's own industries, companies, materials, site names and currencies (held out from training)
EVAL_SCENARIOS = (
    Scenario("juice", "beverage bottling", {
        "company": "a juice bottler", "raw": "juice concentrate", "product": "bottled juice", "unit": "kilolitre",
        "suppliers": ["Citrus Farm Alcira", "Citrus Farm Sagunto", "Citrus Farm Gandia", "Citrus Farm Denia",
                      "Citrus Farm Xativa"],
        "plants": ["Bottling Line Ebro", "Bottling Line Tajo", "Bottling Line Duero", "Bottling Line Segura"],
        "warehouses": ["Hub Zaragoza", "Hub Bilbao", "Hub Sevilla", "Hub Murcia", "Hub Vigo"],
        "customers": ["Mercado Sol", "SuperPrecio", "Cafe Central", "Hotel Mar", "Bar Luna", "Tienda Rio",
                      "Cash Norte", "Vending Sur", "Airline Catering"],
        "money": "euros",
    }),
    Scenario("rebar", "steel products", {
        "company": "a rebar producer", "raw": "steel scrap", "product": "reinforcing bar", "unit": "tonne",
        "suppliers": ["Scrapyard Anvil", "Scrapyard Forge", "Scrapyard Rivet", "Scrapyard Girder",
                      "Scrapyard Ingot"],
        "plants": ["Mini-Mill Kappa", "Mini-Mill Sigma", "Mini-Mill Theta", "Mini-Mill Omega"],
        "warehouses": ["Stockyard Bay", "Stockyard Ridge", "Stockyard Flats", "Stockyard Pass", "Stockyard Dunes"],
        "customers": ["Bridgeworks", "TowerBuild", "Civil Partners", "Metro Tunnels", "Dam Builders", "Highway JV",
                      "Pier Group", "Housing Trust", "Stadium Co"],
        "money": "dollars",
    }),
    Scenario("pellets", "wood-pellet heating", {
        "company": "a wood-pellet producer", "raw": "sawdust", "product": "heating pellets", "unit": "tonne",
        "suppliers": ["Sawmill Pine Hollow", "Sawmill Birch Bend", "Sawmill Fir Crest", "Sawmill Ash Ford",
                      "Sawmill Yew Glen"],
        "plants": ["Pellet Mill Tarn", "Pellet Mill Fell", "Pellet Mill Beck", "Pellet Mill Ghyll"],
        "warehouses": ["Silo Kendal", "Silo Penrith", "Silo Keswick", "Silo Ulverston", "Silo Appleby"],
        "customers": ["School Boilers", "Leisure Centre", "Care Homes", "Hotel Group", "Farm Dryers",
                      "Council Offices", "Hospital Trust", "Office Park", "Village Heating"],
        "money": "pounds",
    }),
)


class SupplyChain(ProblemFamily):
    name = "supply_chain"
    title = "Multi-echelon supply chain"
    problem_type = "LP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"buy": "nonnegative", "ship": "nonnegative", "deliver": "nonnegative"}
    industrial = True
    phrasings = (
        Phrasing(r"\bruns a supply chain from\b", ("runs a supply chain from", "operates a supply chain from"),
                 ("manages the flow of goods from",)),
        Phrasing(r"\bSupplier capacities:", ("Supplier capacities:",), ("What each supplier can provide:",)),
        Phrasing(r"\bPlant capacities:", ("Plant capacities:",), ("Most each plant can make:",)),
        Phrasing(r"\bCustomer demands:", ("Customer demands:", "Orders to meet:"), ("What the customers need:",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bthrough the plants\b", ("through the plants",), ("by way of the factories",)),
        Phrasing(r"\band the warehouses\b", ("and the warehouses",), ("and the distribution points",)),
        Phrasing(r"\bto the customers\b", ("to the customers",), ("on to the buyers",)),
        Phrasing(r"\btakes\b(?= \d)", ("takes",), ("is made from",)),
        Phrasing(r"\bdelivered passes through a warehouse\b", ("delivered passes through a warehouse",),
                 ("that reaches a customer goes via a warehouse",)),
        Phrasing(r"\bunless shipped directly\b", ("unless shipped directly",), ("except when sent direct",)),
        Phrasing(r"\bA warehouse is used only if opened, at a fixed cost:",
                 ("A warehouse is used only if opened, at a fixed cost:",),
                 ("A warehouse can be used once opened, for a one-off charge:",)),
        Phrasing(r"\bA warehouse is used only if opened at its fixed cost\.",
                 ("A warehouse is used only if opened at its fixed cost.",),
                 ("A warehouse can be used once opened, which costs its one-off charge.",)),
        # stop before "at least", which the generic rules word two ways in training
        Phrasing(r"\bEach plant must make\b(?= at least its minimum run)", ("Each plant must make",),
                 ("Every plant has to turn out",)),
        Phrasing(r"(?<=at least )its minimum run\b", ("its minimum run",), ("its lowest permitted output",)),
        Phrasing(r"\bHow much should flow on every link to meet all demands at the least total cost, and\b",
                 ("How much should flow on every link to meet all demands at the least total cost, and",),
                 ("What flow on each link covers all demands as cheaply as possible, and",)),
        Phrasing(r"\bQuantities may be fractional\.", ("Quantities may be fractional.",),
                 ("Fractional amounts are acceptable.",)),
        Phrasing(r"\bmade\b(?=[;.])", ("made",), ("of output",)),
        Phrasing(r"\bWarehouse capacities:", ("Warehouse capacities:",), ("Throughput limits of the warehouses:",)),
        Phrasing(r"\bBuying and moving\b", ("Buying and moving",), ("Purchase plus haulage of",)),
        Phrasing(r"\bDirect plant to customer\b(?= \()", ("Direct plant to customer",),
                 ("Direct factory deliveries to customers",)),
        Phrasing(r"\bPlant to warehouse\b(?= \()", ("Plant to warehouse",), ("Factory-to-warehouse haulage",)),
        Phrasing(r"\bWarehouse to customer\b(?= \()", ("Warehouse to customer",),
                 ("Final delivery, warehouse to customer",)),
        Phrasing(r"(?<=\| )from(?= \|)", ("from",), ("source",)),
        Phrasing(r"\blist of supplier names\b", ("list of supplier names",), ("names of the suppliers",)),
        Phrasing(r"\blist of plant names\b", ("list of plant names",), ("names of the plants",)),
        Phrasing(r"\blist of warehouse names\b", ("list of warehouse names",), ("names of the warehouses",)),
        Phrasing(r"\blist of customer names\b", ("list of customer names",), ("names of the customers",)),
        Phrasing(r"\braw material each supplier can provide\b", ("raw material each supplier can provide",),
                 ("largest quantity of raw material a supplier can deliver",)),
        Phrasing(r"\bunits of raw material per unit of product\b", ("units of raw material per unit of product",),
                 ("raw material consumed for one unit of product",)),
        Phrasing(r"\bmost product each plant can make\b", ("most product each plant can make",),
                 ("largest output a plant can achieve",)),
        Phrasing(r"\bcost per unit of product made\b", ("cost per unit of product made",),
                 ("production cost of one unit",)),
        Phrasing(r"\bmost product each warehouse can pass on\b", ("most product each warehouse can pass on",),
                 ("largest quantity a warehouse can handle",)),
        # stops before "needs (at least)", which the generic rules word several ways in training
        Phrasing(r"\bproduct each customer\b(?= needs)", ("product each customer",),
                 ("quantity of product that a customer",)),
        Phrasing(r"(?<=\]: )price plus transport per unit of raw material\b",
                 ("price plus transport per unit of raw material",),
                 ("purchase price with haulage for one unit of raw material",)),
        Phrasing(r"(?<=\]: )cost per unit of product\b", ("cost per unit of product",),
                 ("transport cost for one unit of product",)),
        Phrasing(r"\bfixed cost of opening each warehouse\b", ("fixed cost of opening each warehouse",),
                 ("one-off charge for opening a warehouse",)),
        Phrasing(r"(?<=\]: )cost per unit shipped directly\b", ("cost per unit shipped directly",),
                 ("transport cost for one unit sent straight to the customer",)),
        Phrasing(r"\bleast product each plant must make\b", ("least product each plant must make",),
                 ("smallest output a plant has to achieve",)),
        Phrasing(r"\(only when there are minimum runs\)", ("(only when there are minimum runs)",),
                 ("(present only if plants have a minimum output)",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(present only if",)),
    )
    data_fields = {
        "suppliers": "list of supplier names", "plants": "list of plant names",
        "warehouses": "list of warehouse names", "customers": "list of customer names",
        "supply": "raw material each supplier can provide, keyed by supplier",
        "raw_per_unit": "units of raw material per unit of product",
        "plant_capacity": "most product each plant can make, keyed by plant",
        "production_cost": "cost per unit of product made, keyed by plant",
        "warehouse_capacity": "most product each warehouse can pass on, keyed by warehouse",
        "demand": "product each customer needs (at least), keyed by customer",
        "buy_cost": "buy_cost[supplier][plant]: price plus transport per unit of raw material",
        "ship_cost": "ship_cost[plant][warehouse]: cost per unit of product",
        "deliver_cost": "deliver_cost[warehouse][customer]: cost per unit of product",
        "open_cost": "fixed cost of opening each warehouse, keyed by warehouse (only when warehouses may stay "
                     "closed)",
        "direct_cost": "direct_cost[plant][customer]: cost per unit shipped directly (only when direct "
                       "shipments are allowed)",
        "min_run": "least product each plant must make, keyed by plant (only when there are minimum runs)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.S = pyo.Set(initialize=data["suppliers"])
model.P = pyo.Set(initialize=data["plants"])
model.W = pyo.Set(initialize=data["warehouses"])
model.C = pyo.Set(initialize=data["customers"])
model.buy = pyo.Var(model.S, model.P, domain=pyo.NonNegativeReals)
model.ship = pyo.Var(model.P, model.W, domain=pyo.NonNegativeReals)
model.deliver = pyo.Var(model.W, model.C, domain=pyo.NonNegativeReals)
'''
    _OPEN_VAR = '''\
model.open = pyo.Var(model.W, domain=pyo.Binary)
'''
    _DIRECT_VAR = '''\
model.direct = pyo.Var(model.P, model.C, domain=pyo.NonNegativeReals)
'''
    _MADE = '''\
model.made = pyo.Expression(
    model.P, rule=lambda model, p: sum(model.ship[p, w] for w in model.W){direct_made})
'''
    _OBJECTIVE = '''\
model.obj = pyo.Objective(
    expr=sum(data["buy_cost"][s][p] * model.buy[s, p] for s in model.S for p in model.P)
    + sum(data["production_cost"][p] * model.made[p] for p in model.P)
    + sum(data["ship_cost"][p][w] * model.ship[p, w] for p in model.P for w in model.W)
    + sum(data["deliver_cost"][w][c] * model.deliver[w, c] for w in model.W for c in model.C){extra},
    sense=pyo.minimize)
'''
    _BODY = '''\
model.supply = pyo.Constraint(
    model.S, rule=lambda model, s: sum(model.buy[s, p] for p in model.P) <= data["supply"][s])
model.conversion = pyo.Constraint(
    model.P, rule=lambda model, p: sum(model.buy[s, p] for s in model.S) == data["raw_per_unit"] * model.made[p])
model.plant_capacity = pyo.Constraint(model.P, rule=lambda model, p: model.made[p] <= data["plant_capacity"][p])
model.warehouse_flow = pyo.Constraint(
    model.W, rule=lambda model, w: sum(model.ship[p, w] for p in model.P) == sum(model.deliver[w, c] for c in model.C))
model.warehouse_capacity = pyo.Constraint(
    model.W, rule=lambda model, w: sum(model.ship[p, w] for p in model.P) <= data["warehouse_capacity"][w]{opened})
model.demand = pyo.Constraint(
    model.C, rule=lambda model, c: sum(model.deliver[w, c] for w in model.W){direct_in} >= data["demand"][c])
'''
    _MIN_RUN = '''\
model.min_run = pyo.Constraint(model.P, rule=lambda model, p: model.made[p] >= data["min_run"][p])
'''

    def model_code_for(self, data: dict) -> str:
        return _assemble("open_cost" in data, "direct_cost" in data, "min_run" in data)

    def domains_for(self, data: dict) -> dict[str, str]:
        domains = dict(self.domains)
        if "open_cost" in data:
            domains["open"] = "binary"
        if "direct_cost" in data:
            domains["direct"] = "nonnegative"
        return domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "open_cost" in data else "LP"

    def variant_of(self, data: dict) -> str:
        parts = [key for key in ("open_cost", "direct_cost", "min_run") if key in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        suppliers = pick_names(rng, words["suppliers"], size_for(difficulty, 2, 3, 4, industrial=10))
        plants = pick_names(rng, words["plants"], size_for(difficulty, 2, 2, 3, industrial=10))
        warehouses = pick_names(rng, words["warehouses"], size_for(difficulty, 2, 3, 4, industrial=12))
        customers = pick_names(rng, words["customers"], size_for(difficulty, 3, 5, 8, industrial=80))
        demand = {c: rng.randint(4, 30) * 5 for c in customers}
        total = sum(demand.values())
        raw_per_unit = rng.choice([1.2, 1.5, 2, 2.5])

        def spread(names: list[str], amount: float) -> dict[str, int]:
            shares = [rng.uniform(0.6, 1.4) for _ in names]
            return {n: int(amount * share / sum(shares)) + 1 for n, share in zip(names, shares, strict=True)}

        plant_capacity = spread(plants, total * rng.uniform(1.15, 1.5))
        data = {
            "suppliers": suppliers, "plants": plants, "warehouses": warehouses, "customers": customers,
            "supply": spread(suppliers, total * raw_per_unit * rng.uniform(1.1, 1.4)), "raw_per_unit": raw_per_unit,
            "plant_capacity": plant_capacity,
            "production_cost": {p: rng.randint(10, 40) for p in plants},
            "warehouse_capacity": spread(warehouses, total * rng.uniform(1.2, 1.6)),
            "demand": demand,
            "buy_cost": {s: {p: rng.randint(5, 25) for p in plants} for s in suppliers},
            "ship_cost": {p: {w: rng.randint(2, 15) for w in warehouses} for p in plants},
            "deliver_cost": {w: {c: rng.randint(2, 20) for c in customers} for w in warehouses},
        }
        if difficulty != INDUSTRIAL and rng.random() < 0.5:
            data["open_cost"] = {w: rng.randint(20, 120) * 10 for w in warehouses}
        if difficulty != INDUSTRIAL and rng.random() < 0.5:
            data["direct_cost"] = {p: {c: rng.randint(12, 40) for c in customers} for p in plants}
        if rng.random() < 0.5:
            # minimum runs adding up to well under the demand, each within its plant's capacity
            data["min_run"] = {p: int(min(0.5 * plant_capacity[p], 0.6 * total / len(plants)) * rng.uniform(0.5, 1))
                               for p in plants}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one customer needs more than all plants together can make
        customer = rng.choice(data["customers"])
        others = sum(v for c, v in data["demand"].items() if c != customer)
        need = sum(data["plant_capacity"].values()) - others + rng.randint(1, 20)
        return {**data, "demand": {**data["demand"], customer: need}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        S, P, W, C = data["suppliers"], data["plants"], data["warehouses"], data["customers"]
        buy = {(s, p): matrix.add_var(f"buy[{s},{p}]", cost=data["buy_cost"][s][p]) for s in S for p in P}
        ship = {(p, w): matrix.add_var(f"ship[{p},{w}]", cost=data["ship_cost"][p][w] + data["production_cost"][p])
                for p in P for w in W}
        deliver = {(w, c): matrix.add_var(f"deliver[{w},{c}]", cost=data["deliver_cost"][w][c]) for w in W for c in C}
        direct = {(p, c): matrix.add_var(f"direct[{p},{c}]", cost=data["direct_cost"][p][c] + data["production_cost"][p])
                  for p in P for c in C} if "direct_cost" in data else {}
        opened = {w: matrix.add_var(f"open[{w}]", 0.0, 1.0, cost=data["open_cost"][w], integer=True)
                  for w in W} if "open_cost" in data else {}
        for s in S:
            matrix.add_row({buy[s, p]: 1.0 for p in P}, upper=data["supply"][s], name=f"supply[{s}]")
        for p in P:
            made = {ship[p, w]: 1.0 for w in W}
            made.update({direct[p, c]: 1.0 for c in C} if direct else {})
            matrix.add_row({**{buy[s, p]: 1.0 for s in S}, **{col: -data["raw_per_unit"] for col in made}},
                           lower=0.0, upper=0.0, name=f"conversion[{p}]")
            lower = data["min_run"][p] if "min_run" in data else -float("inf")
            matrix.add_row(made, lower=lower, upper=data["plant_capacity"][p], name=f"plant[{p}]")
        for w in W:
            matrix.add_row({**{ship[p, w]: 1.0 for p in P}, **{deliver[w, c]: -1.0 for c in C}}, lower=0.0, upper=0.0,
                           name=f"warehouse_flow[{w}]")
            coefficients = {ship[p, w]: 1.0 for p in P}
            if opened:
                coefficients[opened[w]] = -data["warehouse_capacity"][w]
                matrix.add_row(coefficients, upper=0.0, name=f"warehouse_capacity[{w}]")
            else:
                matrix.add_row(coefficients, upper=data["warehouse_capacity"][w], name=f"warehouse_capacity[{w}]")
        for c in C:
            coefficients = {deliver[w, c]: 1.0 for w in W}
            coefficients.update({direct[p, c]: 1.0 for p in P} if direct else {})
            matrix.add_row(coefficients, lower=data["demand"][c], name=f"demand[{c}]")

    def _made(self, data: dict, x: dict, p: str) -> float:
        made = sum(x["ship"][p, w] for w in data["warehouses"])
        if "direct_cost" in data:
            made += sum(x["direct"][p, c] for c in data["customers"])
        return made

    def constraint_rows(self, data: dict, x: dict):
        S, P, W, C = data["suppliers"], data["plants"], data["warehouses"], data["customers"]
        buy, ship, deliver = x["buy"], x["ship"], x["deliver"]
        for s in S:
            yield Row(f"supply[{s}]", sum(buy[s, p] for p in P), "<=", data["supply"][s])
        for p in P:
            made = self._made(data, x, p)
            yield Row(f"conversion[{p}]", sum(buy[s, p] for s in S) - data["raw_per_unit"] * made, "==", 0.0)
            yield Row(f"plant_capacity[{p}]", made, "<=", data["plant_capacity"][p])
            if "min_run" in data:
                yield Row(f"min_run[{p}]", made, ">=", data["min_run"][p])
        for w in W:
            inflow = sum(ship[p, w] for p in P)
            yield Row(f"warehouse_flow[{w}]", inflow - sum(deliver[w, c] for c in C), "==", 0.0)
            is_open = x["open"][w] if "open_cost" in data else 1.0
            yield Row(f"warehouse_capacity[{w}]", inflow - data["warehouse_capacity"][w] * is_open, "<=", 0.0)
        for c in C:
            direct = sum(x["direct"][p, c] for p in P) if "direct_cost" in data else 0.0
            yield Row(f"demand[{c}]", sum(deliver[w, c] for w in W) + direct, ">=", data["demand"][c])

    def objective_value(self, data: dict, x: dict) -> float:
        S, P, W, C = data["suppliers"], data["plants"], data["warehouses"], data["customers"]
        total = sum(data["buy_cost"][s][p] * x["buy"][s, p] for s in S for p in P)
        total += sum(data["production_cost"][p] * self._made(data, x, p) for p in P)
        total += sum(data["ship_cost"][p][w] * x["ship"][p, w] for p in P for w in W)
        total += sum(data["deliver_cost"][w][c] * x["deliver"][w, c] for w in W for c in C)
        if "direct_cost" in data:
            total += sum(data["direct_cost"][p][c] * x["direct"][p, c] for p in P for c in C)
        if "open_cost" in data:
            total += sum(data["open_cost"][w] * x["open"][w] for w in W)
        return total

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        S, P, W, C = data["suppliers"], data["plants"], data["warehouses"], data["customers"]
        unit, money, raw, product = words["unit"], words["money"], words["raw"], words["product"]
        intro = (f"{words['company'].capitalize()} runs a supply chain from its {raw} suppliers {join_names(S)} "
                 f"through the plants {join_names(P)} and the warehouses {join_names(W)} to the customers "
                 f"{join_names(C)}.")
        general = (f"Each {unit} of {product} takes {fmt(data['raw_per_unit'])} {plural(unit)} of {raw}; every {unit} "
                   "delivered passes through a warehouse" + (" unless shipped directly" if "direct_cost" in data
                                                              else "") + ".")
        rules = []
        if "open_cost" in data:
            rules.append("A warehouse is used only if opened, at a fixed cost: " + "; ".join(
                f"{w} {fmt(data['open_cost'][w])} {money}" for w in W) + ".")
        if "min_run" in data:
            rules.append("Each plant must make at least its minimum run: " + "; ".join(
                f"{p} {fmt(data['min_run'][p])} {plural(unit)}" for p in P) + ".")
        question = ("How much should flow on every link to meet all demands at the least total cost, and what is "
                    "that cost? Quantities may be fractional.")
        rule_text = " ".join(rules)
        capacities = (
            "Supplier capacities: " + "; ".join(f"{s} {fmt(data['supply'][s])}" for s in S) + f" {plural(unit)} of {raw}. "
            "Plant capacities: " + "; ".join(
                f"{p} {fmt(data['plant_capacity'][p])} at {fmt(data['production_cost'][p])} {money} per {unit} made"
                for p in P) + ". Warehouse capacities: " + "; ".join(
                f"{w} {fmt(data['warehouse_capacity'][w])}" for w in W) + ". Customer demands: " + "; ".join(
                f"{c} {fmt(data['demand'][c])}" for c in C) + ".")
        links = [("buy_cost", S, P, f"Buying and moving {raw} ({money} per {unit})"),
                 ("ship_cost", P, W, f"Plant to warehouse ({money} per {unit})"),
                 ("deliver_cost", W, C, f"Warehouse to customer ({money} per {unit})")]
        if "direct_cost" in data:
            links.append(("direct_cost", P, C, f"Direct plant to customer ({money} per {unit})"))
        if representation == "text":
            costs = " ".join(f"{title}: " + "; ".join(
                f"{a} to {b} {fmt(data[key][a][b])}" for a in rows for b in cols) + "."
                for key, rows, cols, title in links)
            return f"{intro} {general} {capacities} {costs} {rule_text} {question}"
        if representation == "table":
            tables = "\n\n".join(f"{title}:\n\n" + markdown_table(["from", *cols], [[a, *[data[key][a][b] for b in cols]]
                                                                               for a in rows])
                                 for key, rows, cols, title in links)
            return f"{intro} {general} {capacities}\n\n{tables}\n\n{rule_text} {question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "only when" not in meaning}
            extra = []
            if "open_cost" in data:
                extra.append("A warehouse is used only if opened at its fixed cost.")
            if "min_run" in data:
                extra.append("Each plant must make at least its minimum run.")
            return f"{intro} {general} {' '.join(extra)}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        direct = "direct_cost" in data
        made = "\\sum_w y_{pw}" + (" + \\sum_c z_{pc}" if direct else "")
        objective = ("\\min\\ & \\sum_{s,p} a_{sp} x_{sp} + \\sum_p g_p m_p + \\sum_{p,w} b_{pw} y_{pw} + "
                     "\\sum_{w,c} e_{wc} v_{wc}" + (" + \\sum_{p,c} d_{pc} z_{pc}" if direct else "")
                     + (" + \\sum_w f_w o_w" if "open_cost" in data else ""))
        rows = [objective,
                f"\\text{{s.t.}}\\ & m_p = {made},\\ \\sum_s x_{{sp}} = r\\, m_p,\\ m_p \\le K_p && \\forall p",
                "& \\sum_p x_{sp} \\le A_s && \\forall s",
                "& \\sum_p y_{pw} = \\sum_c v_{wc},\\ \\sum_p y_{pw} \\le U_w"
                + (" o_w" if "open_cost" in data else "") + " && \\forall w",
                "& \\sum_w v_{wc}" + (" + \\sum_p z_{pc}" if direct else "") + " \\ge D_c && \\forall c"]
        if "min_run" in data:
            rows.append("& m_p \\ge L_p && \\forall p")
        rows.append("& x, y, v" + (", z" if direct else "") + " \\ge 0"
                    + (",\\ o_w \\in \\{0, 1\\}" if "open_cost" in data else ""))
        return ("**Sets**: suppliers $s$, plants $p$, warehouses $w$, customers $c$.\n\n"
                "**Parameters**: supply $A_s$, raw per unit $r$, plant capacity $K_p$, production cost $g_p$, "
                "warehouse capacity $U_w$, demand $D_c$, link costs $a, b, e$"
                + (", direct cost $d$" if direct else "") + (", opening cost $f_w$" if "open_cost" in data else "")
                + (", minimum run $L_p$" if "min_run" in data else "") + ".\n\n"
                "**Variables**: raw bought $x_{sp}$, shipped $y_{pw}$, delivered $v_{wc}$"
                + (", direct $z_{pc}$" if direct else "") + (", open $o_w$" if "open_cost" in data else "")
                + "; $m_p$ is the amount made.\n\n"
                "$$\n\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$")


def _assemble(opened: bool, direct: bool, min_run: bool) -> str:
    """The Pyomo source of one variant, from the class's pieces."""
    pieces = SupplyChain
    code = pieces._HEAD + (pieces._OPEN_VAR if opened else "") + (pieces._DIRECT_VAR if direct else "")
    code += pieces._MADE.replace("{direct_made}", " + sum(model.direct[p, c] for c in model.C)" if direct else "")
    extra = ""
    if direct:
        extra += '\n    + sum(data["direct_cost"][p][c] * model.direct[p, c] for p in model.P for c in model.C)'
    if opened:
        extra += '\n    + sum(data["open_cost"][w] * model.open[w] for w in model.W)'
    code += pieces._OBJECTIVE.replace("{extra}", extra)
    code += pieces._BODY.replace("{opened}", " * model.open[w]" if opened else "").replace(
        "{direct_in}", " + sum(model.direct[p, c] for p in model.P)" if direct else "")
    return code + (pieces._MIN_RUN if min_run else "")


SupplyChain.model_code = _assemble(opened=True, direct=False, min_run=False)
FAMILY = SupplyChain()
