"""Media / budget allocation (IP): buy whole ad placements on several channels to maximize the audience
reached, within a budget, with limits per channel.

Structure variants (drawn per instance, recorded by the keys present): a minimum share of the spend on one
channel (`min_share_channel`, `min_share`), audiences that saturate (`saturation`, `repeat_reach`: placements
past a point reach fewer people, through a continuous excess variable, so the IP becomes a MILP) and a fixed
ad production cost per channel used, paid from the budget (`creative_cost`, through a binary linked to the
placements). Each is present or absent, so the program has eight skeletons."""

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
    Scenario("retail", "retail marketing", {
        "who": "A retail chain", "campaign": "its spring sale",
        "channels": ["TV spots", "radio spots", "newspaper ads", "billboards", "social media posts",
                     "podcast reads", "search ads", "cinema ads", "email blasts", "transit posters"],
        "audience": "thousand people", "placement": "placement",
    }),
    Scenario("election", "public information", {
        "who": "A city's election office", "campaign": "a voter-registration drive",
        "channels": ["bus-shelter posters", "local radio slots", "community newspaper pages", "TV slots",
                     "streaming ads", "mailers", "video pre-rolls", "town-hall flyers", "social media posts",
                     "podcast reads"],
        "audience": "thousand residents", "placement": "slot",
    }),
    Scenario("app", "mobile apps", {
        "who": "A start-up launching a fitness app", "campaign": "its launch month",
        "channels": ["influencer posts", "app-store ads", "video ads", "display banners", "newsletter slots",
                     "podcast reads", "search ads", "TV spots", "radio spots", "transit posters"],
        "audience": "thousand impressions", "placement": "unit",
    }),
)

# eval only: other advertisers, campaigns, channels, audiences and placement words than any training scenario
EVAL_SCENARIOS = (
    Scenario("museum", "cultural institutions", {
        "who": "A natural-history museum", "campaign": "the opening of its dinosaur hall",
        "channels": ["tram wraps", "metro station screens", "arts magazine spreads", "morning radio mentions",
                     "cable TV commercials", "tourist-map listings", "hotel lobby displays", "sponsored reels",
                     "culture newsletter banners", "airport lightboxes"],
        "audience": "thousand viewers", "placement": "insertion",
    }),
    Scenario("charity", "nonprofit fundraising", {
        "who": "A wildlife charity", "campaign": "its winter donation appeal",
        "channels": ["door drops", "regional TV adverts", "sponsored search results", "community radio features",
                     "supermarket screens", "online video sponsorships", "magazine inserts", "street banners",
                     "digital audio adverts", "railway platform posters"],
        "audience": "thousand households", "placement": "booking",
    }),
    Scenario("dealership", "car retailing", {
        "who": "A car dealership group", "campaign": "its model-year clearance",
        "channels": ["drive-time radio ads", "stadium boards", "classified listings", "roadside digital boards",
                     "motoring magazine pages", "sports broadcast breaks", "sponsored video shorts",
                     "local paper wraps", "direct-mail postcards", "fuel station screens"],
        "audience": "thousand drivers", "placement": "package",
    }),
)


