"""Set multicover (IP): choose which services (bus routes, sensor masts, clinic tours) to run so that every
element they serve (stop, field plot, village) is covered at least its required number of times, at the
least cost. Unlike `set_cover`, the requirements are several coverings per element and a service may be
run several times over.

Structure variants (drawn per instance, recorded by the keys present): integer copies of each service up to
a limit instead of a yes/no choice (`max_copies`), a ceiling on the coverage of some elements
(`max_coverage`), and a cost per covering beyond an element's requirement through a surplus variable
(`excess_cost`, a MILP), each present or absent, so the program has eight skeletons. Requirements and
ceilings are drawn around a reference plan that meets them, so every variant stays feasible."""

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
    Scenario("transit", "public transport", {
        "intro": "A city bus operator is drawing up its peak-hour timetable. Each candidate bus route serves "
                 "a fixed list of stops, and every stop needs a minimum number of departures per hour.",
        "set": "route", "set_prefix": "Route ", "element": "stop",
        "element_names": ["Harbour Square", "Mill Lane", "Station Road", "Civic Centre", "Park Gate",
                          "Old Market", "University", "Hospital", "Riverside", "Airport Link", "Stadium",
                          "Northgate", "Cathedral", "Ferry Pier"],
        "serves": "serves", "copy": "run per hour", "copies": "runs per hour", "money": "dollars",
        "cost_words": "operating cost per hourly run", "need": "departures per hour",
        "cap_words": "its bays allow", "excess_words": "congestion fee for every departure per hour beyond "
                                                     "a stop's requirement",
    }),
    Scenario("sensors", "precision agriculture", {
        "intro": "A precision-agriculture firm is instrumenting a farm with soil-moisture sensors. Sensors are "
                 "mounted on candidate masts; a sensor on a mast reads a fixed group of field plots, and each "
                 "plot needs several independent readings so that one failed sensor does not blind it.",
        "set": "mast", "set_prefix": "Mast ", "element": "plot",
        "element_names": ["North Paddock", "Orchard", "Vineyard Row", "Creek Field", "Hilltop", "Barn Plot",
                          "Long Acre", "Wheat Strip", "Clover Field", "Pond Field", "Wind Break", "South Meadow",
                          "Old Pasture", "Seed Bed"],
        "serves": "reads", "copy": "sensor", "copies": "sensors", "money": "euros",
        "cost_words": "cost per sensor mounted", "need": "readings",
        "cap_words": "radio interference allows", "excess_words": "data-processing fee for every reading of "
                                                                 "a plot beyond its requirement",
    }),
    Scenario("clinics", "public health", {
        "intro": "A regional health authority plans the monthly schedule of its mobile clinics. Each "
                 "candidate clinic tour visits a fixed set of villages, and every village needs a minimum "
                 "number of clinic visits per month.",
        "set": "tour", "set_prefix": "Tour ", "element": "village",
        "element_names": ["Ashford", "Brookvale", "Carrow", "Dunmere", "Elmstead", "Fenwick", "Glenholm",
                          "Hartwell", "Ivybridge", "Kelso", "Lydford", "Marsden", "Northam", "Oakridge"],
        "serves": "visits", "copy": "run per month", "copies": "runs per month", "money": "dollars",
        "cost_words": "cost per monthly run", "need": "visits per month",
        "cap_words": "its health post can host", "excess_words": "liaison cost for every monthly visit to a "
                                                                "village beyond its requirement",
    }),
)
# the eval split's own industries, services, element names, units and currencies (held out from training)
EVAL_SCENARIOS = (
    Scenario("patrols", "private security", {
        "intro": "A security contractor is planning its night patrols. Each candidate patrol loop passes a fixed "
                 "list of checkpoints, and every checkpoint needs a minimum number of passes per night.",
        "set": "patrol loop", "set_prefix": "Loop ", "element": "checkpoint",
        "element_names": ["Gate House", "Loading Dock", "Car Park B", "Server Hall", "Boiler Room",
                          "Visitor Lobby", "Chemical Store", "Roof Access", "North Fence", "South Fence",
                          "Canteen", "Archive Room", "Workshop", "Water Tower"],
        "serves": "passes", "copy": "round per night", "copies": "rounds per night", "money": "euros",
        "cost_words": "wage cost per nightly round", "need": "passes per night",
        "cap_words": "the site rules permit", "excess_words": "logging fee for every pass of a checkpoint "
                                                              "beyond its requirement",
    }),
    Scenario("library", "library services", {
        "intro": "A county library service is scheduling its mobile library vans for the term. Each candidate "
                 "van circuit stops at a fixed cluster of hamlets, and every hamlet needs a minimum number of "
                 "library stops per term.",
        "set": "van circuit", "set_prefix": "Circuit ", "element": "hamlet",
        "element_names": ["Ambleside", "Bowness", "Coniston", "Dalton", "Egremont", "Flookburgh", "Grasmere",
                          "Hawkshead", "Ireby", "Keswick", "Lowick", "Millom", "Nether Wasdale", "Orton"],
        "serves": "stops at", "copy": "run per term", "copies": "runs per term", "money": "pounds",
        "cost_words": "cost per termly run", "need": "stops per term",
        "cap_words": "its parking space allows", "excess_words": "staffing cost for every stop at a hamlet "
                                                                 "beyond its requirement",
    }),
    Scenario("wildfire", "wildfire monitoring", {
        "intro": "A forest service is planning drone surveillance flights for the fire season. Each candidate "
                 "flight path overflies a fixed set of forest blocks, and every block needs a minimum number of "
                 "overflights per day.",
        "set": "flight path", "set_prefix": "Path ", "element": "forest block",
        "element_names": ["Cedar Ridge", "Fir Hollow", "Larch Bowl", "Spruce Flat", "Hemlock Gulch",
                          "Juniper Draw", "Aspen Basin", "Alder Creek", "Redwood Bench", "Yew Canyon",
                          "Pinyon Mesa", "Sequoia Knob", "Cypress Point", "Tamarack Bog"],
        "serves": "overflies", "copy": "flight per day", "copies": "flights per day", "money": "dollars",
        "cost_words": "cost per daily flight", "need": "overflights per day",
        "cap_words": "airspace rules allow", "excess_words": "image-processing fee for every overflight of a "
                                                             "block beyond its requirement",
    }),
)


