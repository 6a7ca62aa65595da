"""Family-specific checks for the OR families bin_packing ... network_design: for each family, a tiny
hand-made instance whose optimum was worked out by hand (the derivation is in the comment above it),
solved through the family's Pyomo model and its highspy build; plus the helpers some families rely on
(first-fit decreasing, maximal cutting patterns, the max-flow feasibility check, the enumeration in
project selection) and properties of sampled instances (positive-definite covariances, subtours caught).

The generic contract and the five verifications over seeds are in test_synth_families.py.
"""

from __future__ import annotations

import copy
import random

import pytest

from data_synth.families import get_family
from data_synth.families.bin_packing import first_fit_decreasing
from data_synth.families.cutting_stock import maximal_patterns
from data_synth.families.network_design import max_flow_value
from data_synth.family import DIFFICULTIES, MatrixModel
from data_synth.verify import check_solution


def solve(family_name: str, data: dict) -> tuple[float, float, dict]:
    """(Pyomo objective, highspy objective, Pyomo solution) of an instance that must be optimal.

    The Pyomo side uses the `highs` interface rather than `appsi_highs`: appsi's HiGHS interface only
    takes linear objectives, and portfolio_qp is a QP."""
    import pyomo.environ as pyo

    family = get_family(family_name)
    namespace = {"pyo": pyo, "data": copy.deepcopy(data)}
    exec(family.model_code, namespace)
    model = namespace["model"]
    solver = pyo.SolverFactory("highs")
    solver.options["mip_rel_gap"] = 1e-9
    results = solver.solve(model, load_solutions=False)
    assert results.solver.termination_condition == pyo.TerminationCondition.optimal
    model.solutions.load_from(results)
    x = {variable.local_name: {index: variable[index].value for index in variable}
         for variable in model.component_objects(pyo.Var)}
    matrix = MatrixModel(family.sense)
    family.build_highspy(copy.deepcopy(data), matrix)
    result = matrix.solve()
    assert result.status == "optimal"
    return float(pyo.value(model.obj)), result.objective, x


def matrix_status(family_name: str, data: dict) -> str:
    family = get_family(family_name)
    matrix = MatrixModel(family.sense)
    family.build_highspy(copy.deepcopy(data), matrix)
    return matrix.solve().status


# ----------------------------------------------------------------------------- hand-computed optima

