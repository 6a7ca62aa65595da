"""Aircraft landing (MILP): give every arriving plane a landing time inside its window on one runway,
keeping the wake-turbulence separation between every two planes, so that the penalty for landing away
from the target times is least. The order of each pair is a binary choice, linked to the times by
big-M constraints whose M is the tightest the two windows allow.

Structure variants (drawn per instance, recorded by the keys present): the objective (`early_cost`
present: earliness and lateness are both penalized; absent: lateness only), a cap on every plane's
delay (`max_delay`) and pairs that must land in a given order (`priority`), each independent: eight
program skeletons."""

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
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("hub", "airport operations", {
        "company": "the approach controllers of a busy hub airport", "vehicle": "flight", "vehicles": "flights",
        "prefixes": ["BA", "LH", "AF", "KL", "IB", "SK", "AY", "LX"], "place": "the single open runway",
        "action": "land", "money": "dollars",
    }),
    Scenario("regional", "regional airports", {
        "company": "a regional airport's tower", "vehicle": "arrival", "vehicles": "arrivals",
        "prefixes": ["WF", "DX", "BE", "LG", "EI", "VY"], "place": "its only runway",
        "action": "land", "money": "euros",
    }),
    Scenario("drones", "drone logistics", {
        "company": "a drone delivery hub", "vehicle": "drone", "vehicles": "drones",
        "prefixes": ["DR", "QX", "UA", "ZP"], "place": "the single landing pad",
        "action": "touch down", "money": "credits",
    }),
)
# the eval split's own operations, call signs, landing places and money (held out from training)
EVAL_SCENARIOS = (
    Scenario("helideck", "offshore energy logistics", {
        "company": "the helideck landing officer of an offshore platform", "vehicle": "helicopter",
        "vehicles": "helicopters", "prefixes": ["HX", "OF", "RG", "NS"], "place": "the platform's helideck",
        "action": "set down", "money": "kroner",
    }),
    Scenario("freighter", "air cargo", {
        "company": "the arrival manager of a freight airport", "vehicle": "cargo flight",
        "vehicles": "cargo flights", "prefixes": ["FX", "CV", "PO", "GT", "QY", "MP"],
        "place": "the cargo runway", "action": "land", "money": "pounds",
    }),
    Scenario("vertiport", "urban air mobility", {
        "company": "an air-taxi vertiport", "vehicle": "air taxi", "vehicles": "air taxis",
        "prefixes": ["VT", "EV", "JX", "AT"], "place": "its arrival pad", "action": "alight",
        "money": "yen",
    }),
)


def _pairs(data: dict) -> list[tuple[str, str]]:
    planes = data["planes"]
    return [(planes[a], planes[b]) for a in range(len(planes)) for b in range(a + 1, len(planes))]


def _big_m(data: dict, first: str, second: str) -> float:
    """The smallest M for which "second lands at least sep after first" is void when first lands last."""
    return max(0, data["latest"][first] + data["separation"][first][second] - data["earliest"][second])


