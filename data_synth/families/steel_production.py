"""Steel production blending (LP, or MILP when materials come in whole lots): charge the furnace with raw
materials (scrap grades, pig iron, ferro-alloys) of known chemistry so that every steel grade ordered
meets its minimum and maximum content of each element, within the stock of each material, at the least
material cost.

Structure variants (drawn per instance, recorded by the keys present): a most share of some materials
(ferro-alloys, pig iron) in any grade's charge (`max_share`), a recycled
share of every grade's charge that must come from scrap (`recycled` with `recycled_share`), and
materials bought in whole lots (`lot_size`: integer lot counts carry the cost), each present or absent:
eight program skeletons."""

from __future__ import annotations

import math
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

SCENARIOS = (
    Scenario("minimill", "electric-arc steelmaking", {
        "company": "a steel minimill",
        "materials": ["heavy scrap", "shredded scrap", "busheling scrap", "pig iron", "DRI pellets",
                      "ferro-manganese", "ferro-silicon"],
        "scrap": ["heavy scrap", "shredded scrap", "busheling scrap"],
        "elements": ["carbon", "manganese", "silicon", "chromium"],
        "grades": ["rebar B500", "wire rod SAE1008", "structural S355", "forging C45", "spring 55Si7"],
        "money": "dollars",
    }),
    Scenario("foundry", "iron and steel castings", {
        "company": "a steel foundry",
        "materials": ["returns", "plate scrap", "turnings", "pig iron", "ferro-chrome", "ferro-manganese",
                      "nickel cathode"],
        "scrap": ["returns", "plate scrap", "turnings"],
        "elements": ["carbon", "chromium", "manganese", "nickel"],
        "grades": ["cast WCB", "cast CF8", "cast LCC", "cast CA15", "cast WC6"],
        "money": "euros",
    }),
    Scenario("alloy", "special alloy steels", {
        "company": "a special-steel works",
        "materials": ["stainless scrap", "carbon scrap", "alloy returns", "pig iron", "ferro-nickel",
                      "ferro-molybdenum", "ferro-chrome"],
        "scrap": ["stainless scrap", "carbon scrap", "alloy returns"],
        "elements": ["carbon", "nickel", "chromium", "molybdenum"],
        "grades": ["grade 304", "grade 316", "grade 410", "grade 430", "grade 4140"],
        "money": "dollars",
    }),
)

# eval only: other works, raw materials, element lists and grades than any training scenario
EVAL_SCENARIOS = (
    Scenario("railsteel", "rail and wheel steels", {
        "company": "a rail-steel mill",
        "materials": ["rail scrap", "wheel scrap", "crop ends", "hot briquetted iron", "sponge iron",
                      "silico-manganese", "ferro-vanadium", "ferro-silicon lumps"],
        "scrap": ["rail scrap", "wheel scrap", "crop ends"],
        "elements": ["manganese", "carbon", "vanadium", "silicon"],
        "grades": ["rail R260", "rail R350HT", "wheel ER7", "axle EA1N", "crane rail A120"],
        "money": "pounds",
    }),
    Scenario("toolsteel", "tool and die steels", {
        "company": "a tool-steel maker",
        "materials": ["die block scrap", "cutter returns", "bar crops", "cold pig iron", "ferro-tungsten",
                      "ferro-vanadium", "moly oxide", "ferro-chrome lumps", "cobalt briquettes"],
        "scrap": ["die block scrap", "cutter returns", "bar crops"],
        "elements": ["tungsten", "carbon", "vanadium", "molybdenum"],
        "grades": ["tool H13", "tool D2", "tool M2", "tool O1", "tool A2"],
        "money": "yen",
    }),
    Scenario("linepipe", "pipeline steels", {
        "company": "a line-pipe plate mill",
        "materials": ["plate trimmings", "coil cuttings", "skull scrap", "granulated iron", "ferro-niobium",
                      "ferro-titanium", "aluminium shot", "ferro-boron"],
        "scrap": ["plate trimmings", "coil cuttings", "skull scrap"],
        "elements": ["niobium", "carbon", "titanium", "aluminium"],
        "grades": ["pipe X52", "pipe X65", "pipe X70", "pipe L360", "casing J55"],
        "money": "won",
    }),
)


