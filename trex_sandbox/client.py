"""The sandbox client: starts the fork server (`server.py`), inside bubblewrap where available, hands it
programs and collects their results.

Usage: `with Sandbox(settings) as sandbox: result = sandbox.run(program, data_files)`; `run` is
thread-safe, and `run_many` runs a list of programs `workers` at a time. What is contained and what
is not: see the package docstring.
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trex_sandbox.solves import SolveChoice, choose_solve

MODEL_FILE = "model.lp"  # what the server writes with capture_model (server.py names it too: it imports nothing)

SERVER_SCRIPT = Path(__file__).with_name("server.py")
# Where the server script is bound inside bubblewrap: the repository it comes from stays out of sight.
SERVER_MOUNT = "/run/trex-sandbox/server.py"
# What every program finds imported already (SciPy is left out: it doubles what each fork copies).
PRELOAD = ("numpy", "pyomo.environ", "highspy", "pulp", "gurobipy")
MOUNT_POINT = "/tmp/trex-sandbox"
# Programs run as unprivileged users, one user id per worker slot, so that a program can signal
# neither the server nor the programs running beside it, and the process limit counts its own only.
SANDBOX_UID_BASE = 62000
# The system folders a Python program needs, read-only; the symbolic links among them (/lib -> usr/lib
# on merged-/usr systems) are recreated as links.
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The few files of /etc that the dynamic loader, the C library and Python's pwd / time modules read.
ETC_FILES = (
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd", "/etc/group",
    "/etc/nsswitch.conf", "/etc/localtime", "/etc/alternatives",
)  # fmt: skip
# One BLAS / OpenMP thread: memory limits break multithreaded BLAS, and workers already fill the cores.
CHILD_ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
}

_reported: set[str] = set()  # one-time warnings already given in this process


@dataclass
class SandboxSettings:
    timeout: float = 360.0  # wall seconds per program (`run` may give another per call)
    memory_mb: int = 4096  # address space on top of the pre-imported stack
    output_limit_kb: int = 256  # stdout / stderr kept in the result
    file_size_mb: int = 64  # largest file (stdout included) a program may write
    max_processes: int = 64  # processes per program (enforced when programs run as their own user)
    workers: int = 0  # programs at once (0 = CPU cores)
    isolation: str = "auto"  # auto | bwrap | process
    # HiGHS options set on every Highs instance a program makes, before its own (it may still change them):
    # e.g. `trex synth` turns off HiGHS's feasibility-jump heuristic for its own reference programs
    highs_defaults: dict = field(default_factory=dict)


@dataclass
class ExecutionResult:
    """What one program did. `solves` holds every solve it made, in order: {"order", "api", "status",
    "objective", "gap", ...} (a Pyomo solve once, not again for the HiGHS run inside it)."""

    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    wall_s: float = 0.0
    cpu_s: float = 0.0
    max_rss_kb: int = 0
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    solves: list[dict] = field(default_factory=list)
    limit: str | None = None  # which limit ended the program: time, cpu, memory, file size
    error: str | None = None  # the harness's own trouble (the server died)
    model_lp: str | None = None  # the model the program built, as LP text (when asked for with capture_model)

    @property
    def exit_ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None

    @property
    def last_line(self) -> str:
        lines = [line.strip() for line in self.stdout.splitlines() if line.strip()]
        return lines[-1] if lines else ""

    def chosen_solve(self) -> SolveChoice:
        """The solve whose objective the program printed (see `trex_sandbox.solves`)."""
        return choose_solve(self.solves, self.stdout)

    def to_dict(self) -> dict:
        return asdict(self)


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (PR_SET_PDEATHSIG), so that a killed
    pipeline leaves no orphaned worker (and so no sandbox server) behind. Linux sends the signal when
    the parent *thread* that started this process ends: start workers from a thread that lives as long
    as they do. A no-op where prctl is unavailable."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _world_traversable(path: Path) -> bool:
    """Whether a user with no special rights can reach `path` (every folder on the way o+x)."""
    path = Path(path).resolve()
    for part in [path, *path.parents]:
        try:
            mode = part.stat().st_mode
        except OSError:
            return False
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    return True


def python_paths(python: str) -> list[str]:
    """The folders of the Python installation and virtual environment that run `python`, outermost
    only (a folder inside another is left out), without those under the system folders."""
    executable = Path(python).absolute()
    candidates = {
        str(Path(sys.base_prefix).resolve()),
        str(Path(sys.base_exec_prefix).resolve()),
        str(Path(sys.prefix).absolute()),
        str(Path(sys.prefix).resolve()),
        str(executable.parent.parent),
        str(executable.resolve().parent.parent),
    }
    kept: list[str] = []
    for path in sorted(candidates, key=len):
        inside = [folder for folder in [*kept, *SYSTEM_FOLDERS] if path == folder or path.startswith(folder + "/")]
        if not inside and path != "/":
            kept.append(path)
    return sorted(kept)


def readable_paths(python: str) -> list[str]:
    """Everything a Landlock-sealed program may read: the system folders, a few /etc files, the Python
    installation and its packages, a few devices, and of /proc only its own entry (/proc/self is
    resolved when the rules are made: the harness's entries, environment included, stay closed)."""
    existing = [path for path in (*SYSTEM_FOLDERS, *ETC_FILES) if os.path.lexists(path)]
    return existing + python_paths(python) + ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/proc/self"]


def _bwrap_mounts(python: str) -> list[str]:
    """bubblewrap arguments for a root holding only the system folders, the /etc files, the Python
    installation (at its own path: a virtual environment's links point there), /dev, /proc, an empty
    /tmp and the server script."""
    arguments: list[str] = []
    for folder in SYSTEM_FOLDERS:
        if os.path.islink(folder):
            arguments += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            arguments += ["--ro-bind", folder, folder]
    arguments += ["--perms", "0755", "--dir", "/etc"]  # bwrap would make it private (0700)
    for path in ETC_FILES:
        if os.path.exists(path):
            arguments += ["--ro-bind", path, path]
    arguments += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    created: set[str] = {"/", "/tmp", "/dev", "/proc", "/etc", *SYSTEM_FOLDERS}
    for path in python_paths(python):
        # bwrap makes missing parent folders private (0700): create them traversable first
        for parent in reversed(Path(path).parents):
            if str(parent) not in created:
                created.add(str(parent))
                arguments += ["--perms", "0755", "--dir", str(parent)]
        arguments += ["--ro-bind", path, path]
    arguments += ["--ro-bind", str(SERVER_SCRIPT), SERVER_MOUNT]
    return arguments


def _bwrap_works(bwrap: str, python: str) -> bool:
    """Whether bubblewrap starts here (user namespaces may be refused) and Python runs inside it."""
    try:
        probe = subprocess.run(
            [bwrap, *_bwrap_mounts(python), "--unshare-net", "--unshare-pid", python, "-I", "-c", "pass"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _landlock_works(python: str) -> bool:
    """Whether this kernel applies Landlock rules (asked of a throwaway Python process)."""
    probe_code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import server; "
        "server.apply_landlock([], []); open('/etc/passwd')"
    )
    try:
        probe = subprocess.run(
            [python, "-I", "-c", probe_code, str(SERVER_SCRIPT.parent)], capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    # Sealed means the read after restricting was refused; any other failure means no Landlock.
    return probe.returncode != 0 and b"PermissionError" in probe.stderr


class Sandbox:
    """A running fork server; see the package docstring. `on_warning` receives the one-time notes on
    weaker isolation (default: `warnings.warn`)."""

    def __init__(
        self,
        settings: SandboxSettings | None = None,
        python: str | None = None,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings or SandboxSettings()
        self.python = python or sys.executable
        self.workers = self.settings.workers or os.cpu_count() or 1
        self.on_warning = on_warning or (lambda message: warnings.warn(message, RuntimeWarning, stacklevel=3))
        self._lock = threading.Lock()
        self._restart_lock = threading.Lock()
        self._free_uids: queue.Queue | None = None
        self.program_uids: list[int] = []
        self._pending: dict[str, dict] = {}
        self._process: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._host_root: Path | None = None
        self.isolation = ""  # what the programs run inside, in words
        self.files_sealed = False  # whether a program can read only the runtime and its own folder
        self.preloaded: list[str] = []
        self.warm_up_failures: list[str] = []
        self._server_cpu: dict[subprocess.Popen, float] = {}  # server -> the CPU seconds it last reported

    # -------------------------------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _warn_once(self, key: str, message: str) -> None:
        if key not in _reported:
            _reported.add(key)
            self.on_warning(message)

    def _choose_isolation(self) -> tuple[str | None, bool, bool]:
        """(bwrap binary or None, whether programs drop to unprivileged users, whether Landlock seals
        their files)."""
        mode = self.settings.isolation
        if mode not in ("auto", "bwrap", "process"):
            raise ValueError(f"isolation {mode!r}: use auto, bwrap or process")
        bwrap = bwrap_path() if mode != "process" else None
        if bwrap and not _bwrap_works(bwrap, self.python):
            bwrap = None
        if mode == "bwrap" and not bwrap:
            raise ValueError(
                "isolation = 'bwrap' but bubblewrap is missing or does not work here; install it "
                "(apt-get install bubblewrap, or `make setup`) or use isolation = 'auto'"
            )
        landlock = not bwrap and _landlock_works(self.python)
        running_as_root = os.geteuid() == 0
        drop = running_as_root and (
            bool(bwrap)
            or all(_world_traversable(Path(path)) for path in python_paths(self.python))
        )
        if not bwrap and mode == "auto":
            self._warn_once(
                "no-bwrap",
                "bubblewrap (bwrap) is not available: generated programs run with process limits only "
                "(no network or PID isolation); install it with `make setup`",
            )
        if not bwrap and not landlock:
            self._warn_once(
                "unsealed",
                "files are NOT sealed: without bubblewrap or Landlock a generated program can read every "
                "file its user can (benchmark answers included)",
            )
        if running_as_root and not drop:
            self._warn_once(
                "root", "generated programs run as root: the Python installation is not readable by other users"
            )
        if not drop:
            self._warn_once(
                "no-process-limit",
                f"the process limit (max_processes = {self.settings.max_processes}) is not enforced: programs "
                "share the harness's user (it holds when trex runs as root with a Python installation others can read)",
            )
        return bwrap, drop, landlock

    def start(self) -> None:
        bwrap, drop, landlock = self._choose_isolation()
        self._host_root = Path(tempfile.mkdtemp(prefix="trex-sandbox-"))
        # Traversable, not listable: a program reaches its own folder but cannot list the others.
        os.chmod(self._host_root, 0o711)
        server_settings = {
            "root": MOUNT_POINT if bwrap else str(self._host_root),
            "preload": list(PRELOAD),
            "child_environment": CHILD_ENVIRONMENT,
            "drop_privileges": drop,
            "landlock": {"readable": readable_paths(self.python)} if landlock else None,
            "highs_defaults": dict(self.settings.highs_defaults),
        }
        environment = dict(CHILD_ENVIRONMENT, HOME="/tmp", TMPDIR="/tmp" if bwrap else str(self._host_root))
        server_script = SERVER_MOUNT if bwrap else str(SERVER_SCRIPT)
        command = [self.python, "-I", "-u", server_script, json.dumps(server_settings)]
        if bwrap:
            prefix = [
                bwrap,
                *_bwrap_mounts(self.python),
                "--bind", str(self._host_root), MOUNT_POINT,
                "--remount-ro", "/",
                "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--die-with-parent", "--new-session",
                "--chdir", MOUNT_POINT,
            ]  # fmt: skip
            command = prefix + command
            self.isolation = (
                "bubblewrap (only the Python runtime and its own folder visible, read-only system, "
                "no network, own PID namespace)"
            )
        elif landlock:
            self.isolation = "process limits and Landlock (only the Python runtime and its own folder readable)"
        else:
            self.isolation = "process limits only (no bubblewrap, files not sealed)"
        if drop:
            self.isolation += "; each program runs as an unprivileged user of its own"
        self.files_sealed = bool(bwrap) or landlock
        self._drop = drop
        self.program_uids = [SANDBOX_UID_BASE + slot for slot in range(self.workers)] if drop else []
        if self._free_uids is None:
            self._free_uids = queue.Queue()
            for uid in self.program_uids:
                self._free_uids.put(uid)
        server_log = tempfile.TemporaryFile()  # the server's own complaints, shown if it fails to start
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=server_log,
            env=environment,
            close_fds=True,
            start_new_session=True,
        )
        ready_line = self._process.stdout.readline()
        if not ready_line:
            self._process.wait(timeout=10)
            server_log.seek(0)
            detail = server_log.read().decode(errors="replace").strip()[-2000:]
            raise RuntimeError(
                f"the sandbox server did not start (exit status {self._process.returncode}): {detail or 'no output'}"
            )
        server_log.close()
        ready = json.loads(ready_line)
        self.preloaded = ready.get("preloaded", [])
        self.warm_up_failures = ready.get("warm_up_failures", [])
        self._reader = threading.Thread(target=self._read_replies, args=(self._process,), daemon=True)
        self._reader.start()

    def _read_replies(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            try:
                reply = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self._lock:
                waiter = self._pending.get(reply.get("job"))
                if "server_cpu_s" in reply:
                    self._server_cpu[process] = float(reply["server_cpu_s"])
            if waiter is not None:
                waiter["reply"] = reply
                waiter["event"].set()
        # The server is gone: wake everyone still waiting on it.
        with self._lock:
            for waiter in self._pending.values():
                if waiter.get("process") is process and "reply" not in waiter:
                    waiter["reply"] = None
                    waiter["event"].set()

    @property
    def cpu_s(self) -> float:
        """CPU seconds the sandbox's servers (a restarted one too) and the programs they ran have used, as
        of each server's latest reply. Counted by the servers themselves: under bubblewrap's PID namespace
        none of it reaches this process's `resource.getrusage(RUSAGE_CHILDREN)`."""
        with self._lock:
            return sum(self._server_cpu.values())

    def _alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _restart_if_dead(self) -> None:
        # One restart even when several workers find the server dead at once.
        with self._restart_lock:
            if self._alive():
                return
            if self._process is not None:
                self._process.wait()
            self._cleanup_root()
            self.start()

    def close(self) -> None:
        process = self._process
        self._process = None
        if process is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._cleanup_root()

    def _cleanup_root(self) -> None:
        if self._host_root is not None:
            shutil.rmtree(self._host_root, ignore_errors=True)
            self._host_root = None

    # -------------------------------------------------------------------------------------------
    def run(
        self,
        program: str,
        data_files: Mapping[str, str | Path] | None = None,
        *,
        inline_files: Mapping[str, str] | None = None,
        timeout: float | None = None,
        capture_model: bool = False,
    ) -> ExecutionResult:
        """Run one program and wait for it. Its working folder holds program.py, copies of
        `data_files` (name there -> file here) and `inline_files` (name there -> text); `timeout`
        replaces the settings' wall-clock limit for this program. With `capture_model`, the model the
        program built comes back as LP text (B4O-ORGEval grades it)."""
        job = (program, dict(data_files or {}), dict(inline_files or {}), timeout or self.settings.timeout,
               capture_model)
        try:
            result = self._run_once(*job)
        except OSError as error:  # its folder vanished while a dead server's root was cleaned up
            result = ExecutionResult(error=f"sandbox folder lost: {error}")
        if result.error is not None:
            # The server died under this program (another program may have killed it): try once more.
            self._restart_if_dead()
            result = self._run_once(*job)
        return result

    def _run_once(self, program: str, data_files: dict, inline_files: dict, timeout: float,
                  capture_model: bool) -> ExecutionResult:
        if not self._alive():
            self._restart_if_dead()
        if not self._drop:
            return self._run_as(program, data_files, inline_files, timeout, capture_model, None)
        uid = self._free_uids.get()  # also caps the programs at once to `workers`
        try:
            return self._run_as(program, data_files, inline_files, timeout, capture_model, uid)
        finally:
            self._free_uids.put(uid)

    def _run_as(
        self, program: str, data_files: dict, inline_files: dict, timeout: float, capture_model: bool,
        uid: int | None,
    ) -> ExecutionResult:
        job = uuid.uuid4().hex
        job_dir = self._host_root / job
        work, meta = job_dir / "work", job_dir / "meta"
        work.mkdir(parents=True)
        meta.mkdir(mode=0o700)
        (work / "program.py").write_text(program, encoding="utf-8")
        for name, source in data_files.items():
            shutil.copyfile(source, work / name)
        for name, text in inline_files.items():
            (work / name).write_text(text, encoding="utf-8")
        os.chmod(job_dir, 0o711)
        os.chmod(work, 0o700)  # the programs beside it (other users) cannot read it
        if uid is not None:
            # The program runs as its slot's user: it may write its own folder, nothing of the harness.
            for path in [work, *work.iterdir()]:
                os.chown(path, uid, uid)
        settings = self.settings
        request = {
            "job": job,
            "timeout": timeout,
            # a backstop to the wall-clock limit; room for a solver that uses two threads
            "cpu_limit": 2 * timeout + 1,
            "memory_mb": settings.memory_mb,
            "file_size_mb": settings.file_size_mb,
            "max_processes": settings.max_processes,
            "uid": uid,
            "capture_model": capture_model,
        }
        waiter = {"event": threading.Event(), "process": self._process}
        with self._lock:
            self._pending[job] = waiter
            process = self._process
        try:
            try:
                process.stdin.write((json.dumps(request) + "\n").encode())
                process.stdin.flush()
            except (BrokenPipeError, OSError, AttributeError):
                waiter["reply"] = None
                waiter["event"].set()
            # The server enforces the limit; this is only a guard against a stuck server.
            if not waiter["event"].wait(timeout + 60):
                waiter["reply"] = None
            reply = waiter.get("reply")
            result = self._collect(reply, meta)
            model_file = work / MODEL_FILE
            if capture_model and model_file.is_file() and not model_file.is_symlink():
                result.model_lp = _read_capped(model_file, settings.file_size_mb * 1024 * 1024)[0]
            return result
        finally:
            with self._lock:
                self._pending.pop(job, None)
            shutil.rmtree(job_dir, ignore_errors=True)

    def _collect(self, reply: dict | None, meta: Path) -> ExecutionResult:
        limit_bytes = self.settings.output_limit_kb * 1024
        stdout, stdout_cut = _read_capped(meta / "stdout.txt", limit_bytes)
        stderr, stderr_cut = _read_capped(meta / "stderr.txt", limit_bytes)
        solves = _read_solves(meta / "events.jsonl")
        if reply is None:
            return ExecutionResult(
                stdout=stdout, stderr=stderr, solves=solves, error="the sandbox server exited while the program ran"
            )
        result = ExecutionResult(
            exit_code=reply.get("exit_code"),
            signal=reply.get("signal"),
            timed_out=bool(reply.get("timed_out")),
            wall_s=reply.get("wall_s", 0.0),
            cpu_s=reply.get("cpu_s", 0.0),
            max_rss_kb=reply.get("max_rss_kb", 0),
            stdout=stdout,
            stderr=stderr,
            stdout_truncated=stdout_cut,
            stderr_truncated=stderr_cut,
            solves=solves,
        )
        if result.timed_out:
            result.limit = "time"
        elif result.signal == 24:
            result.limit, result.timed_out = "cpu", True
        elif result.signal == 25:
            result.limit = "file size"
        elif "MemoryError" in stderr:
            result.limit = "memory"
        return result

    def run_many(
        self,
        jobs: Iterable[tuple[str, Mapping[str, str | Path]]],
        on_result: Callable[[int, ExecutionResult], None] | None = None,
    ) -> list[ExecutionResult]:
        """Run (program, data_files) pairs `workers` at a time; results in input order."""
        jobs = list(jobs)
        results: list[ExecutionResult | None] = [None] * len(jobs)

        def one(index: int) -> None:
            program, data_files = jobs[index]
            results[index] = self.run(program, data_files)
            if on_result is not None:
                on_result(index, results[index])

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            for future in [pool.submit(one, i) for i in range(len(jobs))]:
                future.result()
        return results  # type: ignore[return-value]


def _read_solves(path: Path) -> list[dict]:
    """The program's solves from the hooks' events: nested HiGHS runs left out, late updates (an
    objective read when the program ended) merged into the solve they belong to."""
    solves: list[dict] = []
    if not path.is_file():
        return solves
    for line in path.read_text(errors="replace").splitlines()[-2000:]:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(event, dict) or event.get("nested"):
            continue
        target = event.pop("update_of", None)
        if target is not None:
            for solve in solves:
                if solve.get("order") == target:
                    solve.update(event)
            continue
        solves.append(event)
    return solves


def _read_capped(path: Path, limit: int) -> tuple[str, bool]:
    """A file as text, cut to its first and last `limit / 2` bytes when longer (the objective line
    is usually at the end), and whether it was cut."""
    if not path.is_file():
        return "", False
    size = path.stat().st_size
    with open(path, "rb") as stream:
        if size <= limit:
            return stream.read().decode("utf-8", errors="replace"), False
        head = stream.read(limit // 2)
        stream.seek(size - limit // 2)
        tail = stream.read()
    cut = size - len(head) - len(tail)
    text = head.decode("utf-8", errors="replace")
    text += f"\n[... {cut} bytes cut by trex ...]\n" + tail.decode("utf-8", errors="replace")
    return text, True
