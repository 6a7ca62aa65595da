"""The hostile-program suite: each program is contained, graded as a failure of the right class, and
the harness goes on (graded by eval's `grade_sample`, as `trex eval` does). Limits are short (3 s,
512 MiB, 4 MiB files) to keep the suite fast."""

from __future__ import annotations

import os
import socket
import textwrap
import threading
import time
from pathlib import Path

import pytest
from sandbox_programs import processes_with
from shared_programs import simple_program

from trex_cli.evaluate.benchmarks import BenchmarkItem
from trex_cli.evaluate.generators import Completion
from trex_cli.evaluate.grading import parse_answer
from trex_cli.evaluate.runner import grade_sample
from trex_sandbox import Sandbox, SandboxSettings, bwrap_path

SECRET_NAME, SECRET_VALUE = "TREX_TEST_SECRET", "s3cr3t-7f1e9a"
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def sandbox():
    os.environ[SECRET_NAME] = SECRET_VALUE  # in the harness's environment when the server starts
    settings = SandboxSettings(timeout=3, memory_mb=512, file_size_mb=4, output_limit_kb=16, max_processes=32, workers=2)
    try:
        with Sandbox(settings) as running:
            yield running
    finally:
        os.environ.pop(SECRET_NAME, None)


def run_and_grade(sandbox: Sandbox, program: str, truth: str = "7", timeout: float | None = None) -> dict:
    item = BenchmarkItem(id="h", question="q", truth=parse_answer(truth), answer=truth, benchmark="hostile", version="0")
    program = textwrap.dedent(program)
    execution = sandbox.run(program, timeout=timeout)
    return grade_sample(item, 0, [], Completion(text=program), program, None, execution, "strict")


def processes_of_users(uids: list[int]) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                for line in Path(f"/proc/{entry}/status").read_text().splitlines():
                    if line.startswith("Uid:") and int(line.split()[1]) in uids:
                        found.append(int(entry))
            except OSError:
                pass
    return found


def assert_harness_still_works(sandbox: Sandbox) -> None:
    record = run_and_grade(sandbox, simple_program("model.x + 2 * model.y", integer=True))
    assert record["outcome"] == "correct", record


def drops_privileges(sandbox: Sandbox) -> bool:
    return bool(sandbox.program_uids)


def test_a_correct_program_reads_its_objective_from_the_model_object(sandbox):
    silent = simple_program("model.x + 2 * model.y", integer=True).replace('print("Objective:", pyo.value(model.objective))', "")
    record = run_and_grade(sandbox, silent)
    assert record["outcome"] == "correct" and record["objective"] == 7.0 and record["printed_objective"] is None
    assert record["solver_status"] == "optimal" and record["solver_api"] == "pyomo" and record["gap"] is not None
    assert not record["verdicts"]["opt-engine"]  # printed-objective rules see nothing


def test_an_infeasible_model_records_the_infeasible_status(sandbox):
    record = run_and_grade(sandbox, simple_program("model.x", extra="model.impossible = pyo.Constraint(expr=model.x >= 11)"), truth="No Best Solution")
    assert record["solver_status"] == "infeasible" and record["outcome"] == "correct", record
    wrong = run_and_grade(sandbox, simple_program("model.x", extra="model.impossible = pyo.Constraint(expr=model.x >= 11)"))
    assert wrong["outcome"] == "infeasible", wrong


def test_endless_loop_is_killed_at_the_time_limit(sandbox):
    record = run_and_grade(sandbox, "while True:\n    pass\n")
    assert record["outcome"] == "timeout" and record["limit"] in ("time", "cpu") and record["timed_out"]


def test_a_program_ignoring_signals_is_still_killed(sandbox):
    record = run_and_grade(sandbox, """
        import signal, time
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, signal.SIG_IGN)
        while True:
            time.sleep(0.01)
    """)
    assert record["outcome"] == "timeout"


