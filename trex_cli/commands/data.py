"""`trex data cpt` and `trex data sft`: build training-ready datasets from synth folders, local OR
resources and replay corpora (deduplicated, decontaminated, tokenized, mixed and packed)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trex_cli.console import out, user_errors

app = typer.Typer(
    help="Build CPT and SFT datasets: dedup, decontaminate, tokenize, mix and pack.",
    no_args_is_help=True,
)

RecipeOption = Annotated[Path | None, typer.Option("--recipe", help="Recipe TOML; its \\[data] table gives the defaults.")]
SetOption = Annotated[list[str] | None, typer.Option("--set", help="Override a recipe key, e.g. --set data.seed=1 (repeatable).")]
SourceOption = Annotated[
    list[str] | None,
    typer.Option(
        "--source",
        help="PATH[=SHARE]: a synth folder, resource folder, JSONL/JSON/Parquet/CSV file, saved dataset or "
        "Hub dataset (owner/name, or hub:FOLDER for local data files), with its share of tokens (repeatable; "
        "replaces the recipe's sources; formats and column mappings: [data.*] sources in the recipe).",
    ),
]
DecontaminateOption = Annotated[
    list[str] | None,
    typer.Option("--decontaminate", help="Benchmark file (JSON/JSONL, B4O) or synth folder to decontaminate against (repeatable)."),
]
TokenizerOption = Annotated[str | None, typer.Option("--tokenizer", help="Folder with tokenizer.json (a model folder or a data folder's tokenizer/).")]
TrainTokenizerOption = Annotated[int | None, typer.Option(
    "--train-tokenizer", help="Train a byte-level BPE with this vocabulary size.", show_default="data.vocab_size: 2048")]
SeqLenOption = Annotated[int | None, typer.Option(
    "--seq-len", help="Tokens per row.", show_default="data.<kind>.seq_len: 1024 (cpt), 2048 (sft)")]
OutOption = Annotated[
    Path | None,
    typer.Option("--out", help="Output folder (default: <run dir>/data/cpt, data/sft, or data/sft-program for --stage program)."),
]
RunDirOption = Annotated[Path | None, typer.Option("--run-dir", help="Run folder (default: runs/<recipe name>).")]
SkipBadOption = Annotated[bool | None, typer.Option(
    "--skip-bad/--stop-on-bad", help="Count malformed input into exclusions.jsonl instead of stopping.",
    show_default="data.skip_bad: false")]
ForceOption = Annotated[bool, typer.Option("--force", help="Rebuild even if the folder is finished.")]
ShowProgressOption = Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars on stderr.")]
ExecutorOption = Annotated[str | None, typer.Option(
    "--executor", help="Where the tasks run: local, slurm or ray (\\[run.executor] kind).",
    show_default="run.executor.kind: local")]
TasksOption = Annotated[int | None, typer.Option(
    "--tasks", help="Tasks the documents are sharded into, by source file (the dataset does not depend on it).",
    show_default="run.executor.tasks: 1")]
DryRunOption = Annotated[bool, typer.Option(
    "--dry-run", help="With --executor slurm: write the clean phase's sbatch script and stop.")]


def _run(kind, recipe_path, overrides, sources, decontaminate, tokenizer, train_tokenizer, seq_len, out_dir,
         run_dir, skip_bad, force, show_progress, extra=None, dry_run=False):
    """Build the `kind` dataset with the flags applied to the recipe's [data] keys (a flag beats the recipe)."""
    import dataclasses

    from trex_cli.data.config import SourceSpec
    from trex_cli.recipe import flag_overrides, load_recipe
    from trex_cli.run_layout import RunLayout
    from trex_cli.stages.data import DataStage

    if tokenizer and train_tokenizer:
        raise ValueError("give --tokenizer or --train-tokenizer, not both")
    flags = flag_overrides({
        "--source": (f"data.{kind}.sources",
                     [dataclasses.asdict(SourceSpec.parse(text)) for text in sources] if sources else None),
        "--decontaminate": ("data.decontaminate", list(decontaminate) if decontaminate else None),
        "--tokenizer": ("data.tokenizer", tokenizer or ("" if train_tokenizer else None)),
        "--train-tokenizer": ("data.vocab_size", train_tokenizer),
        "--seq-len": (f"data.{kind}.seq_len", seq_len),
        "--skip-bad": ("data.skip_bad", skip_bad),
        "--out": (f"data.{kind}.out", str(out_dir) if out_dir is not None else None),
        "--run-dir": ("run.run_dir", str(run_dir) if run_dir is not None else None),
        **(extra or {}),
    })
    loaded = load_recipe(recipe_path, overrides, flags)
    layout = RunLayout(loaded)
    stage = DataStage(loaded, layout, kind)
    stage.dry_run = dry_run
    with layout.stage_command():
        return stage.run(force=force, show_progress=show_progress)


