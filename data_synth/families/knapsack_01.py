"""0-1 knapsack (IP): choose which items to take (each at most once) to maximize their total value
within a weight capacity; some items may be mandatory.

Structure variants (drawn per instance, recorded by the keys present): a limit on the number of items
(`max_items`) and pairs of items that exclude each other (`conflicts`), each present or absent, so the
program has four skeletons."""

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
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("cargo", "air cargo", {
        "company": "a cargo airline", "container": "the last free position of tonight's freighter",
        "item_prefix": "Consignment ", "weight_unit": "kg", "value_word": "revenue", "value_unit": "dollars",
        "weight_range": (40, 400), "value_range": (300, 5000), "count_word": "consignments",
    }),
    Scenario("satellite", "space missions", {
        "company": "a space agency", "container": "a small satellite's payload bay",
        "item_prefix": "Instrument ", "weight_unit": "kg", "value_word": "science score", "value_unit": "points",
        "weight_range": (2, 30), "value_range": (10, 120), "count_word": "instruments",
    }),
    Scenario("expedition", "outdoor expeditions", {
        "company": "a mountaineering team", "container": "the summit porter's pack",
        "item_prefix": "Kit ", "weight_unit": "grams", "value_word": "utility", "value_unit": "points",
        "weight_range": (150, 2500), "value_range": (5, 90), "count_word": "kits",
    }),
)

# eval only: other companies, containers and item names than any training scenario, in the same style
# (short numbered names, the same kinds of units) for the demo's tiny model
EVAL_SCENARIOS = (
    Scenario("van", "parcel delivery", {
        "company": "a parcel carrier", "container": "its last delivery van of the day",
        "item_prefix": "Parcel ", "weight_unit": "kg", "value_word": "revenue", "value_unit": "euros",
        "weight_range": (10, 120), "value_range": (50, 900), "count_word": "parcels",
    }),
    Scenario("museum", "touring exhibitions", {
        "company": "a touring museum", "container": "one packing crate",
        "item_prefix": "Artifact ", "weight_unit": "kg", "value_word": "visitor score", "value_unit": "points",
        "weight_range": (3, 40), "value_range": (10, 120), "count_word": "artifacts",
    }),
    Scenario("drone", "emergency response", {
        "company": "a rescue team", "container": "a drone's cargo box",
        "item_prefix": "Supply ", "weight_unit": "grams", "value_word": "priority", "value_unit": "points",
        "weight_range": (100, 2000), "value_range": (5, 90), "count_word": "supplies",
    }),
)


class Knapsack01(ProblemFamily):
    name = "knapsack_01"
    title = "0-1 knapsack"
    problem_type = "IP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"take": "binary"}
    # the family's fixed sentences, in other words for each split (data_synth.statements)
    phrasings = (
        Phrasing(r"can load the last free position of tonight's freighter with some of",
                 ("can load the last free position of tonight's freighter with some of",
                  "may fill the last free position of tonight's freighter using some of"),
                 ("has one position left on tonight's freighter and may fill it from",)),
        Phrasing(r"is choosing the instruments for a small satellite's payload bay from",
                 ("is choosing the instruments for a small satellite's payload bay from",),
                 ("decides what flies in a small satellite's payload bay, picking among",)),
        Phrasing(r"must decide what goes into the summit porter's pack from",
                 ("must decide what goes into the summit porter's pack from",),
                 ("packs the summit porter's load and picks among",)),
        Phrasing(r"Each item is taken whole or not at all\.",
                 ("Each item is taken whole or not at all.", "Items cannot be split: each is taken completely or left out."),
                 ("No item may be taken in part.", "An item is either packed in full or left behind.")),
        Phrasing(r"\bweighs\b", ("weighs",), ("has a weight of",)),
        Phrasing(r"\band is worth\b", ("and is worth", "and is valued at"), ("with a value of", "and brings")),
        # eval-only plain rewordings of the other fixed sentences (training keeps its text); rules stop before
        # generic phrases with several training wordings ("may not exceed", "at most", "what is that")
        Phrasing(r"\bThe total weight (?=may not exceed\b)", ("The total weight ",), ("The combined weight ",)),
        Phrasing(r"(?<=s) fit\.", (" fit.",), (" can go in.",)),
        Phrasing(r"\bThese pairs exclude each other \((?=at most\b)", ("These pairs exclude each other (",),
                 ("These pairs rule each other out (",)),
        Phrasing(r"\bone of each pair may be chosen\):", ("one of each pair may be chosen):",),
                 ("one item of a pair can be taken):",)),
        Phrasing(r"\bmust be included\.", ("must be included.",), ("must be taken.",)),
        Phrasing(r"\bshould be chosen to maximize the total\b", ("should be chosen to maximize the total",),
                 ("ought to be taken to get the highest total",)),
        Phrasing(r"\bmost total weight that can be taken\b", ("most total weight that can be taken",),
                 ("largest total weight allowed",)),
        Phrasing(r"\bmost items that can be taken\b", ("most items that can be taken",),
                 ("largest number of items allowed",)),
        Phrasing(r"\bpairs of items that cannot both be taken\b", ("pairs of items that cannot both be taken",),
                 ("item pairs that cannot be taken together",)),
        Phrasing(r"\bitems that must be taken \(may be empty\)", ("items that must be taken (may be empty)",),
                 ("items that have to be taken (the list can be empty)",)),
    )
    data_fields = {
        "items": "list of item names",
        "weight": "weight of each item, keyed by item",
        "value": "value of each item, keyed by item",
        "capacity": "most total weight that can be taken",
        "max_items": "most items that can be taken (only when there is such a limit)",
        "conflicts": "pairs of items that cannot both be taken (only when there are such pairs)",
        "required": "items that must be taken (may be empty)",
    }
    # the pieces of `model_code_for`: the head and tail always, each optional group when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.I = pyo.Set(initialize=data["items"])
