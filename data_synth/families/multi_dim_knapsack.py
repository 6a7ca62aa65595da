"""Multi-dimensional knapsack (IP): choose items, each taken whole or not at all, to maximize total value
while several resources (weight, volume, power, ...) each stay within their capacity.

Structure variants (drawn per instance, recorded by the keys present): a limit on the number of items
(`max_items`), items that can only be chosen together with another one (`requires`), and items that can be
taken several times up to a bound (`max_copies`: the bounded knapsack, general integer variables), each
present or absent, so the program has eight skeletons."""

from __future__ import annotations

import random

from data_synth.family import (
    MatrixModel,
    ProblemFamily,
    Row,
    Scenario,
    describe_data_file,
    fmt,
    markdown_table,
    plural,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("container", "ocean freight", {
        "company": "a freight consolidator", "item_prefix": "Lot ", "item_word": "lot",
        "container": "a 40-foot container",
        "resources": [("weight", "kg", (200, 3000)), ("volume", "cubic metres", (1, 12)),
                      ("floor area", "square metres", (1, 6)), ("declared value", "thousand dollars", (5, 80))],
        "value_word": "freight revenue", "value_unit": "dollars", "value_range": (400, 6000),
        "count_limit": "the crane crew can handle at most {k} lots",
    }),
    Scenario("relief", "humanitarian logistics", {
        "company": "a relief agency", "item_prefix": "Kit ", "item_word": "aid package",
        "container": "tomorrow's airlift",
        "resources": [("weight", "kg", (50, 900)), ("volume", "cubic metres", (1, 8)),
                      ("handling time", "minutes", (5, 60)), ("cold storage", "litres", (0, 400))],
        "value_word": "people served", "value_unit": "people", "value_range": (20, 900),
        "count_limit": "the loading team can prepare at most {k} packages",
    }),
    Scenario("imaging", "earth observation", {
        "company": "a satellite operator", "item_prefix": "Request ", "item_word": "imaging request",
        "container": "the next orbit",
        "resources": [("battery energy", "Wh", (20, 300)), ("onboard memory", "GB", (2, 40)),
                      ("slew time", "seconds", (10, 120)), ("downlink time", "seconds", (5, 90))],
        "value_word": "priority score", "value_unit": "points", "value_range": (10, 100),
        "count_limit": "the mission plan allows at most {k} requests per orbit",
    }),
)
# the eval split's own industries, companies, items, resources and units (held out from training)
EVAL_SCENARIOS = (
    Scenario("launch", "space launch services", {
        "company": "a launch provider", "item_prefix": "Payload ", "item_word": "payload",
        "container": "the next rideshare flight",
        "resources": [("mass", "kg", (5, 150)), ("dispenser volume", "litres", (2, 60)),
                      ("power draw", "watts", (0, 80)), ("integration effort", "engineer-days", (1, 15))],
        "value_word": "contract revenue", "value_unit": "thousand euros", "value_range": (50, 900),
        "count_limit": "the dispenser has slots for at most {k} payloads",
    }),
    Scenario("museum", "touring exhibitions", {
        "company": "a touring museum", "item_prefix": "Exhibit ", "item_word": "exhibit",
        "container": "the travelling exhibition",
        "resources": [("crate weight", "kg", (20, 800)), ("wall space", "metres", (1, 14)),
                      ("insurance value", "thousand pounds", (10, 300)), ("mounting time", "hours", (1, 12))],
        "value_word": "visitor appeal", "value_unit": "points", "value_range": (5, 95),
        "count_limit": "the gallery guards can watch at most {k} exhibits",
    }),
    Scenario("cloud", "cloud computing", {
        "company": "a cloud provider", "item_prefix": "Batch ", "item_word": "batch job",
        "container": "tonight's maintenance window",
        "resources": [("CPU time", "core-hours", (4, 200)), ("memory", "GB", (8, 256)),
                      ("network transfer", "TB", (1, 20)), ("licence seats", "seats", (0, 10))],
        "value_word": "business value", "value_unit": "credits", "value_range": (10, 500),
        "count_limit": "the scheduler can admit at most {k} jobs",
    }),
)


