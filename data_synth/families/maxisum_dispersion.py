"""Maxisum dispersion (MILP): choose exactly p of the candidate sites so that the sum of the distances
between every pair of chosen sites is as large as possible.

The product x_a x_b of two binary choices is linearised by one variable per pair, y_ab in [0, 1], with
y_ab <= x_a and y_ab <= x_b; since every distance is positive and the objective is maximized, y_ab takes
the value of the product at an optimum (the row y_ab >= x_a + x_b - 1 is never needed).

Structure variants (drawn per instance, recorded by the keys present): an opening budget over per-site
costs (`budget`, with `cost`), a minimum separation below which two sites may not both be chosen
(`min_separation`), and sites already committed that must be kept (`required`), each present or
absent: eight program skeletons. The limits are drawn around a spread-out choice of p sites that
satisfies them, so every variant stays feasible."""

from __future__ import annotations

import random

from data_synth.families.p_dispersion import distance_statement, site_distances, site_pairs
from data_synth.family import (
    MatrixModel,
    ProblemFamily,
    Row,
    Scenario,
    describe_data_file,
    fmt,
    join_names,
    pick_names,
    plural,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("seed_bank", "plant genetic resources", {
        "intro": "A seed bank can afford to regenerate only a few of its wheat accessions this year and wants "
                 "the chosen ones to be as genetically diverse as possible.",
        "site": "accession", "site_names": ["Accession A-12", "Accession B-07", "Accession C-33", "Accession D-18",
                                            "Accession E-41", "Accession F-05", "Accession G-29",
                                            "Accession H-14", "Accession J-36", "Accession K-22",
                                            "Accession L-09", "Accession M-47", "Accession N-31",
                                            "Accession P-16"],
        "distance_unit": "genetic distance points", "money": "thousand dollars", "cost_word": "regeneration cost",
        "spread": "diversity",
    }),
    Scenario("stockpiles", "disaster preparedness", {
        "intro": "A civil-protection agency is placing emergency supply stockpiles and wants them spread out, "
                 "so that one disaster cannot reach several of them.",
        "site": "stockpile site", "site_names": ["Arden", "Belmont", "Carlow", "Denby", "Elgin", "Felton",
                                                 "Garston", "Hollis", "Irwell", "Jarrow", "Kelso", "Linton",
                                                 "Morley", "Norton"],
        "distance_unit": "km", "money": "thousand euros", "cost_word": "set-up cost", "spread": "spread",
    }),
    Scenario("monitoring", "environmental monitoring", {
        "intro": "An environment agency is choosing locations for air-quality monitoring stations and wants "
                 "them far apart, so that together they sample as much of the region as possible.",
        "site": "station location", "site_names": ["Ridge Farm", "Weir Lane", "Church Green", "Moss Side",
                                                   "Fox Covert", "Heath End", "Brook Meadow", "Kiln Field",
                                                   "Windmill Hill", "Lock Cottage", "Orchard Row", "Pond Close",
                                                   "Quarry Top", "Saltings"],
        "distance_unit": "km", "money": "thousand pounds", "cost_word": "installation cost", "spread": "spread",
    }),
)

# the eval split's own industries, sites and units (held out from training)
EVAL_SCENARIOS = (
    Scenario("kiosks", "coffee retail", {
        "intro": "A coffee chain is choosing neighbourhoods for new kiosks in a metropolitan area and wants them "
                 "far from one another, so that the kiosks do not compete for the same passers-by.",
        "site": "kiosk location", "site_names": ["Ashgrove", "Bayview", "Cobble Hill", "Dunmore Park", "Eastgate",
                                                 "Fairhaven", "Glenwood", "Highbury", "Ivy Bridge",
                                                 "Juniper Heights", "Kingsmead", "Lakeside", "Maplewood",
                                                 "Northcliff"],
        "distance_unit": "miles", "money": "thousand dollars", "cost_word": "fit-out cost", "spread": "dispersion",
    }),
    Scenario("lynx", "wildlife reintroduction", {
        "intro": "A wildlife trust is picking release sites for captive-bred lynx in a mountain range and wants "
                 "them far apart, so that the released animals settle in territories of their own.",
        "site": "release site", "site_names": ["Hollow Beck", "Rowan Clough", "Black Tarn", "Sedge Moor",
                                               "Curlew Fell", "Otter Holt", "Badger Wood", "Bracken Gill",
                                               "Heather Crag", "Raven Scar", "Birk Howe", "Alder Carr", "Whin Rigg",
                                               "Thorn Dale"],
        "distance_unit": "km", "money": "thousand Swiss francs", "cost_word": "release-pen cost",
        "spread": "separation",
    }),
)