def _said_dry_run(result) -> bool:
    """`--dry-run`: print where the submission is; True when there was one."""
    if not isinstance(result.details, Path):
        return False
    out.print(f"wrote the Slurm submission of the clean phase: {result.details} (not submitted); run the same "
              "command without --dry-run to submit it and build the dataset (finished tasks are not rerun)")
    return True


def _print_summary(result, title: str) -> None:
    from rich.table import Table

    if not result.ran:
        out.print(result.said())
        return
    stats = result.details
    # 80 columns: numbers keep their width, a long source path folds onto more lines (never an ellipsis)
    sources = Table(title=title)
    sources.add_column("source", overflow="fold", ratio=1)
    for column in ("read", "kept", "tokens\nkept", "tokens\nin mix", "share", "repeats"):
        sources.add_column(column, justify="right", no_wrap=True)
    for row in stats["sources"]:
        sources.add_row(
            row["source"], str(row["read"]), str(row["kept"]), f"{row['tokens_kept']:,}", f"{row['tokens_in_mix']:,}",
            f"{row['share_of_mix']:.3f}", f"{row['repeats']:.2f}" + (" (capped)" if row["capped_by_max_upsample"] else ""),
        )
    out.print(sources)
    splits = Table(title="rows")
    for column in ("split", "rows", "tokens"):
        splits.add_column(column, justify="right")
    for name, split in stats["splits"].items():
        splits.add_row(name, f"{split['rows']:,}", f"{split['tokens']:,}")
    out.print(splits)
    drops = Table(title="dropped", caption="rows: exclusions.jsonl")
    drops.add_column("reason")
    drops.add_column("rows", justify="right")
    for reason, count in (stats["drops_by_reason"] or {"none": 0}).items():
        drops.add_row(reason, str(count))
    out.print(drops)
    out.print(f"wrote {stats['out']} in {stats['wall_time_s']:.1f} s")


@app.command("cpt")
@user_errors
def cpt(
    recipe: RecipeOption = None,
    overrides: SetOption = None,
    source: SourceOption = None,
    decontaminate: DecontaminateOption = None,
    tokenizer: TokenizerOption = None,
    train_tokenizer: TrainTokenizerOption = None,
    seq_len: SeqLenOption = None,
    out_dir: OutOption = None,
    run_dir: RunDirOption = None,
    skip_bad: SkipBadOption = None,
    force: ForceOption = False,
    show_progress: ShowProgressOption = True,
    executor: ExecutorOption = None,
    tasks: TasksOption = None,
    dry_run: DryRunOption = False,
) -> None:
    """Build the CPT dataset: documents plus EOS, mixed by token shares, packed into rows of exactly seq_len."""
    from trex_cli.executors import executor_flags

    result = _run("cpt", recipe, overrides, source, decontaminate, tokenizer, train_tokenizer, seq_len, out_dir,
                  run_dir, skip_bad, force, show_progress, extra=executor_flags(executor, tasks), dry_run=dry_run)
    if not _said_dry_run(result):
        _print_summary(result, "CPT sources")


@app.command("sft")
@user_errors
def sft(
    recipe: RecipeOption = None,
    overrides: SetOption = None,
    source: SourceOption = None,
    decontaminate: DecontaminateOption = None,
    tokenizer: TokenizerOption = None,
    train_tokenizer: TrainTokenizerOption = None,
    seq_len: SeqLenOption = None,
    stage: Annotated[
        str | None, typer.Option("--stage", help="'program': program-only answers (SFT stage one); 'all': everything.")
    ] = None,
    packing: Annotated[bool | None, typer.Option("--packing/--no-packing", help="Pack several samples per row.")] = None,
    out_dir: OutOption = None,
    run_dir: RunDirOption = None,
    skip_bad: SkipBadOption = None,
    force: ForceOption = False,
    show_progress: ShowProgressOption = True,
    executor: ExecutorOption = None,
    tasks: TasksOption = None,
    dry_run: DryRunOption = False,
) -> None:
    """Build the SFT dataset: chat-templated samples with loss on assistant tokens only (verified by decoding).
    Reuses the run's CPT tokenizer when there is one and no --tokenizer is given."""
    from trex_cli.executors import executor_flags

    extra = {"--stage": ("data.sft.stage", stage), "--packing": ("data.sft.packing", packing),
             **executor_flags(executor, tasks)}
    result = _run("sft", recipe, overrides, source, decontaminate, tokenizer, train_tokenizer, seq_len, out_dir,
                  run_dir, skip_bad, force, show_progress, extra, dry_run=dry_run)
    if _said_dry_run(result):
        return
    _print_summary(result, f"SFT sources (stage {result.details.get('stage', '') if result.ran else ''})")
