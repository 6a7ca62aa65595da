"""Where a sharded stage's tasks run: datatrove's executors behind one small settings table.

A sharded stage (`trex synth`, the streaming `trex data` steps) is a list of pipeline steps run as `tasks`
independent tasks; task `rank` of `world_size` does its share of the work and writes its own files. Which
machine runs which task is the executor's business:

- "local" (the default; `make demo`): datatrove's `LocalPipelineExecutor`, the tasks in a process pool on
  this machine (one task runs in this process);
- "slurm": datatrove's `SlurmPipelineExecutor`, one Slurm job array of `tasks` jobs; `--dry-run` writes the
  sbatch script without submitting it;
- "ray": datatrove's `RayPipelineExecutor` on a running Ray cluster (`address`), or a local one.

Every executor keeps a completion marker per task (`<logging_dir>/completions/<rank>`), so a task killed
halfway runs again on the next call and a finished one is skipped (`skip_completed`); the stage's own
per-block markers make the re-run task skip the blocks it had finished. `docs/executors.md` says why
datatrove and how to run on a cluster.

The settings are the recipe's `[run.executor]` table; `--executor` and `--tasks` override its keys.
datatrove (and ray) are imported only when a pipeline runs.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trex_cli.recipe import ExecutorSettings  # the [run.executor] table (recipe.py keeps the schemas)

EXECUTOR_KINDS = ("local", "slurm", "ray")


def check_settings(settings: ExecutorSettings, where: str = "[run.executor]") -> None:
    """Raise ValueError, naming the key and the fix, for settings that cannot work."""
    if settings.tasks < 1:
        raise ValueError(f"{where}.tasks must be >= 1 (--tasks N), got {settings.tasks}")
    if settings.workers < 0:
        raise ValueError(f"{where}.workers must be >= 0 (0: every task at once), got {settings.workers}")
    if settings.cpus_per_task < 1 or settings.mem_per_cpu_gb <= 0:
        raise ValueError(f"{where}: cpus_per_task must be >= 1 and mem_per_cpu_gb > 0")
    if settings.kind == "slurm" and not settings.partition:
        raise ValueError(f"{where}.partition: the Slurm executor needs a partition; set it in the recipe "
                         "([run.executor] partition = \"cpu\") or with --set run.executor.partition=cpu")
    if settings.poll_s <= 0:
        raise ValueError(f"{where}.poll_s must be > 0")


def executor_flags(executor: str | None, tasks: int | None) -> dict[str, tuple[str, Any]]:
    """The `--executor` and `--tasks` flags as `trex_cli.recipe.flag_overrides` entries, for every command
    that runs a sharded stage."""
    return {"--executor": ("run.executor.kind", executor), "--tasks": ("run.executor.tasks", tasks)}


@dataclass
class PipelineRun:
    """What `run_pipeline` did: the executor, its logging folder, and for Slurm the script (and job)."""

    kind: str
    tasks: int
    logging_dir: Path
    completed: list[int] = field(default_factory=list)  # ranks with a completion marker
    launch_script: Path | None = None
    job_id: str | None = None
    dry_run: bool = False


def completed_ranks(logging_dir: Path, tasks: int) -> list[int]:
    """The ranks of `tasks` that carry datatrove's completion marker in `logging_dir`."""
    folder = Path(logging_dir) / "completions"
    return [rank for rank in range(tasks) if (folder / f"{rank:05d}").is_file()]


