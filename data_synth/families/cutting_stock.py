"""Cutting stock with given patterns (IP): choose how many stock rolls (boards, coils) to cut with each
of a given set of cutting patterns so that every ordered piece size is produced in the required
quantity, using as few stock rolls as possible."""

from __future__ import annotations

import math
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
    Scenario("paper", "paper converting", {
        "company": "a paper mill", "stock": "jumbo roll", "piece": "customer roll", "measure": "width",
        "unit": "cm", "stock_range": (180, 260), "piece_share": (0.12, 0.45), "cut": "slit",
    }),
    Scenario("steel", "steel service centre", {
        "company": "a steel service centre", "stock": "master coil", "piece": "strip", "measure": "width",
        "unit": "mm", "stock_range": (1200, 1600), "piece_share": (0.12, 0.45), "cut": "slit",
    }),
    Scenario("lumber", "timber yard", {
        "company": "a timber yard", "stock": "standard board", "piece": "board piece", "measure": "length",
        "unit": "cm", "stock_range": (360, 600), "piece_share": (0.15, 0.48), "cut": "cut",
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
    }
    model_code = '''\
model = pyo.ConcreteModel()
model.cut = pyo.Var(data["patterns"], domain=pyo.NonNegativeIntegers)  # stock items cut with each pattern

model.obj = pyo.Objective(expr=sum(model.cut[k] for k in data["patterns"]), sense=pyo.minimize)

# enough pieces of every ordered size (surplus pieces are allowed)
def meet_order(model, piece):
    produced = sum(data["pattern_yield"][k].get(piece, 0) * model.cut[k] for k in data["patterns"])
    return produced >= data["demand"][piece]

model.meet_order = pyo.Constraint(data["pieces"], rule=meet_order)

# stock on hand, when the instance limits it
if "stock_available" in data:
    model.stock = pyo.Constraint(expr=sum(model.cut[k] for k in data["patterns"]) <= data["stock_available"])
'''

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
        demand = {piece: max(1, sum(counts[j] * n for counts, n in zip(chosen, plan, strict=True)))
                  for j, piece in enumerate(pieces)}
        return {"stock_size": stock, "pieces": pieces, "piece_size": dict(zip(pieces, sizes, strict=True)),
                "demand": demand, "patterns": patterns, "pattern_yield": pattern_yield}

    def make_infeasible(self, data: dict, rng: random.Random) -> dict | None:
        # fewer stock items on hand than the total ordered size needs even with zero waste
        needed = math.ceil(sum(data["piece_size"][p] * data["demand"][p] for p in data["pieces"])
                           / data["stock_size"])
        return {**data, "stock_available": needed - 1}

    def build_highspy(self, data: dict, matrix: MatrixModel) -> None:
        column = {k: matrix.add_var(f"cut[{k}]", cost=1.0, integer=True) for k in data["patterns"]}
        for piece in data["pieces"]:
            matrix.add_row({column[k]: data["pattern_yield"][k][piece] for k in data["patterns"]
                            if piece in data["pattern_yield"][k]},
                           lower=data["demand"][piece], name=f"meet_order[{piece}]")
        if "stock_available" in data:
            matrix.add_row({c: 1.0 for c in column.values()}, upper=data["stock_available"], name="stock")

    def constraint_rows(self, data: dict, x: dict):
        cut = x["cut"]
        for k in data["patterns"]:
            # a given pattern must fit on one stock item
            used = sum(data["piece_size"][p] * n for p, n in data["pattern_yield"][k].items())
            yield Row(f"pattern_fits[{k}]", used, "<=", data["stock_size"])
        for piece in data["pieces"]:
            produced = sum(data["pattern_yield"][k].get(piece, 0) * cut[k] for k in data["patterns"])
            yield Row(f"meet_order[{piece}]", produced, ">=", data["demand"][piece])
        if "stock_available" in data:
            yield Row("stock", sum(cut.values()), "<=", data["stock_available"])

    def objective_value(self, data: dict, x: dict) -> float:
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
        rule = (f"The planners only use the cutting patterns {where} (each names how many {piece}s of each "
                f"{measure} one {stock} yields); surplus {piece}s are allowed.")
        limit = ""
        if "stock_available" in data:
            limit = f" Only {fmt(data['stock_available'])} {stock}s are in stock."
        question = (f"How many {stock}s should be {words['cut']} with each pattern to fill every order, using the "
                    f"fewest {stock}s? What is the minimum number of {stock}s needed?")
        if representation == "text":
            orders = ", ".join(f"{fmt(data['demand'][p])} pieces of {fmt(data['piece_size'][p])} {unit}"
                               for p in data["pieces"])
            patterns = "; ".join(f"{k}: {self._pattern_text(data, k)}" for k in data["patterns"])
            return f"{intro} The orders are {orders}. {rule} Patterns: {patterns}.{limit} {question}"
        if representation == "table":
            orders = markdown_table([f"{piece} {measure} ({unit})", "pieces ordered"],
                                    [[data["piece_size"][p], data["demand"][p]] for p in data["pieces"]])
            patterns = markdown_table(["pattern", *data["pieces"]],
                                      [[k, *[data["pattern_yield"][k].get(p, 0) for p in data["pieces"]]]
                                       for k in data["patterns"]])
            return f"{intro}{limit}\n\n{orders}\n\n{rule}\n\n{patterns}\n\n{question}"
        if representation == "file":
            fields = dict(self.data_fields)
            if "stock_available" in data:
                fields["stock_available"] = f"number of {stock}s in stock"
            return f"{intro} {rule}\n\n{describe_data_file(fields)}\n\n{question}"
        raise ValueError(f"unknown representation {representation!r}")

    def describe_solution(self, data: dict, x: dict, scenario: Scenario) -> str:
        stock = scenario.words["stock"]
        used = [(k, round(x["cut"][k])) for k in data["patterns"] if x["cut"][k] > 0.5]
        lines = [f"- {k} ({self._pattern_text(data, k)}): {n} {stock}{'s' if n != 1 else ''}" for k, n in used]
        produced = [f"{p}: {sum(data['pattern_yield'][k].get(p, 0) * n for k, n in used)} made for "
                    f"{fmt(data['demand'][p])} ordered" for p in data["pieces"]]
        return "\n".join(lines) + "\n\nPieces: " + "; ".join(produced) + "."

    def formulation(self, data: dict) -> str:
        limit = ""
        if "stock_available" in data:
            limit = "& \\sum_{k \\in K} x_k \\le U \\quad\\text{(stock on hand)} \\\\\n"
        return (
            "**Sets**: ordered pieces $I$, cutting patterns $K$.\n\n"
            "**Parameters**: demand $d_i$, yield $a_{ik}$ (pieces $i$ from one stock item cut with pattern $k$)"
            + (", stock on hand $U$" if limit else "") + ".\n\n"
            "**Variables**: $x_k \\in \\mathbb{Z}_{\\ge 0}$, stock items cut with pattern $k$.\n\n"
            "$$\n\\begin{aligned}\n\\min\\ & \\sum_{k \\in K} x_k \\\\\n"
            "\\text{s.t.}\\ & \\sum_{k \\in K} a_{ik} x_k \\ge d_i && \\forall i \\in I \\\\\n" + limit +
            "& x_k \\in \\mathbb{Z}_{\\ge 0} && \\forall k \\in K\n\\end{aligned}\n$$"
        )


FAMILY = CuttingStock()
