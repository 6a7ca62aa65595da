"""Shortest path (LP): the cheapest route from an origin to a destination over directed links with
costs (travel time, fuel, tolls). Written as a unit-flow problem; its constraint matrix is totally
unimodular, so the LP optimum is a path."""

from __future__ import annotations

import random

from data_synth.family import (
    MatrixModel,
    ProblemFamily,
    Row,
    Scenario,
    describe_data_file,
    fmt,
    markdown_table,
    size_for,
)

SCENARIOS = (
    Scenario("delivery", "last-mile delivery", {
        "what": "a delivery van", "cost": "driving time", "unit": "minutes", "place": "depot",
        "names": ["Depot", "Market", "Harbour", "Station", "Museum", "Park", "School", "Bridge", "Mill",
                  "Square", "Tower", "Garden", "Customer"],
    }),
    Scenario("shipping", "freight shipping", {
        "what": "a container", "cost": "shipping cost", "unit": "dollars", "place": "port",
        "names": ["Shanghai", "Busan", "Singapore", "Colombo", "Dubai", "Suez", "Piraeus", "Valencia",
                  "Tangier", "Genoa", "Marseille", "Antwerp", "Rotterdam"],
    }),
    Scenario("routing", "network routing", {
        "what": "a data packet", "cost": "latency", "unit": "milliseconds", "place": "router",
        "names": ["R0", "R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10", "R11", "R12"],
    }),
)


class ShortestPath(ProblemFamily):
    name = "shortest_path"
    title = "Shortest path"
    problem_type = "LP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"use": "nonnegative"}
    data_fields = {
        "nodes": "list of node names",
        "origin": "the starting node",
        "destination": "the node to reach",
        "links": "list of [from, to, cost] triples: a directed link and the cost of using it",
    }
    model_code = '''\
model = pyo.ConcreteModel()
links = [(l[0], l[1]) for l in data["links"]]
cost = {(l[0], l[1]): l[2] for l in data["links"]}
# use[i, j] = 1 when the route takes link (i, j); the LP optimum is integral (a network matrix)
model.use = pyo.Var(links, domain=pyo.NonNegativeReals, bounds=(0, 1))

model.obj = pyo.Objective(expr=sum(cost[l] * model.use[l] for l in links), sense=pyo.minimize)

def balance(model, n):
    out = sum(model.use[i, j] for (i, j) in links if i == n)
    inflow = sum(model.use[i, j] for (i, j) in links if j == n)
    supply = 1 if n == data["origin"] else (-1 if n == data["destination"] else 0)
    return out - inflow == supply

model.balance = pyo.Constraint(data["nodes"], rule=balance)
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        n_nodes = size_for(difficulty, 6, 9, 13)
        names = scenario.words["names"]
        nodes = names[: n_nodes - 1] + [names[-1]]
        origin, destination = nodes[0], nodes[-1]
        links: dict[tuple[str, str], int] = {}
        # a backbone path guarantees a route; extra forward and some backward links make choices
        for a, b in zip(nodes, nodes[1:], strict=False):
            links[(a, b)] = rng.randint(8, 40)
        for _ in range(n_nodes * 2):
            a, b = rng.sample(nodes, 2)
            if a == destination or b == origin or (a, b) in links:
                continue
            gap = abs(nodes.index(b) - nodes.index(a))
            links[(a, b)] = rng.randint(5, 25) * gap
        return {"nodes": nodes, "origin": origin, "destination": destination,
                "links": [[a, b, c] for (a, b), c in links.items()]}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # the destination's inbound links are closed (only an outbound one remains): no route exists
        data = dict(data)
        links = [link for link in data["links"] if link[1] != data["destination"]]
        if not any(link[0] == data["destination"] for link in links):
            links.append([data["destination"], data["nodes"][1], rng.randint(5, 30)])
        data["links"] = links
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        column = {(a, b): matrix.add_var(f"use[{a},{b}]", 0.0, 1.0, cost=c) for a, b, c in data["links"]}
        for node in data["nodes"]:
            supply = 1.0 if node == data["origin"] else (-1.0 if node == data["destination"] else 0.0)
            coefficients: dict[int, float] = {}
            for (a, b), col in column.items():
                if a == node:
                    coefficients[col] = coefficients.get(col, 0.0) + 1.0
                if b == node:
                    coefficients[col] = coefficients.get(col, 0.0) - 1.0
            matrix.add_row(coefficients, supply, supply, name=f"balance[{node}]")

    def constraint_rows(self, data: dict, x: dict):
        use = x["use"]
        for a, b, _ in data["links"]:
            yield Row(f"upper[{a},{b}]", use[(a, b)], "<=", 1.0)
        for node in data["nodes"]:
            supply = 1.0 if node == data["origin"] else (-1.0 if node == data["destination"] else 0.0)
            net = sum(use[(a, b)] for a, b, _ in data["links"] if a == node) - \
                sum(use[(a, b)] for a, b, _ in data["links"] if b == node)
            yield Row(f"balance[{node}]", net, "==", supply)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(c * x["use"][(a, b)] for a, b, c in data["links"])

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        successor = {a: b for (a, b), v in x["use"].items() if v is not None and v > 0.5}
        route, node = [data["origin"]], data["origin"]
        while node in successor and len(route) <= len(data["nodes"]):
            node = successor[node]
            route.append(node)
        return "- route: " + " -> ".join(route)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        unit = words["unit"]
        intro = {
            "delivery": f"A dispatcher must send {words['what']} from {data['origin']} to {data['destination']}. "
                        f"Each one-way street segment below has a {words['cost']} in {unit}.",
            "shipping": f"A forwarder must move {words['what']} from the port of {data['origin']} to "
                        f"{data['destination']}. Each direct sailing has a {words['cost']} in {unit}.",
            "routing": f"A network engineer must route {words['what']} from {data['origin']} to "
                       f"{data['destination']}. Each directed link has a {words['cost']} in {unit}.",
        }[scenario.key]
        question = (f"Find the route with the smallest total {words['cost']}. What is that minimum total "
                    f"{words['cost']} in {unit}? If no route exists, say so.")
        if representation == "text":
            links = "; ".join(f"{a} to {b}: {fmt(c)}" for a, b, c in data["links"])
            return f"{intro} The links are: {links}. {question}"
        if representation == "table":
            table = markdown_table(["from", "to", f"{words['cost']} ({unit})"], data["links"])
            return f"{intro}\n\n{table}\n\n{question}"
        if representation == "file":
            return f"{intro}\n\n{describe_data_file(self.data_fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: nodes $N$ with origin $o$ and destination $d$; directed links $A$.\n\n"
            "**Parameters**: cost $c_{ij}$ of link $(i,j)$; supply $b_n = 1$ at $o$, $-1$ at $d$, 0 elsewhere.\n\n"
            "**Variables**: $y_{ij} \\in [0, 1]$, whether the route uses link $(i,j)$ (integral at the optimum).\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{(i,j) \\in A} c_{ij} y_{ij} \\\\\n"
            "\\text{s.t.}\\ & \\sum_{(n,j) \\in A} y_{nj} - \\sum_{(i,n) \\in A} y_{in} = b_n && \\forall n \\in N \\\\\n"
            "& 0 \\le y_{ij} \\le 1 && \\forall (i,j) \\in A\n\\end{aligned}\n$$"
        )


FAMILY = ShortestPath()
