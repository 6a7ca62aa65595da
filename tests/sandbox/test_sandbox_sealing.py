"""Filesystem sealing: a graded program sees the Python runtime, its packages and its own folder, and
nothing else: not a benchmark file beside the harness, not the repository it runs from, not /work,
/home or $HOME. Run under both mechanisms: bubblewrap, and Landlock for isolation = "process"."""

from __future__ import annotations

import json
import os
import socket
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from trex_sandbox import Sandbox, SandboxSettings
from trex_sandbox.server import landlock_abi

SECRET = "answer-of-item-17: 4242.5"
SYSTEM_ENTRIES = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "proc", "tmp", "run"}


def runtime_roots() -> list[Path]:
    """The Python installation and virtual environment the sandbox must keep visible."""
    return [Path(p) for p in {sys.prefix, os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}]


def allowed_entries(folder: str) -> set[str]:
    """The names a sealed listing of `folder` may show: folders on the way to the Python runtime,
    and at / the system folders."""
    names = set(SYSTEM_ENTRIES) if folder == "/" else set()
    for root in runtime_roots():
        for path in [root, *root.parents]:
            if str(path.parent) == folder and path != path.parent:
                names.add(path.name)
    return names


PROBE = """
import json, os
report = {"reads": {}, "listings": {}}
harness_environment = f"/proc/{os.getppid()}/environ"  # the server's, inherited from the harness
for path in PATHS_TO_READ + [harness_environment]:
    try:
        with open(path) as stream:
            report["reads"][path] = stream.read()
    except OSError as error:
        report["reads"][path] = None
for folder in FOLDERS_TO_LIST:
    try:
        report["listings"][folder] = sorted(os.listdir(folder))
    except OSError as error:
        report["listings"][folder] = type(error).__name__
with open("data.json") as stream:
    report["own_data"] = json.load(stream)
print(json.dumps(report))
"""


@pytest.fixture(params=["bwrap", "process"])
def sealed(request):
    isolation = request.param
    try:
        sandbox = Sandbox(SandboxSettings(timeout=20, memory_mb=1024, workers=1, isolation=isolation))
        sandbox.start()
    except ValueError as error:
        pytest.skip(f"bubblewrap does not work here: {error}")
    try:
        if not sandbox.files_sealed:
            pytest.skip(f"{isolation}: no sealing mechanism here ({sandbox.isolation}): Landlock is not available")
        yield sandbox
    finally:
        sandbox.close()


def test_a_program_reads_only_the_runtime_and_its_own_folder(sealed, tmp_path):
    benchmark = tmp_path / "benchmarks" / "answers.jsonl"  # beside the harness, outside the job folder
    benchmark.parent.mkdir()
    benchmark.write_text(SECRET)
    in_repository = Path.cwd() / f"sealing-probe-{os.getpid()}.txt"  # under the folder trex runs from
    in_repository.write_text(SECRET)
    try:
        home = os.path.expanduser("~")
        folders = ["/", "/work", "/home", home, str(tmp_path), str(Path.cwd())]
        program = textwrap.dedent(PROBE).replace("PATHS_TO_READ", repr([str(benchmark), str(in_repository)]))
        program = program.replace("FOLDERS_TO_LIST", repr(folders))
        result = sealed.run(program, inline_files={"data.json": json.dumps({"capacity": 9})})
    finally:
        in_repository.unlink()
    assert result.exit_ok, result.stderr
    report = json.loads(result.last_line)
    assert report["own_data"] == {"capacity": 9}  # its own working folder stays readable
    assert len(report["reads"]) == 3 and set(report["reads"].values()) == {None}, report["reads"]
    assert SECRET not in result.stdout
    for folder, listing in report["listings"].items():
        if isinstance(listing, str):  # refused or absent: nothing to see
            assert listing in ("PermissionError", "FileNotFoundError"), (folder, listing)
            continue
        unexpected = set(listing) - allowed_entries(folder)
        assert not unexpected, f"{sealed.isolation}: {folder} shows {sorted(unexpected)}"


def test_a_sealed_program_still_imports_and_solves(sealed):
    program = (
        "import fractions, sqlite3, tempfile\nimport numpy\nimport pyomo.environ as pyo\n"
        "from scipy.optimize import linprog\n"
        "tempfile.mkstemp()\n"
        "m = pyo.ConcreteModel()\nm.x = pyo.Var(bounds=(0, 4))\nm.o = pyo.Objective(expr=m.x, sense=pyo.maximize)\n"
        "pyo.SolverFactory('highs').solve(m)\nprint('Objective:', pyo.value(m.o))\n"
    )
    result = sealed.run(program)
    assert result.exit_ok, result.stderr
    assert result.last_line == "Objective: 4.0" and result.solves[0]["objective"] == 4.0


def test_a_sealed_program_cannot_connect_out(sealed):
    if "Landlock" in sealed.isolation and landlock_abi() < 4:
        pytest.skip(f"Landlock ABI {landlock_abi()} has no network rules (4 or later has)")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    connections = []

    def accept() -> None:
        try:
            connections.append(listener.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    port = listener.getsockname()[1]
    result = sealed.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n")
    thread.join()
    listener.close()
    assert result.exit_code == 1 and not connections
    assert "ConnectionRefusedError" in result.stderr or "PermissionError" in result.stderr, result.stderr
