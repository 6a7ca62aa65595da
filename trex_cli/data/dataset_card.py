"""What a data build reports: `stats.json`, `meta.json`, a length histogram (PNG) and the dataset
card (`README.md` with YAML front matter), plus the rows of the summary table the command prints."""

from __future__ import annotations

import json
import platform
from importlib import metadata
from pathlib import Path

import numpy as np

from trex_cli.artifacts import write_json_atomic, write_text_atomic


def write_meta(folder: Path, kind: str, seq_len: int, tokenizer, num_train_rows: int, num_validation_rows: int) -> dict:
    meta = {
        "kind": kind,
        "seq_len": seq_len,
        "vocab_size": tokenizer.vocab_size,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "num_train_rows": num_train_rows,
        "num_validation_rows": num_validation_rows,
    }
    write_json_atomic(Path(folder) / "meta.json", meta)
    return meta


def write_histogram(path: Path, lengths: np.ndarray, seq_len: int, title: str, what: str) -> None:
    """Token-length histogram with the row length marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4), dpi=100)
    if len(lengths):
        axes.hist(lengths, bins=min(50, max(5, len(lengths) // 4)), color="#3b6ea5", edgecolor="white")
    axes.axvline(seq_len, color="#c0392b", linestyle="--", label=f"seq_len = {seq_len}")
    axes.set_xlabel(f"tokens per {what}")
    axes.set_ylabel(f"{what}s")
    axes.set_title(title)
    axes.legend()
    figure.tight_layout()
    temporary = Path(path).with_suffix(".partial.png")
    figure.savefig(temporary)
    plt.close(figure)
    temporary.replace(path)


def length_summary(lengths: np.ndarray) -> dict:
    if len(lengths) == 0:
        return {"count": 0}
    return {
        "count": int(len(lengths)),
        "min": int(lengths.min()),
        "mean": round(float(lengths.mean()), 1),
        "p50": int(np.percentile(lengths, 50)),
        "p95": int(np.percentile(lengths, 95)),
        "max": int(lengths.max()),
    }


# What trex writes (synthesized problems, their documents and samples) is released under the project's
# licence; rows from other sources keep theirs, which the card lists by source for the user to check.
LICENSE = "apache-2.0"  # the Hugging Face licence id of Apache-2.0
_VERSIONED = ("trex", "datasets", "tokenizers", "transformers", "numpy", "pyomo", "highspy")


def software_versions() -> dict[str, str]:
    """The versions that decide a build's bytes: Python and the packages that read, tokenize or made the
    rows ("not installed" for an optional one that is absent)."""
    versions = {"python": platform.python_version()}
    for package in _VERSIONED:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def _size_category(rows: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if rows < limit:
            return name
    return "n>1M"


def write_card(folder: Path, kind: str, stats: dict, meta: dict) -> None:
    """The dataset card: YAML front matter (machine-readable) and a short description."""
    title = "continued pretraining" if kind == "cpt" else "supervised fine-tuning"
    rows = meta["num_train_rows"] + meta["num_validation_rows"]
    front = {
        "pretty_name": f"trex {kind.upper()} data",
        "license": LICENSE,
        "language": ["en"],
        "task_categories": ["text-generation"],
        "size_categories": [_size_category(rows)],
        "tags": ["trex", "operations-research", kind],
        "trex": {
            "kind": kind,
            "seq_len": meta["seq_len"],
            "vocab_size": meta["vocab_size"],
            "train_rows": meta["num_train_rows"],
            "validation_rows": meta["num_validation_rows"],
            "seed": stats["seed"],
            "versions": stats["versions"],
        },
    }
    lines = ["---", *_yaml(front), "---", "", f"# trex {kind.upper()} data ({title})", ""]
    lines += [
        "Built by `trex data " + kind + "`. Load with `datasets.load_from_disk(\"<this folder>\")` (a DatasetDict",
        "with `train` and `validation`); the tokenizer is in `tokenizer/` (Hugging Face form). Columns:",
        "`input_ids` (int32), `loss_mask` (int8, 1 where the token is a training target), `position_ids` (int32,",
        "restarting at 0 at every document or sample start: attention should stay within a segment)"
        + (", and `completion_mask`, the loss mask under trl's name (`SFTConfig(completion_only_loss=True)`)."
           if kind == "sft" else "."),
        "",
        "## Sources",
        "",
        "| source | read | kept | tokens kept | tokens in the mix | share |",
        "|---|---|---|---|---|---|",
    ]
    for source in stats["sources"]:
        share = f"{source['share_of_mix']:.3f}" if source.get("share_of_mix") is not None else ""
        lines.append(
            f"| `{source['source']}` | {source['read']} | {source['kept']} | {source['tokens_kept']} | "
            f"{source['tokens_in_mix']} | {share} |"
        )
    lines += ["", "## Dropped rows (details in `exclusions.jsonl`)", "", "| reason | rows |", "|---|---|"]
    drops = stats["drops_by_reason"] or {"(none)": 0}
    lines += [f"| {reason} | {count} |" for reason, count in drops.items()]
    cleaning = stats["cleaning"]
    lines += [
        "",
        "## Cleaning and tokenizer",
        "",
        f"- Normalization: {cleaning['normalization']}.",
        f"- Exact dedup on case-folded words: {'on' if cleaning['exact_dedup'] else 'off'}.",
        f"- Near dedup: {'MinHash LSH, Jaccard >= ' + str(cleaning['minhash_threshold']) + ', word ' + str(cleaning['shingle_words']) + '-gram shingles, ' + str(cleaning['minhash_permutations']) + ' permutations' if cleaning['near_dedup'] else 'off'}.",
        f"- Tokenizer: {stats['tokenizer']['origin']} ({stats['tokenizer']['vocab_size']} tokens).",
        f"- Seed (validation split, mixing, dedup permutations): {stats['seed']}.",
        "",
        "## Licence and versions",
        "",
        "Rows synthesized by trex are released under Apache-2.0, the project's licence; rows from",
        "other sources (the table above) keep their own licences. Built with "
        + ", ".join(f"{name} {version}" for name, version in stats["versions"].items()) + ".",
    ]
    lines += ["", "## Lengths", "", f"See `{stats['histogram']}`.", "", "```json",
              json.dumps(stats["lengths"], indent=2), "```", ""]
    if stats.get("decontamination"):
        lines += ["## Decontamination", "", f"Word {stats['decontamination']['ngram']}-gram overlap against:", ""]
        lines += [f"- `{name}` ({count} items)" for name, count in stats["decontamination"]["benchmarks"].items()]
        lines.append("")
    write_text_atomic(Path(folder) / "README.md", "\n".join(lines))


def _yaml(value, indent: int = 0) -> list[str]:
    """A small YAML writer for the card's front matter (dicts, lists of scalars, scalars)."""
    pad = "  " * indent
    lines = []
    for key, item in value.items():
        if isinstance(item, dict):
            lines.append(f"{pad}{key}:")
            lines += _yaml(item, indent + 1)
        elif isinstance(item, list):
            lines.append(f"{pad}{key}:")
            lines += [f"{pad}- {json.dumps(element)}" for element in item]
        else:
            lines.append(f"{pad}{key}: {json.dumps(item)}")
    return lines