def run_pipeline(pipeline: Sequence[Any], *, tasks: int, logging_dir: Path, settings: ExecutorSettings,
                 dry_run: bool = False, quiet: bool = True) -> PipelineRun:
    """Run `pipeline` (datatrove PipelineSteps or callables `(data, rank, world_size)`) as `tasks` tasks on
    the executor `settings` names, logging (and marking completed tasks) in `logging_dir`. Returns when
    every task has completed; raises RuntimeError, naming the task logs, when one did not. Tasks completed
    by an earlier call are skipped. `dry_run` (Slurm) writes the sbatch script and returns without
    submitting. `quiet` keeps datatrove's per-task log lines off the console (they stay in the logs)."""
    check_settings(settings)
    logging_dir = Path(logging_dir).resolve()
    logging_dir.mkdir(parents=True, exist_ok=True)
    if dry_run and settings.kind != "slurm":
        raise ValueError("--dry-run writes the Slurm submission without sending it; use it with --executor slurm")
    run = PipelineRun(settings.kind, tasks, logging_dir, dry_run=dry_run)
    if settings.kind == "local":
        from trex_cli import executors

        workers = min(settings.workers or os.cpu_count() or 1, tasks)
        executor = executors._LocalExecutor(list(pipeline), tasks=tasks, workers=workers,
                                            logging_dir=str(logging_dir), skip_completed=True,
                                            start_method="forkserver")
        executor.quiet, executor.launcher_pid = quiet, os.getpid()
        with _quiet_datatrove(quiet):
            executor.run()
    elif settings.kind == "slurm":
        executor = _slurm_executor(pipeline, tasks, logging_dir, settings)
        if dry_run:
            run.launch_script = executor.render()
            return run
        with _quiet_datatrove(quiet):
            executor.launch_job()
        run.launch_script = logging_dir / "launch_script.slurm"
        run.job_id = None if executor.job_id in (None, -1) else str(executor.job_id)
        if run.job_id is not None:
            _wait_for_slurm(run, settings)
    else:
        _run_on_ray(pipeline, tasks, logging_dir, settings, quiet)
    run.completed = completed_ranks(logging_dir, tasks)
    missing = sorted(set(range(tasks)) - set(run.completed))
    if missing:
        shown = ", ".join(str(rank) for rank in missing[:8]) + (" ..." if len(missing) > 8 else "")
        raise RuntimeError(f"{len(missing)} of {tasks} tasks did not complete (ranks {shown}); their logs are "
                           f"{logging_dir}/logs/task_<rank>.log; run the same command again to rerun only those")
    return run


# ------------------------------------------------------------------------------------------- local

def _local_executor_class():
    from datatrove.executor.local import LocalPipelineExecutor

    return LocalPipelineExecutor


class _QuietTasks:
    """Mixed into an executor: with `quiet`, a task logs to its log file and only errors to the console
    (datatrove's local_rank > 0), and a task running in a pool process leaves Ctrl-C to the process that
    started the pool (which stops the pool), so an interrupted run prints one line, not one per task."""

    quiet = True
    launcher_pid = 0

    def _run_for_rank(self, rank: int, local_rank: int = 0, node_rank: int = -1):
        if self.launcher_pid and os.getpid() != self.launcher_pid:  # a pool process
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if self.quiet:  # its "k/N tasks completed" lines
                from datatrove.utils.logging import logger

                logger.disable("datatrove.executor.local")
        return super()._run_for_rank(rank, 1 if self.quiet else local_rank, node_rank)


