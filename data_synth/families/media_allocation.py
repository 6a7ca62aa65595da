"""Media / budget allocation (IP): buy whole ad placements on several channels to maximize the audience
reached, within a budget, with limits per channel and a minimum share of spend on some channel."""

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
    size_for,
)

SCENARIOS = (
    Scenario("retail", "retail marketing", {
        "who": "A retail chain", "campaign": "its spring sale",
        "channels": ["TV spots", "radio spots", "newspaper ads", "billboards", "social media posts",
                     "podcast reads", "search ads"],
        "audience": "thousand people", "placement": "placement",
    }),
    Scenario("election", "public information", {
        "who": "A city's election office", "campaign": "a voter-registration drive",
        "channels": ["bus-shelter posters", "local radio slots", "community newspaper pages", "TV slots",
                     "streaming ads", "mailers", "video pre-rolls"],
        "audience": "thousand residents", "placement": "slot",
    }),
    Scenario("app", "mobile apps", {
        "who": "A start-up launching a fitness app", "campaign": "its launch month",
        "channels": ["influencer posts", "app-store ads", "video ads", "display banners", "newsletter slots",
                     "podcast reads", "search ads"],
        "audience": "thousand impressions", "placement": "unit",
    }),
)


class MediaAllocation(ProblemFamily):
    name = "media_allocation"
    title = "Media budget allocation"
    problem_type = "IP"
    sense = "max"
    scenarios = SCENARIOS
    domains = {"buy": "nonnegative_integer"}
    data_fields = {
        "channels": "list of media channel names",
        "cost": "cost of one placement on each channel (dollars), keyed by channel",
        "reach": "audience reached by one placement, keyed by channel",
        "max_units": "most placements available on each channel, keyed by channel",
        "budget": "total budget (dollars)",
        "min_share_channel": "the channel that must receive a minimum share of the spend",
        "min_share": "that minimum share of the total spend, as a fraction",
    }
    model_code = '''\
model = pyo.ConcreteModel()
channels = data["channels"]
model.buy = pyo.Var(channels, domain=pyo.NonNegativeIntegers)

model.obj = pyo.Objective(expr=sum(data["reach"][c] * model.buy[c] for c in channels), sense=pyo.maximize)

spend = sum(data["cost"][c] * model.buy[c] for c in channels)
model.budget = pyo.Constraint(expr=spend <= data["budget"])
model.availability = pyo.Constraint(channels, rule=lambda model, c: model.buy[c] <= data["max_units"][c])

# the named channel gets at least its minimum share of the total spend
key = data["min_share_channel"]
model.min_share = pyo.Constraint(expr=data["cost"][key] * model.buy[key] >= data["min_share"] * spend)

# placements promised under earlier agreements, when the instance has any
minimum = data.get("min_units", {})
model.min_units = pyo.Constraint(list(minimum), rule=lambda model, c: model.buy[c] >= minimum[c])
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        n_channels = size_for(difficulty, 3, 5, 7)
        channels = scenario.words["channels"][:n_channels]
        cost = {c: rng.randrange(500, 20001, 250) for c in channels}
        # reach roughly proportional to cost with channel-specific efficiency, so the choice matters
        reach = {c: max(1, int(cost[c] / 1000 * rng.uniform(2.0, 9.0))) for c in channels}
        max_units = {c: rng.randint(3, 15) for c in channels}
        full_spend = sum(cost[c] * max_units[c] for c in channels)
        budget = int(full_spend * rng.uniform(0.3, 0.55) / 1000) * 1000
        key = rng.choice(channels)
        return {"channels": channels, "cost": cost, "reach": reach, "max_units": max_units, "budget": budget,
                "min_share_channel": key, "min_share": rng.choice([0.1, 0.15, 0.2, 0.25])}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a contract forces buying more of one channel than the budget allows
        data = dict(data)
        channel = max(data["channels"], key=lambda c: data["cost"][c])
        data["min_units"] = {channel: data["budget"] // data["cost"][channel] + 1}
        data["max_units"] = {**data["max_units"],
                             channel: max(data["max_units"][channel], data["min_units"][channel])}
        return data

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        minimum = data.get("min_units", {})
        column = {c: matrix.add_var(f"buy[{c}]", minimum.get(c, 0), data["max_units"][c], cost=data["reach"][c],
                                    integer=True) for c in data["channels"]}
        matrix.add_row({column[c]: data["cost"][c] for c in data["channels"]}, upper=data["budget"], name="budget")
        key, share = data["min_share_channel"], data["min_share"]
        coefficients = {column[c]: -share * data["cost"][c] for c in data["channels"]}
        coefficients[column[key]] += data["cost"][key]
        matrix.add_row(coefficients, lower=0.0, name="min_share")

    def constraint_rows(self, data: dict, x: dict):
        buy = x["buy"]
        spend = sum(data["cost"][c] * buy[c] for c in data["channels"])
        yield Row("budget", spend, "<=", data["budget"])
        for c in data["channels"]:
            yield Row(f"availability[{c}]", buy[c], "<=", data["max_units"][c])
        key = data["min_share_channel"]
        yield Row("min_share", data["cost"][key] * buy[key] - data["min_share"] * spend, ">=", 0.0)
        for c, amount in data.get("min_units", {}).items():
            yield Row(f"min_units[{c}]", buy[c], ">=", amount)

    def objective_value(self, data: dict, x: dict) -> float:
        return sum(data["reach"][c] * x["buy"][c] for c in data["channels"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        channels, audience, placement = data["channels"], words["audience"], words["placement"]
        key = data["min_share_channel"]
        intro = (f"{words['who']} is buying media for {words['campaign']} across {join_names(channels)}, "
                 f"with a budget of ${fmt(data['budget'])}. Placements are bought whole.")
        rule = (f"At least {fmt(round(data['min_share'] * 100, 6))}% of the money spent must go to {key}.")
        contract = ""
        if "min_units" in data:
            contract = " " + " ".join(f"A prior agreement requires at least {fmt(v)} {placement}s of {c}."
                                      for c, v in data["min_units"].items())
        question = (f"How many {placement}s should be bought on each channel to maximize the total audience "
                    f"reached, in {audience}, and what is that maximum?")
        if representation == "text":
            details = " ".join(
                f"One {placement} of {c} costs ${fmt(data['cost'][c])}, reaches {fmt(data['reach'][c])} "
                f"{audience}, and at most {fmt(data['max_units'][c])} are available."
                for c in channels)
            return f"{intro} {details} {rule}{contract} {question}"
        if representation == "table":
            table = markdown_table(["channel", f"cost per {placement} ($)", f"reach ({audience})", "available"],
                                   [[c, data["cost"][c], data["reach"][c], data["max_units"][c]] for c in channels])
            return f"{intro}\n\n{table}\n\n{rule}{contract} {question}"
        if representation == "file":
            fields = dict(self.data_fields)
            if "min_units" in data:
                fields["min_units"] = f"contracted minimum number of {placement}s, keyed by channel"
            return f"{intro}\n\n{describe_data_file(fields)}\n\n{rule}{contract} {question}"
        raise ValueError(f"unknown representation {representation!r}")

    def formulation(self, data: dict) -> str:
        return (
            "**Sets**: channels $C$, with one channel $k$ that has a minimum spend share.\n\n"
            "**Parameters**: cost $c_j$ and reach $r_j$ per placement, availability $u_j$, budget $B$, "
            "minimum share $s$.\n\n"
            "**Variables**: $x_j \\in \\mathbb{Z}_{\\ge 0}$, placements bought on channel $j$.\n\n"
            "$$\n\\begin{aligned}\n\\max\\ & \\sum_{j \\in C} r_j x_j \\\\\n"
            "\\text{s.t.}\\ & \\sum_{j \\in C} c_j x_j \\le B \\\\\n"
            "& x_j \\le u_j && \\forall j \\in C \\\\\n"
            "& c_k x_k \\ge s \\sum_{j \\in C} c_j x_j \\\\\n"
            "& x_j \\in \\mathbb{Z}_{\\ge 0} && \\forall j \\in C\n\\end{aligned}\n$$"
        )


FAMILY = MediaAllocation()
