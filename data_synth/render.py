"""Turn a verified instance into text: the runnable program, the CPT document, SFT samples and the
held-out benchmark item.

A program is: imports, the data (read from `data.json` for the "file" representation, else a Python
literal), the family's `model_code` (its statements in the order `program_order.optional_groups_first`
gives: the instance's optional constraint groups right after the sets and variables they use, before
the objective and the core constraints), and a solve footer whose last printed line is
`Optimal objective value: <repr(float)>` or `Status: infeasible`. A `ProgramStyle` writes that program in
one of several shapes (index sets declared as `pyo.Set`s or plain Python lists; the model built at
module level or by a `build_model(data)` function; the solve checked by its termination condition or
by `pyo.check_optimal_termination`), so the answers do not teach one memorised program body; every
style prints the same last line, and the pipeline runs the styled program in its verification. A family
that also gives its model in gurobipy (`gurobipy_code`, the library T-Rex's prompts ask for) has the
gurobipy styles too: the same data and last line, the model built with `gp.Model` and solved by Gurobi
(the PyPI wheel's size-limited licence: at most 2,000 variables and 2,000 constraints).
"""

from __future__ import annotations

import json
import pprint
import re
from dataclasses import dataclass

from data_synth.family import ProblemFamily, Scenario, fmt
from data_synth.program_order import optional_groups_first, optional_keys

OBJECTIVE_PREFIX = "Optimal objective value:"
INFEASIBLE_LINE = "Status: infeasible"

SOLVE_FOOTER = '''\

solver = pyo.SolverFactory("{solver}")
solver.options["mip_rel_gap"] = 1e-9  # prove optimality, not within the default 0.01% gap
results = solver.solve(model, load_solutions=False)
condition = results.solver.termination_condition
if condition == pyo.TerminationCondition.optimal:
    model.solutions.load_from(results)
    for variable in model.component_objects(pyo.Var):
        for index in variable:
            if abs(variable[index].value or 0.0) > 1e-9:
                print(variable.name, index, variable[index].value)
    print(f"Optimal objective value: {{float(pyo.value(model.obj))!r}}")
elif condition in (pyo.TerminationCondition.infeasible, pyo.TerminationCondition.infeasibleOrUnbounded):
    print("Status: infeasible")
else:
    print(f"Status: {{condition}}")
'''


CHECK_FOOTER = '''\


def solve(model):
    """Solve with HiGHS to proven optimality; the solution is loaded only when it is optimal."""
    solver = pyo.SolverFactory("{solver}")
    solver.options["mip_rel_gap"] = 1e-9
    return solver.solve(model, load_solutions=False)


results = solve(model)
if pyo.check_optimal_termination(results):
    model.solutions.load_from(results)
    for variable in model.component_data_objects(pyo.Var):
        if abs(variable.value or 0.0) > 1e-9:
            print(variable.name, variable.value)
    print(f"Optimal objective value: {{float(pyo.value(model.obj))!r}}")
elif results.solver.termination_condition in (pyo.TerminationCondition.infeasible,
                                               pyo.TerminationCondition.infeasibleOrUnbounded):
    print("Status: infeasible")
else:
    print(f"Status: {{results.solver.termination_condition}}")
'''
_FOOTERS = {"termination": SOLVE_FOOTER, "check": CHECK_FOOTER}

GUROBIPY_SOLVE_FOOTER = '''\

model.Params.OutputFlag = 0  # no solver log: the last printed line is the answer
model.Params.MIPGap = 1e-9  # prove optimality, not within the default 0.01% gap
model.optimize()
if model.Status == GRB.OPTIMAL:
    for variable in model.getVars():
        if abs(variable.X) > 1e-9:
            print(variable.VarName, variable.X)
    print(f"Optimal objective value: {model.ObjVal!r}")
elif model.Status in (GRB.INFEASIBLE, GRB.INF_OR_UNBD):
    print("Status: infeasible")
else:
    print(f"Status: {model.Status}")
'''

