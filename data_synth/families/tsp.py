"""Travelling salesman (MILP, small): the shortest round trip that starts at a home location, visits
every other location exactly once and returns, with Miller-Tucker-Zemlin (MTZ) constraints to rule
out subtours.

Structure variants (drawn per instance, recorded by the keys present): the subtour elimination, MTZ
positions or a single-commodity flow (`"subtour_elimination": "flow"`: the start sends one unit to every
other place along the tour's legs); places that must be visited before others (`precedence`, written on the
MTZ positions or on the flow, whichever the model has); and pairs of places with no usable direct leg
(`closed`), each present or absent, so the program has eight skeletons. Precedences and closed legs are
drawn from a random reference tour, so every variant is feasible."""

from __future__ import annotations

import math
import random
from itertools import pairwise

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
    Scenario("sales", "field sales", {
        "who": "a sales representative", "home_words": "her home office in",
        "places": ["Lyon", "Grenoble", "Annecy", "Chambery", "Valence", "Geneva", "Macon", "Vienne"],
        "place": "city", "unit": "km", "measure": "road distance", "scale": 3.0, "factor": 1.25,
        "trip": "a sales trip",
    }),
    Scenario("drilling", "electronics manufacturing", {
        "who": "a CNC drilling head", "home_words": "its parking position at",
        "places": ["H0", "H1", "H2", "H3", "H4", "H5", "H6", "H7"],
        "place": "hole", "unit": "mm", "measure": "travel distance", "scale": 1.0, "factor": 1.0,
        "trip": "one drilling cycle over a circuit board",
    }),
    Scenario("service", "field service", {
        "who": "a lift-maintenance technician", "home_words": "the company's",
        "places": ["Depot", "Harbour Tower", "City Hall", "Museum", "Mall", "Hospital", "University", "Stadium"],
        "place": "site", "unit": "minutes", "measure": "driving time", "scale": 0.6, "factor": 1.0,
        "trip": "the daily inspection round",
    }),
)
# the eval split's own industries, travellers, place names and units (held out from training)
EVAL_SCENARIOS = (
    Scenario("pharmacy_run", "pharmaceutical wholesale", {
        "who": "a pharmacy delivery driver", "home_words": "the wholesaler's depot in",
        "places": ["Perth", "Dundee", "Stirling", "Falkirk", "Kirkcaldy", "Dunfermline", "Arbroath", "Montrose"],
        "place": "town", "unit": "miles", "measure": "driving distance", "scale": 1.2, "factor": 1.25,
        "trip": "the morning delivery run",
    }),
    Scenario("picking_robot", "warehouse automation", {
        "who": "an autonomous picking robot", "home_words": "its charging dock at",
        "places": ["Bay 0", "Rack A", "Rack B", "Rack C", "Rack D", "Rack E", "Rack F", "Rack G"],
        "place": "rack", "unit": "seconds", "measure": "travel time", "scale": 0.8, "factor": 1.0,
        "trip": "one picking tour",
    }),
)


