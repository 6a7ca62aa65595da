"""Structure variants of the production, transport, selection, covering, routing, scheduling and portfolio
families (issue #23): every variant a family samples is found, writes its own program, states its optional
constraints, and verifies under the five checks (plus the statement check)."""

from __future__ import annotations

import pytest
from synth_variant_checks import check_every_variant

# family -> {variant part: a phrase the text statement has exactly when the instance has that part; None for a
# modelling choice that leaves the problem, and so the statement, unchanged}
STATED = {
    "production_mix": {"integer_units": "Only whole", "min_output": "A signed contract requires",
                       "extra_capacity": "can be bought: up to"},
    "transportation": {"route_capacity": "Route limits:", "forbidden": "routes are closed",
                       "fixed_cost": "adds a fixed cost"},
    "multi_dim_knapsack": {"max_items": "at most", "requires": "depend on another one",
                           "max_copies": "several times"},
    "multi_period_production": {"backorder_cost": "delivered late", "setup_cost": "requires a setup",
                                "final_stock": "a stock must remain"},
    "network_design": {"hub_capacity": "throughput limit", "hub_cost": "Using an intermediate node"},
    "portfolio_qp": {"risk_aversion": "risk-adjusted", "high_risk": "high-risk", "current_weight": "turnover"},
    "project_selection": {"exclusive": "are alternatives", "synergy": "synergy bonus",
                          "max_projects": "can run at most"},
    "set_cover": {"max_sites": "At most", "conflicts": "cannot both be chosen", "shortfall_penalty": "at a penalty"},
    "shift_scheduling": {"max_staff": "hiring freeze", "max_per_shift": "Workstations are limited",
                         "min_crew": "needs a crew of at least"},
    "tsp": {"flow": None, "precedence": "must come before others", "closed": "no usable direct connection"},
    "shortest_path": {"avoid": "may not pass through", "max_hops": "links in all", "resource": "Each link also has"},
    "vertex_cover": {"forbidden": "cannot be chosen", "max_nodes": "No more than", "uncovered_penalty": "left uncovered"},
    "workforce_planning": {"overtime_cost": "overtime hours", "max_releases": "labour agreement",
                           "min_staff": "must be on staff in every month"},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STATED))
def test_every_variant_writes_its_own_program_states_it_and_verifies(name):
    check_every_variant(name, STATED[name], tag="variants-b")
