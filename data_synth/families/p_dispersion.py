"""p-dispersion (MILP): choose exactly p of the candidate sites so that the smallest distance between two
chosen sites is as large as possible (max-min dispersion).

The model keeps one variable D for the smallest distance and one row per pair of sites,
D <= d_ab + M (2 - x_a - x_b): when both sites are chosen it caps D at their distance, otherwise it is
slack. M is the range of the distances (largest minus smallest), the tightest big-M that is always valid
(D never needs to exceed the largest distance).

Structure variants (drawn per instance, recorded by the keys present): an opening budget over per-site
costs (`budget`, with `cost`), a limit on the chosen sites per region (`max_per_region`, with `regions`
and `region`), and sites that are already in use and must be kept (`required`), each present or absent:
eight program skeletons. The limits are drawn around a random choice of p sites that satisfies them, so
every variant stays feasible."""

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
    pick_names,
    plural,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("franchise", "restaurant franchising", {
        "intro": "A burger franchise is placing new restaurants and wants them as far apart as possible, so "
                 "that they do not take customers from one another.",
        "site": "location", "site_names": ["Maple Mall", "Harbor Point", "Oak Plaza", "Station Square",
                                           "Riverwalk", "Pine Center", "College Row", "Airport Road",
                                           "Lakeshore", "Market Street", "Hilltop", "Old Mill", "Bridgeview",
                                           "Sunset Strip"],
        "region_names": ["North district", "South district", "East district", "West district"],
        "distance_unit": "km", "money": "thousand dollars", "cost_word": "fit-out cost",
    }),
    Scenario("hazmat", "chemical storage safety", {
        "intro": "A chemical company is choosing where to put its hazardous-material depots; for safety, no "
                 "two depots should be close to each other.",
        "site": "depot site", "site_names": ["Quarry A", "Quarry B", "Dockyard", "Rail Siding", "North Field",
                                             "South Field", "Old Foundry", "Salt Flats", "Canal Bank",
                                             "Gravel Pit", "Ridge Yard", "Marsh Plot", "Tank Farm", "Mill Lane"],
        "region_names": ["Zone 1", "Zone 2", "Zone 3", "Zone 4"],
        "distance_unit": "km", "money": "thousand euros", "cost_word": "permit and build cost",
    }),
    Scenario("transmitters", "radio broadcasting", {
        "intro": "A broadcaster is choosing masts for a new radio network; masts close to each other "
                 "interfere, so the chosen masts should be spread out.",
        "site": "mast site", "site_names": ["Beacon Hill", "Crow Peak", "Fell Top", "Grey Tor", "High Moor",
                                            "Kite Ridge", "Long Knoll", "Mist Crag", "Raven Scar",
                                            "Stone Edge", "Thorn Brow", "Wind Law", "Ash Fell", "Dun Rigg"],
        "region_names": ["Valley county", "Coast county", "Upland county", "Border county"],
        "distance_unit": "miles", "money": "thousand pounds", "cost_word": "lease and build cost",
    }),
)
# the eval split's own industries, companies, site and region names, units and currencies (held out from training)
EVAL_SCENARIOS = (
    Scenario("wind", "wind energy", {
        "intro": "A wind developer is siting new turbines on a plateau and wants them spread as widely as "
                 "possible, since turbines standing close together rob one another of wind.",
        "site": "turbine pad", "site_names": ["Pad Aster", "Pad Birch", "Pad Cobalt", "Pad Dahlia", "Pad Ember",
                                              "Pad Flint", "Pad Garnet", "Pad Hazel", "Pad Iris", "Pad Jasper",
                                              "Pad Kestrel", "Pad Linden", "Pad Myrtle", "Pad Nettle"],
        "region_names": ["Upper plateau", "Lower plateau", "East slope", "West slope"],
        "distance_unit": "kilometres", "money": "million kroner", "cost_word": "foundation and cabling cost",
    }),
    Scenario("apiary", "beekeeping", {
        "intro": "A beekeeping cooperative is placing hives across farmland; hives that sit close together "
                 "compete for the same flowers, so the chosen spots should lie far apart.",
        "site": "hive spot", "site_names": ["Clover Bank", "Heather Knap", "Lime Avenue", "Orchard Gate",
                                            "Willow Bend", "Bramble Corner", "Poppy Field", "Sorrel Meadow",
                                            "Thistle Ridge", "Vetch Lane", "Yarrow Green", "Elder Copse",
                                            "Rowan Hedge", "Mallow Brook"],
        "region_names": ["Ashby parish", "Brent parish", "Colne parish", "Dene parish"],
        "distance_unit": "miles", "money": "pounds", "cost_word": "stand and fencing cost",
    }),
    Scenario("chargers", "electric-vehicle charging", {
        "intro": "An electric-vehicle charging network is picking sites for fast chargers and wants them well "
                 "spread out, so that every charger serves a catchment of its own.",
        "site": "charger site", "site_names": ["Ferry Terminal", "Ring Road Services", "Castle Car Park",
                                               "Science Park", "Retail Quarter", "Hospital Car Park", "Stadium Lot",
                                               "Marina Front", "Cathedral Close", "Bus Depot", "Garden Centre",
                                               "Canal Basin", "Tech Campus", "Leisure Centre"],
        "region_names": ["Inner ring", "Outer ring", "North corridor", "South corridor"],
        "distance_unit": "km", "money": "thousand Swiss francs", "cost_word": "grid connection cost",
    }),
)


