"""Multi-period capital budgeting (MILP): choose which investment projects to fund when each project has a
net cash flow in every period (outlays first, returns later), fresh funds arrive every period, and cash
left unspent at the end of a period earns interest into the next. Returns of early projects can pay for
later ones; the aim is the most cash at the end of the horizon. Unlike `project_selection` (a fixed
budget per year, values as net present values), the cash is carried over period to period by a balance
variable, so the timing of flows and the interest rate decide the choice.

Structure variants (drawn per instance, recorded by the keys present): one-period loans up to a limit per
period at a borrowing rate (`borrow_rate` with `borrow_limit`), a minimum cash balance in every period
(`min_cash`), and projects that may be funded in part (`divisible`, a continuous share next to the binary
choice of the others), each present or absent, so the program has eight skeletons. Funding nothing (or only
the committed project, which is chosen so) meets every variant, so every instance stays feasible."""

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
    Scenario("infrastructure", "public infrastructure", {
        "intro": "A municipal infrastructure fund decides which capital projects to fund over the coming years.",
        "projects": ["Solar Farm", "Water Main Renewal", "Bus Depot", "Bridge Repair", "Fibre Network",
                     "Flood Barrier", "Library Extension", "District Heating", "Cycle Lanes", "LED Streetlights",
                     "Recycling Plant", "Sports Hall", "Tram Extension", "Harbour Wall"],
        "periods": [f"year {k}" for k in range(1, 7)], "money": "million dollars", "period": "year",
        "funds": "fresh funds from the city budget",
    }),
    Scenario("studio", "venture building", {
        "intro": "A venture studio plans which product bets to fund over the next quarters.",
        "projects": ["Payments App", "Fleet Tracker", "Tutor Marketplace", "Clinic Scheduler", "Energy Monitor",
                     "Recipe Box", "Freight Broker", "Pet Insurance", "Home Repairs", "Travel Planner",
                     "Farm Analytics", "Legal Assistant", "Event Tickets", "Parking Finder"],
        "periods": [f"Q{k}" for k in range(1, 7)], "money": "thousand euros", "period": "quarter",
        "funds": "fresh funds from its investors",
    }),
    Scenario("mining", "mining", {
        "intro": "A mining company plans its capital programme: which expansion projects to fund and when the "
                 "cash they return can pay for others.",
        "projects": ["North Pit Expansion", "Haul Road", "Tailings Dam", "Crusher Upgrade", "Rail Spur",
                     "Water Treatment", "Camp Housing", "Conveyor Line", "Power Line", "Ventilation Shaft",
                     "Assay Lab", "Fleet Renewal", "Heap Leach Pad", "Port Loader"],
        "periods": [str(year) for year in range(2027, 2033)], "money": "million dollars", "period": "year",
        "funds": "fresh funds approved by the board",
    }),
)

# the eval split's own industries, companies, project names, periods and money units (held out from training)
EVAL_SCENARIOS = (
    Scenario("hospital", "healthcare", {
        "intro": "A regional hospital trust is weighing which ward and equipment upgrades to finance in the "
                 "fiscal years ahead.",
        "projects": ["MRI Suite", "Day Surgery Unit", "Pharmacy Robot", "Patient Portal", "Rooftop Helipad",
                     "Maternity Ward Refit", "Sterile Supply Hub", "Rehab Gym", "Backup Generator", "Dialysis Unit",
                     "Eye Clinic", "Teaching Block", "Kitchen Upgrade", "Linen Laundry"],
        "periods": [f"FY{year}" for year in range(2041, 2047)], "money": "million pounds",
        "period": "fiscal year", "funds": "capital grants from the health authority",
    }),
    Scenario("shipping", "container shipping", {
        "intro": "A container line is working out which fleet and terminal investments to back, knowing that "
                 "the returns of one investment can finance a later one.",
        "projects": ["Feeder Vessel", "Reefer Containers", "Crane Retrofit", "Scrubber Fit-Out", "Berth Dredging",
                     "Chassis Pool", "Yard Automation", "Shore Power", "Inland Depot", "Tug Charter",
                     "Booking Platform", "Ballast Treatment", "Dry Dock Slot", "LNG Bunkering"],
        "periods": [f"H{half} {year}" for year in range(2029, 2032) for half in (1, 2)],
        "money": "million Danish kroner", "period": "half-year",
        "funds": "capital injections from the parent group",
    }),
)


