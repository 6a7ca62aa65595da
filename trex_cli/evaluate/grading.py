"""Grading: reference answers, what a program produced, the published grading rules, outcome classes.

Published Pass@1 numbers use different rules (see reference/or_eval.md); trex grades every sample under
every rule below and names the rule beside every number. Its own default, `strict`, asks for the
objective of the model the program built, an optimal solver status and a clean exit, within
1e-6 * max(1, |truth|); an infeasible truth needs an infeasible status.

Each published rule follows its authors' evaluator code, not their prose (ORLM's `eval/execute.py`,
which OptMATH's `eval/executor.py` repeats; SIRL's `check_result.py`), including what trex's own rule
avoids on purpose: under `orlm` only the string "No Best Solution" means infeasible (-9999 is a number
to match); under `sirl` a timeout earns credit for an infeasible truth and the objective is read back
with SIRL's regex, which drops exponents. Under trex's `strict`, numbers keep their exponents and a
timeout never earns credit. No rule retries a wrong program with its variables or its sense changed
(SIRL's and OptMATH's evaluators do; trex does not run a program the model did not write). The
`opt-engine` and `optibench` rules follow their papers' descriptions: their evaluator code was not
available to check.

B4O-ORGEval items have no objective: they are graded by structural equivalence of the model the
program built with a reference LP (`trex_cli.evaluate.equivalence`), under the one rule `orgeval`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

OUTCOMES = (
    "correct",
    "wrong value",
    "infeasible",
    "no objective",
    "not equivalent",  # B4O-ORGEval: a model was built, but not the reference's
    "no model",  # B4O-ORGEval: the program ran but built no model trex could write as LP
    "runtime error",
    "syntax error",
    "timeout",
    "no code",
    "api_error",  # the request for this sample failed for good (e.g. HTTP 400: the prompt is too long)
)
STRUCTURE_RULE = "orgeval"
STRUCTURE_RULE_DESCRIPTION = (
    "T-Rex B4O-ORGEval: the model the program built is structurally equivalent to the reference LP "
    "(normalized, same sizes, same Weisfeiler-Lehman colours, WL sufficient condition)"
)
ORLM_INFEASIBLE = "No Best Solution"  # the only infeasible answer ORLM's evaluator knows
ORLM_INFEASIBLE_TRUTHS = (ORLM_INFEASIBLE, "No Best Solution.")  # OptMATH's evaluator accepts the dot too

# Answers that mean "this instance has no optimal solution" in the published benchmark files.
INFEASIBLE_WORDS = ("no best solution", "infeasible", "no feasible solution", "unbounded")
INFEASIBLE_NUMBERS = (-9999.0, -99999.0)

# Solver statuses as trex records them (normalized across Pyomo, highspy, PuLP, gurobipy, SciPy).
OPTIMAL = "optimal"
INFEASIBLE_STATUSES = ("infeasible", "unbounded", "infeasible_or_unbounded")

# A number with its exponent; thousands separators allowed ("1,234.5").
NUMBER_PATTERN = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
OBJECTIVE_LINE = re.compile(r"objective|optimal[ _](?:value|cost|profit)|total (?:cost|profit)", re.IGNORECASE)
INFEASIBLE_LINE = re.compile(r"infeasible|no best solution|no feasible solution|unbounded", re.IGNORECASE)


@dataclass(frozen=True)
class Truth:
    """A benchmark's reference answer: an objective value, or a statement that there is none."""

    infeasible: bool
    value: float | None = None
    # the answer as the benchmark file spells it (the published rules read it their own way)
    raw: Any = field(default=None, compare=False)

    def describe(self) -> str:
        if self.infeasible:
            return "infeasible"
        return "the reference model" if self.value is None else repr(self.value)


def parse_number(text: str) -> float | None:
    """The float in `text` (exponents and thousands separators kept), or None."""
    text = text.strip()
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_answer(raw: Any) -> Truth | None:
    """A reference answer from a benchmark file: a number, a numeric string, "No Best Solution", or
    the -9999 / -99999 markers for infeasible. None when the item has no answer at all; ValueError when
    the answer is neither a number nor a known marker."""
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise ValueError(f"answer {raw!r} is not a number")
    if isinstance(raw, int | float):
        value = float(raw)
    else:
        text = str(raw).strip()
        if not text:
            return None
        if text.lower() in INFEASIBLE_WORDS:
            return Truth(infeasible=True, raw=raw)
        value = parse_number(text)
        if value is None:
            raise ValueError(f"answer {raw!r} is neither a number nor 'No Best Solution'")
    if value in INFEASIBLE_NUMBERS:
        return Truth(infeasible=True, raw=raw)
    if math.isnan(value):
        raise ValueError(f"answer {raw!r} is not a number")
    return Truth(infeasible=False, value=value + 0.0, raw=raw)  # + 0.0 turns -0.0 into 0.0


