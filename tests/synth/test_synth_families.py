"""Every family in data_synth/families (including ones added later) against the family contract and
all five verifications, over several seeds and every difficulty.

Family authors: `.venv/bin/python -m pytest tests/synth/test_synth_families.py -k <family> -q`.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from data_synth.families import all_families
from data_synth.family import DIFFICULTIES, DOMAINS, INDUSTRIAL, REPRESENTATIONS, MatrixModel, fmt, plural
from data_synth.render import plain_sets, program_data, program_styles, render_program
from data_synth.statements import SPLIT_NAMES, apply_skeleton, draw_skeleton, entity_names
from data_synth.verify import verify_instance
from trex_sandbox import Sandbox, SandboxSettings

FAMILIES = sorted(all_families())
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxSettings(timeout=20, memory_mb=2048, workers=1)) as running:
        yield running


def instance(family, seed: int, difficulty: str):
    """One instance; odd seeds draw from the eval split's scenarios (the training ones where it has none)."""
    rng = random.Random(f"family-test:{family.name}:{seed}:{difficulty}")
    scenario = rng.choice(family.scenarios_for("eval" if seed % 2 else "train"))
    return rng, scenario, family.sample(rng, difficulty, scenario)


def numbers_in(obj) -> list:
    if isinstance(obj, bool):
        return []
    if isinstance(obj, int | float):
        return [obj]
    if isinstance(obj, dict):
        return [n for value in obj.values() for n in numbers_in(value)]
    if isinstance(obj, list | tuple):
        return [n for value in obj for n in numbers_in(value)]
    return []


def appears(number, text: str) -> bool:
    """`number` written verbatim (as `fmt` writes it), or as a percentage for a fraction."""
    forms = [fmt(number)]
    if isinstance(number, float) and 0 < abs(number) < 1:
        forms.append(fmt(round(number * 100, 6)) + "%")
    return any(re.search(r"(?<![\d.])" + re.escape(form) + r"(?!\.?\d)", text) for form in forms)


@pytest.mark.parametrize("name", FAMILIES)
def test_family_contract(name):
    family = all_families()[name]
    assert family.name == name and family.title
    assert family.problem_type in ("LP", "MILP", "IP", "QP")
    assert family.sense in ("min", "max")
    assert len(family.scenarios) >= 3, "at least 3 scenario variants"
    assert len({s.key for s in family.all_scenarios}) == len(family.all_scenarios), "scenario keys are unique"
    assert not family.eval_scenarios or len(family.eval_scenarios) >= 2, "at least 2 eval-only scenarios"
    for scenario in family.eval_scenarios:  # the family reads the same words from either split's scenarios
        assert set(scenario.words) == set(family.scenarios[0].words), f"eval scenario {scenario.key}'s words"
    assert family.domains and set(family.domains.values()) <= set(DOMAINS)
    assert "model.obj" in family.model_code
    for difficulty in DIFFICULTIES:
        _, scenario, data = instance(family, 0, difficulty)
        _, _, again = instance(family, 0, difficulty)
        assert data == again, "sampling must be deterministic for a given rng"
        assert json.loads(json.dumps(data)) == data, "instances must be JSON objects with string keys"
        statements = {}
        for representation in REPRESENTATIONS:
            statement = family.render_statement(data, scenario, representation)
            assert isinstance(statement, str) and len(statement) > 80
            statements[representation] = statement
        assert "data.json" in statements["file"]
        for representation in ("text", "table"):
            missing = sorted({fmt(n) for n in numbers_in(data) if not appears(n, statements[representation])})
            assert not missing, f"{representation} statement lacks instance numbers {missing[:10]}"
        assert "$" in family.formulation(data)