class SteelProduction(ProblemFamily):
    name = "steel_production"
    title = "Steel production blending"
    problem_type = "LP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"use": "nonnegative"}
    industrial = True
    phrasings = (
        Phrasing(r"\bmust charge its furnace for\b", ("must charge its furnace for", "is planning furnace charges for"),
                 ("decides the furnace charges that will make",)),
        Phrasing(r"\bChemistry of the raw materials \(percent by weight\):",
                 ("Chemistry of the raw materials (percent by weight):",),
                 ("Analysis of each raw material, in weight percent:",)),
        Phrasing(r"\bGrade specifications \(percent by weight\):", ("Grade specifications (percent by weight):",),
                 ("Composition limits of the grades, in weight percent:",)),
        Phrasing(r"\bThe content of a grade is the weighted average of its materials\.",
                 ("The content of a grade is the weighted average of its materials.",),
                 ("Element contents blend in proportion to the tonnes charged.",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text); rules stop
        # before generic phrases with several training wordings ("at least", "what is that", "needs")
        Phrasing(r"\bNo grade's charge may be more than this share of these materials:",
                 ("No grade's charge may be more than this share of these materials:",),
                 ("For the materials below, their share of any grade's charge is capped:",)),
        Phrasing(r"(?<=% )of every grade's charge must be scrap\b", ("of every grade's charge must be scrap",),
                 ("of each grade's charge has to come from scrap",)),
        Phrasing(r"\bMaterials are bought in whole lots(?=[.,])", ("Materials are bought in whole lots",),
                 ("Purchases come in whole lots only",)),
        Phrasing(r", each lot paid at the cost per tonne times its size:",
                 (", each lot paid at the cost per tonne times its size:",),
                 (", and a lot is paid at its size times the cost per tonne:",)),
        Phrasing(r"\bSome materials may make up only a limited share of any charge\.",
                 ("Some materials may make up only a limited share of any charge.",),
                 ("A few materials are capped at a limited share of every charge.",)),
        Phrasing(r"\bA least share of every grade's charge must be scrap\.",
                 ("A least share of every grade's charge must be scrap.",),
                 ("Every grade's charge has to contain a minimum share of scrap.",)),
        Phrasing(r"\bHow many tonnes of each material should go into each grade to make exactly the tonnes ordered at "
                 r"the least material cost, and (?=what is that\b)",
                 ("How many tonnes of each material should go into each grade to make exactly the tonnes ordered at "
                  "the least material cost, and ",),
                 ("How should the tonnes of each material be divided over the grades so that every grade is made "
                  "precisely as ordered at the smallest material cost, and ",)),
        Phrasing(r"\bTonnes may be fractional\.", ("Tonnes may be fractional.",), ("Fractional tonnages are fine.",)),
        Phrasing(r"\btonnes are in stock\.", ("tonnes are in stock.",), ("tonnes are on hand.",)),
        Phrasing(r"\bthe scrap materials(?= \(only when a recycled)", ("the scrap materials",),
                 ("names of the scrap materials",)),
        Phrasing(r"\btonnes ordered\)", ("tonnes ordered)",), ("tonnes on order)",)),
        Phrasing(r"\bordered \(t\)", ("ordered (t)",), ("on order (t)",)),
        Phrasing(r"\bmin-max \(%\)", ("min-max (%)",), ("range (%)",)),
        Phrasing(r"\bstock \(t\)", ("stock (t)",), ("on hand (t)",)),
    )
    data_fields = {
        "materials": "list of raw material names",
        "elements": "list of element names",
        "grades": "list of steel grade names",
        "content": "content[material][element]: percent by weight",
        "cost": "cost per tonne of each material, keyed by material",
        "available": "tonnes of each material in stock, keyed by material",
        "order": "tonnes of each grade ordered (made exactly), keyed by grade",
        "min_pct": "min_pct[grade][element]: least percent of the element in the grade",
        "max_pct": "max_pct[grade][element]: most percent of the element in the grade",
        "max_share": "most fraction of any grade's charge a material may make up, keyed by material (only for "
                     "the materials so limited, when there are any)",
        "recycled": "the scrap materials (only when a recycled share is required)",
        "recycled_share": "least fraction of every grade's charge that is scrap (only when required)",
        "lot_size": "tonnes per lot of each material, bought in whole lots at lot_size times the cost per "
                    "tonne, keyed by material (only when materials come in lots)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.M = pyo.Set(initialize=data["materials"])
model.E = pyo.Set(initialize=data["elements"])
model.G = pyo.Set(initialize=data["grades"])
model.use = pyo.Var(model.M, model.G, domain=pyo.NonNegativeReals)
'''
    _LOTS = '''\
model.lots = pyo.Var(model.M, domain=pyo.NonNegativeIntegers)
model.lot_cover = pyo.Constraint(
    model.M, rule=lambda model, m: sum(model.use[m, g] for g in model.G) <= data["lot_size"][m] * model.lots[m])
model.material_cost = pyo.Expression(
    expr=sum(data["cost"][m] * data["lot_size"][m] * model.lots[m] for m in model.M))
'''
    _TONNE_COST = '''\
model.material_cost = pyo.Expression(expr=sum(data["cost"][m] * model.use[m, g] for m in model.M for g in model.G))
'''
    _COST_OBJECTIVE = '''\
model.obj = pyo.Objective(expr=model.material_cost, sense=pyo.minimize)
'''
    _BODY = '''\
model.charge = pyo.Constraint(model.G, rule=lambda model, g: sum(model.use[m, g] for m in model.M) == data["order"][g])
model.available = pyo.Constraint(
    model.M, rule=lambda model, m: sum(model.use[m, g] for g in model.G) <= data["available"][m])
model.min_pct = pyo.Constraint(
    model.G, model.E, rule=lambda model, g, e: sum(data["content"][m][e] * model.use[m, g] for m in model.M)
    >= data["min_pct"][g][e] * data["order"][g])
model.max_pct = pyo.Constraint(
    model.G, model.E, rule=lambda model, g, e: sum(data["content"][m][e] * model.use[m, g] for m in model.M)
    <= data["max_pct"][g][e] * data["order"][g])
'''
    _RECYCLED = '''\
model.recycled = pyo.Constraint(
    model.G, rule=lambda model, g: sum(model.use[m, g] for m in data["recycled"])
    >= data["recycled_share"] * data["order"][g])
'''

    _MAX_SHARE = '''\
model.max_share = pyo.Constraint(
    list(data["max_share"]), model.G,
    rule=lambda model, m, g: model.use[m, g] <= data["max_share"][m] * data["order"][g])
'''

    model_code = _HEAD + _TONNE_COST + _COST_OBJECTIVE + _BODY + _RECYCLED  # cost, recycled share

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._LOTS if "lot_size" in data else self._TONNE_COST) + self._COST_OBJECTIVE
        code += self._BODY + (self._MAX_SHARE if "max_share" in data else "")
        return code + (self._RECYCLED if "recycled" in data else "")

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "lots": "nonnegative_integer"} if "lot_size" in data else self.domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "lot_size" in data else "LP"

    def variant_of(self, data: dict) -> str:
        parts = [key for key in ("max_share", "recycled", "lot_size") if key in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_materials = size_for(difficulty, 3, 5, 7, industrial=40)
        n_grades = size_for(difficulty, 2, 3, 4, industrial=30)  # industrial: 1,200 charge variables
        n_elements = size_for(difficulty, 2, 3, 4, industrial=4)
        scrap_names = [m for m in words["materials"] if m in words["scrap"]]
        materials = rng.sample(scrap_names, 2) + pick_names(
            rng, [m for m in words["materials"] if m not in scrap_names], n_materials - 2)
        recycled = [m for m in materials if m in scrap_names]
        elements = words["elements"][:n_elements]
        grades = pick_names(rng, words["grades"], n_grades)
        content = {m: {e: round(rng.uniform(0.05, 3.0 if m not in recycled else 1.2), 2) for e in elements}
                   for m in materials}
        cost = {m: rng.randint(150, 450) if m in recycled else rng.randint(300, 1500) for m in materials}
        order = {g: rng.randint(10, 60) * 10 for g in grades}
        # a planted charge per grade (at least a third scrap); the specs bracket its chemistry
        planted, min_pct, max_pct, scrap_share = {}, {}, {}, {}
        for g in grades:
            weights = {m: rng.uniform(0.2, 1.0) * (2.0 if m in recycled else 1.0) for m in materials}
            total = sum(weights.values())
            planted[g] = {m: order[g] * w / total for m, w in weights.items()}
            scrap_share[g] = sum(planted[g][m] for m in recycled) / order[g]
            min_pct[g], max_pct[g] = {}, {}
            for e in elements:
                chemistry = sum(content[m][e] * planted[g][m] for m in materials) / order[g]
                min_pct[g][e] = math.floor(chemistry * rng.uniform(0.8, 0.95) * 100) / 100
                max_pct[g][e] = math.ceil(chemistry * rng.uniform(1.05, 1.25) * 100) / 100
        available = {m: int(sum(planted[g][m] for g in grades) * rng.uniform(1.05, 1.6)) + 1 for m in materials}
        data = {"materials": materials, "elements": elements, "grades": grades, "content": content, "cost": cost,
                "available": available, "order": order, "min_pct": min_pct, "max_pct": max_pct}
        if rng.random() < 0.5:
            # the non-scrap materials, each capped a little above its largest planted share
            data["max_share"] = {m: math.ceil(max(planted[g][m] / order[g] for g in grades)
                                              * rng.uniform(1.05, 1.3) * 100) / 100
                                 for m in materials if m not in recycled}
        if rng.random() < 0.5:
            data["recycled"] = recycled
            data["recycled_share"] = math.floor(min(scrap_share.values()) * rng.uniform(0.7, 0.95) * 100) / 100
        if difficulty != INDUSTRIAL and rng.random() < 0.5:
            data["lot_size"] = {m: rng.choice([5, 10, 20, 25]) for m in materials}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one grade's order above all the material in stock
        grade = rng.choice(data["grades"])
        order = {**data["order"], grade: sum(data["available"].values()) + rng.randint(5, 50)}
        return {**data, "order": order}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        materials, elements, grades = data["materials"], data["elements"], data["grades"]
        lots_used = "lot_size" in data
        use = {(m, g): matrix.add_var(f"use[{m},{g}]", cost=0.0 if lots_used else data["cost"][m])
               for m in materials for g in grades}
        if lots_used:
            lots = {m: matrix.add_var(f"lots[{m}]", cost=data["cost"][m] * data["lot_size"][m], integer=True)
                    for m in materials}
            for m in materials:
                matrix.add_row({**{use[m, g]: 1.0 for g in grades}, lots[m]: -data["lot_size"][m]}, upper=0.0,
                               name=f"lot_cover[{m}]")
        for g in grades:
            order = data["order"][g]
            matrix.add_row({use[m, g]: 1.0 for m in materials}, lower=order, upper=order, name=f"charge[{g}]")
            for e in elements:
                coefficients = {use[m, g]: data["content"][m][e] for m in materials}
                matrix.add_row(coefficients, lower=data["min_pct"][g][e] * order, name=f"min_pct[{g},{e}]")
                matrix.add_row(coefficients, upper=data["max_pct"][g][e] * order, name=f"max_pct[{g},{e}]")
            if "recycled" in data:
                matrix.add_row({use[m, g]: 1.0 for m in data["recycled"]}, lower=data["recycled_share"] * order,
                               name=f"recycled[{g}]")
            for m, share in data.get("max_share", {}).items():
                matrix.add_row({use[m, g]: 1.0}, upper=share * order, name=f"max_share[{m},{g}]")
        for m in materials:
            matrix.add_row({use[m, g]: 1.0 for g in grades}, upper=data["available"][m], name=f"available[{m}]")

    def constraint_rows(self, data: dict, x: dict):
        materials, grades = data["materials"], data["grades"]
        use = x["use"]
        for g in grades:
            made = data["order"][g]
            yield Row(f"charge[{g}]", sum(use[m, g] for m in materials), "==", made)
            for m, share in data.get("max_share", {}).items():
                yield Row(f"max_share[{m},{g}]", use[m, g], "<=", share * made)
            for e in data["elements"]:
                blend = sum(data["content"][m][e] * use[m, g] for m in materials)
                yield Row(f"min_pct[{g},{e}]", blend - data["min_pct"][g][e] * made, ">=", 0.0)
                yield Row(f"max_pct[{g},{e}]", blend - data["max_pct"][g][e] * made, "<=", 0.0)
            if "recycled" in data:
                yield Row(f"recycled[{g}]", sum(use[m, g] for m in data["recycled"]) - data["recycled_share"] * made,
                          ">=", 0.0)
        for m in materials:
            yield Row(f"available[{m}]", sum(use[m, g] for g in grades), "<=", data["available"][m])
            if "lot_size" in data:
                yield Row(f"lot_cover[{m}]", sum(use[m, g] for g in grades) - data["lot_size"][m] * x["lots"][m],
                          "<=", 0.0)

    def objective_value(self, data: dict, x: dict) -> float:
        if "lot_size" in data:
            material = sum(data["cost"][m] * data["lot_size"][m] * x["lots"][m] for m in data["materials"])
        else:
            material = sum(data["cost"][m] * x["use"][m, g] for m in data["materials"] for g in data["grades"])
        return material

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        materials, elements, grades = data["materials"], data["elements"], data["grades"]
        money = words["money"]
        intro = {
            "minimill": f"{words['company'].capitalize()} must charge its furnace for the grades "
                        f"{join_names(grades)} from {join_names(materials)}.",
            "foundry": f"This week {words['company']} must charge its furnace for {join_names(grades)}, using "
                       f"{join_names(materials)}.",
            "alloy": f"{words['company'].capitalize()} must charge its furnace for orders of {join_names(grades)}; "
                     f"the raw materials are {join_names(materials)}.",
            "railsteel": f"{words['company'].capitalize()} is preparing the melt shop's charges for "
                         f"{join_names(grades)}; it can draw on {join_names(materials)}.",
            "toolsteel": f"For the next campaign {words['company']} has to plan its furnace charges for "
                         f"{join_names(grades)}, with {join_names(materials)} as the raw materials.",
            "linepipe": f"{words['company'].capitalize()} is working out its furnace charges: the grades on order "
                        f"are {join_names(grades)} and the usable inputs are {join_names(materials)}.",
        }[scenario.key]
        general = "The content of a grade is the weighted average of its materials."
        rules = []
        if "max_share" in data:
            rules.append("No grade's charge may be more than this share of these materials: " + "; ".join(
                f"{m} {fmt(round(share * 100, 6))}%" for m, share in data["max_share"].items()) + ".")
        if "recycled" in data:
            rules.append(f"At least {fmt(round(data['recycled_share'] * 100, 6))}% of every grade's charge must be "
                         f"scrap ({join_names(data['recycled'])}).")
        if "lot_size" in data:
            rules.append("Materials are bought in whole lots, each lot paid at the cost per tonne times its size: "
                         + "; ".join(f"{m} {fmt(data['lot_size'][m])} tonnes" for m in materials) + ".")
        question = ("How many tonnes of each material should go into each grade to make exactly the tonnes "
                    "ordered at the least material cost, and what is that cost? Tonnes may be fractional.")
        rule_text = " ".join(rules)
        if representation == "text":
            chemistry = "Chemistry of the raw materials (percent by weight): " + " ".join(
                f"{m} has " + ", ".join(f"{fmt(data['content'][m][e])}% {e}" for e in elements)
                + f", costs {fmt(data['cost'][m])} {money} per tonne and {fmt(data['available'][m])} tonnes are in "
                  "stock." for m in materials)
            specs = "Grade specifications (percent by weight): " + " ".join(
                f"{g} ({fmt(data['order'][g])} tonnes ordered) needs " + ", ".join(
                    f"{e} between {fmt(data['min_pct'][g][e])}% and {fmt(data['max_pct'][g][e])}%" for e in elements)
                + "." for g in grades)
            return f"{intro} {general} {chemistry} {specs} {rule_text} {question}"
        if representation == "table":
            chemistry = markdown_table(
                ["material", *[f"{e} (%)" for e in elements], f"cost ({money}/t)", "stock (t)"],
                [[m, *[data["content"][m][e] for e in elements], data["cost"][m], data["available"][m]]
                 for m in materials])
            specs = markdown_table(
                ["grade", "ordered (t)", *[f"{e} min-max (%)" for e in elements]],
                [[g, data["order"][g], *[f"{fmt(data['min_pct'][g][e])}-{fmt(data['max_pct'][g][e])}"
                                         for e in elements]] for g in grades])
            return (f"{intro} {general} Chemistry of the raw materials (percent by weight):\n\n{chemistry}\n\n"
                    f"Grade specifications (percent by weight):\n\n{specs}\n\n{rule_text} {question}")
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "only when" not in meaning}
            extra = []
            if "max_share" in data:
                extra.append("Some materials may make up only a limited share of any charge.")
            if "recycled" in data:
                extra.append("A least share of every grade's charge must be scrap.")
            if "lot_size" in data:
                extra.append("Materials are bought in whole lots.")
            return f"{intro} {general} {' '.join(extra)}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        made = "Q_g"
        cost = ("\\sum_{m} c_m k_m z_m" if "lot_size" in data else "\\sum_{m} \\sum_{g} c_m x_{mg}")
        objective = f"\\min\\ & {cost}"
        rows = [objective,
                f"\\text{{s.t.}}\\ & \\sum_m x_{{mg}} = {made} && \\forall g",
                "& \\sum_g x_{mg} \\le S_m && \\forall m",
                f"& \\underline a_{{ge}} {made} \\le \\sum_m a_{{me}} x_{{mg}} \\le \\bar a_{{ge}} {made} && \\forall g, e"]
        parameters = ("content $a_{me}$ (percent), cost $c_m$, stock $S_m$, order $Q_g$, specification "
                      "$[\\underline a_{ge}, \\bar a_{ge}]$")
        variables = "$x_{mg} \\ge 0$, tonnes of $m$ in grade $g$"
        if "max_share" in data:
            parameters += ", most share $\\sigma_m$ of the capped materials $U$"
            rows.append("& x_{mg} \\le \\sigma_m Q_g && \\forall m \\in U, g")
        if "recycled" in data:
            parameters += ", scrap $R$ with least share $\\rho$"
            rows.append(f"& \\sum_{{m \\in R}} x_{{mg}} \\ge \\rho\\, {made} && \\forall g")
        if "lot_size" in data:
            parameters += ", lot size $k_m$"
            variables += "; $z_m \\in \\mathbb{Z}_{\\ge 0}$, lots bought"
            rows.append("& \\sum_g x_{mg} \\le k_m z_m && \\forall m")
        return ("**Sets**: materials $m$, elements $e$, grades $g$.\n\n"
                f"**Parameters**: {parameters}.\n\n**Variables**: {variables}.\n\n"
                "$$\n\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$")


FAMILY = SteelProduction()
