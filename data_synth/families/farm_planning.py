"""Farm planning (LP, or MILP with whole animals): a farm divides its land between crops and grazing for
livestock; crops are sold or fed to the animals, every hectare and animal needs labour in each season,
and the plan maximizes crop sales plus livestock profit minus growing costs.

Structure variants (drawn per instance, recorded by the keys present): seasonal labour that can be hired
at a cost per hour (`hire_cost`), feed that can be bought at a price (`buy_price`), and a herd of whole
animals (`whole_animals`: integer variables), each present or absent: eight program skeletons."""

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
    Scenario("dairy", "mixed dairy farming", {
        "farm": "a mixed dairy farm", "crops": ["wheat", "barley", "maize", "oats", "beans"],
        "animals": ["dairy cows", "heifers", "beef steers"],
        "seasons": ["spring", "summer", "autumn", "winter"], "money": "dollars",
    }),
    Scenario("sheep", "upland sheep farming", {
        "farm": "an upland sheep farm", "crops": ["turnips", "kale", "barley", "oats", "rye"],
        "animals": ["ewes", "lambs", "rams"],
        "seasons": ["lambing", "shearing", "harvest", "winter"], "money": "pounds",
    }),
    Scenario("ranch", "cattle ranching", {
        "farm": "a family ranch", "crops": ["alfalfa", "sorghum", "corn", "soybeans", "sunflower"],
        "animals": ["cow-calf pairs", "stockers", "bulls"],
        "seasons": ["planting", "growing", "harvest", "dormant"], "money": "dollars",
    }),
)

# the eval split's own farms, crops, livestock, seasons and currencies (held out from training)
EVAL_SCENARIOS = (
    Scenario("pig_arable", "arable and pig farming", {
        "farm": "a lowland arable and pig holding",
        "crops": ["rapeseed", "triticale", "field peas", "spelt", "lupins"],
        "animals": ["breeding sows", "finishing pigs", "boars"],
        "seasons": ["sowing", "early summer", "harvesting", "midwinter"], "money": "euros",
    }),
    Scenario("goat_dairy", "alpine goat dairying", {
        "farm": "an alpine goat dairy", "crops": ["lucerne", "fodder beet", "millet", "buckwheat", "vetch"],
        "animals": ["milking goats", "goat kids", "breeding bucks"],
        "seasons": ["kidding", "haymaking", "summer pasture", "stabling"], "money": "Swiss francs",
    }),
    Scenario("rice_duck", "integrated rice and duck farming", {
        "farm": "a rice and duck farm",
        "crops": ["paddy rice", "taro", "water spinach", "mung beans", "sesame"],
        "animals": ["laying ducks", "water buffalo", "geese"],
        "seasons": ["transplanting", "monsoon", "threshing", "fallow"], "money": "baht",
    }),
)