HAND_INSTANCES = {
    # sizes 6+5+4+3+2 = 20 need at least 2 bins of 10; {6, 4} and {5, 3, 2} fill exactly 2
    "bin_packing": ({"items": ["a", "b", "c", "d", "e"], "size": {"a": 6, "b": 5, "c": 4, "d": 3, "e": 2},
                     "bins": ["B1", "B2", "B3"], "capacity": 10}, 2),
    # area 3 needs 2 of {B, C, D}: B+C = 9 also covers 1 (C) and 2 (B); B+D = 13, C+D = 14
    "set_cover": ({"sites": ["A", "B", "C", "D"], "areas": ["1", "2", "3"],
                   "cost": {"A": 3, "B": 4, "C": 5, "D": 9},
                   "covers": {"A": ["1", "2"], "B": ["2", "3"], "C": ["1", "3"], "D": ["1", "2", "3"]},
                   "required": {"1": 1, "2": 1, "3": 2}}, 9),
    # both open: 20 + 2*1 + 3*1 = 25; only F1: 10 + 2*1 + 3*8 = 36; only F2: 10 + 2*8 + 3*1 = 29
    "facility_location_uncapacitated": ({"facilities": ["F1", "F2"], "customers": ["c1", "c2"],
                                         "fixed_cost": {"F1": 10, "F2": 10}, "demand": {"c1": 2, "c2": 3},
                                         "unit_cost": {"F1": {"c1": 1, "c2": 8}, "F2": {"c1": 8, "c2": 1}}}, 25),
    # A alone: 100 + 6 + 4 = 110; B + C (capacity 11 >= 10): 40 + 30 + 6*2 (x from B) + 4*2 (y from C) = 90;
    # B or C alone lacks capacity; pairs with A cost at least 130
    "facility_location_capacitated": ({"facilities": ["A", "B", "C"], "customers": ["x", "y"],
                                       "fixed_cost": {"A": 100, "B": 40, "C": 30},
                                       "capacity": {"A": 10, "B": 6, "C": 5}, "demand": {"x": 6, "y": 4},
                                       "unit_cost": {"A": {"x": 1, "y": 1}, "B": {"x": 2, "y": 3},
                                                     "C": {"x": 3, "y": 2}}}, 90),
    # no supplier covers both customers (12 > 10), so at least two routes: S1->C2 and S2->C1 cost
    # 10 + 10 + 6*2 + 6*2 = 44; S1->C1 and S2->C2 cost 50 + 10 + 6 + 6 = 72; three routes cost at least 50
    "fixed_charge_transportation": ({"suppliers": ["S1", "S2"], "customers": ["C1", "C2"],
                                     "supply": {"S1": 10, "S2": 10}, "demand": {"C1": 6, "C2": 6},
                                     "unit_cost": {"S1": {"C1": 1, "C2": 2}, "S2": {"C1": 2, "C2": 1}},
                                     "fixed_cost": {"S1": {"C1": 50, "C2": 10}, "S2": {"C1": 10, "C2": 10}}},
                                    44),
    # demand 20, 10, 30; all at once needs 65 hours > 50; produce 30 in t1 and 30 in t3: 2 setups (200)
    # + 10 units held once (20) = 220; t1 and t2: 200 + 30 held (60); every period: 300
    "lot_sizing": ({"products": ["widget"], "periods": ["t1", "t2", "t3"],
                    "demand": {"widget": {"t1": 20, "t2": 10, "t3": 30}}, "initial_inventory": {"widget": 0},
                    "hours_per_unit": {"widget": 1.0}, "setup_hours": {"widget": 5},
                    "setup_cost": {"widget": 100}, "holding_cost": {"widget": 2.0},
                    "capacity_hours": {"t1": 50, "t2": 50, "t3": 50}}, 220),
    # period 2 needs 30 with 20 regular hours: store 4 from period 1 (storage cap; holding 4) and make
    # 6 in overtime (premium 3*6 = 18); material 40*5 = 200; total 222
    "multi_period_production": ({"products": ["gear"], "periods": ["p1", "p2"],
                                 "demand": {"gear": {"p1": 10, "p2": 30}}, "initial_inventory": {"gear": 0},
                                 "hours_per_unit": {"gear": 1.0}, "unit_cost": {"gear": 5},
                                 "holding_cost": {"gear": 1.0}, "regular_hours": {"p1": 20, "p2": 20},
                                 "overtime_hours": {"p1": 20, "p2": 20}, "overtime_premium": 3,
                                 "storage_capacity": 4}, 222),
    # blocks b1 and b3 share no shift, so at least 3 + 4 = 7 workers; x1 = 3, x3 = 4 covers all: 7 * 10
    "shift_scheduling": ({"blocks": ["b1", "b2", "b3", "b4"], "required": {"b1": 3, "b2": 2, "b3": 4, "b4": 1},
                          "shifts": ["s1", "s2", "s3", "s4"],
                          "covers": {"s1": ["b1", "b2"], "s2": ["b2", "b3"], "s3": ["b3", "b4"], "s4": ["b4", "b1"]},
                          "cost": {"s1": 10, "s2": 10, "s3": 10, "s4": 10}}, 70),
    # ordered length 4*5 + 3*3 = 29 needs at least 3 stock items of 10; patterns 1, 1, 2 give 4 and 3
    "cutting_stock": ({"stock_size": 10, "pieces": ["5 cm", "3 cm"], "piece_size": {"5 cm": 5, "3 cm": 3},
                       "demand": {"5 cm": 4, "3 cm": 3}, "patterns": ["pattern 1", "pattern 2", "pattern 3"],
                       "pattern_yield": {"pattern 1": {"5 cm": 2}, "pattern 2": {"3 cm": 3},
                                         "pattern 3": {"5 cm": 1, "3 cm": 1}}}, 3),
    # variance 4a^2 + 2ab + b^2 with a + b = 1 is 3a^2 + 1; the return 10a + 5b >= 7 needs a >= 0.4,
    # so a = 0.4 and the variance is 3 * 0.16 + 1 = 1.48
    "portfolio_qp": ({"assets": ["stock", "bond"], "expected_return": {"stock": 10.0, "bond": 5.0},
                      "covariance": {"stock": {"stock": 4, "bond": 1}, "bond": {"stock": 1, "bond": 1}},
                      "target_return": 7.0}, 1.48),
    # A + B spend exactly 70 for 95; A + C give 90; D needs A and adds only 10; B and C exclude each other
    "project_selection": ({"projects": ["A", "B", "C", "D"], "years": ["year 1"],
                           "value": {"A": 50, "B": 45, "C": 40, "D": 10},
                           "cost": {"A": {"year 1": 40}, "B": {"year 1": 30}, "C": {"year 1": 30},
                                    "D": {"year 1": 20}},
                           "budget": {"year 1": 70}, "requires": [["A", "D"]], "exclusive": [["B", "C"]]}, 95),
    # the corners of a square with side 10 and diagonal 14: the best tour is the perimeter, 40
    "tsp": ({"places": ["A", "B", "C", "D"],
             "distance": {"A": {"B": 10, "C": 14, "D": 10}, "B": {"A": 10, "C": 10, "D": 14},
                          "C": {"A": 14, "B": 10, "D": 10}, "D": {"A": 10, "B": 14, "C": 10}}}, 40),
    # J1 -> M1 (3), J2 and J3 -> M2 (4 + 2 = 6): makespan 6; J2 on M1 instead gives 7; others are worse
    "machine_scheduling": ({"jobs": ["J1", "J2", "J3"], "machines": ["M1", "M2"],
                            "time": {"J1": {"M1": 3, "M2": 6}, "J2": {"M1": 4, "M2": 4},
                                     "J3": {"M1": 5, "M2": 2}}}, 6),
    # the hub route carries at most 6 (fixed 5 + 5, 2 per unit); the other 4 go direct (fixed 20, 5 per
    # unit): 30 + 12 + 20 = 62, against 20 + 50 = 70 all direct
    "network_design": ({"nodes": ["S", "H", "T"], "supply": {"S": 10}, "demand": {"T": 10},
                        "links": [{"from": "S", "to": "H", "capacity": 6, "unit_cost": 1, "fixed_cost": 5},
                                  {"from": "H", "to": "T", "capacity": 10, "unit_cost": 1, "fixed_cost": 5},
                                  {"from": "S", "to": "T", "capacity": 10, "unit_cost": 5, "fixed_cost": 20}]},
                       62),
}


