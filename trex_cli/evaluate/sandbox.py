"""Running generated programs contained: a fork server, inside bubblewrap where available.

No public harness is a security sandbox, and neither is this one; it contains the failures a model's
program can cause by accident or by a bad habit (endless loops, fork bombs, memory hogs, floods of
output, stray writes, leftover processes, network calls) and keeps the harness going.

`Sandbox` starts `sandbox_server.py` once. With bubblewrap (`bwrap`) the server runs with a read-only
root filesystem, a private /tmp whose only content is the job folders, no network, its own PID, IPC
and UTS namespaces, and dies with its parent; /root is hidden (the Python installation is bound back
when it lives there). Without bubblewrap trex falls back to process limits alone and says so once.
When trex runs as root, each program drops to an unprivileged user id of its own worker slot (when
the Python installation is readable by others), so it cannot signal the server or the programs beside
it, read other processes' environments, or outgrow its process limit. Every program then gets the limits described in `sandbox_server.py`.

Usage: `with Sandbox(settings) as sandbox: result = sandbox.run(program, data_files)`; `run` is
thread-safe, and `run_many` runs a list of programs `workers` at a time.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trex_cli.console import warn

SERVER_SCRIPT = Path(__file__).with_name("sandbox_server.py")
# What every program finds imported already (SciPy is left out: it doubles what each fork copies).
PRELOAD = ("numpy", "pyomo.environ", "highspy", "pulp", "gurobipy")
MOUNT_POINT = "/tmp/trex-sandbox"
# Programs run as unprivileged users, one user id per worker slot, so that a program can signal
# neither the server nor the programs running beside it, and the process limit counts its own only.
SANDBOX_UID_BASE = 62000
SIGNAL_NAMES = {9: "SIGKILL", 24: "SIGXCPU", 25: "SIGXFSZ", 11: "SIGSEGV", 6: "SIGABRT", 15: "SIGTERM"}
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

_fallback_reported = False


@dataclass
class SandboxSettings:
    timeout: float = 360.0  # wall seconds per program
    memory_mb: int = 4096  # address space on top of the pre-imported stack
    output_limit_kb: int = 256  # stdout / stderr kept in the result
    file_size_mb: int = 64  # largest file (stdout included) a program may write
    max_processes: int = 64  # processes per program (enforced when programs run as their own user)
    workers: int = 0  # programs at once (0 = CPU cores)
    isolation: str = "auto"  # auto | bwrap | process


@dataclass
class ExecutionResult:
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
    events: list[dict] = field(default_factory=list)
    limit: str | None = None  # which limit ended the program: time, cpu, memory, file size
    error: str | None = None  # the harness's own trouble (the server died)
    model_lp: str | None = None  # the model the program built, as LP text (when asked for with capture_model)

    @property
    def exit_ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None

    @property
    def last_solve(self) -> dict | None:
        return self.events[-1] if self.events else None

    def to_dict(self) -> dict:
        return asdict(self)


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


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


def _bwrap_works(bwrap: str) -> bool:
    try:
        probe = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid", "true"],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


class Sandbox:
    """A running fork server; see the module docstring."""

    def __init__(self, settings: SandboxSettings | None = None, python: str | None = None) -> None:
        self.settings = settings or SandboxSettings()
        self.python = python or sys.executable
        self.workers = self.settings.workers or os.cpu_count() or 1
        self._lock = threading.Lock()
        self._restart_lock = threading.Lock()
        self._free_uids: queue.Queue | None = None
        self.program_uids: list[int] = []
        self._pending: dict[str, dict] = {}
        self._process: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._host_root: Path | None = None
        self.isolation = ""  # what the server runs inside, in words
        self.preloaded: list[str] = []

    # -------------------------------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _choose_isolation(self) -> tuple[str | None, bool]:
        """(bwrap binary or None, whether programs drop to unprivileged users)."""
        global _fallback_reported
        mode = self.settings.isolation
        if mode not in ("auto", "bwrap", "process"):
            raise ValueError(f"isolation {mode!r}: use auto, bwrap or process")
        bwrap = bwrap_path() if mode != "process" else None
        if bwrap and not _bwrap_works(bwrap):
            bwrap = None
        if mode == "bwrap" and not bwrap:
            raise ValueError(
                "isolation = 'bwrap' but bubblewrap is missing or does not work here; install it "
                "(apt-get install bubblewrap, or `make setup`) or use isolation = 'auto'"
            )
        running_as_root = os.geteuid() == 0
        python_home = Path(sys.base_prefix)
        drop = running_as_root and (
            bool(bwrap) or (_world_traversable(python_home) and _world_traversable(Path(sys.prefix)))
        )
        if not bwrap and mode == "auto" and not _fallback_reported:
            _fallback_reported = True
            warn(
                "bubblewrap (bwrap) is not available: generated programs run with process limits only "
                "(no read-only filesystem, no network isolation); install it with `make setup`"
            )
        if running_as_root and not drop and not _fallback_reported:
            _fallback_reported = True
            warn("generated programs run as root: the Python installation is not readable by other users")
        return bwrap, drop

    def start(self) -> None:
        bwrap, drop = self._choose_isolation()
        self._host_root = Path(tempfile.mkdtemp(prefix="trex-sandbox-"))
        os.chmod(self._host_root, 0o755)
        root_seen_by_server = MOUNT_POINT if bwrap else str(self._host_root)
        server_settings = {
            "root": root_seen_by_server,
            "preload": list(PRELOAD),
            "child_environment": CHILD_ENVIRONMENT,
            "drop_privileges": drop,
        }
        environment = dict(CHILD_ENVIRONMENT, HOME="/tmp", TMPDIR="/tmp" if bwrap else str(self._host_root))
        command = [self.python, "-I", "-u", str(SERVER_SCRIPT), json.dumps(server_settings)]
        if bwrap:
            prefix = [
                bwrap,
                "--ro-bind", "/", "/",
                "--dev", "/dev",
                "--proc", "/proc",
                "--tmpfs", "/tmp",
            ]
            hidden = ["/tmp"]
            if Path("/root").exists():
                prefix += ["--tmpfs", "/root"]  # hide root's home
                hidden.append("/root")
            # Bring back what the server needs from the hidden folders: the Python installation and
            # the virtual environment live under /root or /tmp on some machines (a CI clone, pyenv).
            needed_paths = {
                str(Path(sys.base_prefix).resolve()),
                str(Path(sys.prefix).resolve()),
                str(Path(sys.prefix).absolute()),
                str(Path(self.python).absolute().parent.parent),
                str(SERVER_SCRIPT.parent.resolve()),
            }
            created: set[str] = set()
            for needed in sorted(needed_paths):
                if not any(needed.startswith(folder + "/") for folder in hidden):
                    continue
                # bwrap makes missing parent folders private (0700): make them traversable first
                for parent in reversed(Path(needed).parents):
                    if any(str(parent).startswith(folder + "/") for folder in hidden) and str(parent) not in created:
                        created.add(str(parent))
                        prefix += ["--perms", "0755", "--dir", str(parent)]
                prefix += ["--ro-bind", needed, needed]
            prefix += [
                "--bind", str(self._host_root), MOUNT_POINT,
                "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--die-with-parent", "--new-session",
                "--chdir", MOUNT_POINT,
            ]  # fmt: skip
            command = prefix + command
            self.isolation = "bubblewrap (read-only root, private /tmp, no network, own PID namespace)"
        else:
            self.isolation = "process limits only (no bubblewrap)"
        if drop:
            self.isolation += "; each program runs as an unprivileged user of its own"
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
            if waiter is not None:
                waiter["reply"] = reply
                waiter["event"].set()
        # The server is gone: wake everyone still waiting on it.
        with self._lock:
            for waiter in self._pending.values():
                if waiter.get("process") is process and "reply" not in waiter:
                    waiter["reply"] = None
                    waiter["event"].set()

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
    def run(self, program: str, data_files: dict[str, str] | None = None, *, capture_model: bool = False) -> ExecutionResult:
        """Run one program (with `data_files`: name in its work folder -> file here); blocks. With
        `capture_model`, the model the program built comes back as LP text (B4O-ORGEval grades it)."""
        try:
            result = self._run_once(program, data_files or {}, capture_model)
        except OSError as error:  # its folder vanished while a dead server's root was cleaned up
            result = ExecutionResult(error=f"sandbox folder lost: {error}")
        if result.error is not None:
            # The server died under this program (another program may have killed it): try once more.
            self._restart_if_dead()
            result = self._run_once(program, data_files or {}, capture_model)
        return result

    def _run_once(self, program: str, data_files: dict[str, str], capture_model: bool = False) -> ExecutionResult:
        if not self._alive():
            self._restart_if_dead()
        if not self._drop:
            return self._run_as(program, data_files, None, capture_model)
        uid = self._free_uids.get()  # also caps the programs at once to `workers`
        try:
            return self._run_as(program, data_files, uid, capture_model)
        finally:
            self._free_uids.put(uid)

    def _run_as(self, program: str, data_files: dict[str, str], uid: int | None, capture_model: bool = False) -> ExecutionResult:
        job = uuid.uuid4().hex
        job_dir = self._host_root / job
        work, meta = job_dir / "work", job_dir / "meta"
        work.mkdir(parents=True)
        meta.mkdir()
        (work / "program.py").write_text(program, encoding="utf-8")
        for name, source in data_files.items():
            shutil.copyfile(source, work / name)
        if uid is not None:
            # The program runs as its slot's user: it may write its own folder, nothing of the harness.
            for path in [work, *work.iterdir()]:
                os.chown(path, uid, uid)
            os.chmod(job_dir, 0o755)
        settings = self.settings
        request = {
            "job": job,
            "timeout": settings.timeout,
            # a backstop to the wall-clock limit; room for a solver that uses two threads
            "cpu_limit": 2 * settings.timeout + 1,
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
            if not waiter["event"].wait(settings.timeout + 60):
                waiter["reply"] = None
            reply = waiter.get("reply")
            result = self._collect(reply, meta)
            model_file = work / "model.lp"
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
        events = []
        events_path = meta / "events.jsonl"
        if events_path.is_file():
            for line in events_path.read_text(errors="replace").splitlines()[-1000:]:
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        if reply is None:
            return ExecutionResult(
                stdout=stdout, stderr=stderr, events=events, error="the sandbox server exited while the program ran"
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
            events=events,
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
        jobs: Iterable[tuple[str, dict[str, str]]],
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