class FarmPlanning(ProblemFamily):
    name = "farm_planning"
    title = "Farm planning"
    problem_type = "LP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"plant": "nonnegative", "herd": "nonnegative", "sell": "nonnegative"}
    phrasings = (
        Phrasing(r"\bis planning the coming year on\b", ("is planning the coming year on",),
                 ("draws up next year's plan for",)),
        Phrasing(r"\bCrops grown are either sold or fed to the animals\.",
                 ("Crops grown are either sold or fed to the animals.",),
                 ("The harvest goes to market or into the animals' rations.",)),
        Phrasing(r"\bLabour available per season:", ("Labour available per season:",),
                 ("Family and staff hours in each season:",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bhectares, choosing between the crops\b", ("hectares, choosing between the crops",),
                 ("hectares, weighing up the crops",)),
        Phrasing(r"\band the livestock\b", ("and the livestock",), ("against the animals",)),
        Phrasing(r"\bLand not used for crops can graze animals\.", ("Land not used for crops can graze animals.",),
                 ("Whatever land is left unplanted serves as pasture.",)),
        Phrasing(r"\bExtra labour can be hired in any season at\b", ("Extra labour can be hired in any season at",),
                 ("Additional workers may be taken on in every season for",)),
        Phrasing(r"\bFeed can also be bought, per tonne:", ("Feed can also be bought, per tonne:",),
                 ("Feed may be purchased too, at these prices a tonne:",)),
        Phrasing(r"\bAnimals are kept whole\.", ("Animals are kept whole.",),
                 ("Only whole animals can be kept.",)),
        Phrasing(r"\bHow many hectares of each crop should be grown, how many animals kept and how much sold, to "
                 r"maximize the farm's profit, and\b",
                 ("How many hectares of each crop should be grown, how many animals kept and how much sold, to "
                  "maximize the farm's profit, and",),
                 ("Which area of every crop, which herd and which sales give the farm its greatest possible "
                  "profit, and",)),
        Phrasing(r"\bHectares and tonnes may be fractional\.", ("Hectares and tonnes may be fractional.",),
                 ("Areas and tonnages need not be whole numbers.",)),
        Phrasing(r"\bAll quantities may be fractional\.", ("All quantities may be fractional.",),
                 ("Fractional values are fine for every quantity.",)),
        Phrasing(r"\byields\b(?= \d)", ("yields",), ("gives",)),
        Phrasing(r"(?<=\d )tonnes per hectare, sells at\b", ("tonnes per hectare, sells at",),
                 ("tonnes a hectare, fetches",)),
        Phrasing(r"\bper tonne, costs\b", ("per tonne, costs",), ("a tonne, takes",)),
        Phrasing(r"\bper hectare to grow and\b", ("per hectare to grow and",), ("a hectare to grow, and",)),
        Phrasing(r"(?<=\d )hours per hectare in\b", ("hours per hectare in",), ("hours a hectare over",)),
        Phrasing(r"\bEach of the\b", ("Each of the",), ("Every one of the",)),
        Phrasing(r"\bhectares of grazing, earns\b", ("hectares of grazing, earns",),
                 ("hectares of pasture, brings in",)),
        Phrasing(r"\bbefore feed, eats\b", ("before feed, eats",), ("excluding feed, consumes",)),
        Phrasing(r"(?<=\d )hours in\b", ("hours in",), ("hours of work over",)),
        Phrasing(r"(?<=\| )crop(?= \|)", ("crop",), ("crop grown",)),
        Phrasing(r"(?<=\| )animal(?= \|)", ("animal",), ("livestock",)),
        Phrasing(r"\byield \(t/ha\)", ("yield (t/ha)",), ("harvest (t/ha)",)),
        Phrasing(r"\bprice\b(?= \([^)]*/t\))", ("price",), ("sale price",)),
        Phrasing(r"\bcost\b(?= \([^)]*/ha\))", ("cost",), ("growing cost",)),
        Phrasing(r"\bhours/ha\b", ("hours/ha",), ("labour h/ha",)),
        Phrasing(r"\bgrazing \(ha\)", ("grazing (ha)",), ("pasture (ha)",)),
        Phrasing(r"\bprofit\b(?= \()", ("profit",), ("margin",)),
        Phrasing(r"\beaten \(t\)", ("eaten (t)",), ("in ration (t)",)),
        Phrasing(r"\bhours(?= \|)", ("hours",), ("labour h",)),
        Phrasing(r"\blist of crop names\b", ("list of crop names",), ("names of the crops",)),
        Phrasing(r"\blist of livestock types\b", ("list of livestock types",), ("names of the kinds of animal",)),
        Phrasing(r"\blist of labour seasons\b", ("list of labour seasons",), ("names of the working seasons",)),
        Phrasing(r"\bhectares of land in all\b", ("hectares of land in all",), ("farm area in hectares",)),
        Phrasing(r"\btonnes harvested per hectare\b", ("tonnes harvested per hectare",),
                 ("harvest in tonnes from one hectare",)),
        Phrasing(r"\bsale price per tonne\b", ("sale price per tonne",), ("selling price of one tonne",)),
        Phrasing(r"\bgrowing cost per hectare\b", ("growing cost per hectare",), ("cost to grow one hectare",)),
        Phrasing(r"\bhectares of grazing each animal\b(?= needs\b)", ("hectares of grazing each animal",),
                 ("pasture area in hectares that one animal",)),
        Phrasing(r"\bprofit per animal kept \(before feed\)", ("profit per animal kept (before feed)",),
                 ("margin earned by one animal kept, feed excluded",)),
        Phrasing(r"(?<=\]: )tonnes of the crop each animal eats\b", ("tonnes of the crop each animal eats",),
                 ("tonnes of that crop consumed by one animal",)),
        Phrasing(r"(?<=\]: )hours per hectare\b", ("hours per hectare",), ("working hours for one hectare",)),
        Phrasing(r"(?<=\]: )hours per animal\b", ("hours per animal",), ("working hours for one animal",)),
        Phrasing(r"\bhours of labour available in each season\b", ("hours of labour available in each season",),
                 ("working hours on hand in every season",)),
        Phrasing(r"\bcost per hour of hired labour, any season\b", ("cost per hour of hired labour, any season",),
                 ("price of one hired hour of labour, whatever the season",)),
        Phrasing(r"\bprice per tonne of bought feed\b", ("price per tonne of bought feed",),
                 ("cost of one tonne of purchased feed",)),
        Phrasing(r"\btrue: the herd is whole animals\b", ("true: the herd is whole animals",),
                 ("flag, true when the herd is counted in whole animals",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(present only if",)),
    )
    data_fields = {
        "crops": "list of crop names",
        "animals": "list of livestock types",
        "seasons": "list of labour seasons",
        "land": "hectares of land in all",
        "crop_yield": "tonnes harvested per hectare, keyed by crop",
        "price": "sale price per tonne, keyed by crop",
        "grow_cost": "growing cost per hectare, keyed by crop",
        "grazing": "hectares of grazing each animal needs, keyed by animal type",
        "animal_profit": "profit per animal kept (before feed), keyed by animal type",
        "feed": "feed[animal][crop]: tonnes of the crop each animal eats",
        "crop_labour": "crop_labour[crop][season]: hours per hectare",
        "animal_labour": "animal_labour[animal][season]: hours per animal",
        "labour": "hours of labour available in each season, keyed by season",
        "hire_cost": "cost per hour of hired labour, any season (only when labour can be hired)",
        "buy_price": "price per tonne of bought feed, keyed by crop (only when feed can be bought)",
        "whole_animals": "true: the herd is whole animals (only when animals must be whole)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.C = pyo.Set(initialize=data["crops"])
model.A = pyo.Set(initialize=data["animals"])
model.S = pyo.Set(initialize=data["seasons"])
model.plant = pyo.Var(model.C, domain=pyo.NonNegativeReals)
model.sell = pyo.Var(model.C, domain=pyo.NonNegativeReals)
'''
    _HERD = '''\
model.herd = pyo.Var(model.A, domain=pyo.NonNegativeReals)
'''
    _WHOLE_HERD = '''\
model.herd = pyo.Var(model.A, domain=pyo.NonNegativeIntegers)
'''
    _HIRE_VAR = '''\
model.hire = pyo.Var(model.S, domain=pyo.NonNegativeReals)
'''
    _BUY_VAR = '''\
model.buy = pyo.Var(model.C, domain=pyo.NonNegativeReals)
'''
    _OBJECTIVE = '''\
model.obj = pyo.Objective(
    expr=sum(data["price"][c] * model.sell[c] - data["grow_cost"][c] * model.plant[c] for c in model.C)
    + sum(data["animal_profit"][a] * model.herd[a] for a in model.A){extra}, sense=pyo.maximize)
'''
    _LAND = '''\
model.land = pyo.Constraint(
    expr=sum(model.plant[c] for c in model.C) + sum(data["grazing"][a] * model.herd[a] for a in model.A)
    <= data["land"])
'''
    _CROP_BALANCE = '''\
model.crop_balance = pyo.Constraint(
    model.C, rule=lambda model, c: model.sell[c] + sum(data["feed"][a][c] * model.herd[a] for a in model.A)
    <= data["crop_yield"][c] * model.plant[c]{bought})
'''
    _LABOUR = '''\
model.labour = pyo.Constraint(
    model.S, rule=lambda model, s: sum(data["crop_labour"][c][s] * model.plant[c] for c in model.C)
    + sum(data["animal_labour"][a][s] * model.herd[a] for a in model.A) <= data["labour"][s]{hired})
'''

    model_code = ""  # set below the class: the model with hired labour

    def model_code_for(self, data: dict) -> str:
        return _assemble("hire_cost" in data, "buy_price" in data, "whole_animals" in data)

    def domains_for(self, data: dict) -> dict[str, str]:
        domains = dict(self.domains)
        if "whole_animals" in data:
            domains["herd"] = "nonnegative_integer"
        if "hire_cost" in data:
            domains["hire"] = "nonnegative"
        if "buy_price" in data:
            domains["buy"] = "nonnegative"
        return domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "whole_animals" in data else "LP"

    def variant_of(self, data: dict) -> str:
        parts = [key for key in ("hire_cost", "buy_price", "whole_animals") if key in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        crops = words["crops"][:size_for(difficulty, 2, 3, 5)]
        animals = words["animals"][:size_for(difficulty, 1, 2, 3)]
        seasons = words["seasons"][:size_for(difficulty, 2, 3, 4)]
        land = rng.randint(8, 40) * 10
        crop_yield = {c: rng.choice([2, 3, 4, 5, 6, 8]) for c in crops}
        price = {c: rng.randint(12, 40) * 5 for c in crops}
        grow_cost = {c: int(crop_yield[c] * price[c] * rng.uniform(0.3, 0.7)) for c in crops}
        grazing = {a: rng.choice([0.3, 0.4, 0.5, 0.6, 0.8, 1.0]) for a in animals}
        feed = {a: {c: rng.choice([0, 0, 0.2, 0.4, 0.5, 0.8]) for c in crops} for a in animals}
        feed_value = {a: sum(feed[a][c] * price[c] for c in crops) for a in animals}
        animal_profit = {a: int(feed_value[a] + rng.randint(100, 600)) for a in animals}
        crop_labour = {c: {s: rng.choice([0, 2, 4, 6, 8, 10]) for s in seasons} for c in crops}
        animal_labour = {a: {s: rng.choice([2, 4, 6, 10, 12]) for s in seasons} for a in animals}
        # labour for roughly half to all of the land in each season, so labour and land both matter
        labour = {}
        for s in seasons:
            per_hectare = (sum(crop_labour[c][s] for c in crops) / len(crops)
                           + sum(animal_labour[a][s] / grazing[a] for a in animals) / len(animals)) / 2
            labour[s] = int(land * per_hectare * rng.uniform(0.4, 0.9)) // 10 * 10 + 10
        data = {"crops": crops, "animals": animals, "seasons": seasons, "land": land, "crop_yield": crop_yield,
                "price": price, "grow_cost": grow_cost, "grazing": grazing, "animal_profit": animal_profit,
                "feed": feed, "crop_labour": crop_labour, "animal_labour": animal_labour, "labour": labour}
        if rng.random() < 0.5:
            data["hire_cost"] = rng.randint(12, 30)
        if rng.random() < 0.5:
            data["buy_price"] = {c: int(price[c] * rng.uniform(1.15, 1.5)) for c in crops}
        if rng.random() < 0.5:
            data["whole_animals"] = True
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        crops, animals, seasons = data["crops"], data["animals"], data["seasons"]
        plant = {c: matrix.add_var(f"plant[{c}]", cost=-data["grow_cost"][c]) for c in crops}
        sell = {c: matrix.add_var(f"sell[{c}]", cost=data["price"][c]) for c in crops}
        herd = {a: matrix.add_var(f"herd[{a}]", cost=data["animal_profit"][a], integer="whole_animals" in data)
                for a in animals}
        hire = {s: matrix.add_var(f"hire[{s}]", cost=-data["hire_cost"]) for s in seasons} if "hire_cost" in data \
            else {}
        buy = {c: matrix.add_var(f"buy[{c}]", cost=-data["buy_price"][c]) for c in crops} if "buy_price" in data \
            else {}
        matrix.add_row({**{plant[c]: 1.0 for c in crops}, **{herd[a]: data["grazing"][a] for a in animals}},
                       upper=data["land"], name="land")
        for c in crops:
            coefficients = {sell[c]: 1.0, plant[c]: -data["crop_yield"][c]}
            coefficients.update({herd[a]: data["feed"][a][c] for a in animals})
            if buy:
                coefficients[buy[c]] = -1.0
            matrix.add_row(coefficients, upper=0.0, name=f"crop_balance[{c}]")
        for s in seasons:
            coefficients = {plant[c]: data["crop_labour"][c][s] for c in crops}
            coefficients.update({herd[a]: data["animal_labour"][a][s] for a in animals})
            if hire:
                coefficients[hire[s]] = -1.0
            matrix.add_row(coefficients, upper=data["labour"][s], name=f"labour[{s}]")

    def constraint_rows(self, data: dict, x: dict):
        crops, animals, seasons = data["crops"], data["animals"], data["seasons"]
        plant, sell, herd = x["plant"], x["sell"], x["herd"]
        yield Row("land", sum(plant[c] for c in crops) + sum(data["grazing"][a] * herd[a] for a in animals), "<=",
                  data["land"])
        for c in crops:
            bought = x["buy"][c] if "buy_price" in data else 0.0
            yield Row(f"crop_balance[{c}]", sell[c] + sum(data["feed"][a][c] * herd[a] for a in animals)
                      - data["crop_yield"][c] * plant[c] - bought, "<=", 0.0)
        for s in seasons:
            hired = x["hire"][s] if "hire_cost" in data else 0.0
            yield Row(f"labour[{s}]", sum(data["crop_labour"][c][s] * plant[c] for c in crops)
                      + sum(data["animal_labour"][a][s] * herd[a] for a in animals) - hired, "<=", data["labour"][s])

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["price"][c] * x["sell"][c] - data["grow_cost"][c] * x["plant"][c] for c in data["crops"])
        total += sum(data["animal_profit"][a] * x["herd"][a] for a in data["animals"])
        if "hire_cost" in data:
            total -= sum(data["hire_cost"] * x["hire"][s] for s in data["seasons"])
        if "buy_price" in data:
            total -= sum(data["buy_price"][c] * x["buy"][c] for c in data["crops"])
        return total

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        crops, animals, seasons = data["crops"], data["animals"], data["seasons"]
        money = words["money"]
        intro = (f"{words['farm'].capitalize()} is planning the coming year on {fmt(data['land'])} hectares, "
                 f"choosing between the crops {join_names(crops)} and the livestock {join_names(animals)}.")
        general = ("Crops grown are either sold or fed to the animals. Land not used for crops can graze animals. "
                   "Labour available per season: " + "; ".join(
                       f"{s} {fmt(data['labour'][s])} hours" for s in seasons) + ".")
        rules = []
        if "hire_cost" in data:
            rules.append(f"Extra labour can be hired in any season at {fmt(data['hire_cost'])} {money} per hour.")
        if "buy_price" in data:
            rules.append("Feed can also be bought, per tonne: " + "; ".join(
                f"{c} {fmt(data['buy_price'][c])} {money}" for c in crops) + ".")
        if "whole_animals" in data:
            rules.append("Animals are kept whole.")
            question = ("How many hectares of each crop should be grown, how many animals kept and how much sold, "
                        "to maximize the farm's profit, and what is that profit? Hectares and tonnes may be "
                        "fractional.")
        else:
            question = ("How many hectares of each crop should be grown, how many animals kept and how much sold, "
                        "to maximize the farm's profit, and what is that profit? All quantities may be fractional.")
        rule_text = " ".join(rules)
        if representation == "text":
            crop_text = " ".join(
                f"{c.capitalize()} yields {fmt(data['crop_yield'][c])} tonnes per hectare, sells at "
                f"{fmt(data['price'][c])} {money} per tonne, costs {fmt(data['grow_cost'][c])} {money} per hectare "
                "to grow and needs " + ", ".join(f"{fmt(data['crop_labour'][c][s])} hours per hectare in {s}"
                                                 for s in seasons) + "." for c in crops)
            animal_text = " ".join(
                f"Each of the {a} needs {fmt(data['grazing'][a])} hectares of grazing, earns "
                f"{fmt(data['animal_profit'][a])} {money} before feed, eats "
                + ", ".join(f"{fmt(data['feed'][a][c])} tonnes of {c}" for c in crops) + " and needs "
                + ", ".join(f"{fmt(data['animal_labour'][a][s])} hours in {s}" for s in seasons) + "."
                for a in animals)
            return f"{intro} {general} {crop_text} {animal_text} {rule_text} {question}"
        if representation == "table":
            crop_table = markdown_table(
                ["crop", "yield (t/ha)", f"price ({money}/t)", f"cost ({money}/ha)", *[f"{s} hours/ha" for s in seasons]],
                [[c, data["crop_yield"][c], data["price"][c], data["grow_cost"][c],
                  *[data["crop_labour"][c][s] for s in seasons]] for c in crops])
            animal_table = markdown_table(
                ["animal", "grazing (ha)", f"profit ({money})", *[f"{c} eaten (t)" for c in crops],
                 *[f"{s} hours" for s in seasons]],
                [[a, data["grazing"][a], data["animal_profit"][a], *[data["feed"][a][c] for c in crops],
                  *[data["animal_labour"][a][s] for s in seasons]] for a in animals])
            return f"{intro} {general}\n\n{crop_table}\n\n{animal_table}\n\n{rule_text} {question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "only when" not in meaning}
            return f"{intro} {general} {rule_text}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        objective = ("\\max\\ & \\sum_{c} (p_c s_c - g_c x_c) + \\sum_{a} \\pi_a h_a"
                     + (" - \\sum_{t} w\\, e_t" if "hire_cost" in data else "")
                     + (" - \\sum_{c} q_c b_c" if "buy_price" in data else ""))
        rows = [objective,
                "\\text{s.t.}\\ & \\sum_{c} x_c + \\sum_{a} r_a h_a \\le L",
                "& s_c + \\sum_{a} f_{ac} h_a \\le y_c x_c" + (" + b_c" if "buy_price" in data else "")
                + " && \\forall c",
                "& \\sum_{c} l_{ct} x_c + \\sum_{a} m_{at} h_a \\le H_t" + (" + e_t" if "hire_cost" in data else "")
                + " && \\forall t",
                "& x, s \\ge 0,\\ " + ("h_a \\in \\mathbb{Z}_{\\ge 0}" if "whole_animals" in data else "h \\ge 0")]
        return ("**Sets**: crops $c$, animals $a$, seasons $t$.\n\n**Parameters**: land $L$, yield $y_c$, price "
                "$p_c$, growing cost $g_c$, grazing $r_a$, animal profit $\\pi_a$, feed $f_{ac}$, labour $l_{ct}$, "
                "$m_{at}$, hours $H_t$" + (", hire cost $w$" if "hire_cost" in data else "")
                + (", feed price $q_c$" if "buy_price" in data else "") + ".\n\n"
                "**Variables**: hectares $x_c$, tonnes sold $s_c$, animals $h_a$"
                + (", hired hours $e_t$" if "hire_cost" in data else "")
                + (", tonnes bought $b_c$" if "buy_price" in data else "") + ".\n\n"
                "$$\n\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$")


def _assemble(hire: bool, buy: bool, whole: bool) -> str:
    """The Pyomo source of one variant, from the class's pieces."""
    pieces = FarmPlanning
    extra = ""
    if hire:
        extra += '\n    - sum(data["hire_cost"] * model.hire[s] for s in model.S)'
    if buy:
        extra += '\n    - sum(data["buy_price"][c] * model.buy[c] for c in model.C)'
    code = pieces._HEAD + (pieces._WHOLE_HERD if whole else pieces._HERD)
    code += (pieces._HIRE_VAR if hire else "") + (pieces._BUY_VAR if buy else "")
    code += "\n" + pieces._OBJECTIVE.replace("{extra}", extra) + pieces._LAND
    code += pieces._CROP_BALANCE.replace("{bought}", " + model.buy[c]" if buy else "")
    return code + pieces._LABOUR.replace("{hired}", " + model.hire[s]" if hire else "")


FarmPlanning.model_code = _assemble(hire=True, buy=False, whole=False)
FAMILY = FarmPlanning()
