"""Run rendered programs fast, each in a fresh sandboxed child: a pre-imported fork server.

A fresh `python program.py` spends about half a second importing Pyomo before it solves anything, too
slow for verifying tens of problems per second. `ProgramRunner` starts one server process that imports
Pyomo, its two HiGHS interfaces and highspy once (printing HiGHS's one-time banner into /dev/null) and
then never solves anything itself: HiGHS starts worker threads on its first solve, and a fork of a
process with running solver threads could deadlock in the child. For every program the server forks a
child that:

- starts a new session (so the whole process group can be killed on timeout),
- moves into a new temporary folder holding `program.py` and, when given, `data.json`,
- gets resource limits (CPU seconds, address space, file size, open files),
- sends stdout and stderr to files in that folder, and stdin from /dev/null,
- runs the program as `__main__` and exits with its status.

The server waits for the child with a wall-clock limit (SIGKILL to its process group past it) and sends
back the exit status, stdout, stderr and wall time. Messages between client and server are
length-prefixed JSON over the server's stdin and a private duplicate of its stdout (its real stdout is
pointed at /dev/null so that nothing a library prints can corrupt the protocol).
"""

from __future__ import annotations

import gc
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

OUTPUT_LIMIT = 1 << 20  # bytes of stdout / stderr sent back per program
_HEADER = struct.Struct("!I")


@dataclass
class RunResult:
    returncode: int  # negative: killed by that signal
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float

    @property
    def last_line(self) -> str:
        lines = [line.strip() for line in self.stdout.strip().splitlines() if line.strip()]
        return lines[-1] if lines else ""


def _write_message(stream, obj) -> None:
    payload = json.dumps(obj).encode()
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def _read_exactly(stream, size: int) -> bytes:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            raise EOFError("the program runner's pipe closed")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read_message(stream):
    (size,) = _HEADER.unpack(_read_exactly(stream, _HEADER.size))
    return json.loads(_read_exactly(stream, size))


