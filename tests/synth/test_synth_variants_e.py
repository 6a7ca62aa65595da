"""Structure variants of the lot-sizing, machine-scheduling and network-flow families (issue #23): every
variant a family samples is found, writes its own program, states its optional constraints, and verifies
under the five checks (plus the statement check); the infeasible instance stays infeasible in every variant."""

from __future__ import annotations

import random

import pytest

from data_synth.families import get_family
from data_synth.render import program_data, render_program
from data_synth.verify import verify_instance
from trex_sandbox import Sandbox, SandboxSettings

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
BASE = {name: "base" for name in STATED}


def variant_names(parts: list[str], base: str) -> set[str]:
    """Every "+"-joined combination of `parts` (in order), with `base` for none."""
    names = set()
    for mask in range(2 ** len(parts)):
        chosen = [part for k, part in enumerate(parts) if mask >> k & 1]
        names.add("+".join(chosen) or base)
    return names


def by_variant(name: str, per_variant: int) -> dict[str, list[tuple]]:
    """variant -> up to `per_variant` (scenario, instance) pairs of small instances."""
    family = get_family(name)
    expected = variant_names(list(STATED[name]), BASE[name])
    found: dict[str, list[tuple]] = {}
    for k in range(600):
        rng = random.Random(f"variants-e:{name}:{k}")
        scenario = family.scenarios[k % len(family.scenarios)]
        data = family.sample(rng, "small", scenario)
        same = found.setdefault(family.variant_of(data), [])
        if len(same) < per_variant:
            same.append((scenario, data))
        if set(found) == expected and all(len(same) >= per_variant for same in found.values()):
            break
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STATED))
def test_every_variant_writes_its_own_program_states_it_and_verifies(name):
    family = get_family(name)
    variants = by_variant(name, per_variant=2)
    assert set(variants) == variant_names(list(STATED[name]), BASE[name])
    codes = {variant: family.model_code_for(same[0][1]) for variant, same in variants.items()}
    assert len(set(codes.values())) == len(codes), "each variant must change the model"
    with Sandbox(SandboxSettings(timeout=20, memory_mb=2048, workers=1)) as sandbox:
        for variant, same in variants.items():
            passed, details = 0, []
            for k, (scenario, data) in enumerate(same):
                text = family.render_statement(data, scenario, "text")
                for part, phrase in STATED[name].items():
                    if phrase is None:
                        continue
                    assert (phrase in text) == (part in variant.split("+")), f"{variant}: {phrase!r}"
                representation = ("text", "table", "file")[(k + len(variant)) % 3]
                statement = family.render_statement(data, scenario, representation)
                program = render_program(family, data, representation)
                outcome = verify_instance(family, data, program, program_data(data, representation), sandbox,
                                          statement=statement, representation=representation)
                if not outcome.passed:
                    # the quality check may reject an instance without a binding row; nothing else may fail
                    assert outcome.reject_reason == "quality", f"{variant}: {outcome.reject_detail}"
                    details.append(outcome.reject_detail)
                    continue
                passed += 1
            assert passed >= 1, f"{name} {variant}: no instance of {len(same)} verified ({details})"
            infeasible = family.make_infeasible(same[0][1], random.Random(5))
            if infeasible is not None:
                program = render_program(family, infeasible, "file")
                outcome = verify_instance(family, infeasible, program, infeasible, sandbox, expect_infeasible=True)
                assert outcome.passed, f"{variant}, infeasible: {outcome.reject_reason}: {outcome.reject_detail}"
