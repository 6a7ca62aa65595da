"""The sandbox's fork server: a small standalone program (it imports nothing from trex) that imports
the solver stack once and forks one child per generated program.

It is started by `trex_cli.evaluate.sandbox.Sandbox`, inside bubblewrap where available, with a
scrubbed environment. Protocol: one JSON request per line on stdin ({"job", "timeout", "cpu_limit",
"memory_mb", "file_size_mb", "max_processes", "uid", "capture_model"}), one JSON reply per finished job on stdout. A
job is a folder `<root>/<job>/` holding `work/` (the program's working folder: program.py and its
data files) and `meta/` (stdout.txt, stderr.txt and events.jsonl, opened by the server before the
child drops its privileges, so the program cannot remove or replace them by path; a program that
writes through the inherited descriptor can still add lines: this contains accidents, not attacks).

Each child: a new session and process group, stdin from /dev/null, rlimits (CPU time, address space
budgeted on top of what the fork already maps, file size, no core files, number of processes), one
BLAS and one HiGHS thread, an environment holding only what the program needs, an unprivileged user
id when the server runs as root (one per worker slot, chosen by the harness), and hooks that record
every solve (status, objective, MIP gap) of Pyomo, highspy, PuLP, gurobipy and SciPy to
events.jsonl. The server kills a child's process group at the time limit and after it exits, and,
being a child subreaper, kills any orphaned descendant that escaped the group.
"""

import ctypes
import json
import math
import os
import resource
import select
import signal
import sys
import time
import traceback

PR_SET_CHILD_SUBREAPER = 36
MODEL_FILE = "model.lp"  # in the program's working folder, when the request asks for the model


# --------------------------------------------------------------------------------------------------
# Hooks that read the objective from the model object a program built (installed in the child)


def _normalize_status(text):
    key = str(text).strip().lower().replace(" ", "").replace("_", "").replace("-", "")
    mapping = {
        "optimal": "optimal",
        "globallyoptimal": "optimal",
        "locallyoptimal": "optimal",
        "convergencecriteriasatisfied": "optimal",
        "infeasible": "infeasible",
        "proveninfeasible": "infeasible",
        "infeasibleorunbounded": "infeasible_or_unbounded",
        "primalinfeasibleorunbounded": "infeasible_or_unbounded",
        "infornbd": "infeasible_or_unbounded",
        "infordunbd": "infeasible_or_unbounded",
        "provenunbounded": "unbounded",
        "unbounded": "unbounded",
        "maxtimelimit": "time_limit",
        "timelimit": "time_limit",
        "timelimitreached": "time_limit",
        "notsolved": "not_solved",
    }
    return mapping.get(key, key or "unknown")