@pytest.mark.parametrize("name", FAMILIES)
def test_family_statement_skeletons_keep_every_number_and_name(name):
    """Every skeleton of either split re-dresses the statement without losing an instance number or an
    entity name (the program reads the names verbatim)."""
    family = all_families()[name]
    rng, scenario, data = instance(family, 1, "small")
    names = entity_names(data)
    for split in SPLIT_NAMES:
        for draw in range(12):
            skeleton = draw_skeleton(random.Random(f"{split}:{draw}"), split)
            for representation in ("text", "table"):
                rendered = family.render_statement(data, scenario, representation)
                statement = apply_skeleton(rendered, skeleton, scenario.industry, random.Random(draw),
                                           family.phrasings, names)
                missing = sorted({fmt(n) for n in numbers_in(data) if not appears(n, statement)})
                assert not missing, f"{skeleton.key} ({representation}) lost numbers {missing[:10]}"
                lost = sorted(n for n in names if n in rendered and n not in statement)
                assert not lost, f"{skeleton.key} ({representation}) lost names {lost[:10]}"
            rendered = family.render_statement(data, scenario, "file")
            statement = apply_skeleton(rendered, skeleton, scenario.industry, random.Random(draw),
                                       family.phrasings, names)
            keys = [key for key in family.data_fields if f"`{key}`" in rendered]
            assert keys and all(f"`{key}`" in statement for key in keys), skeleton.key


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_every_program_style_verifies(name, sandbox):
    """Each program style of the family (at least 4) runs in the sandbox to the objective the other checks
    find, feasible and (when the family has one) infeasible; the plain style really drops the Sets."""
    family = all_families()[name]
    styles = program_styles(family)
    assert len({style.key for style in styles}) >= 4
    _, _, data = instance(family, 2, "small")
    cases = [(data, False)]
    variant = family.make_infeasible(data, random.Random(3))
    if variant is not None:
        cases.append((variant, True))
    for style in styles:
        for case, infeasible in cases:
            program = render_program(family, case, "text", style)
            if style.sets == "plain":
                assert "pyo.Set(initialize=data" not in program
            assert ("def build_model(data):" in program) == (style.builder == "function")
            result = verify_instance(family, case, program, None, sandbox, expect_infeasible=infeasible)
            checks = {check.name: check for check in result.checks}
            assert "program_agrees" in checks and checks["program_agrees"].passed, f"{style.key}: {checks}"


INDUSTRIAL_FAMILIES = [name for name in FAMILIES if all_families()[name].industrial]


def test_some_families_scale_and_the_others_refuse_industrial():
    assert len(INDUSTRIAL_FAMILIES) >= 3
    family = all_families()["knapsack_01"]
    with pytest.raises(ValueError, match="no industrial size"):
        family.sample(random.Random(0), INDUSTRIAL, family.scenarios[0])


@pytest.mark.slow
@pytest.mark.parametrize("name", INDUSTRIAL_FAMILIES)
def test_industrial_instances_have_1000_variables_and_verify(name, sandbox):
    family = all_families()[name]
    rng, scenario, data = instance(family, 0, INDUSTRIAL)
    matrix = MatrixModel(family.sense)
    family.build_highspy(data, matrix)
    assert len(matrix.col_names) >= 1000
    assert json.loads(json.dumps(data)) == data
    program = render_program(family, data, "file")
    result = verify_instance(family, data, program, program_data(data, "file"), sandbox, program_timeout=60.0)
    failed = [check for check in result.checks if not check.passed and check.name != "quality"]
    assert not failed, failed


def test_plain_sets_replaces_only_simple_sets():
    code = ('model.I = pyo.Set(initialize=data["items"])\nmodel.A = pyo.Set(initialize=arcs, dimen=2)\n'
            'model.x = pyo.Var(model.I, model.A)\nmodel.c = pyo.Constraint(expr=sum(model.x[i, a] for i in model.I '
            'for a in model.A) <= model.Ilimit)\n')
    assert plain_sets(code) == ('model.A = pyo.Set(initialize=arcs, dimen=2)\nmodel.x = pyo.Var(data["items"], '
                                'model.A)\nmodel.c = pyo.Constraint(expr=sum(model.x[i, a] for i in data["items"] '
                                'for a in model.A) <= model.Ilimit)\n')
    assert plain_sets("model.x = pyo.Var(range(3))\n") is None


_MISSPELT_PLURAL = re.compile(r"\b\w+(?:chs|shs|xs|tress|pss)\b")  # "batchs", "thousand litress", "Gbpss"


