"""The scheduling, routing and staffing families of issue #23 point 3: every structure variant of each
is drawn by `sample`, writes its own program, states its optional parts, and passes the five verifications."""

from __future__ import annotations

import random

import pytest

from data_synth.families import all_families
from data_synth.render import program_data, render_program
from data_synth.verify import verify_instance
from trex_sandbox import Sandbox, SandboxSettings

SCHEDULING_FAMILIES = [name for name in (
    "aircraft_assignment", "aircraft_landing", "flow_shop", "job_shop", "vrptw", "static_line_planning",
    "team_formation", "personnel_deployment", "crew_scheduling",
) if name in all_families()]
PER_VARIANT = 2


def instances_by_variant(family, per_variant: int) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for k in range(300):
        rng = random.Random(f"sched-variants:{family.name}:{k}")
        data = family.sample(rng, "small", family.scenarios[k % len(family.scenarios)])
        same = found.setdefault(family.variant_of(data), [])
        if len(same) < per_variant:
            same.append(data)
    return found


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxSettings(timeout=20, memory_mb=2048, workers=1)) as running:
        yield running


@pytest.mark.slow
@pytest.mark.parametrize("name", SCHEDULING_FAMILIES)
def test_every_variant_has_its_own_program_and_verifies(name, sandbox):
    family = all_families()[name]
    variants = instances_by_variant(family, PER_VARIANT)
    assert len(variants) >= 4, f"{name} draws only the variants {sorted(variants)}"
    codes = {variant: family.model_code_for(same[0]) for variant, same in variants.items()}
    assert len(set(codes.values())) == len(codes), "two variants write the same program"
    for variant, same in sorted(variants.items()):
        passed, details = 0, []
        for k, data in enumerate(same):
            representation = ("text", "table", "file")[k % 3]
            program = render_program(family, data, representation)
            outcome = verify_instance(family, data, program, program_data(data, representation), sandbox)
            if not outcome.passed:
                # an integer optimum need not touch a row exactly: only the quality check may reject
                assert outcome.reject_reason == "quality", f"{name} {variant}: {outcome.reject_detail}"
                details.append(outcome.reject_detail)
                continue
            passed += 1
        assert passed >= 1, f"{name} {variant}: no instance verified ({details})"
        infeasible = family.make_infeasible(same[0], random.Random(5))
        if infeasible is not None:
            program = render_program(family, infeasible, "file")
            outcome = verify_instance(family, infeasible, program, infeasible, sandbox, expect_infeasible=True)
            assert outcome.passed, f"{name} {variant} infeasible: {outcome.reject_reason}: {outcome.reject_detail}"
