"""Contract allocation (MILP): split the delivery of several contracts among producers of limited capacity at
the least production cost, where a producer that takes part in a contract must deliver at least its
minimum delivery size to it (a semi-continuous amount: a binary "takes part" decision per pair).

Structure variants (drawn per instance, recorded by the keys present): a minimum number of distinct
producers per contract (`min_producers`, for supply diversity), a fixed cost of each producer-contract
participation (`participation_cost`), and a most contracts any producer may take part in
(`max_contracts`), each present or absent: eight program skeletons."""

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
    pick_names,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("power", "electricity supply", {
        "company": "an energy retailer",
        "producers": ["Hydro North", "Wind Coast", "Solar Valley", "Gas Ridge", "Biomass Hill", "Geo Springs",
                      "Tidal Bay"],
        "contracts": ["City Council", "Steel Works", "Rail Network", "Data Centre", "Hospital Trust", "University",
                      "Airport", "Water Utility"],
        "unit": "MWh", "money": "dollars", "period": "the winter quarter",
    }),
    Scenario("dairy", "dairy cooperatives", {
        "company": "a dairy cooperative",
        "producers": ["Meadow Farm", "Oak Farm", "River Farm", "Hilltop Farm", "Clover Farm", "Brook Farm",
                      "Willow Farm"],
        "contracts": ["Cheese Plant", "Yogurt Maker", "School Board", "Supermarket", "Ice Cream Co",
                      "Bakery Chain", "Cafe Group", "Hotel Group"],
        "unit": "thousand litres", "money": "euros", "period": "next month",
    }),
    Scenario("coffee", "coffee trading", {
        "company": "a coffee trading house",
        "producers": ["Finca Alta", "Finca Verde", "Kibo Estate", "Sidamo Coop", "Huila Coop", "Toraja Estate",
                      "Minas Estate"],
        "contracts": ["Roaster A", "Roaster B", "Roaster C", "Roaster D", "Roaster E", "Roaster F", "Roaster G",
                      "Roaster H"],
        "unit": "tonnes", "money": "dollars", "period": "the harvest season",
    }),
)

# the eval split's own industries and names (see ProblemFamily.eval_scenarios)
EVAL_SCENARIOS = (
    Scenario("timber", "sawmill log supply", {
        "company": "a sawmill group",
        "producers": ["Pine Hollow Estate", "Cedar Run Estate", "Spruce Lake Estate", "Larch Valley Estate",
                      "Fir Crest Estate", "Birch Moor Estate", "Alder Glen Estate"],
        "contracts": ["Pallet Works", "Furniture Maker", "Pulp Mill", "Board Plant", "Roof Truss Co",
                      "Flooring Firm", "Shipyard", "Export Terminal"],
        "unit": "m3", "money": "kronor", "period": "the spring felling season",
    }),
    Scenario("grain", "grain merchandising", {
        "company": "a grain merchant",
        "producers": ["Prairie Elevator", "Bluestem Elevator", "Coulee Elevator", "Sandhill Elevator",
                      "Big Sky Elevator", "Red River Elevator", "Flatland Elevator"],
        "contracts": ["Flour Mill", "Malt House", "Feedlot", "Ethanol Plant", "Pasta Factory", "Cereal Maker",
                      "Port Exporter", "Brewery"],
        "unit": "MT", "money": "dollars", "period": "the autumn marketing window",
    }),
)


