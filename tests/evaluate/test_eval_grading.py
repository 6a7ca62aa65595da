"""Grading rules, answer parsing, printed-objective parsing, outcome classes, pass@k."""

from __future__ import annotations

import math

import pytest

from trex_cli.evaluate.grading import (
    RULES,
    Prediction,
    Truth,
    classify,
    parse_answer,
    printed_objective,
    verdicts,
)
from trex_cli.evaluate.report import mean_and_standard_error, pass_at_k


def solved(value: float, status: str = "optimal") -> Prediction:
    """A clean run whose model object and printed line both say `value`."""
    return Prediction(model_objective=value, status=status, printed_objective=value, exit_ok=True)


def test_exponents_are_kept_when_reading_printed_objectives():
    assert printed_objective("Objective: 1.5e+06\n") == 1.5e6
    assert printed_objective("Optimal objective value = 2.5E-3") == 0.0025
    assert printed_objective("Total cost: 1,234.5") == 1234.5
    assert printed_objective("optimal_value = 42.5") == 42.5  # the T-Rex B4O prompt's own line
    # a regex that drops the exponent would read 1.5 and grade this wrong
    truth = parse_answer("1500000.0")
    printed_only = Prediction(status="optimal", printed_objective=printed_objective("objective 1.5e+06"), exit_ok=True)
    assert all(verdicts(printed_only, truth)[rule] for rule in ("strict", "opt-engine", "orlm"))


def test_sirl_reads_the_objective_with_its_own_regex_which_drops_exponents():
    # SIRL's check_result prints the objective after an optimal solve and reads it back with
    # r"-?\d+\.?\d*": Python prints 5e-05 in exponent form, so SIRL reads 5.0
    tiny = Prediction(model_objective=5e-05, status="optimal", exit_ok=True)
    assert verdicts(tiny, parse_answer("0.00005"))["strict"]
    assert not verdicts(tiny, parse_answer("0.00005"))["sirl"]
    assert verdicts(tiny, parse_answer("5"))["sirl"]


def test_the_first_number_after_the_objective_word_is_taken():
    assert printed_objective("Optimal objective: 12.5 (x1 = 3, y2 = 4)") == 12.5
    assert printed_objective("x = 3\nObjective = 7\nvalues: 1 2") == 7.0
    assert printed_objective("no objective line here: 5" .replace("objective", "result")) is None


def test_negative_zero_equals_zero_under_every_rule():
    assert parse_answer("-0.0") == Truth(infeasible=False, value=0.0)
    assert printed_objective("Objective: -0.0") == 0.0
    assert math.copysign(1.0, printed_objective("Objective: -0.0")) == 1.0
    result = verdicts(solved(-0.0), parse_answer("0"))
    assert all(result.values()), result


@pytest.mark.parametrize("marker", ["No Best Solution", " no best solution ", "-9999", "-99999", -9999, "-9999.0"])
def test_infeasible_markers_parse_as_infeasible(marker):
    assert parse_answer(marker) == Truth(infeasible=True)


def test_answers_that_are_not_numbers_are_errors():
    with pytest.raises(ValueError, match="neither a number"):
        parse_answer("about forty")
    assert parse_answer(None) is None
    assert parse_answer(" 172666.667") == Truth(infeasible=False, value=172666.667)


def test_infeasible_truth_needs_an_infeasible_report():
    truth = parse_answer("No Best Solution")
    infeasible_run = Prediction(status="infeasible", printed_infeasible=True, exit_ok=True)
    result = verdicts(infeasible_run, truth)
    assert result["strict"] and result["trex-paper"] and result["sirl"] and result["opt-engine"] and result["orlm"]
    assert not result["optibench"]  # OptiBench's original grader counts infeasible truths wrong
    optimal_run = verdicts(solved(5.0), truth)
    assert not any(optimal_run.values())


def test_a_timeout_earns_credit_only_under_sirl_whose_evaluator_gives_it():
    timed_out = Prediction(timed_out=True, status="unknown")
    result = verdicts(timed_out, parse_answer("-99999"))
    assert result.pop("sirl")  # check_result.py: `except TimeoutExpired: return 1 if sub_answer is None`
    assert not any(result.values())
    assert not verdicts(timed_out, parse_answer("12"))["sirl"]


def test_strict_tolerance_is_relative_beyond_one():
    truth = parse_answer(2.0e6)
    assert verdicts(solved(2.0e6 + 1.9), truth)["strict"]  # within 1e-6 * 2e6 = 2
    assert not verdicts(solved(2.0e6 + 2.1), truth)["strict"]
    assert not verdicts(solved(2.0e6 + 1.9), truth)["trex-paper"]  # the paper's rule is absolute 1e-6
    small = parse_answer(0.5)
    assert verdicts(solved(0.5 + 9e-7), small)["strict"]
    assert not verdicts(solved(0.5 + 2e-6), small)["strict"]


def test_strict_needs_an_optimal_status_and_a_clean_exit():
    truth = parse_answer(10)
    assert not verdicts(solved(10.0, status="time_limit"), truth)["strict"]
    crashed = solved(10.0)
    crashed.exit_ok = False
    assert not verdicts(crashed, truth)["strict"]
    assert not verdicts(crashed, truth)["orlm"]  # ORLM runs with check=True: a failed program has no answer
    printed_without_status = Prediction(printed_objective=10.0, exit_ok=True)
    assert not verdicts(printed_without_status, truth)["strict"]
    assert verdicts(printed_without_status, truth)["opt-engine"]
    assert not verdicts(printed_without_status, truth)["sirl"]  # SIRL reads only its own line after a solve


