"""A rendered program states the instance's optional constraint groups right after the sets and
variables they use (data_synth/program_order.py): the same statements, in an order that still runs,
with the same optimum."""

from __future__ import annotations

import ast
import random

import pytest

from data_synth.families import all_families, get_family
from data_synth.program_order import optional_groups_first, optional_keys
from data_synth.render import ProgramStyle, program_styles, render_program
from data_synth.verify import close, solve_pyomo


def instance_with(family, keys: set[str], tries: int = 400) -> dict:
    for k in range(tries):
        rng = random.Random(f"order:{family.name}:{k}")
        data = family.sample(rng, "small", family.scenarios[k % len(family.scenarios)])
        if keys <= set(data):
            return data
    raise AssertionError(f"{family.name}: no instance with {sorted(keys)} in {tries} draws")


def statements(code: str) -> list[str]:
    return [ast.dump(statement) for statement in ast.parse(code).body]


def model_lines(program: str) -> list[str]:
    return [line for line in program.splitlines() if line.startswith("model.")]


def position(lines: list[str], prefix: str) -> int:
    return next(index for index, line in enumerate(lines) if line.startswith(prefix))


def test_knapsack_states_its_item_limit_and_exclusions_before_the_objective():
    family = get_family("knapsack_01")
    data = instance_with(family, {"max_items", "conflicts"})
    assert optional_keys(family, data) == {"max_items", "conflicts"}  # `required` is always there
    lines = model_lines(render_program(family, data, "file"))
    assert [line.split(" =")[0] for line in lines] == [
        "model.I", "model.take", "model.max_items", "model.P", "model.conflicts", "model.obj", "model.capacity",
        "model.required"]
    # the family's own source keeps its order (check 1 runs it); the program moves statements, never edits one
    source = family.model_code_for(data)
    assert source.index("model.obj") < source.index("model.max_items")
    assert sorted(statements(source)) == sorted(statements(optional_groups_first(source, optional_keys(family, data))))


def test_every_style_moves_the_groups_and_an_instance_without_them_keeps_the_source_order():
    family = get_family("transportation")
    data = instance_with(family, {"forbidden"})
    for style in program_styles(family, data, ("pyomo", "gurobipy")):
        program = render_program(family, data, "file", style)
        if style.library == "gurobipy":
            assert program.index('data["forbidden"]') < program.index("setObjective"), style.key
        else:
            assert program.index('data["forbidden"]') < program.index("pyo.Objective("), style.key
    bare = None
    for k in range(200):
        data = family.sample(random.Random(f"bare:{k}"), "small", family.scenarios[0])
        if not optional_keys(family, data):
            bare = data
            break
    assert bare is not None
    program = render_program(family, bare, "file", ProgramStyle())
    assert family.model_code_for(bare).strip() in program


@pytest.mark.parametrize("code", [
    # a loop changes the model in place: nothing moves
    'model.x = pyo.Var()\nmodel.obj = pyo.Objective(expr=model.x)\nfor k in data["cuts"]:\n    model.c.add(model.x >= k)\n',
    # a name bound twice: moving could change which binding a use sees
    'rule = 1\nmodel.obj = pyo.Objective(expr=rule)\nrule = data["cap"]\nmodel.c = pyo.Constraint(expr=rule >= 0)\n',
    # an item assignment changes an object in place
    'limits = {}\nmodel.obj = pyo.Objective(expr=0)\nlimits["a"] = data["cap"]\n',
    "this is not python",
])
def test_code_whose_effects_it_cannot_follow_keeps_its_order(code):
    assert optional_groups_first(code, {"cuts", "cap"}) == code


def test_a_moved_statement_takes_what_it_needs_with_it_and_its_comment():
    code = ('model = pyo.ConcreteModel()\nmodel.I = pyo.Set(initialize=data["items"])\n'
            'model.x = pyo.Var(model.I)\n\nmodel.obj = pyo.Objective(expr=sum(model.x[i] for i in model.I))\n'
            'model.J = pyo.Set(initialize=data["other"])\n\n# the optional limit\n'
            'def limit(model):\n    return sum(model.x[i] for i in model.I) <= data["limit"]\n\n'
            'model.limit = pyo.Constraint(rule=limit)\n')
    moved = optional_groups_first(code, {"limit"})
    assert moved.index("# the optional limit") < moved.index("model.obj")
    assert moved.index("model.limit =") < moved.index("model.obj") < moved.index("model.J")
    assert moved.index("model.x =") < moved.index("def limit")
    assert sorted(statements(moved)) == sorted(statements(code))
    assert optional_groups_first(code, set()) == code


@pytest.mark.slow
def test_every_family_reordered_solves_to_the_same_optimum():
    """For every family, an instance with an optional group: the program's order of its model code
    builds a model with the same optimum as the family's own order (both solved by HiGHS)."""

    class Reordered:
        def __init__(self, family):
            self.family = family

        def __getattr__(self, name):
            return getattr(self.family, name)

        def model_code_for(self, data):
            return optional_groups_first(self.family.model_code_for(data), optional_keys(self.family, data))

    moved = 0
    for name, family in all_families().items():
        data = None
        for k in range(60):
            candidate = family.sample(random.Random(f"same:{name}:{k}"), "small", family.scenarios[k % 3])
            if optional_keys(family, candidate):
                data = candidate
                break
        if data is None:
            continue
        reordered = Reordered(family).model_code_for(data)
        assert sorted(statements(reordered)) == sorted(statements(family.model_code_for(data))), name
        if reordered == family.model_code_for(data):
            continue
        moved += 1
        first, second = solve_pyomo(family, data), solve_pyomo(Reordered(family), data)
        assert first.status == second.status, (name, first.error, second.error)
        if first.status == "optimal":
            assert close(first.objective, second.objective, 1e-6), name
    assert moved >= 40  # most families have optional groups, and their programs state them early
