"""Structure variants of the facility location, fixed-charge transportation and generalized assignment
families (issue #23): every variant a family samples is found, writes its own program, states its optional
constraints, and verifies under the five checks (plus the statement check)."""

from __future__ import annotations

import pytest
from synth_variant_checks import check_every_variant

# family -> {variant part: a phrase the text statement has exactly when the instance has that part}
STATED = {
    "facility_location_capacitated": {"single_source": "supplied entirely by a single", "max_open": "may operate.",
                                      "min_throughput": "must supply at least its minimum"},
    "facility_location_uncapacitated": {"max_open": "can be opened.", "must_open": "must be opened in any case",
                                        "max_unit_cost": "may only be served by"},
    "fixed_charge_transportation": {"route_capacity": "Some routes have a capacity", "max_routes": "may be used in total",
                                    "supplier_cost": "ships anything also costs"},
    "generalized_assignment": {"max_tasks": "may take on more than", "forbidden": "assignments are not allowed",
                               "conflicts": "must go to different"},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STATED))
def test_every_variant_writes_its_own_program_states_it_and_verifies(name):
    check_every_variant(name, STATED[name], tag="variants-d")