GUROBIPY_CHECK_FOOTER = '''\


def solve(model):
    """Solve with Gurobi to proven optimality, without its log; returns the status code."""
    model.Params.OutputFlag = 0
    model.Params.MIPGap = 1e-9
    model.optimize()
    return model.Status


status = solve(model)
if status == GRB.OPTIMAL and model.SolCount > 0:
    for variable in model.getVars():
        if abs(variable.X) > 1e-9:
            print(variable.VarName, variable.X)
    print(f"Optimal objective value: {model.ObjVal!r}")
elif status in (GRB.INFEASIBLE, GRB.INF_OR_UNBD):
    print("Status: infeasible")
else:
    print(f"Status: {status}")
'''
_GUROBIPY_FOOTERS = {"termination": GUROBIPY_SOLVE_FOOTER, "check": GUROBIPY_CHECK_FOOTER}
LIBRARIES = ("pyomo", "gurobipy")
# the size-limited licence of the gurobipy wheel on PyPI: a larger model fails with "Model too large"
GUROBIPY_SIZE_LIMIT = 2000
# `model.X = pyo.Set(initialize=EXPR)` on one line, without `dimen`: a set the plain style can drop
_SIMPLE_SET = re.compile(r"^model\.(\w+) = pyo\.Set\(initialize=([^\n]+)\)\n", re.MULTILINE)


@dataclass(frozen=True)
class ProgramStyle:
    """How a program is written: `library` "pyomo" (Pyomo with HiGHS) or "gurobipy" (the family's
    `gurobipy_code`, solved by Gurobi); `sets` "indexed" (the family's `pyo.Set`s) or "plain" (Python
    lists; gurobipy programs are always plain); `builder` "module" (statements at module level) or
    "function" (`build_model(data)`); `footer` "termination" or "check" (how the solve's outcome is
    tested)."""

    sets: str = "indexed"
    builder: str = "module"
    footer: str = "termination"
    library: str = "pyomo"

    @property
    def key(self) -> str:
        if self.library == "pyomo":  # the keys recipes already pin
            return f"sets:{self.sets}/builder:{self.builder}/footer:{self.footer}"
        return f"library:{self.library}/builder:{self.builder}/footer:{self.footer}"


DEFAULT_STYLE = ProgramStyle()


def plain_sets(model_code: str) -> str | None:
    """`model_code` with its simple `pyo.Set`s replaced by the lists they are built from, or None when
    it declares none (multi-dimensional sets stay as they are)."""
    sets = {name: expression for name, expression in _SIMPLE_SET.findall(model_code)
            if "dimen" not in expression}
    if not sets:
        return None
    code = _SIMPLE_SET.sub(lambda match: "" if match.group(1) in sets else match.group(0), model_code)
    return re.sub(r"\bmodel\.(" + "|".join(map(re.escape, sets)) + r")\b", lambda m: sets[m.group(1)], code)


def program_styles(family: ProblemFamily, data: dict | None = None,
                   libraries: tuple[str, ...] | list[str] = ("pyomo",)) -> list[ProgramStyle]:
    """Every style of `libraries` the family's model (of `data`, when its variants differ) can be written
    in (the plain style needs `pyo.Set`s to drop; gurobipy needs the family's `gurobipy_code`)."""
    styles = []
    if "pyomo" in libraries:
        code = family.model_code if data is None else family.model_code_for(data)
        set_styles = ["indexed", "plain"] if plain_sets(code) is not None else ["indexed"]
        styles += [ProgramStyle(sets, builder, footer) for sets in set_styles for builder in ("module", "function")
                   for footer in _FOOTERS]
    if "gurobipy" in libraries and (family.gurobipy_code if data is None else family.gurobipy_code_for(data)):
        styles += [ProgramStyle("plain", builder, footer, "gurobipy") for builder in ("module", "function")
                   for footer in _GUROBIPY_FOOTERS]
    return styles


