"""Mean-variance portfolio (convex QP, Markowitz): split a budget across assets to minimize the variance
of the portfolio's return, subject to a target expected return, full investment and, for larger
instances, a cap on the share of any one asset."""

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

# each asset has a risk tier (1 low, 2 medium, 3 high) so that, as in real markets, bonds are calmer
# than equities and riskier assets tend to earn more
SCENARIOS = (
    Scenario("pension", "pension fund management", {
        "investor": "a pension fund's investment committee",
        "assets": [("domestic equities", 3), ("government bonds", 1), ("real estate", 2),
                   ("international equities", 3), ("corporate bonds", 1), ("infrastructure", 2),
                   ("commodities", 3), ("private credit", 2)],
        "asset": "asset class", "assets_word": "asset classes", "goal": "the strategic allocation for next year",
    }),
    Scenario("robo", "retail wealth management", {
        "investor": "a robo-advisor",
        "assets": [("ETF-USA", 3), ("ETF-BONDS", 1), ("ETF-EUROPE", 3), ("ETF-TIPS", 1), ("ETF-REIT", 2),
                   ("ETF-GOLD", 2), ("ETF-ASIA", 3), ("ETF-CREDIT", 1)],
        "asset": "exchange-traded fund", "assets_word": "exchange-traded funds",
        "goal": "a model portfolio for its balanced clients",
    }),
    Scenario("endowment", "university endowment", {
        "investor": "a university endowment office",
        "assets": [("Alder Tech", 3), ("Elm Utilities", 1), ("Cedar Health", 2), ("Birch Energy", 3),
                   ("Fir Banking", 2), ("Dogwood Retail", 2), ("Ginkgo Pharma", 3), ("Hazel Logistics", 1)],
        "asset": "stock", "assets_word": "stocks", "goal": "a concentrated equity sleeve",
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
    domains = {"weight": "nonnegative"}
    data_fields = {
        "assets": "list of asset names",
        "expected_return": "expected annual return of each asset in percent, keyed by asset",
        "covariance": "covariance[a][b]: covariance of the annual returns of a and b, in percent squared",
        "target_return": "minimum expected annual return of the portfolio, in percent",
        "max_weight": "largest fraction of the budget any one asset may receive (absent: no cap)",
    }
    model_code = '''\
model = pyo.ConcreteModel()
assets = data["assets"]
model.weight = pyo.Var(assets, domain=pyo.NonNegativeReals)  # fraction of the budget in each asset

# variance of the portfolio's annual return (percent squared)
model.obj = pyo.Objective(
    expr=sum(data["covariance"][a][b] * model.weight[a] * model.weight[b] for a in assets for b in assets),
    sense=pyo.minimize,
)

model.budget = pyo.Constraint(expr=sum(model.weight[a] for a in assets) == 1)
model.target = pyo.Constraint(
    expr=sum(data["expected_return"][a] * model.weight[a] for a in assets) >= data["target_return"]
)
if "max_weight" in data:
    model.cap = pyo.Constraint(assets, rule=lambda model, a: model.weight[a] <= data["max_weight"])
'''

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        n_assets = size_for(difficulty, 3, 5, 8)
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
        best = self._highest_return(data)
        lowest = min(expected.values())
        data["target_return"] = min(round(lowest + rng.uniform(0.5, 0.85) * (best - lowest), 1),
                                    int(best * 10) / 10)
        return data

    @staticmethod
    def _highest_return(data: dict) -> float:
        """The largest expected return any portfolio reaches: fill the best assets up to the cap."""
        cap = data.get("max_weight", 1.0)
        left, total = 1.0, 0.0
        for a in sorted(data["assets"], key=lambda a: -data["expected_return"][a]):
            share = min(cap, left)
            total += share * data["expected_return"][a]
            left -= share
        return total

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # a return target above what any allowed portfolio can earn
        return {**data, "target_return": round(self._highest_return(data) + rng.choice([0.5, 1.0, 1.5]), 1)}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        assets = data["assets"]
        upper = data.get("max_weight", 1.0)
        column = {a: matrix.add_var(f"weight[{a}]", 0.0, upper) for a in assets}
        # objective w' S w = 1/2 w' (2 S) w; add_quadratic(i, j, v) adds v to both Q[i, j] and Q[j, i]
        for i, a in enumerate(assets):
            matrix.add_quadratic(column[a], column[a], 2.0 * data["covariance"][a][a])
            for b in assets[i + 1:]:
                matrix.add_quadratic(column[a], column[b], 2.0 * data["covariance"][a][b])
        matrix.add_row({column[a]: 1.0 for a in assets}, lower=1.0, upper=1.0, name="budget")
        matrix.add_row({column[a]: data["expected_return"][a] for a in assets}, lower=data["target_return"],
                       name="target")

    def constraint_rows(self, data: dict, x: dict):
        weight = x["weight"]
        yield Row("budget", sum(weight.values()), "==", 1)
        yield Row("target", sum(data["expected_return"][a] * weight[a] for a in data["assets"]), ">=",
                  data["target_return"])
        if "max_weight" in data:
            for a in data["assets"]:
                yield Row(f"cap[{a}]", weight[a], "<=", data["max_weight"])

    def objective_value(self, data: dict, x: dict) -> float:
        weight = x["weight"]
        return sum(data["covariance"][a][b] * weight[a] * weight[b] for a in data["assets"] for b in data["assets"])

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        assets, asset = data["assets"], words["asset"]
        intro = (f"{words['investor'].capitalize()} is building {words['goal']} from {len(assets)} {words['assets_word']}: "
                 f"{join_names(assets)}. The whole budget must be invested, no short selling is allowed, and the "
                 f"portfolio's expected annual return must be at least {fmt(data['target_return'])}%.")
        if "max_weight" in data:
            intro += (f" To stay diversified, no {asset} may receive more than a fraction "
                      f"{fmt(data['max_weight'])} of the budget.")
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
            fields = dict(self.data_fields)
            if "max_weight" not in data:
                del fields["max_weight"]
            return f"{intro}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        weight = x["weight"]
        held = [(a, weight[a]) for a in data["assets"] if weight[a] > 1e-6]
        expected = sum(data["expected_return"][a] * w for a, w in held)
        variance = self.objective_value(data, x)
        lines = [f"- {a}: {fmt(round(100 * w, 2))}% of the budget" for a, w in held]
        return ("\n".join(lines) + f"\n\nExpected return {fmt(round(expected, 4))}%, variance "
                f"{fmt(round(variance, 4))} %^2 (standard deviation {fmt(round(variance ** 0.5, 3))}%).")

    def formulation(self, data: dict) -> str:
        cap = ""
        if "max_weight" in data:
            cap = "& w_a \\le u && \\forall a \\in A \\\\\n"
        return (
            "**Sets**: assets $A$.\n\n"
            "**Parameters**: expected return $\\mu_a$ (%), covariance $\\Sigma_{ab}$ (%$^2$), target return $R$"
            + (", weight cap $u$" if cap else "") + ".\n\n"
            "**Variables**: $w_a \\ge 0$, fraction of the budget invested in asset $a$.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{a \\in A}\\sum_{b \\in A} \\Sigma_{ab} w_a w_b \\\\\n"
            "\\text{s.t.}\\ & \\sum_{a \\in A} w_a = 1 \\\\\n"
            "& \\sum_{a \\in A} \\mu_a w_a \\ge R \\\\\n" + cap +
            "& w_a \\ge 0 && \\forall a \\in A\n\\end{aligned}\n$$"
        )


FAMILY = PortfolioQP()
