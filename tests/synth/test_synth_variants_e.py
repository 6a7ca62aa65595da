"""Structure variants of the lot-sizing, machine-scheduling and network-flow families (issue #23): every
variant a family samples is found, writes its own program, states its optional constraints, and verifies
under the five checks (plus the statement check); the infeasible instance stays infeasible in every variant."""

from __future__ import annotations

import pytest
from synth_variant_checks import check_every_variant

# family -> {variant part: a phrase the text statement has exactly when the instance has that part; None for a
# modelling choice that leaves the problem, and so the statement, unchanged}
STATED = {
    "lot_sizing": {"backorder_cost": "may be delivered late", "max_lot": "at most one batch",
                   "overtime_cost": "overtime hours"},
    "machine_scheduling": {"unavailable": "cannot run on", "ready_time": "becomes available after",
                           "machine_cost": "running rate"},
    "max_flow": {"node_capacity": "throughput limit", "budget": "operating budget", "min_flow": "minimum flow"},
    "min_cost_flow": {"fixed_cost": "fixed amount", "hub_capacity": "limited amount in total",
                      "handling_cost": "handling fee"},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STATED))
def test_every_variant_writes_its_own_program_states_it_and_verifies(name):
    check_every_variant(name, STATED[name], tag="variants-e")
