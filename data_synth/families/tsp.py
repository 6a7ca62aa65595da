"""Travelling salesman (MILP, small): the shortest round trip that starts at a home location, visits
every other location exactly once and returns, with Miller-Tucker-Zemlin (MTZ) constraints to rule
out subtours."""

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
    size_for,
)

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


class TravellingSalesman(ProblemFamily):
    name = "tsp"
    title = "Travelling salesman (MTZ)"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"travel": "binary", "order": "nonnegative"}
    data_fields = {
        "places": "list of location names; the first one is where the tour starts and ends",
        "distance": "distance[a][b]: distance (or travel time) from a to b, the same in both directions",
    }
    model_code = '''\
model = pyo.ConcreteModel()
places = data["places"]
start, n = places[0], len(places)
legs = [(a, b) for a in places for b in places if a != b]
model.travel = pyo.Var(legs, domain=pyo.Binary)  # the tour goes directly from a to b
# position of each place in the tour (MTZ); the start is position 0
model.order = pyo.Var(places[1:], bounds=(1, n - 1), domain=pyo.NonNegativeReals)

model.obj = pyo.Objective(expr=sum(data["distance"][a][b] * model.travel[a, b] for a, b in legs),
                          sense=pyo.minimize)

model.leave = pyo.Constraint(places, rule=lambda model, a: sum(model.travel[a, b] for b in places if b != a) == 1)
model.arrive = pyo.Constraint(places, rule=lambda model, b: sum(model.travel[a, b] for a in places if a != b) == 1)

# a leg and its reverse are never both used (no round trip between two places); with MTZ alone this
# is implied, but stating it tightens the relaxation and speeds up the search
pairs = [(a, b) for k, a in enumerate(places) for b in places[k + 1:]]
model.one_way = pyo.Constraint(pairs, rule=lambda model, a, b: model.travel[a, b] + model.travel[b, a] <= 1)

# no subtours: going from a to b means b comes later in the tour than a
def no_subtour(model, a, b):
    return model.order[a] - model.order[b] + (n - 1) * model.travel[a, b] <= n - 2

model.no_subtour = pyo.Constraint([(a, b) for a, b in legs if a != start and b != start], rule=no_subtour)
'''

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
        return {"places": places, "distance": distance}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        places = data["places"]
        n = len(places)
        go = {(a, b): matrix.add_var(f"travel[{a},{b}]", 0, 1, cost=data["distance"][a][b], integer=True)
              for a in places for b in places if a != b}
        rank = {p: matrix.add_var(f"order[{p}]", 1, n - 1) for p in places[1:]}
        for a in places:
            matrix.add_row({go[a, b]: 1.0 for b in places if b != a}, lower=1, upper=1, name=f"leave[{a}]")
            matrix.add_row({go[b, a]: 1.0 for b in places if b != a}, lower=1, upper=1, name=f"arrive[{a}]")
        for k, a in enumerate(places):
            for b in places[k + 1:]:
                matrix.add_row({go[a, b]: 1.0, go[b, a]: 1.0}, upper=1, name=f"one_way[{a},{b}]")
        for a in places[1:]:
            for b in places[1:]:
                if a != b:
                    matrix.add_row({rank[a]: 1.0, rank[b]: -1.0, go[a, b]: n - 1}, upper=n - 2,
                                   name=f"no_subtour[{a},{b}]")

    def constraint_rows(self, data: dict, x: dict):
        places = data["places"]
        n = len(places)
        travel, order = x["travel"], x["order"]
        for a in places:
            yield Row(f"leave[{a}]", sum(travel[a, b] for b in places if b != a), "==", 1)
            yield Row(f"arrive[{a}]", sum(travel[b, a] for b in places if b != a), "==", 1)
        for k, a in enumerate(places):
            for b in places[k + 1:]:
                yield Row(f"one_way[{a},{b}]", travel[a, b] + travel[b, a], "<=", 1)
        for p in places[1:]:
            yield Row(f"order_low[{p}]", order[p], ">=", 1)
            yield Row(f"order_high[{p}]", order[p], "<=", n - 1)
        for a in places[1:]:
            for b in places[1:]:
                if a != b:
                    yield Row(f"no_subtour[{a},{b}]", order[a] - order[b] + (n - 1) * travel[a, b], "<=", n - 2)
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
                 f"of the {len(others)} {place}s {join_names(others)} exactly once, and return to {start}. The "
                 f"{words['measure']} between two locations is the same in both directions.")
        question = (f"In which order should the {place}s be visited to make the total {words['measure']} of the "
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
            return f"{intro}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
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
        return (
            "**Sets**: locations $V = \\{0, 1, \\dots, n-1\\}$, with $0$ the start.\n\n"
            "**Parameters**: distance $d_{ij}$.\n\n"
            "**Variables**: $x_{ij} \\in \\{0,1\\}$ (the tour goes from $i$ directly to $j$), "
            "$u_i \\in [1, n-1]$ (position of $i$ in the tour, $i \\ne 0$).\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{i \\ne j} d_{ij} x_{ij} \\\\\n"
            "\\text{s.t.}\\ & \\sum_{j \\ne i} x_{ij} = 1 && \\forall i \\in V \\\\\n"
            "& \\sum_{i \\ne j} x_{ij} = 1 && \\forall j \\in V \\\\\n"
            "& x_{ij} + x_{ji} \\le 1 && \\forall i < j \\\\\n"
            "& u_i - u_j + (n-1) x_{ij} \\le n - 2 && \\forall i \\ne j,\\ i, j \\ne 0 \\\\\n"
            "& 1 \\le u_i \\le n - 1,\\ x_{ij} \\in \\{0,1\\}\n\\end{aligned}\n$$"
        )


FAMILY = TravellingSalesman()