class TravellingSalesman(ProblemFamily):
    name = "tsp"
    title = "Travelling salesman (MTZ)"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"travel": "binary", "order": "nonnegative"}
    # eval-only rewordings of the family's fixed sentences (training keeps its text; data_synth.statements)
    phrasings = (
        Phrasing(r"\bstarts from\b", ("starts from",), ("sets out from",)),
        Phrasing(r"\bmust visit each of the\b", ("must visit each of the",), ("has to call at every one of the",)),
        Phrasing(r"\bexactly once, and return to\b", ("exactly once, and return to",),
                 ("a single time, and come back to",)),
        Phrasing(r"\bbetween two locations is the same in both directions\.",
                 ("between two locations is the same in both directions.",),
                 ("between any two locations does not depend on the direction of travel.",)),
        Phrasing(r"\bSome visits must come before others:", ("Some visits must come before others:",),
                 ("Certain visits have to precede others:",)),
        Phrasing(r"\bThere is no usable direct connection between these pairs, in either direction:",
                 ("There is no usable direct connection between these pairs, in either direction:",),
                 ("These pairs have no direct link that can be used, whichever way one travels:",)),
        Phrasing(r"\bIn which order should the\b", ("In which order should the",), ("In what sequence should the",)),
        Phrasing(r"\bbe visited to make the total\b", ("be visited to make the total",),
                 ("be toured so that the overall",)),
        Phrasing(r"\bof the round trip as small as possible\?", ("of the round trip as small as possible?",),
                 ("of the whole circuit is as low as possible?",)),
        Phrasing(r"\bWhat is the minimum total\b", ("What is the minimum total",),
                 ("How short, at best, is the overall",)),
        Phrasing(r"\blist of location names; the first one is where the tour starts and ends\b",
                 ("list of location names; the first one is where the tour starts and ends",),
                 ("names of all locations, the first being where the tour begins and finishes",)),
        Phrasing(r"\bdistance \(or travel time\) from a to b, the same in both directions\b",
                 ("distance (or travel time) from a to b, the same in both directions",),
                 ("distance (or travel time) from a to b, identical in the reverse direction",)),
        Phrasing(r"\bthe first place must be visited before the second\b",
                 ("the first place must be visited before the second",),
                 ("the first place has to be reached ahead of the second",)),
        Phrasing(r"\bpairs with no usable direct leg in either direction\b",
                 ("pairs with no usable direct leg in either direction",),
                 ("pairs whose direct leg cannot be used either way",)),
    )
    data_fields = {
        "places": "list of location names; the first one is where the tour starts and ends",
        "distance": "distance[a][b]: distance (or travel time) from a to b, the same in both directions",
        "precedence": "list of [earlier, later] pairs: the first place must be visited before the second (only "
                      "when there are such pairs)",
        "closed": "list of [a, b] pairs with no usable direct leg in either direction (only when some are closed)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
places = data["places"]
start, n = places[0], len(places)
legs = [(a, b) for a in places for b in places if a != b]
model.travel = pyo.Var(legs, domain=pyo.Binary)  # the tour goes directly from a to b
'''
    _ORDER = '''\
# position of each place in the tour (MTZ); the start is position 0
model.order = pyo.Var(places[1:], bounds=(1, n - 1), domain=pyo.NonNegativeReals)
'''
    _FLOW = '''\
# single-commodity flow: the start sends one unit to every other place, only along legs of the tour
model.flow = pyo.Var(legs, domain=pyo.NonNegativeReals)
'''
    _DEGREES = '''\

model.obj = pyo.Objective(expr=sum(data["distance"][a][b] * model.travel[a, b] for a, b in legs),
                          sense=pyo.minimize)

model.leave = pyo.Constraint(places, rule=lambda model, a: sum(model.travel[a, b] for b in places if b != a) == 1)
model.arrive = pyo.Constraint(places, rule=lambda model, b: sum(model.travel[a, b] for a in places if a != b) == 1)

# a leg and its reverse are never both used (no round trip between two places); the subtour constraints
# imply it, but stating it tightens the relaxation and speeds up the search
pairs = [(a, b) for k, a in enumerate(places) for b in places[k + 1:]]
model.one_way = pyo.Constraint(pairs, rule=lambda model, a, b: model.travel[a, b] + model.travel[b, a] <= 1)
'''
    _MTZ = '''\

# no subtours: going from a to b means b comes later in the tour than a
def no_subtour(model, a, b):
    return model.order[a] - model.order[b] + (n - 1) * model.travel[a, b] <= n - 2

model.no_subtour = pyo.Constraint([(a, b) for a, b in legs if a != start and b != start], rule=no_subtour)
'''
    _FLOW_BALANCE = '''\

# no subtours: every place other than the start keeps one unit of the start's n - 1, which only travels on
# legs of the tour, so every place is reached from the start
def inflow(model, p):
    return sum(model.flow[a, p] for a in places if a != p)

def outflow(model, p):
    return sum(model.flow[p, b] for b in places if b != p)

model.send = pyo.Constraint(expr=outflow(model, start) - inflow(model, start) == n - 1)
model.keep = pyo.Constraint(places[1:], rule=lambda model, p: inflow(model, p) - outflow(model, p) == 1)
model.flow_on_tour = pyo.Constraint(legs, rule=lambda model, a, b: model.flow[a, b] <= (n - 1) * model.travel[a, b])
'''
    _PRECEDENCE_MTZ = '''\
model.precedence = pyo.Constraint(
    [tuple(pair) for pair in data["precedence"]], rule=lambda model, a, b: model.order[a] + 1 <= model.order[b])
'''
    _PRECEDENCE_FLOW = '''\
# a place visited earlier receives more of the flow (n minus its position in the tour)
model.precedence = pyo.Constraint(
    [tuple(pair) for pair in data["precedence"]], rule=lambda model, a, b: inflow(model, a) >= inflow(model, b) + 1)
'''
    _CLOSED = '''\
model.closed = pyo.Constraint(
    [tuple(pair) for pair in data["closed"]], rule=lambda model, a, b: model.travel[a, b] + model.travel[b, a] == 0)
'''

    model_code = _HEAD + _ORDER + _DEGREES + _MTZ  # the MTZ model (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        flow = data.get("subtour_elimination") == "flow"
        code = self._HEAD + (self._FLOW if flow else self._ORDER) + self._DEGREES
        code += self._FLOW_BALANCE if flow else self._MTZ
        if "precedence" in data:
            code += self._PRECEDENCE_FLOW if flow else self._PRECEDENCE_MTZ
        if "closed" in data:
            code += self._CLOSED
        return code

    def variant_of(self, data: dict) -> str:
        parts = ["flow"] if data.get("subtour_elimination") == "flow" else []
        return "+".join(parts + [name for name in ("precedence", "closed") if name in data]) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        if data.get("subtour_elimination") == "flow":
            return {"travel": "binary", "flow": "nonnegative"}
        return self.domains

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n = size_for(difficulty, 5, 6, 8)
        places = words["places"][:n]
        point = {p: (rng.uniform(0, 100), rng.uniform(0, 100)) for p in places}
        distance = {a: {} for a in places}
        for i, a in enumerate(places):
            for b in places[i + 1:]:
                d = max(1, round(math.dist(point[a], point[b]) * words["scale"] * words["factor"]))
                distance[a][b] = distance[b][a] = d
        for a in places:
            distance[a] = {b: distance[a][b] for b in places if b != a}
        data = {"places": places, "distance": distance}
        if rng.random() < 0.5:
            data["subtour_elimination"] = "flow"
        ordered, closing = rng.random() < 0.5, rng.random() < 0.5
        if ordered or closing:
            reference = [places[0], *rng.sample(places[1:], n - 1)]
            position = {p: k for k, p in enumerate(reference)}
            if ordered:
                pairs = set()
                while len(pairs) < max(1, (n - 1) // 3):
                    a, b = sorted(rng.sample(places[1:], 2), key=position.get)
                    pairs.add((a, b))
                data["precedence"] = [list(pair) for pair in sorted(pairs, key=lambda p: (position[p[0]], position[p[1]]))]
            if closing:
                adjacent = {frozenset((reference[k], reference[(k + 1) % n])) for k in range(n)}
                open_pairs = [[a, b] for k, a in enumerate(places) for b in places[k + 1:]
                              if frozenset((a, b)) not in adjacent]
                data["closed"] = sorted(rng.sample(open_pairs, max(1, len(open_pairs) // 5)),
                                        key=lambda pair: (places.index(pair[0]), places.index(pair[1])))
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        places = data["places"]
        n = len(places)
        go = {(a, b): matrix.add_var(f"travel[{a},{b}]", 0, 1, cost=data["distance"][a][b], integer=True)
              for a in places for b in places if a != b}
        closed = {frozenset(pair) for pair in data.get("closed", ())}
        for (a, b), column in go.items():
            if frozenset((a, b)) in closed:
                matrix.col_upper[column] = 0.0  # a closed leg, by its bound
        for a in places:
            matrix.add_row({go[a, b]: 1.0 for b in places if b != a}, lower=1, upper=1, name=f"leave[{a}]")
            matrix.add_row({go[b, a]: 1.0 for b in places if b != a}, lower=1, upper=1, name=f"arrive[{a}]")
        for k, a in enumerate(places):
            for b in places[k + 1:]:
                matrix.add_row({go[a, b]: 1.0, go[b, a]: 1.0}, upper=1, name=f"one_way[{a},{b}]")
        if data.get("subtour_elimination") == "flow":
            carried = {(a, b): matrix.add_var(f"flow[{a},{b}]") for a, b in go}

            def net_inflow(p: str) -> dict[int, float]:
                row = {carried[a, p]: 1.0 for a in places if a != p}
                row.update({carried[p, b]: -1.0 for b in places if b != p})
                return row

            matrix.add_row(net_inflow(places[0]), lower=-(n - 1), upper=-(n - 1), name="send")
            for p in places[1:]:
                matrix.add_row(net_inflow(p), lower=1, upper=1, name=f"keep[{p}]")
            for leg, column in go.items():
                matrix.add_row({carried[leg]: 1.0, column: -(n - 1.0)}, upper=0.0, name=f"flow_on_tour[{leg}]")
            for a, b in data.get("precedence", ()):
                row = {carried[q, a]: 1.0 for q in places if q != a}
                for q in places:
                    if q != b:
                        row[carried[q, b]] = row.get(carried[q, b], 0.0) - 1.0
                matrix.add_row(row, lower=1.0, name=f"precedence[{a},{b}]")
            return
        rank = {p: matrix.add_var(f"order[{p}]", 1, n - 1) for p in places[1:]}
        for a in places[1:]:
            for b in places[1:]:
                if a != b:
                    matrix.add_row({rank[a]: 1.0, rank[b]: -1.0, go[a, b]: n - 1}, upper=n - 2,
                                   name=f"no_subtour[{a},{b}]")
        for a, b in data.get("precedence", ()):
            matrix.add_row({rank[b]: 1.0, rank[a]: -1.0}, lower=1.0, name=f"precedence[{a},{b}]")

    def constraint_rows(self, data: dict, x: dict):
        places = data["places"]
        n = len(places)
        travel = x["travel"]
        for a in places:
            yield Row(f"leave[{a}]", sum(travel[a, b] for b in places if b != a), "==", 1)
            yield Row(f"arrive[{a}]", sum(travel[b, a] for b in places if b != a), "==", 1)
        for k, a in enumerate(places):
            for b in places[k + 1:]:
                yield Row(f"one_way[{a},{b}]", travel[a, b] + travel[b, a], "<=", 1)
        for a, b in data.get("closed", ()):
            yield Row(f"closed[{a},{b}]", travel[a, b] + travel[b, a], "==", 0)
        if data.get("subtour_elimination") == "flow":
            flow = x["flow"]

            def inflow(p: str) -> float:
                return sum(flow[q, p] for q in places if q != p)

            def outflow(p: str) -> float:
                return sum(flow[p, q] for q in places if q != p)

            yield Row("send", outflow(places[0]) - inflow(places[0]), "==", n - 1)
            for p in places[1:]:
                yield Row(f"keep[{p}]", inflow(p) - outflow(p), "==", 1)
            for a in places:
                for b in places:
                    if a != b:
                        yield Row(f"flow_on_tour[{a},{b}]", flow[a, b] - (n - 1) * travel[a, b], "<=", 0)
            for a, b in data.get("precedence", ()):
                yield Row(f"precedence[{a},{b}]", inflow(a) - inflow(b), ">=", 1)
        else:
            order = x["order"]
            for p in places[1:]:
                yield Row(f"order_low[{p}]", order[p], ">=", 1)
                yield Row(f"order_high[{p}]", order[p], "<=", n - 1)
            for a in places[1:]:
                for b in places[1:]:
                    if a != b:
                        yield Row(f"no_subtour[{a},{b}]", order[a] - order[b] + (n - 1) * travel[a, b], "<=", n - 2)
            for a, b in data.get("precedence", ()):
                yield Row(f"precedence[{a},{b}]", order[b] - order[a], ">=", 1)
        # the chosen legs form one tour through every place (checked directly, not through MTZ)
        here, seen = places[0], [places[0]]
        for _ in range(n):
            here = next((b for b in places if b != here and travel[here, b] > 0.5), None)
            if here is None or here == places[0]:
                break
            seen.append(here)
        yield Row("single_tour", len(set(seen)), "==", n)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["distance"][a][b] * x["travel"][a, b]
                   for a in data["places"] for b in data["places"] if a != b)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        places, place, unit = data["places"], words["place"], words["unit"]
        start, others = places[0], places[1:]
        intro = (f"For {words['trip']}, {words['who']} starts from {words['home_words']} {start}, must visit each "
                 f"of the {len(others)} {plural(place)} {join_names(others)} exactly once, and return to {start}. The "
                 f"{words['measure']} between two locations is the same in both directions.")
        if "precedence" in data:
            intro += (" Some visits must come before others: " + "; ".join(
                f"{a} before {b}" for a, b in data["precedence"]) + ".")
        if "closed" in data:
            intro += (" There is no usable direct connection between these pairs, in either direction: "
                      + "; ".join(f"{a} and {b}" for a, b in data["closed"]) + ".")
        question = (f"In which order should the {plural(place)} be visited to make the total {words['measure']} of the "
                    f"round trip as small as possible? What is the minimum total {words['measure']} in {unit}?")
        if representation == "text":
            pairs = ", ".join(f"{a} to {b} {fmt(data['distance'][a][b])}"
                              for i, a in enumerate(places) for b in places[i + 1:])
            return f"{intro} The {words['measure']}s in {unit} are: {pairs}. {question}"
        if representation == "table":
            table = markdown_table([f"{words['measure']} ({unit})", *places],
                                   [[a, *["-" if a == b else data["distance"][a][b] for b in places]]
                                    for a in places])
            return f"{intro}\n\n{table}\n\n{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        places = data["places"]
        tour = [places[0]]
        while len(tour) <= len(places):
            here = tour[-1]
            step = next((b for b in places if b != here and x["travel"][here, b] > 0.5), None)
            if step is None:
                break
            tour.append(step)
            if step == places[0]:
                break
        lengths = [data["distance"][a][b] for a, b in pairwise(tour)]
        return (f"Tour: {' -> '.join(tour)}; leg lengths {' + '.join(fmt(d) for d in lengths)} = "
                f"{fmt(sum(lengths))} {scenario.words['unit']}.")

    def formulation(self, data: dict) -> str:
        flow = data.get("subtour_elimination") == "flow"
        parameters = "distance $d_{ij}$"
        rows = ["\\text{s.t.}\\ & \\sum_{j \\ne i} x_{ij} = 1 && \\forall i \\in V",
                "& \\sum_{i \\ne j} x_{ij} = 1 && \\forall j \\in V",
                "& x_{ij} + x_{ji} \\le 1 && \\forall i < j"]
        if flow:
            variables = ("$x_{ij} \\in \\{0,1\\}$ (the tour goes from $i$ directly to $j$), $f_{ij} \\ge 0$ (units "
                         "of the start's flow on leg $(i,j)$)")
            rows += ["& \\sum_{j \\ne 0} f_{0j} - \\sum_{j \\ne 0} f_{j0} = n - 1",
                     "& \\sum_{j \\ne i} f_{ji} - \\sum_{j \\ne i} f_{ij} = 1 && \\forall i \\ne 0",
                     "& f_{ij} \\le (n-1) x_{ij} && \\forall i \\ne j"]
        else:
            variables = ("$x_{ij} \\in \\{0,1\\}$ (the tour goes from $i$ directly to $j$), "
                         "$u_i \\in [1, n-1]$ (position of $i$ in the tour, $i \\ne 0$)")
            rows.append("& u_i - u_j + (n-1) x_{ij} \\le n - 2 && \\forall i \\ne j,\\ i, j \\ne 0")
        sets = "locations $V = \\{0, 1, \\dots, n-1\\}$, with $0$ the start"
        if "precedence" in data:
            sets += ", precedence pairs $P$ ($(a, b)$: $a$ before $b$)"
            rows.append("& \\sum_{j \\ne a} f_{ja} \\ge \\sum_{j \\ne b} f_{jb} + 1 && \\forall (a, b) \\in P" if flow
                        else "& u_a + 1 \\le u_b && \\forall (a, b) \\in P")
        if "closed" in data:
            sets += ", closed pairs $C$"
            rows.append("& x_{ab} + x_{ba} = 0 && \\forall \\{a, b\\} \\in C")
        rows.append("& f_{ij} \\ge 0,\\ x_{ij} \\in \\{0,1\\}" if flow else "& 1 \\le u_i \\le n - 1,\\ x_{ij} \\in \\{0,1\\}")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{i \\ne j} d_{ij} x_{ij} \\\\\n" + " \\\\\n".join(rows)
            + "\n\\end{aligned}\n$$"
        )


FAMILY = TravellingSalesman()
