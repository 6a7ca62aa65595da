"""The sandbox's plain contract, straight through its API: data files, fresh folders, limits, exit
statuses, recorded solves, output caps. One property per test."""

from __future__ import annotations

import json
import time

import pytest
from sandbox_programs import processes_with
from shared_programs import simple_program

from trex_sandbox import Sandbox, SandboxSettings


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxSettings(timeout=20, memory_mb=1024, file_size_mb=4, output_limit_kb=16, workers=2)) as running:
        yield running


def test_program_reads_its_data_file_and_solves(sandbox):
    program = (
        "import json\nimport pyomo.environ as pyo\n"
        "data = json.load(open('data.json'))\n"
        "m = pyo.ConcreteModel()\nm.x = pyo.Var(domain=pyo.NonNegativeIntegers)\n"
        "m.obj = pyo.Objective(expr=m.x, sense=pyo.maximize)\n"
        "m.c = pyo.Constraint(expr=2 * m.x <= data['cap'])\n"
        "r = pyo.SolverFactory('appsi_highs').solve(m, load_solutions=False)\n"
        "m.solutions.load_from(r)\nprint('Optimal objective value:', pyo.value(m.obj))\n"
    )
    result = sandbox.run(program, inline_files={"data.json": json.dumps({"cap": 9})})
    assert result.exit_ok, result.stderr
    assert result.last_line == "Optimal objective value: 4.0"
    assert "Running HiGHS" not in result.stdout  # the banner was printed once, in the server
    # one solve (the HiGHS run inside Pyomo's is not a second one), its objective read from the model
    # when the program ended (load_solutions=False left it empty at solve time)
    [solve] = result.solves
    assert solve["api"] == "pyomo" and solve["status"] == "optimal" and solve["objective"] == 4.0
    assert solve["order"] == 0 and solve["objective_source"] == "model, read when the program ended"


def test_data_files_are_copied_into_the_working_folder(sandbox, tmp_path):
    source = tmp_path / "instance.csv"
    source.write_text("cap,9\n")
    result = sandbox.run("print(open('data.csv').read().strip())", {"data.csv": source})
    assert result.exit_ok and result.stdout.strip() == "cap,9"


def test_each_program_gets_a_fresh_folder(sandbox):
    first = sandbox.run("import os\nopen('left_behind.txt', 'w').write('x')\nprint(os.getcwd())")
    second = sandbox.run("import os\nprint(os.path.exists('left_behind.txt'), os.getcwd())")
    assert second.stdout.split()[0] == "False"
    assert first.stdout.strip() != second.stdout.split()[1]


def test_timeout_kills_the_program(sandbox):
    result = sandbox.run("while True:\n    pass\n", timeout=0.5)
    assert result.timed_out and result.limit == "time" and result.signal == 9 and not result.exit_ok


def test_memory_cap_holds(sandbox):
    result = sandbox.run("block = bytearray(4 << 30)\nprint('allocated')", timeout=10)
    assert result.exit_code == 1 and "MemoryError" in result.stderr and result.limit == "memory"
    assert "allocated" not in result.stdout


def test_exit_status_and_stderr_are_reported(sandbox):
    result = sandbox.run("import sys\nprint('before')\nsys.exit(3)")
    assert result.exit_code == 3 and result.stdout.strip() == "before" and not result.exit_ok
    crashed = sandbox.run("raise ValueError('planted')")
    assert crashed.exit_code == 1 and "ValueError: planted" in crashed.stderr


def test_output_flood_is_cut_to_a_head_and_a_tail(sandbox):
    result = sandbox.run("for i in range(200000):\n    print('line', i)\n")
    assert result.stdout_truncated and len(result.stdout) < 20 * 1024
    assert result.stdout.startswith("line 0\n") and "bytes cut by trex" in result.stdout


def test_every_solve_is_recorded_in_order(sandbox):
    program = simple_program("model.x + 2 * model.y", integer=True) + (
        "model.objective.deactivate()\n"
        "model.small = pyo.Objective(expr=model.x + model.y)\n"
        "pyo.SolverFactory('appsi_highs').solve(model)\n"
    )
    result = sandbox.run(program)
    assert result.exit_ok, result.stderr
    assert [(s["order"], s["status"], s["objective"]) for s in result.solves] == [(0, "optimal", 7.0), (1, "optimal", 0.0)]


def test_child_processes_are_killed_with_the_program_at_the_timeout(sandbox):
    program = (
        "import subprocess, time\n"
        "subprocess.Popen(['sleep', '97.541'])\n"
        "time.sleep(60)\n"
    )
    result = sandbox.run(program, timeout=1.5)
    assert result.timed_out
    deadline = time.monotonic() + 5  # the kill is immediate; the zombie's reaping may take a moment
    while time.monotonic() < deadline and processes_with("97.541"):
        time.sleep(0.05)
    assert not processes_with("97.541"), "the program's own child survived the timeout"


def test_the_sandbox_counts_its_programs_cpu_time():
    # under bubblewrap the servers and their programs are out of the caller's resource accounting: the
    # sandbox's own count starts with the server's start-up and grows by at least each program's CPU time
    with Sandbox(SandboxSettings(timeout=20, memory_mb=1024, workers=1)) as fresh:
        assert fresh.cpu_s == 0.0  # nothing reported before the first reply
        busy = "total = 0\nfor i in range(3_000_000):\n    total += i\nprint(total)\n"
        first = fresh.run(busy)
        assert first.exit_ok and first.cpu_s > 0
        after_first = fresh.cpu_s
        assert after_first >= first.cpu_s
        second = fresh.run(busy)
        assert fresh.cpu_s >= after_first + second.cpu_s - 0.011  # counts are rounded to 10 ms ticks at most


def test_highs_defaults_reach_every_highs_a_program_makes_and_the_program_may_override_them(sandbox):
    option = "mip_heuristic_run_feasibility_jump"
    reads = f"import highspy\nh = highspy.Highs()\nprint(h.getOptionValue({option!r})[1])\n"
    overrides = f"import highspy\nh = highspy.Highs()\nh.setOptionValue({option!r}, True)\nprint(h.getOptionValue({option!r})[1])\n"
    assert sandbox.run(reads).stdout.split()[-1] == "True"  # HiGHS's own default without the setting
    with Sandbox(SandboxSettings(timeout=20, memory_mb=1024, workers=1, highs_defaults={option: False})) as tuned:
        assert tuned.run(reads).stdout.split()[-1] == "False"
        assert tuned.run(overrides).stdout.split()[-1] == "True"
