"""Diet / blending (LP): choose amounts of ingredients that meet lower (and some upper) limits on the
nutrients or components of the blend, within ingredient availability, at least cost.

Structure variants (drawn per instance, recorded by the keys present): a fixed batch size (`batch_size`, an
equality on the total), share limits on some ingredients (`max_share`, a fraction of the whole blend) and
whole units only (`whole_units`: the LP becomes an IP). Each is present or absent, so the program has
eight skeletons; limits are drawn around a reference blend (integral when a variant needs it)."""

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
    Scenario("feed", "animal feed milling", {
        "company": "a cattle-feed mill",
        "foods": ["corn", "soybean meal", "barley", "wheat bran", "alfalfa", "oats", "cottonseed meal",
                  "sorghum", "fish meal", "molasses"],
        "nutrients": [("protein", "kg"), ("fat", "kg"), ("fiber", "kg"), ("calcium", "g"),
                      ("phosphorus", "g"), ("energy", "Mcal")],
        "unit": "tonne", "cost_range": (120, 480), "what": "the daily ration for the herd",
        "content_range": (0, 90),
    }),
    Scenario("hospital", "hospital nutrition", {
        "company": "a hospital kitchen",
        "foods": ["oatmeal", "whole milk", "eggs", "chicken breast", "brown rice", "lentils", "spinach",
                  "apples", "yogurt", "peanut butter"],
        "nutrients": [("calories", "kcal"), ("protein", "g"), ("carbohydrates", "g"), ("vitamin C", "mg"),
                      ("iron", "mg"), ("calcium", "mg")],
        "unit": "serving", "cost_range": (1, 9), "what": "a patient's daily menu",
        "content_range": (0, 60),
    }),
    Scenario("alloy", "metal alloy blending", {
        "company": "a foundry",
        "foods": ["scrap steel", "pig iron", "ferrochrome", "ferromanganese", "nickel briquettes",
                  "stainless scrap", "ferrosilicon", "cast-iron scrap", "molybdenum oxide", "copper scrap"],
        "nutrients": [("chromium", "kg"), ("manganese", "kg"), ("nickel", "kg"), ("silicon", "kg"),
                      ("carbon", "kg"), ("molybdenum", "kg")],
        "unit": "tonne", "cost_range": (200, 900), "what": "the charge of the next furnace heat",
        "content_range": (0, 80),
    }),
)

# the eval split's own industries and names (see ProblemFamily.eval_scenarios)
EVAL_SCENARIOS = (
    Scenario("pet_food", "pet food manufacturing", {
        "company": "a dry dog-food plant",
        "foods": ["chicken meal", "lamb meal", "brewers rice", "pea protein", "beet pulp", "salmon oil",
                  "flaxseed", "potato flakes", "egg powder", "dried kelp"],
        "nutrients": [("crude protein", "kg"), ("crude fat", "kg"), ("crude fibre", "kg"), ("omega-3", "g"),
                      ("zinc", "g"), ("metabolizable energy", "Mcal")],
        "unit": "sack", "cost_range": (20, 90), "what": "a batch of adult maintenance kibble",
        "content_range": (0, 70),
    }),
    Scenario("fertilizer", "fertilizer blending", {
        "company": "a farm supply cooperative",
        "foods": ["urea", "ammonium nitrate", "diammonium phosphate", "triple superphosphate",
                  "muriate of potash", "potassium sulfate", "gypsum", "dolomite lime", "kieserite",
                  "zinc sulfate"],
        "nutrients": [("nitrogen", "kg"), ("phosphate", "kg"), ("potash", "kg"), ("sulfur", "kg"),
                      ("magnesium", "kg"), ("zinc", "g")],
        "unit": "bulk bag", "cost_range": (150, 700), "what": "a custom NPK blend for a potato grower",
        "content_range": (0, 85),
    }),
)


