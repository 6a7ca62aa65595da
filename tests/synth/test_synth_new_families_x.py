"""Every structure variant of the dispersion, covering and hub location families added for issue #23
(point 3) verifies: sampled until each variant appears, rendered, and checked in the sandbox; the
infeasible version of each variant stays infeasible."""

from __future__ import annotations

import pytest
from synth_variant_checks import check_variant_count

from trex_sandbox import Sandbox, SandboxSettings

# family -> how many variants `sample` draws (the product of its independent choices)
FAMILY_VARIANTS = {
    "p_dispersion": 8,
    "maxisum_dispersion": 8,
    "cell_tower_coverage": 8,
    "hub_location": 8,
}


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxSettings(timeout=20, memory_mb=2048, workers=1)) as running:
        yield running


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAMILY_VARIANTS))
def test_every_variant_verifies(name, sandbox):
    check_variant_count(name, FAMILY_VARIANTS[name], "new-families-x", sandbox)
