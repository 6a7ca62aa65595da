"""`trex run RECIPE`: every stage (synth -> data -> train -> eval) with a report at the end
(`trex_cli.orchestrator` orders the stages; this module parses the flags)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trex_cli.console import user_errors


@user_errors
def run(
    recipe: Annotated[Path, typer.Argument(help="Recipe TOML, e.g. recipes/tiny-cpu.toml.")],
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="Override a recipe key, e.g. --set train.sft.max_steps=60 (repeatable).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Rebuild the selected stages (all, or those of --only) even if they are finished.")
    ] = False,
    only: Annotated[
        str | None,
        typer.Option(
            "--only",
            help="Run only these stages (comma list): synth, data-cpt, data-sft, model-init, train-cpt, train-sft, "
            "eval-start, eval-cpt, eval-sft, or the groups data, train, eval. Their inputs must be finished.",
        ),
    ] = None,
    show_progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")] = True,
) -> None:
    """Run every stage of the recipe in order (synth -> data cpt -> data sft -> train cpt -> train sft -> eval of the
    starting model, after CPT and after SFT), skipping finished stages and resuming an interrupted one, then write
    and print the report (<run dir>/report.md: Pass@1 per model, benchmark and family, loss curves, score chart)."""
    from trex_cli.orchestrator import RecipeRun

    RecipeRun(recipe, overrides, force=force, only=only, show_progress=show_progress).run()
