"""Diet / blending (LP): choose amounts of ingredients that meet lower (and some upper) limits on the
nutrients or components of the blend, within ingredient availability, at least cost."""

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
    size_for,
)

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


class DietBlending(ProblemFamily):
    name = "diet_blending"
    title = "Diet and blending"
    problem_type = "LP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"amount": "nonnegative"}
    data_fields = {
        "ingredients": "list of ingredient names",
        "components": "list of nutrient or component names",
        "cost": "cost per unit of each ingredient (dollars), keyed by ingredient",
        "content": "content[component][ingredient]: amount of the component in one unit of the ingredient",
        "minimum": "least total amount of each component the blend must contain, keyed by component",
        "maximum": "most total amount of a component the blend may contain (only the listed components)",
        "available": "most units of each ingredient that can be used, keyed by ingredient",
    }
    model_code = '''\
model = pyo.ConcreteModel()
model.F = pyo.Set(initialize=data["ingredients"])
model.N = pyo.Set(initialize=data["components"])
model.amount = pyo.Var(model.F, domain=pyo.NonNegativeReals)

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
        # a reference blend inside availability: its totals shape the limits, so it stays feasible
        reference = {f: rng.uniform(0.3, 0.9) * available[f] for f in foods}
        totals = {n: sum(content[n][f] * reference[f] for f in foods) for n in nutrients}
        minimum = {n: int(totals[n] * rng.uniform(0.6, 0.95)) for n in nutrients}
        capped = rng.sample(nutrients, max(1, n_nutrients // 3))
        maximum = {n: math.ceil(totals[n] * rng.uniform(1.05, 1.4)) for n in nutrients if n in capped}
        return {"ingredients": foods, "components": nutrients, "cost": cost, "content": content,
                "minimum": minimum, "maximum": maximum, "available": available}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # require more of one component than all available ingredients together contain
        data = dict(data)
        component = rng.choice(data["components"])
        most = sum(data["content"][component][f] * data["available"][f] for f in data["ingredients"])
        data["minimum"] = {**data["minimum"], component: most + rng.randint(1, 50)}
        data["maximum"] = {n: v for n, v in data["maximum"].items() if n != component}
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        columns = {f: matrix.add_var(f"amount[{f}]", 0.0, data["available"][f], cost=data["cost"][f])
                   for f in data["ingredients"]}
        for n in data["components"]:
            coefficients = {columns[f]: data["content"][n][f] for f in data["ingredients"]}
            matrix.add_row(coefficients, lower=data["minimum"][n], upper=data["maximum"].get(n, math.inf),
                           name=f"limits[{n}]")

    def constraint_rows(self, data: dict, x: dict):
        amount = x["amount"]
        for n in data["components"]:
            total = sum(data["content"][n][f] * amount[f] for f in data["ingredients"])
            yield Row(f"at_least[{n}]", total, ">=", data["minimum"][n])
            if n in data["maximum"]:
                yield Row(f"at_most[{n}]", total, "<=", data["maximum"][n])
        for f in data["ingredients"]:
            yield Row(f"availability[{f}]", amount[f], "<=", data["available"][f])

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["cost"][f] * x["amount"][f] for f in data["ingredients"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        units = dict(words["nutrients"])
        foods, nutrients, unit = data["ingredients"], data["components"], words["unit"]
        intro = {
            "feed": f"{words['company'].capitalize()} mixes {join_names(foods)} into {words['what']}.",
            "hospital": f"The dietitian of {words['company']} composes {words['what']} from {join_names(foods)}.",
            "alloy": f"{words['company'].capitalize()} blends {join_names(foods)} into {words['what']}.",
        }[scenario.key]
        question = (f"How many {unit}s of each ingredient should be used to meet every requirement at the "
                    "lowest total cost, and what is that cost? Fractional amounts are allowed.")
        if representation == "text":
            parts = [intro]
            for f in foods:
                contains = ", ".join(f"{fmt(data['content'][n][f])} {units[n]} of {n}" for n in nutrients)
                parts.append(f"One {unit} of {f} costs ${fmt(data['cost'][f])}, contains {contains}, and at "
                             f"most {fmt(data['available'][f])} {unit}s of it are available.")
            needs = []
            for n in nutrients:
                need = f"at least {fmt(data['minimum'][n])} {units[n]} of {n}"
                if n in data["maximum"]:
                    need += f" but no more than {fmt(data['maximum'][n])} {units[n]}"
                needs.append(need)
            parts.append(f"The blend must contain {'; '.join(needs)}.")
            parts.append(question)
            return " ".join(parts)
        if representation == "table":
            table = markdown_table(
                ["ingredient", f"cost ($/{unit})", *[f"{n} ({units[n]}/{unit})" for n in nutrients],
                 f"available ({unit}s)"],
                [[f, data["cost"][f], *[data["content"][n][f] for n in nutrients], data["available"][f]]
                 for f in foods])
            limits = markdown_table(
                ["component", "minimum", "maximum"],
                [[n, f"{fmt(data['minimum'][n])} {units[n]}",
                  f"{fmt(data['maximum'][n])} {units[n]}" if n in data["maximum"] else "none"]
                 for n in nutrients])
            return f"{intro} Ingredient data:\n\n{table}\n\nRequirements on the blend:\n\n{limits}\n\n{question}"
        if representation == "file":
            return (f"{intro} Each ingredient has a cost and contributes to several components; the blend must "
                    "reach a minimum of every component, stay under a maximum for some, and use no more of an "
                    f"ingredient than is available.\n\n{describe_data_file(self.data_fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: ingredients $F$, components $N$, capped components $M \\subseteq N$.\n\n"
            "**Parameters**: cost $c_f$, content $a_{nf}$, minimum $l_n$, maximum $u_n$, availability $s_f$.\n\n"
            "**Variables**: $x_f \\ge 0$, units of ingredient $f$ in the blend.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{f \\in F} c_f x_f \\\\\n"
            "\\text{s.t.}\\ & \\sum_{f \\in F} a_{nf} x_f \\ge l_n && \\forall n \\in N \\\\\n"
            "& \\sum_{f \\in F} a_{nf} x_f \\le u_n && \\forall n \\in M \\\\\n"
            "& 0 \\le x_f \\le s_f && \\forall f \\in F\n\\end{aligned}\n$$"
        )


FAMILY = DietBlending()