# Cases from ORLM's eval/execute.py: its appended script prints the objective after an OPTIMAL solve,
# else "No Best Solution"; the ground truth is infeasible only when it is that exact string.
def test_orlm_counts_the_infeasible_markers_as_numbers():
    infeasible_run = Prediction(status="infeasible", exit_ok=True, printed_infeasible=True)
    assert verdicts(infeasible_run, parse_answer("No Best Solution"))["orlm"]
    for marker in ("-9999", -99999):
        assert not verdicts(infeasible_run, parse_answer(marker))["orlm"]  # a number to match, not a marker
        assert verdicts(infeasible_run, parse_answer(marker))["strict"]
    assert verdicts(solved(-9999.0), parse_answer("-9999"))["orlm"]
    # a run that printed "No Best Solution" but solved to optimality answers with its objective
    optimal_but_says_none = Prediction(model_objective=3.0, status="optimal", exit_ok=True, printed_infeasible=True)
    assert not verdicts(optimal_but_says_none, parse_answer("No Best Solution"))["orlm"]
    # no solve recorded: the appended status check has nothing to read
    assert not verdicts(Prediction(printed_infeasible=True, exit_ok=True), parse_answer("No Best Solution"))["orlm"]


# Cases from SIRL's check_result.py: "No Best Solution" or anything containing "-9999" is infeasible;
# "nfeasible" in the output answers infeasible; no objective line answers infeasible too (None == None).
def test_sirl_infeasible_cases_follow_its_evaluator():
    assert verdicts(Prediction(status="infeasible", exit_ok=True), parse_answer("-99999"))["sirl"]
    said_infeasible = Prediction(status="unknown", exit_ok=True, stdout="Model is Infeasible\n")
    assert verdicts(said_infeasible, parse_answer("No Best Solution"))["sirl"]
    assert not verdicts(said_infeasible, parse_answer("3"))["sirl"]
    assert verdicts(Prediction(status="unknown", exit_ok=True), parse_answer("No Best Solution"))["sirl"]
    crashed = Prediction(status="infeasible", exit_ok=False)
    assert not verdicts(crashed, parse_answer("No Best Solution"))["sirl"]  # returncode != 0: wrong


def test_orlm_rounds_both_to_integers_half_to_even():
    orlm = RULES["orlm"].check
    assert orlm(solved(2.4), parse_answer(2.5))  # round(2.5) == 2 == round(2.4)
    assert orlm(solved(3.5), parse_answer(4.4))  # 4 vs 4
    assert not orlm(solved(2.6), parse_answer(2.5))  # 3 vs 2: 50 % off
    assert orlm(solved(0.4), parse_answer(0.3))  # truth rounds to 0: |round(p)| <= 0.05
    assert not orlm(solved(0.6), parse_answer(0.3))  # round(0.6) = 1
    assert orlm(solved(-0.5), parse_answer(0.0))  # round(-0.5) = -0 = 0
    assert orlm(solved(104.0), parse_answer(100))  # 4 % off
    assert not orlm(solved(106.0), parse_answer(100))  # 6 % off
    assert orlm(solved(-104.0), parse_answer(-100))


def test_the_other_published_rules_use_their_own_tolerances():
    truth = parse_answer(100)
    assert verdicts(solved(100.005), truth)["opt-engine"]
    assert not verdicts(solved(100.02), truth)["opt-engine"]
    assert verdicts(solved(100.00005), truth)["optibench"]
    assert not verdicts(solved(100.0002), truth)["optibench"]
    assert verdicts(solved(100.00005), truth)["sirl"]  # 5e-5 / 101 < 1e-6
    assert not verdicts(solved(100.0002), truth)["sirl"]


def test_outcome_classes():
    truth = parse_answer(7)

    def outcome(pred, has_code=True, syntax_ok=True):
        return classify(has_code=has_code, syntax_ok=syntax_ok, pred=pred,
                        correct_under_default=verdicts(pred, truth)["strict"], truth=truth)[0]

    assert outcome(solved(7.0)) == "correct"
    assert outcome(solved(8.0)) == "wrong value"
    assert outcome(Prediction(status="infeasible", exit_ok=True)) == "infeasible"
    assert outcome(Prediction(status="unknown", exit_ok=True)) == "no objective"
    assert outcome(Prediction(status="unknown", exit_ok=False)) == "runtime error"
    assert outcome(Prediction(timed_out=True)) == "timeout"
    assert outcome(Prediction(), syntax_ok=False) == "syntax error"
    assert outcome(Prediction(), has_code=False) == "no code"


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(1, 1, 1) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(4, 2))  # 0.5
    assert pass_at_k(4, 3, 2) == 1.0
    assert pass_at_k(5, 0, 3) == 0.0
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)
    mean, error = mean_and_standard_error([1.0, 0.0, 1.0, 0.0])
    assert mean == 0.5 and error == pytest.approx(math.sqrt((4 * 0.25 / 3) / 4))


def test_recorded_predictions_from_published_files():
    assert Prediction.from_value("No Best Solution").status == "infeasible"
    assert Prediction.from_value("1.5e+06").model_objective == 1.5e6
    assert Prediction.from_value(None).status == "not_solved"
    assert Prediction.from_value("oops").status == "not_solved"
