"""Shortest path (LP): the cheapest route from an origin to a destination over directed links with
costs (travel time, fuel, tolls). Written as a unit-flow problem; its constraint matrix is totally
unimodular, so the LP optimum is a path.

Structure variants (drawn per instance, recorded by the keys present): a node the route must avoid
(`avoid`), a limit on the number of links (`max_hops`) and a second, limited resource each link uses
(`resource` with `resource_limit`: toll, transit days or energy), each present or absent, so the program
has eight skeletons. A hop or resource limit is a side constraint that breaks the network structure, so
those variants make the link choice binary (the model becomes an integer program: a resource-constrained
shortest path). Limits are drawn around a reference path that meets them, so every variant is feasible."""

from __future__ import annotations

import heapq
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
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("delivery", "last-mile delivery", {
        "what": "a delivery van", "cost": "driving time", "unit": "minutes", "place": "depot",
        "resource": "toll", "resource_unit": "dollars", "resource_range": (0, 6),
        "names": ["Depot", "Market", "Harbour", "Station", "Museum", "Park", "School", "Bridge", "Mill",
                  "Square", "Tower", "Garden", "Customer"],
    }),
    Scenario("shipping", "freight shipping", {
        "what": "a container", "cost": "shipping cost", "unit": "dollars", "place": "port",
        "resource": "transit time", "resource_unit": "days", "resource_range": (1, 9),
        "names": ["Shanghai", "Busan", "Singapore", "Colombo", "Dubai", "Suez", "Piraeus", "Valencia",
                  "Tangier", "Genoa", "Marseille", "Antwerp", "Rotterdam"],
    }),
    Scenario("routing", "network routing", {
        "what": "a data packet", "cost": "latency", "unit": "milliseconds", "place": "router",
        "resource": "energy", "resource_unit": "millijoules", "resource_range": (1, 12),
        "names": ["R0", "R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10", "R11", "R12"],
    }),
)


# the eval split's own industries and names (see ProblemFamily.eval_scenarios)
EVAL_SCENARIOS = (
    Scenario("haulage", "open-pit mine haulage", {
        "what": "a loaded haul truck", "cost": "fuel burn", "unit": "gallons", "place": "junction",
        "resource": "tyre wear", "resource_unit": "wear points", "resource_range": (0, 7),
        "names": ["Loading Face", "North Bench", "Ramp Junction", "Haul Bend", "Water Stand", "Fuel Bay",
                  "Switchback", "East Cut", "Scale House", "Tailings Gate", "Ridge Curve", "Sump Road",
                  "Primary Crusher"],
    }),
    Scenario("rail", "European rail freight", {
        "what": "a block train", "cost": "running cost", "unit": "euros", "place": "yard",
        "resource": "traction energy", "resource_unit": "megawatt-hours", "resource_range": (1, 9),
        "names": ["Duisburg", "Oberhausen", "Venlo", "Eindhoven", "Liege", "Namur", "Metz", "Nancy",
                  "Strasbourg", "Mulhouse", "Olten", "Bellinzona", "Novara"],
    }),
)


