"""The synth stage: `data_synth.synthesis` inside a stage folder (fingerprint, resume, manifest last)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from trex_cli.artifacts import StageFolder, StageState, write_text_atomic
from trex_cli.stages import Stage


class SynthStage(Stage):
    name = "synth"
    does = "solver-verified problems, CPT documents, SFT samples, held-out eval split"
    dry_run = False  # `trex synth --dry-run`: write the Slurm submission of the first round, run nothing

    @property
    def folder(self) -> Path:
        return self.layout.synth

    def stage_folder(self, force: bool = False) -> StageFolder:
        from data_synth.synthesis import fingerprint_config

        return StageFolder(self.folder, "synth", fingerprint_config(self.recipe.section("synth")), force=force)

    def build(self, force: bool, show_progress: bool):
        from trex_cli.console import err

        with synth_progress(err, show_progress) as on_progress:
            return run_synth_stage(self.recipe.section("synth"), self.folder, force=force, on_progress=on_progress,
                                   save_recipe=lambda folder: self.recipe.save_resolved(folder, ["run", "synth"]),
                                   executor=self.recipe.section("run").executor, dry_run=self.dry_run)


def sharding_for(config, settings, out: Path):
    """The `data_synth.synthesis.Sharding` that runs synth's tasks on the executor `settings` names
    (`[run.executor]`), or None for one local task, which runs in this process as it always has.

    Local tasks are processes of one pool: each verifies its blocks itself (one worker each; `tasks` and
    `workers` of `[run.executor]` are the parallelism). A Slurm or Ray task has its own CPUs and runs
    `synth.workers` workers, at most `cpus_per_task`."""
    from data_synth.synthesis import Sharding
    from trex_cli.executors import check_settings, run_pipeline

    if settings is None or (settings.kind == "local" and settings.tasks == 1):
        return None
    check_settings(settings)
    workers = 1 if settings.kind == "local" else max(1, min(config.workers, settings.cpus_per_task))
    return Sharding(settings.tasks, lambda pipeline, logging_dir: run_pipeline(
        pipeline, tasks=settings.tasks, logging_dir=logging_dir, settings=settings), workers)


def render_first_round(config, settings, out: Path) -> Path:
    """`--dry-run` with the Slurm executor: write the first round's submission (sbatch script, pickled
    executor, ranks to run) under `out/blocks/executor/` without submitting it; returns the script."""
    from data_synth.synthesis import BlockTask, plan_round, round_folder
    from trex_cli.executors import run_pipeline

    sharding = sharding_for(config, settings, out)
    blocks = plan_round(config, out, "train", 0, config.n, None, settings.tasks)
    task = BlockTask(config, out, blocks, sharding.workers if sharding else 1)
    run = run_pipeline([task], tasks=settings.tasks, logging_dir=round_folder(out, "train", 0, blocks),
                       settings=settings, dry_run=True)
    return run.launch_script


def run_synth_stage(config, out: Path, *, force: bool = False, on_progress: Callable | None = None,
                    save_recipe: Callable[[Path], object] | None = None, executor=None, dry_run: bool = False):
    """Synthesize `config` into the stage folder `out`: None when it was finished already, else the
    `SynthResult` (also what the manifest records). `executor` is `[run.executor]` (None: one local task);
    `dry_run` (Slurm) returns the path of the first round's submission script instead of running."""
    from data_synth.synthesis import check_config, fingerprint_config, synthesize
    from trex_cli.recipe import dumps_toml

    check_config(config)  # before the folder is touched
    sharding = sharding_for(config, executor, Path(out))  # bad executor settings: an error before any work
    if dry_run and (executor is None or executor.kind != "slurm"):
        raise ValueError("--dry-run writes the Slurm submission without sending it; use it with --executor slurm")
    folder = StageFolder(Path(out), "synth", fingerprint_config(config), force=force)
    if folder.prepare() is StageState.DONE:
        return None
    if save_recipe is not None:
        save_recipe(folder.path)
    else:
        write_text_atomic(folder.path / "recipe.resolved.toml", dumps_toml({"synth": dataclasses.asdict(config)}))
    if dry_run:
        return render_first_round(config, executor, folder.path)
    result = synthesize(config, folder.path, on_progress=on_progress, sharding=sharding)
    folder.finish(result.counts, {"per_family": result.per_family,
                                  "reject_reasons": result.summary.get("reject_reasons", {}),
                                  "overlap": result.summary.get("overlap", {})})
    return result


@contextlib.contextmanager
def synth_progress(console, enabled: bool) -> Iterator[Callable]:
    """A rich progress bar per split; yields synthesis's progress callback."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]:.1f} problems/s"), TextColumn("rejects {task.fields[rejects]}"),
               TimeElapsedColumn())
    tasks: dict[str, int] = {}
    started: dict[str, tuple[float, int]] = {}
    with Progress(*columns, console=console, disable=not enabled, transient=False) as progress:

        def on_progress(update) -> None:
            if update.split not in tasks:
                tasks[update.split] = progress.add_task(f"synth {update.split}", total=update.target,
                                                        rate=0.0, rejects=0)
                started[update.split] = (time.perf_counter(), update.kept)
            since, resumed = started[update.split]
            elapsed = max(time.perf_counter() - since, 1e-9)
            progress.update(tasks[update.split], completed=update.kept, rejects=update.rejected,
                            rate=(update.kept - resumed) / elapsed if update.candidates else 0.0)

        yield on_progress
