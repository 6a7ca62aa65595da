"""Multi-product market share (LP or MILP): a firm with limited stock of several products decides how much
of each to sell in each sales region, earning a region-specific margin per unit, while it can capture at
most a given share of each region's market for each product.

Structure variants (drawn per instance, recorded by the keys present): a minimum share of every region's
total market the firm must hold (`min_share`), a sales-force capacity in hours per region
(`sales_hours`, with `hours_per_unit`), and a fixed cost of entering a region (`entry_cost`: a binary
decision per region, so the model becomes a MILP and the share floor holds only in the regions served),
each present or absent: eight program skeletons."""

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
    Scenario("appliances", "consumer appliances", {
        "company": "an appliance maker",
        "products": ["washing machines", "dryers", "dishwashers", "fridges", "ovens", "freezers", "microwaves"],
        "regions": ["North", "South", "East", "West", "Central", "Coast", "Mountain", "Lakes", "Plains"],
        "unit": "unit", "money": "dollars", "period": "next quarter",
    }),
    Scenario("beverages", "soft drinks", {
        "company": "a soft-drink bottler",
        "products": ["cola", "lemonade", "iced tea", "sparkling water", "energy drink", "ginger ale", "tonic"],
        "regions": ["Lisbon", "Porto", "Braga", "Faro", "Coimbra", "Aveiro", "Evora", "Leiria", "Viseu"],
        "unit": "pallet", "money": "euros", "period": "next month",
    }),
    Scenario("seeds", "agricultural inputs", {
        "company": "a seed company",
        "products": ["maize seed", "wheat seed", "soy seed", "barley seed", "canola seed", "sorghum seed",
                     "oat seed"],
        "regions": ["Iowa", "Kansas", "Nebraska", "Ohio", "Illinois", "Indiana", "Missouri", "Dakota",
                    "Minnesota"],
        "unit": "bag", "money": "dollars", "period": "the coming season",
    }),
)

# the eval split's own industries, companies, products, regions and units (held out from training)
EVAL_SCENARIOS = (
    Scenario("skincare", "personal care", {
        "company": "a skincare brand",
        "products": ["face serum", "sunscreen", "night cream", "lip balm", "body lotion", "eye gel", "toner"],
        "regions": ["Zurich", "Bern", "Lucerne", "Geneva", "Basel", "Ticino", "Valais", "Vaud", "Aargau"],
        "unit": "carton", "money": "Swiss francs", "period": "the winter season",
    }),
    Scenario("tyres", "automotive aftermarket", {
        "company": "a tyre distributor",
        "products": ["summer tyres", "winter tyres", "all-season tyres", "truck tyres", "van tyres",
                     "motorcycle tyres", "tractor tyres"],
        "regions": ["Hokkaido", "Tohoku", "Kanto", "Chubu", "Kansai", "Chugoku", "Shikoku", "Kyushu", "Okinawa"],
        "unit": "set", "money": "thousand yen", "period": "the spring selling season",
    }),
)