class ShortestPath(ProblemFamily):
    name = "shortest_path"
    title = "Shortest path"
    problem_type = "LP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"use": "nonnegative"}
    data_fields = {
        "nodes": "list of node names",
        "origin": "the starting node",
        "destination": "the node to reach",
        "links": "list of [from, to, cost] triples: a directed link and the cost of using it",
        "avoid": "a node the route may not pass through (only when there is one)",
        "max_hops": "most links the route may use (only when there is such a limit)",
        "resource": "list of [from, to, amount] triples: how much of the limited resource each link uses (only "
                    "when there is a resource limit)",
        "resource_limit": "most of the resource the whole route may use (only when `resource` is given)",
    }
    # eval-only rewordings of the fixed sentences (training keeps its text); each stops short of the generic
    # words that training writes two ways ("at most", "what is that")
    phrasings = (
        Phrasing(r"\bThe links are:", ("The links are:",), ("Link by link, the values are:",)),
        Phrasing(r"\bThe route may not pass through\b", ("The route may not pass through",),
                 ("No part of the route is allowed to touch", "The route has to stay clear of")),
        Phrasing(r"\bThe route may use\b(?= at most)", ("The route may use",), ("The route can take",)),
        Phrasing(r"\blinks in all\.", ("links in all.",), ("links altogether.", "links from start to end.")),
        Phrasing(r"\bEach link also has a\b", ("Each link also has a",), ("On top of that, every link carries a",)),
        Phrasing(r"\band the whole route may use\b(?= at most)", ("and the whole route may use",),
                 ("and the route as a whole can consume",)),
        Phrasing(r"\bFind the route with the smallest total\b", ("Find the route with the smallest total",),
                 ("Identify the route of least overall", "Work out which route keeps down the overall")),
        Phrasing(r"(?<=what is that )minimum total\b", ("minimum total",), ("smallest achievable",)),
        Phrasing(r"\bIf no route exists, say so\.", ("If no route exists, say so.",),
                 ("Should there be no route at all, report that.", "Report it if no route can be found.")),
        Phrasing(r"\bof each link:", ("of each link:",), ("link by link:",)),
        Phrasing(r"(?<=\| )from(?= \|)", ("from",), ("start",)),
        Phrasing(r"(?<=\| )to(?= \|)", ("to",), ("end",)),
        Phrasing(r"\blist of node names\b", ("list of node names",), ("names of all the nodes",)),
        Phrasing(r"\bthe starting node\b", ("the starting node",), ("node where the route begins",)),
        Phrasing(r"\bthe node to reach\b", ("the node to reach",), ("node where the route has to arrive",)),
        Phrasing(r"\blist of \[from, to, cost\] triples: a directed link and the cost of using it\b",
                 ("list of [from, to, cost] triples: a directed link and the cost of using it",),
                 ("[from, to, cost] entries, one for every directed link, giving what it costs to travel it",)),
        Phrasing(r"\ba node the route may not pass through\b", ("a node the route may not pass through",),
                 ("node that is closed to the route",)),
        Phrasing(r"\bmost links the route may use\b", ("most links the route may use",),
                 ("largest permitted count of links on the route",)),
        Phrasing(r"\blist of \[from, to, amount\] triples: how much of the limited resource each link uses\b",
                 ("list of [from, to, amount] triples: how much of the limited resource each link uses",),
                 ("[from, to, amount] entries giving the consumption of the capped resource on every link",)),
        Phrasing(r"\bmost of the resource the whole route may use\b",
                 ("most of the resource the whole route may use",),
                 ("cap on the resource consumed along the entire route",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(included only if",)),
    )
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
links = [(l[0], l[1]) for l in data["links"]]
cost = {(l[0], l[1]): l[2] for l in data["links"]}
'''
    _USE = '''\
# use[i, j] = 1 when the route takes link (i, j); the LP optimum is integral (a network matrix)
model.use = pyo.Var(links, domain=pyo.NonNegativeReals, bounds=(0, 1))
'''
    _USE_BINARY = '''\
# use[i, j] = 1 when the route takes link (i, j); the side constraints below break the network structure,
# so the choice must be binary
model.use = pyo.Var(links, domain=pyo.Binary)
'''
    _BALANCE = '''\

model.obj = pyo.Objective(expr=sum(cost[l] * model.use[l] for l in links), sense=pyo.minimize)

def balance(model, n):
    out = sum(model.use[i, j] for (i, j) in links if i == n)
    inflow = sum(model.use[i, j] for (i, j) in links if j == n)
    supply = 1 if n == data["origin"] else (-1 if n == data["destination"] else 0)
    return out - inflow == supply

model.balance = pyo.Constraint(data["nodes"], rule=balance)
'''
    _AVOID = '''\
model.avoid = pyo.Constraint(expr=sum(model.use[i, j] for (i, j) in links if data["avoid"] in (i, j)) == 0)
'''
    _HOPS = '''\
model.max_hops = pyo.Constraint(expr=sum(model.use[l] for l in links) <= data["max_hops"])
'''
    _RESOURCE = '''\
resource = {(l[0], l[1]): l[2] for l in data["resource"]}
model.resource = pyo.Constraint(expr=sum(resource[l] * model.use[l] for l in links) <= data["resource_limit"])
'''

    model_code = _HEAD + _USE + _BALANCE  # the unit-flow LP (the other pieces are optional)

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._USE_BINARY if self._binary(data) else self._USE) + self._BALANCE
        for key, piece in (("avoid", self._AVOID), ("max_hops", self._HOPS), ("resource", self._RESOURCE)):
            if key in data:
                code += piece
        return code

    @staticmethod
    def _binary(data: dict) -> bool:
        return "max_hops" in data or "resource" in data

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("avoid", "max_hops", "resource") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        return {"use": "binary"} if self._binary(data) else self.domains

    def problem_type_for(self, data: dict) -> str:
        return "IP" if self._binary(data) else "LP"

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
        data = {"nodes": nodes, "origin": origin, "destination": destination,
                "links": [[a, b, c] for (a, b), c in links.items()]}
        avoid, hops, limited = (rng.random() < 0.5 for _ in range(3))
        if not (avoid or hops or limited):
            return data
        skip = None
        if avoid:
            # an inner node on the cheapest route whose removal still leaves a route
            route = cheapest_path(nodes, links, origin, destination)
            inner = [n for n in route[1:-1] if cheapest_path(nodes, links, origin, destination, skip=n)]
            if inner:
                skip = data["avoid"] = rng.choice(inner)
        reference = None
        if limited:
            low, high = scenario.words["resource_range"]
            amount = {link: rng.randint(low, high) for link in links}
            # the cheap links tend to use more of the resource, so the limit trades cost against it
            for link, c in links.items():
                if c <= 15 and rng.random() < 0.5:
                    amount[link] += high
            data["resource"] = [[a, b, amount[a, b]] for a, b in links]
            reference = cheapest_path(nodes, amount, origin, destination, skip=skip)
            best = cheapest_path(nodes, links, origin, destination, skip=skip)
            spent = path_total(reference, amount)
            data["resource_limit"] = spent + round(rng.uniform(0.0, 0.6) * max(0, path_total(best, amount) - spent))
        if hops:
            if reference is None:
                reference = cheapest_path(nodes, {link: 1 for link in links}, origin, destination, skip=skip)
                data["max_hops"] = len(reference) - 1 + rng.randint(0, 1)
            else:
                data["max_hops"] = len(reference) - 1
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # the destination's inbound links are closed (only an outbound one remains): no route exists
        data = dict(data)
        links = [link for link in data["links"] if link[1] != data["destination"]]
        if not any(link[0] == data["destination"] for link in links):
            links.append([data["destination"], data["nodes"][1], rng.randint(5, 30)])
        data["links"] = links
        if "resource" in data:  # the resource list follows the links; an added link uses none of it
            amount = {(a, b): v for a, b, v in data["resource"]}
            data["resource"] = [[a, b, amount.get((a, b), 0)] for a, b, _ in links]
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        binary = self._binary(data)
        avoid = data.get("avoid")
        # a link into or out of the avoided node is closed by its bounds
        column = {(a, b): matrix.add_var(f"use[{a},{b}]", 0.0, 0.0 if avoid in (a, b) else 1.0, cost=c,
                                         integer=binary) for a, b, c in data["links"]}
        if "max_hops" in data:
            matrix.add_row({col: 1.0 for col in column.values()}, upper=data["max_hops"], name="max_hops")
        if "resource" in data:
            matrix.add_row({column[a, b]: amount for a, b, amount in data["resource"]}, upper=data["resource_limit"],
                           name="resource")
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
        if "avoid" in data:
            yield Row("avoid", sum(use[(a, b)] for a, b, _ in data["links"] if data["avoid"] in (a, b)), "==", 0)
        if "max_hops" in data:
            yield Row("max_hops", sum(use[(a, b)] for a, b, _ in data["links"]), "<=", data["max_hops"])
        if "resource" in data:
            yield Row("resource", sum(amount * use[(a, b)] for a, b, amount in data["resource"]), "<=",
                      data["resource_limit"])

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
            "haulage": f"The mine's dispatch system has to send {words['what']} from {data['origin']} to "
                       f"{data['destination']}. Every one-way haul road segment below is rated by its "
                       f"{words['cost']} in {unit}.",
            "rail": f"A freight operator plans how {words['what']} gets from the {words['place']} at "
                    f"{data['origin']} to {data['destination']}. For every directed track section the "
                    f"{words['cost']} in {unit} is known.",
        }[scenario.key]
        rules = []
        if "avoid" in data:
            rules.append(f"The route may not pass through {data['avoid']}.")
        if "max_hops" in data:
            rules.append(f"The route may use at most {fmt(data['max_hops'])} links in all.")
        if "resource" in data:
            resource, resource_unit = words["resource"], words["resource_unit"]
            rules.append(f"Each link also has a {resource} in {resource_unit}, and the whole route may use at most "
                         f"{fmt(data['resource_limit'])} {resource_unit} of {resource}.")
        stated = " ".join(rules)
        question = (f"Find the route with the smallest total {words['cost']}. What is that minimum total "
                    f"{words['cost']} in {unit}? If no route exists, say so.")
        if representation == "text":
            links = "; ".join(f"{a} to {b}: {fmt(c)}" for a, b, c in data["links"])
            if "resource" in data:
                links += f". The {words['resource']} of each link: " + "; ".join(
                    f"{a} to {b}: {fmt(amount)}" for a, b, amount in data["resource"])
            return f"{intro} The links are: {links}. {stated + ' ' if stated else ''}{question}"
        if representation == "table":
            if "resource" in data:
                amount = {(a, b): v for a, b, v in data["resource"]}
                table = markdown_table(["from", "to", f"{words['cost']} ({unit})",
                                        f"{words['resource']} ({words['resource_unit']})"],
                                       [[a, b, c, amount[a, b]] for a, b, c in data["links"]])
            else:
                table = markdown_table(["from", "to", f"{words['cost']} ({unit})"], data["links"])
            return f"{intro}\n\n{table}\n\n{stated + ' ' if stated else ''}{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro}{' ' + stated if stated else ''}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        binary = self._binary(data)
        parameters = "cost $c_{ij}$ of link $(i,j)$; supply $b_n = 1$ at $o$, $-1$ at $d$, 0 elsewhere"
        if binary:
            variables = "$y_{ij} \\in \\{0, 1\\}$, whether the route uses link $(i,j)$"
        else:
            variables = "$y_{ij} \\in [0, 1]$, whether the route uses link $(i,j)$ (integral at the optimum)"
        rows = ["\\text{s.t.}\\ & \\sum_{(n,j) \\in A} y_{nj} - \\sum_{(i,n) \\in A} y_{in} = b_n && \\forall n \\in N"]
        if "avoid" in data:
            parameters += "; avoided node $v$"
            rows.append("& y_{ij} = 0 && \\forall (i,j) \\in A: v \\in \\{i, j\\}")
        if "max_hops" in data:
            parameters += "; hop limit $K$"
            rows.append("& \\sum_{(i,j) \\in A} y_{ij} \\le K")
        if "resource" in data:
            parameters += "; resource use $t_{ij}$ and limit $T$"
            rows.append("& \\sum_{(i,j) \\in A} t_{ij} y_{ij} \\le T")
        rows.append("& y_{ij} \\in \\{0, 1\\} && \\forall (i,j) \\in A" if binary
                    else "& 0 \\le y_{ij} \\le 1 && \\forall (i,j) \\in A")
        return (
            "**Sets**: nodes $N$ with origin $o$ and destination $d$; directed links $A$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{(i,j) \\in A} c_{ij} y_{ij} \\\\\n" + " \\\\\n".join(rows)
            + "\n\\end{aligned}\n$$"
        )


def cheapest_path(nodes: list[str], weight: dict[tuple[str, str], float], origin: str, destination: str,
                  skip: str | None = None) -> list[str] | None:
    """Dijkstra's cheapest origin-destination path by `weight` (nonnegative), avoiding node `skip`;
    None when there is none. Ties break by node order, so the result is deterministic."""
    order = {n: k for k, n in enumerate(nodes)}
    best = {origin: 0.0}
    before: dict[str, str] = {}
    heap = [(0.0, order[origin], origin)]
    done = set()
    while heap:
        distance, _, node = heapq.heappop(heap)
        if node in done:
            continue
        done.add(node)
        if node == destination:
            path = [node]
            while path[-1] != origin:
                path.append(before[path[-1]])
            return path[::-1]
        for (a, b), w in weight.items():
            if a != node or b == skip or b in done:
                continue
            if distance + w < best.get(b, float("inf")):
                best[b] = distance + w
                before[b] = node
                heapq.heappush(heap, (distance + w, order[b], b))
    return None


def path_total(path: list[str], weight: dict[tuple[str, str], float]) -> float:
    return sum(weight[a, b] for a, b in zip(path, path[1:], strict=False))


FAMILY = ShortestPath()
