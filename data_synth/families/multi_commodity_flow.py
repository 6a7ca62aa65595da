"""Multi-commodity flow (LP, or IP with whole units): several commodities, each with its own origin,
destination and demand, share the capacity of the arcs of one network (origins, hubs, destinations and
some direct links); route every commodity at the least total transport cost.

Structure variants (drawn per instance, recorded by the keys present): demand that may go unmet at a
penalty per unit (`penalty`), handling limits at the hubs (`hub_capacity`), and whole units
(`whole_units`: integer flows), each present or absent: eight program skeletons."""

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
    Scenario("parcels", "parcel networks", {
        "company": "a parcel carrier",
        "origins": ["Leeds", "Bristol", "Derby", "Exeter", "Hull", "York"],
        "hubs": ["Hub Midlands", "Hub North", "Hub South", "Hub East"],
        "destinations": ["London", "Glasgow", "Cardiff", "Norwich", "Brighton", "Carlisle"],
        "commodities": ["express parcels", "standard parcels", "bulky items", "cold-chain boxes", "documents",
                        "returns", "pallets", "fragile goods"],
        "unit": "cage", "money": "pounds",
    }),
    Scenario("telecom", "telecommunications", {
        "company": "a network operator",
        "origins": ["Site Alpha", "Site Beta", "Site Gamma", "Site Delta", "Site Epsilon", "Site Zeta"],
        "hubs": ["Core 1", "Core 2", "Core 3", "Core 4"],
        "destinations": ["Exchange A", "Exchange B", "Exchange C", "Exchange D", "Exchange E", "Exchange F"],
        "commodities": ["video", "voice", "backup", "web", "gaming", "telemetry", "email", "streaming"],
        "unit": "Gbps", "money": "dollars",
    }),
    Scenario("rail_freight", "rail freight", {
        "company": "a rail freight operator",
        "origins": ["Port Quay", "Mine Ridge", "Mill Town", "Forest Yard", "Grain Halt", "Quarry End"],
        "hubs": ["Junction West", "Junction Central", "Junction East", "Junction North"],
        "destinations": ["Steel City", "Power Station", "Export Dock", "Cement Works", "Paper Mill",
                         "Food Park"],
        "commodities": ["iron ore", "coal", "containers", "timber", "grain", "aggregates", "steel coils",
                        "fertiliser"],
        "unit": "wagon", "money": "dollars",
    }),
)

# the eval split's own industries, companies, node and commodity names, units and currencies (held out from
# training)
EVAL_SCENARIOS = (
    Scenario("fuel_pipeline", "fuel pipelines", {
        "company": "a fuel pipeline operator",
        "origins": ["Refinery Coastline", "Refinery Bayside", "Refinery Marsh", "Refinery Delta", "Refinery Cape",
                    "Refinery Inlet"],
        "hubs": ["Tank Farm A", "Tank Farm B", "Tank Farm C", "Tank Farm D"],
        "destinations": ["Terminal Oakdale", "Terminal Pinecrest", "Terminal Redhill", "Terminal Stonebridge",
                         "Terminal Westbury", "Terminal Ashford"],
        "commodities": ["diesel", "jet fuel", "petrol", "kerosene", "heating oil", "biodiesel", "naphtha",
                        "marine gasoil"],
        "unit": "barrel", "money": "euros",
    }),
    Scenario("air_cargo", "air cargo", {
        "company": "an air cargo airline",
        "origins": ["Shenzhen", "Penang", "Nairobi", "Bogota", "Quito", "Hanoi"],
        "hubs": ["Gateway Leipzig", "Gateway Liege", "Gateway Doha", "Gateway Anchorage"],
        "destinations": ["Chicago", "Madrid", "Lagos", "Sydney", "Toronto", "Santiago"],
        "commodities": ["cut flowers", "electronics", "pharmaceuticals", "seafood", "spare parts",
                        "online orders", "live animals", "airmail"],
        "unit": "ULD", "money": "dollars",
    }),
    Scenario("blood_supply", "blood services", {
        "company": "a national blood service",
        "origins": ["Donor Unit Avon", "Donor Unit Brent", "Donor Unit Calder", "Donor Unit Dove", "Donor Unit Eden",
                    "Donor Unit Frome"],
        "hubs": ["Processing Lab North", "Processing Lab South", "Processing Lab West", "Processing Lab East"],
        "destinations": ["Royal Infirmary", "General Hospital", "Children's Hospital", "Cancer Institute",
                         "Trauma Unit", "Maternity Wing"],
        "commodities": ["red cells O-", "red cells A+", "platelets", "plasma", "cryoprecipitate", "red cells B+",
                        "red cells AB+", "whole blood"],
        "unit": "crate", "money": "pounds",
    }),
)