class ContractAllocation(ProblemFamily):
    name = "contract_allocation"
    title = "Contract allocation"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"deliver": "nonnegative", "take_part": "binary"}
    phrasings = (
        Phrasing(r"\bmust allocate\b", ("must allocate", "has to allocate"), ("is splitting", "needs to divide")),
        Phrasing(r"\bA producer that takes part in a contract delivers at least its minimum delivery size to it\.",
                 ("A producer that takes part in a contract delivers at least its minimum delivery size to it.",),
                 ("Any producer serving a contract must send it no less than that producer's minimum lot.",)),
        Phrasing(r"\bProducer capacities:", ("Producer capacities:", "Capacity of each producer:"),
                 ("What each producer can supply:",)),
        Phrasing(r"\bContract sizes:", ("Contract sizes:", "Amounts each contract requires:"),
                 ("Volumes to deliver per contract:",)),
        # eval-only rewordings of the fixed sentences (training keeps its text); each stops short of the
        # generic words that training writes two ways ("needs", "at least", "the lowest", "what is that")
        Phrasing(r"\bFor supply diversity, each contract\b(?= needs at least)",
                 ("For supply diversity, each contract",), ("To keep supply diversified, every contract",)),
        Phrasing(r"\bthis many distinct producers:", ("this many distinct producers:",),
                 ("the following count of different producers:",)),
        Phrasing(r"\bNo producer may take part in more than\b", ("No producer may take part in more than",),
                 ("No single producer can join more than",)),
        Phrasing(r"\bEach contract a producer takes part in also costs a fixed fee for that producer:",
                 ("Each contract a producer takes part in also costs a fixed fee for that producer:",),
                 ("A producer pays a set fee for every contract it joins:",)),
        Phrasing(r"\bHow much should each producer deliver to each contract to fulfil every contract at\b"
                 r"(?= the lowest)",
                 ("How much should each producer deliver to each contract to fulfil every contract at",),
                 ("What quantity ought every producer to send to every contract so that all contracts are met at",)),
        Phrasing(r"\bAmounts may be fractional\.", ("Amounts may be fractional.",),
                 ("Fractional quantities are acceptable.", "The quantities need not be whole numbers.")),
        Phrasing(r"\(minimum delivery\b", ("(minimum delivery",), ("(smallest lot",)),
        Phrasing(r"(?<=\| )cost(?= \()", ("cost",), ("unit price",)),
        Phrasing(r"(?<=\| )capacity(?= \|)", ("capacity",), ("supply limit",)),
        Phrasing(r"(?<=\| )minimum delivery(?= \|)", ("minimum delivery",), ("smallest lot",)),
        Phrasing(r"(?<=\| )contract size(?= \|)", ("contract size",), ("volume ordered",)),
        Phrasing(r"(?<=needs )its minimum number of distinct producers\.",
                 ("its minimum number of distinct producers.",), ("its own lower bound on different producers.",)),
        Phrasing(r"\bA producer takes part in a limited number of contracts\.",
                 ("A producer takes part in a limited number of contracts.",),
                 ("The count of contracts one producer can join is capped.",)),
        Phrasing(r"\bEach participation of a producer in a contract has a fixed cost\.",
                 ("Each participation of a producer in a contract has a fixed cost.",),
                 ("Joining a contract means a set fee for the producer.",)),
        Phrasing(r"\blist of producer names\b", ("list of producer names",), ("names of all producers",)),
        Phrasing(r"\blist of contract names\b", ("list of contract names",), ("names of all contracts",)),
        Phrasing(r"\bmost each producer can deliver in all\b", ("most each producer can deliver in all",),
                 ("largest total volume every producer can supply",)),
        Phrasing(r"\bamount each contract requires\b", ("amount each contract requires",),
                 ("volume every contract calls for",)),
        Phrasing(r"\bcost per unit delivered\b", ("cost per unit delivered",), ("price for each unit supplied",)),
        Phrasing(r"\bleast a producer delivers to a contract it takes part in\b",
                 ("least a producer delivers to a contract it takes part in",),
                 ("smallest lot a producer sends to a contract it joins",)),
        Phrasing(r"\bleast number of distinct producers per contract\b",
                 ("least number of distinct producers per contract",),
                 ("minimum count of different producers for each contract",)),
        Phrasing(r"\bfixed cost each time a producer takes part in a contract\b",
                 ("fixed cost each time a producer takes part in a contract",),
                 ("set fee charged whenever a producer joins a contract",)),
        Phrasing(r"\bmost contracts any one producer may take part in\b",
                 ("most contracts any one producer may take part in",),
                 ("largest count of contracts a single producer can join",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(included only if",)),
    )
    data_fields = {
        "producers": "list of producer names",
        "contracts": "list of contract names",
        "capacity": "most each producer can deliver in all, keyed by producer",
        "amount": "amount each contract requires (at least), keyed by contract",
        "unit_cost": "unit_cost[producer][contract]: cost per unit delivered",
        "min_delivery": "least a producer delivers to a contract it takes part in, keyed by producer",
        "min_producers": "least number of distinct producers per contract, keyed by contract (only when "
                         "supply must be diversified)",
        "participation_cost": "fixed cost each time a producer takes part in a contract, keyed by producer "
                              "(only when participation has a fixed cost)",
        "max_contracts": "most contracts any one producer may take part in (only when there is such a limit)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.P = pyo.Set(initialize=data["producers"])
model.C = pyo.Set(initialize=data["contracts"])
model.deliver = pyo.Var(model.P, model.C, domain=pyo.NonNegativeReals)
model.take_part = pyo.Var(model.P, model.C, domain=pyo.Binary)
'''
    _OBJECTIVE = '''\
model.obj = pyo.Objective(
    expr=sum(data["unit_cost"][p][c] * model.deliver[p, c] for p in model.P for c in model.C), sense=pyo.minimize)
'''
    _OBJECTIVE_FIXED = '''\
model.obj = pyo.Objective(
    expr=sum(data["unit_cost"][p][c] * model.deliver[p, c] + data["participation_cost"][p] * model.take_part[p, c]
             for p in model.P for c in model.C), sense=pyo.minimize)
'''
    _BODY = '''\
model.capacity = pyo.Constraint(
    model.P, rule=lambda model, p: sum(model.deliver[p, c] for c in model.C) <= data["capacity"][p])
model.amount = pyo.Constraint(
    model.C, rule=lambda model, c: sum(model.deliver[p, c] for p in model.P) >= data["amount"][c])
model.only_if_taking_part = pyo.Constraint(
    model.P, model.C, rule=lambda model, p, c: model.deliver[p, c]
    <= min(data["capacity"][p], data["amount"][c]) * model.take_part[p, c])
model.min_delivery = pyo.Constraint(
    model.P, model.C, rule=lambda model, p, c: model.deliver[p, c] >= data["min_delivery"][p] * model.take_part[p, c])
'''
    _DIVERSITY = '''\
model.min_producers = pyo.Constraint(
    model.C, rule=lambda model, c: sum(model.take_part[p, c] for p in model.P) >= data["min_producers"][c])
'''
    _MAX_CONTRACTS = '''\
model.max_contracts = pyo.Constraint(
    model.P, rule=lambda model, p: sum(model.take_part[p, c] for c in model.C) <= data["max_contracts"])
'''

    model_code = _HEAD + _OBJECTIVE + _BODY + _DIVERSITY  # with producer diversity

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._OBJECTIVE_FIXED if "participation_cost" in data else self._OBJECTIVE) + self._BODY
        if "min_producers" in data:
            code += self._DIVERSITY
        if "max_contracts" in data:
            code += self._MAX_CONTRACTS
        return code

    def variant_of(self, data: dict) -> str:
        parts = [key for key in ("min_producers", "participation_cost", "max_contracts") if key in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_producers = size_for(difficulty, 3, 4, 6)
        n_contracts = size_for(difficulty, 4, 6, 8)
        producers = pick_names(rng, words["producers"], n_producers)
        contracts = pick_names(rng, words["contracts"], n_contracts)
        amount = {c: rng.randint(20, 120) * 5 for c in contracts}
        smallest = min(amount.values())
        min_delivery = {p: int(smallest * rng.uniform(0.05, 0.12)) + 1 for p in producers}
        min_producers = {c: rng.choice([1, 2, 2, 3]) for c in contracts}
        # a planted plan: each contract split over its required number of producers, each share at least a
        # fifth of the contract (above every minimum delivery); capacities and limits leave room around it
        load = {p: 0.0 for p in producers}
        joined = {p: 0 for p in producers}
        for c in contracts:
            chosen = sorted(producers, key=lambda p: (joined[p] + rng.random(), p))[:min_producers[c]]
            weights = [rng.uniform(1, 2) for _ in chosen]
            for p, weight in zip(chosen, weights, strict=True):
                load[p] += amount[c] * weight / sum(weights)
                joined[p] += 1
        capacity = {p: int(max(load[p], sum(amount.values()) / n_producers) * rng.uniform(1.1, 1.4)) + 1
                    for p in producers}
        unit_cost = {p: {c: rng.randint(20, 90) for c in contracts} for p in producers}
        data = {"producers": producers, "contracts": contracts, "capacity": capacity, "amount": amount,
                "unit_cost": unit_cost, "min_delivery": min_delivery}
        if rng.random() < 0.5:
            data["min_producers"] = min_producers
        if rng.random() < 0.5:
            data["participation_cost"] = {p: rng.randint(10, 60) * 10 for p in producers}
        if rng.random() < 0.5:
            data["max_contracts"] = max(joined.values())
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one contract grows past what all producers together can deliver
        contract = rng.choice(data["contracts"])
        others = sum(v for c, v in data["amount"].items() if c != contract)
        total = sum(data["capacity"].values())
        return {**data, "amount": {**data["amount"], contract: total - others + rng.randint(1, 20)}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        producers, contracts = data["producers"], data["contracts"]
        fixed = data.get("participation_cost", {})
        deliver = {(p, c): matrix.add_var(f"deliver[{p},{c}]", cost=data["unit_cost"][p][c])
                   for p in producers for c in contracts}
        take = {(p, c): matrix.add_var(f"take_part[{p},{c}]", 0.0, 1.0, cost=fixed.get(p, 0.0), integer=True)
                for p in producers for c in contracts}
        for p in producers:
            matrix.add_row({deliver[p, c]: 1.0 for c in contracts}, upper=data["capacity"][p], name=f"capacity[{p}]")
        for c in contracts:
            matrix.add_row({deliver[p, c]: 1.0 for p in producers}, lower=data["amount"][c], name=f"amount[{c}]")
        for p in producers:
            for c in contracts:
                big = min(data["capacity"][p], data["amount"][c])
                matrix.add_row({deliver[p, c]: 1.0, take[p, c]: -big}, upper=0.0, name=f"link[{p},{c}]")
                matrix.add_row({deliver[p, c]: 1.0, take[p, c]: -data["min_delivery"][p]}, lower=0.0,
                               name=f"min_delivery[{p},{c}]")
        if "min_producers" in data:
            for c in contracts:
                matrix.add_row({take[p, c]: 1.0 for p in producers}, lower=data["min_producers"][c],
                               name=f"min_producers[{c}]")
        if "max_contracts" in data:
            for p in producers:
                matrix.add_row({take[p, c]: 1.0 for c in contracts}, upper=data["max_contracts"],
                               name=f"max_contracts[{p}]")

    def constraint_rows(self, data: dict, x: dict):
        producers, contracts = data["producers"], data["contracts"]
        deliver, take = x["deliver"], x["take_part"]
        for p in producers:
            yield Row(f"capacity[{p}]", sum(deliver[p, c] for c in contracts), "<=", data["capacity"][p])
        for c in contracts:
            yield Row(f"amount[{c}]", sum(deliver[p, c] for p in producers), ">=", data["amount"][c])
        for p in producers:
            for c in contracts:
                big = min(data["capacity"][p], data["amount"][c])
                yield Row(f"link[{p},{c}]", deliver[p, c] - big * take[p, c], "<=", 0.0)
                yield Row(f"min_delivery[{p},{c}]", deliver[p, c] - data["min_delivery"][p] * take[p, c], ">=", 0.0)
        if "min_producers" in data:
            for c in contracts:
                yield Row(f"min_producers[{c}]", sum(take[p, c] for p in producers), ">=", data["min_producers"][c])
        if "max_contracts" in data:
            for p in producers:
                yield Row(f"max_contracts[{p}]", sum(take[p, c] for c in contracts), "<=", data["max_contracts"])

    def objective_value(self, data: dict, x: dict) -> float:
        fixed = data.get("participation_cost", {})
        return sum(data["unit_cost"][p][c] * x["deliver"][p, c] + fixed.get(p, 0.0) * x["take_part"][p, c]
                   for p in data["producers"] for c in data["contracts"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        producers, contracts = data["producers"], data["contracts"]
        unit, money = words["unit"], words["money"]
        intro = {
            "power": f"{words['company'].capitalize()} must allocate its supply contracts for {words['period']} "
                     f"({join_names(contracts)}) among the generators {join_names(producers)}.",
            "dairy": f"For {words['period']}, {words['company']} must allocate the milk for its contracts with "
                     f"{join_names(contracts)} among its member farms {join_names(producers)}.",
            "coffee": f"{words['company'].capitalize()} must allocate {words['period']}'s contracts of "
                      f"{join_names(contracts)} among the growers {join_names(producers)}.",
            "timber": f"{words['company'].capitalize()} is dividing the log orders it holds for {words['period']} "
                      f"({join_names(contracts)}) between the forest estates {join_names(producers)}.",
            "grain": f"In the course of {words['period']}, {words['company']} has to spread its sales contracts with "
                     f"{join_names(contracts)} across the country elevators {join_names(producers)}.",
        }[scenario.key]
        rules = ["A producer that takes part in a contract delivers at least its minimum delivery size to it."]
        if "min_producers" in data:
            rules.append("For supply diversity, each contract needs at least this many distinct producers: "
                         + "; ".join(f"{c} {fmt(data['min_producers'][c])}" for c in contracts) + ".")
        if "max_contracts" in data:
            rules.append(f"No producer may take part in more than {fmt(data['max_contracts'])} contracts.")
        if "participation_cost" in data:
            rules.append("Each contract a producer takes part in also costs a fixed fee for that producer: "
                         + "; ".join(f"{p} {fmt(data['participation_cost'][p])} {money}" for p in producers) + ".")
        goal = "total cost" if "participation_cost" in data else "total production cost"
        question = (f"How much should each producer deliver to each contract to fulfil every contract at the "
                    f"lowest {goal}, and what is that cost? Amounts may be fractional.")
        rule_text = " ".join(rules)
        if representation == "text":
            capacities = "Producer capacities: " + "; ".join(
                f"{p} {fmt(data['capacity'][p])} {unit} (minimum delivery {fmt(data['min_delivery'][p])} {unit})"
                for p in producers) + "."
            sizes = "Contract sizes: " + "; ".join(f"{c} {fmt(data['amount'][c])} {unit}" for c in contracts) + "."
            costs = " ".join(f"Each {unit} from {p} costs " + ", ".join(
                f"{fmt(data['unit_cost'][p][c])} {money} for {c}" for c in contracts) + "." for p in producers)
            return f"{intro} {capacities} {sizes} {costs} {rule_text} {question}"
        if representation == "table":
            table = markdown_table(
                [f"cost ({money}/{unit})", *contracts, "capacity", "minimum delivery"],
                [[p, *[data["unit_cost"][p][c] for c in contracts], data["capacity"][p], data["min_delivery"][p]]
                 for p in producers] + [["contract size", *[data["amount"][c] for c in contracts], "", ""]])
            return f"{intro}\n\n{table}\n\n{rule_text} {question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "only when" not in meaning}
            extra = []
            if "min_producers" in data:
                extra.append("Each contract needs its minimum number of distinct producers.")
            if "max_contracts" in data:
                extra.append("A producer takes part in a limited number of contracts.")
            if "participation_cost" in data:
                extra.append("Each participation of a producer in a contract has a fixed cost.")
            return (f"{intro} {rules[0]} {' '.join(extra)}\n\n{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        objective = "\\min\\ & \\sum_{p \\in P} \\sum_{c \\in C} c_{pc} x_{pc}"
        parameters = "unit cost $c_{pc}$, capacity $K_p$, contract size $A_c$, minimum delivery $m_p$"
        if "participation_cost" in data:
            objective += " + \\sum_{p \\in P} \\sum_{c \\in C} f_p y_{pc}"
            parameters += ", participation cost $f_p$"
        rows = [objective,
                "\\text{s.t.}\\ & \\sum_{c \\in C} x_{pc} \\le K_p && \\forall p \\in P",
                "& \\sum_{p \\in P} x_{pc} \\ge A_c && \\forall c \\in C",
                "& m_p y_{pc} \\le x_{pc} \\le \\min(K_p, A_c) y_{pc} && \\forall p \\in P, c \\in C"]
        if "min_producers" in data:
            parameters += ", least producers $n_c$"
            rows.append("& \\sum_{p \\in P} y_{pc} \\ge n_c && \\forall c \\in C")
        if "max_contracts" in data:
            parameters += ", most contracts per producer $N$"
            rows.append("& \\sum_{c \\in C} y_{pc} \\le N && \\forall p \\in P")
        rows.append("& x_{pc} \\ge 0,\\ y_{pc} \\in \\{0, 1\\}")
        return ("**Sets**: producers $P$, contracts $C$.\n\n"
                f"**Parameters**: {parameters}.\n\n"
                "**Variables**: $x_{pc} \\ge 0$, amount $p$ delivers to $c$; $y_{pc} \\in \\{0, 1\\}$, 1 when $p$ "
                "takes part in $c$.\n\n"
                "$$\n\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$")


FAMILY = ContractAllocation()
