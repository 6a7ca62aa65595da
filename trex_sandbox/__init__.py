"""trex's sandbox for running generated optimization programs: synth verification runs the programs it
rendered, eval runs the programs a model wrote. One fork server imports Pyomo, HiGHS, numpy (and
PuLP, gurobipy where installed) once and forks a fresh child per program; hooks in the child record
every solve the program makes (status, objective, gap, in order), and `choose_solve` picks the one
whose objective the program printed.

Threat model, honestly. This is not a security boundary against a determined attacker (no public
harness is); it contains what a model's program does by accident or by a bad habit, and keeps it
from reading the answers:

- Contained: endless loops and programs that ignore signals (wall-clock kill of the process group,
  CPU rlimit), memory hogs (address-space rlimit on top of the pre-imported stack), floods of output
  and huge files (file-size rlimit, output cut to a head and a tail), fork bombs (a process limit,
  enforced when programs run as their own user), leftover and orphaned processes (killed with the
  group; the server is a child subreaper), stdin reads (from /dev/null), the harness's environment
  (scrubbed).
- Files, with bubblewrap (`isolation = "bwrap"`, or "auto" where `bwrap` works): the program's root
  holds only /usr, /bin, /lib*, a few /etc files (loader cache, passwd, group, nsswitch, localtime),
  the Python installation and its packages (read-only, at their own paths, so the folders on the way
  there appear with nothing else in them), a minimal /dev, its own /proc, the server script under
  /run (root only), and a private /tmp with the job folders (each 0700, the parent not listable); no
  network, its own PID / IPC / UTS namespaces. Benchmark files, run folders,
  /home, the rest of /root and /work are not there.
- Files, without bubblewrap (`isolation = "process"`, or "auto" where bwrap fails): Landlock rules,
  where the kernel has Landlock, allow reading the same system folders, /etc files, Python
  installation, a few devices and its own /proc entry, and reading and writing its own folder only; with
  Landlock ABI 4 or later TCP connect and bind are refused too. Without Landlock files are NOT
  sealed, and the sandbox says so once (`on_warning`).
- Users: when trex runs as root, each program drops to an unprivileged user of its own worker slot,
  so it cannot signal the server or its neighbours or read their folders (0700). Not root: programs
  share the harness's user and can reach each other's folders and the harness's /proc entries.
- Not contained: kernel exploits; CPU time stolen from the neighbours (no cgroups); a program
  appending lines to its own events file through the inherited descriptor (it can fake a solve
  record of its own, not another program's); reading the installed packages (they are public).

`Sandbox(settings)` is the client, `ExecutionResult` the result record, `server.py` the fork server
(standard library only, run by path; it imports nothing of trex).
"""

from trex_sandbox.client import ExecutionResult, Sandbox, SandboxSettings, bwrap_path, die_with_parent
from trex_sandbox.solves import SolveChoice, choose_solve

__all__ = [
    "ExecutionResult",
    "Sandbox",
    "SandboxSettings",
    "SolveChoice",
    "bwrap_path",
    "choose_solve",
    "die_with_parent",
]
