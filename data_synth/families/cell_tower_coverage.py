"""Cell tower coverage, the maximal covering location problem (IP): build some of the candidate towers
within a budget so that the population living in covered areas is as large as possible. An area counts
as covered when at least one built tower reaches it.

Structure variants (drawn per instance, recorded by the keys present): a limit on the number of towers
(`max_towers`), areas that must be covered whatever it costs (`must_cover`: hospitals, emergency
services), and pairs of towers that interfere and may not both be built (`conflicts`), each present or
absent: eight program skeletons. The limits are drawn around a set of towers within the budget that
satisfies them, so every variant stays feasible."""

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
    Scenario("telecom", "mobile telecommunications", {
        "intro": "A mobile operator is rolling out its network in a rural county and must decide which cell "
                 "towers to build.",
        "tower": "tower site", "tower_names": ["Hill Farm", "Church Lane", "Water Tower", "Grain Silo",
                                               "Ridge Top", "Old School", "Quarry Edge", "Fire Station",
                                               "Mill Pond", "Forest Gate", "Market Hall", "Bridge End",
                                               "Sports Ground", "Cemetery Road", "Depot Yard", "Radio Hill"],
        "area_prefix": "Village ", "people": "residents", "money": "thousand dollars",
        "must_word": "areas with a hospital or clinic", "cost_range": (60, 180), "population_range": (200, 4000),
    }),
    Scenario("wildfire", "forest fire detection", {
        "intro": "A forestry service is installing wildfire detection cameras on lookout points and must "
                 "decide which points to equip.",
        "tower": "lookout point", "tower_names": ["Eagle Rock", "Bear Knob", "Pine Bluff", "Cedar Crest",
                                                  "Elk Ridge", "Hawk Peak", "Lone Spruce", "Owl Butte",
                                                  "Red Cliff", "Sage Dome", "Timber Top", "Wolf Point",
                                                  "Aspen Brow", "Fir Summit", "Larch Hill", "Moose Mesa"],
        "area_prefix": "Stand ", "people": "hectares of forest", "money": "thousand dollars",
        "must_word": "stands next to a campground", "cost_range": (25, 90), "population_range": (50, 900),
    }),
    Scenario("sirens", "civil emergency warning", {
        "intro": "A city is installing outdoor storm-warning sirens and must decide where to mount them.",
        "tower": "mounting site", "tower_names": ["City Hall", "Library Roof", "Bus Depot", "Fire House 2",
                                                  "High School", "Stadium", "Water Works", "Rail Yard",
                                                  "Park Pavilion", "Police Annex", "Hospital Lot", "Mall Roof",
                                                  "Armory", "Golf Club", "Tech Campus", "Ferry Dock"],
        "area_prefix": "Block ", "people": "residents", "money": "thousand dollars",
        "must_word": "blocks with a school", "cost_range": (15, 60), "population_range": (100, 2500),
    }),
)

# the eval split's own industries, sites, areas and units (held out from training)
EVAL_SCENARIOS = (
    Scenario("smart_meters", "smart water metering", {
        "intro": "A water utility is fitting radio gateways for its smart meters across a suburban district and "
                 "has to choose the sites that get a gateway.",
        "tower": "gateway site", "tower_names": ["Reservoir Gate", "Pump House", "Booster Station",
                                                 "Valve Chamber", "Tank Hill", "Meter Depot", "Filter Works",
                                                 "Intake Tower", "Sluice Point", "Weir Cottage", "Standpipe Green",
                                                 "Hydrant Yard", "Aqueduct Arch", "Outfall Road", "Basin View",
                                                 "Spring Head"],
        "area_prefix": "District ", "people": "metered households", "money": "thousand euros",
        "must_word": "districts with a care home", "cost_range": (20, 70), "population_range": (80, 1500),
    }),
    Scenario("coast_radio", "maritime safety radio", {
        "intro": "A coast guard is placing VHF radio repeaters along a stretch of coastline and has to pick the "
                 "headlands that get one.",
        "tower": "repeater site", "tower_names": ["Gull Head", "Seal Point", "Lighthouse Cape", "Harbor Mole",
                                                  "Cliff Watch", "Shell Bay", "Anchor Hill", "Tern Island",
                                                  "Kelp Reef", "Beacon Knoll", "Pilot Station", "Dune Crest",
                                                  "Wreck Point", "Storm Bluff", "Mariner Hill", "Salt Marsh"],
        "area_prefix": "Sector ", "people": "vessel transits a month", "money": "thousand pounds",
        "must_word": "sectors with a ferry lane", "cost_range": (40, 140), "population_range": (30, 800),
    }),
)


