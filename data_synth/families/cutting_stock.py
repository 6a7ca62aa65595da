"""Cutting stock with given patterns (IP): choose how many stock rolls (boards, coils) to cut with each
of a given set of cutting patterns so that every ordered piece size is produced in the required
quantity, using as few stock rolls as possible.

Structure variants (drawn per instance, recorded by the keys present): a limit on surplus pieces per size
(`max_surplus`: the order rows become ranges), a limit on the stock on hand (`stock_available`), and a
costed plan (`stock_cost`, `setup_cost`: the objective adds a knife-setting cost per pattern used, through a
binary variable linked to the cuts). Each is present or absent, so the program has eight skeletons."""

from __future__ import annotations

import math
import random

from data_synth.family import (
    INF,
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
    Scenario("paper", "paper converting", {
        "company": "a paper mill", "stock": "jumbo roll", "piece": "customer roll", "measure": "width",
        "unit": "cm", "stock_range": (180, 260), "piece_share": (0.12, 0.45), "cut": "slit",
        "stock_cost_range": (600, 1400),
    }),
    Scenario("steel", "steel service centre", {
        "company": "a steel service centre", "stock": "master coil", "piece": "strip", "measure": "width",
        "unit": "mm", "stock_range": (1200, 1600), "piece_share": (0.12, 0.45), "cut": "slit",
        "stock_cost_range": (4000, 9000),
    }),
    Scenario("lumber", "timber yard", {
        "company": "a timber yard", "stock": "standard board", "piece": "board piece", "measure": "length",
        "unit": "cm", "stock_range": (360, 600), "piece_share": (0.15, 0.48), "cut": "cut",
        "stock_cost_range": (8, 40),
    }),
)