@pytest.mark.parametrize("name", sorted(HAND_INSTANCES))
def test_hand_computed_optimum(name):
    data, optimum = HAND_INSTANCES[name]
    pyomo_objective, matrix_objective, x = solve(name, data)
    assert pyomo_objective == pytest.approx(optimum, rel=1e-7, abs=1e-7)
    assert matrix_objective == pytest.approx(optimum, rel=1e-7, abs=1e-7)
    check = check_solution(get_family(name), data, x, pyomo_objective)
    assert check.passed, check.detail


@pytest.mark.parametrize("name", ["bin_packing", "cutting_stock", "machine_scheduling", "set_cover",
                                  "fixed_charge_transportation", "lot_sizing", "multi_period_production",
                                  "shift_scheduling", "project_selection", "network_design",
                                  "facility_location_capacitated", "portfolio_qp"])
def test_infeasible_variant_of_hand_instance(name):
    data, _ = HAND_INSTANCES[name]
    variant = get_family(name).make_infeasible(copy.deepcopy(data), random.Random(0))
    assert variant is not None
    assert matrix_status(name, variant) == "infeasible"


def test_families_without_a_natural_infeasible_variant():
    for name in ("facility_location_uncapacitated", "tsp"):
        data, _ = HAND_INSTANCES[name]
        assert get_family(name).make_infeasible(data, random.Random(0)) is None


