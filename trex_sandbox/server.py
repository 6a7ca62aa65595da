"""The sandbox's fork server: a standalone program (it imports nothing of trex, only the standard
library and the solver stack it pre-imports) that imports Pyomo / HiGHS / numpy once and forks one
child per program.

It is started by `trex_sandbox.client.Sandbox`, inside bubblewrap where available, with a scrubbed
environment. Protocol: one JSON request per line on stdin ({"job", "timeout", "cpu_limit",
"memory_mb", "file_size_mb", "max_processes", "uid", "capture_model"}), one JSON reply per finished job on stdout. A
job is a folder `<root>/<job>/` holding `work/` (the program's working folder: program.py and its
data files) and `meta/` (stdout.txt, stderr.txt and events.jsonl, opened by the server before the
child drops its privileges, so the program cannot remove or replace them by path; a program that
writes through the inherited descriptor can still add lines: this contains accidents, not attacks).

Each child: a new session and process group, stdin from /dev/null, rlimits (CPU time, address space
budgeted on top of what the fork already maps, file size, no core files, number of processes), one
BLAS and one HiGHS thread, an environment holding only what the program needs, an unprivileged user
id when the server runs as root (one per worker slot, chosen by the client), Landlock filesystem
rules when the client asks for them (the process-isolation fallback), and hooks that record every
solve (order, status, objective, MIP gap) of Pyomo, highspy, PuLP, gurobipy and SciPy to
events.jsonl. The server kills a child's process group at the time limit and after it exits, and,
being a child subreaper, kills any orphaned descendant that escaped the group.
"""

import ctypes
import gc
import json
import math
import os
import resource
import select
import signal
import struct
import sys
import time
import traceback

PR_SET_CHILD_SUBREAPER = 36
MODEL_FILE = "model.lp"  # in the program's working folder, when the request asks for the model
PR_SET_NO_NEW_PRIVS = 38
# Landlock (Linux >= 5.13): the same system call numbers on every architecture (the generic table).
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1


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


def install_hooks(events_fd, highs_defaults=None):
    """Wrap the solve calls of every modeling library the server imported. Returns a function to call
    when the program has ended: it solves the last model the program built but never solved (the
    Bench4Opt reference programs build a gurobipy model and only write it to a file). `highs_defaults`
    (option -> value) is set on every HiGHS instance the program makes, before the program's own options."""
    emitted_events = []  # every event, nested ones included
    solves = []  # the program's own solve calls, in order
    built_models = []
    solved_pyomo_models = []  # for the LP file B4O-ORGEval grades
    pending_model_reads = []  # Pyomo models solved with load_solutions=False
    pyomo_depth = [0]  # > 0 while a Pyomo solve runs: the highspy run inside it is not a solve of its own

    def write(event):
        try:
            os.write(events_fd, (json.dumps(event) + "\n").encode())
        except OSError:
            pass

    def emit(event):
        """Record one solve: `order` numbers the program's solves; a highspy run inside a Pyomo
        solve is marked `nested` (the Pyomo event after it is the solve the program made)."""
        if pyomo_depth[0] > 0:
            event["nested"] = True
        else:
            event["order"] = len(solves)
            solves.append(event)
        emitted_events.append(event)
        write(event)

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
                for option, value in (highs_defaults or {}).items():
                    self.setOptionValue(option, value)
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
                events_before = len(emitted_events)
                pyomo_depth[0] += 1
                try:
                    results = original(*args, **kwargs)
                except BaseException:
                    # Pyomo raises after an infeasible solve (load_solutions=True): the HiGHS run
                    # inside it still says what the solver found.
                    pyomo_depth[0] -= 1
                    inner = emitted_events[events_before:]
                    if inner:
                        emit({"api": "pyomo", "solver": solver_name, "status": inner[-1].get("status", "unknown"),
                              "objective": inner[-1].get("objective"), "objective_source": "solver",
                              "gap": inner[-1].get("gap"), "raised": True})
                    raise
                pyomo_depth[0] -= 1
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
                # one solver thread, as for HiGHS: the sandbox already runs a program per core
                try:
                    self.Params.Threads = 1
                except Exception:
                    pass

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
        last = solves[-1] if solves else None
        if pending_model_reads and last is not None and last.get("api") == "pyomo" and last.get("status") == "optimal":
            # The last solve left the model empty; the program may have loaded the solution since:
            # the client merges this into that solve's record.
            objective = _model_objective(pending_model_reads[-1])
            if objective is not None:
                write({"update_of": last["order"], "objective": objective,
                       "objective_source": "model, read when the program ended"})
        if not solves and built_models and built_models_solver is not None:
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