class ProgramRunner:
    """Client of one fork server. Use as a context manager, or call `close()`."""

    def __init__(self, memory_mb: int = 2048, cpu_seconds: int | None = None) -> None:
        self.memory_mb = memory_mb
        self.cpu_seconds = cpu_seconds
        self._process: subprocess.Popen | None = None

    def _start(self) -> None:
        environment = dict(os.environ)
        # the server and its children import data_synth only through this file's folder's parent
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        environment["PYTHONPATH"] = package_root + os.pathsep + environment.get("PYTHONPATH", "")
        self._process = subprocess.Popen(
            [sys.executable, "-c", "from data_synth.runner import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment,
        )
        ready = _read_message(self._process.stdout)
        if ready.get("ready") is not True:
            raise RuntimeError(f"the program runner failed to start: {ready}")

    def run(self, program: str, data: dict | None = None, timeout: float = 20.0) -> RunResult:
        """Run `program` (source text) in a fresh child, with `data` written as data.json beside it."""
        for attempt in range(2):
            if self._process is None or self._process.poll() is not None:
                self._start()
            try:
                _write_message(self._process.stdin, {
                    "program": program, "data": data, "timeout": float(timeout),
                    "memory_mb": self.memory_mb, "cpu_seconds": self.cpu_seconds or int(timeout) + 2,
                })
                reply = _read_message(self._process.stdout)
                return RunResult(**reply)
            except (EOFError, BrokenPipeError):
                # the server died (it never should); start a new one once, then give up
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._process is not None:
            try:
                self._process.stdin.close()
                self._process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
            self._process = None

    def __enter__(self) -> ProgramRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (PR_SET_PDEATHSIG), so a killed pipeline
    leaves no orphaned workers or servers behind. A no-op where prctl is unavailable. Linux sends the
    signal when the parent *thread* that started this process ends: start a `ProgramRunner` from a
    thread that lives as long as you use it (the main thread, as the pipeline does)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


# ------------------------------------------------------------------------------------------ server side

def _silence_stdout() -> int:
    """Point fd 1 at /dev/null; return a private duplicate of the original for the protocol."""
    protocol_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    return protocol_fd


WARM_UP_MILP = """
model = pyo.ConcreteModel()
model.I = pyo.Set(initialize=["a", "b", "c"])
model.P = pyo.Set(initialize=[("a", "b"), ("b", "c")], dimen=2)
model.x = pyo.Var(model.I, domain=pyo.NonNegativeReals)
model.y = pyo.Var(model.I, domain=pyo.Binary)
model.z = pyo.Var(model.P, domain=pyo.NonNegativeIntegers, bounds=(0, 9))
model.obj = pyo.Objective(expr=sum(model.x[i] for i in model.I) + sum(2.5 * model.z[p] for p in model.P),
                          sense=pyo.maximize)
model.link = pyo.Constraint(model.I, rule=lambda model, i: model.x[i] <= 4 * model.y[i])
model.count = pyo.Constraint(expr=sum(model.y[i] for i in model.I) + sum(model.z[p] for p in model.P) <= 2.5)
model.pair = pyo.Constraint(model.P, rule=lambda model, i, j: model.z[i, j] >= model.y[i] - 1)
"""

WARM_UP_QP = """
model = pyo.ConcreteModel()
model.x = pyo.Var(["a", "b"], domain=pyo.NonNegativeReals)
model.obj = pyo.Objective(expr=model.x["a"] * model.x["a"] + model.x["a"] * model.x["b"]
                          + model.x["b"] * model.x["b"] - model.x["a"])
model.budget = pyo.Constraint(expr=model.x["a"] + model.x["b"] == 1)
"""


def _preimport() -> None:
    """Import and warm up Pyomo and HiGHS once, so every child starts warm.

    Pyomo fills dispatch tables and its HiGHS interfaces set themselves up on first use; doing that here
    saves each child tens of milliseconds. The warm-up solves use one thread: HiGHS then initializes
    its task scheduler without worker threads, so no thread is lost in a forked child (with threads,
    a child's parallel solve could wait forever on workers that a fork does not copy).
    """
    import highspy
    import pyomo.environ as pyo
    from pyomo.contrib.appsi.solvers import highs as _appsi_highs  # noqa: F401
    from pyomo.contrib.solver.solvers import highs as _pyomo_highs  # noqa: F401

    highspy.Highs()  # prints the one-time banner here (fd 1 is /dev/null), never in a child
    for name, source in (("appsi_highs", WARM_UP_MILP), ("highs", WARM_UP_MILP), ("highs", WARM_UP_QP)):
        solver = pyo.SolverFactory(name)
        if not solver.available():
            raise RuntimeError(f"Pyomo's {name} solver is not available (pip install highspy)")
        solver.options["threads"] = 1
        namespace = {"pyo": pyo}
        exec(source, namespace)
        solver.solve(namespace["model"], load_solutions=False)


def _child(program: str, folder: str, memory_mb: int, cpu_seconds: int) -> None:
    """Runs in the forked child; never returns."""
    import resource
    import traceback

    code = 1
    try:
        os.setsid()
        os.chdir(folder)
        limits = [
            (resource.RLIMIT_CPU, cpu_seconds),
            (resource.RLIMIT_FSIZE, 64 << 20),
            (resource.RLIMIT_NOFILE, 256),
        ]
        if memory_mb > 0:
            limits.append((resource.RLIMIT_AS, memory_mb << 20))
        for limit, value in limits:
            soft, hard = resource.getrlimit(limit)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(limit, (value, hard))
        stdin = os.open(os.devnull, os.O_RDONLY)
        stdout = os.open("stdout.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        stderr = os.open("stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(source, target)
            os.close(source)
        sys.argv = ["program.py"]
        sys.path[0] = folder
        gc.disable()  # a short-lived program: collections would only copy the server's pages
        code = 0
        try:
            exec(compile(program, os.path.join(folder, "program.py"), "exec"),
                 {"__name__": "__main__", "__file__": os.path.join(folder, "program.py")})
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
    """Wait for child `pid` at most `timeout` seconds; kill its process group past that."""
    deadline = time.monotonic() + timeout
    pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    try:
        while True:
            finished, status = os.waitpid(pid, os.WNOHANG)
            if finished:
                return os.waitstatus_to_exitcode(status), False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if pidfd is not None:
                select.select([pidfd], [], [], remaining)
            else:
                time.sleep(min(remaining, 0.005))
    finally:
        if pidfd is not None:
            os.close(pidfd)
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), True


def _read_capped(path: str) -> str:
    try:
        with open(path, "rb") as stream:
            return stream.read(OUTPUT_LIMIT).decode(errors="replace")
    except FileNotFoundError:
        return ""


def _run_one(request: dict) -> dict:
    folder = tempfile.mkdtemp(prefix="trex-program-")
    started = time.monotonic()
    try:
        with open(os.path.join(folder, "program.py"), "w") as stream:
            stream.write(request["program"])
        if request.get("data") is not None:
            with open(os.path.join(folder, "data.json"), "w") as stream:
                json.dump(request["data"], stream)
        pid = os.fork()
        if pid == 0:
            _child(request["program"], folder, int(request["memory_mb"]), int(request["cpu_seconds"]))
        returncode, timed_out = _wait(pid, float(request["timeout"]))
        return {
            "returncode": returncode,
            "stdout": _read_capped(os.path.join(folder, "stdout.txt")),
            "stderr": _read_capped(os.path.join(folder, "stderr.txt")),
            "timed_out": timed_out,
            "wall_s": round(time.monotonic() - started, 6),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def serve() -> None:
    """The server loop (runs in the process `ProgramRunner` starts)."""
    die_with_parent()
    # Ctrl-C reaches the whole process group; the client (the pipeline) handles it and closes this server
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    protocol = os.fdopen(_silence_stdout(), "wb")
    requests = sys.stdin.buffer
    try:
        _preimport()
    except Exception as error:  # report instead of dying silently
        _write_message(protocol, {"ready": False, "error": repr(error)})
        return
    # Children share the server's objects copy-on-write; a garbage-collector pass in a child would
    # touch (and so copy) every page of them. Frozen objects are never scanned.
    gc.collect()
    gc.freeze()
    _write_message(protocol, {"ready": True})
    while True:
        try:
            request = _read_message(requests)
            _write_message(protocol, _run_one(request))
        except (EOFError, BrokenPipeError):
            return  # the client went away: nothing left to serve
