"""Which of a program's recorded solves is "its" answer.

A program may solve more than one model: the real one and an auxiliary one (a bound, a check, a
second scenario). Taking the last solve would grade the auxiliary model. `choose_solve` takes the
solve whose objective the program printed, matching each printed number at the precision it was
printed with (7.50 matches 7.4999999; 7.5 does not match 7.6), and falls back to the last solve,
saying why, when the printed output names none or more than one of them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# A decimal number with its exponent; thousands separators allowed ("1,234.5").
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# Lines that say they hold the objective; when a program prints some, only their numbers are matched.
OBJECTIVE_WORDS = re.compile(r"objective|optimal|total (?:cost|profit|revenue)|minimum|maximum", re.IGNORECASE)
RELATIVE_TOLERANCE = 1e-6  # a printed number matches at least when this close, whatever its precision


@dataclass(frozen=True)
class SolveChoice:
    solve: dict | None  # the chosen solve record, None when the program made none
    reason: str  # "printed", "only solve", "last (no printed objective matched)", ...


@dataclass(frozen=True)
class PrintedNumber:
    value: float
    half_step: float  # half a unit of the last printed digit: how far a rounded print may be off


def printed_numbers(text: str) -> list[PrintedNumber]:
    """Every number in `text` with the precision it was printed with."""
    numbers = []
    for token in NUMBER.findall(text):
        plain = token.replace(",", "")
        try:
            value = float(plain)
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        mantissa, _, exponent = plain.lower().partition("e")
        decimals = len(mantissa.partition(".")[2])
        half_step = 0.5 * 10.0 ** (int(exponent or 0) - decimals)
        numbers.append(PrintedNumber(value, half_step))
    return numbers


def matches(objective: float, number: PrintedNumber) -> bool:
    difference = abs(objective - number.value)
    return difference <= number.half_step or difference <= RELATIVE_TOLERANCE * max(1.0, abs(objective))


def choose_solve(solves: list[dict], stdout: str) -> SolveChoice:
    """The solve whose objective appears in `stdout`; see the module docstring."""
    if not solves:
        return SolveChoice(None, "no solve recorded")
    if len(solves) == 1:
        return SolveChoice(solves[0], "only solve")
    lines = stdout.splitlines()
    objective_lines = [line for line in lines if OBJECTIVE_WORDS.search(line)]
    numbers = printed_numbers("\n".join(objective_lines or lines))
    matched = [
        solve
        for solve in solves
        if solve.get("objective") is not None and any(matches(solve["objective"], n) for n in numbers)
    ]
    if not matched:
        return SolveChoice(solves[-1], "last (no printed objective matched)")
    if len(matched) == 1:
        return SolveChoice(matched[0], "printed")
    first = matched[0]["objective"]
    if all(abs(solve["objective"] - first) <= RELATIVE_TOLERANCE * max(1.0, abs(first)) for solve in matched):
        return SolveChoice(matched[-1], f"printed (the last of {len(matched)} solves with that objective)")
    return SolveChoice(solves[-1], f"last (the printed output matches {len(matched)} solves with different objectives)")
