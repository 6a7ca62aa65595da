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
    plural,
    size_for,
)
from data_synth.statements import Phrasing

SCENARIOS = (
    Scenario("paper", "paper converting", {
        "company": "a paper mill", "stock": "jumbo roll", "piece": "customer roll", "measure": "width",
        "unit": "cm", "stock_range": (180, 260), "piece_share": (0.12, 0.45), "cut": "slit",
        "stock_cost_range": (600, 1400), "pattern_name": "pattern {}",
    }),
    Scenario("steel", "steel service centre", {
        "company": "a steel service centre", "stock": "master coil", "piece": "strip", "measure": "width",
        "unit": "mm", "stock_range": (1200, 1600), "piece_share": (0.12, 0.45), "cut": "slit",
        "stock_cost_range": (4000, 9000), "pattern_name": "pattern {}",
    }),
    Scenario("lumber", "timber yard", {
        "company": "a timber yard", "stock": "standard board", "piece": "board piece", "measure": "length",
        "unit": "cm", "stock_range": (360, 600), "piece_share": (0.15, 0.48), "cut": "cut",
        "stock_cost_range": (8, 40), "pattern_name": "pattern {}",
    }),
)
# the eval split's own industries, companies, stock and piece words, units and pattern names (held out from
# training; `render_statement` has an opening sentence for each key)
EVAL_SCENARIOS = (
    Scenario("cable", "electrical wholesale", {
        "company": "a cable wholesaler", "stock": "cable drum", "piece": "cable coil", "measure": "length",
        "unit": "m", "stock_range": (500, 1000), "piece_share": (0.12, 0.45), "cut": "cut",
        "stock_cost_range": (900, 2500), "pattern_name": "P{}",
    }),
    Scenario("film", "flexible packaging", {
        "company": "a packaging-film converter", "stock": "parent reel", "piece": "slit reel", "measure": "width",
        "unit": "mm", "stock_range": (2500, 3400), "piece_share": (0.1, 0.4), "cut": "slit",
        "stock_cost_range": (1500, 4000), "pattern_name": "P{}",
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
    eval_scenarios = EVAL_SCENARIOS
    domains = {"cut": "nonnegative_integer"}
    # eval-only rewordings of the family's fixed sentences (training keeps its text; data_synth.statements)
    phrasings = (
        Phrasing(r"\bThe planners only use the cutting patterns\b", ("The planners only use the cutting patterns",),
                 ("The planning team restricts itself to the cutting patterns",)),
        Phrasing(r"\(each names how many\b", ("(each names how many",), ("(every pattern states how many",)),
        Phrasing(r"\byields\); surplus\b", ("yields); surplus",), ("gives); any surplus",)),
        Phrasing(r"\bare within a limit per size\b", ("are within a limit per size",), ("are capped for each size",)),
        Phrasing(r"\bSurplus is limited:", ("Surplus is limited:",), ("Overproduction is capped:",)),
        Phrasing(r"\bextra pieces of\b", ("extra pieces of",), ("additional pieces of",)),
        Phrasing(r"\bmay be made beyond the order\.", ("may be made beyond the order.",),
                 ("may be produced on top of the order.",)),
        Phrasing(r"\bThe stock on hand is limited\.", ("The stock on hand is limited.",),
                 ("Only a limited stock is on hand.",)),
        Phrasing(r"\bOnly (?=\d)", ("Only ",), ("Just ",)),
        Phrasing(r"\bare in stock\.", ("are in stock.",), ("can be drawn from the store.",)),
        Phrasing(r"\bhas a cost, and setting the knives for a pattern costs a fixed amount once if the pattern is "
                 r"used at all\.", ("has a cost, and setting the knives for a pattern costs a fixed amount once if "
                                   "the pattern is used at all.",),
                 ("carries a price, and any pattern that is used incurs a one-off knife-setting charge of a fixed "
                  "amount.",)),
        Phrasing(r"\band setting the knives for a pattern costs\b", ("and setting the knives for a pattern costs",),
                 ("while preparing the knives for a pattern incurs",)),
        Phrasing(r"\bpaid once if the pattern is used at all\.", ("paid once if the pattern is used at all.",),
                 ("charged a single time provided the pattern is used.",)),
        Phrasing(r"\bwith each pattern to fill every order(?= at the lowest)", ("with each pattern to fill every order",),
                 ("with each pattern so that all orders are filled",)),
        Phrasing(r"\btotal cost of stock and knife settings\?", ("total cost of stock and knife settings?",),
                 ("combined outlay for stock and knife set-ups?",)),
        Phrasing(r"\bminimum cost\?", ("minimum cost?",), ("lowest achievable cost?",)),
        Phrasing(r"\bwith each pattern to fill every order, using the fewest\b",
                 ("with each pattern to fill every order, using the fewest",),
                 ("with each pattern so that all orders are filled while consuming the fewest",)),
        Phrasing(r"\bWhat is the minimum number of\b", ("What is the minimum number of",),
                 ("What is the smallest number of",)),
        Phrasing(r"\bThe orders are\b", ("The orders are",), ("The order book asks for",)),
        Phrasing(r"\bPatterns:", ("Patterns:",), ("Cutting patterns available:",)),
        Phrasing(r"\bpieces ordered\b", ("pieces ordered",), ("order quantity",)),
        Phrasing(r"\bmost surplus pieces\b", ("most surplus pieces",), ("surplus cap (pieces)",)),
        Phrasing(r"\bsize \(width or length\) of one stock item\b", ("size (width or length) of one stock item",),
                 ("width or length of a single stock item",)),
        Phrasing(r"\blist of ordered piece names\b", ("list of ordered piece names",),
                 ("names of the ordered pieces",)),
        Phrasing(r"\bsize of each ordered piece,(?= keyed by)", ("size of each ordered piece,",),
                 ("width or length of every ordered piece,",)),
        Phrasing(r"\bnumber of pieces ordered,(?= keyed by)", ("number of pieces ordered,",),
                 ("ordered quantity,",)),
        Phrasing(r"\blist of cutting pattern names\b", ("list of cutting pattern names",),
                 ("names of the cutting patterns",)),
        Phrasing(r"\bpieces of that kind one stock item cut with the pattern gives \(pieces not listed: none\)",
                 ("pieces of that kind one stock item cut with the pattern gives (pieces not listed: none)",),
                 ("number of such pieces that a single stock item cut to the pattern produces (zero for pieces "
                  "that are absent)",)),
        Phrasing(r"\bmost pieces made beyond the order,(?= keyed by)", ("most pieces made beyond the order,",),
                 ("upper bound on extra pieces above the order,",)),
        Phrasing(r"\bnumber of stock items on hand\b", ("number of stock items on hand",),
                 ("count of stock items in the store",)),
        Phrasing(r"\bcost of one stock item in dollars\b", ("cost of one stock item in dollars",),
                 ("price in USD of a single stock item",)),
        Phrasing(r"\bcost in dollars of setting up the knives for a pattern that is used at all\b",
                 ("cost in dollars of setting up the knives for a pattern that is used at all",),
                 ("one-off knife set-up charge in USD for any pattern that is used",)),
    )
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
        patterns = [words["pattern_name"].format(k + 1) for k in range(len(chosen))]
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
            "paper": f"{words['company'].capitalize()} slits {plural(stock)} {fmt(data['stock_size'])} {unit} wide into "
                     f"narrower {plural(piece)} for its customers.",
            "steel": f"{words['company'].capitalize()} slits {plural(stock)} of {fmt(data['stock_size'])} {unit} width "
                     f"into {plural(piece)} for this week's orders.",
            "lumber": f"{words['company'].capitalize()} cuts {plural(stock)} of length {fmt(data['stock_size'])} {unit} "
                      f"into shorter {plural(piece)} for a building contractor.",
            "cable": f"{words['company'].capitalize()} cuts {plural(stock)} holding {fmt(data['stock_size'])} {unit} of "
                     f"cable into the {plural(piece)} its electricians have ordered.",
            "film": f"{words['company'].capitalize()} slits {plural(stock)} with a width of {fmt(data['stock_size'])} {unit} "
                    f"into {plural(piece)} for food-packaging lines.",
        }[scenario.key]
        where = "given in the data" if representation == "file" else "listed below"
        surplus = "within a limit per size" if "max_surplus" in data else "allowed"
        rule = (f"The planners only use the cutting patterns {where} (each names how many {plural(piece)} of each "
                f"{measure} one {stock} yields); surplus {plural(piece)} are {surplus}.")
        limit = ""
        if "max_surplus" in data and representation == "text":
            limit += (" Surplus is limited: at most " + ", ".join(
                f"{fmt(data['max_surplus'][p])} extra pieces of {fmt(data['piece_size'][p])} {unit}"
                for p in data["pieces"]) + " may be made beyond the order.")
        if "stock_available" in data:
            limit += (" The stock on hand is limited." if representation == "file"
                      else f" Only {fmt(data['stock_available'])} {plural(stock)} are in stock.")
        if "setup_cost" in data:
            if representation == "file":
                limit += (f" Every {stock} has a cost, and setting the knives for a pattern costs a fixed amount "
                          "once if the pattern is used at all.")
            else:
                limit += (f" Every {stock} costs ${fmt(data['stock_cost'])}, and setting the knives for a pattern "
                          f"costs ${fmt(data['setup_cost'])}, paid once if the pattern is used at all.")
            question = (f"How many {plural(stock)} should be {words['cut']} with each pattern to fill every order at the "
                        "lowest total cost of stock and knife settings? What is that minimum cost?")
        else:
            question = (f"How many {plural(stock)} should be {words['cut']} with each pattern to fill every order, using "
                        f"the fewest {plural(stock)}? What is the minimum number of {plural(stock)} needed?")
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
            text += (f"\n\n{sum(n for _, n in used)} {plural(stock)} and {len(used)} knife settings "
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