def printed_objective(stdout: str) -> float | None:
    """The objective a program printed: on the last line that names an objective ("Objective:
    1.5e+06", "Optimal value = 42", "Total cost: 1,234.5"), the first number after that name."""
    for line in reversed(stdout.splitlines()):
        match = OBJECTIVE_LINE.search(line)
        if match:
            for candidate in NUMBER_PATTERN.findall(line[match.end():]):
                value = parse_number(candidate)
                if value is not None and math.isfinite(value):
                    return value + 0.0
    return None


def printed_infeasible(stdout: str) -> bool:
    return any(INFEASIBLE_LINE.search(line) for line in stdout.splitlines())


@dataclass
class Prediction:
    """What one program produced, as the rules see it."""

    model_objective: float | None = None  # read from the solved model object by trex's hooks
    status: str = "unknown"  # status of the chosen solve (`trex_sandbox.choose_solve`; "unknown": none recorded)
    printed_objective: float | None = None
    printed_infeasible: bool = False
    exit_ok: bool = False  # ran to the end with exit status 0
    timed_out: bool = False
    gap: float | None = None
    stdout: str = ""  # what the program printed (SIRL's evaluator searches it for "nfeasible")

    @property
    def status_infeasible(self) -> bool:
        return self.status in INFEASIBLE_STATUSES

    @classmethod
    def from_value(cls, raw: Any) -> Prediction:
        """A prediction recorded by someone else (regrade): a number means an optimal solve that
        printed it; "No Best Solution" / -9999 means an infeasible report; anything else, nothing."""
        try:
            truth = parse_answer(raw)
        except ValueError:
            truth = None
        if truth is None:
            return cls(exit_ok=True, status="not_solved")
        if truth.infeasible:
            return cls(exit_ok=True, status="infeasible", printed_infeasible=True)
        return cls(
            model_objective=truth.value, printed_objective=truth.value, status=OPTIMAL, exit_ok=True
        )


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    check: Callable[[Prediction, Truth], bool]


def _strict(pred: Prediction, truth: Truth) -> bool:
    if pred.timed_out:
        return False
    if truth.infeasible:
        # The solver's proof is what counts: Pyomo raises after an infeasible solve by default.
        return pred.status_infeasible
    if not pred.exit_ok:
        return False
    if pred.status != OPTIMAL:
        return False
    value = pred.model_objective if pred.model_objective is not None else pred.printed_objective
    if value is None:
        return False
    return abs(value - truth.value) <= 1e-6 * max(1.0, abs(truth.value))


def _trex_paper(pred: Prediction, truth: Truth) -> bool:
    if pred.timed_out:
        return False
    if truth.infeasible:  # the paper's sets have no infeasible items; an infeasible status is the only answer
        return pred.status_infeasible
    if pred.status != OPTIMAL or pred.model_objective is None:
        return False
    return abs(pred.model_objective - truth.value) <= 1e-6


def _orlm_answer(pred: Prediction) -> float | str | None:
    """What ORLM's evaluator reads: the script it appends prints the model's objective after an optimal
    solve, else "No Best Solution"; a program that fails or times out gives no answer."""
    if pred.timed_out or not pred.exit_ok or pred.status == "unknown":
        return None  # no solve recorded: the appended status check has no solved model to read
    if pred.status != OPTIMAL:
        return ORLM_INFEASIBLE
    return pred.model_objective if pred.model_objective is not None else pred.printed_objective


def _orlm(pred: Prediction, truth: Truth) -> bool:
    answer = _orlm_answer(pred)
    if truth.raw in ORLM_INFEASIBLE_TRUTHS:
        return answer == ORLM_INFEASIBLE
    if answer is None or answer == ORLM_INFEASIBLE:
        return False
    expected_value = truth.value if truth.value is not None else parse_number(str(truth.raw))
    if expected_value is None:  # the markers -9999 / -99999 are numbers to ORLM
        return False
    # Python's round (half to even) on both, as the evaluator does; 0.05 is its default tolerance.
    predicted, expected = round(float(answer)), round(expected_value)
    if expected == 0:
        return abs(predicted) <= 0.05
    return abs((predicted - expected) / expected) <= 0.05


def _infeasible_report(pred: Prediction) -> bool:
    return pred.status_infeasible or (pred.printed_infeasible and pred.printed_objective is None)


SIRL_NUMBER = re.compile(r"-?\d+\.?\d*")  # SIRL's extract_obj: no exponent, no sign "+"


def _sirl_value(pred: Prediction) -> float | None:
    """The objective SIRL's evaluator reads: it prints the model's objective after an optimal solve,
    then takes the first match of its regex on that line (so 1.5e+06 reads as 1.5)."""
    if pred.status != OPTIMAL or pred.model_objective is None:
        return None
    found = SIRL_NUMBER.findall(f"{pred.model_objective}")
    return float(found[0]) if found else None