model.take = pyo.Var(model.I, domain=pyo.Binary)

model.obj = pyo.Objective(expr=sum(data["value"][i] * model.take[i] for i in model.I), sense=pyo.maximize)
model.capacity = pyo.Constraint(expr=sum(data["weight"][i] * model.take[i] for i in model.I) <= data["capacity"])
'''
    _MAX_ITEMS = '''\
model.max_items = pyo.Constraint(expr=sum(model.take[i] for i in model.I) <= data["max_items"])
'''
    _CONFLICTS = '''\
model.P = pyo.RangeSet(0, len(data["conflicts"]) - 1)
model.conflicts = pyo.Constraint(
    model.P, rule=lambda model, p: model.take[data["conflicts"][p][0]] + model.take[data["conflicts"][p][1]] <= 1)
'''
    _TAIL = '''\
model.required = pyo.Constraint(data["required"], rule=lambda model, i: model.take[i] == 1)
'''

    model_code = _HEAD + _MAX_ITEMS + _TAIL  # the family's model with the item limit, without exclusions

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD
        if "max_items" in data:
            code += self._MAX_ITEMS
        if "conflicts" in data:
            code += self._CONFLICTS
        return code + self._TAIL

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("max_items", "conflicts") if name in data]
        return "+".join(parts) or "capacity-only"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_items = size_for(difficulty, 8, 15, 30)
        items = [f"{words['item_prefix']}{k}" for k in rng.sample(range(1, 100), n_items)]
        w_low, w_high = words["weight_range"]
        v_low, v_high = words["value_range"]
        weight = {i: rng.randint(w_low, w_high) for i in items}
        value = {i: rng.randint(v_low, v_high) for i in items}
        capacity = int(sum(weight.values()) * rng.uniform(0.25, 0.5))
        max_items = max(2, round(n_items * rng.uniform(0.2, 0.45)))
        lightest = sorted(items, key=lambda i: weight[i])
        required = [i for i in lightest[:1] if rng.random() < 0.3]  # sometimes one item is mandatory
        data = {"items": items, "weight": weight, "value": value, "capacity": capacity, "required": required}
        if rng.random() < 0.5:
            data["max_items"] = max_items
        if rng.random() < 0.5:
            # pairs that exclude each other, never involving a mandatory item (so the instance stays feasible)
            free = [i for i in items if i not in required]
            pairs = set()
            while len(pairs) < max(1, n_items // 5):
                a, b = rng.sample(free, 2)
                pairs.add((a, b) if a < b else (b, a))
            data["conflicts"] = [list(pair) for pair in sorted(pairs)]
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # mandatory items that together weigh more than the capacity
        data = dict(data)
        required, total = [], 0
        for i in sorted(data["items"], key=lambda i: -data["weight"][i]):
            required.append(i)
            total += data["weight"][i]
            if total > data["capacity"]:
                break
        data["required"] = required
        if "max_items" in data:
            data["max_items"] = max(data["max_items"], len(required))
        if "conflicts" in data:  # mandatory items must not exclude each other: keep the weight the cause
            data["conflicts"] = [pair for pair in data["conflicts"] if not set(pair) & set(required)]
            if not data["conflicts"]:
                del data["conflicts"]
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        required = set(data["required"])
        columns = {i: matrix.add_var(f"take[{i}]", 1.0 if i in required else 0.0, 1.0, cost=data["value"][i],
                                     integer=True) for i in data["items"]}
        matrix.add_row({columns[i]: data["weight"][i] for i in data["items"]}, upper=data["capacity"],
                       name="capacity")
        if "max_items" in data:
            matrix.add_row({columns[i]: 1.0 for i in data["items"]}, upper=data["max_items"], name="max_items")
        for a, b in data.get("conflicts", ()):
            matrix.add_row({columns[a]: 1.0, columns[b]: 1.0}, upper=1.0, name=f"conflict[{a},{b}]")

    def constraint_rows(self, data: dict, x: dict):
        take = x["take"]
        yield Row("capacity", sum(data["weight"][i] * take[i] for i in data["items"]), "<=", data["capacity"])
        if "max_items" in data:
            yield Row("max_items", sum(take[i] for i in data["items"]), "<=", data["max_items"])
        for a, b in data.get("conflicts", ()):
            yield Row(f"conflict[{a},{b}]", take[a] + take[b], "<=", 1)
        for i in data["required"]:
            yield Row(f"required[{i}]", take[i], "==", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["value"][i] * x["take"][i] for i in data["items"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        chosen = [i for i in data["items"] if x["take"][i] > 0.5]
        weight = sum(data["weight"][i] for i in chosen)
        limit = f" of at most {fmt(data['max_items'])}" if "max_items" in data else ""
        return (f"- take {join_names(chosen)}\n- total weight {fmt(weight)} of {fmt(data['capacity'])} "
                f"{scenario.words['weight_unit']}; {len(chosen)}{limit} items")

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        items = data["items"]
        unit, value_word, value_unit = words["weight_unit"], words["value_word"], words["value_unit"]
        intro = {
            "cargo": f"{words['company'].capitalize()} can load {words['container']} with some of "
                     f"{len(items)} waiting {words['count_word']}.",
            "satellite": f"{words['company'].capitalize()} is choosing the instruments for {words['container']} "
                         f"from {len(items)} candidate {words['count_word']}.",
            "expedition": f"{words['company'].capitalize()} must decide what goes into {words['container']} "
                          f"from {len(items)} {words['count_word']}.",
            "van": f"{words['company'].capitalize()} has room in {words['container']} for some of its "
                   f"{len(items)} waiting {words['count_word']}.",
            "museum": f"{words['company'].capitalize()} is picking what to pack into {words['container']} from "
                      f"{len(items)} {words['count_word']}.",
            "drone": f"{words['company'].capitalize()} is loading {words['container']} from {len(items)} stored "
                     f"{words['count_word']}.",
        }[scenario.key]
        limits = f"The total weight may not exceed {fmt(data['capacity'])} {unit}."
        if "max_items" in data:
            limits += f" At most {fmt(data['max_items'])} {words['count_word']} fit."
        if "conflicts" in data:
            pairs = "; ".join(f"{a} and {b}" for a, b in data["conflicts"])
            limits += f" These pairs exclude each other (at most one of each pair may be chosen): {pairs}."
        if data["required"]:
            limits += f" {join_names(data['required'])} must be included."
        question = (f"Each item is taken whole or not at all. Which {words['count_word']} should be chosen to "
                    f"maximize the total {value_word}, and what is that total?")
        if representation == "text":
            listing = "; ".join(f"{i} weighs {fmt(data['weight'][i])} {unit} and is worth "
                                f"{fmt(data['value'][i])} {value_unit}" for i in items)
            return f"{intro} {listing}. {limits} {question}"
        if representation == "table":
            table = markdown_table(["item", f"weight ({unit})", f"{value_word} ({value_unit})"],
                                   [[i, data["weight"][i], data["value"][i]] for i in items])
            return f"{intro}\n\n{table}\n\n{limits} {question}"
        if representation == "file":
            return f"{intro} {question}\n\n{describe_data_file(self.data_fields)}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        sets = "items $I$, mandatory items $M \\subseteq I$"
        parameters = "weight $w_i$, value $v_i$, capacity $W$"
        rows = ["\\text{s.t.}\\ & \\sum_{i \\in I} w_i x_i \\le W"]
        if "max_items" in data:
            parameters += ", item limit $K$"
            rows.append("& \\sum_{i \\in I} x_i \\le K")
        if "conflicts" in data:
            sets += ", conflicting pairs $C \\subseteq I \\times I$"
            rows.append("& x_i + x_j \\le 1 && \\forall (i, j) \\in C")
        rows += ["& x_i = 1 && \\forall i \\in M", "& x_i \\in \\{0, 1\\} && \\forall i \\in I"]
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            "**Variables**: $x_i \\in \\{0, 1\\}$, 1 when item $i$ is taken.\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & \\sum_{i \\in I} v_i x_i \\\\\n"
            + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = Knapsack01()
