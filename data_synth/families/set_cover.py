"""Set cover (IP): choose the cheapest set of sites (fire stations, cell towers, experts) so that every
area (district, village, skill) is covered by at least its required number of chosen sites.

Structure variants (drawn per instance, recorded by the keys present): a limit on the number of chosen
sites (`max_sites`), pairs of sites that may not both be chosen (`conflicts`), and areas whose coverage may
fall short at a penalty per missing site (`shortfall_penalty`, a soft constraint with an integer shortfall
variable), each present or absent, so the program has eight skeletons. The first two are drawn around a
greedy cover that meets them, so every variant stays feasible."""

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
    Scenario("fire", "municipal emergency services", {
        "site": "candidate fire station", "site_prefix": "Station ", "area": "district", "area_prefix": "D",
        "cost_words": "annual operating cost", "unit": "thousand dollars",
        "covers": "can reach {areas} within eight minutes",
        "intro": "A city council is redrawing its fire service. Each candidate fire station, if opened, "
                 "can reach some districts within the eight-minute response target.",
    }),
    Scenario("telecom", "telecommunications", {
        "site": "candidate tower site", "site_prefix": "Site ", "area": "village", "area_prefix": "V",
        "cost_words": "cost to build and equip", "unit": "thousand euros",
        "covers": "provides signal to {areas}",
        "intro": "A mobile operator is extending coverage into a rural region. Each candidate tower site, if "
                 "built, provides signal to some of the villages.",
    }),
    Scenario("staffing", "consulting", {
        "site": "freelance consultant", "site_prefix": "Consultant ", "area": "skill", "area_prefix": "Skill ",
        "cost_words": "fee for the engagement", "unit": "thousand dollars",
        "covers": "is certified in {areas}",
        "intro": "A consulting firm is staffing a transformation project from a pool of freelance "
                 "consultants. Each consultant is certified in some of the skills the project needs.",
    }),
)
# the eval split's own industries, companies, site and area names and units (held out from training)
EVAL_SCENARIOS = (
    Scenario("ambulance", "pre-hospital emergency care", {
        "site": "candidate ambulance post", "site_prefix": "Post ", "area": "neighbourhood",
        "area_prefix": "Ward ", "cost_words": "yearly crewing cost", "unit": "thousand pounds",
        "covers": "can respond to {areas} on time",
        "intro": "A regional health authority is deciding where to station its ambulances. An ambulance "
                 "posted at a candidate location can respond to some neighbourhoods inside the twelve-minute "
                 "target.",
    }),
    Scenario("leaks", "water utilities", {
        "site": "candidate sensor point", "site_prefix": "Point ", "area": "pipe segment",
        "area_prefix": "Segment ", "cost_words": "installation cost", "unit": "thousand kronor",
        "covers": "can detect leaks on {areas}",
        "intro": "A water utility is fitting acoustic leak sensors to its distribution network. A sensor "
                 "fitted at a candidate point can detect leaks on some of the pipe segments.",
    }),
    Scenario("cameras", "warehouse security", {
        "site": "candidate camera mount", "site_prefix": "Mount ", "area": "aisle", "area_prefix": "Aisle ",
        "cost_words": "cost to install and wire", "unit": "hundred euros",
        "covers": "has a clear view of {areas}",
        "intro": "A distribution centre is laying out its security cameras. A camera on a candidate mount "
                 "has a clear view of some of the aisles.",
    }),
)


