"""`trex train cpt` and `trex train sft`: full-parameter training of a DeepSeek-V4 model on a data folder.

The native engine (default) trains with trex's own trainer on PyTorch distributed; `--engine mindspeed`
renders (and, where MindSpeed-LLM is installed, runs) the SuperPOD launch through the planner.
"""

from __future__ import annotations

import dataclasses
import json
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
MaxStepsOption = Annotated[int | None, typer.Option("--max-steps", help="Optimizer steps to train.")]
SaveEveryOption = Annotated[int | None, typer.Option("--save-every", help="Save a checkpoint every N steps.")]
NprocOption = Annotated[int, typer.Option("--nproc", help="Processes to start on this machine with torchrun.")]
FlavorOption = Annotated[str | None, typer.Option("--flavor", help="Model flavor for random init: tiny, small, flash, pro.")]
InitOption = Annotated[Path | None, typer.Option("--init", help="HF checkpoint folder to start from (either layout).")]
EngineOption = Annotated[str | None, typer.Option("--engine", help="native (trex's trainer) or mindspeed.")]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="mindspeed engine: write the launch files only.")]
ForceOption = Annotated[bool, typer.Option("--force", help="Start again even if the stage folder is finished.")]


def resolve_job(
    stage: str,
    recipe,
    data: Path | None,
    run_dir: Path | None,
    max_steps: int | None,
    save_every: int | None,
    flavor: str | None,
    init: Path | None,
):
    """A loaded recipe + flags -> TrainJob. A flag given on the command line beats the recipe."""
    from trex_cli.artifacts import read_manifest
    from trex_cli.console import warn
    from trex_cli.models.deepseek_v4.config import DeepseekV4Config
    from trex_cli.train.trainer import TrainJob

    train = recipe.section("train")
    model_section = recipe.section("model")
    schedule = train.stage(stage)
    if max_steps is not None:
        schedule.max_steps = max_steps
    if save_every is not None:
        train.save_every = save_every
    if flavor is not None:
        model_section.flavor, model_section.config_path = flavor, ""
    if data is not None:
        schedule.data = str(data)
    if init is not None:
        schedule.init = str(init)
    if schedule.max_steps < 1:
        raise ValueError(f"[train.{stage}] max_steps = {schedule.max_steps}: train at least 1 step")
    if train.save_every < 1:
        raise ValueError(f"[train] save_every = {train.save_every}: must be 1 or more")
    root = Path(run_dir) if run_dir is not None else recipe.run_dir
    data_folder = Path(schedule.data) if schedule.data else root / "data" / stage
    read_manifest(data_folder, "data")  # a clear error before any process starts
    meta = json.loads((data_folder / "meta.json").read_text())
    inputs = [data_folder]
    init_path = Path(schedule.init) if schedule.init else None
    if init_path is None and stage == "sft":
        cpt_folder = root / "train" / "cpt"
        if (cpt_folder / "manifest.json").is_file() and (cpt_folder / "hf").is_dir():
            init_path = cpt_folder / "hf"
            inputs.append(cpt_folder)
        else:
            warn(f"no finished CPT stage in {cpt_folder} and no --init: SFT starts from random init")
    if init_path is not None:
        if not (init_path / "config.json").is_file():
            raise FileNotFoundError(f"--init {init_path}: no config.json there (give an HF checkpoint folder)")
        if flavor is not None:
            warn(f"--flavor {flavor} is ignored: the shape comes from {init_path}/config.json")
        config = DeepseekV4Config.from_model_dir(init_path)
    else:
        config = model_section.build_config()
        # A random init takes the data's tokenizer: its vocabulary and special tokens.
        changes = {"vocab_size": max(config.vocab_size, int(meta["vocab_size"]))}
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            if meta.get(key) is not None:
                changes[key] = int(meta[key])
        config = config.replace(**changes)
    stage_folder = root / "train" / stage
    # What decides the trained weights: not the other stage's table, nor logging and checkpoint cadence
    # (so a finished CPT stays finished when only SFT settings change).
    train_settings = recipe.resolved(["train"])["train"]
    for key in ("cpt", "sft", "log_every", "tensorboard", "save_every", "keep_last", "engine"):
        train_settings.pop(key, None)
    train_settings["schedule"] = dataclasses.asdict(schedule)
    fingerprint_config = {
        "stage": stage,
        "train": train_settings,
        "model": config.to_dict(),
        "init": str(init_path) if init_path else None,
    }
    job = TrainJob(
        stage=stage,
        train=train,
        model_config=config.to_dict(),
        stage_folder=stage_folder,
        data_folder=data_folder,
        init_path=init_path,
        fingerprint_config=fingerprint_config,
        inputs=inputs,
    )
    return job