class CellTowerCoverage(ProblemFamily):
    name = "cell_tower_coverage"
    title = "Cell tower coverage (maximal covering location)"
    problem_type = "IP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"build": "binary", "covered": "binary"}
    industrial = True
    data_fields = {
        "towers": "list of candidate tower site names",
        "areas": "list of area names",
        "cost": "cost of building each tower, keyed by tower",
        "budget": "most total building cost",
        "population": "population (the weight counted when covered) of each area, keyed by area",
        "coverage": "coverage[tower]: list of the areas that tower reaches",
        "max_towers": "most towers that can be built (only when there is such a limit)",
        "must_cover": "areas that must be covered (only when there are such areas)",
        "conflicts": "pairs of towers that may not both be built (only when there are such pairs)",
    }
    phrasings = (
        Phrasing(r"\bAn area counts as covered when at least one built\b",
                 ("An area counts as covered when at least one built",
                  "An area is covered as soon as at least one built"),
                 ("An area is covered once any built",)),  # then "serves it."
        Phrasing(r"\breaches it\.", ("reaches it.",), ("serves it.",)),
        Phrasing(r"\binterfere with each other and may not both be built\b",
                 ("interfere with each other and may not both be built",),
                 ("would interfere, so at most one of each pair is built",)),
        Phrasing(r"\bmust be covered whatever it costs\b", ("must be covered whatever it costs",),
                 ("have to be reached in any case",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text); a rule never
        # takes in a phrase the generic lexicon words two ways in training ("may not exceed", "at most")
        Phrasing(r"\bThe total building cost\b", ("The total building cost",),
                 ("Spending on construction", "What is spent on building")),
        Phrasing(r"\bcan be built\.", ("can be built.",), ("may be put up.", "are allowed to go up.")),
        Phrasing(r"\bshould be built to maximize the covered population\b",
                 ("should be built to maximize the covered population",),
                 ("ought to be put up so that the population covered is as large as possible",
                  "are best put up for the largest population covered")),
        Phrasing(r", and how large is it\?", (", and how large is it?",),
                 (", and what is that population?", "; how big does that population get?")),
        Phrasing(r"\band reaches\b", ("and reaches",), ("and serves", "and covers")),
        Phrasing(r"\bThe population of each area\b", ("The population of each area",),
                 ("Population by area", "Each area's population")),
        Phrasing(r"\bareas reached\b", ("areas reached",), ("areas served",)),
        # the data.json field descriptions
        Phrasing(r"\blist of candidate tower site names\b", ("list of candidate tower site names",),
                 ("names of the prospective tower sites",)),
        Phrasing(r"\blist of area names\b", ("list of area names",), ("names of the areas",)),
        Phrasing(r"\bcost of building each tower,", ("cost of building each tower,",),
                 ("building cost of every tower,",)),
        Phrasing(r"\bmost total building cost\b", ("most total building cost",),
                 ("upper limit on the summed building cost",)),
        Phrasing(r"\bpopulation \(the weight counted when covered\) of each area,",
                 ("population (the weight counted when covered) of each area,",),
                 ("population of every area (what it adds to the objective once covered),",)),
        Phrasing(r"\blist of the areas that tower reaches\b", ("list of the areas that tower reaches",),
                 ("areas within reach of that tower",)),
        Phrasing(r"\bmost towers that can be built \(only when there is such a limit\)",
                 ("most towers that can be built (only when there is such a limit)",),
                 ("largest number of towers allowed (present if such a limit applies)",)),
        Phrasing(r"\bareas that must be covered \(only when there are such areas\)",
                 ("areas that must be covered (only when there are such areas)",),
                 ("areas that have to be reached (present if any are given)",)),
        Phrasing(r"\bpairs of towers that may not both be built \(only when there are such pairs\)",
                 ("pairs of towers that may not both be built (only when there are such pairs)",),
                 ("pairs of towers of which one at the most is built (present if there are any)",)),
    )
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.T = pyo.Set(initialize=data["towers"])
model.A = pyo.Set(initialize=data["areas"])
model.build = pyo.Var(model.T, domain=pyo.Binary)
model.covered = pyo.Var(model.A, domain=pyo.Binary)
# the towers that reach each area
reach = {a: [t for t in data["towers"] if a in data["coverage"][t]] for a in data["areas"]}

model.obj = pyo.Objective(expr=sum(data["population"][a] * model.covered[a] for a in model.A),
                          sense=pyo.maximize)
# an area counts as covered only when a built tower reaches it
model.cover = pyo.Constraint(model.A, rule=lambda model, a: model.covered[a] <= sum(model.build[t] for t in reach[a]))
model.budget = pyo.Constraint(expr=sum(data["cost"][t] * model.build[t] for t in model.T) <= data["budget"])
'''
    _MAX_TOWERS = '''\

model.max_towers = pyo.Constraint(expr=sum(model.build[t] for t in model.T) <= data["max_towers"])
'''
    _MUST_COVER = '''\

# these areas are reached by at least one built tower
model.must_cover = pyo.Constraint(data["must_cover"], rule=lambda model, a: sum(model.build[t] for t in reach[a]) >= 1)
'''
    _CONFLICTS = '''\

# interfering towers are not both built
model.P = pyo.RangeSet(0, len(data["conflicts"]) - 1)
model.conflicts = pyo.Constraint(
    model.P, rule=lambda model, k: model.build[data["conflicts"][k][0]] + model.build[data["conflicts"][k][1]] <= 1)
'''

    model_code = _HEAD + _MAX_TOWERS  # the model with a tower limit (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD
        if "max_towers" in data:
            code += self._MAX_TOWERS
        if "must_cover" in data:
            code += self._MUST_COVER
        if "conflicts" in data:
            code += self._CONFLICTS
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("max_towers", "must_cover", "conflicts") if name in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_towers = size_for(difficulty, 6, 10, 15, industrial=40)
        n_areas = size_for(difficulty, 10, 18, 30, industrial=1000)
        towers = pick_names(rng, words["tower_names"], n_towers)
        numbers = sorted(rng.sample(range(1, 3 * n_areas + 10), n_areas))
        areas = [f"{words['area_prefix']}{k}" for k in numbers]
        side = 50.0 * math.sqrt(n_towers / 10)  # about the same density of towers at every size
        where = {name: (rng.uniform(0, side), rng.uniform(0, side)) for name in towers + areas}
        radius = {t: rng.uniform(9, 15) for t in towers}
        coverage = {t: [a for a in areas if math.dist(where[t], where[a]) <= radius[t]] for t in towers}
        for t in towers:
            if not coverage[t]:  # every tower reaches at least its nearest area
                coverage[t] = [min(areas, key=lambda a: (math.dist(where[t], where[a]), a))]
        c_low, c_high = words["cost_range"]
        cost = {t: rng.randint(c_low, c_high) for t in towers}
        budget = int(sum(cost.values()) * rng.uniform(0.3, 0.45))
        population = {a: rng.randint(*words["population_range"]) for a in areas}
        data = {"towers": towers, "areas": areas, "cost": cost, "budget": budget, "population": population,
                "coverage": coverage}
        # a set of towers within the budget (in random order) that every optional limit admits
        plan, spent = [], 0
        for t in rng.sample(towers, n_towers):
            if spent + cost[t] <= budget:
                plan.append(t)
                spent += cost[t]
        if rng.random() < 0.5:
            data["max_towers"] = max(1, len(plan) - (1 if len(plan) > 2 and rng.random() < 0.5 else 0))
            plan = plan[:data["max_towers"]]
        if rng.random() < 0.5:
            reached = [a for a in areas if any(a in coverage[t] for t in plan)]
            data["must_cover"] = sorted(rng.sample(reached, min(len(reached), 1 + n_areas // 10)),
                                        key=areas.index)
        if rng.random() < 0.5:
            # overlapping towers interfere; never two towers of the plan
            overlapping = [(a, b) for k, a in enumerate(towers) for b in towers[k + 1:]
                           if set(coverage[a]) & set(coverage[b]) and not (a in plan and b in plan)]
            pairs = rng.sample(overlapping, min(len(overlapping), max(1, n_towers // 4)))
            if pairs:
                data["conflicts"] = [list(pair) for pair in sorted(pairs, key=lambda p: (towers.index(p[0]),
                                                                                          towers.index(p[1])))]
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # an area that must be covered, but the budget cannot pay for any tower that reaches it
        data = dict(data)
        reached = [a for a in data["areas"] if any(a in data["coverage"][t] for t in data["towers"])]
        must = data.get("must_cover") or [rng.choice(reached)]
        data["must_cover"] = must
        cheapest = min(data["cost"][t] for t in data["towers"] if set(data["coverage"][t]) & set(must))
        data["budget"] = cheapest - rng.randint(1, 5)
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        towers, areas = data["towers"], data["areas"]
        build = {t: matrix.add_var(f"build[{t}]", 0.0, 1.0, integer=True) for t in towers}
        covered = {a: matrix.add_var(f"covered[{a}]", 0.0, 1.0, cost=data["population"][a], integer=True)
                   for a in areas}
        reach = {a: [] for a in areas}
        for t in towers:
            for a in data["coverage"][t]:
                reach[a].append(t)
        for a in areas:
            matrix.add_row({covered[a]: 1.0, **{build[t]: -1.0 for t in reach[a]}}, upper=0.0, name=f"cover[{a}]")
        matrix.add_row({build[t]: data["cost"][t] for t in towers}, upper=data["budget"], name="budget")
        if "max_towers" in data:
            matrix.add_row({build[t]: 1.0 for t in towers}, upper=data["max_towers"], name="max_towers")
        for a in data.get("must_cover", ()):
            matrix.add_row({build[t]: 1.0 for t in reach[a]}, lower=1.0, name=f"must_cover[{a}]")
        for a, b in data.get("conflicts", ()):
            matrix.add_row({build[a]: 1.0, build[b]: 1.0}, upper=1.0, name=f"conflict[{a},{b}]")

    def constraint_rows(self, data: dict, x: dict):
        build, covered = x["build"], x["covered"]
        towers = data["towers"]
        reached = {a: sum(build[t] for t in towers if a in data["coverage"][t]) for a in data["areas"]}
        for a in data["areas"]:
            yield Row(f"cover[{a}]", covered[a], "<=", reached[a])
        yield Row("budget", sum(data["cost"][t] * build[t] for t in towers), "<=", data["budget"])
        if "max_towers" in data:
            yield Row("max_towers", sum(build[t] for t in towers), "<=", data["max_towers"])
        for a in data.get("must_cover", ()):
            yield Row(f"must_cover[{a}]", reached[a], ">=", 1)
        for a, b in data.get("conflicts", ()):
            yield Row(f"conflict[{a},{b}]", build[a] + build[b], "<=", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["population"][a] * x["covered"][a] for a in data["areas"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        built = [t for t in data["towers"] if x["build"][t] > 0.5]
        reached = [a for a in data["areas"] if any(a in data["coverage"][t] for t in built)]
        spent = sum(data["cost"][t] for t in built)
        return (f"- build {join_names(built)} for {fmt(spent)} of {fmt(data['budget'])} {scenario.words['money']}\n"
                f"- {len(reached)} of {len(data['areas'])} areas covered, "
                f"{fmt(sum(data['population'][a] for a in reached))} {scenario.words['people']}")

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        towers, areas, tower, money, people = (data["towers"], data["areas"], words["tower"], words["money"],
                                               words["people"])
        intro = (f"{words['intro']} There are {len(towers)} candidate {plural(tower)} and {len(areas)} areas. An area "
                 f"counts as covered when at least one built {tower} reaches it.")
        rules = [f"The total building cost may not exceed {fmt(data['budget'])} {money}."]
        if "max_towers" in data:
            rules.append(f"At most {fmt(data['max_towers'])} {plural(tower)} can be built.")
        if "must_cover" in data:
            rules.append(f"These {words['must_word']} must be covered whatever it costs: "
                         f"{join_names(data['must_cover'])}.")
        if "conflicts" in data:
            rules.append(f"These pairs of {plural(tower)} interfere with each other and may not both be built: "
                         + "; ".join(f"{a} and {b}" for a, b in data["conflicts"]) + ".")
        question = (f"Which {plural(tower)} should be built to maximize the covered population (in {people}), and how "
                    "large is it?")
        rules_text = " ".join(rules)
        if representation == "text":
            listing = "; ".join(f"{t} costs {fmt(data['cost'][t])} {money} and reaches "
                                f"{join_names(data['coverage'][t])}" for t in towers)
            populations = "; ".join(f"{a} {fmt(data['population'][a])}" for a in areas)
            return (f"{intro} {listing}. The population of each area ({people}): {populations}. "
                    f"{rules_text} {question}")
        if representation == "table":
            tower_table = markdown_table([tower, f"cost ({money})", "areas reached"],
                                         [[t, data["cost"][t], ", ".join(data["coverage"][t])] for t in towers])
            area_table = markdown_table(["area", f"population ({people})"], [[a, data["population"][a]] for a in areas])
            return f"{intro}\n\n{tower_table}\n\n{area_table}\n\n{rules_text} {question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro} {rules_text}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        parameters = "cost $c_t$, budget $B$, population $w_a$, towers reaching area $a$: $T_a \\subseteq T$"
        rows = ["\\text{s.t.}\\ & z_a \\le \\sum_{t \\in T_a} x_t && \\forall a \\in A",
                "& \\sum_{t \\in T} c_t x_t \\le B"]
        if "max_towers" in data:
            parameters += ", tower limit $K$"
            rows.append("& \\sum_{t \\in T} x_t \\le K")
        if "must_cover" in data:
            parameters += ", areas to cover $M \\subseteq A$"
            rows.append("& \\sum_{t \\in T_a} x_t \\ge 1 && \\forall a \\in M")
        if "conflicts" in data:
            parameters += ", interfering pairs $C \\subseteq T \\times T$"
            rows.append("& x_t + x_u \\le 1 && \\forall (t, u) \\in C")
        rows.append("& x_t, z_a \\in \\{0, 1\\}")
        return (
            "**Sets**: candidate towers $T$, areas $A$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            "**Variables**: $x_t \\in \\{0, 1\\}$ (tower built), $z_a \\in \\{0, 1\\}$ (area covered).\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & \\sum_{a \\in A} w_a z_a \\\\\n" + " \\\\\n".join(rows)
            + "\n\\end{aligned}\n$$"
        )


FAMILY = CellTowerCoverage()
