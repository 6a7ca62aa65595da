"""`trex train cpt` and `trex train sft`: full-parameter training of a DeepSeek-V4 model on a data folder.

The native engine (default) trains with trex's own trainer on PyTorch distributed; `--engine mindspeed`
renders (and, where MindSpeed-LLM is installed, runs) the SuperPOD launch (`trex_cli.train.engines.mindspeed`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trex_cli.console import err, out, user_errors

app = typer.Typer(
    help="Train DeepSeek-V4: continued pretraining (cpt) and supervised fine-tuning (sft).",
    no_args_is_help=True,
)

RecipeOption = Annotated[Path | None, typer.Option("--recipe", help="Recipe TOML (default: built-in defaults).")]
SetOption = Annotated[
    list[str] | None, typer.Option("--set", help="Override a recipe key, e.g. --set train.cpt.lr=1e-4 (repeatable).")
]
DataOption = Annotated[Path | None, typer.Option("--data", help="Data folder (default: <run dir>/data/<stage>).")]
RunDirOption = Annotated[Path | None, typer.Option("--run-dir", help="Run folder (default: runs/<recipe name>).")]
MaxStepsOption = Annotated[int | None, typer.Option(
    "--max-steps", help="Optimizer steps to train.", show_default="train.<stage>.max_steps: 100 (cpt), 60 (sft)")]
SaveEveryOption = Annotated[int | None, typer.Option(
    "--save-every", help="Save a checkpoint every N steps.", show_default="train.save_every: 50")]
NprocOption = Annotated[int, typer.Option("--nproc", help="Processes to start on this machine with torchrun.")]
FlavorOption = Annotated[str | None, typer.Option(
    "--flavor", help="Model flavor for random init: tiny, small, flash, pro.", show_default="model.flavor: tiny")]
InitOption = Annotated[Path | None, typer.Option("--init", help="HF checkpoint folder to start from (either layout).")]
EngineOption = Annotated[str | None, typer.Option(
    "--engine", help="native (trex's trainer) or mindspeed.", show_default="train.engine: native")]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="mindspeed engine: write the launch files only.")]
ForceOption = Annotated[bool, typer.Option("--force", help="Start again even if the stage folder is finished.")]
ReportToOption = Annotated[
    str | None,
    typer.Option("--report-to", help="Where metrics go besides metrics.jsonl: tensorboard, wandb, or both "
                 "(comma-separated; WANDB_MODE=offline keeps W&B local); 'none' for neither.",
                 show_default="train.report_to: none"),
]
EvalEveryOption = Annotated[
    int | None, typer.Option("--eval-every", help="Validation loss every N steps and at the last (0: off).",
                             show_default="train.eval_every: 50")
]


def _report_to(text: str | None) -> list[str] | None:
    """`--report-to wandb,tensorboard` -> ["wandb", "tensorboard"]; "none" -> [] (names are checked by the key)."""
    if text is None:
        return None
    names = [name.strip() for name in text.split(",") if name.strip()]
    return [] if names == ["none"] else names


def _train(stage: str, recipe_path, overrides, data, run_dir, max_steps, save_every, nproc, flavor, init, engine,
           dry_run, force, report_to=None, eval_every=None):
    import os

    from trex_cli.recipe import FlagOverride, flag_overrides, load_recipe
    from trex_cli.run_layout import RunLayout
    from trex_cli.stages.train import TrainStage
    from trex_cli.train.launch import under_torchrun

    flags = flag_overrides({
        "--data": (f"train.{stage}.data", str(data) if data is not None else None),
        "--init": (f"train.{stage}.init", str(init) if init is not None else None),
        "--max-steps": (f"train.{stage}.max_steps", max_steps),
        "--save-every": ("train.save_every", save_every),
        "--report-to": ("train.report_to", _report_to(report_to)),
        "--eval-every": ("train.eval_every", eval_every),
        "--flavor": ("model.flavor", flavor),
        "--engine": ("train.engine", engine),
        "--run-dir": ("run.run_dir", str(run_dir) if run_dir is not None else None),
    })
    if flavor is not None:
        flags.append(FlagOverride("--flavor", "model.config_path", ""))  # a flavor replaces a config file
    recipe = load_recipe(recipe_path, overrides, flags)
    layout = RunLayout(recipe)
    if recipe.section("train").engine == "mindspeed":
        from trex_cli.train.engines.mindspeed import run_mindspeed

        result = run_mindspeed(stage, recipe, layout.root, dry_run)
        mode = "wrote (dry run)" if result.get("dry_run") else "ran"
        out.print(f"train {stage} (mindspeed): {mode} {len(result.get('steps', []))} steps in {result.get('folder')}")
        for script in result.get("scripts", []):
            out.print(f"  {script}", highlight=False)
        for missing in result.get("missing", []):
            err.print(f"[yellow]missing:[/yellow] {missing}", highlight=False)
        return
    training = TrainStage(recipe, layout, stage, nproc=nproc)
    if under_torchrun():  # one of several ranks: no lock per rank; rank 0 prints
        result = training.run(force=False)
    else:
        with layout.stage_command():
            result = training.run(force=force)
    if not result.ran or result.details is None:  # None: finished before this command started training
        out.print(result.said())
    elif int(os.environ.get("RANK", "0")) == 0:
        _print_summary(stage, result.folder, result.details)


def _print_summary(stage: str, folder: Path, summary: dict) -> None:
    loss = summary.get("final_loss")
    loss_text = f"{loss:.4f}" if isinstance(loss, float) else "n/a"
    out.print(
        f"train {stage}: {summary['steps']} steps, final loss {loss_text}, "
        f"{summary['skipped_steps']} skipped; checkpoints in {folder / 'checkpoints'}, HF export in {summary['hf']}",
        highlight=False,
    )


def _register(stage: str, help_text: str) -> None:
    """One command per training stage; both take the same flags."""

    def command(
        recipe: RecipeOption = None,
        set_: SetOption = None,
        data: DataOption = None,
        run_dir: RunDirOption = None,
        max_steps: MaxStepsOption = None,
        save_every: SaveEveryOption = None,
        nproc: NprocOption = 1,
        flavor: FlavorOption = None,
        init: InitOption = None,
        engine: EngineOption = None,
        dry_run: DryRunOption = False,
        force: ForceOption = False,
        report_to: ReportToOption = None,
        eval_every: EvalEveryOption = None,
    ) -> None:
        _train(stage, recipe, set_, data, run_dir, max_steps, save_every, nproc, flavor, init, engine, dry_run, force,
               report_to, eval_every)

    command.__doc__ = help_text
    command.__name__ = stage
    app.command(stage)(user_errors(command))


_register("cpt", "Continued pretraining on a `trex data cpt` folder (attention stays inside each packed document).")
_register("sft", "Supervised fine-tuning on a `trex data sft` folder (loss on assistant tokens only), from the run's "
          "CPT export when there is one.")