class MaxisumDispersion(ProblemFamily):
    name = "maxisum_dispersion"
    title = "Maxisum dispersion"
    problem_type = "MILP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"pick": "binary", "both": "nonnegative"}
    data_fields = {
        "sites": "list of candidate site names",
        "p": "number of sites to choose",
        "distance": "distance[a][b]: distance between sites a and b (symmetric, for every a != b)",
        "cost": "cost of opening each site, keyed by site (only when there is a budget)",
        "budget": "most total opening cost (only when there is a budget)",
        "min_separation": "two sites closer than this may not both be chosen (only when there is a minimum "
                          "separation)",
        "required": "sites already committed that must be chosen (only when there are such sites)",
    }
    phrasings = (
        Phrasing(r"\bwill be selected among the candidates\b", ("will be selected among the candidates",),
                 ("are to be picked from the candidates",)),
        Phrasing(r"\bthe sum of the distances over all pairs of chosen sites\b",
                 ("the sum of the distances over all pairs of chosen sites",
                  "the total distance summed over every pair of chosen sites"),
                 ("the combined pairwise distance of the selected sites",)),
        Phrasing(r"\bmay not both be chosen\b", ("may not both be chosen",), ("cannot be selected together",)),
        Phrasing(r"\bAlready committed, so kept in the selection:",
                 ("Already committed, so kept in the selection:",),
                 ("Fixed in advance as part of the selection:",)),
        # eval-only rewordings of the fixed sentences of every statement, and of the distance listing and the
        # data.json fields this family shares with p_dispersion (training keeps its text)
        Phrasing(r"\bThe distances in\b", ("The distances in",), ("Measured in",)),  # then the unit
        Phrasing(r" between the sites are:", (" between the sites are:",), (", the pairwise distances are:",)),
        Phrasing(r"\(their total\b", ("(their total",), ("(that is, their overall",)),
        Phrasing(r"\bshould be chosen to maximize\b", ("should be chosen to maximize",),
                 ("are best chosen to maximise", "ought to be picked to maximise")),
        Phrasing(r"\blist of candidate site names\b", ("list of candidate site names",),
                 ("names of the prospective sites",)),
        Phrasing(r"\bnumber of sites to choose\b", ("number of sites to choose",),
                 ("count of sites to be selected",)),
        Phrasing(r"\bdistance between sites a and b \(symmetric, for every a != b\)",
                 ("distance between sites a and b (symmetric, for every a != b)",),
                 ("separation of sites a and b, the same both ways (given for all a != b)",)),
        Phrasing(r"\bcost of opening each site,", ("cost of opening each site,",), ("opening cost of every site,",)),
        Phrasing(r"\(only when there is a budget\)", ("(only when there is a budget)",),
                 ("(present if a budget applies)",)),
        Phrasing(r"\bmost total opening cost\b", ("most total opening cost",),
                 ("upper limit on the summed opening cost",)),
        Phrasing(r"\btwo sites closer than this may not both be chosen \(only when there is a minimum separation\)",
                 ("two sites closer than this may not both be chosen (only when there is a minimum separation)",),
                 ("smallest distance allowed between two selected sites (present if a minimum separation "
                  "applies)",)),
        Phrasing(r"\bsites already committed that must be chosen \(only when there are such sites\)",
                 ("sites already committed that must be chosen (only when there are such sites)",),
                 ("sites committed beforehand, which have to be in the selection (present if there are any)",)),
    )
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.S = pyo.Set(initialize=data["sites"])
model.pairs = pyo.Set(initialize=[(a, b) for k, a in enumerate(data["sites"]) for b in data["sites"][k + 1:]],
                      dimen=2)
model.pick = pyo.Var(model.S, domain=pyo.Binary)
model.both = pyo.Var(model.pairs, bounds=(0, 1))  # pick[a] * pick[b], linearised

model.obj = pyo.Objective(expr=sum(data["distance"][a][b] * model.both[a, b] for a, b in model.pairs),
                          sense=pyo.maximize)