class SetMulticover(ProblemFamily):
    name = "set_multicover"
    title = "Set multicover"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"use": "binary"}
    phrasings = (
        Phrasing(r"is drawing up its peak-hour timetable\.",
                 ("is drawing up its peak-hour timetable.", "is planning its peak-hour timetable."),
                 ("is preparing the timetable for the peak hour.",)),
        Phrasing(r"is instrumenting a farm with soil-moisture sensors\.",
                 ("is instrumenting a farm with soil-moisture sensors.",),
                 ("is fitting a farm with soil-moisture sensors.",)),
        Phrasing(r"plans the monthly schedule of its mobile clinics\.",
                 ("plans the monthly schedule of its mobile clinics.",),
                 ("is setting next month's schedule for its mobile clinics.",)),
        Phrasing(r"is either used once or not at all\.",
                 ("is either used once or not at all.", "is used at most once."),
                 ("can be picked a single time or left out.",)),
        Phrasing(r"\bneeds at least\b", ("needs at least", "requires at least"), ("must get no fewer than",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bmay be used several times over \(several\b",
                 ("may be used several times over (several",),
                 ("can be repeated (several",)),
        Phrasing(r"\bup to its own limit\b", ("up to its own limit",), ("within a limit of its own",)),
        Phrasing(r"\bhave a ceiling on their coverage \(", ("have a ceiling on their coverage (",),
                 ("are capped in coverage (",)),
        Phrasing(r"\bonly so many\b", ("only so many",), ("no more than a certain number of",)),
        Phrasing(r"\bThere is a\b", ("There is a",), ("One also pays the",)),
        Phrasing(r"\bTo meet every\b", ("To meet every",), ("So that each",)),
        Phrasing(r"'s requirement at minimum\b", ("'s requirement at minimum",),
                 ("'s requirement is met at the least",)),
        Phrasing(r"\(the excess fees included\)", ("(the excess fees included)",),
                 ("(excess fees counted)",)),
        Phrasing(r"\bhow many times should each\b", ("how many times should each",),
                 ("how often should each",)),
        Phrasing(r"\bminimum \(in\b", ("minimum (in",), ("least cost (in",)),
        Phrasing(r"(?<=[a-z]) is (?=[\d.]+ \w)", (" is ",), (" comes to ",)),
        Phrasing(r"\bRequirements:", ("Requirements:",), ("Minimum coverage:",)),
        Phrasing(r"\bAn x marks the\b", ("An x marks the",), ("A cross (x) shows the",)),
        # table headers
        Phrasing(r"(?<=\| )most (?=[\w ]+ \|)", ("most ",), ("limit on ",)),
        Phrasing(r"(?<=\| )required (?=[\w ]+ \|)", ("required ",), ("minimum ",)),
        # data.json fields
        Phrasing(r"\blist of the candidate names\b", ("list of the candidate names",),
                 ("names of the candidates",)),
        Phrasing(r"\blist of the names of the things to cover\b",
                 ("list of the names of the things to cover",),
                 ("names of the elements that need covering",)),
        Phrasing(r"\blist of the elements one use of the candidate covers\b",
                 ("list of the elements one use of the candidate covers",),
                 ("elements covered by a single use of the candidate",)),
        Phrasing(r"\bcost of one use of each candidate\b", ("cost of one use of each candidate",),
                 ("price of a single use of a candidate",)),
        # "needs", "at most" and "keyed by" have two training wordings: these rules stop before them
        Phrasing(r"\bhow many uses of candidates covering it (?=the element needs)",
                 ("how many uses of candidates covering it ",),
                 ("number of uses, by candidates that cover it, that ",)),
        Phrasing(r"\bmost uses of each candidate\b", ("most uses of each candidate",),
                 ("use limit of a candidate",)),
        Phrasing(r"\(only when a candidate may be used several times; otherwise each is used (?=at most once\))",
                 ("(only when a candidate may be used several times; otherwise each is used ",),
                 ("(present only if candidates may be used repeatedly; if it is absent, each is used ",)),
        Phrasing(r"\bmost uses covering the element, (?=keyed by element)",
                 ("most uses covering the element, ",),
                 ("coverage ceiling of an element, ",)),
        Phrasing(r"\bfor the elements with such a ceiling \(only when some have one\)",
                 ("for the elements with such a ceiling (only when some have one)",),
                 ("listed only for the elements that have one (present only if some do)",)),
        Phrasing(r"\bcost of each covering of an element beyond its requirement \(only when there is such a cost\)",
                 ("cost of each covering of an element beyond its requirement (only when there is such a cost)",),
                 ("fee for each covering of an element above its requirement (present only if such a fee applies)",)),
    )
    data_fields = {
        "sets": "list of the candidate names",
        "elements": "list of the names of the things to cover",
        "covers": "covers[candidate]: list of the elements one use of the candidate covers",
        "cost": "cost of one use of each candidate, keyed by candidate",
        "required": "required[element]: how many uses of candidates covering it the element needs",
        "max_copies": "most uses of each candidate, keyed by candidate (only when a candidate may be used "
                      "several times; otherwise each is used at most once)",
        "max_coverage": "most uses covering the element, keyed by element, for the elements with such a "
                        "ceiling (only when some have one)",
        "excess_cost": "cost of each covering of an element beyond its requirement (only when there is such "
                       "a cost)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.S = pyo.Set(initialize=data["sets"])
model.E = pyo.Set(initialize=data["elements"])
'''
    _BINARY = '''\
model.use = pyo.Var(model.S, domain=pyo.Binary)
'''
    _COPIES = '''\
# each candidate may be used several times, up to its own limit
model.use = pyo.Var(model.S, domain=pyo.NonNegativeIntegers, bounds=lambda model, s: (0, data["max_copies"][s]))
'''
    _OBJECTIVE = '''\

model.obj = pyo.Objective(expr=sum(data["cost"][s] * model.use[s] for s in model.S), sense=pyo.minimize)

def coverage(model, e):
    return sum(model.use[s] for s in model.S if e in data["covers"][s]) >= data["required"][e]

model.coverage = pyo.Constraint(model.E, rule=coverage)
'''
    _EXCESS = '''\
# surplus[e]: coverings of e beyond its requirement, each at a cost
model.surplus = pyo.Var(model.E, domain=pyo.NonNegativeReals)

model.obj = pyo.Objective(
    expr=sum(data["cost"][s] * model.use[s] for s in model.S)
    + data["excess_cost"] * sum(model.surplus[e] for e in model.E),
    sense=pyo.minimize,
)

def coverage(model, e):
    covered = sum(model.use[s] for s in model.S if e in data["covers"][s])
    return covered - model.surplus[e] == data["required"][e]

model.coverage = pyo.Constraint(model.E, rule=coverage)
'''
    _CEILING = '''\

def ceiling(model, e):
    return sum(model.use[s] for s in model.S if e in data["covers"][s]) <= data["max_coverage"][e]

model.ceiling = pyo.Constraint(list(data["max_coverage"]), rule=ceiling)
'''

    model_code = _HEAD + _COPIES + _OBJECTIVE  # the model with integer copies, no ceiling, no excess cost

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._COPIES if "max_copies" in data else self._BINARY)
        code += self._EXCESS if "excess_cost" in data else self._OBJECTIVE
        if "max_coverage" in data:
            code += self._CEILING
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("max_copies", "max_coverage", "excess_cost") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        domains = {"use": "nonnegative_integer" if "max_copies" in data else "binary"}
        if "excess_cost" in data:
            domains["surplus"] = "nonnegative"
        return domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "excess_cost" in data else "IP"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_sets = size_for(difficulty, 6, 9, 12)
        n_elements = size_for(difficulty, 6, 10, 14)
        sets = [f"{words['set_prefix']}{k}" for k in sorted(rng.sample(range(1, 40), n_sets))]
        elements = rng.sample(words["element_names"], n_elements)
        covers = {s: set(rng.sample(range(n_elements), rng.randint(2, max(3, n_elements * 2 // 5))))
                  for s in sets}
        for e in range(n_elements):  # at least three candidates cover every element
            while sum(e in covers[s] for s in sets) < 3:
                covers[rng.choice([s for s in sets if e not in covers[s]])].add(e)
        copies = rng.random() < 0.5
        max_copies = {s: rng.randint(2, 4) for s in sets}
        # a reference plan; the requirements (and ceilings) are drawn so that it meets them
        plan = {s: rng.randint(0, max_copies[s]) if copies else int(rng.random() < 0.6) for s in sets}
        for e in range(n_elements):
            if not any(plan[s] for s in sets if e in covers[s]):
                s = rng.choice([s for s in sets if e in covers[s]])
                plan[s] += 1
        covered = [sum(plan[s] for s in sets if e in covers[s]) for e in range(n_elements)]
        required = [rng.randint((c + 1) // 2, c) for c in covered]
        cost = {s: rng.randint(6, 16) * 10 + 5 * len(covers[s]) for s in sets}
        data = {"sets": sets, "elements": elements,
                "covers": {s: [elements[e] for e in sorted(covers[s])] for s in sets},
                "cost": cost, "required": dict(zip(elements, required, strict=True))}
        if copies:
            data["max_copies"] = max_copies
        if rng.random() < 0.5:
            capped = sorted(rng.sample(range(n_elements), max(1, n_elements // 3)))
            data["max_coverage"] = {elements[e]: covered[e] + rng.randint(0, 1) for e in capped}
        if rng.random() < 0.5:
            data["excess_cost"] = rng.randint(2, 8) * 5
        return data

    def _uses_at_most(self, data: dict, s: str) -> int:
        return data["max_copies"][s] if "max_copies" in data else 1

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one element requires more coverings than all its candidates together can give
        e = rng.choice(data["elements"])
        possible = sum(self._uses_at_most(data, s) for s in data["sets"] if e in data["covers"][s])
        return {**data, "required": {**data["required"], e: possible + 1}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        use = {s: matrix.add_var(f"use[{s}]", 0, self._uses_at_most(data, s), cost=data["cost"][s], integer=True)
               for s in data["sets"]}
        surplus = ({e: matrix.add_var(f"surplus[{e}]", cost=data["excess_cost"]) for e in data["elements"]}
                   if "excess_cost" in data else {})
        for e in data["elements"]:
            row = {use[s]: 1.0 for s in data["sets"] if e in data["covers"][s]}
            if surplus:
                row[surplus[e]] = -1.0
                matrix.add_row(row, lower=data["required"][e], upper=data["required"][e], name=f"coverage[{e}]")
            else:
                matrix.add_row(row, lower=data["required"][e], name=f"coverage[{e}]")
        for e, ceiling in data.get("max_coverage", {}).items():
            matrix.add_row({use[s]: 1.0 for s in data["sets"] if e in data["covers"][s]}, upper=ceiling,
                           name=f"ceiling[{e}]")

    def constraint_rows(self, data: dict, x: dict):
        use = x["use"]
        for s in data["sets"]:
            yield Row(f"use_limit[{s}]", use[s], "<=", self._uses_at_most(data, s))
        for e in data["elements"]:
            covered = sum(use[s] for s in data["sets"] if e in data["covers"][s])
            if "excess_cost" in data:
                yield Row(f"coverage[{e}]", covered - x["surplus"][e], "==", data["required"][e])
            else:
                yield Row(f"coverage[{e}]", covered, ">=", data["required"][e])
        for e, ceiling in data.get("max_coverage", {}).items():
            yield Row(f"ceiling[{e}]", sum(use[s] for s in data["sets"] if e in data["covers"][s]), "<=", ceiling)

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["cost"][s] * x["use"][s] for s in data["sets"])
        if "excess_cost" in data:
            total += data["excess_cost"] * sum(x["surplus"][e] for e in data["elements"])
        return total

    def _rules(self, data: dict, words: dict, representation: str) -> list[str]:
        element, copies, money = words["element"], words["copies"], words["money"]
        rules = []
        if "max_copies" in data:
            limits = "" if representation != "text" else ": " + ", ".join(
                f"{fmt(data['max_copies'][s])} for {s}" for s in data["sets"])
            rules.append(f"Each {words['set']} may be used several times over (several {copies}), up to its own "
                         f"limit{limits}.")
        else:
            rules.append(f"Each {words['set']} is either used once or not at all.")
        if "max_coverage" in data:
            ceilings = "" if representation == "file" else ": " + ", ".join(
                f"{e} at most {fmt(v)}" for e, v in data["max_coverage"].items())
            rules.append(f"Some {plural(element)} have a ceiling on their coverage ({words['cap_words']} only so many "
                         f"{words['need']}){ceilings}.")
        if "excess_cost" in data:
            rules.append(f"There is a {words['excess_words']}: {fmt(data['excess_cost'])} {money} each.")
        return rules

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        set_word, element, money, need = words["set"], words["element"], words["money"], words["need"]
        rules = " ".join(self._rules(data, words, representation))
        cost_total = "total cost" + (" (the excess fees included)" if "excess_cost" in data else "")
        how = f"how many times should each {set_word} be used" if "max_copies" in data \
            else f"which {plural(set_word)} should be used"
        question = (f"To meet every {element}'s requirement at minimum {cost_total}, {how}, and what is that "
                    f"minimum (in {money})?")
        if representation == "text":
            lines = [f"{s} {words['serves']} {join_names(data['covers'][s])}; its {words['cost_words']} is "
                     f"{fmt(data['cost'][s])} {money}." for s in data["sets"]]
            needs = "; ".join(f"{e} needs at least {fmt(data['required'][e])} {need}" for e in data["elements"])
            return f"{words['intro']} {' '.join(lines)} Requirements: {needs}. {rules} {question}"
        if representation == "table":
            headers = [set_word, f"{words['cost_words']} ({money})"]
            if "max_copies" in data:
                headers.append(f"most {words['copies']}")
            table = markdown_table(
                [*headers, *data["elements"]],
                [[s, data["cost"][s], *([data["max_copies"][s]] if "max_copies" in data else []),
                  *["x" if e in data["covers"][s] else "" for e in data["elements"]]] for s in data["sets"]])
            element_headers = [element, f"required {need}"]
            ceilings = data.get("max_coverage")
            if ceilings:
                element_headers.append(f"most {need}")
            required = markdown_table(element_headers, [
                [e, data["required"][e], *([ceilings.get(e, "none")] if ceilings else [])]
                for e in data["elements"]])
            return (f"{words['intro']} An x marks the {plural(element)} each {set_word} {words['serves']}.\n\n{table}\n\n"
                    f"{required}\n\n{rules} {question}")
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{words['intro']} {rules}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        sets = "candidates $S$, elements $E$; $S_e \\subseteq S$ are the candidates that cover element $e$"
        parameters = "cost $c_s$, requirement $r_e$"
        if "max_copies" in data:
            parameters += ", use limit $u_s$"
            variables = "$x_s \\in \\{0, 1, \\dots, u_s\\}$, uses of candidate $s$"
            domain = "& x_s \\in \\mathbb{Z},\\ 0 \\le x_s \\le u_s && \\forall s \\in S"
        else:
            variables = "$x_s \\in \\{0,1\\}$, candidate $s$ is used"
            domain = "& x_s \\in \\{0,1\\} && \\forall s \\in S"
        objective = "\\sum_{s \\in S} c_s x_s"
        rows = ["\\text{s.t.}\\ & \\sum_{s \\in S_e} x_s \\ge r_e && \\forall e \\in E"]
        if "excess_cost" in data:
            parameters += ", cost $q$ per covering beyond a requirement"
            variables += "; $z_e \\ge 0$, coverings of $e$ beyond $r_e$"
            objective += " + q \\sum_{e \\in E} z_e"
            rows = ["\\text{s.t.}\\ & \\sum_{s \\in S_e} x_s - z_e = r_e && \\forall e \\in E"]
        if "max_coverage" in data:
            sets += ", elements $F \\subseteq E$ with a ceiling"
            parameters += ", ceiling $m_e$"
            rows.append("& \\sum_{s \\in S_e} x_s \\le m_e && \\forall e \\in F")
        rows.append(domain)
        return (f"**Sets**: {sets}.\n\n**Parameters**: {parameters}.\n\n**Variables**: {variables}.\n\n"
                f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows)
                + "\n\\end{aligned}\n$$")


FAMILY = SetMulticover()