@pytest.mark.parametrize("name", FAMILIES)
def test_family_scenarios_render(name):
    family = all_families()[name]
    for scenario in family.all_scenarios:
        data = family.sample(random.Random(7), "small", scenario)
        for representation in REPRESENTATIONS:
            text = family.render_statement(data, scenario, representation)
            assert text
            prose = re.sub(r"`[^`]*`|```.*?```", "", text, flags=re.DOTALL)  # not keys or code
            assert not _MISSPELT_PLURAL.findall(prose), (scenario.key, representation, _MISSPELT_PLURAL.findall(prose))


def test_plural_of_units():
    assert [plural(u) for u in ("batch", "tonne", "box", "ULD", "thousand litres", "Gbps", "battery", "day")] == [
        "batches", "tonnes", "boxes", "ULDs", "thousand litres", "Gbps", "batteries", "days"]


@pytest.mark.parametrize("name", FAMILIES)
def test_family_verifies(name, sandbox):
    """Checks 1-4 on 3 seeds x 3 difficulties (and on the infeasible variant when the family has one)
    must always pass; check 5 (non-zero objective, a binding constraint) is a rejection the pipeline
    absorbs, so it must pass on most instances, not all (an integer optimum need not touch any row)."""
    family = all_families()[name]
    sizes, quality_failures = {}, []
    for seed in SEEDS:
        for difficulty in DIFFICULTIES:
            rng, scenario, data = instance(family, seed, difficulty)
            representation = REPRESENTATIONS[seed % 3]
            program = render_program(family, data, representation)
            result = verify_instance(family, data, program, program_data(data, representation), sandbox)
            where = f"{name} seed {seed} {difficulty}"
            if result.reject_reason == "quality":
                quality_failures.append(f"{where}: {result.reject_detail}")
            else:
                assert result.passed, f"{where}: {result.reject_reason}: {result.reject_detail}"
            assert result.status == "optimal"
            sizes[difficulty] = max(sizes.get(difficulty, 0), sum(len(values) for values in result.x.values()))
            infeasible = family.make_infeasible(data, rng)
            if infeasible is not None:
                program = render_program(family, infeasible, "file")
                result = verify_instance(family, infeasible, program, infeasible, sandbox, expect_infeasible=True)
                assert result.passed, (f"{where}, infeasible variant: "
                                       f"{result.reject_reason}: {result.reject_detail}")
    assert len(quality_failures) <= 3, f"too many quality rejects: {quality_failures}"
    assert sizes["small"] <= sizes["medium"] <= sizes["large"], f"the difficulty dial must grow the model: {sizes}"
    assert sizes["small"] < sizes["large"]


FINGERPRINT_SCRIPT = """
import hashlib, json, random
from data_synth.families import all_families
from data_synth.family import DIFFICULTIES, REPRESENTATIONS
from data_synth.render import render_program
digests = {}
for name, family in all_families().items():
    parts = []
    for difficulty in DIFFICULTIES:
        rng = random.Random(f"hash-seed:{name}:{difficulty}")
        scenario = rng.choice(family.scenarios)
        data = family.sample(rng, difficulty, scenario)
        variant = family.make_infeasible(data, rng)
        parts.append(json.dumps([data, variant]))
        parts += [family.render_statement(data, scenario, r) for r in REPRESENTATIONS]
        parts += [family.formulation(data), render_program(family, data, "text")]
    digests[name] = hashlib.sha256("\\n".join(parts).encode()).hexdigest()
print(json.dumps(digests))
"""


def test_sampling_and_rendering_ignore_the_hash_seed():
    """Workers are separate interpreters with their own string-hash seeds: a family that iterates a set
    of names would make different records in different workers (and break resume)."""
    import os
    import subprocess
    import sys

    outputs = []
    for hash_seed in ("1", "2"):
        run = subprocess.run([sys.executable, "-c", FINGERPRINT_SCRIPT], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": hash_seed}, timeout=120)
        assert run.returncode == 0, run.stderr
        outputs.append(json.loads(run.stdout.strip().splitlines()[-1]))
    differing = sorted(name for name in outputs[0] if outputs[0][name] != outputs[1].get(name))
    assert not differing, f"these families sample or render differently under another PYTHONHASHSEED: {differing}"