def _model_body(family: ProblemFamily, data: dict, style: ProgramStyle) -> str:
    if style.library == "gurobipy":
        source = family.gurobipy_code_for(data)
        if not source.strip():
            raise ValueError(f"{family.name} gives no gurobipy model, so it has no gurobipy style")
    elif style.library == "pyomo":
        source = family.model_code_for(data)
    else:
        raise ValueError(f"unknown library {style.library!r}; use {' or '.join(LIBRARIES)}")
    code = optional_groups_first(source.strip() + "\n", optional_keys(family, data))
    if style.library == "pyomo" and style.sets == "plain":
        plain = plain_sets(code)
        if plain is None:
            raise ValueError(f"{family.name} declares no pyo.Set, so it has no plain-sets style")
        code = plain
    elif style.library == "pyomo" and style.sets != "indexed":
        raise ValueError(f"unknown sets style {style.sets!r}; use indexed or plain")
    if style.builder == "function":
        body = "".join(f"    {line}" if line.strip() else line for line in code.strip().splitlines(keepends=True))
        return (f"def build_model(data):\n    \"\"\"The {family.title.lower()} model of `data`.\"\"\"\n{body}\n"
                "    return model\n\n\nmodel = build_model(data)")
    if style.builder != "module":
        raise ValueError(f"unknown builder style {style.builder!r}; use module or function")
    return code.strip()


def solver_name(family: ProblemFamily, data: dict | None = None) -> str:
    """Pyomo's appsi HiGHS interface for linear models (the faster one); its newer "highs" interface for
    quadratic objectives, which appsi refuses."""
    problem_type = family.problem_type if data is None else family.problem_type_for(data)
    return "highs" if problem_type == "QP" else "appsi_highs"


def render_program(family: ProblemFamily, data: dict, representation: str,
                   style: ProgramStyle = DEFAULT_STYLE) -> str:
    """The self-contained Pyomo + HiGHS (or gurobipy) program for `data` in this representation and style."""
    if style.footer not in _FOOTERS:
        raise ValueError(f"unknown footer style {style.footer!r}; use {', '.join(_FOOTERS)}")
    if style.library == "gurobipy":
        imports = "import gurobipy as gp\nfrom gurobipy import GRB\n"
        if representation == "file":
            head = f'import json\n\n{imports}\nwith open("data.json") as f:\n    data = json.load(f)\n'
        else:
            head = f"{imports}\ndata = {pprint.pformat(data, width=100, sort_dicts=False)}\n"
        return f"{head}\n{_model_body(family, data, style)}\n{_GUROBIPY_FOOTERS[style.footer]}"
    if representation == "file":
        head = 'import json\n\nimport pyomo.environ as pyo\n\nwith open("data.json") as f:\n    data = json.load(f)\n'
    else:
        literal = pprint.pformat(data, width=100, sort_dicts=False)
        head = f"import pyomo.environ as pyo\n\ndata = {literal}\n"
    footer = _FOOTERS[style.footer].format(solver=solver_name(family, data))
    return f"{head}\n{_model_body(family, data, style)}\n{footer}"


def program_data(data: dict, representation: str) -> dict | None:
    """The object the program reads as data.json (only the "file" representation reads one)."""
    return data if representation == "file" else None


def parse_last_line(stdout: str) -> tuple[str | None, float | None]:
    """("optimal", value), ("infeasible", None) or (None, None) from a program's last output line."""
    lines = [line.strip() for line in stdout.strip().splitlines() if line.strip()]
    if not lines:
        return None, None
    last = lines[-1]
    if last.startswith(OBJECTIVE_PREFIX):
        try:
            return "optimal", float(last[len(OBJECTIVE_PREFIX):].strip())
        except ValueError:
            return None, None
    if last == INFEASIBLE_LINE:
        return "infeasible", None
    return None, None


def answer_text(status: str, objective: float | None) -> str:
    """The benchmark answer: the objective as repr(float), or "No Best Solution" when infeasible."""
    return repr(float(objective)) if status == "optimal" else "No Best Solution"