class MultiCommodityFlow(ProblemFamily):
    name = "multi_commodity_flow"
    title = "Multi-commodity flow"
    problem_type = "LP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"flow": "nonnegative"}
    industrial = True
    phrasings = (
        Phrasing(r"\bmust route\b", ("must route", "has to route"), ("needs to send", "plans the paths of")),
        Phrasing(r"\bAll commodities share the capacity of each arc\.",
                 ("All commodities share the capacity of each arc.",),
                 ("An arc's capacity is common to every commodity using it.",)),
        Phrasing(r"\bArcs \(capacity and cost per unit\):", ("Arcs (capacity and cost per unit):",),
                 ("Links, with their capacity and unit cost:",)),
        Phrasing(r"\bCommodities to move:", ("Commodities to move:", "Shipments to route:"),
                 ("Flows required:",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bover its network of\b", ("over its network of",), ("across a network made up of",)),
        Phrasing(r"\bAll commodities share the capacity of each arc; arcs are one-way\.",
                 ("All commodities share the capacity of each arc; arcs are one-way.",),
                 ("Every arc is one-directional, and its capacity is shared by all commodities on it.",)),
        Phrasing(r"\bDemand may be left unmet at a penalty per\b", ("Demand may be left unmet at a penalty per",),
                 ("Any shortfall in demand is permitted, with a penalty for each",)),
        Phrasing(r"\bEach hub handles a limited number of\b", ("Each hub handles a limited number of",),
                 ("Inbound volume at every hub is capped at a set number of",)),
        Phrasing(r"\bcoming in, over all commodities:", ("coming in, over all commodities:",),
                 ("summed over commodities:",)),
        Phrasing(r"\bFlows are whole\b", ("Flows are whole",), ("Every flow is a whole number of",)),
        Phrasing(r"\bHow much of each commodity should use each arc\b",
                 ("How much of each commodity should use each arc",),
                 ("What quantity of every commodity ought to travel on every arc",)),
        # these two stop before "what is that", which the generic rules word two ways in training
        Phrasing(r"\bto meet the demands at the least total cost, and\b",
                 ("to meet the demands at the least total cost, and",),
                 ("so that all demands are met as cheaply as possible, and",)),
        Phrasing(r"\bat the least total cost of transport and unmet demand, and\b",
                 ("at the least total cost of transport and unmet demand, and",),
                 ("so that transport plus shortfall penalties cost as little as possible, and",)),
        Phrasing(r"\bFlows may be fractional\.", ("Flows may be fractional.",), ("Fractional flows are acceptable.",)),
        Phrasing(r"\bcarries up to\b", ("carries up to",), ("takes as many as",)),
        Phrasing(r"\beach\b(?=[;.])", ("each",), ("apiece",)),
        Phrasing(r"(?<=\| )from(?= \|)", ("from",), ("start",)),
        Phrasing(r"(?<=\| )to(?= \|)", ("to",), ("end",)),
        Phrasing(r"\bcapacity\b(?= \()", ("capacity",), ("max flow",)),
        Phrasing(r"(?<=\| )cost(?= \()", ("cost",), ("unit cost",)),
        Phrasing(r"\bDemand may go unmet at its penalty\.", ("Demand may go unmet at its penalty.",),
                 ("Shortfalls are permitted at their penalty.",)),
        Phrasing(r"\bHubs have handling limits on what comes in\.", ("Hubs have handling limits on what comes in.",),
                 ("Inbound volume at the hubs is capped.",)),
        Phrasing(r"\blist of node names\b", ("list of node names",), ("names of the network points",)),
        Phrasing(r"\blist of \[from, to\] node pairs\b", ("list of [from, to] node pairs",),
                 ("[from, to] pairs of network points, one per arc",)),
        Phrasing(r"\bcapacity of each arc, in the order of\b", ("capacity of each arc, in the order of",),
                 ("arc capacities, listed in the same order as",)),
        Phrasing(r"\btransport cost per unit on each arc, in the order of\b",
                 ("transport cost per unit on each arc, in the order of",),
                 ("unit transport cost of every arc, listed in the same order as",)),
        Phrasing(r"\blist of commodity names\b", ("list of commodity names",), ("names of the commodities",)),
        Phrasing(r"\borigin node of each commodity\b", ("origin node of each commodity",),
                 ("point where a commodity starts",)),
        Phrasing(r"\bdestination node of each commodity\b", ("destination node of each commodity",),
                 ("point a commodity has to reach",)),
        Phrasing(r"\bunits of each commodity to move\b", ("units of each commodity to move",),
                 ("quantity of a commodity to be moved",)),
        Phrasing(r"\bcost per unit of demand left unmet\b", ("cost per unit of demand left unmet",),
                 ("penalty for one unit of demand not delivered",)),
        Phrasing(r"\(only when demand may go unmet\)", ("(only when demand may go unmet)",),
                 ("(present only if shortfalls are permitted)",)),
        Phrasing(r"\bmost units all commodities together may pass into each hub\b",
                 ("most units all commodities together may pass into each hub",),
                 ("cap on the inbound units at a hub, summed over commodities",)),
        Phrasing(r"\btrue: flows are whole units\b", ("true: flows are whole units",),
                 ("flag, true when every flow has to be a whole number",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(present only if",)),
    )
    data_fields = {
        "nodes": "list of node names",
        "arcs": "list of [from, to] node pairs",
        "capacity": "capacity of each arc, in the order of `arcs`",
        "cost": "transport cost per unit on each arc, in the order of `arcs`",
        "commodities": "list of commodity names",
        "origin": "origin node of each commodity, keyed by commodity",
        "destination": "destination node of each commodity, keyed by commodity",
        "demand": "units of each commodity to move, keyed by commodity",
        "penalty": "cost per unit of demand left unmet, keyed by commodity (only when demand may go unmet)",
        "hub_capacity": "most units all commodities together may pass into each hub, keyed by hub (only when "
                        "hubs have handling limits)",
        "whole_units": "true: flows are whole units (only when units must be whole)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.N = pyo.Set(initialize=data["nodes"])
model.K = pyo.Set(initialize=data["commodities"])
model.A = pyo.RangeSet(0, len(data["arcs"]) - 1)
'''
    _FLOW = '''\
model.flow = pyo.Var(model.K, model.A, domain=pyo.NonNegativeReals)
'''
    _WHOLE = '''\
model.flow = pyo.Var(model.K, model.A, domain=pyo.NonNegativeIntegers)
'''
    _UNMET_VAR = '''\
model.unmet = pyo.Var(model.K, bounds=lambda model, k: (0, data["demand"][k]))
'''
    _OBJECTIVE = '''\
model.obj = pyo.Objective(
    expr=sum(data["cost"][a] * model.flow[k, a] for k in model.K for a in model.A), sense=pyo.minimize)
'''
    _OBJECTIVE_UNMET = '''\
model.obj = pyo.Objective(
    expr=sum(data["cost"][a] * model.flow[k, a] for k in model.K for a in model.A)
    + sum(data["penalty"][k] * model.unmet[k] for k in model.K), sense=pyo.minimize)
'''
    _BALANCE = '''\


def supply(k, n):
    """Net units of commodity k that leave node n."""
    if n == data["origin"][k]:
        return data["demand"][k]{unmet}
    if n == data["destination"][k]:
        return -data["demand"][k]{met}
    return 0


model.balance = pyo.Constraint(
    model.K, model.N, rule=lambda model, k, n: sum(model.flow[k, a] for a in model.A if data["arcs"][a][0] == n)
    - sum(model.flow[k, a] for a in model.A if data["arcs"][a][1] == n) == supply(k, n))
model.capacity = pyo.Constraint(
    model.A, rule=lambda model, a: sum(model.flow[k, a] for k in model.K) <= data["capacity"][a])
'''
    _HUBS = '''\
model.hub_capacity = pyo.Constraint(
    list(data["hub_capacity"]), rule=lambda model, h: sum(model.flow[k, a] for k in model.K for a in model.A
                                                          if data["arcs"][a][1] == h) <= data["hub_capacity"][h])
'''

    def model_code_for(self, data: dict) -> str:
        return _assemble("penalty" in data, "hub_capacity" in data, "whole_units" in data)

    def domains_for(self, data: dict) -> dict[str, str]:
        domains = {"flow": "nonnegative_integer" if "whole_units" in data else "nonnegative"}
        if "penalty" in data:
            domains["unmet"] = "nonnegative"
        return domains

    def problem_type_for(self, data: dict) -> str:
        if "whole_units" not in data:
            return "LP"
        return "MILP" if "penalty" in data else "IP"

    def variant_of(self, data: dict) -> str:
        parts = [key for key in ("penalty", "hub_capacity", "whole_units") if key in data]
        return "+".join(parts) or "base"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_origins = size_for(difficulty, 2, 3, 4, industrial=6)
        n_hubs = size_for(difficulty, 2, 2, 3, industrial=4)
        n_destinations = size_for(difficulty, 2, 3, 4, industrial=6)
        n_commodities = size_for(difficulty, 3, 5, 8, industrial=24)  # industrial: about 1,400 flows
        origins = pick_names(rng, words["origins"], n_origins)
        hubs = pick_names(rng, words["hubs"], n_hubs)
        destinations = pick_names(rng, words["destinations"], n_destinations)
        arcs = [[o, h] for o in origins for h in hubs] + [[h, d] for h in hubs for d in destinations]
        arcs += [[o, d] for o in origins for d in destinations if rng.random() < 0.3]
        cost = [rng.randint(2, 12) if arc[0] in hubs or arc[1] in hubs else rng.randint(10, 30) for arc in arcs]
        commodities = pick_names(rng, words["commodities"], n_commodities)
        origin = {k: rng.choice(origins) for k in commodities}
        destination = {k: rng.choice(destinations) for k in commodities}
        demand = {k: rng.randint(2, 20) * 5 for k in commodities}
        # a planted routing through a random hub; arc and hub capacities leave some room around it
        load = [0] * len(arcs)
        hub_load = {h: 0 for h in hubs}
        index = {tuple(arc): a for a, arc in enumerate(arcs)}
        for k in commodities:
            h = rng.choice(hubs)
            load[index[origin[k], h]] += demand[k]
            load[index[h, destination[k]]] += demand[k]
            hub_load[h] += demand[k]
        capacity = [int(used * rng.uniform(1.0, 1.3)) + rng.randint(0, 4) * 5 if used else rng.randint(2, 8) * 5
                    for used in load]
        data = {"nodes": origins + hubs + destinations, "arcs": arcs, "capacity": capacity, "cost": cost,
                "commodities": commodities, "origin": origin, "destination": destination, "demand": demand}
        if rng.random() < 0.5:
            data["penalty"] = {k: rng.randint(40, 90) for k in commodities}
        if rng.random() < 0.5:
            data["hub_capacity"] = {h: int(hub_load[h] * rng.uniform(1.0, 1.2)) + 5 for h in hubs}
        if difficulty != INDUSTRIAL and rng.random() < 0.5:
            data["whole_units"] = True
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # one commodity needs more than every arc out of its origin can carry (and must be met in full)
        data = {key: value for key, value in data.items() if key != "penalty"}
        k = rng.choice(data["commodities"])
        out = sum(c for arc, c in zip(data["arcs"], data["capacity"], strict=True) if arc[0] == data["origin"][k])
        data["demand"] = {**data["demand"], k: out + rng.randint(1, 20)}
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        commodities, arcs = data["commodities"], data["arcs"]
        whole = "whole_units" in data
        flow = {(k, a): matrix.add_var(f"flow[{k},{a}]", cost=data["cost"][a], integer=whole)
                for k in commodities for a in range(len(arcs))}
        unmet = {k: matrix.add_var(f"unmet[{k}]", 0.0, data["demand"][k], cost=data["penalty"][k])
                 for k in commodities} if "penalty" in data else {}
        for k in commodities:
            for n in data["nodes"]:
                coefficients = {}
                for a, (tail, head) in enumerate(arcs):
                    if tail == n:
                        coefficients[flow[k, a]] = coefficients.get(flow[k, a], 0.0) + 1.0
                    if head == n:
                        coefficients[flow[k, a]] = coefficients.get(flow[k, a], 0.0) - 1.0
                net = 0.0
                if n == data["origin"][k]:
                    net = data["demand"][k]
                    if unmet:
                        coefficients[unmet[k]] = 1.0
                elif n == data["destination"][k]:
                    net = -data["demand"][k]
                    if unmet:
                        coefficients[unmet[k]] = -1.0
                matrix.add_row(coefficients, lower=net, upper=net, name=f"balance[{k},{n}]")
        for a in range(len(arcs)):
            matrix.add_row({flow[k, a]: 1.0 for k in commodities}, upper=data["capacity"][a], name=f"capacity[{a}]")
        for h, limit in data.get("hub_capacity", {}).items():
            matrix.add_row({flow[k, a]: 1.0 for k in commodities for a, arc in enumerate(arcs) if arc[1] == h},
                           upper=limit, name=f"hub_capacity[{h}]")

    def constraint_rows(self, data: dict, x: dict):
        commodities, arcs = data["commodities"], data["arcs"]
        flow = x["flow"]
        for k in commodities:
            short = x["unmet"][k] if "penalty" in data else 0.0
            for n in data["nodes"]:
                net = sum(flow[k, a] for a, arc in enumerate(arcs) if arc[0] == n) - sum(
                    flow[k, a] for a, arc in enumerate(arcs) if arc[1] == n)
                if n == data["origin"][k]:
                    yield Row(f"balance[{k},{n}]", net + short, "==", data["demand"][k])
                elif n == data["destination"][k]:
                    yield Row(f"balance[{k},{n}]", net - short, "==", -data["demand"][k])
                else:
                    yield Row(f"balance[{k},{n}]", net, "==", 0.0)
            if "penalty" in data:
                yield Row(f"unmet_bound[{k}]", short, "<=", data["demand"][k])
        for a in range(len(arcs)):
            yield Row(f"capacity[{a}]", sum(flow[k, a] for k in commodities), "<=", data["capacity"][a])
        for h, limit in data.get("hub_capacity", {}).items():
            yield Row(f"hub_capacity[{h}]", sum(flow[k, a] for k in commodities for a, arc in enumerate(arcs)
                                                if arc[1] == h), "<=", limit)

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["cost"][a] * x["flow"][k, a] for k in data["commodities"] for a in range(len(data["arcs"])))
        if "penalty" in data:
            total += sum(data["penalty"][k] * x["unmet"][k] for k in data["commodities"])
        return total

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        commodities, arcs = data["commodities"], data["arcs"]
        unit, money = words["unit"], words["money"]
        intro = (f"{words['company'].capitalize()} must route {join_names(commodities)} over its network of "
                 f"{join_names(data['nodes'])}.")
        if scenario.key == "telecom":
            intro = f"Over its network of {join_names(data['nodes'])}, {words['company']} must route the traffic " \
                    f"classes {join_names(commodities)}."
        general = "All commodities share the capacity of each arc; arcs are one-way."
        rules = []
        if "penalty" in data:
            rules.append(f"Demand may be left unmet at a penalty per {unit}: " + "; ".join(
                f"{k} {fmt(data['penalty'][k])} {money}" for k in commodities) + ".")
        if "hub_capacity" in data:
            rules.append(f"Each hub handles a limited number of {plural(unit)} coming in, over all commodities: " + "; ".join(
                f"{h} {fmt(limit)}" for h, limit in data["hub_capacity"].items()) + ".")
        if "whole_units" in data:
            rules.append(f"Flows are whole {plural(unit)}.")
            question = ("How much of each commodity should use each arc to meet the demands at the least total cost, "
                        "and what is that cost?")
        else:
            question = ("How much of each commodity should use each arc to meet the demands at the least total cost, "
                        "and what is that cost? Flows may be fractional.")
        if "penalty" in data:
            question = question.replace("to meet the demands at the least total cost",
                                        "at the least total cost of transport and unmet demand")
        rule_text = " ".join(rules)
        moves = "Commodities to move: " + "; ".join(
            f"{fmt(data['demand'][k])} {plural(unit)} of {k} from {data['origin'][k]} to {data['destination'][k]}"
            for k in commodities) + "."
        if representation == "text":
            listing = "Arcs (capacity and cost per unit): " + "; ".join(
                f"{tail} to {head} carries up to {fmt(c)} {plural(unit)} at {fmt(cost)} {money} each"
                for (tail, head), c, cost in zip(arcs, data["capacity"], data["cost"], strict=True)) + "."
            return f"{intro} {general} {moves} {listing} {rule_text} {question}"
        if representation == "table":
            table = markdown_table(["from", "to", f"capacity ({plural(unit)})", f"cost ({money}/{unit})"],
                                   [[tail, head, c, cost] for (tail, head), c, cost
                                    in zip(arcs, data["capacity"], data["cost"], strict=True)])
            return f"{intro} {general} {moves} Arcs (capacity and cost per unit):\n\n{table}\n\n{rule_text} {question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "only when" not in meaning}
            extra = []
            if "penalty" in data:
                extra.append("Demand may go unmet at its penalty.")
            if "hub_capacity" in data:
                extra.append("Hubs have handling limits on what comes in.")
            if "whole_units" in data:
                extra.append(f"Flows are whole {plural(unit)}.")
            return f"{intro} {general} {' '.join(extra)}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        unmet = "penalty" in data
        objective = "\\min\\ & \\sum_{k \\in K} \\sum_{a \\in A} c_a x_{ka}" + (
            " + \\sum_{k \\in K} p_k u_k" if unmet else "")
        balance = "b_{kn}" + (" - u_k (\\mathbb{1}[n = o_k] - \\mathbb{1}[n = t_k])" if unmet else "")
        rows = [objective,
                f"\\text{{s.t.}}\\ & \\sum_{{a \\in \\delta^+(n)}} x_{{ka}} - \\sum_{{a \\in \\delta^-(n)}} x_{{ka}} = "
                f"{balance} && \\forall k, n",
                "& \\sum_{k \\in K} x_{ka} \\le C_a && \\forall a \\in A"]
        if "hub_capacity" in data:
            rows.append("& \\sum_{k \\in K} \\sum_{a \\in \\delta^-(h)} x_{ka} \\le H_h && \\forall h")
        domain = "x_{ka} \\in \\mathbb{Z}_{\\ge 0}" if "whole_units" in data else "x_{ka} \\ge 0"
        rows.append(f"& {domain}" + (",\\ 0 \\le u_k \\le d_k" if unmet else ""))
        return ("**Sets**: nodes $N$, arcs $A$, commodities $K$ with origin $o_k$, destination $t_k$, demand $d_k$ "
                "($b_{kn} = d_k$ at $o_k$, $-d_k$ at $t_k$, else 0).\n\n"
                "**Parameters**: capacity $C_a$, unit cost $c_a$" + (", penalty $p_k$" if unmet else "")
                + (", hub limit $H_h$" if "hub_capacity" in data else "") + ".\n\n"
                "**Variables**: $x_{ka}$, flow of $k$ on arc $a$" + ("; $u_k$, unmet demand" if unmet else "")
                + ".\n\n$$\n\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$")


def _assemble(unmet: bool, hubs: bool, whole: bool) -> str:
    """The Pyomo source of one variant, from the class's pieces."""
    pieces = MultiCommodityFlow
    code = pieces._HEAD + (pieces._WHOLE if whole else pieces._FLOW)
    code += (pieces._UNMET_VAR + pieces._OBJECTIVE_UNMET) if unmet else pieces._OBJECTIVE
    code += pieces._BALANCE.replace("{unmet}", " - model.unmet[k]" if unmet else "").replace(
        "{met}", " + model.unmet[k]" if unmet else "")
    return code + (pieces._HUBS if hubs else "")


MultiCommodityFlow.model_code = _assemble(unmet=False, hubs=True, whole=False)
FAMILY = MultiCommodityFlow()