def maximal_patterns(widths: list[int], stock: int) -> list[tuple[int, ...]]:
    """Every way to cut pieces from one stock item such that no further piece fits (counts per width)."""
    patterns: list[tuple[int, ...]] = []

    def extend(k: int, counts: list[int], remaining: int) -> None:
        if k == len(widths):
            if remaining < min(widths) and any(counts):
                patterns.append(tuple(counts))
            return
        for count in range(remaining // widths[k], -1, -1):
            counts.append(count)
            extend(k + 1, counts, remaining - count * widths[k])
            counts.pop()

    extend(0, [], stock)
    return patterns


class CuttingStock(ProblemFamily):
    name = "cutting_stock"
    title = "Cutting stock with given patterns"
    problem_type = "IP"
    sense = "min"
    scenarios = SCENARIOS
    domains = {"cut": "nonnegative_integer"}
    data_fields = {
        "stock_size": "size (width or length) of one stock item",
        "pieces": "list of ordered piece names",
        "piece_size": "size of each ordered piece, keyed by piece",
        "demand": "number of pieces ordered, keyed by piece",
        "patterns": "list of cutting pattern names",
        "pattern_yield": "pattern_yield[pattern][piece]: pieces of that kind one stock item cut with the "
                         "pattern gives (pieces not listed: none)",
        "max_surplus": "most pieces made beyond the order, keyed by piece (only when surplus is limited)",
        "stock_available": "number of stock items on hand (only when the stock is limited)",
        "stock_cost": "cost of one stock item in dollars (only when the plan is costed)",
        "setup_cost": "cost in dollars of setting up the knives for a pattern that is used at all (only when the "
                      "plan is costed)",
    }
    # the pieces of `model_code_for`; each optional piece is used when its key is present
    _HEAD = '''\
model = pyo.ConcreteModel()
model.cut = pyo.Var(data["patterns"], domain=pyo.NonNegativeIntegers)  # stock items cut with each pattern
'''
    _OBJECTIVE = '''\

model.obj = pyo.Objective(expr=sum(model.cut[k] for k in data["patterns"]), sense=pyo.minimize)
'''
    _OBJECTIVE_SETUP = '''\
model.used = pyo.Var(data["patterns"], domain=pyo.Binary)  # 1 when the knives are set for the pattern

model.obj = pyo.Objective(
    expr=sum(data["stock_cost"] * model.cut[k] + data["setup_cost"] * model.used[k] for k in data["patterns"]),
    sense=pyo.minimize,
)

# a pattern is cut only once its knives are set; no optimal plan cuts it more often than it takes to fill,
# with that pattern alone, every order it serves
def most_cuts(k):
    return max(-(-data["demand"][piece] // n) for piece, n in data["pattern_yield"][k].items())

model.setup = pyo.Constraint(
    data["patterns"], rule=lambda model, k: model.cut[k] <= most_cuts(k) * model.used[k]
)
'''
    _ORDERS = '''\

def produced(model, piece):
    return sum(data["pattern_yield"][k].get(piece, 0) * model.cut[k] for k in data["patterns"])

# enough pieces of every ordered size (surplus pieces are allowed)
model.meet_order = pyo.Constraint(
    data["pieces"], rule=lambda model, piece: produced(model, piece) >= data["demand"][piece]
)
'''
    _SURPLUS = '''\
model.max_surplus = pyo.Constraint(
    data["pieces"],
    rule=lambda model, piece: produced(model, piece) <= data["demand"][piece] + data["max_surplus"][piece],
)
'''
    _STOCK = '''\
model.stock = pyo.Constraint(expr=sum(model.cut[k] for k in data["patterns"]) <= data["stock_available"])
'''

    model_code = _HEAD + _OBJECTIVE + _ORDERS  # the plain model: fewest stock items, surplus allowed

    def model_code_for(self, data: dict) -> str:
        code = self._HEAD + (self._OBJECTIVE_SETUP if "setup_cost" in data else self._OBJECTIVE) + self._ORDERS
        if "max_surplus" in data:
            code += self._SURPLUS
        if "stock_available" in data:
            code += self._STOCK
        return code

    def variant_of(self, data: dict) -> str:
        parts = [name for name in ("max_surplus", "stock_available", "setup_cost") if name in data]
        return "+".join(parts) or "base"

    def domains_for(self, data: dict) -> dict[str, str]:
        if "setup_cost" in data:
            return {"cut": "nonnegative_integer", "used": "binary"}
        return self.domains

    @staticmethod
    def most_cuts(data: dict, pattern: str) -> int:
        """The stock items cut with `pattern` after which it alone has filled every order it serves."""
        return max(math.ceil(data["demand"][p] / n) for p, n in data["pattern_yield"][pattern].items())

    def sample(self, rng: random.Random, difficulty: str, scenario: Scenario) -> dict:
        words = scenario.words
        n_pieces = size_for(difficulty, 3, 4, 5)
        n_patterns = size_for(difficulty, 5, 8, 12)
        low, high = words["stock_range"]
        stock = rng.randrange(low, high + 1, 10)
        sizes: list[int] = []
        while len(sizes) < n_pieces:
            size = int(stock * rng.uniform(*words["piece_share"]))
            if size not in sizes:
                sizes.append(size)
        sizes.sort(reverse=True)
        candidates = maximal_patterns(sizes, stock)
        # one single-size pattern per piece keeps every order producible; the rest are mixed patterns
        single = [tuple(stock // sizes[k] if j == k else 0 for j in range(n_pieces)) for k in range(n_pieces)]
        mixed = [p for p in candidates if sum(1 for c in p if c) > 1]
        chosen = single + rng.sample(mixed, min(len(mixed), n_patterns - n_pieces))
        pieces = [f"{fmt(s)} {words['unit']}" for s in sizes]
        patterns = [f"pattern {k + 1}" for k in range(len(chosen))]
        pattern_yield = {name: {pieces[j]: count for j, count in enumerate(counts) if count}
                         for name, counts in zip(patterns, chosen, strict=True)}
        # the order book is what some cutting plan produces exactly (plus nothing), so orders can be met
        # without surplus by at least one plan and the order constraints tend to bind at the optimum
        plan = [rng.randint(0, 25) for _ in chosen]
        for j in range(n_pieces):  # every piece is ordered: its single-size pattern cuts it when nothing else does
            if not any(counts[j] * n for counts, n in zip(chosen, plan, strict=True)):
                plan[j] = 1
        demand = {piece: sum(counts[j] * n for counts, n in zip(chosen, plan, strict=True))
                  for j, piece in enumerate(pieces)}
        data = {"stock_size": stock, "pieces": pieces, "piece_size": dict(zip(pieces, sizes, strict=True)),
                "demand": demand, "patterns": patterns, "pattern_yield": pattern_yield}
        # every variant keeps the reference plan feasible: it makes no surplus and uses sum(plan) stock items
        if rng.random() < 0.5:
            data["max_surplus"] = {piece: rng.randint(0, 4) for piece in pieces}
        if rng.random() < 0.5:
            data["stock_available"] = sum(plan)
        if rng.random() < 0.5:
            stock_cost = rng.randrange(*words["stock_cost_range"])
            data["stock_cost"] = stock_cost
            data["setup_cost"] = max(1, round(stock_cost * rng.uniform(1.0, 6.0)))
        return data

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # fewer stock items on hand than the total ordered size needs even with zero waste
        needed = math.ceil(sum(data["piece_size"][p] * data["demand"][p] for p in data["pieces"])
                           / data["stock_size"])
        return {**data, "stock_available": needed - 1}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        costed = "setup_cost" in data
        column = {k: matrix.add_var(f"cut[{k}]", cost=data["stock_cost"] if costed else 1.0, integer=True)
                  for k in data["patterns"]}
        for piece in data["pieces"]:
            coefficients = {column[k]: data["pattern_yield"][k][piece] for k in data["patterns"]
                            if piece in data["pattern_yield"][k]}
            upper = data["demand"][piece] + data["max_surplus"][piece] if "max_surplus" in data else INF
            matrix.add_row(coefficients, lower=data["demand"][piece], upper=upper, name=f"meet_order[{piece}]")
        if "stock_available" in data:
            matrix.add_row({c: 1.0 for c in column.values()}, upper=data["stock_available"], name="stock")
        if costed:
            for k in data["patterns"]:
                used = matrix.add_var(f"used[{k}]", 0.0, 1.0, cost=data["setup_cost"], integer=True)
                matrix.add_row({column[k]: 1.0, used: -float(self.most_cuts(data, k))}, upper=0.0,
                               name=f"setup[{k}]")

    def constraint_rows(self, data: dict, x: dict):
        cut = x["cut"]
        for k in data["patterns"]:
            # a given pattern must fit on one stock item
            used = sum(data["piece_size"][p] * n for p, n in data["pattern_yield"][k].items())
            yield Row(f"pattern_fits[{k}]", used, "<=", data["stock_size"])
        for piece in data["pieces"]:
            produced = sum(data["pattern_yield"][k].get(piece, 0) * cut[k] for k in data["patterns"])
            yield Row(f"meet_order[{piece}]", produced, ">=", data["demand"][piece])
            if "max_surplus" in data:
                yield Row(f"max_surplus[{piece}]", produced, "<=", data["demand"][piece] + data["max_surplus"][piece])
        if "stock_available" in data:
            yield Row("stock", sum(cut.values()), "<=", data["stock_available"])
        if "setup_cost" in data:
            for k in data["patterns"]:
                yield Row(f"setup[{k}]", cut[k] - self.most_cuts(data, k) * x["used"][k], "<=", 0)

    def objective_value(self, data: dict, x: dict) -> float:
        if "setup_cost" in data:
            return sum(data["stock_cost"] * x["cut"][k] + data["setup_cost"] * x["used"][k] for k in data["patterns"])
        return sum(x["cut"][k] for k in data["patterns"])

    def _pattern_text(self, data: dict, pattern: str) -> str:
        return " + ".join(f"{fmt(n)} x {p}" for p, n in data["pattern_yield"][pattern].items())

    def render_statement(self, data: dict, scenario: Scenario, representation: str) -> str:
        words = scenario.words
        stock, piece, unit, measure = words["stock"], words["piece"], words["unit"], words["measure"]
        intro = {
            "paper": f"{words['company'].capitalize()} slits {stock}s {fmt(data['stock_size'])} {unit} wide into "
                     f"narrower {piece}s for its customers.",
            "steel": f"{words['company'].capitalize()} slits {stock}s of {fmt(data['stock_size'])} {unit} width "
                     f"into {piece}s for this week's orders.",
            "lumber": f"{words['company'].capitalize()} cuts {stock}s of length {fmt(data['stock_size'])} {unit} "
                      f"into shorter {piece}s for a building contractor.",
        }[scenario.key]
        where = "given in the data" if representation == "file" else "listed below"
        surplus = "within a limit per size" if "max_surplus" in data else "allowed"
        rule = (f"The planners only use the cutting patterns {where} (each names how many {piece}s of each "
                f"{measure} one {stock} yields); surplus {piece}s are {surplus}.")
        limit = ""
        if "max_surplus" in data and representation == "text":
            limit += (" Surplus is limited: at most " + ", ".join(
                f"{fmt(data['max_surplus'][p])} extra pieces of {fmt(data['piece_size'][p])} {unit}"
                for p in data["pieces"]) + " may be made beyond the order.")
        if "stock_available" in data:
            limit += (" The stock on hand is limited." if representation == "file"
                      else f" Only {fmt(data['stock_available'])} {stock}s are in stock.")
        if "setup_cost" in data:
            if representation == "file":
                limit += (f" Every {stock} has a cost, and setting the knives for a pattern costs a fixed amount "
                          "once if the pattern is used at all.")
            else:
                limit += (f" Every {stock} costs ${fmt(data['stock_cost'])}, and setting the knives for a pattern "
                          f"costs ${fmt(data['setup_cost'])}, paid once if the pattern is used at all.")
            question = (f"How many {stock}s should be {words['cut']} with each pattern to fill every order at the "
                        "lowest total cost of stock and knife settings? What is that minimum cost?")
        else:
            question = (f"How many {stock}s should be {words['cut']} with each pattern to fill every order, using "
                        f"the fewest {stock}s? What is the minimum number of {stock}s needed?")
        if representation == "text":
            orders = ", ".join(f"{fmt(data['demand'][p])} pieces of {fmt(data['piece_size'][p])} {unit}"
                               for p in data["pieces"])
            patterns = "; ".join(f"{k}: {self._pattern_text(data, k)}" for k in data["patterns"])
            return f"{intro} The orders are {orders}. {rule} Patterns: {patterns}.{limit} {question}"
        if representation == "table":
            header = [f"{piece} {measure} ({unit})", "pieces ordered"]
            if "max_surplus" in data:
                header.append("most surplus pieces")
            orders = markdown_table(header, [[data["piece_size"][p], data["demand"][p],
                                              *([data["max_surplus"][p]] if "max_surplus" in data else [])]
                                             for p in data["pieces"]])
            patterns = markdown_table(["pattern", *data["pieces"]],
                                      [[k, *[data["pattern_yield"][k].get(p, 0) for p in data["pieces"]]]
                                       for k in data["patterns"]])
            return f"{intro}{limit}\n\n{orders}\n\n{rule}\n\n{patterns}\n\n{question}"
        if representation == "file":
            fields = {key: meaning for key, meaning in self.data_fields.items()
                      if key in data or "(only when" not in meaning}
            return f"{intro} {rule}{limit}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        stock = scenario.words["stock"]
        used = [(k, round(x["cut"][k])) for k in data["patterns"] if x["cut"][k] > 0.5]
        lines = [f"- {k} ({self._pattern_text(data, k)}): {n} {stock}{'s' if n != 1 else ''}" for k, n in used]
        produced = [f"{p}: {sum(data['pattern_yield'][k].get(p, 0) * n for k, n in used)} made for "
                    f"{fmt(data['demand'][p])} ordered" for p in data["pieces"]]
        text = "\n".join(lines) + "\n\nPieces: " + "; ".join(produced) + "."
        if "setup_cost" in data:
            text += (f"\n\n{sum(n for _, n in used)} {stock}s and {len(used)} knife settings "
                     f"(patterns used).")
        return text

    def formulation(self, data: dict) -> str:
        costed = "setup_cost" in data
        parameters = "demand $d_i$, yield $a_{ik}$ (pieces $i$ from one stock item cut with pattern $k$)"
        rows = ["\\text{s.t.}\\ & \\sum_{k \\in K} a_{ik} x_k \\ge d_i && \\forall i \\in I"]
        if "max_surplus" in data:
            parameters += ", surplus limit $e_i$"
            rows.append("& \\sum_{k \\in K} a_{ik} x_k \\le d_i + e_i && \\forall i \\in I")
        if "stock_available" in data:
            parameters += ", stock on hand $U$"
            rows.append("& \\sum_{k \\in K} x_k \\le U \\quad\\text{(stock on hand)}")
        variables = "$x_k \\in \\mathbb{Z}_{\\ge 0}$, stock items cut with pattern $k$"
        if costed:
            parameters += (", stock cost $c$, knife setting cost $f$, "
                           "$M_k = \\max_{i: a_{ik} > 0} \\lceil d_i / a_{ik} \\rceil$")
            variables += "; $y_k \\in \\{0, 1\\}$, 1 when the knives are set for pattern $k$"
            objective = "c \\sum_{k \\in K} x_k + f \\sum_{k \\in K} y_k"
            rows.append("& x_k \\le M_k y_k && \\forall k \\in K")
        else:
            objective = "\\sum_{k \\in K} x_k"
        rows.append("& x_k \\in \\mathbb{Z}_{\\ge 0} && \\forall k \\in K")
        if costed:
            rows.append("& y_k \\in \\{0, 1\\} && \\forall k \\in K")
        return (
            "**Sets**: ordered pieces $I$, cutting patterns $K$.\n\n"
            f"**Parameters**: {parameters}.\n\n"
            f"**Variables**: {variables}.\n\n"
            f"$$\n\\begin{{aligned}}\n\\min\\ & {objective} \\\\\n" + " \\\\\n".join(rows)
            + "\n\\end{aligned}\n$$"
        )


FAMILY = CuttingStock()