def _sirl(pred: Prediction, truth: Truth) -> bool:
    # SIRL's check_result: "No Best Solution" or any answer containing "-9999" is infeasible.
    infeasible = truth.raw == ORLM_INFEASIBLE or "-9999" in str(truth.raw) or truth.infeasible
    if pred.timed_out:
        return infeasible  # its evaluator credits a timeout when the truth is infeasible
    if not pred.exit_ok:
        return False
    value = _sirl_value(pred)
    if value is not None and not infeasible:
        if abs(value - truth.value) / (abs(truth.value) + 1.0) <= 1e-6:
            return True
    if "nfeasible" in pred.stdout:
        return infeasible
    if value is not None and not infeasible:
        return abs(value - truth.value) / (abs(truth.value) + 1.0) < 1e-6
    return value is None and infeasible  # its final `solver_result == sub_answer` with both None


def _opt_engine(pred: Prediction, truth: Truth) -> bool:
    if pred.timed_out:
        return False
    if truth.infeasible:
        return _infeasible_report(pred)
    if pred.printed_objective is None:
        return False
    return abs(pred.printed_objective - truth.value) < 0.01


def _optibench(pred: Prediction, truth: Truth) -> bool:
    if pred.timed_out or truth.infeasible:
        return False
    if pred.printed_objective is None:
        return False
    # The original checks every queried quantity; trex's benchmark files keep only the objective.
    return abs(pred.printed_objective - truth.value) <= 1e-4


RULES: dict[str, Rule] = {
    rule.name: rule
    for rule in (
        Rule(
            "strict",
            "trex default: model-object objective (printed only when a solver status was recorded), "
            "optimal status, clean exit, |p-t| <= 1e-6*max(1,|t|); infeasible truth needs an infeasible solver status",
            _strict,
        ),
        Rule(
            "trex-paper",
            "T-Rex paper: model-object objective, optimal status, |p-t| <= 1e-6",
            _trex_paper,
        ),
        Rule(
            "orlm",
            "ORLM / OptMATH (eval/execute.py, eval/executor.py): the model's objective after an optimal solve, else 'No Best Solution'; both "
            "rounded to integers, relative error <= 5%; only a 'No Best Solution' truth is infeasible (-9999 is a number)",
            _orlm,
        ),
        Rule(
            "sirl",
            "SIRL (check_result.py): optimal objective read with SIRL's regex (no exponent), |p-t|/(|t|+1) < 1e-6; "
            "infeasible truth ('No Best Solution' or -9999): credit for 'nfeasible' in the output, no objective, or a timeout",
            _sirl,
        ),
        Rule("opt-engine", "OPT-Engine: printed objective, |p-t| < 0.01; credit for an infeasible report", _opt_engine),
        Rule(
            "optibench",
            "OptiBench original (objective only): printed objective within 1e-4 absolute; infeasible truth is wrong",
            _optibench,
        ),
    )
}
DEFAULT_RULE = "strict"


def check_rule_name(name: str, where: str = "--rule", structure: bool = False) -> str:
    """`name` if it is a rule; with `structure`, B4O-ORGEval's `orgeval` counts too."""
    known = [*RULES, STRUCTURE_RULE] if structure else list(RULES)
    if name not in known:
        raise ValueError(f"{where}: unknown rule {name!r}; use one of {', '.join(known)}")
    return name


def verdicts(pred: Prediction, truth: Truth) -> dict[str, bool]:
    """The verdict of every rule."""
    return {name: rule.check(pred, truth) for name, rule in RULES.items()}


def classify(
    *,
    has_code: bool,
    syntax_ok: bool,
    pred: Prediction,
    correct_under_default: bool,
    truth: Truth,
) -> tuple[str, str]:
    """The outcome class of one sample and a one-line reason."""
    if not has_code:
        return "no code", "no program found in the completion"
    if not syntax_ok:
        return "syntax error", "the program does not compile"
    if pred.timed_out:
        return "timeout", "killed at the time limit"
    if correct_under_default:
        return "correct", f"matches {truth.describe()}"
    if pred.status_infeasible and not truth.infeasible:
        return "infeasible", f"the solver reported {pred.status}; truth {truth.describe()}"
    if not pred.exit_ok:
        return "runtime error", "the program did not exit cleanly"
    value = pred.model_objective if pred.model_objective is not None else pred.printed_objective
    if value is None and not (truth.infeasible and pred.status == OPTIMAL):
        return "no objective", "no objective was recorded from a solve or printed"
    if pred.status == "unknown":
        return "no objective", f"no solver call was recorded; the printed {value!r} carries no status"
    if pred.status != OPTIMAL and not truth.infeasible:
        return "wrong value", f"solver status {pred.status} (objective {value!r}); truth {truth.describe()}"
    return "wrong value", f"objective {value!r}; truth {truth.describe()}"