class SetCover(ProblemFamily):
    name = "set_cover"
    title = "Set cover"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"choose": "binary"}
    # eval-only rewordings of the family's fixed sentences (training keeps its text; "at least", "at most",
    # "keyed by" and "what is that" are left to the generic rules, which vary them in training)
    phrasings = (
        Phrasing(r"\bCoverage requirements:", ("Coverage requirements:",), ("The cover each one needs:",)),
        Phrasing(r"\bmust each be covered by\b", ("must each be covered by",), ("each require",)),
        Phrasing(r"\bmust be covered by\b", ("must be covered by",), ("requires",)),
        Phrasing(r"(?<=\d )chosen\b", ("chosen",), ("selected",)),
        Phrasing(r"\bcan be chosen\b", ("can be chosen",), ("may be selected",)),
        Phrasing(r"\bcannot both be chosen\b", ("cannot both be chosen",), ("are mutually exclusive",)),
        Phrasing(r"\bshould be chosen to meet every requirement at minimum total cost, and\b",
                 ("should be chosen to meet every requirement at minimum total cost, and",),
                 ("ought to be selected so that all requirements are met as cheaply as possible, and",)),
        Phrasing(r"\bshould be chosen to minimize the total cost plus shortfall penalties, and\b",
                 ("should be chosen to minimize the total cost plus shortfall penalties, and",),
                 ("ought to be selected so that their cost together with the shortfall penalties is as low as "
                  "possible, and",)),
        Phrasing(r"(?<=that )minimum total cost\b", ("minimum total cost",), ("lowest possible cost",)),
        Phrasing(r"(?<=that )minimum total(?= \()", ("minimum total",), ("lowest possible sum",)),
        Phrasing(r"\bmay be covered by fewer\b", ("may be covered by fewer",), ("can make do with fewer",)),
        Phrasing(r"\bthan required, at a penalty\b", ("than required, at a penalty",),
                 ("than needed, which costs a penalty",)),
        Phrasing(r"\bper missing\b", ("per missing",), ("for every absent",)),
        Phrasing(r"\bAn x marks the\b", ("An x marks the",), ("A cell holding x shows the",)),
        Phrasing(r"\brequired coverage\b", ("required coverage",), ("cover needed",)),
        Phrasing(r"\bis limited\.", ("is limited.",), ("has a ceiling.",)),
        Phrasing(r"\blist of candidate names\b", ("list of candidate names",), ("names of the candidates",)),
        Phrasing(r"\blist of names of the things to cover\b", ("list of names of the things to cover",),
                 ("names of everything that needs cover",)),
        Phrasing(r"\bcost of choosing each candidate\b", ("cost of choosing each candidate",),
                 ("price of selecting every candidate",)),
        Phrasing(r"\blist of the areas that candidate covers\b", ("list of the areas that candidate covers",),
                 ("areas this candidate serves",)),
        Phrasing(r"\bhow many chosen candidates must cover the area\b",
                 ("how many chosen candidates must cover the area",),
                 ("count of selected candidates the area calls for",)),
        Phrasing(r"\bmost candidates that\b", ("most candidates that",), ("largest number of candidates that",)),
        Phrasing(r"\(only when there is such a limit\)", ("(only when there is such a limit)",),
                 ("(present if such a cap applies)",)),
        Phrasing(r"\blist of \[candidate, candidate\] pairs that\b",
                 ("list of [candidate, candidate] pairs that",), ("[candidate, candidate] pairs that",)),
        Phrasing(r"\(only when there are such pairs\)", ("(only when there are such pairs)",),
                 ("(present if any such pair exists)",)),
        Phrasing(r"\bpenalty per missing covering candidate\b", ("penalty per missing covering candidate",),
                 ("charge for each covering candidate that is lacking",)),
        Phrasing(r"\bfor the areas whose requirement may be missed \(only when some may\)",
                 ("for the areas whose requirement may be missed (only when some may)",),
                 ("for the areas allowed to fall short (present if any are)",)),
    )
    data_fields = {
        "sites": "list of candidate names",
        "areas": "list of names of the things to cover",
        "cost": "cost of choosing each candidate, keyed by candidate",
        "covers": "covers[candidate]: list of the areas that candidate covers",
        "required": "required[area]: how many chosen candidates must cover the area",
        "max_sites": "most candidates that can be chosen (only when there is such a limit)",
        "conflicts": "list of [candidate, candidate] pairs that cannot both be chosen (only when there are such "
                     "pairs)",
        "shortfall_penalty": "penalty per missing covering candidate, keyed by area, for the areas whose "
                             "requirement may be missed (only when some may)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.S = pyo.Set(initialize=data["sites"])
model.A = pyo.Set(initialize=data["areas"])
model.choose = pyo.Var(model.S, domain=pyo.Binary)
'''
    _OBJECTIVE = '''\

model.obj = pyo.Objective(expr=sum(data["cost"][s] * model.choose[s] for s in model.S), sense=pyo.minimize)

# every area is covered by at least the required number of chosen candidates
def coverage(model, a):
    covering = [s for s in model.S if a in data["covers"][s]]
    return sum(model.choose[s] for s in covering) >= data["required"][a]

model.coverage = pyo.Constraint(model.A, rule=coverage)
'''
    _SOFT = '''\
# some areas may be covered by fewer candidates than required, at a penalty per missing one
soft = list(data["shortfall_penalty"])
model.short = pyo.Var(soft, domain=pyo.NonNegativeIntegers)

model.obj = pyo.Objective(
    expr=sum(data["cost"][s] * model.choose[s] for s in model.S)
    + sum(data["shortfall_penalty"][a] * model.short[a] for a in soft),
    sense=pyo.minimize,
)

def coverage(model, a):
    covering = [s for s in model.S if a in data["covers"][s]]
    missing = model.short[a] if a in data["shortfall_penalty"] else 0
    return sum(model.choose[s] for s in covering) + missing >= data["required"][a]

model.coverage = pyo.Constraint(model.A, rule=coverage)
'''
    _MAX_SITES = '''\
model.max_sites = pyo.Constraint(expr=sum(model.choose[s] for s in model.S) <= data["max_sites"])
'''
    _CONFLICTS = '''\
model.P = pyo.RangeSet(0, len(data["conflicts"]) - 1)
model.conflicts = pyo.Constraint(
    model.P, rule=lambda model, p: model.choose[data["conflicts"][p][0]] + model.choose[data["conflicts"][p][1]] <= 1)
'''

    model_code = _HEAD + _OBJECTIVE  # the base model (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._SOFT if "shortfall_penalty" in data else self._OBJECTIVE)
        if "max_sites" in data:
            code += self._MAX_SITES
        if "conflicts" in data:
            code += self._CONFLICTS
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("max_sites", "conflicts", "shortfall_penalty") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {**self.domains, "short": "nonnegative_integer"} if "shortfall_penalty" in data else self.domains

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_sites = size_for(difficulty, 5, 8, 12)
        n_areas = size_for(difficulty, 6, 10, 15)
        sites = [f"{words['site_prefix']}{chr(ord('A') + k)}" for k in range(n_sites)]
        areas = [f"{words['area_prefix']}{k + 1}" for k in range(n_areas)]
        covers = {s: sorted(rng.sample(range(n_areas), rng.randint(2, max(2, n_areas * 2 // 5))))
                  for s in sites}
        # a few areas need double coverage (high-risk districts, key skills)
        required = [1] * n_areas
        for a in rng.sample(range(n_areas), max(1, n_areas // 5)):
            required[a] = 2
        # every area gets at least one more covering site than it requires, so the instance is feasible
        # and the choice is not forced
        for a in range(n_areas):
            while sum(a in covers[s] for s in sites) < required[a] + 1:
                site = rng.choice([s for s in sites if a not in covers[s]])
                covers[site] = sorted([*covers[site], a])
        cost = {s: rng.randint(4, 12) * 10 + 3 * len(covers[s]) for s in sites}
        data = {"sites": sites, "areas": areas, "cost": cost,
                "covers": {s: [areas[a] for a in covers[s]] for s in sites},
                "required": dict(zip(areas, required, strict=True))}
        limited, conflicting = rng.random() < 0.5, rng.random() < 0.5
        if limited or conflicting:
            cover = greedy_cover(data)
            if limited:
                data["max_sites"] = len(cover)
            if conflicting:
                pairs = []
                for _ in range(max(1, n_sites // 4)):
                    a, b = sorted(rng.sample(sites, 2))
                    if not (a in cover and b in cover) and [a, b] not in pairs:
                        pairs.append([a, b])
                if pairs:
                    data["conflicts"] = sorted(pairs)
        if rng.random() < 0.5:
            soft = sorted(rng.sample(areas, max(1, n_areas // 4)), key=areas.index)
            data["shortfall_penalty"] = {a: rng.randint(3, 9) * 10 for a in soft}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one area requires more covering candidates than exist
        area = rng.choice(data["areas"])
        available = sum(area in data["covers"][s] for s in data["sites"])
        data = {**data, "required": {**data["required"], area: available + 1}}
        if "shortfall_penalty" in data:  # the area's requirement becomes firm, so the shortfall cannot absorb it
            penalty = {a: v for a, v in data["shortfall_penalty"].items() if a != area}
            if penalty:
                data["shortfall_penalty"] = penalty
            else:
                del data["shortfall_penalty"]
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        column = {s: matrix.add_var(f"choose[{s}]", 0, 1, cost=data["cost"][s], integer=True)
                  for s in data["sites"]}
        penalty = data.get("shortfall_penalty", {})
        short = {a: matrix.add_var(f"short[{a}]", cost=v, integer=True) for a, v in penalty.items()}
        for a in data["areas"]:
            row = {column[s]: 1.0 for s in data["sites"] if a in data["covers"][s]}
            if a in short:
                row[short[a]] = 1.0
            matrix.add_row(row, lower=data["required"][a], name=f"coverage[{a}]")
        if "max_sites" in data:
            matrix.add_row({c: 1.0 for c in column.values()}, upper=data["max_sites"], name="max_sites")
        for a, b in data.get("conflicts", ()):
            matrix.add_row({column[a]: 1.0, column[b]: 1.0}, upper=1.0, name=f"conflict[{a},{b}]")

    def constraint_rows(self, data: dict, x: dict):
        penalty = data.get("shortfall_penalty", {})
        for a in data["areas"]:
            covered = sum(x["choose"][s] for s in data["sites"] if a in data["covers"][s])
            if a in penalty:
                covered += x["short"][a]
            yield Row(f"coverage[{a}]", covered, ">=", data["required"][a])
        if "max_sites" in data:
            yield Row("max_sites", sum(x["choose"].values()), "<=", data["max_sites"])
        for a, b in data.get("conflicts", ()):
            yield Row(f"conflict[{a},{b}]", x["choose"][a] + x["choose"][b], "<=", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        shortfall = sum(v * x["short"][a] for a, v in data.get("shortfall_penalty", {}).items())
        return shortfall + sum(data["cost"][s] * x["choose"][s] for s in data["sites"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        site, area, unit = words["site"], words["area"], words["unit"]
        doubles = [a for a in data["areas"] if data["required"][a] != 1]
        singles = [a for a in data["areas"] if data["required"][a] == 1]
        parts = []
        if singles:
            parts.append(f"{join_names(singles)} must each be covered by at least 1 chosen {site}")
        for a in doubles:
            parts.append(f"{a} must be covered by at least {fmt(data['required'][a])} chosen {plural(site)}")
        requirement = "Coverage requirements: " + "; ".join(parts) + "."
        rules = []
        if "max_sites" in data:
            rules.append(f"At most {fmt(data['max_sites'])} {plural(site)} can be chosen.")
        if "conflicts" in data:
            rules.append("These pairs cannot both be chosen: "
                         + "; ".join(f"{a} and {b}" for a, b in data["conflicts"]) + ".")
        question = (f"Which {plural(site)} should be chosen to meet every requirement at minimum total cost, and what "
                    f"is that minimum total cost (in {unit})?")
        if "shortfall_penalty" in data:
            soft = data["shortfall_penalty"]
            rules.append(f"Some {plural(area)} may be covered by fewer {plural(site)} than required, at a penalty (in {unit}) "
                         f"per missing {site}" + (": " + ", ".join(f"{fmt(v)} for {a}" for a, v in soft.items())
                                                  if representation != "file" else "") + ".")
            question = (f"Which {plural(site)} should be chosen to minimize the total cost plus shortfall penalties, and "
                        f"what is that minimum total (in {unit})?")
        if rules:
            requirement += " " + " ".join(rules)
        if representation == "text":
            lines = [f"{s} costs {fmt(data['cost'][s])} {unit} ({words['cost_words']}) and "
                     f"{words['covers'].format(areas=join_names(data['covers'][s]))}." for s in data["sites"]]
            return f"{words['intro']} {' '.join(lines)} {requirement} {question}"
        if representation == "table":
            table = markdown_table(
                [site, f"{words['cost_words']} ({unit})", *data["areas"]],
                [[s, data["cost"][s], *["x" if a in data["covers"][s] else "" for a in data["areas"]]]
                 for s in data["sites"]],
            )
            required = markdown_table([area, "required coverage"], [[a, data["required"][a]]
                                                                      for a in data["areas"]])
            stated = " ".join(rules) + "\n\n" if rules else ""
            return (f"{words['intro']} An x marks the {plural(area)} each {site} covers.\n\n{table}\n\n"
                    f"{required}\n\n{stated}{question}")
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            notes = ""
            if "max_sites" in data:
                notes += f" The number of {plural(site)} chosen is limited."
            if "conflicts" in data:
                notes += f" Some pairs of {plural(site)} cannot both be chosen."
            if "shortfall_penalty" in data:
                notes += " " + rules[-1]
            return f"{words['intro']}{notes}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        chosen = [s for s in data["sites"] if x["choose"][s] > 0.5]
        lines = [f"Chosen: {join_names(chosen)}."]
        for a in data["areas"]:
            by = [s for s in chosen if a in data["covers"][s]]
            lines.append(f"- {a}: covered by {join_names(by)} (required {fmt(data['required'][a])})")
        return "\n".join(lines)

    def formulation(self, data: dict) -> str:
        sets = "candidates $S$, areas $A$; $S_a \\subseteq S$ are the candidates that cover area $a$"
        parameters = "cost $c_s$, required coverage $r_a$"
        variables = "$x_s \\in \\{0,1\\}$, candidate $s$ is chosen"
        objective = "\\sum_{s \\in S} c_s x_s"
        coverage = "\\sum_{s \\in S_a} x_s \\ge r_a && \\forall a \\in A"
        rows = []
        if "shortfall_penalty" in data:
            sets += ", areas $F \\subseteq A$ whose requirement may be missed"
            parameters += ", shortfall penalty $p_a$"
            variables += "; $u_a \\in \\mathbb{Z}_{\\ge 0}$, covering candidates missing at $a \\in F$ ($u_a = 0$ "
            variables += "for $a \\notin F$)"
            objective += " + \\sum_{a \\in F} p_a u_a"
            coverage = "\\sum_{s \\in S_a} x_s + u_a \\ge r_a && \\forall a \\in A"
        if "max_sites" in data:
            parameters += ", candidate limit $K$"
            rows.append("& \\sum_{s \\in S} x_s \\le K")
        if "conflicts" in data:
            sets += ", conflicting pairs $C$"
            rows.append("& x_i + x_j \\le 1 && \\forall (i, j) \\in C")
        rows.append("& x_s \\in \\{0,1\\} && \\forall s \\in S")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n"
            f"\\text{{s.t.}}\\ & {coverage} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


def greedy_cover(data: dict) -> list[str]:
    """A feasible choice of candidates: repeatedly take the one that meets the most unmet requirement
    (the instance guarantees every area more covering candidates than it requires)."""
    unmet = dict(data["required"])
    chosen: list[str] = []
    while any(unmet.values()):
        best = max((s for s in data["sites"] if s not in chosen),
                   key=lambda s: sum(1 for a in data["covers"][s] if unmet[a] > 0))
        chosen.append(best)
        for a in data["covers"][best]:
            unmet[a] = max(0, unmet[a] - 1)
    return chosen


FAMILY = SetCover()