class MultiPeriodInvestment(ProblemFamily):
    name = "multi_period_investment"
    title = "Multi-period capital budgeting"
    problem_type = "MILP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"fund": "binary", "cash": "nonnegative"}
    phrasings = (
        Phrasing(r"decides which capital projects to fund over the coming years\.",
                 ("decides which capital projects to fund over the coming years.",),
                 ("is choosing the capital projects it will finance in the years ahead.",)),
        Phrasing(r"plans which product bets to fund over the next quarters\.",
                 ("plans which product bets to fund over the next quarters.",),
                 ("is deciding which product bets to back in the coming quarters.",)),
        Phrasing(r"Cash not spent in a period earns\b", ("Cash not spent in a period earns",
                                                          "Unspent cash at the end of a period earns"),
                 ("Money left over at the end of a period earns",)),
        Phrasing(r"A funded project brings all of its cash flows\.",
                 ("A funded project brings all of its cash flows.",),
                 ("Funding a project commits to every one of its cash flows.",)),
        # eval-only rewordings of the fixed sentences of every statement (training keeps its text)
        Phrasing(r"\bIt considers\b", ("It considers",), ("The plan covers",)),
        Phrasing(r"\bEach project has a net cash flow in every\b", ("Each project has a net cash flow in every",),
                 ("Every project carries a net cash flow for each",)),
        Phrasing(r"\(negative for an outlay, positive for a return, in\b",
                 ("(negative for an outlay, positive for a return, in",),
                 ("(an outlay shows as a negative figure and a return as a positive one, in",)),
        Phrasing(r"\band the cash held must never be negative\.", ("and the cash held must never be negative.",),
                 ("and the cash balance may never drop below zero.",)),
        Phrasing(r"\binterest into the next\b", ("interest into the next",), ("interest, credited in the following",)),
        Phrasing(r"\bbut the last, up to a limit\b", ("but the last, up to a limit",),
                 ("except the final one, within a cap",)),
        Phrasing(r"\bmoney can be borrowed for one\b", ("money can be borrowed for one",),
                 ("loans may be taken out for a single",)),
        Phrasing(r"\ba loan is repaid in the next\b", ("a loan is repaid in the next",),
                 ("each loan falls due in the following",)),
        Phrasing(r"\bA minimum cash balance must be held at the end of every\b",
                 ("A minimum cash balance must be held at the end of every",),
                 ("A floor applies to the cash on hand when closing each",)),
        Phrasing(r"\bmay be funded in part \(any share between 0 and 1\), taking that share of each of its cash "
                 r"flows; every other project is funded in full or not at all\.",
                 ("may be funded in part (any share between 0 and 1), taking that share of each of its cash flows; "
                  "every other project is funded in full or not at all.",),
                 ("can be partly financed (at any fraction from 0 to 1), receiving that fraction of every one of "
                  "its cash flows; the remaining projects are all-or-nothing.",)),
        Phrasing(r"\bmust be funded in full\.", ("must be funded in full.",), ("shall be financed completely.",)),
        Phrasing(r"\bWhich projects should be funded to have the most cash at the end of\b",
                 ("Which projects should be funded to have the most cash at the end of",),
                 ("Which funding choice leaves the largest cash balance at the close of",)),
        Phrasing(r"\band how much cash is that \(in\b", ("and how much cash is that (in",),
                 ("and what is that balance (in",)),
        Phrasing(r"\bCash flows by project:", ("Cash flows by project:",), ("Net flows, project by project:",)),
        Phrasing(r"\bfresh funds\b", ("fresh funds",), ("new money",)),
        Phrasing(r"\bborrowing limit\b", ("borrowing limit",), ("loan ceiling",)),
        Phrasing(r"\bminimum cash\b(?! balance)", ("minimum cash",), ("cash floor",)),
        Phrasing(r"\blist of the candidate project names\b", ("list of the candidate project names",),
                 ("names of the projects under review",)),
        Phrasing(r"\blist of the periods, in time order\b", ("list of the periods, in time order",),
                 ("periods in chronological order",)),
        Phrasing(r"\bnet cash of the project in the period \(negative: an outlay\)",
                 ("net cash of the project in the period (negative: an outlay)",),
                 ("net cash flow of a project in a period (an outlay is negative)",)),
        Phrasing(r"\barriving in each period\b", ("arriving in each period",), ("coming in every period",)),
        Phrasing(r"\binterest earned by cash left at the end of a period, as a fraction per period\b",
                 ("interest earned by cash left at the end of a period, as a fraction per period",),
                 ("interest paid on cash still held when a period closes, as a fraction for each period",)),
        Phrasing(r"\bprojects that must be funded in full \(may be empty\)",
                 ("projects that must be funded in full (may be empty)",),
                 ("projects that have to be financed completely (possibly none)",)),
        Phrasing(r"\binterest of a one-period loan\b", ("interest of a one-period loan",),
                 ("interest charged on a loan over one period",)),
        Phrasing(r"\bmost that can be borrowed in each period but the last\b",
                 ("most that can be borrowed in each period but the last",),
                 ("largest loan available in every period except the final one",)),
        Phrasing(r"\bleast cash to hold at the end of each period\b", ("least cash to hold at the end of each period",),
                 ("smallest cash balance allowed when a period closes",)),
        Phrasing(r"\bprojects that may be funded in part, taking that share of every cash flow\b",
                 ("projects that may be funded in part, taking that share of every cash flow",),
                 ("projects that can be partly financed, receiving that fraction of each cash flow",)),
        Phrasing(r"\(only when\b", ("(only when",), ("(present only if",)),
    )
    data_fields = {
        "projects": "list of the candidate project names",
        "periods": "list of the periods, in time order",
        "cash_flow": "cash_flow[project][period]: net cash of the project in the period (negative: an outlay)",
        "budget": "fresh funds arriving in each period, keyed by period",
        "interest_rate": "interest earned by cash left at the end of a period, as a fraction per period",
        "committed": "projects that must be funded in full (may be empty)",
        "borrow_rate": "interest of a one-period loan, as a fraction (only when borrowing is possible)",
        "borrow_limit": "most that can be borrowed in each period but the last, keyed by period (only when "
                        "borrowing is possible)",
        "min_cash": "least cash to hold at the end of each period, keyed by period (only when there is such a "
                    "floor)",
        "divisible": "projects that may be funded in part, taking that share of every cash flow (only when "
                     "some may)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.T = pyo.Set(initialize=data["periods"])
periods = data["periods"]
'''
    _WHOLE = '''\
model.fund = pyo.Var(data["projects"], domain=pyo.Binary)

def taken(model, j):
    return model.fund[j]
'''
    _DIVISIBLE = '''\
# divisible projects are funded in any share between 0 and 1 and take that share of each cash flow
whole = [j for j in data["projects"] if j not in data["divisible"]]
model.fund = pyo.Var(whole, domain=pyo.Binary)
model.share = pyo.Var(data["divisible"], domain=pyo.NonNegativeReals, bounds=(0, 1))

def taken(model, j):
    return model.share[j] if j in data["divisible"] else model.fund[j]
'''
    _CASH = '''\
model.cash = pyo.Var(model.T, domain=pyo.NonNegativeReals)  # held at the end of the period

model.obj = pyo.Objective(expr=model.cash[periods[-1]], sense=pyo.maximize)
'''
    _BALANCE = '''\

# cash carried in with its interest, fresh funds and the funded projects' flows
def cash_balance(model, t):
    k = periods.index(t)
    carried = 0 if k == 0 else (1 + data["interest_rate"]) * model.cash[periods[k - 1]]
    flows = sum(data["cash_flow"][j][t] * taken(model, j) for j in data["projects"])
    return model.cash[t] == carried + data["budget"][t] + flows

model.cash_balance = pyo.Constraint(model.T, rule=cash_balance)
'''
    _BORROWING = '''\

# a loan taken in a period is repaid with interest in the next; none is taken in the last period
model.borrow = pyo.Var(periods[:-1], domain=pyo.NonNegativeReals, bounds=lambda model, t: (0, data["borrow_limit"][t]))

def cash_balance(model, t):
    k = periods.index(t)
    carried = 0 if k == 0 else (1 + data["interest_rate"]) * model.cash[periods[k - 1]]
    flows = sum(data["cash_flow"][j][t] * taken(model, j) for j in data["projects"])
    loan = model.borrow[t] if k < len(periods) - 1 else 0
    repaid = 0 if k == 0 else (1 + data["borrow_rate"]) * model.borrow[periods[k - 1]]
    return model.cash[t] == carried + data["budget"][t] + flows + loan - repaid

model.cash_balance = pyo.Constraint(model.T, rule=cash_balance)
'''
    _MIN_CASH = '''\
model.min_cash = pyo.Constraint(model.T, rule=lambda model, t: model.cash[t] >= data["min_cash"][t])
'''
    _TAIL = '''\
model.committed = pyo.Constraint(data["committed"], rule=lambda model, j: taken(model, j) == 1)
'''

    model_code = _HEAD + _WHOLE + _CASH + _BORROWING + _TAIL  # with borrowing, no floor, no divisible project

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._DIVISIBLE if "divisible" in data else self._WHOLE)
        code += self._CASH + (self._BORROWING if "borrow_rate" in data else self._BALANCE)
        if "min_cash" in data:
            code += self._MIN_CASH
        return code + self._TAIL

    def variant_of(self, data: dict) -> str:
        parts = [label for key, label in (("borrow_rate", "borrowing"), ("min_cash", "min_cash"),
                                          ("divisible", "divisible")) if key in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        domains = dict(self.domains)
        if "borrow_rate" in data:
            domains["borrow"] = "nonnegative"
        if "divisible" in data:
            domains["share"] = "nonnegative"
        return domains

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_projects = size_for(difficulty, 5, 8, 12)
        n_periods = size_for(difficulty, 4, 5, 6)
        projects = rng.sample(words["projects"], n_projects)
        periods = words["periods"][:n_periods]
        interest_rate = rng.choice([0.02, 0.03, 0.04, 0.05])
        cash_flow = {}
        for k, j in enumerate(projects):
            start = 0 if k < 2 else rng.randint(0, n_periods - 2)  # two projects start at once
            flows = [0] * n_periods
            flows[start] = -rng.randint(8, 40) * 5
            second = rng.randint(2, 8) * 5 if start + 2 < n_periods and rng.random() < 0.4 else 0
            if second:  # a second, smaller outlay the period after
                flows[start + 1] = -second
            paying = range(start + (2 if second else 1), n_periods)
            total = -sum(flows) * rng.uniform(0.9, 1.6)
            for t in paying:
                flows[t] = int(round(total / len(paying) * rng.uniform(0.7, 1.3)))
            cash_flow[j] = dict(zip(periods, flows, strict=True))
        outlays = {t: -sum(min(0, cash_flow[j][t]) for j in projects) for t in periods}
        budget = {t: max(10, int(round(outlays[t] * rng.uniform(0.2, 0.45) / 5)) * 5) for t in periods}
        data = {"projects": projects, "periods": periods, "cash_flow": cash_flow, "budget": budget,
                "interest_rate": interest_rate, "committed": []}
        if rng.random() < 0.5:
            data["borrow_rate"] = round(interest_rate + rng.choice([0.02, 0.03, 0.04, 0.06]), 2)
            data["borrow_limit"] = {t: max(10, int(round(outlays[t] * rng.uniform(0.1, 0.25) / 5)) * 5)
                                    for t in periods[:-1]}
        if rng.random() < 0.5:
            # a floor below half of the cash held when nothing is funded
            held, floor = 0.0, {}
            for t in periods:
                held = held * (1 + interest_rate) + budget[t]
                floor[t] = max(5, int(held * rng.uniform(0.1, 0.4) / 5) * 5)
            data["min_cash"] = floor
        if rng.random() < 0.5:
            data["divisible"] = sorted(rng.sample(projects, max(1, n_projects // 3)), key=projects.index)
        if rng.random() < 0.3:
            # the cheapest project is committed when the funds alone pay for it
            cheapest = min(projects, key=lambda j: (-min(cash_flow[j].values()), j))
            if self._affordable(data, [cheapest]):
                data["committed"] = [cheapest]
        return data

    def _affordable(self, data: dict, funded: list[str]) -> bool:
        """Whether funding `funded` without loans keeps the cash at or above its floor in every period."""
        held = 0.0
        for t in data["periods"]:
            held = held * (1 + data["interest_rate"]) + data["budget"][t] + sum(data["cash_flow"][j][t]
                                                                              for j in funded)
            if held < data.get("min_cash", {}).get(t, 0) - 1e-9:
                return False
        return True

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # commit to projects whose first-period outlays exceed that period's funds and largest loan
        first = data["periods"][0]
        available = data["budget"][first] + data.get("borrow_limit", {}).get(first, 0)
        committed, spent = [], 0
        for j in sorted(data["projects"], key=lambda j: (data["cash_flow"][j][first], j)):
            if spent > available:
                break
            committed.append(j)
            spent -= data["cash_flow"][j][first]
        if spent <= available:
            return None
        return {**data, "committed": committed}

    def _borrow_columns(self, data: dict) -> list[str]:
        return data["periods"][:-1] if "borrow_rate" in data else []

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        periods, divisible = data["periods"], set(data.get("divisible", ()))
        committed = set(data["committed"])
        taken = {}
        for j in data["projects"]:
            lower = 1.0 if j in committed else 0.0
            if j in divisible:
                taken[j] = matrix.add_var(f"share[{j}]", lower, 1.0)
            else:
                taken[j] = matrix.add_var(f"fund[{j}]", lower, 1.0, integer=True)
        floor = data.get("min_cash", {})
        cash = {t: matrix.add_var(f"cash[{t}]", floor.get(t, 0.0), cost=1.0 if t == periods[-1] else 0.0)
                for t in periods}
        borrow = {t: matrix.add_var(f"borrow[{t}]", 0.0, data["borrow_limit"][t])
                  for t in self._borrow_columns(data)}
        for k, t in enumerate(periods):
            # cash[t] - (1 + r) cash[t-1] - flows - loan + repaid = budget[t]
            row = {cash[t]: 1.0}
            if k > 0:
                row[cash[periods[k - 1]]] = -(1 + data["interest_rate"])
            for j in data["projects"]:
                if data["cash_flow"][j][t]:
                    row[taken[j]] = -data["cash_flow"][j][t]
            if t in borrow:
                row[borrow[t]] = -1.0
            if k > 0 and periods[k - 1] in borrow:
                row[borrow[periods[k - 1]]] = 1 + data["borrow_rate"]
            matrix.add_row(row, lower=data["budget"][t], upper=data["budget"][t], name=f"cash_balance[{t}]")

    def _taken(self, data: dict, x: dict, j: str) -> float:
        return x["share"][j] if j in data.get("divisible", ()) else x["fund"][j]

    def constraint_rows(self, data: dict, x: dict):
        periods, cash = data["periods"], x["cash"]
        borrow = x.get("borrow", {})
        carried, owed = 0.0, 0.0
        for t in periods:
            flows = sum(data["cash_flow"][j][t] * self._taken(data, x, j) for j in data["projects"])
            loan = borrow[t] if t in self._borrow_columns(data) else 0.0
            yield Row(f"cash_balance[{t}]", cash[t], "==", carried + data["budget"][t] + flows + loan - owed)
            carried = (1 + data["interest_rate"]) * cash[t]
            owed = (1 + data["borrow_rate"]) * loan if "borrow_rate" in data else 0.0
            if "min_cash" in data:
                yield Row(f"min_cash[{t}]", cash[t], ">=", data["min_cash"][t])
            if t in self._borrow_columns(data):
                yield Row(f"borrow_limit[{t}]", loan, "<=", data["borrow_limit"][t])
        for j in data.get("divisible", ()):
            yield Row(f"share_limit[{j}]", x["share"][j], "<=", 1)
        for j in data["committed"]:
            yield Row(f"committed[{j}]", self._taken(data, x, j), "==", 1)

    def objective_value(self, data: dict, x: dict) -> float:
        return x["cash"][data["periods"][-1]]

    def _rules(self, data: dict, words: dict, representation: str) -> list[str]:
        period = words["period"]
        listed = representation == "text"
        rules = []
        if "borrow_rate" in data:
            limits = "" if not listed else " (" + ", ".join(
                f"{fmt(data['borrow_limit'][t])} in {t}" for t in data["periods"][:-1]) + ")"
            rules.append(f"In every {period} but the last, up to a limit{limits}, money can be borrowed for one "
                         f"{period}: a loan is repaid in the next {period} with "
                         f"{fmt(round(data['borrow_rate'] * 100, 6))}% interest.")
        if "min_cash" in data:
            floors = "" if not listed else ": " + ", ".join(
                f"{fmt(data['min_cash'][t])} at the end of {t}" for t in data["periods"])
            rules.append(f"A minimum cash balance must be held at the end of every {period}{floors}.")
        if "divisible" in data:
            rules.append(f"{join_names(data['divisible'])} may be funded in part (any share between 0 and 1), "
                         "taking that share of each of its cash flows; every other project is funded in full or "
                         "not at all.")
        if data["committed"]:
            rules.append(f"{join_names(data['committed'])} must be funded in full.")
        return rules

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        money, period, periods = words["money"], words["period"], data["periods"]
        rate = fmt(round(data["interest_rate"] * 100, 6))
        setting = (f"{words['intro']} It considers {len(data['projects'])} projects over {len(periods)} "
                   f"{plural(period)} ({join_names(periods)}). Each project has a net cash flow in every {period} "
                   f"(negative for an outlay, positive for a return, in {money}). A funded project brings all of "
                   f"its cash flows. In each {period} {words['funds']} arrive, and the cash held must never be "
                   f"negative. Cash not spent in a period earns {rate}% interest into the next {period}.")
        rules = " ".join(self._rules(data, words, representation))
        question = (f"Which projects should be funded to have the most cash at the end of {periods[-1]}, and how "
                    f"much cash is that (in {money})?")
        if representation == "text":
            lines = [f"{j}: " + ", ".join(f"{fmt(data['cash_flow'][j][t])} in {t}" for t in periods) + "."
                     for j in data["projects"]]
            funds = ", ".join(f"{fmt(data['budget'][t])} in {t}" for t in periods)
            return (f"{setting} Cash flows by project: {' '.join(lines)} Fresh funds: {funds}. {rules} "
                    f"{question}")
        if representation == "table":
            rows = [[j, *[data["cash_flow"][j][t] for t in periods]] for j in data["projects"]]
            rows.append(["fresh funds", *[data["budget"][t] for t in periods]])
            if "borrow_rate" in data:
                rows.append(["borrowing limit", *[data["borrow_limit"][t] for t in periods[:-1]], "none"])
            if "min_cash" in data:
                rows.append(["minimum cash", *[data["min_cash"][t] for t in periods]])
            table = markdown_table([f"cash flow ({money})", *periods], rows)
            return f"{setting}\n\n{table}\n\n{rules} {question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{setting} {rules}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        funded = [f"{j} ({fmt(round(self._taken(data, x, j), 4))})" if j in data.get("divisible", ()) else j
                  for j in data["projects"] if self._taken(data, x, j) > 1e-6]
        cash = ", ".join(f"{t}: {fmt(round(x['cash'][t], 4))}" for t in data["periods"])
        return f"- fund {join_names(funded) if funded else 'nothing'}\n- cash at the end of each period: {cash}"

    def formulation(self, data: dict) -> str:
        parameters = ("cash flow $a_{jt}$, fresh funds $b_t$, interest rate $r$, committed projects "
                      "$K \\subseteq J$")
        variables = "$x_j \\in \\{0,1\\}$ (funded), $c_t \\ge 0$ (cash at the end of $t$, $c_0 = 0$)"
        balance = "c_t = (1 + r) c_{t-1} + b_t + \\sum_{j \\in J} a_{jt} x_j"
        rows = []
        if "divisible" in data:
            parameters += ", divisible projects $Q \\subseteq J$"
            variables += "; $x_j \\in [0, 1]$ for $j \\in Q$ (share funded)"
        if "borrow_rate" in data:
            parameters += ", borrowing rate $q$, borrowing limit $L_t$"
            variables += ", $l_t \\in [0, L_t]$ (loan taken in $t < n$, $l_0 = l_n = 0$)"
            balance += " + l_t - (1 + q) l_{t-1}"
        if "min_cash" in data:
            parameters += ", minimum cash $m_t$"
            rows.append("& c_t \\ge m_t && \\forall t")
        rows.append("& x_j = 1 && \\forall j \\in K")
        return (
            "**Sets**: projects $J$, periods $T = \\{1, \\dots, n\\}$.\n\n"
            f"**Parameters**: {parameters}.\n\n**Variables**: {variables}.\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & c_n \\\\\n"
            f"\\text{{s.t.}}\\ & {balance} && \\forall t \\\\\n" + " \\\\\n".join(rows)
            + "\n\\end{aligned}\n$$"
        )


FAMILY = MultiPeriodInvestment()
