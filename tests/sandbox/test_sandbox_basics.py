"""The fork-server program runner: one property per test."""

from __future__ import annotations

import pytest

from data_synth.runner import ProgramRunner


@pytest.fixture(scope="module")
def runner():
    with ProgramRunner(memory_mb=1024) as program_runner:
        yield program_runner


def test_program_reads_its_data_file_and_solves(runner):
    program = (
        "import json\nimport pyomo.environ as pyo\n"
        "data = json.load(open('data.json'))\n"
        "m = pyo.ConcreteModel()\nm.x = pyo.Var(domain=pyo.NonNegativeIntegers)\n"
        "m.obj = pyo.Objective(expr=m.x, sense=pyo.maximize)\n"
        "m.c = pyo.Constraint(expr=2 * m.x <= data['cap'])\n"
        "r = pyo.SolverFactory('appsi_highs').solve(m, load_solutions=False)\n"
        "m.solutions.load_from(r)\nprint('Optimal objective value:', pyo.value(m.obj))\n"
    )
    result = runner.run(program, {"cap": 9})
    assert result.returncode == 0, result.stderr
    assert result.last_line == "Optimal objective value: 4.0"
    assert "Running HiGHS" not in result.stdout  # the banner was printed once, in the server


def test_each_program_gets_a_fresh_folder(runner):
    first = runner.run("import os\nopen('left_behind.txt', 'w').write('x')\nprint(os.getcwd())")
    second = runner.run("import os\nprint(os.path.exists('left_behind.txt'), os.getcwd())")
    assert second.stdout.split()[0] == "False"
    assert first.stdout.strip() != second.stdout.split()[1]


def test_timeout_kills_the_program(runner):
    result = runner.run("while True:\n    pass\n", timeout=0.5)
    assert result.timed_out and result.returncode < 0


def test_memory_cap_holds(runner):
    result = runner.run("block = bytearray(4 << 30)\nprint('allocated')", timeout=10)
    assert result.returncode == 1 and "MemoryError" in result.stderr
    assert "allocated" not in result.stdout


def test_exit_status_and_stderr_are_reported(runner):
    result = runner.run("import sys\nprint('before')\nsys.exit(3)")
    assert result.returncode == 3 and result.stdout.strip() == "before"
    crashed = runner.run("raise ValueError('planted')")
    assert crashed.returncode == 1 and "ValueError: planted" in crashed.stderr


def test_child_processes_are_killed_with_the_program(runner):
    program = ("import subprocess, sys, time\n"
               "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
               "print(child.pid, flush=True)\ntime.sleep(60)\n")
    result = runner.run(program, timeout=1.5)
    assert result.timed_out
    pid = int(result.stdout.split()[0])
    import os
    import time

    for _ in range(50):  # the kill is immediate; the zombie's reaping by init may take a moment
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().split()[2] == "Z":
                return
        time.sleep(0.05)
    raise AssertionError("the program's own child survived the timeout")