# ---------------------------------------------------------------------------------------- documents

def _dual_table(title: str, values: dict[str, float], limit: int = 40) -> str:
    rows = [(name, value) for name, value in values.items() if abs(value) > 1e-9][:limit]
    if not rows:
        return f"{title}: all zero."
    lines = [f"{title}:", "", "| name | value |", "|---|---|"]
    lines += [f"| `{name}` | {fmt(round(value, 6))} |" for name, value in rows]
    return "\n".join(lines)


def cpt_document(record: dict, family: ProblemFamily, scenario: Scenario, solution_x: dict | None,
                 row_duals: dict[str, float], reduced_costs: dict[str, float]) -> str:
    """A Markdown document: business problem, formulation, solution and interpretation, (LP) duals and
    reduced costs, and the program."""
    parts = [f"# {family.title}: {scenario.industry}", "", "## Problem", "", record["statement"]]
    if record["representation"] == "file":
        parts += ["", "`data.json`:", "", "```json", json.dumps(record["data"], indent=1), "```"]
    parts += ["", "## Mathematical model", "", record["formulation"], "", "## Solution", ""]
    if record["status"] == "optimal":
        parts.append(f"HiGHS proves the instance optimal with objective value {fmt(record['objective'])} "
                     f"({'maximized' if family.sense == 'max' else 'minimized'}).")
        parts += ["", family.describe_solution(record["parameters"], solution_x or {}, scenario)]
        if family.problem_type_for(record["parameters"]) == "LP" and (row_duals or reduced_costs):
            parts += ["", "### Sensitivity (LP duals)", "",
                      "A constraint's dual value is the change of the optimal objective per unit of its "
                      "right-hand side; a variable's reduced cost is how much its objective coefficient "
                      "must improve before it enters the solution.", "",
                      _dual_table("Dual values of the constraints", row_duals), "",
                      _dual_table("Reduced costs of the variables", reduced_costs)]
    else:
        parts.append("The instance is infeasible: no plan satisfies every requirement at once, so there is "
                     "no optimal objective. A planner must relax a requirement (a contract, a capacity, a "
                     "demand) before optimizing.")
    parts += ["", "## Program", "", "```python", record["program"].rstrip(), "```", ""]
    if record["status"] == "optimal":
        parts.append(f"Running it prints `{OBJECTIVE_PREFIX} {record['objective']!r}` on its last line.")
    else:
        parts.append(f"Running it prints `{INFEASIBLE_LINE}` on its last line.")
    return "\n".join(parts) + "\n"


SYSTEM_PROMPT = ("You are an expert in operations research. Formulate the user's problem as a mathematical "
                 "optimization model and/or a Python program using Pyomo with the HiGHS solver.")
# the request of a sample whose program is written in gurobipy (T-Rex's prompts ask for it)
GUROBIPY_SYSTEM_PROMPT = ("You are an expert in operations research. Formulate the user's problem as a "
                          "mathematical optimization model and/or a Python program using gurobipy.")

_STYLE_REQUEST = {
    "model": "Write the mathematical model (sets, parameters, variables, objective, constraints).",
    "model_program": "Write the mathematical model, then a Python program using Pyomo and HiGHS that solves "
                     "it and prints the optimal objective value on its last line.",
    "program": "Write a Python program using Pyomo and HiGHS that solves it and prints the optimal objective "
               "value on its last line.",
}
_GUROBIPY_REQUEST = {
    **_STYLE_REQUEST,
    "model_program": "Write the mathematical model, then a Python program using gurobipy that solves it and "
                     "prints the optimal objective value on its last line.",
    "program": "Write a Python program using gurobipy that solves it and prints the optimal objective value "
               "on its last line.",
}


def style_library(style_key: str) -> str:
    """The library of a program style key (`ProgramStyle.key`): "gurobipy" or "pyomo"."""
    return "gurobipy" if style_key.startswith("library:gurobipy") else "pyomo"