class AircraftLanding(ProblemFamily):
    name = "aircraft_landing"
    title = "Aircraft landing on one runway"
    problem_type = "MILP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"land": "nonnegative", "early": "nonnegative", "late": "nonnegative", "before": "binary"}
    phrasings = (
        Phrasing(r"Times are in minutes from now\.",
                 ("Times are in minutes from now.", "All times are minutes counted from now."),
                 ("Every time is given in minutes from the present moment.",)),
        Phrasing(r"\bmust be separated by\b", ("must be separated by", "need a gap of"),
                 ("require a spacing of", "must keep apart by")),
        Phrasing(r"\bits window is\b", ("its window is", "it may arrive within"), ("its allowed window runs",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\binside its window\b", ("inside its window",), ("within the time window it was given",)),
        Phrasing(r"\bWhen one\b", ("When one",), ("If one",)),
        Phrasing(r"\bearly penalty\b", ("early penalty",), ("earliness penalty",)),
        Phrasing(r"\blands before another, the two\b", ("lands before another, the two",),
                 ("comes in ahead of another, they",)),
        Phrasing(r"\bthe gap listed for that order \(it depends on their wake classes\)",
                 ("the gap listed for that order (it depends on their wake classes)",),
                 ("the interval shown for that sequence (set by their wake-turbulence categories)",)),
        Phrasing(r"\bLanding before the target costs the early penalty and landing after it the late penalty, "
                 r"both in\b",
                 ("Landing before the target costs the early penalty and landing after it the late penalty, both in",),
                 ("An arrival ahead of its target is charged the earliness penalty and one behind it the late "
                  "penalty, both expressed in",)),
        Phrasing(r"\bLanding early costs nothing; every minute after the target costs the late penalty in\b",
                 ("Landing early costs nothing; every minute after the target costs the late penalty in",),
                 ("Coming in early is free, while each minute past the target is charged the late penalty, in",)),
        Phrasing(r"\bminutes after its target\.", ("minutes after its target.",),
                 ("minutes behind its target time.",)),
        Phrasing(r"\bhave priority and must\b", ("have priority and must",), ("are prioritised and are required to",)),
        Phrasing(r"\bin the given order:", ("in the given order:",), ("in the sequence shown:",)),
        Phrasing(r"\bWhen should each\b", ("When should each",), ("At what time ought every",)),
        Phrasing(r"\bto minimize the total penalty, and what is the minimum total penalty in\b",
                 ("to minimize the total penalty, and what is the minimum total penalty in",),
                 ("so that the penalty summed over all of them is as small as possible, and how large is that "
                  "smallest penalty, in",)),
        Phrasing(r"\bSeparations in minutes\.", ("Separations in minutes.",), ("Gaps are given in minutes.",)),
        Phrasing(r"\bSeparations \(minutes\):", ("Separations (minutes):",), ("Required gaps, in minutes:",)),
        Phrasing(r"\bleader \\ follower\b", ("leader \\ follower",), ("first in \\ next in",)),
        Phrasing(r"\blist of plane names, in the order of their targets\b",
                 ("list of plane names, in the order of their targets",),
                 ("planes' names, sorted by target time",)),
        Phrasing(r"\bearliest landing time of each plane \(minutes from now\)",
                 ("earliest landing time of each plane (minutes from now)",),
                 ("first minute, counted from now, at which every plane can land",)),
        Phrasing(r"\bpreferred landing time of each plane \(minutes\)",
                 ("preferred landing time of each plane (minutes)",), ("ideal landing minute for every plane",)),
        Phrasing(r"\blatest landing time of each plane \(minutes\)", ("latest landing time of each plane (minutes)",),
                 ("last minute at which every plane can land",)),
        Phrasing(r"\bminutes the second plane must land after the first when they land in that order\b",
                 ("minutes the second plane must land after the first when they land in that order",),
                 ("gap in minutes that the second plane keeps behind the first when that is their sequence",)),
        Phrasing(r"\bpenalty per minute a plane lands after its target\b",
                 ("penalty per minute a plane lands after its target",),
                 ("charge for every minute a plane arrives past its target",)),
        Phrasing(r"\bpenalty per minute a plane lands before its target \(only when earliness is penalized; "
                 r"otherwise landing early is free\)",
                 ("penalty per minute a plane lands before its target (only when earliness is penalized; otherwise "
                  "landing early is free)",),
                 ("charge for every minute a plane arrives ahead of its target (present if earliness carries a "
                  "charge; if absent, early arrival is free)",)),
        Phrasing(r"\bmost minutes any plane may land after its target \(only when there is such a cap\)",
                 ("most minutes any plane may land after its target (only when there is such a cap)",),
                 ("largest number of minutes a plane may arrive past its target (present if such a cap applies)",)),
        Phrasing(r": the first must land before the second \(only when there are such pairs\)",
                 (": the first must land before the second (only when there are such pairs)",),
                 (" in which the first lands ahead of the second (present if any such pair exists)",)),
    )
    data_fields = {
        "planes": "list of plane names, in the order of their targets",
        "earliest": "earliest landing time of each plane (minutes from now), keyed by plane",
        "target": "preferred landing time of each plane (minutes)",
        "latest": "latest landing time of each plane (minutes)",
        "separation": "separation[first][second]: minutes the second plane must land after the first when they "
                      "land in that order",
        "late_cost": "penalty per minute a plane lands after its target, keyed by plane",
        "early_cost": "penalty per minute a plane lands before its target (only when earliness is penalized; "
                      "otherwise landing early is free)",
        "max_delay": "most minutes any plane may land after its target (only when there is such a cap)",
        "priority": "[first, second] pairs: the first must land before the second (only when there are such pairs)",
    }
    _HEAD = '''\
model = pyo.ConcreteModel()
model.P = pyo.Set(initialize=data["planes"])
planes = data["planes"]
pairs = [(planes[a], planes[b]) for a in range(len(planes)) for b in range(a + 1, len(planes))]
model.land = pyo.Var(model.P, bounds=lambda model, p: (data["earliest"][p], data["latest"][p]))
model.early = pyo.Var(model.P, domain=pyo.NonNegativeReals)  # minutes before the target
model.late = pyo.Var(model.P, domain=pyo.NonNegativeReals)   # minutes after the target
model.before = pyo.Var(pairs, domain=pyo.Binary)             # 1 when the first of the pair lands first
'''
    _DEVIATION = '''\
model.obj = pyo.Objective(expr=sum(data["early_cost"][p] * model.early[p] + data["late_cost"][p] * model.late[p]
                                   for p in model.P), sense=pyo.minimize)
'''
    _LATENESS = '''\
model.obj = pyo.Objective(expr=sum(data["late_cost"][p] * model.late[p] for p in model.P), sense=pyo.minimize)
'''
    _BODY = '''\
model.deviation = pyo.Constraint(
    model.P, rule=lambda model, p: model.land[p] == data["target"][p] - model.early[p] + model.late[p])


def big_m(first, second):  # the tightest M: the gap is void when the first lands last
    return max(0, data["latest"][first] + data["separation"][first][second] - data["earliest"][second])


model.i_first = pyo.Constraint(pairs, rule=lambda model, i, j: model.land[j] >= model.land[i]
                               + data["separation"][i][j] - big_m(i, j) * (1 - model.before[i, j]))
model.j_first = pyo.Constraint(pairs, rule=lambda model, i, j: model.land[i] >= model.land[j]
                               + data["separation"][j][i] - big_m(j, i) * model.before[i, j])
'''
    _MAX_DELAY = '''\
model.max_delay = pyo.Constraint(model.P, rule=lambda model, p: model.late[p] <= data["max_delay"])
'''
    _PRIORITY = '''\
model.priority = pyo.Constraint(range(len(data["priority"])), rule=lambda model, k: model.land[data["priority"][k][1]]
                                >= model.land[data["priority"][k][0]]
                                + data["separation"][data["priority"][k][0]][data["priority"][k][1]])
'''
    model_code = _HEAD + _DEVIATION + _BODY  # the family's classic model: earliness and lateness penalized

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._DEVIATION if "early_cost" in data else self._LATENESS) + self._BODY
        if "max_delay" in data:
            code += self._MAX_DELAY
        if "priority" in data:
            code += self._PRIORITY
        return code

    def variant_of(self, data: dict) -> str:
        parts = ["deviation" if "early_cost" in data else "lateness"]
        return "+".join(parts + [key for key in ("max_delay", "priority") if key in data])

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_planes = size_for(difficulty, 5, 6, 7)
        names = rng.sample([f"{prefix}{number}" for prefix in words["prefixes"] for number in range(101, 999, 37)],
                           n_planes)
        # wake classes: a heavy leader needs a longer gap ahead of a light follower
        weight = {p: rng.choice((1, 2, 3)) for p in names}
        separation = {p: {q: 2 + max(0, weight[p] - weight[q]) + rng.randint(0, 1) for q in names if q != p}
                      for p in names}
        # targets congested enough that not everyone can land on time
        target_times, time = [], rng.randint(5, 12)
        for _ in names:
            target_times.append(time)
            time += rng.randint(0, 3)
        target = dict(zip(names, target_times, strict=True))
        earliest = {p: max(0, target[p] - rng.randint(1, 4)) for p in names}
        # a witness: land in target order, each as soon as its window and the gap to every earlier plane allow
        landed: dict[str, int] = {}
        for p in names:
            landed[p] = max([earliest[p], target[p] - rng.randint(0, 2)]
                            + [landed[q] + separation[q][p] for q in landed])
        latest = {p: max(target[p], landed[p]) + rng.randint(8, 25) for p in names}
        data = {"planes": names, "earliest": earliest, "target": target, "latest": latest,
                "separation": separation, "late_cost": {p: rng.randint(10, 40) for p in names}}
        if rng.random() < 0.5:
            data["early_cost"] = {p: rng.randint(3, 15) for p in names}
        if rng.random() < 0.5:
            data["max_delay"] = max(max(landed[p] - target[p] for p in names), 1) + rng.randint(0, 2)
        if rng.random() < 0.5:
            # pairs out of target order that the witness nevertheless lands in the required order
            ordered = sorted(names, key=lambda p: landed[p])
            chosen = set()
            for _ in range(max(1, n_planes // 3)):
                a, b = sorted(rng.sample(range(n_planes), 2))
                chosen.add((ordered[a], ordered[b]))
            data["priority"] = [list(pair) for pair in sorted(chosen)]
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # two planes whose windows shrink to the same single minute: no gap between them is possible
        first, second = rng.sample(data["planes"], 2)
        minute = data["target"][first]
        pinned = {first: minute, second: minute}
        return {**data, "earliest": {**data["earliest"], **pinned}, "target": {**data["target"], **pinned},
                "latest": {**data["latest"], **pinned}}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        planes = data["planes"]
        land = {p: matrix.add_var(f"land[{p}]", data["earliest"][p], data["latest"][p]) for p in planes}
        early = {p: matrix.add_var(f"early[{p}]", 0.0, cost=data.get("early_cost", {}).get(p, 0.0)) for p in planes}
        late = {p: matrix.add_var(f"late[{p}]", 0.0, data.get("max_delay", float("inf")), cost=data["late_cost"][p])
                for p in planes}
        for p in planes:  # land - late + early = target
            matrix.add_row({land[p]: 1.0, late[p]: -1.0, early[p]: 1.0}, lower=data["target"][p],
                           upper=data["target"][p], name=f"deviation[{p}]")
        for i, j in _pairs(data):
            before = matrix.add_var(f"before[{i},{j}]", 0, 1, integer=True)
            m_ij, m_ji = _big_m(data, i, j), _big_m(data, j, i)
            # land_j - land_i - M_ij * before >= sep_ij - M_ij
            matrix.add_row({land[j]: 1.0, land[i]: -1.0, before: -m_ij}, lower=data["separation"][i][j] - m_ij,
                           name=f"i_first[{i},{j}]")
            # land_i - land_j + M_ji * before >= sep_ji
            matrix.add_row({land[i]: 1.0, land[j]: -1.0, before: m_ji}, lower=data["separation"][j][i],
                           name=f"j_first[{i},{j}]")
        for first, second in data.get("priority", ()):
            matrix.add_row({land[second]: 1.0, land[first]: -1.0}, lower=data["separation"][first][second],
                           name=f"priority[{first},{second}]")

    def constraint_rows(self, data: dict, x: dict):
        land, early, late, before = x["land"], x["early"], x["late"], x["before"]
        for p in data["planes"]:
            yield Row(f"earliest[{p}]", land[p], ">=", data["earliest"][p])
            yield Row(f"latest[{p}]", land[p], "<=", data["latest"][p])
            yield Row(f"deviation[{p}]", land[p] + early[p] - late[p], "==", data["target"][p])
            if "max_delay" in data:
                yield Row(f"max_delay[{p}]", late[p], "<=", data["max_delay"])
        for i, j in _pairs(data):
            yield Row(f"i_first[{i},{j}]", land[j] - land[i] + _big_m(data, i, j) * (1 - before[i, j]), ">=",
                      data["separation"][i][j])
            yield Row(f"j_first[{i},{j}]", land[i] - land[j] + _big_m(data, j, i) * before[i, j], ">=",
                      data["separation"][j][i])
        for first, second in data.get("priority", ()):
            yield Row(f"priority[{first},{second}]", land[second] - land[first], ">=",
                      data["separation"][first][second])

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["late_cost"][p] * x["late"][p] for p in data["planes"])
        if "early_cost" in data:
            total += sum(data["early_cost"][p] * x["early"][p] for p in data["planes"])
        return total

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        order = sorted(data["planes"], key=lambda p: x["land"][p])
        return "\n".join(f"- {p} at minute {fmt(round(x['land'][p], 4))} (target {fmt(data['target'][p])})"
                         for p in order)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        planes, money, action = data["planes"], words["money"], words["action"]
        vehicle, vehicles = words["vehicle"], words["vehicles"]
        intro = {
            "hub": f"{words['company'].capitalize()} must sequence {len(planes)} incoming {vehicles} onto "
                   f"{words['place']}.",
            "regional": f"{words['company'].capitalize()} has {len(planes)} {vehicles} due in the next hour and "
                        f"must fix when each lands on {words['place']}.",
            "drones": f"{words['company'].capitalize()} brings {len(planes)} returning {vehicles} down on "
                      f"{words['place']}, one at a time.",
            # the eval scenarios' own openings
            "helideck": f"{words['company'].capitalize()} expects {len(planes)} {vehicles} from the shore base "
                        f"and has to clear each of them onto {words['place']}.",
            "freighter": f"Tonight {words['company']} has to slot {len(planes)} inbound {vehicles} into landing "
                         f"times on {words['place']}.",
            "vertiport": f"{words['company'].capitalize()} is about to receive {len(planes)} {vehicles}, and "
                         f"{words['place']} takes one of them at a time.",
        }[scenario.key]
        rules = (f"Times are in minutes from now. Each {vehicle} must {action} inside its window. When one {vehicle} "
                 f"lands before another, the two must be separated by the gap listed for that order (it depends on "
                 f"their wake classes).")
        if "early_cost" in data:
            penalty = (f"Landing before the target costs the early penalty and landing after it the late penalty, "
                       f"both in {money} per minute.")
        else:
            penalty = f"Landing early costs nothing; every minute after the target costs the late penalty in {money}."
        rules += " " + penalty
        if "max_delay" in data:
            rules += f" No {vehicle} may {action} more than {fmt(data['max_delay'])} minutes after its target."
        if "priority" in data:
            pairs = "; ".join(f"{a} before {b}" for a, b in data["priority"])
            rules += f" These {vehicles} have priority and must {action} in the given order: {pairs}."
        question = (f"When should each {vehicle} {action} to minimize the total penalty, and what is the minimum "
                    f"total penalty in {money}?")
        if representation == "text":
            lines = []
            for p in planes:
                line = (f"{p}: its window is {fmt(data['earliest'][p])} to {fmt(data['latest'][p])}, target "
                        f"{fmt(data['target'][p])}, late penalty {fmt(data['late_cost'][p])}")
                if "early_cost" in data:
                    line += f", early penalty {fmt(data['early_cost'][p])}"
                lines.append(line + ".")
            gaps = " ".join(f"After {p}: " + ", ".join(f"{fmt(data['separation'][p][q])} before {q}"
                                                     for q in planes if q != p) + "." for p in planes)
            return f"{intro} {rules} {' '.join(lines)} Separations in minutes. {gaps} {question}"
        if representation == "table":
            headers = [vehicle, "earliest", "target", "latest", f"late penalty ({money}/min)"]
            if "early_cost" in data:
                headers.append(f"early penalty ({money}/min)")
            rows = [[p, data["earliest"][p], data["target"][p], data["latest"][p], data["late_cost"][p]]
                    + ([data["early_cost"][p]] if "early_cost" in data else []) for p in planes]
            gaps = markdown_table(["leader \\ follower", *planes],
                                  [[p, *[data["separation"][p][q] if q != p else "-" for q in planes]] for p in planes])
            return (f"{intro} {rules}\n\n{markdown_table(headers, rows)}\n\nSeparations (minutes):\n\n{gaps}\n\n"
                    f"{question}")
        if representation == "file":
            return f"{intro} {rules} {question}\n\n{describe_data_file(self.data_fields)}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        early = "e_p E_p + " if "early_cost" in data else ""
        parameters = ("window $[a_p, b_p]$, target $\\tau_p$, late penalty $h_p$, separation $s_{pq}$, "
                      "$M_{pq} = b_p + s_{pq} - a_q$")
        if "early_cost" in data:
            parameters += ", early penalty $e_p$"
        rows = ["\\text{s.t.}\\ & t_p = \\tau_p - E_p + L_p, \\quad a_p \\le t_p \\le b_p && \\forall p",
                "& t_q \\ge t_p + s_{pq} - M_{pq}(1 - y_{pq}) && \\forall p < q",
                "& t_p \\ge t_q + s_{qp} - M_{qp}\\, y_{pq} && \\forall p < q"]
        if "max_delay" in data:
            parameters += ", delay cap $D$"
            rows.append("& L_p \\le D && \\forall p")
        if "priority" in data:
            rows.append("& t_q \\ge t_p + s_{pq} && \\forall (p, q) \\in \\Pi \\text{ (priority pairs)}")
        rows.append("& E_p, L_p \\ge 0,\\ y_{pq} \\in \\{0, 1\\}")
        sets = "planes $P$ in target order" + (", priority pairs $\\Pi$" if "priority" in data else "")
        return (f"**Sets**: {sets}.\n\n"
                f"**Parameters**: {parameters}.\n\n"
                "**Variables**: landing time $t_p$, earliness $E_p$, lateness $L_p$, $y_{pq} = 1$ when $p$ lands "
                "before $q$.\n\n"
                f"$$\n\\begin{{aligned}}\n\\min\\ & \\sum_{{p \\in P}} ({early}h_p L_p) \\\\\n"
                + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$")


FAMILY = AircraftLanding()
