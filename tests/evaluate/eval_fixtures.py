"""Small benchmark fixtures in every layout trex reads, built in a test's tmp_path (the tests never
read the shared benchmark files)."""

from __future__ import annotations

import json
from pathlib import Path

# A production-planning LP read from data.json: maximize sum(profit * x) s.t. sum(use * x) <= capacity.
PYOMO_DATA_PROGRAM = '''
import json
import pyomo.environ as pyo

with open("data.json") as stream:
    data = json.load(stream)
products = range(len(data["profit"]))
model = pyo.ConcreteModel()
model.x = pyo.Var(products, domain=pyo.NonNegativeReals, bounds=(0, data["max_units"]))
model.objective = pyo.Objective(expr=sum(data["profit"][i] * model.x[i] for i in products), sense=pyo.maximize)
model.capacity = pyo.Constraint(expr=sum(data["use"][i] * model.x[i] for i in products) <= data["capacity"])
pyo.SolverFactory("highs").solve(model)
print("Objective:", pyo.value(model.objective))
'''

# The same program writing its objective nowhere: trex must read it from the model object.
SILENT_PROGRAM = PYOMO_DATA_PROGRAM.replace('print("Objective:", pyo.value(model.objective))', "")

INSTANCES = [
    {"profit": [3.0, 5.0], "use": [1.0, 2.0], "capacity": 10.0, "max_units": 4.0},  # 3*4 + 5*3 = 27
    {"profit": [4.0, 1.0, 2.0], "use": [2.0, 1.0, 1.0], "capacity": 6.0, "max_units": 2.0},  # 4*2+1*0+2*2=12
]
OPTIMA = [27.0, 12.0]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def bench4opt_fixture(root: Path, program: str = PYOMO_DATA_PROGRAM) -> Path:
    """A Bench4Opt-style benchmark: problem, data_path (under lp_final/), optimal_value, reference_code."""
    rows = []
    for index, (instance, optimum) in enumerate(zip(INSTANCES, OPTIMA, strict=True)):
        data_path = root / "lp_final" / f"data_{index}.json"
        data_path.parent.mkdir(parents=True, exist_ok=True)
        data_path.write_text(json.dumps(instance))
        rows.append(
            {
                "id": f"B4O_{index}",
                "problem": f"Plan production to maximize profit. The data is in data.json (instance {index}).",
                "data_path": f"lp_final/data_{index}.json",
                "optimal_value": optimum,
                "reference_code": program,
                "problem_type": "LP",
                "problem_class": "production",
                "wp_type": "",
            }
        )
    return write_jsonl(root / "test.jsonl", rows)


def en_question_rows() -> list[dict]:
    return [
        {"en_question": "Maximize x + 2y with x + y <= 4.5, x integer in [0, 10], y in [0, 3].", "en_answer": "7.0"},
        {"en_question": "Maximize 3x + 2y with x + y <= 4.5, x in [0, 10], y in [0, 3].", "en_answer": 13.5},
        {"en_question": "Minimize x subject to x >= 11 and x <= 10.", "en_answer": "No Best Solution"},
        {"en_question": "Another impossible plan.", "en_answer": "-9999"},
    ]


# B4O-ORGEval: a knapsack-like production model read from data.json, built with gurobipy (as the
# benchmark's reference programs are) or with Pyomo; the reference LP is what the gurobipy one writes.
GUROBI_MODEL_PROGRAM = '''
import json
import gurobipy as gp
from gurobipy import GRB

with open("data.json") as stream:
    data = json.load(stream)
products = range(len(data["profit"]))
model = gp.Model("production")
x = model.addVars(products, lb=0, ub=data["max_units"], name="x")
model.setObjective(gp.quicksum(data["profit"][i] * x[i] for i in products), GRB.MAXIMIZE)
model.addConstr(gp.quicksum(data["use"][i] * x[i] for i in products) <= data["capacity"], name="capacity")
model.addConstr(x[0] - x[1] <= 0, name="balance")
model.write("model.lp")
'''

PYOMO_MODEL_PROGRAM = '''
import json
import pyomo.environ as pyo

with open("data.json") as stream:
    data = json.load(stream)
products = list(range(len(data["profit"])))
model = pyo.ConcreteModel()
model.units = pyo.Var(products, bounds=(0, data["max_units"]))
model.profit = pyo.Objective(expr=sum(data["profit"][i] * model.units[i] for i in products), sense=pyo.maximize)
# the same rows, written the other way round and in another order
model.balance = pyo.Constraint(expr=model.units[1] - model.units[0] >= 0)
model.capacity = pyo.Constraint(expr=sum(data["use"][i] * model.units[i] for i in reversed(products)) <= data["capacity"])
pyo.SolverFactory("highs").solve(model)
'''


def orgeval_fixture(root: Path) -> Path:
    """A B4O-ORGEval-style benchmark: problem, data_path, reference_lp_path (written here by gurobipy
    running the reference program), reference_code, and the subset fields."""
    import subprocess
    import sys

    rows = []
    for index, instance in enumerate(INSTANCES):
        data_path = root / "lp_data" / f"data_{index}.json"
        data_path.parent.mkdir(parents=True, exist_ok=True)
        data_path.write_text(json.dumps(instance))
        lp_folder = root / "lp_code" / f"problem{index}"
        lp_folder.mkdir(parents=True, exist_ok=True)
        (lp_folder / "data.json").write_text(json.dumps(instance))
        subprocess.run([sys.executable, "-c", GUROBI_MODEL_PROGRAM], cwd=lp_folder, check=True, capture_output=True)
        rows.append(
            {
                "id": f"BENCH4OPT_{index}",
                "problem": f"Plan production to maximize profit; data in data.json (instance {index}). Save the model as LP.",
                "data_path": f"lp_data/data_{index}.json",
                "reference_lp_path": f"lp_code/problem{index}/model.lp",
                "reference_code": GUROBI_MODEL_PROGRAM,
                "problem_type": "LP",
                "problem_class": "production",
                "wp_type": "" if index == 0 else "_concise",
            }
        )
    return write_jsonl(root / "test.jsonl", rows)