class MarketShare(ProblemFamily):
    name = "market_share"
    title = "Multi-product market share"
    problem_type = "LP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"sell": "nonnegative"}
    industrial = True
    phrasings = (
        Phrasing(r"\bplans its sales in\b", ("plans its sales in", "is planning its sales in"),
                 ("is deciding how to sell in", "allocates its products across")),
        Phrasing(r"\bcan capture no share above\b", ("can capture no share above",),
                 ("cannot win more than",)),
        Phrasing(r"\bof any product's market in any region\b", ("of any product's market in any region",),
                 ("of a product's regional market",)),
        Phrasing(r"\bStock on hand:", ("Stock on hand:", "Available stock:"), ("Inventory to sell:",)),
        Phrasing(r"\bMarket sizes and unit margins:", ("Market sizes and unit margins:",),
                 ("Regional market volumes with the margin per unit:",)),
        Phrasing(r"\bSales may be fractional\.", ("Sales may be fractional.",),
                 ("Sales quantities need not be whole.",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bThe firm\b", ("The firm",), ("The business",)),
        Phrasing(r"\bTo keep its presence, its total sales\b", ("To keep its presence, its total sales",),
                 ("To stay visible, its combined sales",)),
        Phrasing(r"\bof that region's total market over all products\.",
                 ("of that region's total market over all products.",),
                 ("of the region's whole market, all products together.",)),
        Phrasing(r"\bServing a region at all has a fixed cost \(a region not served gets no sales\):",
                 ("Serving a region at all has a fixed cost (a region not served gets no sales):",),
                 ("Entering a region carries a fixed charge (no sales are possible in a region left out):",)),
        Phrasing(r"\bEach unit sold takes sales-force time:", ("Each unit sold takes sales-force time:",),
                 ("Selling a unit uses up sales-force time:",)),
        Phrasing(r"\bSales-force hours available per region:", ("Sales-force hours available per region:",),
                 ("The sales force can spend, region by region (in hours):",)),
        Phrasing(r"\bHow much of each product should be sold in each region to maximize the\b",
                 ("How much of each product should be sold in each region to maximize the",),
                 ("What quantity of every product ought to go to every region to reach the largest possible",)),
        Phrasing(r"\bmarket is\b(?= \d)", ("market is",), ("market comes to",)),
        Phrasing(r"\bwith a margin of\b", ("with a margin of",), ("earning",)),
        Phrasing(r"\bEach product's stock is limited and its sales in a region are capped by a share of that "
                 r"region's market\.",
                 ("Each product's stock is limited and its sales in a region are capped by a share of that region's "
                  "market.",),
                 ("Stock of every product is limited, and in a region its sales cannot exceed a share of that "
                  "region's market.",)),
        Phrasing(r"\bmarket size\b(?= \()", ("market size",), ("market volume",)),
        Phrasing(r"\bmargin\b(?= \()", ("margin",), ("profit",)),
        Phrasing(r"\blist of product names\b", ("list of product names",), ("names of the products",)),
        Phrasing(r"\blist of sales region names\b", ("list of sales region names",),
                 ("names of the sales regions",)),
        Phrasing(r"\bprofit per unit sold\b", ("profit per unit sold",), ("profit earned on every unit sold",)),
        Phrasing(r"\bunits the region's whole market buys\b", ("units the region's whole market buys",),
                 ("units bought by the entire market of the region",)),
        Phrasing(r"\blargest fraction of any product's market in any region the firm can capture\b",
                 ("largest fraction of any product's market in any region the firm can capture",),
                 ("biggest fraction of a product's regional market the business can win",)),
        Phrasing(r"\bunits of each product available to sell\b", ("units of each product available to sell",),
                 ("stock of every product that can be sold",)),
        Phrasing(r"\bfraction of each served region's total market \(all products\) the firm must hold\b",
                 ("fraction of each served region's total market (all products) the firm must hold",),
                 ("fraction of the whole market (all products) of every served region that the business has to "
                  "hold",)),
        # leaves "needs" to the generic rule, which words it two ways in training
        Phrasing(r"\bsales-force hours one unit of each product\b(?= needs\b)",
                 ("sales-force hours one unit of each product",),
                 ("sales-force hours that a single unit of every product",)),
        Phrasing(r"\bsales-force hours available in each region\b", ("sales-force hours available in each region",),
                 ("sales-force hours on hand in every region",)),
        Phrasing(r"\bfixed cost of serving each region at all\b", ("fixed cost of serving each region at all",),
                 ("fixed charge for entering every region",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(present only if",)),
    )
    data_fields = {
        "products": "list of product names",
        "regions": "list of sales region names",
        "margin": "margin[product][region]: profit per unit sold",
        "market_size": "market_size[product][region]: units the region's whole market buys",
        "max_share": "largest fraction of any product's market in any region the firm can capture",
        "stock": "units of each product available to sell, keyed by product",
        "min_share": "fraction of each served region's total market (all products) the firm must hold "
                     "(only when there is such a target)",
        "hours_per_unit": "sales-force hours one unit of each product needs, keyed by product (only when "
                          "sales hours are limited)",
        "sales_hours": "sales-force hours available in each region, keyed by region (only when sales hours "
                       "are limited)",
        "entry_cost": "fixed cost of serving each region at all, keyed by region (only when entering a "
                      "region has a cost)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.P = pyo.Set(initialize=data["products"])
model.R = pyo.Set(initialize=data["regions"])
model.sell = pyo.Var(model.P, model.R, domain=pyo.NonNegativeReals)
'''
    _SERVE = '''\
model.serve = pyo.Var(model.R, domain=pyo.Binary)
'''
    _OBJECTIVE = '''\
model.obj = pyo.Objective(
    expr=sum(data["margin"][p][r] * model.sell[p, r] for p in model.P for r in model.R), sense=pyo.maximize)
'''
    _OBJECTIVE_ENTRY = '''\
model.obj = pyo.Objective(
    expr=sum(data["margin"][p][r] * model.sell[p, r] for p in model.P for r in model.R)
    - sum(data["entry_cost"][r] * model.serve[r] for r in model.R), sense=pyo.maximize)
'''
    _BODY = '''\
model.stock = pyo.Constraint(
    model.P, rule=lambda model, p: sum(model.sell[p, r] for r in model.R) <= data["stock"][p])
'''
    _SHARE = '''\
model.max_share = pyo.Constraint(
    model.P, model.R,
    rule=lambda model, p, r: model.sell[p, r] <= data["max_share"] * data["market_size"][p][r])
'''
    _SHARE_ENTRY = '''\
model.max_share = pyo.Constraint(
    model.P, model.R,
    rule=lambda model, p, r: model.sell[p, r] <= data["max_share"] * data["market_size"][p][r] * model.serve[r])
'''
    _MIN_SHARE = '''\
model.min_share = pyo.Constraint(
    model.R, rule=lambda model, r: sum(model.sell[p, r] for p in model.P)
    >= data["min_share"] * sum(data["market_size"][p][r] for p in model.P))
'''
    _MIN_SHARE_ENTRY = '''\
model.min_share = pyo.Constraint(
    model.R, rule=lambda model, r: sum(model.sell[p, r] for p in model.P)
    >= data["min_share"] * sum(data["market_size"][p][r] for p in model.P) * model.serve[r])
'''
    _SALES_HOURS = '''\
model.sales_hours = pyo.Constraint(
    model.R, rule=lambda model, r: sum(data["hours_per_unit"][p] * model.sell[p, r] for p in model.P)
    <= data["sales_hours"][r])
'''

    model_code = _HEAD + _OBJECTIVE + _BODY + _SHARE + _MIN_SHARE  # the LP with a share floor

    def model_code_for(self, data: dict) -> str:
        entry = "entry_cost" in data
        code = self._HEAD + (self._SERVE + self._OBJECTIVE_ENTRY if entry else self._OBJECTIVE) + self._BODY
        code += self._SHARE_ENTRY if entry else self._SHARE
        if "min_share" in data:
            code += self._MIN_SHARE_ENTRY if entry else self._MIN_SHARE
        if "sales_hours" in data:
            code += self._SALES_HOURS
        return code

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "serve": "binary"} if "entry_cost" in data else self.domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "entry_cost" in data else "LP"

    def variant_of(self, data: dict) -> str:
        parts = [key for key in ("min_share", "sales_hours", "entry_cost") if key in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_products = size_for(difficulty, 2, 3, 5, industrial=25)
        n_regions = size_for(difficulty, 3, 5, 8, industrial=40)  # industrial: 1,000 sales variables
        products = pick_names(rng, words["products"], n_products)
        regions = pick_names(rng, words["regions"], n_regions)
        market_size = {p: {r: rng.randint(10, 80) * 10 for r in regions} for p in products}
        margin = {p: {r: rng.randint(4, 60) for r in regions} for p in products}
        max_share = rng.choice([0.4, 0.45, 0.5, 0.55, 0.6])
        # stock is short of what the share caps allow, so the firm must choose where to sell
        stock = {p: int(sum(market_size[p].values()) * rng.uniform(0.2, 0.32)) for p in products}
        data = {"products": products, "regions": regions, "margin": margin, "market_size": market_size,
                "max_share": max_share, "stock": stock}
        min_share = rng.choice([0.05, 0.08, 0.1, 0.12])  # below every product's stock fraction (>= 0.2)
        if rng.random() < 0.5:
            data["min_share"] = min_share
        if rng.random() < 0.5:
            hours = {p: rng.choice([0.5, 1.0, 1.5, 2.0, 2.5]) for p in products}
            data["hours_per_unit"] = hours
            data["sales_hours"] = {}
            for r in regions:
                # room for the share floor at every product's floor share, and a limit that often binds
                floor = sum(hours[p] * min_share * market_size[p][r] for p in products)
                typical = sum(hours[p] * stock[p] / n_regions for p in products)
                data["sales_hours"][r] = int(max(1.5 * floor, typical * rng.uniform(0.6, 1.1))) + 1
        if difficulty != INDUSTRIAL and rng.random() < 0.5:
            data["entry_cost"] = {}
            for r in regions:
                potential = sum(margin[p][r] * max_share * market_size[p][r] for p in products)
                data["entry_cost"][r] = int(potential * rng.uniform(0.05, 0.3)) // 10 * 10 + 10
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a share floor above the share cap: no region can be served, yet every region must reach the floor
        data = {key: value for key, value in data.items() if key != "entry_cost"}
        data["min_share"] = round(data["max_share"] + rng.choice([0.05, 0.1]), 2)
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        products, regions = data["products"], data["regions"]
        entry = "entry_cost" in data
        sell = {(p, r): matrix.add_var(f"sell[{p},{r}]", cost=data["margin"][p][r])
                for p in products for r in regions}
        serve = {r: matrix.add_var(f"serve[{r}]", 0.0, 1.0, cost=-data["entry_cost"][r], integer=True)
                 for r in regions} if entry else {}
        for p in products:
            matrix.add_row({sell[p, r]: 1.0 for r in regions}, upper=data["stock"][p], name=f"stock[{p}]")
        for p in products:
            for r in regions:
                cap = data["max_share"] * data["market_size"][p][r]
                if entry:
                    matrix.add_row({sell[p, r]: 1.0, serve[r]: -cap}, upper=0.0, name=f"max_share[{p},{r}]")
                else:
                    matrix.add_row({sell[p, r]: 1.0}, upper=cap, name=f"max_share[{p},{r}]")
        for r in regions:
            if "min_share" in data:
                floor = data["min_share"] * sum(data["market_size"][p][r] for p in products)
                coefficients = {sell[p, r]: 1.0 for p in products}
                if entry:
                    matrix.add_row({**coefficients, serve[r]: -floor}, lower=0.0, name=f"min_share[{r}]")
                else:
                    matrix.add_row(coefficients, lower=floor, name=f"min_share[{r}]")
            if "sales_hours" in data:
                matrix.add_row({sell[p, r]: data["hours_per_unit"][p] for p in products},
                               upper=data["sales_hours"][r], name=f"sales_hours[{r}]")

    def constraint_rows(self, data: dict, x: dict):
        products, regions = data["products"], data["regions"]
        sell = x["sell"]
        serve = x.get("serve", {}) if "entry_cost" in data else {r: 1.0 for r in regions}
        for p in products:
            yield Row(f"stock[{p}]", sum(sell[p, r] for r in regions), "<=", data["stock"][p])
        for p in products:
            for r in regions:
                yield Row(f"max_share[{p},{r}]", sell[p, r] - data["max_share"] * data["market_size"][p][r]
                          * serve[r], "<=", 0.0)
        for r in regions:
            if "min_share" in data:
                floor = data["min_share"] * sum(data["market_size"][p][r] for p in products)
                yield Row(f"min_share[{r}]", sum(sell[p, r] for p in products) - floor * serve[r], ">=", 0.0)
            if "sales_hours" in data:
                yield Row(f"sales_hours[{r}]", sum(data["hours_per_unit"][p] * sell[p, r] for p in products),
                          "<=", data["sales_hours"][r])

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["margin"][p][r] * x["sell"][p, r] for p in data["products"] for r in data["regions"])
        if "entry_cost" in data:
            total -= sum(data["entry_cost"][r] * x["serve"][r] for r in data["regions"])
        return total

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        products, regions = data["products"], data["regions"]
        unit, money = words["unit"], words["money"]
        intro = {
            "appliances": f"{words['company'].capitalize()} plans its sales in {join_names(regions)} for "
                          f"{words['period']}, selling {join_names(products)}.",
            "beverages": f"{words['company'].capitalize()} plans its sales in {join_names(regions)} for "
                         f"{words['period']}; its range is {join_names(products)}.",
            "seeds": f"For {words['period']}, {words['company']} plans its sales in {join_names(regions)}, "
                     f"offering {join_names(products)}.",
            # the eval scenarios' own openings
            "skincare": f"{words['company'].capitalize()} is drawing up its sales plan for {join_names(regions)}, "
                        f"covering {words['period']}; it sells {join_names(products)}.",
            "tyres": f"Ahead of {words['period']}, {words['company']} is dividing its sales among "
                     f"{join_names(regions)}, with {join_names(products)} to offer.",
        }[scenario.key]
        rules = [f"The firm can capture no share above {fmt(round(data['max_share'] * 100, 6))}% of any product's "
                 "market in any region."]
        if "min_share" in data:
            served = " in every region it serves" if "entry_cost" in data else " in every region"
            rules.append(f"To keep its presence, its total sales{served} must reach at least "
                         f"{fmt(round(data['min_share'] * 100, 6))}% of that region's total market over all "
                         "products.")
        if "entry_cost" in data:
            rules.append("Serving a region at all has a fixed cost (a region not served gets no sales): "
                         + "; ".join(f"{r} {fmt(data['entry_cost'][r])} {money}" for r in regions) + ".")
        if "sales_hours" in data:
            rules.append("Each unit sold takes sales-force time: "
                         + "; ".join(f"{p} {fmt(data['hours_per_unit'][p])} hours per {unit}" for p in products)
                         + ". Sales-force hours available per region: "
                         + "; ".join(f"{r} {fmt(data['sales_hours'][r])}" for r in regions) + ".")
        goal = "total margin" if "entry_cost" not in data else "total margin minus entry costs"
        question = (f"How much of each product should be sold in each region to maximize the {goal}, and what "
                    "is that value? Sales may be fractional.")
        stock = "Stock on hand: " + "; ".join(f"{fmt(data['stock'][p])} {plural(unit)} of {p}" for p in products) + "."
        if representation == "text":
            listing = " ".join(
                f"In {r}, " + "; ".join(f"the {p} market is {fmt(data['market_size'][p][r])} {plural(unit)} with a "
                                        f"margin of {fmt(data['margin'][p][r])} {money} per {unit}"
                                        for p in products) + "." for r in regions)
            return f"{intro} {stock} Market sizes and unit margins: {listing} {' '.join(rules)} {question}"
        if representation == "table":
            sizes = markdown_table([f"market size ({plural(unit)})", *regions],
                                   [[p, *[data["market_size"][p][r] for r in regions]] for p in products])
            margins = markdown_table([f"margin ({money}/{unit})", *regions],
                                     [[p, *[data["margin"][p][r] for r in regions]] for p in products])
            return f"{intro} {stock} Market sizes and unit margins:\n\n{sizes}\n\n{margins}\n\n" \
                   f"{' '.join(rules)} {question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "only when" not in meaning}
            return (f"{intro} Each product's stock is limited and its sales in a region are capped by a share of "
                    f"that region's market. {' '.join(rules)}\n\n{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        entry = "entry_cost" in data
        serve = " y_r" if entry else ""
        parameters = "margin $m_{pr}$, market size $M_{pr}$, share cap $\\bar s$, stock $S_p$"
        objective = "\\max\\ & \\sum_{p \\in P} \\sum_{r \\in R} m_{pr} x_{pr}"
        if entry:
            objective += " - \\sum_{r \\in R} f_r y_r"
            parameters += ", entry cost $f_r$"
        rows = [objective,
                "\\text{s.t.}\\ & \\sum_{r \\in R} x_{pr} \\le S_p && \\forall p \\in P",
                f"& x_{{pr}} \\le \\bar s M_{{pr}}{serve} && \\forall p \\in P, r \\in R"]
        if "min_share" in data:
            parameters += ", share floor $\\underline s$"
            rows.append(f"& \\sum_{{p \\in P}} x_{{pr}} \\ge \\underline s \\sum_{{p \\in P}} M_{{pr}}{serve} "
                        "&& \\forall r \\in R")
        if "sales_hours" in data:
            parameters += ", hours per unit $h_p$, sales hours $H_r$"
            rows.append("& \\sum_{p \\in P} h_p x_{pr} \\le H_r && \\forall r \\in R")
        rows.append("& x_{pr} \\ge 0" + (", \\ y_r \\in \\{0, 1\\}" if entry else ""))
        variables = "$x_{pr} \\ge 0$, units of $p$ sold in region $r$"
        if entry:
            variables += "; $y_r \\in \\{0, 1\\}$, 1 when region $r$ is served"
        return (f"**Sets**: products $P$, regions $R$.\n\n**Parameters**: {parameters}.\n\n"
                f"**Variables**: {variables}.\n\n$$\n\\begin{{aligned}}\n" + " \\\\\n".join(rows)
                + "\n\\end{aligned}\n$$")


FAMILY = MarketShare()
