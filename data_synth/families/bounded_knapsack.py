"""Bounded knapsack (IP): choose how many copies of each item type to take (whole copies, up to the
number available, at least any committed minimum) to maximize total value within one capacity.

Structure variants (drawn per instance, recorded by the keys present): a second limited resource
(`second_size`, `second_capacity`), a limit on the number of item types used (`max_types`) and a fixed cost
for using an item type at all (`type_cost`); the last two add a binary "type used" variable linked to the
copies. Each is present or absent, so the program has eight skeletons."""

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
    plural,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("truck", "wholesale distribution", {
        "company": "a wholesale distributor",
        "items": ["canned tomatoes", "olive oil", "rice sacks", "pasta cases", "coffee beans", "sugar bags",
                  "flour bags", "bottled water", "tea boxes", "cereal cases", "honey jars", "soy sauce"],
        "copy": "case", "capacity_word": "the truck's payload", "unit": "kg", "value_word": "profit",
        "value_unit": "dollars", "weight_range": (8, 45), "value_range": (6, 60),
        "second": ("cargo space", "litres", (10, 80)), "type_word": "handling and paperwork for a product",
    }),
    Scenario("shelf", "retail merchandising", {
        "company": "a supermarket",
        "items": ["yogurt", "cheese", "butter", "milk", "cream", "kefir", "pudding", "juice", "hummus",
                  "tofu", "salsa", "pesto"],
        "copy": "facing", "capacity_word": "one chilled shelf", "unit": "cm of shelf width",
        "value_word": "expected weekly profit", "value_unit": "dollars", "weight_range": (6, 30),
        "value_range": (4, 45), "second": ("shelf load", "kg", (1, 12)),
        "type_word": "a new price label and planogram slot for a product",
    }),
    Scenario("cloud", "cloud capacity planning", {
        "company": "a hosting provider",
        "items": ["web small", "web large", "db standard", "db memory", "cache node", "batch worker",
                  "gpu inference", "search node", "queue broker", "analytics node", "mail relay", "vpn gateway"],
        "copy": "instance", "capacity_word": "a new server rack", "unit": "GB of memory",
        "value_word": "monthly revenue", "value_unit": "dollars", "weight_range": (2, 64),
        "value_range": (15, 400), "second": ("CPU", "cores", (1, 16)),
        "type_word": "an image build and monitoring set-up for an instance type",
    }),
)

# eval only: other industries, companies, item types, capacities, units and resources than any training
# scenario
EVAL_SCENARIOS = (
    Scenario("airfreight", "air cargo", {
        "company": "an air-cargo charter airline",
        "items": ["engine spares", "medical kits", "tyre sets", "camera gear", "server blades", "fresh flowers",
                  "vaccine coolers", "drone parts", "textile bolts", "solar inverters", "wine cartons",
                  "machine tools"],
        "copy": "crate", "capacity_word": "the freighter's main deck", "unit": "kilograms",
        "value_word": "freight margin", "value_unit": "euros", "weight_range": (20, 120),
        "value_range": (30, 300), "second": ("deck volume", "cubic metres", (1, 6)),
        "type_word": "customs clearance for a commodity",
    }),
    Scenario("exhibition", "trade fairs", {
        "company": "a trade-fair organiser",
        "items": ["shell-scheme booth", "corner booth", "island stand", "peninsula stand", "kiosk", "demo pod",
                  "meeting cabin", "startup table", "lounge stand", "double-deck stand", "poster wall",
                  "catering counter"],
        "copy": "stand", "capacity_word": "the east exhibition hall", "unit": "square metres of floor",
        "value_word": "rental income", "value_unit": "pounds", "weight_range": (6, 60),
        "value_range": (200, 2400), "second": ("power supply", "kW", (1, 10)),
        "type_word": "a design approval and insurance check for a stand format",
    }),
    Scenario("greenhouse", "market gardening", {
        "company": "a market gardener",
        "items": ["basil", "lettuce", "rocket", "spinach", "kale", "chard", "radish", "coriander", "parsley",
                  "microgreens", "pak choi", "mint"],
        "copy": "tray", "capacity_word": "the heated greenhouse bench", "unit": "square decimetres",
        "value_word": "expected market takings", "value_unit": "zloty", "weight_range": (4, 25),
        "value_range": (3, 40), "second": ("irrigation water", "litres a day", (2, 20)),
        "type_word": "buying certified seed and labels for a crop",
    }),
)


