"""The check every structure-variant test file runs (issue #23): each variant a family samples is found,
writes its own program, states its optional parts, verifies under every check, and its infeasible version
stays infeasible. A test file gives the family's variant parts and the phrase its text statement has exactly
when an instance has that part (None for a modelling choice that leaves the statement unchanged)."""

from __future__ import annotations

import random

from data_synth.families import get_family
from data_synth.render import program_data, render_program
from data_synth.verify import verify_instance
from trex_sandbox import Sandbox, SandboxSettings


def variant_names(parts: list[str], base: str) -> set[str]:
    """Every "+"-joined combination of `parts` (in order), with `base` for none."""
    names = set()
    for mask in range(2 ** len(parts)):
        chosen = [part for k, part in enumerate(parts) if mask >> k & 1]
        names.add("+".join(chosen) or base)
    return names


def by_variant(name: str, stated: dict[str, str | None], per_variant: int, tag: str,
               base: str = "base") -> dict[str, list[tuple]]:
    """variant -> up to `per_variant` (scenario, instance) pairs of small instances, drawn with seeds `tag`."""
    family = get_family(name)
    expected = variant_names(list(stated), base)
    found: dict[str, list[tuple]] = {}
    for k in range(600):
        rng = random.Random(f"{tag}:{name}:{k}")
        scenario = family.scenarios[k % len(family.scenarios)]
        data = family.sample(rng, "small", scenario)
        same = found.setdefault(family.variant_of(data), [])
        if len(same) < per_variant:
            same.append((scenario, data))
        if set(found) == expected and all(len(same) >= per_variant for same in found.values()):
            break
    return found


def check_every_variant(name: str, stated: dict[str, str | None], tag: str, base: str = "base") -> None:
    family = get_family(name)
    variants = by_variant(name, stated, 2, tag, base)
    assert set(variants) == variant_names(list(stated), base)
    codes = {variant: family.model_code_for(same[0][1]) for variant, same in variants.items()}
    assert len(set(codes.values())) == len(codes), "each variant must change the model"
    with Sandbox(SandboxSettings(timeout=20, memory_mb=2048, workers=1)) as sandbox:
        for variant, same in variants.items():
            passed, details = 0, []
            for k, (scenario, data) in enumerate(same):
                text = family.render_statement(data, scenario, "text")
                for part, phrase in stated.items():
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


def check_variant_count(name: str, count: int, tag: str, sandbox) -> None:
    """For a family whose statements are not matched phrase by phrase: sampling finds `count` variants, each
    writes its own program and verifies (at most a quality reject), and each infeasible version stays so."""
    family = get_family(name)
    variants: dict[str, list[tuple]] = {}
    for k in range(300):
        scenario = family.scenarios[k % len(family.scenarios)]
        data = family.sample(random.Random(f"{tag}:{name}:{k}"), "small", scenario)
        same = variants.setdefault(family.variant_of(data), [])
        if len(same) < 2:
            same.append((scenario, data))
    assert len(variants) == count, sorted(variants)
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
