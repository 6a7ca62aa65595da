"""Mean-variance portfolio (convex QP, Markowitz): split a budget across assets to minimize the variance
of the portfolio's return, subject to a target expected return, full investment and, for larger
instances, a cap on the share of any one asset.

Structure variants (drawn per instance, recorded by the keys present; all stay continuous QPs, which
HiGHS solves): a mean-variance trade-off objective (`risk_aversion` times the variance minus the expected
return) instead of the variance alone, with the return target kept as a lower floor; a cap on the combined
share of the high-risk assets (`high_risk` with `max_high_risk`); and a rebalancing from a current
portfolio with limited turnover (`current_weight` with `max_turnover`, one traded-amount variable per
asset that bounds the change from above and below), each
present or absent, so the program has eight skeletons (twice that with the per-asset cap of the larger
instances)."""

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
from data_synth.statements import Phrasing

# each asset has a risk tier (1 low, 2 medium, 3 high) so that, as in real markets, bonds are calmer
# than equities and riskier assets tend to earn more
SCENARIOS = (
    Scenario("pension", "pension fund management", {
        "investor": "a pension fund's investment committee",
        "assets": [("domestic equities", 3), ("government bonds", 1), ("real estate", 2),
                   ("international equities", 3), ("corporate bonds", 1), ("infrastructure", 2),
                   ("commodities", 3), ("private credit", 2), ("emerging-market equities", 3),
                   ("inflation-linked bonds", 1), ("hedge funds", 2)],
        "asset": "asset class", "assets_word": "asset classes", "goal": "the strategic allocation for next year",
    }),
    Scenario("robo", "retail wealth management", {
        "investor": "a robo-advisor",
        "assets": [("ETF-USA", 3), ("ETF-BONDS", 1), ("ETF-EUROPE", 3), ("ETF-TIPS", 1), ("ETF-REIT", 2),
                   ("ETF-GOLD", 2), ("ETF-ASIA", 3), ("ETF-CREDIT", 1), ("ETF-SMALLCAP", 3), ("ETF-MUNI", 1),
                   ("ETF-DIVIDEND", 2)],
        "asset": "exchange-traded fund", "assets_word": "exchange-traded funds",
        "goal": "a model portfolio for its balanced clients",
    }),
    Scenario("endowment", "university endowment", {
        "investor": "a university endowment office",
        "assets": [("Alder Tech", 3), ("Elm Utilities", 1), ("Cedar Health", 2), ("Birch Energy", 3),
                   ("Fir Banking", 2), ("Dogwood Retail", 2), ("Ginkgo Pharma", 3), ("Hazel Logistics", 1),
                   ("Ivy Software", 3), ("Juniper Foods", 1), ("Laurel Insurance", 2)],
        "asset": "stock", "assets_word": "stocks", "goal": "a concentrated equity sleeve",
    }),
)

# the eval split's own industries, investors and asset names (held out from training)
EVAL_SCENARIOS = (
    Scenario("family_office", "family office wealth planning", {
        "investor": "a family office's chief investment officer",
        "assets": [("Harbor Value Fund", 3), ("Meridian Treasury Fund", 1), ("Atlas Property Fund", 2),
                   ("Summit Growth Fund", 3), ("Keystone Municipal Fund", 1), ("Beacon Dividend Fund", 2),
                   ("Crescent Frontier Fund", 3), ("Orchard Gold Fund", 2), ("Pioneer Small-Cap Fund", 3),
                   ("Sterling Short-Term Fund", 1), ("Northgate Balanced Fund", 2)],
        "asset": "mutual fund", "assets_word": "mutual funds",
        "goal": "a long-horizon growth mandate for the family trust",
    }),
    Scenario("foundation", "charitable foundation investing", {
        "investor": "a charitable foundation's investment board",
        "assets": [("Osprey Mining", 3), ("Heron Water", 1), ("Wren Telecom", 2), ("Kestrel Aerospace", 3),
                   ("Plover Bank", 2), ("Finch Grocers", 1), ("Condor Biotech", 3), ("Swift Freight", 2),
                   ("Falcon Semiconductors", 3), ("Robin Power", 1), ("Egret Reinsurance", 2)],
        "asset": "listed company", "assets_word": "listed companies",
        "goal": "a focused sleeve of listed shares for its grant reserve",
    }),
)