def _train(stage: str, recipe_path, overrides, data, run_dir, max_steps, save_every, nproc, flavor, init, engine, dry_run, force):
    from trex_cli.recipe import load_recipe

    recipe = load_recipe(recipe_path, overrides)
    chosen_engine = engine or recipe.section("train").engine
    if chosen_engine not in ("native", "mindspeed"):
        raise ValueError(f"--engine {chosen_engine!r}: use native or mindspeed")
    if chosen_engine == "mindspeed":
        from trex_cli.train.engines.mindspeed import run_mindspeed

        result = run_mindspeed(stage, recipe, Path(run_dir) if run_dir else recipe.run_dir, dry_run)
        mode = "wrote (dry run)" if result.get("dry_run") else "ran"
        out.print(f"train {stage} (mindspeed): {mode} {len(result.get('steps', []))} steps in {result.get('folder')}")
        for script in result.get("scripts", []):
            out.print(f"  {script}", highlight=False)
        for missing in result.get("missing", []):
            err.print(f"[yellow]missing:[/yellow] {missing}", highlight=False)
        return
    if nproc < 1:
        raise ValueError(f"--nproc {nproc}: must be 1 or more")
    job = resolve_job(stage, recipe, data, run_dir, max_steps, save_every, flavor, init)
    from trex_cli.artifacts import StageState
    from trex_cli.train.launch import run_stage, spawn_torchrun, stage_folder_of, under_torchrun
    from trex_cli.train.trainer import TrainingDiverged

    if nproc > 1 and not under_torchrun():
        if stage_folder_of(job, force).prepare() == StageState.DONE:
            out.print(f"train {stage}: already done ({job.stage_folder})")
            return
        recipe.save_resolved(job.stage_folder, ["run", "model", "train"])
        status = spawn_torchrun(job, nproc)
        if status != 0:
            err.print(f"[red]error:[/red] training failed in torchrun (exit status {status})")
            raise typer.Exit(code=1)
        manifest = json.loads((job.stage_folder / "manifest.json").read_text())
        _print_summary(stage, job.stage_folder, manifest["summary"])
        return
    try:
        if not under_torchrun():
            job.stage_folder.mkdir(parents=True, exist_ok=True)
        summary = run_stage(job, force=force and not under_torchrun(), recipe=recipe)
    except TrainingDiverged as error:
        err.print(f"[red]error:[/red] {error}")
        raise typer.Exit(code=1) from None
    if summary is None:
        out.print(f"train {stage}: already done ({job.stage_folder})")
        return
    import os

    if int(os.environ.get("RANK", "0")) == 0:
        _print_summary(stage, job.stage_folder, summary)


def _print_summary(stage: str, folder: Path, summary: dict) -> None:
    loss = summary.get("final_loss")
    loss_text = f"{loss:.4f}" if isinstance(loss, float) else "n/a"
    out.print(
        f"train {stage}: {summary['steps']} steps, final loss {loss_text}, "
        f"{summary['skipped_steps']} skipped; checkpoints in {folder / 'checkpoints'}, HF export in {summary['hf']}",
        highlight=False,
    )


@app.command("cpt")
@user_errors
def cpt(
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
) -> None:
    """Continued pretraining on a `trex data cpt` folder (attention stays inside each packed document)."""
    _train("cpt", recipe, set_, data, run_dir, max_steps, save_every, nproc, flavor, init, engine, dry_run, force)


@app.command("sft")
@user_errors
def sft(
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
) -> None:
    """Supervised fine-tuning on a `trex data sft` folder (loss on assistant tokens only), from the run's CPT export when there is one."""
    _train("sft", recipe, set_, data, run_dir, max_steps, save_every, nproc, flavor, init, engine, dry_run, force)
