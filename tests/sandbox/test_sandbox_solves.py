"""`choose_solve`: the solve whose objective the program printed, else the last one, with the reason."""

from __future__ import annotations

from trex_sandbox import choose_solve
from trex_sandbox.solves import printed_numbers


def solves(*objectives):
    return [{"order": i, "status": "optimal" if v is not None else "infeasible", "objective": v}
            for i, v in enumerate(objectives)]


def test_the_printed_objective_picks_its_solve_over_a_later_auxiliary_one():
    choice = choose_solve(solves(1234.5, 17.0), "Optimal cost: 1234.50\nbound check done\n")
    assert choice.solve["order"] == 0 and choice.reason == "printed"


def test_numbers_match_at_the_precision_they_were_printed_with():
    assert choose_solve(solves(3.0, 7.4999999), "Objective = 7.50").solve["order"] == 1
    assert choose_solve(solves(3.0, 1.23456e6), "Objective: 1.235e+06").solve["order"] == 1
    assert choose_solve(solves(3.0, 1234567.0), "Total cost: 1,234,567").solve["order"] == 1
    # 7.6 printed with one decimal is not 7.5
    assert choose_solve(solves(7.5, 3.0), "Objective: 7.6").reason == "last (no printed objective matched)"
    assert [n.half_step for n in printed_numbers("7 7.5 7.25 1.5e3")] == [0.5, 0.05, 0.005, 50.0]


def test_objective_lines_take_precedence_over_other_numbers():
    # x = 3 is a variable value, not the objective: the objective line names the first solve
    choice = choose_solve(solves(10.0, 3.0), "x = 3\nObjective: 10\n")
    assert choice.solve["order"] == 0 and choice.reason == "printed"
    # without any objective line every printed number counts
    assert choose_solve(solves(10.0, 3.0), "10\n").solve["order"] == 0


def test_fallbacks_say_why():
    assert choose_solve([], "Objective: 7").reason == "no solve recorded"
    only = choose_solve(solves(5.0), "Objective: 7")
    assert only.solve["order"] == 0 and only.reason == "only solve"
    silent = choose_solve(solves(5.0, 6.0), "")
    assert silent.solve["order"] == 1 and silent.reason == "last (no printed objective matched)"
    both = choose_solve(solves(5.0, 6.0), "Objective: 5 or 6")
    assert both.solve["order"] == 1 and both.reason.startswith("last (the printed output matches 2 solves")
    same = choose_solve(solves(5.0, 5.0, None), "Objective: 5")
    assert same.solve["order"] == 1 and same.reason.startswith("printed (the last of 2")