class BoundedKnapsack(ProblemFamily):
    name = "bounded_knapsack"
    title = "Bounded knapsack"
    problem_type = "IP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"copies": "nonnegative_integer"}
    # eval-only wordings of the fixed sentences ("at least", "at most", "needs" and "what is that" are left to
    # the generic rules, whose training wordings vary)
    phrasings = (
        Phrasing(r"\bis filling\b", ("is filling",), ("is packing",)),
        Phrasing(r"\bof several types\.", ("of several types.",), ("of various types.",)),
        Phrasing(r", brings\b", (", brings",), (", returns",)),
        Phrasing(r"\bare available\b", ("are available",), ("are on offer",)),
        Phrasing(r"\bat all costs\b", ("at all costs",), ("at all carries a charge of",)),
        Phrasing(r"\bA second resource,", ("A second resource,",), ("One more resource,",)),
        Phrasing(r"\bis limited too\b", ("is limited too",), ("is scarce as well",)),
        Phrasing(r"\bOnly a limited number of different types may be used\.",
                 ("Only a limited number of different types may be used.",),
                 ("The count of distinct types in use is capped.",)),
        Phrasing(r"\bCopies of\b(?= at most)", ("Copies of",), ("Units from",)),
        Phrasing(r"\bdifferent types may be taken\.", ("different types may be taken.",),
                 ("distinct types can be included.",)),
        Phrasing(r"\bUsing a type at all has a fixed cost\b", ("Using a type at all has a fixed cost",),
                 ("Any type that is used at all carries a fixed charge",)),
        Phrasing(r"\bpaid once if any copy of it is taken and subtracted from the\b",
                 ("paid once if any copy of it is taken and subtracted from the",),
                 ("charged once as soon as one copy of it is included and deducted from the",)),
        Phrasing(r"\bare already promised\.", ("are already promised.",), ("have already been committed.",)),
        Phrasing(r"\bof each type should be chosen to maximize\b", ("of each type should be chosen to maximize",),
                 ("of every type ought to be selected to maximise",)),
        Phrasing(r"\bnet of the fixed costs\b", ("net of the fixed costs",), ("after the fixed charges",)),
        # table headers and the data.json field descriptions
        Phrasing(r"\bfixed cost of using the type\b", ("fixed cost of using the type",),
                 ("fixed charge for a used type",)),
        Phrasing(r"\bcapacity used by one copy of each item type\b", ("capacity used by one copy of each item type",),
                 ("capacity one copy of an item type takes up",)),
        Phrasing(r"\bvalue of one copy of each item type\b", ("value of one copy of each item type",),
                 ("worth of a single copy of an item type",)),
        Phrasing(r"\bmost copies of each item type\b", ("most copies of each item type",),
                 ("largest number of copies of an item type",)),
        Phrasing(r"\bcommitted least copies of some item types\b", ("committed least copies of some item types",),
                 ("promised minimum copies for some item types",)),
        Phrasing(r"\(may be empty\)", ("(may be empty)",), ("(possibly empty)",)),
        Phrasing(r"\btotal capacity\b", ("total capacity",), ("capacity in all",)),
        Phrasing(r"\buse of the second limited resource by one copy of each item type\b",
                 ("use of the second limited resource by one copy of each item type",),
                 ("second limited resource taken by one copy of an item type",)),
        Phrasing(r"\bmost item types of which any copies are taken\b", ("most item types of which any copies are taken",),
                 ("largest number of item types that may be used",)),
        Phrasing(r"\bfixed cost of taking any copies of an item type\b",
                 ("fixed cost of taking any copies of an item type",),
                 ("fixed charge for including an item type at all",)),
        Phrasing(r"\(only when there is a second resource\)", ("(only when there is a second resource)",),
                 ("(present if a second resource is limited)",)),
        Phrasing(r"\(only when there is such a limit\)", ("(only when there is such a limit)",),
                 ("(present if the types are capped)",)),
        Phrasing(r"\(only when using a type costs something\)", ("(only when using a type costs something)",),
                 ("(present if using a type is charged)",)),
    )
    data_fields = {
        "items": "list of item types",
        "size": "capacity used by one copy of each item type, keyed by item",
        "value": "value of one copy of each item type, keyed by item",
        "available": "most copies of each item type, keyed by item",
        "minimum": "committed least copies of some item types, keyed by item (may be empty)",
        "capacity": "total capacity",
        "second_size": "use of the second limited resource by one copy of each item type, keyed by item (only "
                       "when there is a second resource)",
        "second_capacity": "available amount of the second resource (only when there is a second resource)",
        "max_types": "most item types of which any copies are taken (only when there is such a limit)",
        "type_cost": "fixed cost of taking any copies of an item type, keyed by item (only when using a type "
                     "costs something)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.I = pyo.Set(initialize=data["items"])
model.copies = pyo.Var(model.I, domain=pyo.NonNegativeIntegers)
'''
    _USE = '''\
model.use = pyo.Var(model.I, domain=pyo.Binary)  # 1 when any copy of the type is taken
'''
    _OBJECTIVE = '''\

model.obj = pyo.Objective(expr=sum(data["value"][i] * model.copies[i] for i in model.I), sense=pyo.maximize)
'''
    _OBJECTIVE_TYPE_COST = '''\

model.obj = pyo.Objective(
    expr=sum(data["value"][i] * model.copies[i] - data["type_cost"][i] * model.use[i] for i in model.I),
    sense=pyo.maximize,
)
'''
    _CAPACITY = '''\
model.capacity = pyo.Constraint(expr=sum(data["size"][i] * model.copies[i] for i in model.I) <= data["capacity"])
'''
    _SECOND = '''\
model.second_capacity = pyo.Constraint(
    expr=sum(data["second_size"][i] * model.copies[i] for i in model.I) <= data["second_capacity"]
)
'''
    _AVAILABLE = '''\
model.available = pyo.Constraint(model.I, rule=lambda model, i: model.copies[i] <= data["available"][i])
'''
    _AVAILABLE_USE = '''\
# copies of a type only when it is used, and then at most the number available
model.available = pyo.Constraint(
    model.I, rule=lambda model, i: model.copies[i] <= data["available"][i] * model.use[i]
)
'''
    _MAX_TYPES = '''\
model.max_types = pyo.Constraint(expr=sum(model.use[i] for i in model.I) <= data["max_types"])
'''
    _TAIL = '''\
model.minimum = pyo.Constraint(list(data["minimum"]), rule=lambda model, i: model.copies[i] >= data["minimum"][i])
'''

    model_code = _HEAD + _OBJECTIVE + _CAPACITY + _AVAILABLE + _TAIL  # one resource, no type-use variable

    @staticmethod
    def _uses_types(data: dict) -> bool:
        return "max_types" in data or "type_cost" in data

    def model_code_for(self, data: dict) -> str:
        uses = self._uses_types(data)
        code = self._HEAD + (self._USE if uses else "")
        code += self._OBJECTIVE_TYPE_COST if "type_cost" in data else self._OBJECTIVE
        code += self._CAPACITY
        if "second_capacity" in data:
            code += self._SECOND
        code += self._AVAILABLE_USE if uses else self._AVAILABLE
        if "max_types" in data:
            code += self._MAX_TYPES
        return code + self._TAIL

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("second_capacity", "max_types", "type_cost") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        if self._uses_types(data):
            return {"copies": "nonnegative_integer", "use": "binary"}
        return self.domains

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_items = size_for(difficulty, 4, 7, 12)
        items = rng.sample(words["items"], n_items)
        size = {i: rng.randint(*words["weight_range"]) for i in items}
        value = {i: rng.randint(*words["value_range"]) for i in items}
        available = {i: rng.randint(2, 15) for i in items}
        capacity = int(sum(size[i] * available[i] for i in items) * rng.uniform(0.3, 0.6))
        minimum = {}
        if rng.random() < 0.4:
            item = rng.choice(items)
            minimum[item] = min(available[item], rng.randint(1, 3))
        # the commitments always fit (so every variant stays feasible)
        capacity = max(capacity, sum(size[i] * n for i, n in minimum.items()))
        data = {"items": items, "size": size, "value": value, "available": available, "minimum": minimum,
                "capacity": capacity}
        if rng.random() < 0.5:
            second = {i: rng.randint(*words["second"][2]) for i in items}
            limit = int(sum(second[i] * available[i] for i in items) * rng.uniform(0.25, 0.5))
            data["second_size"] = second
            data["second_capacity"] = max(limit, sum(second[i] * n for i, n in minimum.items()))
        if rng.random() < 0.5:
            data["max_types"] = max(len(minimum) + 1, round(n_items * rng.uniform(0.3, 0.6)))
        if rng.random() < 0.5:
            # about what one to four copies earn, so using a type pays only when enough copies are taken
            data["type_cost"] = {i: max(1, round(value[i] * rng.uniform(1.0, 4.0))) for i in items}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # commitments to the bulkiest item types that overflow the capacity
        data = dict(data)
        minimum, used = {}, 0
        for i in sorted(data["items"], key=lambda i: -data["size"][i] * data["available"][i]):
            minimum[i] = data["available"][i]
            used += data["size"][i] * data["available"][i]
            if used > data["capacity"]:
                break
        data["minimum"] = minimum
        if "max_types" in data:  # the committed types may all be used: keep the capacity the cause
            data["max_types"] = max(data["max_types"], len(minimum))
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        items = data["items"]
        columns = {i: matrix.add_var(f"copies[{i}]", data["minimum"].get(i, 0), data["available"][i],
                                     cost=data["value"][i], integer=True) for i in items}
        matrix.add_row({columns[i]: data["size"][i] for i in items}, upper=data["capacity"], name="capacity")
        if "second_capacity" in data:
            matrix.add_row({columns[i]: data["second_size"][i] for i in items}, upper=data["second_capacity"],
                           name="second_capacity")
        if self._uses_types(data):
            type_cost = data.get("type_cost", {})
            use = {i: matrix.add_var(f"use[{i}]", 0.0, 1.0, cost=-type_cost.get(i, 0), integer=True) for i in items}
            for i in items:
                matrix.add_row({columns[i]: 1.0, use[i]: -float(data["available"][i])}, upper=0.0,
                               name=f"available[{i}]")
            if "max_types" in data:
                matrix.add_row({use[i]: 1.0 for i in items}, upper=data["max_types"], name="max_types")

    def constraint_rows(self, data: dict, x: dict):
        copies, items = x["copies"], data["items"]
        yield Row("capacity", sum(data["size"][i] * copies[i] for i in items), "<=", data["capacity"])
        if "second_capacity" in data:
            yield Row("second_capacity", sum(data["second_size"][i] * copies[i] for i in items), "<=",
                      data["second_capacity"])
        use = x.get("use") if self._uses_types(data) else None
        for i in items:
            if use is None:
                yield Row(f"available[{i}]", copies[i], "<=", data["available"][i])
            else:
                yield Row(f"available[{i}]", copies[i] - data["available"][i] * use[i], "<=", 0)
        if "max_types" in data:
            yield Row("max_types", sum(use[i] for i in items), "<=", data["max_types"])
        for i, least in data["minimum"].items():
            yield Row(f"minimum[{i}]", copies[i], ">=", least)

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["value"][i] * x["copies"][i] for i in data["items"])
        if "type_cost" in data:
            total -= sum(data["type_cost"][i] * x["use"][i] for i in data["items"])
        return total

    def _rules(self, data: dict, words: dict, representation: str) -> str:
        """The optional rules of the instance in words, with their numbers outside a "file" statement."""
        resource, unit, _ = words["second"]
        rules = []
        if "second_capacity" in data:
            if representation == "file":
                rules.append(f"A second resource, {resource}, is limited too.")
            else:
                rules.append(f"The {resource} is limited too: at most {fmt(data['second_capacity'])} {unit} in all.")
        if "max_types" in data:
            if representation == "file":
                rules.append("Only a limited number of different types may be used.")
            else:
                rules.append(f"Copies of at most {fmt(data['max_types'])} different types may be taken.")
        if "type_cost" in data:
            rules.append(f"Using a type at all has a fixed cost ({words['type_word']}), paid once if any copy of "
                         f"it is taken and subtracted from the {words['value_word']}.")
        return " ".join(rules)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        items, copy, unit = data["items"], words["copy"], words["unit"]
        resource, second_unit, _ = words["second"]
        intro = {
            "truck": f"{words['company'].capitalize()} is filling {words['capacity_word']} "
                     f"({fmt(data['capacity'])} {unit}) with {plural(copy)} of {join_names(items)}.",
            "shelf": f"{words['company'].capitalize()} is planning {words['capacity_word']} "
                     f"({fmt(data['capacity'])} {unit}) for {join_names(items)}.",
            "cloud": f"{words['company'].capitalize()} is filling {words['capacity_word']} "
                     f"({fmt(data['capacity'])} {unit}) with {plural(copy)} of the types {join_names(items)}.",
            "airfreight": f"{words['company'].capitalize()} is loading {words['capacity_word']} "
                          f"({fmt(data['capacity'])} {unit}) with {plural(copy)} of {join_names(items)}.",
            "exhibition": f"{words['company'].capitalize()} is letting out {words['capacity_word']} "
                          f"({fmt(data['capacity'])} {unit}) as {plural(copy)} of the formats {join_names(items)}.",
            "greenhouse": f"{words['company'].capitalize()} is planting {words['capacity_word']} "
                          f"({fmt(data['capacity'])} {unit}) with {plural(copy)} of {join_names(items)}.",
        }[scenario.key]
        commitments = " ".join(f"At least {fmt(v)} {plural(copy)} of {i} are already promised." for i, v in
                               data["minimum"].items())
        rules = self._rules(data, words, representation)
        net = " net of the fixed costs" if "type_cost" in data else ""
        question = (f"How many whole {plural(copy)} of each type should be chosen to maximize the total "
                    f"{words['value_word']}{net}, and what is that total?")
        if representation == "text":
            def listing_of(i: str) -> str:
                text = (f"one {copy} of {i} takes {fmt(data['size'][i])} {unit}, brings "
                        f"{fmt(data['value'][i])} {words['value_unit']}, and up to "
                        f"{fmt(data['available'][i])} are available")
                if "second_capacity" in data:
                    text += f"; it needs {fmt(data['second_size'][i])} {second_unit} of {resource}"
                if "type_cost" in data:
                    text += f"; using {i} at all costs {fmt(data['type_cost'][i])} {words['value_unit']}"
                return text

            listing = "; ".join(listing_of(i) for i in items)
            return " ".join(part for part in (intro, f"{listing[0].upper()}{listing[1:]}.", rules, commitments,
                                              question) if part)
        if representation == "table":
            header = ["type", f"size ({unit} per {copy})",
                      f"{words['value_word']} ({words['value_unit']} per {copy})", f"available {plural(copy)}"]
            if "second_capacity" in data:
                header.append(f"{resource} ({second_unit} per {copy})")
            if "type_cost" in data:
                header.append(f"fixed cost of using the type ({words['value_unit']})")
            rows = []
            for i in items:
                row = [i, data["size"][i], data["value"][i], data["available"][i]]
                if "second_capacity" in data:
                    row.append(data["second_size"][i])
                if "type_cost" in data:
                    row.append(data["type_cost"][i])
                rows.append(row)
            table = markdown_table(header, rows)
            closing = " ".join(part for part in (rules, commitments, question) if part)
            return f"{intro}\n\n{table}\n\n{closing}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            opening = " ".join(part for part in (
                f"{words['company'].capitalize()} is filling {words['capacity_word']} with {plural(copy)} of several "
                "types.", rules, question) if part)
            return f"{opening}\n\n{describe_data_file(fields)}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        uses = self._uses_types(data)
        parameters = "size $s_i$, value $v_i$, availability $u_i$, committed minimum $l_i$ (0 when none), capacity $C$"
        objective = "\\sum_{i \\in I} v_i x_i"
        rows = ["\\text{s.t.}\\ & \\sum_{i \\in I} s_i x_i \\le C"]
        if "second_capacity" in data:
            parameters += ", second-resource use $r_i$ and limit $R$"
            rows.append("& \\sum_{i \\in I} r_i x_i \\le R")
        rows.append(f"& l_i \\le x_i \\le u_i{' y_i' if uses else ''} && \\forall i \\in I")
        if "max_types" in data:
            parameters += ", type limit $K$"
            rows.append("& \\sum_{i \\in I} y_i \\le K")
        if "type_cost" in data:
            parameters += ", fixed cost $f_i$ of using type $i$"
            objective += " - \\sum_{i \\in I} f_i y_i"
        rows.append("& x_i \\in \\mathbb{Z}_{\\ge 0} && \\forall i \\in I")
        variables = "$x_i \\in \\mathbb{Z}_{\\ge 0}$, copies of type $i$"
        if uses:
            variables += "; $y_i \\in \\{0, 1\\}$, 1 when type $i$ is used"
            rows.append("& y_i \\in \\{0, 1\\} && \\forall i \\in I")
        return (
            "**Sets**: item types $I$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\max\\ & {objective} \\\\\n" + " \\\\\n".join(rows)
            + "\n\\end{aligned}\n$$"
        )


FAMILY = BoundedKnapsack()
