"""Structure variants of the assignment, packing, facility, flow and scheduling families (issue #23):
every variant a family samples is found, writes its own program, and verifies under the five checks."""

from __future__ import annotations

import random

import pytest

from data_synth.families import get_family
from data_synth.render import program_data, render_program
from data_synth.verify import verify_instance
from trex_sandbox import Sandbox, SandboxSettings

# family -> {variant part: a phrase the text statement has exactly when the variant has that part}
STATED = {
    "assignment": {"max_tasks": "can take up to", "bottleneck": "largest single"},
    "bin_packing": {"max_per_bin": "may hold more than", "conflicts": "must travel in different"},
}


def variant_names(parts: list[str], base: str = "base") -> set[str]:
    """Every "+"-joined combination of `parts` (in order), with `base` for none."""
    names = set()
    for mask in range(2 ** len(parts)):
        chosen = [part for k, part in enumerate(parts) if mask >> k & 1]
        names.add("+".join(chosen) or base)
    return names


# family -> every variant name its `sample` draws
VARIANTS = {name: variant_names(list(parts)) for name, parts in STATED.items()}


def by_variant(name: str, per_variant: int) -> dict[str, list[dict]]:
    family = get_family(name)
    found: dict[str, list[dict]] = {}
    for k in range(400):
        rng = random.Random(f"variants-a:{name}:{k}")
        data = family.sample(rng, "small", family.scenarios[k % len(family.scenarios)])
        same = found.setdefault(family.variant_of(data), [])
        if len(same) < per_variant:
            same.append(data)
        if len(found) == len(VARIANTS[name]) and all(len(s) >= per_variant for s in found.values()):
            break
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_variant_writes_its_own_program_and_verifies(name):
    family = get_family(name)
    variants = by_variant(name, per_variant=3)
    assert set(variants) == VARIANTS[name]
    codes = {variant: family.model_code_for(same[0]) for variant, same in variants.items()}
    assert len(set(codes.values())) == len(codes), "each variant must change the model"
    with Sandbox(SandboxSettings(timeout=20, memory_mb=2048, workers=1)) as sandbox:
        for variant, same in variants.items():
            passed, details = 0, []
            for k, data in enumerate(same):
                statement = family.render_statement(data, family.scenarios[k % len(family.scenarios)], "text")
                for part, phrase in STATED[name].items():
                    assert (phrase in statement) == (part in variant.split("+")), f"{variant}: {phrase!r}"
                representation = ("text", "table", "file")[k % 3]
                program = render_program(family, data, representation)
                outcome = verify_instance(family, data, program, program_data(data, representation), sandbox)
                if not outcome.passed:
                    # the quality check may reject an instance without a binding row; nothing else may fail
                    assert outcome.reject_reason == "quality", f"{variant}: {outcome.reject_detail}"
                    details.append(outcome.reject_detail)
                    continue
                passed += 1
            assert passed >= 1, f"{name} {variant}: no instance of {len(same)} verified ({details})"
            infeasible = family.make_infeasible(same[0], random.Random(5))
            if infeasible is not None:
                program = render_program(family, infeasible, "file")
                outcome = verify_instance(family, infeasible, program, infeasible, sandbox, expect_infeasible=True)
                assert outcome.passed, f"{variant}, infeasible: {outcome.reject_reason}: {outcome.reject_detail}"