def __getattr__(name: str):
    # the executor classes subclass datatrove's, which is imported only when a pipeline runs; they are
    # module attributes so that the task processes (forkserver, Slurm's pickle) find them by name
    if name == "_LocalExecutor":
        cls = type("_LocalExecutor", (_QuietTasks, _local_executor_class()), {"__module__": __name__})
        globals()[name] = cls
        return cls
    if name == "_SlurmExecutor":
        from datatrove.executor.slurm import SlurmPipelineExecutor

        cls = type("_SlurmExecutor", (_SlurmRender, SlurmPipelineExecutor), {"__module__": __name__})
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _quiet_datatrove:
    """Keep the executor's own progress lines (in the launching process) off the console."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def __enter__(self):
        if self.quiet:
            from datatrove.utils.logging import logger

            logger.disable("datatrove.executor")
        return self

    def __exit__(self, *_):
        if self.quiet:
            from datatrove.utils.logging import logger

            logger.enable("datatrove.executor")


# ------------------------------------------------------------------------------------------- slurm

class _SlurmRender:
    """Mixed into datatrove's Slurm executor: write what `launch_job` would submit (the pickled executor,
    the ranks to run and the sbatch script), without calling sbatch."""

    def render(self) -> Path:
        import dill
        from dill import CONTENTS_FMODE

        ranks = self.get_incomplete_ranks()
        with self.logging_dir.open("executor.pik", "wb") as stream:
            dill.dump(self, stream, fmode=CONTENTS_FMODE)
        self.save_executor_as_json()
        with self.logging_dir.open("ranks_to_run.json", "w") as stream:
            json.dump(ranks, stream)
        jobs = max(1, -(-len(ranks) // self.tasks_per_job))
        array = min(jobs, self.max_array_size) if self.max_array_size != -1 else jobs
        pickled = self.logging_dir.resolve_paths("executor.pik")
        command = f"srun -l -n {self.nodes_per_task} launch_pickled_pipeline {pickled}" if self.with_srun \
            else f"launch_pickled_pipeline {pickled}"
        script = self.get_launch_file_contents(self.get_sbatch_args(array), command)
        with self.logging_dir.open("launch_script.slurm", "w") as stream:
            stream.write(script)
        return Path(self.logging_dir.resolve_paths("launch_script.slurm"))


def _slurm_executor(pipeline, tasks: int, logging_dir: Path, settings: ExecutorSettings):
    from trex_cli import executors

    setup = list(settings.setup)
    if settings.venv:
        setup.insert(0, f"source {shlex.quote(settings.venv)}")
    return executors._SlurmExecutor(
        list(pipeline), tasks=tasks, time=settings.time, partition=settings.partition,
        cpus_per_task=settings.cpus_per_task, mem_per_cpu_gb=settings.mem_per_cpu_gb,
        workers=settings.workers or -1, job_name=settings.job_name, qos=settings.qos,
        env_command="\n".join(setup) or None, sbatch_args=dict(settings.sbatch_args),
        logging_dir=str(logging_dir), skip_completed=True, slurm_logs_folder=str(logging_dir / "slurm_logs"),
        with_srun=settings.srun)


def _wait_for_slurm(run: PipelineRun, settings: ExecutorSettings) -> None:
    """Wait until every task has its completion marker, or the job has left the queue (then the missing
    tasks are reported by the caller). Ctrl-C stops the waiting, not the job."""
    while len(completed_ranks(run.logging_dir, run.tasks)) < run.tasks:
        try:
            queued = subprocess.run(["squeue", "--noheader", "--job", run.job_id], capture_output=True,
                                    text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            queued = None
        if queued is not None and queued.returncode == 0 and not queued.stdout.strip():
            time.sleep(5)  # the last markers may still be on their way through a shared file system
            return
        time.sleep(settings.poll_s)


# --------------------------------------------------------------------------------------------- ray

def _run_on_ray(pipeline, tasks: int, logging_dir: Path, settings: ExecutorSettings, quiet: bool) -> None:
    try:
        import ray
    except ImportError:
        raise ValueError("--executor ray needs Ray: pip install 'trex[ray]' (or pip install ray==2.60.0)") from None
    from datatrove.executor.ray import RayPipelineExecutor

    started = not ray.is_initialized()  # a Ray this call starts (or connects to) it also shuts down
    if started:
        ray.init(address=settings.address or None, include_dashboard=False, log_to_driver=not quiet)
    try:
        executor = RayPipelineExecutor(list(pipeline), tasks=tasks, workers=settings.workers or -1,
                                       logging_dir=str(logging_dir), skip_completed=True,
                                       cpus_per_task=settings.cpus_per_task, mem_per_cpu_gb=settings.mem_per_cpu_gb)
        with _quiet_datatrove(quiet):
            executor.run()
    finally:
        if started:
            ray.shutdown()


def settings_summary(settings: ExecutorSettings, tasks: int | None = None) -> str:
    """One line naming where the tasks run, for a stage's console output."""
    tasks = settings.tasks if tasks is None else tasks
    where = {"local": "this machine", "slurm": f"Slurm partition {settings.partition}",
             "ray": f"Ray {settings.address or '(local)'}"}[settings.kind]
    return f"{tasks} task{'s' * (tasks != 1)} on {where} ({settings.kind} executor)"