def landlock_abi():
    """The kernel's Landlock ABI version, 0 when it has none (or it is disabled)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                           ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    return max(0, int(version))


def apply_landlock(readable, writable):
    """Restrict this process and its descendants, for good, to reading `readable` paths and reading
    and writing `writable` ones; with ABI 4 or later TCP bind and connect are refused as well.
    Descriptors opened before (stdout, the events file) stay usable. Raises OSError when the kernel
    refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = landlock_abi()
    if abi < 1:
        raise OSError("Landlock is not available in this kernel")
    handled = (1 << 13) - 1  # every right of ABI 1
    file_rights = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE
    if abi >= 2:
        handled |= FS_REFER
    if abi >= 3:
        handled |= FS_TRUNCATE
        file_rights |= FS_TRUNCATE
    if abi >= 5:
        handled |= FS_IOCTL_DEV
        file_rights |= FS_IOCTL_DEV
    # struct landlock_ruleset_attr grew a field in ABI 4 (network); the kernel takes the size given.
    attr = struct.pack("=QQ", handled, NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else struct.pack("=Q", handled)
    attr_buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), attr_buffer, ctypes.c_size_t(len(attr)),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        read_rights = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
        for paths, rights in ((readable, read_rights), (writable, handled)):
            for path in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue  # not on this machine
                try:
                    allowed = rights if os.path.isdir(path) else rights & file_rights
                    # struct landlock_path_beneath_attr is packed: u64 allowed_access, s32 parent_fd
                    rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed, fd), 12)
                    if libc.syscall(ctypes.c_long(SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                                    ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), rule, ctypes.c_uint32(0)) < 0:
                        raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
                finally:
                    os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)


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
        landlock = settings.get("landlock")
        if landlock is not None:
            # The client checked that the kernel supports it; a failure here ends the program (exit
            # status 1, the reason on stderr) rather than running it unsealed.
            apply_landlock(landlock["readable"], [work])

        os.environ.clear()
        os.environ.update(settings["child_environment"])
        os.environ["HOME"] = work
        os.environ["TMPDIR"] = work

        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        sys.argv = ["program.py"]
        sys.path[0] = work
        finish_hooks = install_hooks(events_fd, settings.get("highs_defaults"))

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


def _warm_up_pyomo():
    """Solve tiny models once through Pyomo's two HiGHS interfaces, so that every child starts with
    Pyomo's dispatch tables filled and the interfaces set up (tens of milliseconds a program).

    One HiGHS thread: HiGHS then sizes its process-wide scheduler without worker threads, so a fork
    loses none (a child's parallel solve would wait forever on workers a fork does not copy); the
    children keep that single thread. HiGHS's one-time banner goes to the server's stderr here.
    Returns what failed, in words (empty when all went well)."""
    import pyomo.environ as pyo

    failures = []
    for name, source in (("appsi_highs", WARM_UP_MILP), ("highs", WARM_UP_MILP), ("highs", WARM_UP_QP)):
        try:
            solver = pyo.SolverFactory(name)
            if not solver.available():
                failures.append(f"Pyomo's {name} solver is not available")
                continue
            solver.options["threads"] = 1
            namespace = {"pyo": pyo}
            exec(source, namespace)
            solver.solve(namespace["model"], load_solutions=False)
        except Exception as error:
            failures.append(f"{name}: {type(error).__name__}: {error}")
    return failures


def _preload(names):
    loaded = []
    for name in names:
        try:
            __import__(name)
            loaded.append(name)
        except Exception:
            pass
    failures = _warm_up_pyomo() if "pyomo.environ" in loaded and "highspy" in loaded else []
    # Children share the server's objects copy-on-write; a collector pass in a child would touch
    # (and so copy) every page of them. Frozen objects are never scanned.
    gc.collect()
    gc.freeze()
    return loaded, failures


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
    loaded, warm_up_failures = _preload(settings["preload"])

    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_write)

    def reply(obj):
        data = (json.dumps(obj) + "\n").encode()
        while data:
            written = os.write(protocol_out, data)
            data = data[written:]

    reply({"ready": True, "pid": os.getpid(), "preloaded": loaded, "warm_up_failures": warm_up_failures,
           "python": sys.version.split()[0]})

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
                    # the server's CPU time so far, its own and its reaped programs': a PID namespace
                    # (bubblewrap) hides the server's tree from its caller's resource accounting
                    "server_cpu_s": round(sum(os.times()[:4]), 4),
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