def test_fork_bomb_is_contained(sandbox):
    if not drops_privileges(sandbox):
        pytest.skip("the process limit holds only when programs run as an unprivileged user")
    record = run_and_grade(sandbox, """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """)
    assert record["outcome"] == "timeout"  # forks fail at the process limit; the group dies at the time limit
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and processes_of_users(sandbox.program_uids):
        time.sleep(0.2)
    assert not processes_of_users(sandbox.program_uids)
    assert_harness_still_works(sandbox)


def test_memory_hog_hits_the_address_space_limit(sandbox):
    record = run_and_grade(sandbox, "hog = bytearray(4 * 1024 ** 3)\nprint('Objective: 7')\n")
    assert record["outcome"] == "runtime error" and record["limit"] == "memory", record["reason"]


def test_huge_output_is_capped(sandbox):
    record = run_and_grade(sandbox, "while True:\n    print('x' * 1000)\n")
    assert record["outcome"] == "runtime error" and record["limit"] == "file size"
    assert record["stdout_truncated"] and len(record["stdout"]) < 20 * 1024


def test_writes_outside_the_work_folder_fail(sandbox):
    target = HERE / f"escape-probe-{os.getpid()}.txt"
    try:
        record = run_and_grade(sandbox, f"open({str(target)!r}, 'w').write('escaped')\nprint('Objective: 7')\n")
        assert record["outcome"] == "runtime error", record
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)
    inside = run_and_grade(sandbox, "open('result.txt', 'w').write('fine')\nimport tempfile\ntempfile.mkstemp()\nprint('Objective: 7')\n")
    assert inside["exit_code"] == 0, inside["stderr"]


def test_the_parent_environment_secrets_are_out_of_reach(sandbox):
    record = run_and_grade(sandbox, f"""
        import os
        found = [key for key in os.environ if key == {SECRET_NAME!r}]
        for entry in os.listdir('/proc'):
            try:
                if {SECRET_VALUE!r}.encode() in open('/proc/' + entry + '/environ', 'rb').read():
                    found.append(entry)
            except OSError:
                pass
        if not found:
            raise RuntimeError('no secret found')
        print('LEAK', found)
    """)
    assert record["outcome"] == "runtime error"
    assert "LEAK" not in record["stdout"] and SECRET_VALUE not in record["stdout"] + record["stderr"]