# ------------------------------------------------------------------------------- helpers and properties

def test_first_fit_decreasing_is_a_feasible_bin_count():
    # 6 | 5 | 6+4 | 5+3 | 5+3+2: two bins, each filled to 10
    assert first_fit_decreasing([6, 5, 4, 3, 2], 10) == 2
    # three items of 6 never share a bin of 10
    assert first_fit_decreasing([6, 6, 6], 10) == 3


def test_maximal_patterns_leave_no_room_for_another_piece():
    # widths 5 and 3 on 10: (2, 0) wastes 0, (1, 1) wastes 2, (0, 3) wastes 1; (1, 0) has room for a 3
    assert sorted(maximal_patterns([5, 3], 10)) == [(0, 3), (1, 1), (2, 0)]


def test_max_flow_value_of_a_small_network():
    # the links into t (3 + 2) are the smallest cut; once b->t carries 6, the links out of s (5 + 2)
    # are, and a's spare 2 units reach t through a->b
    capacity = {("s", "a"): 5, ("a", "t"): 3, ("s", "b"): 2, ("b", "t"): 2, ("a", "b"): 4}
    assert max_flow_value(["s", "a", "b", "t"], capacity, "s", "t") == 5
    capacity[("b", "t")] = 6
    assert max_flow_value(["s", "a", "b", "t"], capacity, "s", "t") == 7


def test_tsp_rows_reject_two_subtours():
    data, _ = HAND_INSTANCES["tsp"]
    places = data["places"]
    legs = {("A", "B"), ("B", "A"), ("C", "D"), ("D", "C")}  # every place has one leg in and one out
    travel = {(a, b): 1.0 if (a, b) in legs else 0.0 for a in places for b in places if a != b}
    order = {"B": 1.0, "C": 2.0, "D": 3.0}
    rows = {row.name: row for row in get_family("tsp").constraint_rows(data, {"travel": travel, "order": order})}
    assert all(rows[f"leave[{p}]"].violation() == 0 and rows[f"arrive[{p}]"].violation() == 0 for p in places)
    assert rows["single_tour"].violation() > 0
    assert max(row.violation() for name, row in rows.items() if name.startswith("no_subtour")) > 0


def test_project_selection_enumeration_agrees_with_the_solver_and_the_budget_binds():
    family = get_family("project_selection")
    for seed in range(3):
        rng = random.Random(seed)
        data = family.sample(rng, "medium", family.scenarios[seed % 3])
        best = family._best_portfolio(data)
        matrix = MatrixModel("max")
        family.build_highspy(data, matrix)
        result = matrix.solve()
        assert result.objective == pytest.approx(sum(data["value"][p] for p in best))
        first = data["years"][0]
        assert sum(data["cost"][p][first] for p in best) == data["budget"][first]


def test_portfolio_covariances_are_positive_definite_and_targets_reachable():
    import numpy as np

    family = get_family("portfolio_qp")
    for difficulty in DIFFICULTIES:
        for seed in range(5):
            rng = random.Random(seed)
            scenario = family.scenarios[seed % 3]
            data = family.sample(rng, difficulty, scenario)
            assets = data["assets"]
            sigma = np.array([[data["covariance"][a][b] for b in assets] for a in assets], dtype=float)
            assert np.allclose(sigma, sigma.T)
            assert np.linalg.eigvalsh(sigma).min() > 0
            assert data["target_return"] <= family._highest_return(data)


def test_cutting_stock_patterns_fit_and_every_piece_has_a_pattern():
    family = get_family("cutting_stock")
    for difficulty in DIFFICULTIES:
        data = family.sample(random.Random(11), difficulty, family.scenarios[0])
        for pattern in data["patterns"]:
            used = sum(data["piece_size"][p] * n for p, n in data["pattern_yield"][pattern].items())
            assert 0 < used <= data["stock_size"]
        for piece in data["pieces"]:
            assert any(piece in data["pattern_yield"][k] for k in data["patterns"])