class DietBlending(ProblemFamily):
    name = "diet_blending"
    title = "Diet and blending"
    problem_type = "LP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"amount": "nonnegative"}
    data_fields = {
        "ingredients": "list of ingredient names",
        "components": "list of nutrient or component names",
        "cost": "cost per unit of each ingredient (dollars), keyed by ingredient",
        "content": "content[component][ingredient]: amount of the component in one unit of the ingredient",
        "minimum": "least total amount of each component the blend must contain, keyed by component",
        "maximum": "most total amount of a component the blend may contain (only the listed components)",
        "available": "most units of each ingredient that can be used, keyed by ingredient",
        "batch_size": "total units the blend must add up to exactly (only when the batch size is fixed)",
        "max_share": "most share of the whole blend, as a fraction, keyed by ingredient (only the listed "
                     "ingredients; only when some share is limited)",
        "whole_units": "true: every ingredient is used in whole units (only when fractions are not allowed)",
    }
    # eval-only rewordings of the fixed sentences (training keeps its text); each stops short of the generic
    # words that training writes two ways ("at most", "at least", "the lowest", "are allowed", "amount of")
    phrasings = (
        Phrasing(r"\bof each ingredient should be used to meet every requirement at\b(?= the lowest)",
                 ("of each ingredient should be used to meet every requirement at",),
                 ("of every ingredient ought to go into the blend so that all requirements are met at",)),
        Phrasing(r"\bFractional amounts\b(?= are allowed)", ("Fractional amounts",), ("Non-integer quantities",)),
        Phrasing(r" can be used\.(?= |$)", (" can be used.",), (" are usable; fractions are ruled out.",)),
        Phrasing(r"\bof it are available\.", ("of it are available.",), ("of it can be had.", "of it are in stock.")),
        Phrasing(r"\bThe blend must contain\b", ("The blend must contain",),
                 ("The mix shall hold", "The finished blend has to include")),
        Phrasing(r"\bbut no more than\b", ("but no more than",), ("and not above",)),
        Phrasing(r"\bIngredient data:", ("Ingredient data:",), ("Figures per ingredient:",)),
        Phrasing(r"\bRequirements on the blend:", ("Requirements on the blend:",),
                 ("Limits the blend has to respect:",)),
        Phrasing(r"(?<=\| )ingredient(?= \|)", ("ingredient",), ("input",)),
        Phrasing(r"(?<=\| )cost(?= \(\$/)", ("cost",), ("price",)),
        Phrasing(r"(?<=\| )available(?= \()", ("available",), ("on hand",)),
        Phrasing(r"(?<=\| )component(?= \|)", ("component",), ("nutrient or element",)),
        Phrasing(r"(?<=\| )minimum(?= \|)", ("minimum",), ("lower limit",)),
        Phrasing(r"(?<=\| )maximum(?= \|)", ("maximum",), ("upper limit",)),
        Phrasing(r"(?<=\| )none(?= \|)", ("none",), ("unlimited",)),
        Phrasing(r"\bEach ingredient has a cost and contributes to several components; the blend must reach a "
                 r"minimum of every component, stay under a maximum for some, and use no more of an ingredient "
                 r"than is available\.",
                 ("Each ingredient has a cost and contributes to several components; the blend must reach a "
                  "minimum of every component, stay under a maximum for some, and use no more of an ingredient "
                  "than is available.",),
                 ("Every ingredient comes at a price and supplies a number of components; the blend has to reach "
                  "each component's lower limit, keep some components below an upper limit, and use no "
                  "ingredient beyond its availability.",)),
        Phrasing(r"\bThe blend is made in one batch of a fixed total size\.",
                 ("The blend is made in one batch of a fixed total size.",),
                 ("The whole blend is produced as a single batch whose total size is fixed.",)),
        Phrasing(r"\bThe blend must add up to exactly\b", ("The blend must add up to exactly",),
                 ("The blend shall come to precisely",)),
        Phrasing(r"\bSome ingredients may make up only a limited share of the whole blend\.",
                 ("Some ingredients may make up only a limited share of the whole blend.",),
                 ("A few ingredients are capped as a share of the blend.",)),
        Phrasing(r"\bShare limits of the whole blend apply:", ("Share limits of the whole blend apply:",),
                 ("Caps on an ingredient's share of the blend:",)),
        Phrasing(r"\blist of ingredient names\b", ("list of ingredient names",), ("names of the ingredients",)),
        Phrasing(r"\blist of nutrient or component names\b", ("list of nutrient or component names",),
                 ("names of the nutrients or components",)),
        Phrasing(r"\bcost per unit of each ingredient\b", ("cost per unit of each ingredient",),
                 ("price of one unit of every ingredient",)),
        Phrasing(r"(?<=amount of )the component in one unit of the ingredient\b",
                 ("the component in one unit of the ingredient",),
                 ("that component contained in a single unit of that ingredient",)),
        Phrasing(r"\bleast total\b(?= amount of)", ("least total",), ("lowest overall",)),
        Phrasing(r"(?<=amount of )each component the blend must contain\b", ("each component the blend must contain",),
                 ("every component that the blend has to hold",)),
        Phrasing(r"\bmost total\b(?= amount of)", ("most total",), ("highest overall",)),
        Phrasing(r"(?<=amount of )a component the blend may contain\b", ("a component the blend may contain",),
                 ("a component that the blend can hold",)),
        Phrasing(r"\(only the listed components\)", ("(only the listed components)",),
                 ("(for the listed components alone)",)),
        Phrasing(r"\bmost units of each ingredient that can be used\b",
                 ("most units of each ingredient that can be used",),
                 ("largest number of units of every ingredient on hand",)),
        Phrasing(r"\btotal units the blend must add up to exactly\b", ("total units the blend must add up to exactly",),
                 ("units the whole blend has to total precisely",)),
        Phrasing(r"\bmost share of the whole blend, as a fraction\b", ("most share of the whole blend, as a fraction",),
                 ("largest fraction of the blend an ingredient may form",)),
        Phrasing(r"\(only the listed ingredients; only when some share is limited\)",
                 ("(only the listed ingredients; only when some share is limited)",),
                 ("(for the listed ingredients alone; included only if some share is capped)",)),
        Phrasing(r"\btrue: every ingredient is used in whole units\b",
                 ("true: every ingredient is used in whole units",),
                 ("a flag, true when all ingredients come in whole units",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(included only if",)),
    )
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.F = pyo.Set(initialize=data["ingredients"])
model.N = pyo.Set(initialize=data["components"])
'''
    _AMOUNT = '''\
model.amount = pyo.Var(model.F, domain=pyo.NonNegativeReals)
'''
    _AMOUNT_WHOLE = '''\
model.amount = pyo.Var(model.F, domain=pyo.NonNegativeIntegers)  # whole units only
'''
    _BODY = '''\

model.obj = pyo.Objective(expr=sum(data["cost"][f] * model.amount[f] for f in model.F), sense=pyo.minimize)

def total(model, n):
    return sum(data["content"][n][f] * model.amount[f] for f in model.F)

model.at_least = pyo.Constraint(model.N, rule=lambda model, n: total(model, n) >= data["minimum"][n])
model.at_most = pyo.Constraint(
    list(data["maximum"]), rule=lambda model, n: total(model, n) <= data["maximum"][n]
)
model.availability = pyo.Constraint(
    model.F, rule=lambda model, f: model.amount[f] <= data["available"][f]
)
'''
    _BATCH = '''\
model.batch = pyo.Constraint(expr=sum(model.amount[f] for f in model.F) == data["batch_size"])
'''
    _SHARE = '''\
# a listed ingredient makes up at most its share of the whole blend
model.max_share = pyo.Constraint(
    list(data["max_share"]),
    rule=lambda model, f: model.amount[f] <= data["max_share"][f] * sum(model.amount[g] for g in model.F),
)
'''

    model_code = _HEAD + _AMOUNT + _BODY  # the continuous blend without batch or share rules

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._AMOUNT_WHOLE if "whole_units" in data else self._AMOUNT) + self._BODY
        if "batch_size" in data:
            code += self._BATCH
        if "max_share" in data:
            code += self._SHARE
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("batch_size", "max_share", "whole_units") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {"amount": "nonnegative_integer"} if "whole_units" in data else self.domains

    def problem_type_for(self, data: dict) -> str:
        return "IP" if "whole_units" in data else "LP"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_foods = size_for(difficulty, 4, 6, 10)
        n_nutrients = size_for(difficulty, 3, 4, 6)
        foods = rng.sample(words["foods"], n_foods)
        nutrients = [name for name, _ in rng.sample(words["nutrients"], n_nutrients)]
        content_low, content_high = words["content_range"]
        content = {n: {f: max(0, rng.randint(content_low - 20, content_high)) for f in foods} for n in nutrients}
        for n in nutrients:  # every component must be supplied by some ingredient
            if not any(content[n].values()):
                content[n][rng.choice(foods)] = rng.randint(5, content_high)
        # prices follow nutritional worth (with noise), so no single ingredient is the cheapest source of
        # everything and the optimal blend mixes several
        average = {n: max(1e-9, sum(content[n].values()) / n_foods) for n in nutrients}
        worth = {f: sum(content[n][f] / average[n] for n in nutrients) for f in foods}
        low, high = words["cost_range"]
        top = max(worth.values())
        cost = {f: max(low, round(high * worth[f] / top * rng.uniform(0.6, 1.1))) for f in foods}
        available = {f: rng.randint(8, 40) for f in foods}
        whole, batch, share = (rng.random() < 0.5 for _ in range(3))
        # a reference blend inside availability: its totals shape the limits, so it stays feasible (in whole
        # units when the variant needs them: integral amounts, an integral batch size)
        reference = {f: rng.uniform(0.3, 0.9) * available[f] for f in foods}
        if whole or batch:
            reference = {f: round(amount) for f, amount in reference.items()}
        totals = {n: sum(content[n][f] * reference[f] for f in foods) for n in nutrients}
        minimum = {n: int(totals[n] * rng.uniform(0.6, 0.95)) for n in nutrients}
        capped = rng.sample(nutrients, max(1, n_nutrients // 3))
        maximum = {n: math.ceil(totals[n] * rng.uniform(1.05, 1.4)) for n in nutrients if n in capped}
        data = {"ingredients": foods, "components": nutrients, "cost": cost, "content": content,
                "minimum": minimum, "maximum": maximum, "available": available}
        if batch:
            data["batch_size"] = sum(reference.values())
        if share:
            # the cheapest sources of worth would dominate the blend: cap them at a share the reference meets
            cheapest = sorted(foods, key=lambda f: (cost[f] / max(worth[f], 1e-9), f))[:max(1, n_foods // 4)]
            blend = sum(reference.values())
            data["max_share"] = {f: min(0.95, math.ceil(20 * reference[f] / blend) / 20) for f in cheapest}
        if whole:
            data["whole_units"] = True
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # require more of one component than all available ingredients together contain
        data = dict(data)
        component = rng.choice(data["components"])
        most = sum(data["content"][component][f] * data["available"][f] for f in data["ingredients"])
        data["minimum"] = {**data["minimum"], component: most + rng.randint(1, 50)}
        data["maximum"] = {n: v for n, v in data["maximum"].items() if n != component}
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        whole = "whole_units" in data
        columns = {f: matrix.add_var(f"amount[{f}]", 0.0, data["available"][f], cost=data["cost"][f], integer=whole)
                   for f in data["ingredients"]}
        for n in data["components"]:
            coefficients = {columns[f]: data["content"][n][f] for f in data["ingredients"]}
            matrix.add_row(coefficients, lower=data["minimum"][n], upper=data["maximum"].get(n, math.inf),
                           name=f"limits[{n}]")
        if "batch_size" in data:
            matrix.add_row({c: 1.0 for c in columns.values()}, lower=data["batch_size"], upper=data["batch_size"],
                           name="batch")
        for f, share in data.get("max_share", {}).items():
            # x_f - share * sum_g x_g <= 0
            coefficients = {c: -share for c in columns.values()}
            coefficients[columns[f]] += 1.0
            matrix.add_row(coefficients, upper=0.0, name=f"max_share[{f}]")

    def constraint_rows(self, data: dict, x: dict):
        amount = x["amount"]
        for n in data["components"]:
            total = sum(data["content"][n][f] * amount[f] for f in data["ingredients"])
            yield Row(f"at_least[{n}]", total, ">=", data["minimum"][n])
            if n in data["maximum"]:
                yield Row(f"at_most[{n}]", total, "<=", data["maximum"][n])
        for f in data["ingredients"]:
            yield Row(f"availability[{f}]", amount[f], "<=", data["available"][f])
        blend = sum(amount[f] for f in data["ingredients"])
        if "batch_size" in data:
            yield Row("batch", blend, "==", data["batch_size"])
        for f, share in data.get("max_share", {}).items():
            yield Row(f"max_share[{f}]", amount[f] - share * blend, "<=", 0.0)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["cost"][f] * x["amount"][f] for f in data["ingredients"])

    def _rules(self, data: dict, scenario: Scenario, representation: str) -> str:
        """The optional rules in words, with their numbers outside a "file" statement."""
        unit = scenario.words["unit"]
        rules = []
        if "batch_size" in data:
            rules.append("The blend is made in one batch of a fixed total size." if representation == "file" else
                         f"The blend must add up to exactly {fmt(data['batch_size'])} {plural(unit)} in total.")
        if "max_share" in data:
            if representation == "file":
                rules.append("Some ingredients may make up only a limited share of the whole blend.")
            else:
                caps = ", ".join(f"{f} at most {fmt(round(share * 100, 6))}%"
                                 for f, share in data["max_share"].items())
                rules.append(f"Share limits of the whole blend apply: {caps}.")
        return " ".join(rules)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        units = dict(words["nutrients"])
        foods, nutrients, unit = data["ingredients"], data["components"], words["unit"]
        intro = {
            "feed": f"{words['company'].capitalize()} mixes {join_names(foods)} into {words['what']}.",
            "hospital": f"The dietitian of {words['company']} composes {words['what']} from {join_names(foods)}.",
            "alloy": f"{words['company'].capitalize()} blends {join_names(foods)} into {words['what']}.",
            "pet_food": f"At {words['company']}, the formulation team turns {join_names(foods)} into "
                        f"{words['what']}.",
            "fertilizer": f"{words['company'].capitalize()} prepares {words['what']} by combining "
                          f"{join_names(foods)}.",
        }[scenario.key]
        amounts = (f"Only whole {plural(unit)} can be used." if "whole_units" in data
                   else "Fractional amounts are allowed.")
        question = (f"How many {plural(unit)} of each ingredient should be used to meet every requirement at the "
                    f"lowest total cost, and what is that cost? {amounts}")
        rules = self._rules(data, scenario, representation)
        if representation == "text":
            parts = [intro]
            for f in foods:
                contains = ", ".join(f"{fmt(data['content'][n][f])} {units[n]} of {n}" for n in nutrients)
                parts.append(f"One {unit} of {f} costs ${fmt(data['cost'][f])}, contains {contains}, and at "
                             f"most {fmt(data['available'][f])} {plural(unit)} of it are available.")
            needs = []
            for n in nutrients:
                need = f"at least {fmt(data['minimum'][n])} {units[n]} of {n}"
                if n in data["maximum"]:
                    need += f" but no more than {fmt(data['maximum'][n])} {units[n]}"
                needs.append(need)
            parts.append(f"The blend must contain {'; '.join(needs)}.")
            parts += [rules, question] if rules else [question]
            return " ".join(parts)
        if representation == "table":
            table = markdown_table(
                ["ingredient", f"cost ($/{unit})", *[f"{n} ({units[n]}/{unit})" for n in nutrients],
                 f"available ({plural(unit)})"],
                [[f, data["cost"][f], *[data["content"][n][f] for n in nutrients], data["available"][f]]
                 for f in foods])
            limits = markdown_table(
                ["component", "minimum", "maximum"],
                [[n, f"{fmt(data['minimum'][n])} {units[n]}",
                  f"{fmt(data['maximum'][n])} {units[n]}" if n in data["maximum"] else "none"]
                 for n in nutrients])
            closing = f"{rules} {question}" if rules else question
            return f"{intro} Ingredient data:\n\n{table}\n\nRequirements on the blend:\n\n{limits}\n\n{closing}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            extra = f" {rules}" if rules else ""
            return (f"{intro} Each ingredient has a cost and contributes to several components; the blend must "
                    "reach a minimum of every component, stay under a maximum for some, and use no more of an "
                    f"ingredient than is available.{extra}\n\n{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        whole = "whole_units" in data
        parameters = "cost $c_f$, content $a_{nf}$, minimum $l_n$, maximum $u_n$, availability $s_f$"
        sets = "ingredients $F$, components $N$, capped components $M \\subseteq N$"
        rows = ["\\text{s.t.}\\ & \\sum_{f \\in F} a_{nf} x_f \\ge l_n && \\forall n \\in N",
                "& \\sum_{f \\in F} a_{nf} x_f \\le u_n && \\forall n \\in M",
                "& 0 \\le x_f \\le s_f && \\forall f \\in F"]
        if "batch_size" in data:
            parameters += ", batch size $B$"
            rows.append("& \\sum_{f \\in F} x_f = B")
        if "max_share" in data:
            sets += ", share-limited ingredients $S \\subseteq F$"
            parameters += ", most share $p_f$"
            rows.append("& x_f \\le p_f \\sum_{g \\in F} x_g && \\forall f \\in S")
        if whole:
            rows.append("& x_f \\in \\mathbb{Z} && \\forall f \\in F")
        variables = ("$x_f \\in \\mathbb{Z}_{\\ge 0}$, whole units" if whole else "$x_f \\ge 0$, units")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables} of ingredient $f$ in the blend.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{f \\in F} c_f x_f \\\\\n" + " \\\\\n".join(rows)
            + "\n\\end{aligned}\n$$"
        )


FAMILY = DietBlending()
