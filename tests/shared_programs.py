"""Generated-program stand-ins that several test folders use (tests/evaluate, tests/sandbox)."""

from __future__ import annotations


def simple_program(objective_expression: str, sense: str = "maximize", integer: bool = False, extra: str = "") -> str:
    """A tiny Pyomo program whose objective is `objective_expression` over x in [0, 10] (and y in [0, 3])
    with x + y <= 4.5; it prints its objective. max x + 2y with x integer is 7."""
    domain = "pyo.NonNegativeIntegers" if integer else "pyo.NonNegativeReals"
    return f'''
import pyomo.environ as pyo
model = pyo.ConcreteModel()
model.x = pyo.Var(domain={domain}, bounds=(0, 10))
model.y = pyo.Var(bounds=(0, 3))
model.objective = pyo.Objective(expr={objective_expression}, sense=pyo.{sense})
model.limit = pyo.Constraint(expr=model.x + model.y <= 4.5)
{extra}
pyo.SolverFactory("highs").solve(model)
print("Objective:", pyo.value(model.objective))
'''