class MultiDimKnapsack(ProblemFamily):
    name = "multi_dim_knapsack"
    title = "Multi-dimensional knapsack"
    problem_type = "IP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"pick": "binary"}
    phrasings = (
        # eval-only rewordings of the family's fixed sentences (training keeps its text)
        Phrasing(r"\bAvailable:(?= )", ("Available:",), ("Capacity on hand:",)),
        Phrasing(r"\(counting every copy\)", ("(counting every copy)",), ("(each copy counts)",)),
        Phrasing(r"\bdepend on another one and can only be chosen if it is chosen too\.",
                 ("depend on another one and can only be chosen if it is chosen too.",),
                 ("are tied to another one and may be taken only together with it.",)),
        Phrasing(r"\bdepend on another one:", ("depend on another one:",), ("are tied to another one:",)),
        Phrasing(r"\bcan only be chosen if\b", ("can only be chosen if",), ("is allowed only when",)),
        Phrasing(r"\bis chosen too\b", ("is chosen too",), ("is picked as well",)),
        Phrasing(r"\bcan be taken several times, up to a limit:",
                 ("can be taken several times, up to a limit:",),
                 ("may be selected repeatedly, within a limit:",)),
        Phrasing(r"\bmust be chosen\.", ("must be chosen.",), ("have to be included.",)),
        Phrasing(r"\bis taken a whole number of times, within its limit\.",
                 ("is taken a whole number of times, within its limit.",),
                 ("is selected an integer number of times, never above its limit.",)),
        Phrasing(r"\bHow many times should each be chosen to maximize the total\b",
                 ("How many times should each be chosen to maximize the total",),
                 ("How often ought each to be selected so as to maximise the overall",)),
        Phrasing(r"\bis taken whole or not at all\.", ("is taken whole or not at all.",),
                 ("is either taken in full or left out.",)),
        Phrasing(r"\bWhich should be chosen to maximize the total\b",
                 ("Which should be chosen to maximize the total",),
                 ("Which ones ought to be selected so as to maximise the overall",)),
        Phrasing(r"\bwithout exceeding any limit, and (?=what is that total\?)",
                 ("without exceeding any limit, and ",),
                 ("while respecting every limit, and ",)),
        Phrasing(r"\bis worth\b", ("is worth",), ("brings in",)),
        Phrasing(r"\bhas a value and uses several limited resources\.",
                 ("has a value and uses several limited resources.",),
                 ("carries a value and draws on several scarce resources.",)),
        Phrasing(r"\bchosen is limited\.", ("chosen is limited.",), ("selected has a cap.",)),
        Phrasing(r"(?<=\| )most copies(?= \|)", ("most copies",), ("copy limit",)),
        # data.json fields
        Phrasing(r"\blist of item names\b", ("list of item names",), ("names of the items",)),
        Phrasing(r"\blist of resource names\b", ("list of resource names",), ("names of the resources",)),
        Phrasing(r"\bvalue of each item\b", ("value of each item",), ("worth of an item",)),
        Phrasing(r"(?<=amount of )the resource the item uses\b", ("the resource the item uses",),
                 ("that resource consumed by the item",)),
        Phrasing(r"\bmost items that can be chosen\b", ("most items that can be chosen",),
                 ("upper limit on the number of chosen items",)),
        Phrasing(r"\(only when there is such a limit\)", ("(only when there is such a limit)",),
                 ("(present only if such a limit applies)",)),
        Phrasing(r"\blist of \[item, other\]: the item can only be chosen when the other is\b",
                 ("list of [item, other]: the item can only be chosen when the other is",),
                 ("pairs [item, other] meaning that the item may be picked only together with the other",)),
        Phrasing(r"\(only when some items depend on others\)", ("(only when some items depend on others)",),
                 ("(present only if some items are tied to others)",)),
        Phrasing(r"\bmost times each item can be taken\b", ("most times each item can be taken",),
                 ("copy limit of an item",)),
        Phrasing(r"\(only when items can be taken more than once\)",
                 ("(only when items can be taken more than once)",),
                 ("(present only if items may be picked repeatedly)",)),
        Phrasing(r"\bitems that must be chosen \(may be empty\)",
                 ("items that must be chosen (may be empty)",),
                 ("items that have to be included (possibly none)",)),
    )
    data_fields = {
        "items": "list of item names",
        "resources": "list of resource names",
        "value": "value of each item, keyed by item",
        "usage": "usage[resource][item]: amount of the resource the item uses",
        "capacity": "available amount of each resource, keyed by resource",
        "max_items": "most items that can be chosen (only when there is such a limit)",
        "requires": "list of [item, other]: the item can only be chosen when the other is (only when some items "
                    "depend on others)",
        "max_copies": "most times each item can be taken, keyed by item (only when items can be taken more than "
                      "once)",
        "required": "items that must be chosen (may be empty)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.I = pyo.Set(initialize=data["items"])
model.R = pyo.Set(initialize=data["resources"])
'''
    _PICK = '''\
model.pick = pyo.Var(model.I, domain=pyo.Binary)
'''
    _PICK_COPIES = '''\
model.pick = pyo.Var(model.I, domain=pyo.NonNegativeIntegers, bounds=lambda model, i: (0, data["max_copies"][i]))
'''
    _CAPACITY = '''\

model.obj = pyo.Objective(expr=sum(data["value"][i] * model.pick[i] for i in model.I), sense=pyo.maximize)
model.capacity = pyo.Constraint(
    model.R,
    rule=lambda model, r: sum(data["usage"][r][i] * model.pick[i] for i in model.I) <= data["capacity"][r],
)
'''
    _MAX_ITEMS = '''\
model.max_items = pyo.Constraint(expr=sum(model.pick[i] for i in model.I) <= data["max_items"])
'''
    _REQUIRES = '''\
model.P = pyo.RangeSet(0, len(data["requires"]) - 1)
model.requires = pyo.Constraint(
    model.P, rule=lambda model, p: model.pick[data["requires"][p][0]] <= model.pick[data["requires"][p][1]]
)
'''
    _REQUIRES_COPIES = '''\
# an item is taken only when its prerequisite is taken at least once
model.P = pyo.RangeSet(0, len(data["requires"]) - 1)
model.requires = pyo.Constraint(
    model.P,
    rule=lambda model, p: model.pick[data["requires"][p][0]]
    <= data["max_copies"][data["requires"][p][0]] * model.pick[data["requires"][p][1]],
)
'''
    _TAIL = '''\
model.required = pyo.Constraint(data["required"], rule=lambda model, i: model.pick[i] >= 1)
'''

    model_code = _HEAD + _PICK + _CAPACITY + _MAX_ITEMS + _TAIL  # binary items with an item limit

    def model_code_for(self, data: dict) -> str:
        copies = "max_copies" in data
        code = self._HEAD + (self._PICK_COPIES if copies else self._PICK) + self._CAPACITY
        if "max_items" in data:
            code += self._MAX_ITEMS
        if "requires" in data:
            code += self._REQUIRES_COPIES if copies else self._REQUIRES
        return code + self._TAIL

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("max_items", "requires", "max_copies") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {"pick": "nonnegative_integer" if "max_copies" in data else "binary"}

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_items = size_for(difficulty, 6, 12, 25)
        n_resources = size_for(difficulty, 2, 3, 4)
        items = [f"{words['item_prefix']}{k}" for k in sorted(rng.sample(range(1, 100), n_items))]
        chosen = words["resources"][:n_resources]
        resources = [name for name, _, _ in chosen]
        usage = {name: {i: rng.randint(*bounds) for i in items} for name, _, bounds in chosen}
        value = {i: rng.randint(*words["value_range"]) for i in items}
        capacity = {r: max(1, int(sum(usage[r].values()) * rng.uniform(0.3, 0.55))) for r in resources}
        max_items = max(2, round(n_items * rng.uniform(0.2, 0.4)))
        data = {"items": items, "resources": resources, "value": value, "usage": usage, "capacity": capacity,
                "required": []}
        if rng.random() < 0.5:
            data["max_items"] = max_items
        if rng.random() < 0.5:
            # a later item depends on an earlier one (no cycles); one prerequisite per dependent item
            dependent = sorted(rng.sample(range(1, n_items), max(1, n_items // 4)))
            data["requires"] = [[items[k], items[rng.randrange(k)]] for k in dependent]
        if rng.random() < 0.5:
            data["max_copies"] = {i: rng.randint(2, 4) for i in items}
            if "max_items" in data:
                data["max_items"] = 2 * max_items  # counts copies now
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # mandatory items whose use of one resource already exceeds its capacity
        data = dict(data)
        resource = rng.choice(data["resources"])
        required, used = [], 0
        for i in sorted(data["items"], key=lambda i: -data["usage"][resource][i]):
            required.append(i)
            used += data["usage"][resource][i]
            if used > data["capacity"][resource]:
                break
        if used <= data["capacity"][resource]:
            return None
        data["required"] = required
        if "max_items" in data:
            data["max_items"] = max(data["max_items"], len(required))
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        required = set(data["required"])
        copies = data.get("max_copies", {})
        columns = {i: matrix.add_var(f"pick[{i}]", 1.0 if i in required else 0.0, copies.get(i, 1.0),
                                     cost=data["value"][i], integer=True) for i in data["items"]}
        for r in data["resources"]:
            matrix.add_row({columns[i]: data["usage"][r][i] for i in data["items"]}, upper=data["capacity"][r],
                           name=f"capacity[{r}]")
        if "max_items" in data:
            matrix.add_row({columns[i]: 1.0 for i in data["items"]}, upper=data["max_items"], name="max_items")
        for i, j in data.get("requires", ()):
            matrix.add_row({columns[i]: 1.0, columns[j]: -float(copies.get(i, 1.0))}, upper=0.0,
                           name=f"requires[{i},{j}]")

    def constraint_rows(self, data: dict, x: dict):
        pick = x["pick"]
        for r in data["resources"]:
            yield Row(f"capacity[{r}]", sum(data["usage"][r][i] * pick[i] for i in data["items"]), "<=",
                      data["capacity"][r])
        if "max_items" in data:
            yield Row("max_items", sum(pick[i] for i in data["items"]), "<=", data["max_items"])
        copies = data.get("max_copies", {})
        for i, j in data.get("requires", ()):
            yield Row(f"requires[{i},{j}]", pick[i] - copies.get(i, 1) * pick[j], "<=", 0)
        for i in data["required"]:
            yield Row(f"required[{i}]", pick[i], ">=", 1)
        for i, bound in copies.items():
            yield Row(f"max_copies[{i}]", pick[i], "<=", bound)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["value"][i] * x["pick"][i] for i in data["items"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        units = {name: unit for name, unit, _ in words["resources"]}
        items, resources = data["items"], data["resources"]
        item_word = words["item_word"]
        intro = {
            "container": f"{words['company'].capitalize()} is deciding which of {len(items)} {plural(item_word)} to "
                         f"load into {words['container']}.",
            "relief": f"{words['company'].capitalize()} must choose which of {len(items)} {plural(item_word)} go on "
                      f"{words['container']}.",
            "imaging": f"{words['company'].capitalize()} must pick which of {len(items)} {plural(item_word)} to serve "
                       f"during {words['container']}.",
            "launch": f"{words['company'].capitalize()} has {len(items)} {plural(item_word)} asking for a place on "
                      f"{words['container']} and has to settle which of them fly.",
            "museum": f"{words['company'].capitalize()} is selecting which of its {len(items)} {plural(item_word)} go into "
                      f"{words['container']}.",
            "cloud": f"{words['company'].capitalize()} has {len(items)} {plural(item_word)} queued and has to settle which "
                     f"of them to execute in {words['container']}.",
        }[scenario.key]
        limits = "Available: " + ", ".join(f"{fmt(data['capacity'][r])} {units[r]} of {r}" for r in resources)
        if "max_items" in data:
            limit = words["count_limit"].format(k=fmt(data["max_items"]))
            limits += "; " + (limit + " (counting every copy)" if "max_copies" in data else limit)
        limits += "."
        if "requires" in data:
            limits += (f" Some {plural(item_word)} depend on another one: "
                       + "; ".join(f"{i} can only be chosen if {j} is chosen too" for i, j in data["requires"]) + ".")
        if "max_copies" in data and representation == "text":
            limits += (f" Each {item_word} can be taken several times, up to a limit: "
                       + ", ".join(f"{i} up to {fmt(n)} times" for i, n in data["max_copies"].items()) + ".")
        if data["required"]:
            limits += " " + ", ".join(data["required"]) + " must be chosen."
        if "max_copies" in data:
            question = (f"Each {item_word} is taken a whole number of times, within its limit. How many times should "
                        f"each be chosen to maximize the total {words['value_word']} without exceeding any limit, and "
                        "what is that total?")
        else:
            question = (f"Each {item_word} is taken whole or not at all. Which should be chosen to maximize the total "
                        f"{words['value_word']} without exceeding any limit, and what is that total?")
        if representation == "text":
            listing = " ".join(
                f"{i} is worth {fmt(data['value'][i])} {words['value_unit']} and needs "
                + ", ".join(f"{fmt(data['usage'][r][i])} {units[r]} of {r}" for r in resources) + "."
                for i in items)
            return f"{intro} {listing} {limits} {question}"
        if representation == "table":
            copies = ["most copies"] if "max_copies" in data else []
            table = markdown_table(
                [item_word, f"{words['value_word']} ({words['value_unit']})", *[f"{r} ({units[r]})" for r in resources],
                 *copies],
                [[i, data["value"][i], *[data["usage"][r][i] for r in resources],
                  *([data["max_copies"][i]] if copies else [])] for i in items])
            return f"{intro}\n\n{table}\n\n{limits} {question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            rules = ""
            if "max_items" in data:
                rules += f" The number of {plural(item_word)} chosen is limited."
            if "requires" in data:
                rules += f" Some {plural(item_word)} depend on another one and can only be chosen if it is chosen too."
            return (f"{intro} Every {item_word} has a value and uses several limited resources.{rules} {question}\n\n"
                    f"{describe_data_file(fields)}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        copies = "max_copies" in data
        sets = "items $I$, resources $R$, mandatory items $M \\subseteq I$"
        parameters = "value $v_i$, usage $a_{ri}$, capacity $b_r$"
        rows = ["\\text{s.t.}\\ & \\sum_{i \\in I} a_{ri} x_i \\le b_r && \\forall r \\in R"]
        if "max_items" in data:
            parameters += ", item limit $K$"
            rows.append("& \\sum_{i \\in I} x_i \\le K")
        if copies:
            parameters += ", most copies $u_i$"
        if "requires" in data:
            sets += ", dependencies $D \\subseteq I \\times I$ ($i$ needs $j$)"
            rows.append(("& x_i \\le u_i x_j" if copies else "& x_i \\le x_j") + " && \\forall (i, j) \\in D")
        rows.append("& x_i \\ge 1 && \\forall i \\in M")
        if copies:
            variables = "$x_i \\in \\{0, 1, \\dots, u_i\\}$, how many times item $i$ is taken"
            rows.append("& x_i \\in \\mathbb{Z}, 0 \\le x_i \\le u_i && \\forall i \\in I")
        else:
            variables = "$x_i \\in \\{0, 1\\}$, 1 when item $i$ is chosen"
            rows.append("& x_i \\in \\{0, 1\\} && \\forall i \\in I")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & \\sum_{i \\in I} v_i x_i \\\\\n" + " \\\\\n".join(rows)
            + "\n\\end{aligned}\n$$"
        )


FAMILY = MultiDimKnapsack()
