"""Optimization model files (`.mps`, `.lp`) as CPT documents.

HiGHS reads the model and solves it; the document states what the model is (sense, sizes, integer
variables), what HiGHS found (status, objective, the nonzero variables, and for LPs the reduced
costs and the binding constraints' duals), and the model itself in LP format, so a model learns to
connect a formulation with its solution.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import tempfile
from pathlib import Path

MAX_ROWS_SHOWN = 40  # variables and constraints listed in a table; the rest are counted
MAX_MODEL_CHARS = 20_000  # longer LP text is left out (the sizes and solution are still described)
TIME_LIMIT_S = 30.0


def _number(value: float) -> str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value + 0.0:.6g}" if value != 0 else "0"  # never print "-0"


@contextlib.contextmanager
def _quiet_stdout():
    """HiGHS prints its banner from C++ when the first solver object is made, before any option can
    turn output off; point file descriptor 1 at /dev/null meanwhile so the summary table stays clean."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def describe_model_file(path: Path) -> str:
    """Markdown describing the model in `path` and its HiGHS solution; ValueError if it cannot be read."""
    import highspy

    path = Path(path)
    with _quiet_stdout():
        highs = highspy.Highs()
        highs.setOptionValue("output_flag", False)
    highs.setOptionValue("time_limit", TIME_LIMIT_S)
    highs.setOptionValue("threads", 1)
    if highs.readModel(str(path)) != highspy.HighsStatus.kOk:
        raise ValueError(f"HiGHS cannot read {path.suffix} model {path}")
    lp = highs.getLp()
    num_columns, num_rows = lp.num_col_, lp.num_row_
    if num_columns == 0:
        raise ValueError(f"model {path} has no variables")
    column_names = list(lp.col_names_) or [f"x{index}" for index in range(num_columns)]
    row_names = list(lp.row_names_) or [f"c{index}" for index in range(num_rows)]
    integrality = list(lp.integrality_)
    integer_columns = [
        index for index, kind in enumerate(integrality) if kind == highspy.HighsVarType.kInteger
    ]
    binary_count = sum(
        1 for index in integer_columns if lp.col_lower_[index] == 0 and lp.col_upper_[index] == 1
    )
    is_mip = bool(integer_columns)
    sense = "maximize" if lp.sense_ == highspy.ObjSense.kMaximize else "minimize"

    highs.run()
    status = highs.modelStatusToString(highs.getModelStatus())
    lines = [
        f"# Optimization model `{path.stem}`",
        "",
        f"The model in `{path.name}` is a {'mixed-integer' if is_mip else 'linear'} program: {sense} a linear "
        f"objective over {num_columns} variables ({len(integer_columns)} integer, {binary_count} of them binary) "
        f"subject to {num_rows} linear constraints.",
        "",
        "## Solution",
        "",
        f"HiGHS reports: {status}.",
    ]
    if status == "Optimal":
        solution = highs.getSolution()
        objective = highs.getInfo().objective_function_value
        lines += [f"The optimal objective value is {_number(objective)}.", ""]
        nonzero = [index for index in range(num_columns) if abs(solution.col_value[index]) > 1e-9]
        show_duals = not is_mip and solution.dual_valid
        header = "| variable | value |" + (" reduced cost |" if show_duals else "")
        lines += [f"{len(nonzero)} of {num_columns} variables are nonzero:", "", header,
                  "|---|---|" + ("---|" if show_duals else "")]
        for index in nonzero[:MAX_ROWS_SHOWN]:
            row = f"| {column_names[index]} | {_number(solution.col_value[index])} |"
            if show_duals:
                row += f" {_number(solution.col_dual[index])} |"
            lines.append(row)
        if len(nonzero) > MAX_ROWS_SHOWN:
            lines.append(f"| ... {len(nonzero) - MAX_ROWS_SHOWN} more | |" + (" |" if show_duals else ""))
        if show_duals:
            binding = [index for index in range(num_rows) if abs(solution.row_dual[index]) > 1e-9]
            lines += ["", f"{len(binding)} of {num_rows} constraints are binding with a nonzero dual (shadow price):", "",
                      "| constraint | activity | dual |", "|---|---|---|"]
            for index in binding[:MAX_ROWS_SHOWN]:
                lines.append(
                    f"| {row_names[index]} | {_number(solution.row_value[index])} | {_number(solution.row_dual[index])} |"
                )
    lines += ["", "## Model (LP format)", ""]
    model_text = _as_lp_text(highs, path)
    if len(model_text) <= MAX_MODEL_CHARS:
        lines += ["```text", model_text.rstrip(), "```"]
    else:
        lines.append(f"(The LP text has {len(model_text)} characters and is left out.)")
    return "\n".join(lines) + "\n"


def _as_lp_text(highs, path: Path) -> str:
    if path.suffix.lower() == ".lp":
        return path.read_text(encoding="utf-8", errors="replace")
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "model.lp"
        highs.writeModel(str(target))
        return target.read_text(encoding="utf-8", errors="replace")