def _finite(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


class _AfterImport:
    """A meta-path finder that lets the other finders load `name`, then calls `then(module)`."""

    def __init__(self, name, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader, then = spec.loader, self.then
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            then(module)

        loader.exec_module = exec_module
        return spec


def install_hooks(events_fd):
    """Wrap the solve calls of every modeling library the server imported. Returns a function to call
    when the program has ended, with the program's globals and the LP file to write (or None): it
    writes the model the program built (see `write_model_file`), then solves the last model the
    program built but never solved (the Bench4Opt reference programs build a gurobipy model and only
    write it to a file)."""
    emitted = []
    emitted_events = []
    built_models = []
    solved_pyomo_models = []
    pending_model_reads = []  # Pyomo models solved with load_solutions=False

    def emit(event):
        emitted.append(event.get("status"))
        emitted_events.append(event)
        try:
            os.write(events_fd, (json.dumps(event) + "\n").encode())
        except OSError:
            pass

    modules = sys.modules

    if "highspy" in modules:
        highspy = modules["highspy"]
        highs_class = highspy.Highs
        original_run = highs_class.run
        original_solve = highs_class.__dict__.get("solve")

        def record_highs(highs, api):
            try:
                status = highs.modelStatusToString(highs.getModelStatus())
                info = highs.getInfo()
                normalized = _normalize_status(status)
                objective = _finite(info.objective_function_value) if normalized == "optimal" else None
                gap = _finite(getattr(info, "mip_gap", None))
                emit({"api": api, "status": normalized, "raw_status": status, "objective": objective, "gap": gap})
            except Exception as error:  # never let recording break the program
                emit({"api": api, "status": "unknown", "error": repr(error)})

        def run(self, *args, **kwargs):
            result = original_run(self, *args, **kwargs)
            record_highs(self, "highspy")
            return result

        highs_class.run = run

        original_init = highs_class.__init__

        def init(self, *args, **kwargs):
            original_init(self, *args, **kwargs)
            # One solver thread, as for BLAS: the sandbox already runs a program per core, and
            # HiGHS's worker threads spin while they wait. A program may still raise it itself.
            try:
                self.setOptionValue("threads", 1)
            except Exception:
                pass

        highs_class.__init__ = init
        if original_solve is not None:
            # Highs.solve calls the C++ run directly, so it is wrapped on its own.
            def solve(self, *args, **kwargs):
                result = original_solve(self, *args, **kwargs)
                record_highs(self, "highspy")
                return result

            highs_class.solve = solve

    if "pyomo.environ" in modules:
        from pyomo.environ import Objective, value
        from pyomo.opt.base.solvers import SolverFactoryClass

        def _model_objective(model):
            objectives = list(model.component_data_objects(Objective, active=True))
            if not objectives:
                return None
            try:
                return _finite(value(objectives[0], exception=False))
            except Exception:
                return None

        original_factory_call = SolverFactoryClass.__call__

        def wrap_solver(solver, solver_name):
            original = getattr(solver, "solve", None)
            if original is None or getattr(original, "_trex_wrapped", False):
                return solver

            def solve(*args, **kwargs):
                events_before = len(emitted)
                results = original(*args, **kwargs)
                model = args[0] if args else kwargs.get("model")
                solved_pyomo_models.append(model)
                try:
                    condition = None
                    if hasattr(results, "solver") and hasattr(results.solver, "termination_condition"):
                        condition = results.solver.termination_condition
                    elif hasattr(results, "termination_condition"):
                        condition = results.termination_condition
                    status = _normalize_status(getattr(condition, "name", None) or condition)
                    objective, source = None, "model"
                    if model is not None and status == "optimal":
                        objective = _model_objective(model)
                    if objective is None and status == "optimal":
                        # load_solutions=False leaves the model empty until the program loads the
                        # solution itself: take the solver's own value (HiGHS's includes Pyomo's
                        # constant and sense), and read the model again when the program ends.
                        nested = [e for e in emitted_events[events_before:] if e.get("objective") is not None]
                        if nested:
                            objective, source = nested[-1]["objective"], "solver"
                        pending_model_reads.append(model)
                    gap = None
                    problem = getattr(results, "problem", None)
                    if problem is not None:
                        lower = _finite(getattr(problem, "lower_bound", None))
                        upper = _finite(getattr(problem, "upper_bound", None))
                        if lower is not None and upper is not None:
                            gap = abs(upper - lower) / max(1e-10, abs(upper), abs(lower))
                    emit({"api": "pyomo", "solver": solver_name, "status": status, "objective": objective,
                          "objective_source": source, "gap": gap})
                except Exception as error:
                    emit({"api": "pyomo", "status": "unknown", "error": repr(error)})
                return results

            solve._trex_wrapped = True
            try:
                solver.solve = solve
            except Exception:
                pass
            return solver

        def factory_call(self, name=None, *args, **kwargs):
            solver = original_factory_call(self, name, *args, **kwargs)
            return wrap_solver(solver, str(name))

        SolverFactoryClass.__call__ = factory_call

    if "pulp" in modules:
        pulp = modules["pulp"]
        original_pulp_solve = pulp.LpProblem.solve

        def pulp_solve(self, *args, **kwargs):
            result = original_pulp_solve(self, *args, **kwargs)
            try:
                status = _normalize_status(pulp.LpStatus.get(self.status, "unknown"))
                objective = _finite(pulp.value(self.objective)) if status == "optimal" else None
                emit({"api": "pulp", "status": status, "objective": objective, "gap": None})
            except Exception as error:
                emit({"api": "pulp", "status": "unknown", "error": repr(error)})
            return result

        pulp.LpProblem.solve = pulp_solve

    if "gurobipy" in modules:
        gurobipy = modules["gurobipy"]
        codes = {2: "optimal", 3: "infeasible", 4: "infeasible_or_unbounded", 5: "unbounded", 9: "time_limit"}

        def record_gurobi(model, api):
            try:
                status = codes.get(model.Status, f"gurobi_{model.Status}")
                objective = _finite(model.ObjVal) if status == "optimal" and model.SolCount > 0 else None
                gap = _finite(model.MIPGap) if model.IsMIP else None
                emit({"api": api, "status": status, "objective": objective, "gap": gap})
            except Exception as error:
                emit({"api": api, "status": "unknown", "error": repr(error)})

        base_model_class = gurobipy.Model

        class RecordedModel(base_model_class):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                built_models.append(self)

            def optimize(self, *args, **kwargs):
                result = super().optimize(*args, **kwargs)
                record_gurobi(self, "gurobipy")
                return result

        gurobipy.Model = RecordedModel

        def solve_built_model():
            model = built_models[-1]
            base_model_class.optimize(model)
            record_gurobi(model, "gurobipy (built by the program, solved by trex)")

        built_models_solver = solve_built_model
    else:
        built_models_solver = None

    def wrap_scipy(optimize):
        # SciPy minimizes only, so a maximizing program negates its objective: record the status,
        # and leave the objective to the printed line.
        statuses = {0: "optimal", 2: "infeasible", 3: "unbounded"}
        for function_name in ("linprog", "milp"):
            original_function = getattr(optimize, function_name, None)
            if original_function is None:
                continue

            def make_wrapper(function, api):
                def wrapper(*args, **kwargs):
                    result = function(*args, **kwargs)
                    status = statuses.get(getattr(result, "status", None), "other")
                    emit({"api": api, "status": status, "objective": None, "gap": None})
                    return result

                return wrapper

            setattr(optimize, function_name, make_wrapper(original_function, f"scipy.{function_name}"))

    if "scipy.optimize" in modules:
        wrap_scipy(modules["scipy.optimize"])
    else:
        # SciPy is not pre-imported (it would double the memory every fork copies): wrap it when
        # the program imports it.
        sys.meta_path.insert(0, _AfterImport("scipy.optimize", wrap_scipy))

    def finish(program_globals, model_file):
        if model_file is not None:
            write_model_file(model_file, built_models, solved_pyomo_models, program_globals)
        last = emitted_events[-1] if emitted_events else None
        if pending_model_reads and last is not None and last.get("api") == "pyomo" and last.get("status") == "optimal":
            # The last solve left the model empty; the program may have loaded the solution since.
            objective = _model_objective(pending_model_reads[-1])
            if objective is not None:
                emit(dict(last, objective=objective, objective_source="model, read when the program ended"))
        if not emitted and built_models and built_models_solver is not None:
            try:
                built_models_solver()
            except Exception as error:
                emit({"api": "gurobipy", "status": "unknown", "error": repr(error)})

    return finish


def write_model_file(path, gurobi_models, pyomo_models, program_globals):
    """B4O-ORGEval grades the model a program builds, as an LP file: write the last gurobipy model it
    built, else the last Pyomo model it solved, else its global `model` (the name T-Rex's prompts ask
    for), to `path`. Nothing is written when there is no model; a failed write is reported on stderr
    and the grade says there was no model."""
    candidates = [m for m in (gurobi_models[-1:] + pyomo_models[-1:]) if m is not None]
    candidates.append(program_globals.get("model"))
    for model in candidates:
        try:
            # the server's RecordedModel subclass stands for gurobipy.Model: look along the classes
            if any(cls.__module__.startswith("gurobipy") for cls in type(model).__mro__):
                model.update()
                model.write(path)
                return
            if hasattr(model, "component_data_objects") and hasattr(model, "write"):
                model.write(path, io_options={"symbolic_solver_labels": True})
                return
        except Exception as error:
            print(f"trex: could not write the model as LP ({error!r})", file=sys.stderr)
            return


# --------------------------------------------------------------------------------------------------
# The child: limits, environment, then the program


def _vm_size_bytes():
    with open("/proc/self/status") as stream:
        for line in stream:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def run_child(root, job, request, settings):
    """Runs in the forked child; never returns."""
    status = 1
    try:
        os.setsid()
        job_dir = os.path.join(root, job)
        work = os.path.join(job_dir, "work")
        meta = os.path.join(job_dir, "meta")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        stdout_fd = os.open(os.path.join(meta, "stdout.txt"), flags, 0o600)
        stderr_fd = os.open(os.path.join(meta, "stderr.txt"), flags, 0o600)
        events_fd = os.open(os.path.join(meta, "events.jsonl"), flags | os.O_APPEND, 0o600)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(stdout_fd, 1)
        os.dup2(stderr_fd, 2)
        keep = {0, 1, 2, events_fd}
        for fd in os.listdir("/proc/self/fd"):
            if int(fd) not in keep:
                try:
                    os.close(int(fd))
                except OSError:
                    pass
        os.chdir(work)

        signal.set_wakeup_fd(-1)
        # Default actions, so that a file-size or CPU limit ends the program with a signal that
        # names the limit (Python itself ignores SIGXFSZ).
        for signal_number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGXFSZ, signal.SIGXCPU):
            signal.signal(signal_number, signal.SIG_DFL)

        cpu = int(math.ceil(request["cpu_limit"]))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        # The fork already maps the whole solver stack: budget the program's memory on top of it.
        address_space = _vm_size_bytes() + int(request["memory_mb"]) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        file_size = int(request["file_size_mb"]) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if settings.get("drop_privileges") and request.get("uid") is not None:
            # RLIMIT_NPROC counts the processes of the user: with a user per program, its own only.
            processes = int(request["max_processes"])
            resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
            os.setgroups([])
            os.setgid(int(request["uid"]))
            os.setuid(int(request["uid"]))

        os.environ.clear()
        os.environ.update(settings["child_environment"])
        os.environ["HOME"] = work
        os.environ["TMPDIR"] = work

        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        sys.argv = ["program.py"]
        sys.path[0] = work
        finish_hooks = install_hooks(events_fd)

        with open("program.py", encoding="utf-8") as stream:
            source = stream.read()
        import builtins

        program_globals = {"__name__": "__main__", "__file__": "program.py", "__builtins__": builtins}
        try:
            code = compile(source, "program.py", "exec")
            exec(code, program_globals)
            status = 0
            finish_hooks(program_globals, MODEL_FILE if request.get("capture_model") else None)
        except SystemExit as exit_request:
            code_value = exit_request.code
            if code_value is None:
                status = 0
            elif isinstance(code_value, int):
                status = code_value & 0xFF
            else:
                print(code_value, file=sys.stderr)
                status = 1
        except BaseException:
            traceback.print_exc()
            status = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
    except BaseException:
        try:
            os.write(2, traceback.format_exc().encode())
        except BaseException:
            pass
        status = 1
    os._exit(status)


# --------------------------------------------------------------------------------------------------
# The server loop


def _preload(names):
    loaded = []
    for name in names:
        try:
            __import__(name)
            loaded.append(name)
        except Exception:
            pass
    if "pyomo.environ" in loaded and "highspy" in loaded:
        # Pyomo imports its HiGHS interface on first use: do that once here, not in every child. No
        # solve: HiGHS starts worker threads on its first run, and a fork keeps none of them (a child
        # would wait for them forever).
        try:
            import pyomo.environ as pyo

            pyo.SolverFactory("highs").available()
        except Exception:
            pass
    return loaded


def _orphans(known):
    """Processes whose parent is this server but that it did not start: descendants orphaned after
    their own parent died (possible because the server is a child subreaper)."""
    mine = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid in known or pid == mine:
            continue
        try:
            with open(f"/proc/{entry}/stat") as stream:
                fields = stream.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == mine:
            found.append(pid)
    return found


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def serve(settings):
    root = settings["root"]
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    # Anything a library prints while importing must not corrupt the protocol.
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:
        pass
    loaded = _preload(settings["preload"])

    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_write)

    def reply(obj):
        data = (json.dumps(obj) + "\n").encode()
        while data:
            written = os.write(protocol_out, data)
            data = data[written:]

    reply({"ready": True, "pid": os.getpid(), "preloaded": loaded, "python": sys.version.split()[0]})

    jobs = {}  # pid -> {"job", "started", "deadline", "timed_out"}
    buffer = b""
    closing = False
    last_orphan_scan = 0.0
    while not closing or jobs:
        now = time.monotonic()
        wait = 0.5
        for info in jobs.values():
            wait = min(wait, max(0.0, info["deadline"] - now))
        readable = [wake_read] + ([] if closing else [protocol_in])
        try:
            ready, _, _ = select.select(readable, [], [], wait)
        except InterruptedError:
            ready = []
        if wake_read in ready:
            try:
                os.read(wake_read, 4096)
            except BlockingIOError:
                pass
        if protocol_in in ready:
            chunk = os.read(protocol_in, 65536)
            if not chunk:
                closing = True
                for pid in jobs:
                    _kill_group(pid)
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if not line.strip():
                    continue
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    run_child(root, request["job"], request, settings)
                started = time.monotonic()
                jobs[pid] = {
                    "job": request["job"],
                    "started": started,
                    "deadline": started + float(request["timeout"]),
                    "timed_out": False,
                }
        now = time.monotonic()
        for pid, info in jobs.items():
            if not info["timed_out"] and now >= info["deadline"]:
                info["timed_out"] = True
                _kill_group(pid)
        finished_any = False
        while True:
            try:
                pid, wait_status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            info = jobs.pop(pid, None)
            if info is None:
                continue  # an orphaned descendant, reaped
            finished_any = True
            _kill_group(pid)  # sleeping children left behind in the program's group
            reply(
                {
                    "job": info["job"],
                    "exit_code": os.WEXITSTATUS(wait_status) if os.WIFEXITED(wait_status) else None,
                    "signal": os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else None,
                    "timed_out": info["timed_out"],
                    "wall_s": round(time.monotonic() - info["started"], 4),
                    "cpu_s": round(usage.ru_utime + usage.ru_stime, 4),
                    "max_rss_kb": usage.ru_maxrss,
                }
            )
        # Also scan when idle: a descendant may turn orphan after its program was already reaped.
        if finished_any or time.monotonic() - last_orphan_scan > 0.5:
            last_orphan_scan = time.monotonic()
            for orphan in _orphans(set(jobs)):
                try:
                    os.kill(orphan, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


if __name__ == "__main__":
    serve(json.loads(sys.argv[1]))