def question_text(statement: str, file_data: dict | None = None) -> str:
    """The problem as a user asks it; data given as a file (`data.json`) is shown inline after it."""
    if file_data is None:
        return statement
    return (statement + "\n\nThe program must read `data.json` from its working folder. Its content:\n\n```json\n"
            + json.dumps(file_data, separators=(", ", ": ")) + "\n```")


def _file_data(record: dict) -> dict | None:
    """The data.json content of a "file" representation record (shown inline in its question)."""
    return record["data"] if record["representation"] == "file" else None


def request_messages(statement: str, file_data: dict | None = None, answer_style: str = "program",
                     library: str = "pyomo") -> list[dict]:
    """The system and user messages of an SFT sample of this answer style, asking for a program in
    `library` ("pyomo" or "gurobipy"). `trex eval --prompt synth` asks its questions with exactly these
    messages (answer style "program", Pyomo), so a model trained on the synthetic samples is evaluated on
    the prompt it learned."""
    if answer_style not in _STYLE_REQUEST:
        raise ValueError(f"unknown answer style {answer_style!r}; use one of {', '.join(_STYLE_REQUEST)}")
    if library not in LIBRARIES:
        raise ValueError(f"unknown library {library!r}; use {' or '.join(LIBRARIES)}")
    system, requests = ((GUROBIPY_SYSTEM_PROMPT, _GUROBIPY_REQUEST) if library == "gurobipy"
                        else (SYSTEM_PROMPT, _STYLE_REQUEST))
    request = requests[answer_style]
    if file_data is not None:
        request += " " + keys_sentence(file_data)
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"{question_text(statement, file_data)}\n\n{request}"},
    ]


def keys_sentence(file_data: dict) -> str:
    """The request's last sentence when the data is a file: its top-level keys, in the file's order.

    The statement describes the keys and the file is shown above, but hundreds of tokens before the
    answer; a model with a short attention window (the demo's: 128 tokens) chooses the program's family
    at its first lines, and which optional constraint groups to write right after the variables (see
    `program_order`), where it can still read this sentence. Without it the demo's tiny model (then with
    a 64-token window) took most held-out items of one synth seed (seed 1) for knapsacks: 13.3% strict
    Pass@1 on 60 items, 50.0% with it. The keys are part of the data the user gives, the same in every
    split."""
    names = [f"`{key}`" for key in file_data]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"`data.json` holds {listed}."


def sft_sample(record: dict, answer_style: str) -> dict:
    """One chat sample: system, user (problem + request), assistant (model and/or program)."""
    program_block = f"```python\n{record['program'].rstrip()}\n```"
    if answer_style == "program":
        answer = program_block
    elif answer_style == "model":
        answer = record["formulation"]
        if record["status"] == "optimal":
            answer += f"\n\nOptimal objective value: {fmt(record['objective'])}"
        else:
            answer += "\n\nThe model is infeasible."
    else:
        answer = f"{record['formulation']}\n\n{program_block}"
    return {
        "id": f"{record['id']}-{answer_style}",
        "source_id": record["id"],  # the problem record it renders
        "instance": record["instance"],  # the instance hash: two samples of one instance are one problem
        "family": record["family"],
        "representation": record["representation"],
        "answer_style": answer_style,
        "messages": request_messages(record["statement"], _file_data(record), answer_style,
                                     style_library(record.get("program_style", "")))
        + [{"role": "assistant", "content": answer}],
    }


def eval_item(record: dict) -> dict:
    """The held-out benchmark item (`eval/test.jsonl` row); the data file path is relative to eval/."""
    return {
        "id": record["id"],
        "en_question": record["statement"],
        "en_answer": answer_text(record["status"], record["objective"]),
        "family": record["family"],
        "difficulty": record["difficulty"],
        "representation": record["representation"],
        "data_file": f"data/{record['id']}.json" if record["representation"] == "file" else None,
        "reference_program": record["program"],
    }
