"""Structure variants of the bounded knapsack, cutting stock, diet blending and media allocation families
(issue #23): every variant a family samples is found, writes its own program, states its optional
constraints, and verifies under the five checks (plus the statement check)."""

from __future__ import annotations

import pytest
from synth_variant_checks import check_every_variant

# family -> {variant part: a phrase the text statement has exactly when the instance has that part}
STATED = {
    "bounded_knapsack": {"second_capacity": "is limited too", "max_types": "different types may be taken",
                         "type_cost": "has a fixed cost"},
    "cutting_stock": {"max_surplus": "Surplus is limited", "stock_available": "are in stock",
                      "setup_cost": "setting the knives"},
    "diet_blending": {"batch_size": "must add up to exactly", "max_share": "Share limits", "whole_units": "Only whole"},
    "media_allocation": {"min_share": "must go to", "saturation": "Audiences saturate",
                         "creative_cost": "Producing the ad"},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STATED))
def test_every_variant_writes_its_own_program_states_it_and_verifies(name):
    check_every_variant(name, STATED[name], tag="variants-c")
