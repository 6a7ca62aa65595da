"""Eval harness throughput: small Pyomo + HiGHS programs executed and graded per second.

trex's sandbox (a fork server with the solver stack pre-imported, inside bubblewrap where available)
against the common practice measured side by side in the same run: one fresh Python interpreter per
program, with the same limits, scrubbed environment and number of programs at once. Both paths grade
every program against a truth computed before timing starts. Target: >= 20 programs/s and >= 5x.
"""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trex_cli.evaluate.benchmarks import BenchmarkItem
from trex_cli.evaluate.generators import Completion
from trex_cli.evaluate.grading import parse_answer
from trex_cli.evaluate.runner import grade_sample
from trex_sandbox import ExecutionResult, Sandbox, SandboxSettings
from trex_sandbox.client import CHILD_ENVIRONMENT

TIMEOUT_S = 60.0
MEMORY_MB = 2048


def make_program(rng: random.Random) -> str:
    """A small production-planning MILP: 4 products, 2 resources, integer units."""
    profit = [rng.randint(3, 12) for _ in range(4)]
    use = [[rng.randint(1, 6) for _ in range(4)] for _ in range(2)]
    capacity = [rng.randint(20, 60) for _ in range(2)]
    return f"""
import pyomo.environ as pyo

profit = {profit}
use = {use}
capacity = {capacity}
model = pyo.ConcreteModel()
model.products = pyo.RangeSet(0, 3)
model.units = pyo.Var(model.products, domain=pyo.NonNegativeIntegers, bounds=(0, 20))
model.profit = pyo.Objective(expr=sum(profit[p] * model.units[p] for p in model.products), sense=pyo.maximize)
model.resources = pyo.ConstraintList()
for r in range(2):
    model.resources.add(sum(use[r][p] * model.units[p] for p in model.products) <= capacity[r])
pyo.SolverFactory("highs").solve(model)
print("Objective:", pyo.value(model.profit))
"""


def truth_of(program: str) -> float:
    """The optimum, solved here in-process before any timing (Pyomo is imported once for this)."""
    namespace: dict = {}
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()) as captured:
        exec(compile(program, "program.py", "exec"), namespace)
    return float(captured.getvalue().split("Objective:")[1])


def item_for(index: int, truth: float) -> BenchmarkItem:
    return BenchmarkItem(id=str(index), question="plan", truth=parse_answer(truth), answer=truth, benchmark="bench", version="0")


def fresh_interpreter_run(program: str) -> ExecutionResult:
    """The baseline: a new interpreter per program, same limits (CPU, address space for a fresh
    interpreter, file size), scrubbed environment, no stdin, own session killed on timeout."""
    with tempfile.TemporaryDirectory(prefix="trex-bench-") as folder:
        Path(folder, "program.py").write_text(program)

        def limits() -> None:
            resource.setrlimit(resource.RLIMIT_CPU, (int(TIMEOUT_S) + 1, int(TIMEOUT_S) + 2))
            address_space = (MEMORY_MB + 1024) * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
            resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))

        started = time.monotonic()
        completed = subprocess.run(
            [sys.executable, "-I", "program.py"],
            cwd=folder,
            env=dict(CHILD_ENVIRONMENT, HOME=folder, TMPDIR=folder),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            preexec_fn=limits,
            start_new_session=True,
        )
        return ExecutionResult(
            exit_code=completed.returncode,
            wall_s=time.monotonic() - started,
            stdout=completed.stdout,
            stderr=completed.stderr,
        )


def run(quick: bool = False) -> list[dict]:
    rng = random.Random(7)
    count_fork = 48 if quick else 200
    count_fresh = 8 if quick else 32
    programs = [make_program(rng) for _ in range(count_fork)]
    truths = [truth_of(p) for p in programs]
    # Small programs mostly wait (HiGHS and Pyomo start threads and poll their output), so four
    # per core keep the cores busy; both paths get the same number at once.
    workers = 4 * (os.cpu_count() or 1)

    def graded(index: int, execution: ExecutionResult) -> dict:
        return grade_sample(item_for(index, truths[index]), 0, [], Completion(text=programs[index]),
                            programs[index], None, execution, "strict")  # fmt: skip

    settings = SandboxSettings(timeout=TIMEOUT_S, memory_mb=MEMORY_MB, workers=workers)
    started = time.perf_counter()
    with Sandbox(settings) as sandbox:
        startup_s = time.perf_counter() - started
        isolation = sandbox.isolation
        sandbox.run(programs[0])  # warm the path once, as an eval does with its first program
        started = time.perf_counter()
        results = sandbox.run_many([(p, {}) for p in programs])
        records = [graded(i, r) for i, r in enumerate(results)]
        fork_s = time.perf_counter() - started
    fork_correct = sum(r["outcome"] == "correct" for r in records)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        fresh_results = list(pool.map(fresh_interpreter_run, programs[:count_fresh]))
    fresh_records = [graded(i, r) for i, r in enumerate(fresh_results)]
    fresh_s = time.perf_counter() - started
    # A fresh interpreter has no hooks: the printed line is all it has, so count by the printed rule.
    fresh_correct = sum(r["verdicts"]["sirl"] for r in fresh_records)

    fork_rate = count_fork / fork_s
    fresh_rate = count_fresh / fresh_s
    if fork_correct != count_fork or fresh_correct != count_fresh:
        raise RuntimeError(f"grading disagrees: fork server {fork_correct}/{count_fork}, fresh {fresh_correct}/{count_fresh}")
    return [
        {
            "benchmark": "eval sandbox",
            "figure": f"small Pyomo programs executed + graded ({workers} at once; {isolation})",
            "value": round(fork_rate, 1),
            "unit": "programs/s",
            "baseline": "fresh interpreter per program, same limits and concurrency",
            "baseline_value": round(fresh_rate, 2),
            "ratio": round(fork_rate / fresh_rate, 1),
            "target": ">= 20 programs/s and >= 5x",
        },
        {
            "benchmark": "eval sandbox",
            "figure": "fork server start-up (bubblewrap + pre-import of the solver stack)",
            "value": round(startup_s, 2),
            "unit": "s",
            "baseline": "",
            "baseline_value": "",
            "ratio": "",
            "target": "",
        },
    ]


if __name__ == "__main__":
    from rich.console import Console
    from rich.table import Table

    table = Table(title="trex eval harness throughput")
    columns = ("benchmark", "figure", "value", "unit", "baseline", "baseline_value", "ratio", "target")
    for column in columns:
        table.add_column(column)
    for row in run(quick="--quick" in sys.argv):
        table.add_row(*(str(row[column]) for column in columns))
    Console().print(table)
