"""Structure variants: a family whose instances change the model (optional constraint groups) writes a
different program per variant, and every variant passes the five verifications."""

from __future__ import annotations

import random

import pytest

from data_synth.families import get_family
from data_synth.render import program_data, render_program
from data_synth.stats import main as stats_main
from data_synth.stats import program_skeleton_counts
from data_synth.verify import verify_instance
from trex_sandbox import Sandbox, SandboxSettings


def knapsack_by_variant(per_variant: int = 1) -> dict[str, list[dict]]:
    family = get_family("knapsack_01")
    found: dict[str, list[dict]] = {}
    for k in range(400):
        rng = random.Random(f"variants:{k}")
        data = family.sample(rng, "small", family.scenarios[k % len(family.scenarios)])
        same = found.setdefault(family.variant_of(data), [])
        if len(same) < per_variant:
            same.append(data)
    return found


def test_knapsack_has_four_program_skeletons_and_the_stats_command_counts_them(capsys):
    family = get_family("knapsack_01")
    variants = knapsack_by_variant()
    assert set(variants) == {"capacity-only", "max_items", "conflicts", "max_items+conflicts"}
    codes = {name: family.model_code_for(same[0]) for name, same in variants.items()}
    assert len(set(codes.values())) == 4
    assert "model.conflicts" in codes["conflicts"] and "model.max_items" not in codes["conflicts"]
    assert program_skeleton_counts(per_difficulty=12)["knapsack_01"] == 4
    assert stats_main(["--programs"]) == 0
    assert any(line.split()[:2] == ["knapsack_01", "4"] for line in capsys.readouterr().out.splitlines())


@pytest.mark.slow
def test_every_knapsack_variant_verifies_and_states_its_constraints():
    family = get_family("knapsack_01")
    with Sandbox(SandboxSettings(timeout=20, memory_mb=2048, workers=1)) as sandbox:
        for name, same in knapsack_by_variant(per_variant=6).items():
            passed, details = 0, []
            for data in same:
                statement = family.render_statement(data, family.scenarios[0], "text")
                assert ("exclude each other" in statement) == ("conflicts" in data), name
                assert ("At most" in statement) == ("max_items" in data), name
                program = render_program(family, data, "text")
                outcome = verify_instance(family, data, program, program_data(data, "text"), sandbox)
                if not outcome.passed:
                    # the quality check may reject an instance whose capacity is not exactly binding;
                    # every other check must agree on every instance
                    assert outcome.reject_reason == "quality", f"{name}: {outcome.reject_detail}"
                    details.append(outcome.reject_detail)
                    continue
                passed += 1
                for a, b in data.get("conflicts", ()):
                    assert outcome.x["take"][a] + outcome.x["take"][b] <= 1 + 1e-6
            assert passed >= 1, f"{name}: no instance of 6 verified ({details})"
