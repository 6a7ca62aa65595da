"""`trex data cpt` and `trex data sft`: build training-ready datasets from synth folders, local OR
resources and replay corpora (deduplicated, decontaminated, tokenized, mixed and packed)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

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
        help="PATH[=SHARE]: a synth folder, resource folder, JSONL corpus or saved dataset, with its share "
        "of tokens (repeatable; replaces the recipe's sources).",
    ),
]
DecontaminateOption = Annotated[
    list[str] | None,
    typer.Option("--decontaminate", help="Benchmark file (JSON/JSONL, B4O) or synth folder to decontaminate against (repeatable)."),
]
TokenizerOption = Annotated[str | None, typer.Option("--tokenizer", help="Folder with tokenizer.json (a model folder or a data folder's tokenizer/).")]
TrainTokenizerOption = Annotated[int | None, typer.Option("--train-tokenizer", help="Train a byte-level BPE with this vocabulary size.")]
SeqLenOption = Annotated[int | None, typer.Option("--seq-len", help="Tokens per row.")]
OutOption = Annotated[
    Path | None,
    typer.Option("--out", help="Output folder (default: <run dir>/data/cpt, data/sft, or data/sft-program for --stage program)."),
]
RunDirOption = Annotated[Path | None, typer.Option("--run-dir", help="Run folder (default: runs/<recipe name>).")]
SkipBadOption = Annotated[bool | None, typer.Option("--skip-bad/--stop-on-bad", help="Count malformed input into exclusions.jsonl instead of stopping.")]
ForceOption = Annotated[bool, typer.Option("--force", help="Rebuild even if the folder is finished.")]
ShowProgressOption = Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars on stderr.")]


def _configure(recipe_path, overrides, kind, sources, decontaminate, tokenizer, train_tokenizer, seq_len, skip_bad, extra=None):
    """The validated [data] table with the command-line flags applied (a flag beats the recipe)."""
    import dataclasses

    from trex_cli.data.config import SourceSpec
    from trex_cli.recipe import load_recipe

    recipe = load_recipe(recipe_path, overrides)
    config = recipe.section("data")
    if tokenizer and train_tokenizer:
        raise ValueError("give --tokenizer or --train-tokenizer, not both")
    top: dict = {}
    if decontaminate:
        top["decontaminate"] = list(decontaminate)
    if tokenizer:
        top["tokenizer"] = tokenizer
    if train_tokenizer:
        top["tokenizer"], top["vocab_size"] = "", train_tokenizer
    if skip_bad is not None:
        top["skip_bad"] = skip_bad
    section_changes: dict = dict(extra or {})
    if sources:
        section_changes["sources"] = [SourceSpec.parse(text) for text in sources]
    if seq_len is not None:
        section_changes["seq_len"] = seq_len
    section = dataclasses.replace(getattr(config, kind), **section_changes)
    config = dataclasses.replace(config, **top, **{kind: section})
    return recipe, config


def _print_summary(stats: dict, title: str) -> None:
    from rich.table import Table

    if stats.get("already_done"):
        out.print(f"{stats['out']}: already done (pass --force to rebuild)")
        return
    sources = Table(title=title)
    for column in ("source", "read", "kept", "tokens kept", "tokens in mix", "share", "repeats"):
        sources.add_column(column, justify="left" if column == "source" else "right")
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
    drops = Table(title="dropped (see exclusions.jsonl)")
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
) -> None:
    """Build the CPT dataset: documents plus EOS, mixed by token shares, packed into rows of exactly seq_len."""
    from trex_cli.data.cpt import build_cpt

    loaded, config = _configure(
        recipe, overrides, "cpt", source, decontaminate, tokenizer, train_tokenizer, seq_len, skip_bad
    )
    run_folder = run_dir or loaded.run_dir
    target = out_dir or (Path(config.cpt.out) if config.cpt.out else run_folder / "data" / "cpt")
    stats = build_cpt(
        config, target, run_folder, force=force, show_progress=show_progress,
        save_recipe=lambda folder: loaded.save_resolved(folder, ["run", "data"]),
    )
    _print_summary(stats, "CPT sources")


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
) -> None:
    """Build the SFT dataset: chat-templated samples with loss on assistant tokens only (verified by decoding).
    Reuses the run's CPT tokenizer when there is one and no --tokenizer is given."""
    from trex_cli.data.sft import build_sft

    extra: dict = {}
    if stage is not None:
        allowed: tuple[Literal["all", "program"], ...] = ("all", "program")
        if stage not in allowed:
            raise ValueError(f"--stage {stage!r}: use 'all' or 'program'")
        extra["stage"] = stage
    if packing is not None:
        extra["packing"] = packing
    loaded, config = _configure(
        recipe, overrides, "sft", source, decontaminate, tokenizer, train_tokenizer, seq_len, skip_bad, extra
    )
    run_folder = run_dir or loaded.run_dir
    # stage one of two-stage SFT gets its own folder, so both stages' data can sit side by side
    default_name = "sft" if config.sft.stage == "all" else f"sft-{config.sft.stage}"
    target = out_dir or (Path(config.sft.out) if config.sft.out else run_folder / "data" / default_name)
    stats = build_sft(
        config, target, run_folder, force=force, show_progress=show_progress,
        save_recipe=lambda folder: loaded.save_resolved(folder, ["run", "data"]),
    )
    _print_summary(stats, f"SFT sources (stage {stats.get('stage', config.sft.stage)})")
