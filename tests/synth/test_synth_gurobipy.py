"""gurobipy programs (issue #23 point 2): a family that gives its model in gurobipy has the gurobipy
program styles, and every such program, of every structure variant the family samples, passes the same six
checks as the Pyomo program of the instance (check 3 runs it with Gurobi in the sandbox and compares its
objective with check 1's). Skipped where gurobipy is not installed (it is in the dev extra)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from data_synth.config import SynthConfig
from data_synth.families import all_families, get_family
from data_synth.render import program_data, program_styles, render_program, sft_sample
from data_synth.synthesis import check_config, family_styles, gurobipy_fits, program_libraries
from data_synth.verify import verify_instance
from trex_sandbox import Sandbox, SandboxSettings

gurobipy = pytest.importorskip("gurobipy", reason="gurobipy is not installed (pip install gurobipy)")

GUROBIPY_FAMILIES = sorted(name for name, family in all_families().items() if family.gurobipy_code)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxSettings(timeout=20, memory_mb=2048, workers=1)) as running:
        yield running


def instances_by_variant(name: str, per_variant: int = 2, tries: int = 300) -> dict[str, list[tuple]]:
    """variant -> up to `per_variant` (scenario, instance) pairs, small and medium, from fixed seeds."""
    family = get_family(name)
    found: dict[str, list[tuple]] = {}
    for k in range(tries):
        rng = random.Random(f"gurobipy:{name}:{k}")
        scenario = family.scenarios[k % len(family.scenarios)]
        data = family.sample(rng, ("small", "medium")[k % 2], scenario)
        same = found.setdefault(family.variant_of(data), [])
        if len(same) < per_variant:
            same.append((scenario, data))
    return found


def test_the_transportation_family_and_others_give_a_gurobipy_model():
    assert "transportation" in GUROBIPY_FAMILIES
    styles = program_styles(get_family("transportation"), None, ("pyomo", "gurobipy"))
    keys = [style.key for style in styles]
    assert "library:gurobipy/builder:module/footer:termination" in keys
    assert "library:gurobipy/builder:function/footer:check" in keys
    # the Pyomo keys recipes pin are unchanged
    assert "sets:indexed/builder:module/footer:termination" in keys
    assert [style.key for style in program_styles(get_family("transportation"))] == [
        key for key in keys if not key.startswith("library:")]


@pytest.mark.slow
@pytest.mark.parametrize("name", GUROBIPY_FAMILIES)
def test_every_variant_of_the_gurobipy_program_passes_the_six_checks(name, sandbox):
    family = get_family(name)
    variants = instances_by_variant(name)
    styles = program_styles(family, None, ("gurobipy",))
    assert len(styles) == 4
    codes = {variant: family.gurobipy_code_for(same[0][1]) for variant, same in variants.items()}
    assert len(set(codes.values())) == len(codes), "each variant must change the gurobipy model"
    checked = 0
    for v, (variant, same) in enumerate(sorted(variants.items())):
        for k, (scenario, data) in enumerate(same):
            if not gurobipy_fits(family, data):
                continue
            representation = ("text", "table", "file")[(v + k) % 3]
            style = styles[(v + k) % len(styles)]
            program = render_program(family, data, representation, style)
            assert "import gurobipy as gp" in program and "pyomo" not in program
            outcome = verify_instance(family, data, program, program_data(data, representation), sandbox,
                                      statement=family.render_statement(data, scenario, representation),
                                      representation=representation)
            if not outcome.passed:
                # the quality check may reject an instance without a binding row (its Pyomo program would be
                # rejected the same way); nothing else may fail
                assert outcome.reject_reason == "quality", f"{variant} ({style.key}): {outcome.reject_detail}"
                continue
            program_check = next(check for check in outcome.checks if check.name == "program_agrees")
            assert "gurobipy" in program_check.detail or "reported optimal" in program_check.detail
            checked += 1
        infeasible = family.make_infeasible(same[0][1], random.Random(5))
        if infeasible is not None and gurobipy_fits(family, infeasible):
            program = render_program(family, infeasible, "file", styles[v % len(styles)])
            outcome = verify_instance(family, infeasible, program, infeasible, sandbox, expect_infeasible=True)
            assert outcome.passed, f"{variant}, infeasible: {outcome.reject_reason}: {outcome.reject_detail}"
    assert checked >= len(variants), f"{name}: only {checked} gurobipy programs verified over {len(variants)} variants"


def test_a_gurobipy_sample_asks_for_gurobipy_and_a_pyomo_one_for_pyomo():
    record = {"id": "train-s0-000001", "instance": "abc", "family": "transportation", "representation": "text",
              "statement": "Ship the goods.", "formulation": "min c x", "status": "optimal", "objective": 1.0,
              "program": "import gurobipy as gp\n", "program_style": "library:gurobipy/builder:module/footer:check"}
    sample = sft_sample(record, "program")
    assert "gurobipy" in sample["messages"][0]["content"] and "gurobipy" in sample["messages"][1]["content"]
    assert "Pyomo" not in sample["messages"][1]["content"]
    pyomo = sft_sample({**record, "program_style": "sets:plain/builder:module/footer:check"}, "program")
    assert "Pyomo and HiGHS" in pyomo["messages"][1]["content"]


def test_the_libraries_default_to_pyomo_and_the_installed_gurobipy_and_are_checked():
    assert program_libraries(SynthConfig()) == ("pyomo", "gurobipy")
    assert program_libraries(SynthConfig(program_libraries=["pyomo"])) == ("pyomo",)
    with pytest.raises(ValueError, match=r"program_libraries: unknown libraries cplex"):
        check_config(SynthConfig(program_libraries=["cplex"]))
    # a Pyomo-only run never writes a gurobipy program
    family = get_family("transportation")
    data = family.sample(random.Random(3), "small", family.scenarios[0])
    assert {style.library for style in family_styles(SynthConfig(program_libraries=["pyomo"]), family, data)} == {"pyomo"}
    assert "gurobipy" in {style.library for style in family_styles(SynthConfig(), family, data)}


def test_an_instance_past_the_licence_limit_has_no_gurobipy_style():
    family = get_family("transportation")
    sources, destinations = [f"S{i}" for i in range(50)], [f"D{j}" for j in range(50)]  # 2,500 routes
    big = {"sources": sources, "destinations": destinations, "supply": {s: 100 for s in sources},
           "demand": {d: 50 for d in destinations}, "cost": {s: {d: 1 for d in destinations} for s in sources}}
    assert not gurobipy_fits(family, big)
    assert {style.library for style in family_styles(SynthConfig(), family, big)} == {"pyomo"}
    small = family.sample(random.Random(1), "industrial", family.scenarios[0])  # 1,200 routes
    assert gurobipy_fits(family, small)


@pytest.mark.slow
def test_trex_synth_writes_verified_gurobipy_records(tmp_path: Path):
    from data_synth.synthesis import synthesize

    out = tmp_path / "synth"
    config = SynthConfig(n=6, eval_n=2, seed=3, families=["transportation"], program_libraries=["gurobipy"],
                         workers=1, difficulty={"small": 1.0})
    synthesize(config, out)
    records = [json.loads(line) for path in sorted((out / "problems").glob("*.jsonl"))
               for line in path.read_text().splitlines()]
    assert len(records) == 6
    for record in records:
        assert record["program_style"].startswith("library:gurobipy/")
        assert "gp.Model(" in record["program"]
        assert all(check["passed"] for check in record["verification"])
