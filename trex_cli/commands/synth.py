"""`trex synth`: synthesize solver-verified OR problems, CPT documents, SFT samples and a held-out eval
split (the synth stage, `trex_cli.stages.synth`, does the work; this module parses flags and prints)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trex_cli.console import out, user_errors

DIFFICULTIES = ("small", "medium", "large", "industrial")  # data_synth.family.ALL_DIFFICULTIES


def _difficulty_weights(text: str) -> dict[str, float]:
    """"small", "small,medium" (equal weights) or "small=0.5,large=0.5" -> weights."""
    weights: dict[str, float] = {}
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        name, _, weight = part.partition("=")
        name = name.strip()
        if name not in DIFFICULTIES:
            raise ValueError(f"--difficulty {text!r}: unknown difficulty {name!r}; use {', '.join(DIFFICULTIES)}, "
                             "optionally with weights (small=0.6,medium=0.4)")
        try:
            weights[name] = float(weight) if weight else 1.0
        except ValueError:
            raise ValueError(f"--difficulty {text!r}: weight {weight!r} of {name} is not a number") from None
    if not weights:
        raise ValueError("--difficulty is empty; use e.g. --difficulty small,medium")
    return weights


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _summary_table(result) -> None:
    from rich.table import Table

    table = Table(title=f"trex synth: {result.out}")
    for column in ("family", "train", "eval", "infeasible", "rejected", "top reject reason"):
        table.add_column(column, justify="left" if column in ("family", "top reject reason") else "right",
                         no_wrap=column == "family")
    totals = {"train": 0, "eval": 0, "infeasible": 0, "rejected": 0}
    for family, counts in sorted(result.per_family.items()):
        rejects = {key.split(":", 1)[1]: value for key, value in counts.items() if key.startswith("reject:")}
        row = {"train": counts.get("train_kept", 0), "eval": counts.get("eval_kept", 0),
               "infeasible": counts.get("infeasible", 0), "rejected": sum(rejects.values())}
        for key in totals:
            totals[key] += row[key]
        top = max(rejects.items(), key=lambda item: item[1]) if rejects else None
        table.add_row(family, *(str(row[k]) for k in ("train", "eval", "infeasible", "rejected")),
                      f"{top[0]} ({top[1]})" if top else "")
    table.add_section()
    table.add_row("total", *(str(totals[k]) for k in ("train", "eval", "infeasible", "rejected")), "")
    out.print(table)


@user_errors
def synth(
    recipe: Annotated[Path | None, typer.Option("--recipe", help="Recipe TOML; its \\[synth] table gives the defaults.")] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", help="Override a recipe key, e.g. --set synth.n=200 (repeatable).")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Output folder (default: <run dir>/synth).")] = None,
    n: Annotated[int | None, typer.Option("--n", help="Verified training problems to keep.", show_default="synth.n: 200")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the candidate streams (same seed, same records).", show_default="synth.seed: 0")] = None,
    families: Annotated[str | None, typer.Option("--families", help="Comma-separated families (default: all).")] = None,
    holdout_families: Annotated[str | None, typer.Option("--holdout-families", help="Comma-separated families kept out of training (still in eval).")] = None,
    difficulty: Annotated[str | None, typer.Option("--difficulty", help="small, medium, large, industrial (>= 1,000 variables, families that scale), a comma list, or weights: small=0.6,medium=0.4.", show_default="synth.difficulty: small=0.5,medium=0.35,large=0.15")] = None,
    workers: Annotated[int | None, typer.Option("--workers", help="Worker processes (each with its own program runner).", show_default="synth.workers: 2")] = None,
    eval_n: Annotated[int | None, typer.Option("--eval-n", help="Verified held-out eval items (disjoint seed stream).", show_default="synth.eval_n: 50")] = None,
    infeasible_share: Annotated[float | None, typer.Option("--infeasible-share", help="Share of deliberately infeasible, labelled candidates.", show_default="synth.infeasible_share: 0.05")] = None,
    teacher_endpoint: Annotated[str | None, typer.Option("--teacher-endpoint", help="OpenAI-compatible base URL (…/v1) for statement rewrites.")] = None,
    teacher_model: Annotated[str | None, typer.Option("--teacher-model", help="Model name for the teacher endpoint.")] = None,
    run_dir: Annotated[Path | None, typer.Option("--run-dir", help="Run folder (default: runs/<recipe name>).")] = None,
    executor: Annotated[str | None, typer.Option("--executor", help="Where the tasks run: local, slurm or ray (\\[run.executor] kind).", show_default="run.executor.kind: local")] = None,
    tasks: Annotated[int | None, typer.Option("--tasks", help="Tasks the candidates are sharded into (the records do not depend on it).", show_default="run.executor.tasks: 1")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --executor slurm: write the first round's sbatch script and stop.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if the folder is finished.")] = False,
    show_progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show the progress bar on stderr.")] = True,
) -> None:
    """Synthesize solver-verified OR problems (each checked six ways) with CPT documents, SFT samples and
    a held-out eval split."""
    from trex_cli.executors import executor_flags
    from trex_cli.recipe import flag_overrides, load_recipe
    from trex_cli.run_layout import RunLayout
    from trex_cli.stages.synth import SynthStage

    flags = flag_overrides({
        "--n": ("synth.n", n), "--seed": ("synth.seed", seed), "--eval-n": ("synth.eval_n", eval_n),
        "--workers": ("synth.workers", workers), "--infeasible-share": ("synth.infeasible_share", infeasible_share),
        "--families": ("synth.families", _names(families) if families is not None else None),
        "--holdout-families": ("synth.holdout_families",
                               _names(holdout_families) if holdout_families is not None else None),
        "--difficulty": ("synth.difficulty", _difficulty_weights(difficulty) if difficulty is not None else None),
        "--teacher-endpoint": ("synth.teacher_endpoint", teacher_endpoint),
        "--teacher-model": ("synth.teacher_model", teacher_model),
        "--out": ("synth.out", str(out_dir) if out_dir is not None else None),
        "--run-dir": ("run.run_dir", str(run_dir) if run_dir is not None else None),
        **executor_flags(executor, tasks),
    })
    loaded = load_recipe(recipe, overrides, flags)
    layout = RunLayout(loaded)
    stage = SynthStage(loaded, layout)
    stage.dry_run = dry_run
    with layout.stage_command():
        result = stage.run(force=force, show_progress=show_progress)
    if dry_run and result.details is not None:
        out.print(f"wrote the Slurm submission of the first round: {result.details} (not submitted); "
                  "run the same command without --dry-run to submit it and merge the results")
        return
    if not result.ran:
        out.print(result.said())
        return
    synthesis = result.details
    _summary_table(synthesis)
    reasons = synthesis.summary.get("reject_reasons", {})
    this_run = synthesis.summary.get("this_run", {})
    out.print(f"kept {synthesis.counts['problems']} training problems from {synthesis.counts['families']} families and "
              f"{synthesis.counts['eval_items']} eval items; {synthesis.counts['rejects']} rejects "
              f"({', '.join(f'{k} {v}' for k, v in reasons.items()) or 'none'}); "
              f"{this_run.get('verified_per_s') or 0:.1f} verified problems/s; wrote {result.folder}")
    overlap = synthesis.summary.get("overlap")
    if overlap:
        out.print(f"eval/train {overlap['n']}-gram overlap: {overlap['eval_ngram_share_in_train']:.1%} of eval n-grams "
                  f"occur in training ({overlap['eval_items_sharing_an_ngram']:.0%} of eval items and "
                  f"{overlap['train_texts_sharing_an_ngram']:.0%} of training samples share one); skeletons per "
                  f"family: python -m data_synth.stats {result.folder}")