def test_killing_the_parent_leaves_the_harness_running(sandbox):
    record = run_and_grade(sandbox, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('Objective: 7')\n")
    assert record["outcome"] == "runtime error", record
    assert_harness_still_works(sandbox)


def test_sleeping_children_left_behind_are_killed(sandbox):
    # The program ends only once both sleepers run `sleep` (Popen returns after the exec; the middle
    # process waits for its child's exec before it exits): a sleeper still between fork and exec
    # would not match the name, and the check below would pass or fail by luck.
    record = run_and_grade(sandbox, """
        import os, subprocess, time
        subprocess.Popen(['sleep', '97.531'])
        middle = os.fork()
        if middle == 0:
            os.setsid()  # leave the program's process group
            sleeper = os.fork()
            if sleeper == 0:
                os.execv('/bin/sleep', ['sleep', '97.532'])
            for _ in range(200):
                with open(f'/proc/{sleeper}/cmdline', 'rb') as stream:
                    if b'97.532' in stream.read():
                        break
                time.sleep(0.01)
            os._exit(0)
        os.waitpid(middle, 0)
    """)
    assert record["outcome"] == "no objective"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (processes_with("97.531") or processes_with("97.532")):
        time.sleep(0.2)
    assert not processes_with("97.531") and not processes_with("97.532")


def test_network_connections_fail(sandbox):
    if not bwrap_path() or "bubblewrap" not in sandbox.isolation:
        pytest.skip("network isolation needs bubblewrap")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    connections = []

    def accept() -> None:
        try:
            connections.append(listener.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    record = run_and_grade(sandbox, f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('Objective: 7')\n")
    thread.join()
    listener.close()
    assert record["outcome"] == "runtime error" and not connections


def test_reading_stdin_does_not_hang(sandbox):
    record = run_and_grade(sandbox, "answer = input('objective? ')\nprint('Objective:', answer)\n")
    assert record["outcome"] == "runtime error" and "EOFError" in record["reason"] and not record["timed_out"]


def test_a_segfault_is_a_runtime_error(sandbox):
    record = run_and_grade(sandbox, "import ctypes\nctypes.string_at(0)\n")
    assert record["outcome"] == "runtime error" and record["signal"] == 11


def test_a_nonzero_exit_fails_the_strict_rule_even_after_a_right_answer(sandbox):
    record = run_and_grade(sandbox, simple_program("model.x + 2 * model.y", integer=True, extra="") + "import sys\nsys.exit(3)\n")
    assert record["outcome"] == "runtime error" and record["exit_code"] == 3
    # ORLM's evaluator runs with check=True: a nonzero exit has no answer; OPT-Engine reads the printed line
    assert not record["verdicts"]["strict"] and not record["verdicts"]["orlm"] and record["verdicts"]["opt-engine"]


def test_a_huge_file_in_the_work_folder_hits_the_file_size_limit(sandbox):
    record = run_and_grade(sandbox, "open('big.bin', 'wb').write(b'0' * (64 * 1024 * 1024))\nprint('Objective: 7')\n")
    assert record["outcome"] == "runtime error" and record["limit"] == "file size"


def test_killing_every_reachable_process_spares_the_programs_beside_it(sandbox):
    if "bubblewrap" not in sandbox.isolation or not drops_privileges(sandbox):
        pytest.skip("kill(-1) is only safe to try inside the sandbox's own PID namespace")
    neighbour: dict = {}
    slow_but_right = simple_program("model.x + 2 * model.y", integer=True, extra="import time\ntime.sleep(1.5)")
    beside = threading.Thread(target=lambda: neighbour.update(run_and_grade(sandbox, slow_but_right)))
    beside.start()
    time.sleep(0.5)
    record = run_and_grade(sandbox, "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('Objective: 7')\n")
    beside.join(timeout=30)
    # kill(-1) spares the caller: it goes on to print a number no solver produced
    assert record["outcome"] == "no objective" and not record["verdicts"]["strict"]
    assert neighbour["outcome"] == "correct"  # a user of its own: out of reach of the other program
    assert_harness_still_works(sandbox)


# Process mode as root on a venv others cannot read: the sandbox says so once (what it cannot enforce);
# here that is expected, not news.
@pytest.mark.filterwarnings("ignore:generated programs run as root", "ignore:the process limit")
def test_process_limits_alone_still_contain_the_basic_failures():
    settings = SandboxSettings(timeout=2, memory_mb=512, file_size_mb=4, isolation="process", workers=1)
    with Sandbox(settings) as limited:
        assert limited.isolation.startswith("process limits")
        assert run_and_grade(limited, "while True:\n    pass\n")["outcome"] == "timeout"
        assert run_and_grade(limited, "hog = bytearray(4 * 1024 ** 3)\n")["limit"] == "memory"
        assert run_and_grade(limited, simple_program("model.x + 2 * model.y", integer=True))["outcome"] == "correct"


PULP_PROGRAM = """
import pulp
problem = pulp.LpProblem("plan", pulp.LpMaximize)
x = pulp.LpVariable("x", 0, 10, cat="Integer")
y = pulp.LpVariable("y", 0, 3)
problem += x + 2 * y
problem += x + y <= 4.5
problem.solve(pulp.PULP_CBC_CMD(msg=0))
"""

GUROBI_BUILD_ONLY = """
import gurobipy as gp
model = gp.Model("plan")
model.Params.OutputFlag = 0
x = model.addVar(ub=10, vtype=gp.GRB.INTEGER, name="x")
y = model.addVar(ub=3, name="y")
model.setObjective(x + 2 * y, gp.GRB.MAXIMIZE)
model.addConstr(x + y <= 4.5)
model.update()
model.write("model.lp")  # like the Bench4Opt references: built and written, never optimized
"""


@pytest.mark.parametrize("library, program", [("pulp", PULP_PROGRAM), ("gurobipy", GUROBI_BUILD_ONLY)])
def test_other_modeling_libraries_report_their_solves(sandbox, library, program):
    if library not in sandbox.preloaded:
        pytest.skip(f"{library} is not installed")
    record = run_and_grade(sandbox, program)
    assert record["outcome"] == "correct" and record["objective"] == 7.0, record
    assert record["solver_api"].startswith(library)


def test_a_model_solved_without_loading_its_solution_is_read_when_the_program_ends(sandbox):
    program = simple_program("model.x + 2 * model.y + 100", integer=True).replace(
        'pyo.SolverFactory("highs").solve(model)',
        'results = pyo.SolverFactory("appsi_highs").solve(model, load_solutions=False)\nmodel.solutions.load_from(results)',
    )
    record = run_and_grade(sandbox, program, truth="107")
    assert record["outcome"] == "correct" and record["objective"] == 107.0
    assert record["objective_source"] == "model, read when the program ended"
    crashed = run_and_grade(sandbox, program.replace("model.solutions.load_from(results)", "raise SystemExit(1)"), truth="107")
    # no clean exit, so no read at the end: the solver's own value (with Pyomo's constant) is kept
    assert crashed["objective"] == 107.0 and crashed["objective_source"] == "solver" and crashed["outcome"] == "runtime error"


def test_a_dead_server_is_restarted_and_the_program_retried(sandbox):
    outcome: dict = {}
    runner = threading.Thread(target=lambda: outcome.update(run_and_grade(sandbox, "import time\ntime.sleep(1.0)\n")))
    runner.start()
    time.sleep(0.4)
    sandbox._process.kill()  # the server dies under a running program (as if a program had killed it)
    runner.join(timeout=30)
    assert outcome["exit_code"] == 0 and outcome["outcome"] == "no objective" and outcome["harness_error"] is None
    assert_harness_still_works(sandbox)


def test_programs_import_what_the_server_did_not_pre_import(sandbox):
    # the standard library and SciPy stay importable for the unprivileged user; SciPy's status is recorded
    record = run_and_grade(sandbox, """
        import fractions, secrets, statistics, sqlite3
        from scipy.optimize import linprog
        result = linprog([-1, -2], A_ub=[[1, 1]], b_ub=[4.5], bounds=[(0, 10), (0, 3)])
        print("Objective:", -result.fun)
    """, truth="7.5", timeout=30)  # importing SciPy takes a CPU second: room for a loaded machine
    assert record["exit_code"] == 0, record["stderr"]
    assert record["solver_api"] == "scipy.linprog" and record["solver_status"] == "optimal"
    assert record["outcome"] == "correct" and record["objective"] is None and record["printed_objective"] == 7.5


def test_strict_grades_the_solve_whose_objective_the_program_printed(sandbox):
    # the real model (objective 7), its objective printed, then a small auxiliary model (objective 0)
    auxiliary = (
        "model.objective.deactivate()\n"
        "model.check = pyo.Objective(expr=model.x + model.y)\n"
        "pyo.SolverFactory('appsi_highs').solve(model)\n"
        "print('auxiliary bound computed')\n"
    )
    record = run_and_grade(sandbox, simple_program("model.x + 2 * model.y", integer=True) + auxiliary)
    assert record["solve_calls"] == 2 and record["solve_choice"] == "printed" and record["solve_order"] == 0
    assert record["objective"] == 7.0 and record["outcome"] == "correct" and record["verdicts"]["strict"], record
    # with nothing printed that names a solve, the last one is graded, and the record says why
    silent = run_and_grade(sandbox, simple_program("model.x + 2 * model.y", integer=True).replace(
        'print("Objective:", pyo.value(model.objective))', "") + auxiliary)
    assert silent["solve_choice"] == "last (no printed objective matched)" and silent["objective"] == 0.0
    assert silent["outcome"] == "wrong value"
