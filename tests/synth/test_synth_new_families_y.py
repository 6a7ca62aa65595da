"""Every structure variant of the covering, power, lot-sizing and capital-budgeting families added for
issue #23 (point 3) verifies: sampled until each variant appears, rendered, and checked in the sandbox;
the deliberately infeasible version of each variant stays infeasible."""

from __future__ import annotations

import random

import pytest

from data_synth.families import get_family
from data_synth.render import program_data, render_program
from data_synth.verify import verify_instance
from trex_sandbox import Sandbox, SandboxSettings

# family -> how many variants `sample` draws (the product of its independent choices)
FAMILY_VARIANTS = {
    "lot_sizing_backlogging": 8,
    "multi_period_investment": 8,
    "set_multicover": 8,
    "unit_commitment": 8,
}


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxSettings(timeout=20, memory_mb=2048, workers=1)) as running:
        yield running


def by_variant(name: str, per_variant: int) -> dict[str, list[tuple[object, dict]]]:
    family = get_family(name)
    found: dict[str, list[tuple[object, dict]]] = {}
    for k in range(300):
        scenario = family.scenarios[k % len(family.scenarios)]
        data = family.sample(random.Random(f"new-families-y:{name}:{k}"), "small", scenario)
        same = found.setdefault(family.variant_of(data), [])
        if len(same) < per_variant:
            same.append((scenario, data))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAMILY_VARIANTS))
def test_every_variant_verifies(name, sandbox):
    family = get_family(name)
    variants = by_variant(name, per_variant=2)
    assert len(variants) == FAMILY_VARIANTS[name], sorted(variants)
    codes = {family.model_code_for(same[0][1]) for same in variants.values()}
    assert len(codes) == len(variants), "every variant must write its own program"
    for variant, same in variants.items():
        passed, details = 0, []
        for k, (scenario, data) in enumerate(same):
            representation = ("text", "table", "file")[k % 3]
            statement = family.render_statement(data, scenario, representation)
            program = render_program(family, data, representation)
            outcome = verify_instance(family, data, program, program_data(data, representation), sandbox,
                                      statement=statement, representation=representation)
            if not outcome.passed:
                assert outcome.reject_reason == "quality", f"{variant}: {outcome.reject_detail}"
                details.append(outcome.reject_detail)
                continue
            passed += 1
        assert passed >= 1, f"{name} {variant}: no instance verified ({details})"
        infeasible = family.make_infeasible(same[0][1], random.Random(5))
        if infeasible is not None:
            program = render_program(family, infeasible, "file")
            outcome = verify_instance(family, infeasible, program, infeasible, sandbox, expect_infeasible=True)
            assert outcome.passed, f"{name} {variant}, infeasible: {outcome.reject_reason}: {outcome.reject_detail}"
