"""Every structure variant of the production, allocation and network families added for issue #23
(point 3) verifies: sampled until each variant appears, rendered, and checked in the sandbox."""

from __future__ import annotations

import pytest
from synth_variant_checks import check_variant_count

from trex_sandbox import Sandbox, SandboxSettings

# family -> how many variants `sample` draws (the product of its independent choices)
FAMILY_VARIANTS = {
    "market_share": 8,
    "revenue_management": 8,
    "car_selection": 8,
    "contract_allocation": 8,
    "factory_planning": 6,
    "farm_planning": 8,
    "steel_production": 8,
    "multi_commodity_flow": 8,
    "supply_chain": 8,
}


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxSettings(timeout=20, memory_mb=2048, workers=1)) as running:
        yield running


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAMILY_VARIANTS))
def test_every_variant_verifies(name, sandbox):
    check_variant_count(name, FAMILY_VARIANTS[name], "new-families-prod", sandbox)