MARKET_LOADING = {1: (2, 5), 2: (5, 9), 3: (9, 14)}
OWN_VARIANCE = {1: (5, 40), 2: (30, 120), 3: (80, 250)}


class PortfolioQP(ProblemFamily):
    name = "portfolio_qp"
    title = "Mean-variance portfolio"
    problem_type = "QP"
    sense = "min"
    scenarios = SCENARIOS
    eval_scenarios = EVAL_SCENARIOS
    domains = {"weight": "nonnegative"}
    # eval-only rewordings of the family's fixed sentences (training keeps its text; data_synth.statements)
    phrasings = (
        Phrasing(r"\bis building\b", ("is building",), ("is assembling", "is putting together")),
        # the eval scenarios' lists of names without a colon, so the statement's first sentence ends after them
        Phrasing(r"\bmutual funds:(?= )", ("mutual funds:",), ("mutual funds, namely",)),
        Phrasing(r"\blisted companies:(?= )", ("listed companies:",), ("listed companies, namely",)),
        # a rule never takes in a phrase the generic lexicon words two ways in training ("is allowed", "at
        # least", "at most", "may not exceed", "keyed by"), so training keeps its choices there
        Phrasing(r"\bThe whole budget must be invested, no short selling\b",
                 ("The whole budget must be invested, no short selling",),
                 ("All of the capital has to be invested and only a long position in each asset",
                  "Every part of the capital goes into the portfolio and only a long (non-negative) holding of "
                  "each asset")),
        Phrasing(r", and the portfolio's expected annual return must be\b",
                 (", and the portfolio's expected annual return must be",),
                 ("; the expected yearly return of the portfolio has to be",
                  ", while the portfolio's expected return per year has to be")),
        Phrasing(r"\bTo stay diversified, no\b", ("To stay diversified, no",),
                 ("For the sake of diversification, no single", "To keep the risk spread out, no single")),
        Phrasing(r"\bmay receive more than a fraction\b", ("may receive more than a fraction",),
                 ("can be allotted in excess of a fraction", "may be allocated more than a fraction")),
        Phrasing(r"\bof the budget\b", ("of the budget",), ("of the capital",)),
        Phrasing(r"\bThe high-risk\b", ("The high-risk",), ("Those high-risk", "As for risk, the high-risk")),
        Phrasing(r"\bmay together receive\b", ("may together receive",),
                 ("can jointly hold", "can between them be given")),
        Phrasing(r"\bThe portfolio is rebalanced from the current holdings: the total fraction of the budget bought "
                 r"plus sold \(the turnover\)",
                 ("The portfolio is rebalanced from the current holdings: the total fraction of the budget bought "
                  "plus sold (the turnover)",),
                 ("This is a rebalancing of the holdings as they stand today: their turnover, the fraction of the "
                  "capital bought plus the fraction sold,",
                  "The holdings of today are rebalanced, and the turnover (every fraction of the capital bought, "
                  "plus every fraction sold)")),
        Phrasing(r"\bCurrent fractions:", ("Current fractions:",),
                 ("Fractions held today:", "Present holdings, as fractions:")),
        Phrasing(r"\bWhat fraction of the budget should go to each\b",
                 ("What fraction of the budget should go to each",),
                 ("Which share of the capital ought to be placed in each",
                  "How large a fraction of the capital should be put into each")),
        Phrasing(r"\btimes the variance of the portfolio's annual return \(in percent squared\) minus its "
                 r"expected annual return \(in percent\)\?",
                 ("times the variance of the portfolio's annual return (in percent squared) minus its expected "
                  "annual return (in percent)?",),
                 ("times the portfolio's return variance per year (in percent squared), less its expected yearly "
                  "return (in percent)?",
                  "times the yearly variance of the portfolio (in percent squared), after subtracting its expected "
                  "yearly return (in percent)?")),
        Phrasing(r"\bReport the minimum of that risk-adjusted objective\.",
                 ("Report the minimum of that risk-adjusted objective.",),
                 ("Give the smallest value this risk-adjusted objective can take.",
                  "State the lowest attainable value of that risk-adjusted objective.")),
        Phrasing(r"\bto minimize the variance of the portfolio's annual return\?",
                 ("to minimize the variance of the portfolio's annual return?",),
                 ("so that the variance of the portfolio's yearly return is as small as possible?",
                  "so as to keep the variance of the yearly portfolio return at its minimum?")),
        Phrasing(r"\bReport the minimum variance in percent squared \(%\^2\)\.",
                 ("Report the minimum variance in percent squared (%^2).",),
                 ("Give that smallest variance in percent squared (%^2).",
                  "State the least variance attainable, in percent squared (%^2).")),
        Phrasing(r"\bExpected annual returns:", ("Expected annual returns:",),
                 ("Expected yearly returns:", "Expected returns per year:")),
        Phrasing(r"\bVariances of annual returns \(in %\^2\):", ("Variances of annual returns (in %^2):",),
                 ("Variances of the yearly returns (in %^2):", "Variance of each yearly return (in %^2):")),
        Phrasing(r"\bCovariances between pairs \(in %\^2\):", ("Covariances between pairs (in %^2):",),
                 ("Pairwise covariances (in %^2):", "Covariance of each pair (in %^2):")),
        Phrasing(r"\bexpected return \(%\)", ("expected return (%)",), ("expected yearly return (%)",)),
        Phrasing(r"\bcovariance \(%\^2\)", ("covariance (%^2)",), ("covariances (%^2)",)),
        # the data.json field descriptions
        Phrasing(r"\bexpected annual return of each asset in percent,", ("expected annual return of each asset in percent,",),
                 ("expected yearly return, in percent, of every asset,",)),
        Phrasing(r"\bcovariance of the annual returns of a and b, in percent squared\b",
                 ("covariance of the annual returns of a and b, in percent squared",),
                 ("covariance between the yearly returns of a and b, in percent squared",)),
        Phrasing(r"\bminimum expected annual return of the portfolio, in percent\b",
                 ("minimum expected annual return of the portfolio, in percent",),
                 ("lowest acceptable expected yearly return of the portfolio, in percent",)),
        Phrasing(r"\bweight of the variance in the objective, which minimizes risk_aversion \* variance minus the "
                 r"expected return \(only when the objective trades risk against return\)",
                 ("weight of the variance in the objective, which minimizes risk_aversion * variance minus the "
                  "expected return (only when the objective trades risk against return)",),
                 ("factor on the variance in an objective that is minimized, risk_aversion * variance less the "
                  "expected return (present if risk is traded against return)",)),
        Phrasing(r"\blargest fraction of the budget any one asset may receive \(only when there is a cap\)",
                 ("largest fraction of the budget any one asset may receive (only when there is a cap)",),
                 ("ceiling on the fraction of the capital a single asset can get (present if such a cap "
                  "applies)",)),
        Phrasing(r"\blist of the high-risk assets \(only when their combined share is capped\)",
                 ("list of the high-risk assets (only when their combined share is capped)",),
                 ("names of the high-risk assets (present if their joint share has a ceiling)",)),
        Phrasing(r"\blargest combined fraction of the budget in the high-risk assets \(only when\b",
                 ("largest combined fraction of the budget in the high-risk assets (only when",),
                 ("ceiling on the joint fraction of the capital held in high-risk assets (present if",)),
        Phrasing(r"\bfraction of the budget each asset holds now,", ("fraction of the budget each asset holds now,",),
                 ("share of the capital in every asset today,",)),
        Phrasing(r"\(only when the portfolio is rebalanced\)", ("(only when the portfolio is rebalanced)",),
                 ("(present if the holdings are rebalanced)",)),
        Phrasing(r"\bmost total fraction of the budget bought plus sold \(only when\b",
                 ("most total fraction of the budget bought plus sold (only when",),
                 ("ceiling on the fractions of the capital bought and sold, summed (present if",)),
        Phrasing(r"\bis given\)", ("is given)",), ("is there)",)),
    )
    data_fields = {
        "assets": "list of asset names",
        "expected_return": "expected annual return of each asset in percent, keyed by asset",
        "covariance": "covariance[a][b]: covariance of the annual returns of a and b, in percent squared",
        "target_return": "minimum expected annual return of the portfolio, in percent",
        "risk_aversion": "weight of the variance in the objective, which minimizes risk_aversion * variance minus "
                         "the expected return (only when the objective trades risk against return)",
        "max_weight": "largest fraction of the budget any one asset may receive (only when there is a cap)",
        "high_risk": "list of the high-risk assets (only when their combined share is capped)",
        "max_high_risk": "largest combined fraction of the budget in the high-risk assets (only when `high_risk` "
                         "is given)",
        "current_weight": "fraction of the budget each asset holds now, keyed by asset (only when the portfolio "
                          "is rebalanced)",
        "max_turnover": "most total fraction of the budget bought plus sold (only when `current_weight` is given)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
assets = data["assets"]
model.weight = pyo.Var(assets, domain=pyo.NonNegativeReals)  # fraction of the budget in each asset
'''
    _VARIANCE = '''\

# variance of the portfolio's annual return (percent squared)
model.obj = pyo.Objective(
    expr=sum(data["covariance"][a][b] * model.weight[a] * model.weight[b] for a in assets for b in assets),
    sense=pyo.minimize,
)
'''
    _TRADE_OFF = '''\

# risk against return: the variance (percent squared), weighted by the risk aversion, minus the expected return
variance = sum(data["covariance"][a][b] * model.weight[a] * model.weight[b] for a in assets for b in assets)
expected = sum(data["expected_return"][a] * model.weight[a] for a in assets)
model.obj = pyo.Objective(expr=data["risk_aversion"] * variance - expected, sense=pyo.minimize)
'''
    _BUDGET = '''\

model.budget = pyo.Constraint(expr=sum(model.weight[a] for a in assets) == 1)
'''
    _TARGET = '''\
model.target = pyo.Constraint(
    expr=sum(data["expected_return"][a] * model.weight[a] for a in assets) >= data["target_return"]
)
'''
    _CAP = '''\
model.cap = pyo.Constraint(assets, rule=lambda model, a: model.weight[a] <= data["max_weight"])
'''
    _HIGH_RISK = '''\
model.high_risk = pyo.Constraint(expr=sum(model.weight[a] for a in data["high_risk"]) <= data["max_high_risk"])
'''
    _TURNOVER = '''\

# rebalancing: trade[a] is at least the change |weight - current weight| of each asset
model.trade = pyo.Var(assets, domain=pyo.NonNegativeReals)
model.bought = pyo.Constraint(assets, rule=lambda model, a: model.trade[a]
                              >= model.weight[a] - data["current_weight"][a])
model.sold = pyo.Constraint(assets, rule=lambda model, a: model.trade[a]
                            >= data["current_weight"][a] - model.weight[a])
model.turnover = pyo.Constraint(expr=sum(model.trade[a] for a in assets) <= data["max_turnover"])
'''

    model_code = _HEAD + _VARIANCE + _BUDGET + _TARGET  # the classic Markowitz model

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._TRADE_OFF if "risk_aversion" in data else self._VARIANCE) + self._BUDGET
        for key, piece in (("target_return", self._TARGET), ("max_weight", self._CAP),
                           ("high_risk", self._HIGH_RISK), ("current_weight", self._TURNOVER)):
            if key in data:
                code += piece
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("risk_aversion", "high_risk", "current_weight") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        if "current_weight" in data:
            return {"weight": "nonnegative", "trade": "nonnegative"}
        return self.domains

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        n_assets = size_for(difficulty, 3, 5, 11)
        chosen = scenario.words["assets"][:n_assets]
        assets = [name for name, _ in chosen]
        # covariance from a factor model with integer loadings: F F' + diag(s) is positive definite
        # and its entries are whole numbers of percent squared
        market = [rng.randint(*MARKET_LOADING[tier]) for _, tier in chosen]
        sector = [rng.randint(-4, 6) for _ in assets] if n_assets >= 5 else [0] * n_assets
        own = [rng.randint(*OWN_VARIANCE[tier]) for _, tier in chosen]
        covariance = {a: {b: market[i] * market[j] + sector[i] * sector[j] + (own[i] if i == j else 0)
                          for j, b in enumerate(assets)} for i, a in enumerate(assets)}
        # riskier assets tend to earn more
        expected = {a: round(1.5 + 0.55 * market[i] + rng.uniform(-1.0, 1.5), 1) for i, a in enumerate(assets)}
        data = {"assets": assets, "expected_return": expected, "covariance": covariance}
        if n_assets >= 5:
            data["max_weight"] = 0.4 if n_assets == 5 else 0.3
        risky = [name for name, tier in chosen if tier == 3]
        room = (n_assets - len(risky)) * data.get("max_weight", 1.0)  # what the other assets can hold
        if rng.random() < 0.5 and risky and room >= 0.7:
            data["high_risk"] = risky
            data["max_high_risk"] = rng.choice([0.3, 0.35, 0.4, 0.45, 0.5])
        best = self._highest_return(data)
        lowest = min(expected.values())
        if rng.random() < 0.5:
            # risk is traded against return in the objective; the return target stays as a lower floor
            data["risk_aversion"] = rng.choice([0.02, 0.03, 0.05, 0.08, 0.1])
            share = rng.uniform(0.1, 0.4)
        else:
            share = rng.uniform(0.5, 0.85)
        data["target_return"] = min(round(lowest + share * (best - lowest), 1), int(best * 10) / 10)
        if rng.random() < 0.5:
            # the current portfolio is the highest-return one (it meets every limit and any target), held by an
            # aggressive mandate; rebalancing is limited
            data["current_weight"] = self._highest_return_weights(data)
            data["max_turnover"] = rng.choice([0.2, 0.3, 0.4, 0.5, 0.6])
        return data

    @staticmethod
    def _highest_return_weights(data: dict) -> dict[str, float]:
        """The portfolio of the largest expected return within the per-asset and high-risk caps: fill the
        best assets first (greedy is optimal: the caps are nested)."""
        cap = data.get("max_weight", 1.0)
        risky = set(data.get("high_risk", ()))
        left, risky_left = 1.0, data.get("max_high_risk", 1.0)
        weights = {}
        for a in sorted(data["assets"], key=lambda a: (-data["expected_return"][a], data["assets"].index(a))):
            share = min(cap, left, risky_left if a in risky else 1.0)
            weights[a] = round(share, 6)
            left -= share
            if a in risky:
                risky_left -= share
        return {a: weights[a] for a in data["assets"]}

    @classmethod
    def _highest_return(cls, data: dict) -> float:
        """The largest expected return any portfolio reaches within the caps."""
        weights = cls._highest_return_weights(data)
        return sum(data["expected_return"][a] * w for a, w in weights.items())

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a return target above what any allowed portfolio can earn
        return {**data, "target_return": round(self._highest_return(data) + rng.choice([0.5, 1.0, 1.5]), 1)}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        assets = data["assets"]
        upper = data.get("max_weight", 1.0)
        aversion = data.get("risk_aversion")
        column = {a: matrix.add_var(f"weight[{a}]", 0.0, upper,
                                    cost=0.0 if aversion is None else -data["expected_return"][a]) for a in assets}
        # objective k w' S w = 1/2 w' (2 k S) w (k = 1 without a trade-off); add_quadratic(i, j, v) adds v to
        # both Q[i, j] and Q[j, i]
        scale = 2.0 * (1.0 if aversion is None else aversion)
        for i, a in enumerate(assets):
            matrix.add_quadratic(column[a], column[a], scale * data["covariance"][a][a])
            for b in assets[i + 1:]:
                matrix.add_quadratic(column[a], column[b], scale * data["covariance"][a][b])
        matrix.add_row({column[a]: 1.0 for a in assets}, lower=1.0, upper=1.0, name="budget")
        if "target_return" in data:
            matrix.add_row({column[a]: data["expected_return"][a] for a in assets}, lower=data["target_return"],
                           name="target")
        if "high_risk" in data:
            matrix.add_row({column[a]: 1.0 for a in data["high_risk"]}, upper=data["max_high_risk"], name="high_risk")
        if "current_weight" in data:
            # t_a >= |w_a - w0_a| as two rows: w_a - t_a <= w0_a and w_a + t_a >= w0_a
            traded = {a: matrix.add_var(f"trade[{a}]") for a in assets}
            for a in assets:
                current = data["current_weight"][a]
                matrix.add_row({column[a]: 1.0, traded[a]: -1.0}, upper=current, name=f"bought[{a}]")
                matrix.add_row({column[a]: 1.0, traded[a]: 1.0}, lower=current, name=f"sold[{a}]")
            matrix.add_row({traded[a]: 1.0 for a in assets}, upper=data["max_turnover"], name="turnover")

    def constraint_rows(self, data: dict, x: dict):
        weight = x["weight"]
        yield Row("budget", sum(weight.values()), "==", 1)
        if "target_return" in data:
            yield Row("target", sum(data["expected_return"][a] * weight[a] for a in data["assets"]), ">=",
                      data["target_return"])
        if "max_weight" in data:
            for a in data["assets"]:
                yield Row(f"cap[{a}]", weight[a], "<=", data["max_weight"])
        if "high_risk" in data:
            yield Row("high_risk", sum(weight[a] for a in data["high_risk"]), "<=", data["max_high_risk"])
        if "current_weight" in data:
            trade = x["trade"]
            for a in data["assets"]:
                yield Row(f"bought[{a}]", trade[a] - weight[a], ">=", -data["current_weight"][a])
                yield Row(f"sold[{a}]", trade[a] + weight[a], ">=", data["current_weight"][a])
            yield Row("turnover", sum(trade[a] for a in data["assets"]), "<=", data["max_turnover"])

    def variance(self, data: dict, x: dict) -> float:
        weight = x["weight"]
        return sum(data["covariance"][a][b] * weight[a] * weight[b] for a in data["assets"] for b in data["assets"])

    def objective_value(self, data: dict, x: dict) -> float:
        if "risk_aversion" not in data:
            return self.variance(data, x)
        expected = sum(data["expected_return"][a] * x["weight"][a] for a in data["assets"])
        return data["risk_aversion"] * self.variance(data, x) - expected

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        assets, asset = data["assets"], words["asset"]
        target = ""
        if "target_return" in data:
            target = f", and the portfolio's expected annual return must be at least {fmt(data['target_return'])}%"
        intro = (f"{words['investor'].capitalize()} is building {words['goal']} from {len(assets)} {words['assets_word']}: "
                 f"{join_names(assets)}. The whole budget must be invested, no short selling is allowed{target}.")
        if "max_weight" in data:
            intro += (f" To stay diversified, no {asset} may receive more than a fraction "
                      f"{fmt(data['max_weight'])} of the budget.")
        if "high_risk" in data:
            intro += (f" The high-risk {words['assets_word']} ({join_names(data['high_risk'])}) may together receive "
                      f"at most a fraction {fmt(data['max_high_risk'])} of the budget.")
        if "current_weight" in data:
            intro += (" The portfolio is rebalanced from the current holdings: the total fraction of the budget "
                      f"bought plus sold (the turnover) may not exceed {fmt(data['max_turnover'])}.")
            if representation != "file":
                intro += " Current fractions: " + ", ".join(
                    f"{a} {fmt(w)}" for a, w in data["current_weight"].items()) + "."
        if "risk_aversion" in data:
            question = (f"What fraction of the budget should go to each {asset} to minimize {fmt(data['risk_aversion'])} "
                        "times the variance of the portfolio's annual return (in percent squared) minus its expected "
                        "annual return (in percent)? Report the minimum of that risk-adjusted objective.")
        else:
            question = (f"What fraction of the budget should go to each {asset} to minimize the variance of the "
                        f"portfolio's annual return? Report the minimum variance in percent squared (%^2).")
        if representation == "text":
            returns = ", ".join(f"{a} {fmt(data['expected_return'][a])}%" for a in assets)
            variances = ", ".join(f"{a} {fmt(data['covariance'][a][a])}" for a in assets)
            pairs = ", ".join(f"{a} and {b}: {fmt(data['covariance'][a][b])}"
                              for i, a in enumerate(assets) for b in assets[i + 1:])
            return (f"{intro} Expected annual returns: {returns}. Variances of annual returns (in %^2): "
                    f"{variances}. Covariances between pairs (in %^2): {pairs}. {question}")
        if representation == "table":
            returns = markdown_table([asset, "expected return (%)"], [[a, data["expected_return"][a]]
                                                                      for a in assets])
            covariance = markdown_table(["covariance (%^2)", *assets],
                                        [[a, *[data["covariance"][a][b] for b in assets]] for a in assets])
            return f"{intro}\n\n{returns}\n\n{covariance}\n\n{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        weight = x["weight"]
        held = [(a, weight[a]) for a in data["assets"] if weight[a] > 1e-6]
        expected = sum(data["expected_return"][a] * w for a, w in held)
        variance = self.variance(data, x)
        lines = [f"- {a}: {fmt(round(100 * w, 2))}% of the budget" for a, w in held]
        return ("\n".join(lines) + f"\n\nExpected return {fmt(round(expected, 4))}%, variance "
                f"{fmt(round(variance, 4))} %^2 (standard deviation {fmt(round(variance ** 0.5, 3))}%).")

    def formulation(self, data: dict) -> str:
        parameters = "expected return $\\mu_a$ (%), covariance $\\Sigma_{ab}$ (%$^2$)"
        variables = "$w_a \\ge 0$, fraction of the budget invested in asset $a$"
        variance = "\\sum_{a \\in A}\\sum_{b \\in A} \\Sigma_{ab} w_a w_b"
        if "risk_aversion" in data:
            parameters += ", risk aversion $\\lambda$"
            objective = f"\\lambda {variance} - \\sum_{{a \\in A}} \\mu_a w_a"
        else:
            objective = variance
        rows = ["\\text{s.t.}\\ & \\sum_{a \\in A} w_a = 1"]
        if "target_return" in data:
            parameters += ", target return $R$"
            rows.append("& \\sum_{a \\in A} \\mu_a w_a \\ge R")
        if "max_weight" in data:
            parameters += ", weight cap $u$"
            rows.append("& w_a \\le u && \\forall a \\in A")
        sets = "assets $A$"
        if "high_risk" in data:
            sets += ", high-risk assets $H \\subseteq A$"
            parameters += ", high-risk cap $h$"
            rows.append("& \\sum_{a \\in H} w_a \\le h")
        if "current_weight" in data:
            parameters += ", current weights $w^0_a$, turnover limit $T$"
            variables += "; $t_a \\ge 0$, fraction of the budget traded in asset $a$"
            rows += ["& t_a \\ge w_a - w^0_a,\\ t_a \\ge w^0_a - w_a && \\forall a \\in A",
                     "& \\sum_{a \\in A} t_a \\le T"]
        rows.append("& w_a \\ge 0 && \\forall a \\in A")
        return (
            f"**Sets**: {sets}.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"
        )


FAMILY = PortfolioQP()