def site_distances(rng: random.Random, sites: list[str], side: float = 60.0) -> dict[str, dict[str, int]]:
    """Rounded Euclidean distances (at least 1) between random points in a square, as
    distance[a][b] for every ordered pair a != b (symmetric)."""
    where = {s: (rng.uniform(0, side), rng.uniform(0, side)) for s in sites}
    return {a: {b: max(1, round(math.dist(where[a], where[b]))) for b in sites if b != a} for a in sites}


def site_pairs(sites: list[str]) -> list[tuple[str, str]]:
    """Every unordered pair of sites once, in the order of the list."""
    return [(a, b) for k, a in enumerate(sites) for b in sites[k + 1:]]


def distance_statement(data: dict, representation: str, unit: str) -> str:
    """The pairwise distances as prose ("text") or as a Markdown matrix ("table")."""
    sites = data["sites"]
    if representation == "text":
        return (f"The distances in {unit} between the sites are: "
                + "; ".join(f"{a} to {b} {fmt(data['distance'][a][b])}" for a, b in site_pairs(sites)) + ".")
    return markdown_table([f"distance ({unit})", *sites],
                          [[a, *["-" if a == b else fmt(data["distance"][a][b]) for b in sites]] for a in sites])


class PDispersion(ProblemFamily):
    name = "p_dispersion"
    title = "p-dispersion (max-min distance)"
    problem_type = "MILP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"pick": "binary", "min_distance": "nonnegative"}
    data_fields = {
        "sites": "list of candidate site names",
        "p": "number of sites to choose",
        "distance": "distance[a][b]: distance between sites a and b (symmetric, for every a != b)",
        "cost": "cost of opening each site, keyed by site (only when there is a budget)",
        "budget": "most total opening cost (only when there is a budget)",
        "regions": "list of region names (only when there is a limit per region)",
        "region": "region of each site, keyed by site (only when there is a limit per region)",
        "max_per_region": "most chosen sites in any one region (only when there is a limit per region)",
        "required": "sites already in use that must be chosen (only when there are such sites)",
    }
    phrasings = (
        Phrasing(r"\bare to be chosen from the candidates\b", ("are to be chosen from the candidates",),
                 ("must be selected among the candidates",)),
        Phrasing(r"\bthe smallest distance between any two chosen sites\b",
                 ("the smallest distance between any two chosen sites",
                  "the shortest distance separating two chosen sites"),
                 ("the closest spacing of any pair of selected sites",)),
        Phrasing(r"\bAlready in use and to be kept among the chosen sites:",
                 ("Already in use and to be kept among the chosen sites:",),
                 ("Operating today, so they stay in the selection:",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bThe candidate\b", ("The candidate",), ("The possible",)),
        Phrasing(r"\bThe distances in\b", ("The distances in",), ("Measured in",)),
        Phrasing(r" between the sites are:", (" between the sites are:",),
                 (", the pairwise site distances are:",)),
        # the generic "cost of" rule takes the words before this rule and the budget rule below
        Phrasing(r"(?<=of )each site in\b", ("each site in",), ("every site, in",)),
        Phrasing(r"(?<=[a-z]) is: ", (" is: ",), (", is: ",)),
        # "may not exceed" and "at most" have two training wordings: these rules stop before them or start
        # after them
        Phrasing(r"(?<=of )the chosen sites (?=may not exceed\b)", ("the chosen sites ",),
                 ("the selected sites ",)),
        Phrasing(r"(?<=\d )chosen sites may lie in any one region\b",
                 ("chosen sites may lie in any one region",),
                 ("selected sites can sit in a single region",)),
        Phrasing(r"\bThe sites lie in these regions:", ("The sites lie in these regions:",),
                 ("Region by region, the sites are:",)),
        Phrasing(r"\bshould be chosen to maximize\b", ("should be chosen to maximize",),
                 ("ought to be picked so as to maximise",)),
        # table headers
        Phrasing(r"(?<=\| )distance \(", ("distance (",), ("separation (",)),
        Phrasing(r"(?<=\| )site(?= \|)", ("site",), ("location",)),
        Phrasing(r"(?<=\| )region(?= \|)", ("region",), ("area",)),
        # data.json fields
        Phrasing(r"\blist of candidate site names\b", ("list of candidate site names",),
                 ("names of the possible sites",)),
        Phrasing(r"\bnumber of sites to choose\b", ("number of sites to choose",),
                 ("count of sites to be selected",)),
        Phrasing(r"\bdistance between sites a and b \(symmetric, for every a != b\)",
                 ("distance between sites a and b (symmetric, for every a != b)",),
                 ("distance from site a to site b (the same both ways, for all a != b)",)),
        Phrasing(r"\bcost of opening each site\b", ("cost of opening each site",),
                 ("opening cost of a site",)),
        Phrasing(r"\(only when there is a budget\)", ("(only when there is a budget)",),
                 ("(present only if a budget applies)",)),
        Phrasing(r"\bmost total opening cost\b", ("most total opening cost",),
                 ("largest allowed sum of opening costs",)),
        Phrasing(r"\blist of region names\b", ("list of region names",), ("names of the regions",)),
        Phrasing(r"\(only when there is a limit per region\)", ("(only when there is a limit per region)",),
                 ("(present only if regions are capped)",)),
        Phrasing(r"\bregion of each site\b", ("region of each site",), ("region a site lies in",)),
        Phrasing(r"\bmost chosen sites in any one region\b", ("most chosen sites in any one region",),
                 ("largest number of selected sites in a single region",)),
        Phrasing(r"\bsites already in use that must be chosen\b",
                 ("sites already in use that must be chosen",),
                 ("sites operating today, which have to be selected",)),
        Phrasing(r"\(only when there are such sites\)", ("(only when there are such sites)",),
                 ("(present only if some sites are already in use)",)),
    )
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.S = pyo.Set(initialize=data["sites"])
model.pairs = pyo.Set(initialize=[(a, b) for k, a in enumerate(data["sites"]) for b in data["sites"][k + 1:]],
                      dimen=2)
model.pick = pyo.Var(model.S, domain=pyo.Binary)
model.min_distance = pyo.Var(domain=pyo.NonNegativeReals)  # smallest distance between two chosen sites

# big-M: the range of the distances, so the row of a pair not both chosen never binds
distances = [data["distance"][a][b] for a, b in model.pairs]
big_m = max(distances) - min(distances)

model.obj = pyo.Objective(expr=model.min_distance, sense=pyo.maximize)
model.choose_p = pyo.Constraint(expr=sum(model.pick[s] for s in model.S) == data["p"])
model.spread = pyo.Constraint(model.pairs, rule=lambda model, a, b: model.min_distance
                              <= data["distance"][a][b] + big_m * (2 - model.pick[a] - model.pick[b]))
'''
    _BUDGET = '''\

# the opening costs of the chosen sites stay within the budget
model.budget = pyo.Constraint(expr=sum(data["cost"][s] * model.pick[s] for s in model.S) <= data["budget"])
'''
    _REGIONS = '''\

# at most max_per_region chosen sites in each region
model.R = pyo.Set(initialize=data["regions"])
model.per_region = pyo.Constraint(model.R, rule=lambda model, r: sum(
    model.pick[s] for s in model.S if data["region"][s] == r) <= data["max_per_region"])
'''
    _REQUIRED = '''\

# sites already in use stay chosen
model.required = pyo.Constraint(data["required"], rule=lambda model, s: model.pick[s] == 1)
'''

    model_code = _HEAD + _BUDGET  # the model with a budget (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD
        if "budget" in data:
            code += self._BUDGET
        if "max_per_region" in data:
            code += self._REGIONS
        if "required" in data:
            code += self._REQUIRED
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("budget", "max_per_region", "required") if name in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_sites = size_for(difficulty, 6, 9, 12)
        sites = pick_names(rng, words["site_names"], n_sites)
        distance = site_distances(rng, sites)
        p = rng.randint(3, max(3, n_sites // 2))
        data = {"sites": sites, "p": p, "distance": distance}
        # a random choice of p sites that every optional limit admits
        chosen = rng.sample(sites, p)
        if rng.random() < 0.5:
            cost = {s: rng.randint(20, 90) for s in sites}
            data["cost"] = cost
            data["budget"] = int(sum(cost[s] for s in chosen) * rng.uniform(1.0, 1.15))
        if rng.random() < 0.5:
            regions = rng.sample(words["region_names"], rng.randint(2, min(4, p)))
            data["regions"] = regions
            # every region holds at least one site, the rest fall anywhere
            order = rng.sample(sites, n_sites)
            region = {s: regions[k] if k < len(regions) else rng.choice(regions) for k, s in enumerate(order)}
            data["region"] = {s: region[s] for s in sites}
            per_region = {r: sum(1 for s in chosen if data["region"][s] == r) for r in regions}
            data["max_per_region"] = max(per_region.values())
        if rng.random() < 0.5:
            data["required"] = sorted(rng.sample(chosen, 1))
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        data = dict(data)
        if "budget" in data:
            # the budget cannot pay for even the p cheapest sites
            cheapest = sorted(data["cost"].values())[:data["p"]]
            data["budget"] = sum(cheapest) - rng.randint(1, 10)
        else:
            # more sites to choose than there are candidates
            data["p"] = len(data["sites"]) + rng.randint(1, 2)
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        sites, distance = data["sites"], data["distance"]
        required = set(data.get("required", ()))
        pick = {s: matrix.add_var(f"pick[{s}]", 1.0 if s in required else 0.0, 1.0, integer=True) for s in sites}
        smallest = matrix.add_var("min_distance", cost=1.0)
        matrix.add_row({pick[s]: 1.0 for s in sites}, data["p"], data["p"], name="choose_p")
        values = [distance[a][b] for a, b in site_pairs(sites)]
        big_m = max(values) - min(values)
        for a, b in site_pairs(sites):
            # D + M x_a + M x_b <= d_ab + 2M
            matrix.add_row({smallest: 1.0, pick[a]: big_m, pick[b]: big_m}, upper=distance[a][b] + 2 * big_m,
                           name=f"spread[{a},{b}]")
        if "budget" in data:
            matrix.add_row({pick[s]: data["cost"][s] for s in sites}, upper=data["budget"], name="budget")
        if "max_per_region" in data:
            for r in data["regions"]:
                members = [s for s in sites if data["region"][s] == r]
                if members:
                    matrix.add_row({pick[s]: 1.0 for s in members}, upper=data["max_per_region"],
                                   name=f"per_region[{r}]")

    def constraint_rows(self, data: dict, x: dict):
        pick, smallest = x["pick"], x["min_distance"][None]
        sites, distance = data["sites"], data["distance"]
        yield Row("choose_p", sum(pick[s] for s in sites), "==", data["p"])
        values = [distance[a][b] for a, b in site_pairs(sites)]
        big_m = max(values) - min(values)
        for a, b in site_pairs(sites):
            yield Row(f"spread[{a},{b}]", smallest, "<=", distance[a][b] + big_m * (2 - pick[a] - pick[b]))
        if "budget" in data:
            yield Row("budget", sum(data["cost"][s] * pick[s] for s in sites), "<=", data["budget"])
        if "max_per_region" in data:
            for r in data["regions"]:
                yield Row(f"per_region[{r}]", sum(pick[s] for s in sites if data["region"][s] == r), "<=",
                          data["max_per_region"])
        for s in data.get("required", ()):
            yield Row(f"required[{s}]", pick[s], "==", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        # the smallest distance between two chosen sites, from the choice alone
        chosen = [s for s in data["sites"] if x["pick"][s] > 0.5]
        return min(data["distance"][a][b] for a, b in site_pairs(chosen))

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        chosen = [s for s in data["sites"] if x["pick"][s] > 0.5]
        closest = min(site_pairs(chosen), key=lambda pair: data["distance"][pair[0]][pair[1]])
        return (f"- choose {join_names(chosen)}\n- the closest chosen pair is {closest[0]} and {closest[1]}, "
                f"{fmt(data['distance'][closest[0]][closest[1]])} {scenario.words['distance_unit']} apart")

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        sites, site, unit, money = data["sites"], words["site"], words["distance_unit"], words["money"]
        intro = (f"{words['intro']} The candidate {plural(site)} are {join_names(sites)}; exactly {fmt(data['p'])} "
                 "sites are to be chosen from the candidates.")
        rules = []
        if "budget" in data:
            if representation == "text":
                rules.append(f"The {words['cost_word']} of each site in {money} is: "
                             + "; ".join(f"{s} {fmt(data['cost'][s])}" for s in sites) + ".")
            rules.append(f"The total {words['cost_word']} of the chosen sites may not exceed "
                         f"{fmt(data['budget'])} {money}.")
        if "max_per_region" in data:
            if representation == "text":
                rules.append("The sites lie in these regions: " + "; ".join(
                    f"{r}: {join_names([s for s in sites if data['region'][s] == r])}"
                    for r in data["regions"]) + ".")
            rules.append(f"At most {fmt(data['max_per_region'])} chosen sites may lie in any one region "
                         f"({join_names(data['regions'])}).")
        if "required" in data:
            rules.append(f"Already in use and to be kept among the chosen sites: {join_names(data['required'])}.")
        question = (f"Which {fmt(data['p'])} {plural(site)} should be chosen to maximize the smallest distance between "
                    "any two chosen sites, and what is that distance?")
        text_rules = " ".join(rules)
        if representation == "text":
            return " ".join(part for part in (intro, distance_statement(data, "text", unit), text_rules, question)
                            if part)
        if representation == "table":
            table = distance_statement(data, "table", unit)
            if "budget" in data or "max_per_region" in data:
                headers, columns = ["site"], []
                if "budget" in data:
                    headers.append(f"{words['cost_word']} ({money})")
                    columns.append(lambda s: data["cost"][s])
                if "max_per_region" in data:
                    headers.append("region")
                    columns.append(lambda s: data["region"][s])
                table += "\n\n" + markdown_table(headers, [[s, *[column(s) for column in columns]] for s in sites])
            return f"{intro}\n\n{table}\n\n{text_rules} {question}".replace("\n\n ", "\n\n")
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro} {text_rules}\n\n{describe_data_file(fields)}\n\n{question}".replace(" \n", "\n")
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        parameters = ("distance $d_{ab}$, number of sites $p$, $M = \\max_{a<b} d_{ab} - \\min_{a<b} d_{ab}$")
        rows = ["\\text{s.t.}\\ & \\sum_{s \\in S} x_s = p",
                "& D \\le d_{ab} + M (2 - x_a - x_b) && \\forall a, b \\in S,\\ a < b"]
        if "budget" in data:
            parameters += ", cost $c_s$, budget $B$"
            rows.append("& \\sum_{s \\in S} c_s x_s \\le B")
        if "max_per_region" in data:
            parameters += ", regions $R$ with sites $S_r$, limit $K$"
            rows.append("& \\sum_{s \\in S_r} x_s \\le K && \\forall r \\in R")
        if "required" in data:
            parameters += ", sites in use $E \\subseteq S$"
            rows.append("& x_s = 1 && \\forall s \\in E")
        rows.append("& x_s \\in \\{0, 1\\},\\ D \\ge 0")
        return (
            "**Sets**: candidate sites $S$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            "**Variables**: $x_s \\in \\{0, 1\\}$ (site chosen), $D \\ge 0$ (smallest distance between two "
            "chosen sites).\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & D \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = PDispersion()