class MediaAllocation(ProblemFamily):
    name = "media_allocation"
    title = "Media budget allocation"
    problem_type = "IP"
    sense = "max"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"buy": "nonnegative_integer"}
    # eval-only wordings of the fixed sentences ("at least", "at most" and "what is that" are left to the
    # generic rules, whose training wordings vary)
    phrasings = (
        Phrasing(r"\bis buying media for\b", ("is buying media for",), ("is planning the media buy for",)),
        Phrasing(r", with a budget of\b", (", with a budget of",), (", and it may spend up to",)),
        Phrasing(r"\bPlacements are bought whole\.", ("Placements are bought whole.",),
                 ("Only whole placements can be booked.",)),
        Phrasing(r"(?<=, )reaches\b(?= \d)", ("reaches",), ("is seen by",)),
        Phrasing(r"\bare available\b", ("are available",), ("can be booked",)),
        Phrasing(r"\bonly the first\b", ("only the first",), ("just the first",)),
        Phrasing(r"\breach that many, each further one reaches\b", ("reach that many, each further one reaches",),
                 ("achieve that reach, and every additional one is seen by",)),
        Phrasing(r"\bproducing its ad costs\b", ("producing its ad costs",), ("making its ad comes to",)),
        Phrasing(r"\bof the money spent on\b", ("of the money spent on",), ("of the outlay on",)),
        Phrasing(r"\bmust go to\b", ("must go to",), ("has to be directed to",)),
        Phrasing(r"\bAudiences saturate: past a number of\b", ("Audiences saturate: past a number of",),
                 ("Reach wears off: beyond a certain count of",)),
        Phrasing(r"\breaches a smaller audience, mostly people already reached\.",
                 ("reaches a smaller audience, mostly people already reached.",),
                 ("is seen by fewer people, most of whom were reached before.",)),
        Phrasing(r"\bProducing the ad for a channel has a fixed cost, paid from the budget once if any\b",
                 ("Producing the ad for a channel has a fixed cost, paid from the budget once if any",),
                 ("Using a channel means making its ad first, a fixed cost charged once to the budget when any",)),
        Phrasing(r"\bon that channel is bought\.", ("on that channel is bought.",), ("on that channel is booked.",)),
        Phrasing(r"\bA prior agreement requires\b", ("A prior agreement requires",),
                 ("An earlier contract commits the campaign to",)),
        Phrasing(r"\bshould be bought on each channel to maximize the total audience reached\b",
                 ("should be bought on each channel to maximize the total audience reached",),
                 ("are to be purchased on every channel for the largest combined audience",)),
        # table headers and the data.json field descriptions
        Phrasing(r"\bad production cost\b", ("ad production cost",), ("cost of making the ad",)),
        Phrasing(r"\bat full reach\b", ("at full reach",), ("with undiminished reach",)),
        Phrasing(r"\bcost of one placement on each channel\b", ("cost of one placement on each channel",),
                 ("price of a single placement on a channel",)),
        Phrasing(r"\baudience reached by one placement\b", ("audience reached by one placement",),
                 ("people one placement gets to",)),
        Phrasing(r"\bmost placements available on each channel\b", ("most placements available on each channel",),
                 ("largest number of placements a channel offers",)),
        Phrasing(r"\btotal budget \(dollars\)", ("total budget (dollars)",), ("money available in all (USD)",)),
        Phrasing(r"\bthe channel that must receive a minimum share of the spend on placements\b",
                 ("the channel that must receive a minimum share of the spend on placements",),
                 ("channel that is guaranteed a minimum part of the placement spending",)),
        Phrasing(r"\bthat minimum share of the spend on placements\b", ("that minimum share of the spend on placements",),
                 ("smallest part of the placement spending that this channel gets",)),
        Phrasing(r"\bplacements on each channel that reach the full audience\b",
                 ("placements on each channel that reach the full audience",),
                 ("number of placements of a channel that get the whole audience",)),
        Phrasing(r"\baudience reached by each placement past the saturation point\b",
                 ("audience reached by each placement past the saturation point",),
                 ("people every placement beyond the saturation point gets to",)),
        Phrasing(r"\bof producing the ad for a channel that is used at all, paid from the budget\b",
                 ("of producing the ad for a channel that is used at all, paid from the budget",),
                 ("of making the ad of any channel in use, charged to the budget",)),
        Phrasing(r"\bcontracted minimum number of placements\b", ("contracted minimum number of placements",),
                 ("placements owed under contract, at the least",)),
        Phrasing(r"\(only when there is such a share\)", ("(only when there is such a share)",),
                 ("(present if a share is imposed)",)),
        Phrasing(r"\(only when further placements reach fewer\)", ("(only when further placements reach fewer)",),
                 ("(present if reach wears off)",)),
        Phrasing(r"\(only when ads must be produced per channel\)", ("(only when ads must be produced per channel)",),
                 ("(present if every channel in use needs its own ad)",)),
        Phrasing(r"\(only when there are contracts\)", ("(only when there are contracts)",),
                 ("(present if contracts exist)",)),
    )
    data_fields = {
        "channels": "list of media channel names",
        "cost": "cost of one placement on each channel (dollars), keyed by channel",
        "reach": "audience reached by one placement, keyed by channel",
        "max_units": "most placements available on each channel, keyed by channel",
        "budget": "total budget (dollars)",
        "min_share_channel": "the channel that must receive a minimum share of the spend on placements (only "
                             "when there is such a share)",
        "min_share": "that minimum share of the spend on placements, as a fraction (only when there is such a "
                     "share)",
        "saturation": "placements on each channel that reach the full audience, keyed by channel (only when "
                      "further placements reach fewer)",
        "repeat_reach": "audience reached by each placement past the saturation point, keyed by channel (only "
                        "when further placements reach fewer)",
        "creative_cost": "cost (dollars) of producing the ad for a channel that is used at all, paid from the "
                         "budget, keyed by channel (only when ads must be produced per channel)",
        "min_units": "contracted minimum number of placements, keyed by channel (only when there are contracts)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
channels = data["channels"]
model.buy = pyo.Var(channels, domain=pyo.NonNegativeIntegers)
'''
    _RUN = '''\
model.run = pyo.Var(channels, domain=pyo.Binary)  # 1 when the channel's ad is produced
'''
    _EXTRA = '''\
model.extra = pyo.Var(channels, domain=pyo.NonNegativeReals)  # placements past the saturation point
'''
    _OBJECTIVE = '''\

model.obj = pyo.Objective(expr=sum(data["reach"][c] * model.buy[c] for c in channels), sense=pyo.maximize)
'''
    _OBJECTIVE_SATURATION = '''\

# a placement past the saturation point reaches only the repeat audience
model.obj = pyo.Objective(
    expr=sum(data["reach"][c] * model.buy[c] - (data["reach"][c] - data["repeat_reach"][c]) * model.extra[c]
             for c in channels),
    sense=pyo.maximize,
)
model.past_saturation = pyo.Constraint(
    channels, rule=lambda model, c: model.extra[c] >= model.buy[c] - data["saturation"][c]
)
'''
    _BUDGET = '''\

spend = sum(data["cost"][c] * model.buy[c] for c in channels)
model.budget = pyo.Constraint(expr=spend <= data["budget"])
model.availability = pyo.Constraint(channels, rule=lambda model, c: model.buy[c] <= data["max_units"][c])
'''
    _BUDGET_CREATIVE = '''\

# the budget pays for the placements and for producing the ad of every channel used
spend = sum(data["cost"][c] * model.buy[c] for c in channels)
production = sum(data["creative_cost"][c] * model.run[c] for c in channels)
model.budget = pyo.Constraint(expr=spend + production <= data["budget"])
model.availability = pyo.Constraint(
    channels, rule=lambda model, c: model.buy[c] <= data["max_units"][c] * model.run[c]
)
'''
    _MIN_SHARE = '''\

# the named channel gets at least its minimum share of the spend on placements
key = data["min_share_channel"]
model.min_share = pyo.Constraint(expr=data["cost"][key] * model.buy[key] >= data["min_share"] * spend)
'''
    _MIN_UNITS = '''\

# placements promised under earlier agreements
model.min_units = pyo.Constraint(
    list(data["min_units"]), rule=lambda model, c: model.buy[c] >= data["min_units"][c]
)
'''

    model_code = _HEAD + _OBJECTIVE + _BUDGET + _MIN_SHARE  # the family's model with a minimum share

    def model_code_for(self, data: dict) -> str:
        creative, saturation = "creative_cost" in data, "saturation" in data
        code = self._HEAD + (self._RUN if creative else "") + (self._EXTRA if saturation else "")
        code += self._OBJECTIVE_SATURATION if saturation else self._OBJECTIVE
        code += self._BUDGET_CREATIVE if creative else self._BUDGET
        if "min_share" in data:
            code += self._MIN_SHARE
        if "min_units" in data:
            code += self._MIN_UNITS
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("min_share", "saturation", "creative_cost") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        domains = dict(self.domains)
        if "creative_cost" in data:
            domains["run"] = "binary"
        if "saturation" in data:
            domains["extra"] = "nonnegative"
        return domains

    def problem_type_for(self, data: dict) -> str:
        return "MILP" if "saturation" in data else "IP"

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        n_channels = size_for(difficulty, 3, 6, 10)
        channels = scenario.words["channels"][:n_channels]
        cost = {c: rng.randrange(500, 20001, 250) for c in channels}
        # reach roughly proportional to cost with channel-specific efficiency, so the choice matters
        reach = {c: max(1, int(cost[c] / 1000 * rng.uniform(2.0, 9.0))) for c in channels}
        max_units = {c: rng.randint(3, 15) for c in channels}
        full_spend = sum(cost[c] * max_units[c] for c in channels)
        budget = int(full_spend * rng.uniform(0.3, 0.55) / 1000) * 1000
        key = rng.choice(channels)
        share = rng.choice([0.1, 0.15, 0.2, 0.25])
        data = {"channels": channels, "cost": cost, "reach": reach, "max_units": max_units, "budget": budget}
        # buying nothing meets every rule, so each variant is feasible
        if rng.random() < 0.5:
            data["min_share_channel"], data["min_share"] = key, share
        if rng.random() < 0.5:
            data["saturation"] = {c: rng.randint(max(1, max_units[c] // 3), max_units[c] - 1) for c in channels}
            # strictly below the full reach (int rounds down), so extra placements are worth less, not more
            data["repeat_reach"] = {c: int(reach[c] * rng.uniform(0.3, 0.7)) for c in channels}
        if rng.random() < 0.5:
            # half to twice a placement's price, at most a quarter of the budget
            most = max(250, budget // 4 // 250 * 250)
            data["creative_cost"] = {c: min(most, max(250, round(cost[c] * rng.uniform(0.5, 2.0) / 250) * 250))
                                     for c in channels}
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a contract forces buying more of one channel than the budget allows
        data = dict(data)
        channel = max(data["channels"], key=lambda c: data["cost"][c])
        data["min_units"] = {channel: data["budget"] // data["cost"][channel] + 1}
        data["max_units"] = {**data["max_units"],
                             channel: max(data["max_units"][channel], data["min_units"][channel])}
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        channels = data["channels"]
        minimum = data.get("min_units", {})
        column = {c: matrix.add_var(f"buy[{c}]", minimum.get(c, 0), data["max_units"][c], cost=data["reach"][c],
                                    integer=True) for c in channels}
        budget_row = {column[c]: data["cost"][c] for c in channels}
        if "creative_cost" in data:
            for c in channels:
                run = matrix.add_var(f"run[{c}]", 0.0, 1.0, integer=True)
                budget_row[run] = data["creative_cost"][c]
                matrix.add_row({column[c]: 1.0, run: -float(data["max_units"][c])}, upper=0.0,
                               name=f"availability[{c}]")
        matrix.add_row(budget_row, upper=data["budget"], name="budget")
        if "saturation" in data:
            for c in channels:
                # extra_c >= buy_c - saturation_c, at a loss of (reach - repeat reach) per extra placement
                extra = matrix.add_var(f"extra[{c}]", cost=-(data["reach"][c] - data["repeat_reach"][c]))
                matrix.add_row({extra: 1.0, column[c]: -1.0}, lower=-data["saturation"][c],
                               name=f"past_saturation[{c}]")
        if "min_share" in data:
            key, share = data["min_share_channel"], data["min_share"]
            coefficients = {column[c]: -share * data["cost"][c] for c in channels}
            coefficients[column[key]] += data["cost"][key]
            matrix.add_row(coefficients, lower=0.0, name="min_share")

    def constraint_rows(self, data: dict, x: dict):
        buy, channels = x["buy"], data["channels"]
        spend = sum(data["cost"][c] * buy[c] for c in channels)
        if "creative_cost" in data:
            run = x["run"]
            production = sum(data["creative_cost"][c] * run[c] for c in channels)
            yield Row("budget", spend + production, "<=", data["budget"])
            for c in channels:
                yield Row(f"availability[{c}]", buy[c] - data["max_units"][c] * run[c], "<=", 0)
        else:
            yield Row("budget", spend, "<=", data["budget"])
            for c in channels:
                yield Row(f"availability[{c}]", buy[c], "<=", data["max_units"][c])
        if "saturation" in data:
            for c in channels:
                yield Row(f"past_saturation[{c}]", x["extra"][c] - buy[c], ">=", -data["saturation"][c])
        if "min_share" in data:
            key = data["min_share_channel"]
            yield Row("min_share", data["cost"][key] * buy[key] - data["min_share"] * spend, ">=", 0.0)
        for c, amount in data.get("min_units", {}).items():
            yield Row(f"min_units[{c}]", buy[c], ">=", amount)

    def objective_value(self, data: dict, x: dict) -> float:
        total = sum(data["reach"][c] * x["buy"][c] for c in data["channels"])
        if "saturation" in data:
            total -= sum((data["reach"][c] - data["repeat_reach"][c]) * x["extra"][c] for c in data["channels"])
        return total

    def _rules(self, data: dict, placement: str, audience: str, representation: str) -> str:
        """The optional rules in words, with their numbers outside a "file" statement."""
        rules = []
        if "min_share" in data:
            share = "a minimum share" if representation == "file" else f"{fmt(round(data['min_share'] * 100, 6))}%"
            rules.append(f"At least {share} of the money spent on {plural(placement)} must go to "
                         f"{data['min_share_channel']}.")
        if "saturation" in data:
            rules.append(f"Audiences saturate: past a number of {plural(placement)} on a channel, each further "
                         f"{placement} reaches a smaller audience, mostly people already reached.")
        if "creative_cost" in data:
            rules.append(f"Producing the ad for a channel has a fixed cost, paid from the budget once if any "
                         f"{placement} on that channel is bought.")
        return " ".join(rules)

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        channels, audience, placement = data["channels"], words["audience"], words["placement"]
        intro = (f"{words['who']} is buying media for {words['campaign']} across {join_names(channels)}, "
                 f"with a budget of ${fmt(data['budget'])}. Placements are bought whole.")
        rule = self._rules(data, placement, audience, representation)
        contract = ""
        if "min_units" in data:
            contract = " " + " ".join(f"A prior agreement requires at least {fmt(v)} {plural(placement)} of {c}."
                                      for c, v in data["min_units"].items())
        question = (f"How many {plural(placement)} should be bought on each channel to maximize the total audience "
                    f"reached, in {audience}, and what is that maximum?")
        closing = " ".join(part for part in (rule, contract.strip(), question) if part)
        if representation == "text":
            def details_of(c: str) -> str:
                text = (f"One {placement} of {c} costs ${fmt(data['cost'][c])}, reaches {fmt(data['reach'][c])} "
                        f"{audience}, and at most {fmt(data['max_units'][c])} are available")
                if "saturation" in data:
                    text += (f"; only the first {fmt(data['saturation'][c])} reach that many, each further one "
                             f"reaches {fmt(data['repeat_reach'][c])} {audience}")
                if "creative_cost" in data:
                    text += f"; producing its ad costs ${fmt(data['creative_cost'][c])}"
                return text + "."

            return f"{intro} {' '.join(details_of(c) for c in channels)} {closing}"
        if representation == "table":
            header = ["channel", f"cost per {placement} ($)", f"reach ({audience})", "available"]
            if "saturation" in data:
                header += [f"{plural(placement)} at full reach", f"reach of each further {placement} ({audience})"]
            if "creative_cost" in data:
                header.append("ad production cost ($)")
            rows = []
            for c in channels:
                row = [c, data["cost"][c], data["reach"][c], data["max_units"][c]]
                if "saturation" in data:
                    row += [data["saturation"][c], data["repeat_reach"][c]]
                if "creative_cost" in data:
                    row.append(data["creative_cost"][c])
                rows.append(row)
            return f"{intro}\n\n{markdown_table(header, rows)}\n\n{closing}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro}\n\n{describe_data_file(fields)}\n\n{closing}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        creative, saturation = "creative_cost" in data, "saturation" in data
        sets = "channels $C$"
        parameters = "cost $c_j$ and reach $r_j$ per placement, availability $u_j$, budget $B$"
        variables = "$x_j \\in \\mathbb{Z}_{\\ge 0}$, placements bought on channel $j$"
        objective = "\\sum_{j \\in C} r_j x_j"
        rows = []
        if saturation:
            parameters += ", placements at full reach $t_j$, repeat reach $q_j < r_j$"
            variables += "; $e_j \\ge 0$, placements past the saturation point"
            objective += " - \\sum_{j \\in C} (r_j - q_j) e_j"
        if creative:
            parameters += ", ad production cost $f_j$"
            variables += "; $y_j \\in \\{0, 1\\}$, 1 when channel $j$ is used"
            rows += ["\\text{s.t.}\\ & \\sum_{j \\in C} c_j x_j + \\sum_{j \\in C} f_j y_j \\le B",
                     "& x_j \\le u_j y_j && \\forall j \\in C"]
        else:
            rows += ["\\text{s.t.}\\ & \\sum_{j \\in C} c_j x_j \\le B", "& x_j \\le u_j && \\forall j \\in C"]
        if saturation:
            rows.append("& e_j \\ge x_j - t_j && \\forall j \\in C")
        if "min_share" in data:
            sets += ", with one channel $k$ that has a minimum spend share"
            parameters += ", minimum share $s$"
            rows.append("& c_k x_k \\ge s \\sum_{j \\in C} c_j x_j")
        if "min_units" in data:
            parameters += ", contracted minimum $m_j$ (0 when none)"
            rows.append("& x_j \\ge m_j && \\forall j \\in C")
        rows.append("& x_j \\in \\mathbb{Z}_{\\ge 0} && \\forall j \\in C")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\max\\ & {objective} \\\\\n" + " \\\\\n".join(rows)
            + "\n\\end{aligned}\n$$"
        )


FAMILY = MediaAllocation()