model.choose_p = pyo.Constraint(expr=sum(model.pick[s] for s in model.S) == data["p"])
# a pair counts only when both of its sites are chosen (the objective pushes both up to the product)
model.first = pyo.Constraint(model.pairs, rule=lambda model, a, b: model.both[a, b] <= model.pick[a])
model.second = pyo.Constraint(model.pairs, rule=lambda model, a, b: model.both[a, b] <= model.pick[b])
'''
    _BUDGET = '''\

# the opening costs of the chosen sites stay within the budget
model.budget = pyo.Constraint(expr=sum(data["cost"][s] * model.pick[s] for s in model.S) <= data["budget"])
'''
    _SEPARATION = '''\

# two sites closer than the minimum separation are not both chosen
model.close = pyo.Set(initialize=[(a, b) for a, b in model.pairs
                                  if data["distance"][a][b] < data["min_separation"]], dimen=2)
model.separation = pyo.Constraint(model.close, rule=lambda model, a, b: model.pick[a] + model.pick[b] <= 1)
'''
    _REQUIRED = '''\

# sites already in use stay chosen
model.required = pyo.Constraint(data["required"], rule=lambda model, s: model.pick[s] == 1)
'''

    model_code = _HEAD + _SEPARATION  # the model with a minimum separation (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD
        if "budget" in data:
            code += self._BUDGET
        if "min_separation" in data:
            code += self._SEPARATION
        if "required" in data:
            code += self._REQUIRED
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("budget", "min_separation", "required") if name in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_sites = size_for(difficulty, 6, 9, 12)
        sites = pick_names(rng, words["site_names"], n_sites)
        distance = site_distances(rng, sites)
        p = rng.randint(3, max(3, n_sites // 2))
        data = {"sites": sites, "p": p, "distance": distance}
        # a spread-out choice of p sites (farthest point first) that every optional limit admits
        chosen = [rng.choice(sites)]
        while len(chosen) < p:
            chosen.append(max((s for s in sites if s not in chosen),
                              key=lambda s: (min(distance[s][c] for c in chosen), -sites.index(s))))
        if rng.random() < 0.5:
            cost = {s: rng.randint(15, 80) for s in sites}
            data["cost"] = cost
            data["budget"] = int(sum(cost[s] for s in chosen) * rng.uniform(1.0, 1.15))
        if rng.random() < 0.5:
            data["min_separation"] = min(distance[a][b] for a, b in site_pairs(chosen))
        if rng.random() < 0.5:
            data["required"] = sorted(rng.sample(chosen, 1))
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        data = dict(data)
        if "budget" in data:
            # the budget cannot pay for even the p cheapest sites
            data["budget"] = sum(sorted(data["cost"].values())[:data["p"]]) - rng.randint(1, 10)
        else:
            # more sites to choose than there are candidates
            data["p"] = len(data["sites"]) + rng.randint(1, 2)
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        sites, distance = data["sites"], data["distance"]
        required = set(data.get("required", ()))
        pick = {s: matrix.add_var(f"pick[{s}]", 1.0 if s in required else 0.0, 1.0, integer=True) for s in sites}
        both = {(a, b): matrix.add_var(f"both[{a},{b}]", 0.0, 1.0, cost=distance[a][b]) for a, b in site_pairs(sites)}
        matrix.add_row({pick[s]: 1.0 for s in sites}, data["p"], data["p"], name="choose_p")
        for (a, b), column in both.items():
            matrix.add_row({column: 1.0, pick[a]: -1.0}, upper=0.0, name=f"first[{a},{b}]")
            matrix.add_row({column: 1.0, pick[b]: -1.0}, upper=0.0, name=f"second[{a},{b}]")
        if "budget" in data:
            matrix.add_row({pick[s]: data["cost"][s] for s in sites}, upper=data["budget"], name="budget")
        if "min_separation" in data:
            for a, b in site_pairs(sites):
                if distance[a][b] < data["min_separation"]:
                    matrix.add_row({pick[a]: 1.0, pick[b]: 1.0}, upper=1.0, name=f"separation[{a},{b}]")

    def constraint_rows(self, data: dict, x: dict):
        pick, both = x["pick"], x["both"]
        sites, distance = data["sites"], data["distance"]
        yield Row("choose_p", sum(pick[s] for s in sites), "==", data["p"])
        for a, b in site_pairs(sites):
            yield Row(f"first[{a},{b}]", both[a, b], "<=", pick[a])
            yield Row(f"second[{a},{b}]", both[a, b], "<=", pick[b])
            yield Row(f"both_bound[{a},{b}]", both[a, b], "<=", 1)
        if "budget" in data:
            yield Row("budget", sum(data["cost"][s] * pick[s] for s in sites), "<=", data["budget"])
        if "min_separation" in data:
            for a, b in site_pairs(sites):
                if distance[a][b] < data["min_separation"]:
                    yield Row(f"separation[{a},{b}]", pick[a] + pick[b], "<=", 1)
        for s in data.get("required", ()):
            yield Row(f"required[{s}]", pick[s], "==", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        # the sum of the distances between chosen sites, from the choice alone
        chosen = [s for s in data["sites"] if x["pick"][s] > 0.5]
        return sum(data["distance"][a][b] for a, b in site_pairs(chosen))

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        chosen = [s for s in data["sites"] if x["pick"][s] > 0.5]
        total = sum(data["distance"][a][b] for a, b in site_pairs(chosen))
        return (f"- choose {join_names(chosen)}\n- {len(site_pairs(chosen))} pairs, total distance {fmt(total)} "
                f"{scenario.words['distance_unit']}")

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        sites, site, unit, money = data["sites"], words["site"], words["distance_unit"], words["money"]
        intro = (f"{words['intro']} The candidate {plural(site)} are {join_names(sites)}; exactly {fmt(data['p'])} "
                 "will be selected among the candidates.")
        rules = []
        if "budget" in data:
            if representation != "file":
                rules.append(f"The {words['cost_word']} of each {site} in {money} is: "
                             + "; ".join(f"{s} {fmt(data['cost'][s])}" for s in sites) + ".")
            rules.append(f"The total {words['cost_word']} of the chosen {plural(site)} may not exceed "
                         f"{fmt(data['budget'])} {money}.")
        if "min_separation" in data:
            rules.append(f"Two {plural(site)} less than {fmt(data['min_separation'])} {unit} apart may not both be "
                         "chosen.")
        if "required" in data:
            rules.append(f"Already committed, so kept in the selection: {join_names(data['required'])}.")
        question = (f"Which {fmt(data['p'])} {plural(site)} should be chosen to maximize the sum of the distances over "
                    f"all pairs of chosen sites (their total {words['spread']}), and what is that sum?")
        rules_text = " ".join(rules)
        if representation == "text":
            return " ".join(part for part in (intro, distance_statement(data, "text", unit), rules_text, question)
                            if part)
        if representation == "table":
            table = distance_statement(data, "table", unit)
            return f"{intro}\n\n{table}\n\n" + " ".join(part for part in (rules_text, question) if part)
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return (" ".join(part for part in (intro, rules_text) if part)
                    + f"\n\n{describe_data_file(fields)}\n\n{question}")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        parameters = "distance $d_{ab} > 0$, number of sites $p$"
        rows = ["\\text{s.t.}\\ & \\sum_{s \\in S} x_s = p",
                "& y_{ab} \\le x_a,\\ y_{ab} \\le x_b && \\forall a, b \\in S,\\ a < b"]
        if "budget" in data:
            parameters += ", cost $c_s$, budget $B$"
            rows.append("& \\sum_{s \\in S} c_s x_s \\le B")
        if "min_separation" in data:
            parameters += ", minimum separation $L$"
            rows.append("& x_a + x_b \\le 1 && \\forall a < b: d_{ab} < L")
        if "required" in data:
            parameters += ", sites in use $E \\subseteq S$"
            rows.append("& x_s = 1 && \\forall s \\in E")
        rows.append("& x_s \\in \\{0, 1\\},\\ 0 \\le y_{ab} \\le 1")
        return (
            "**Sets**: candidate sites $S$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            "**Variables**: $x_s \\in \\{0, 1\\}$ (site chosen), $y_{ab} \\in [0, 1]$ (both $a$ and $b$ chosen: "
            "the linearised product $x_a x_b$).\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & \\sum_{a < b} d_{ab} y_{ab} \\\\\n" + " \\\\\n".join(rows)
            + "\n\\end{aligned}\n$$"
        )


FAMILY = MaxisumDispersion()
