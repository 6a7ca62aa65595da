"""The recipe's `[data]` table: what goes into the CPT and SFT datasets and how it is cleaned.

```toml
[data]
tokenizer = ""            # a model folder with tokenizer.json; "" trains a byte-level BPE
vocab_size = 2048         # size of the trained tokenizer
decontaminate = []        # benchmark files (JSON, JSON Lines, B4O, trex eval split)
[data.cpt]
sources = [{ path = "runs/tiny-cpu/synth", share = 0.8 }, { path = "corpora/general.jsonl", share = 0.2 }]
seq_len = 1024
[data.sft]
stage = "all"             # "program": the program-only subset, stage one of two-stage SFT
```

A source with no `share` is used once as it is; when any source of a dataset names a share, every
source must, and the shares are normalized to sum to 1.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

# the record fields a source's `columns` can map to its own column names (see readers.py)
RECORD_FIELDS = ("text", "id", "messages", "conversations", "prompt", "completion", "instruction", "input",
                 "output", "system")


@dataclass
class SourceSpec:
    """One input: a synth folder, a folder of resources (.md, .txt, .jsonl, .mps, .lp), a JSONL, JSON,
    Parquet or CSV file, a folder saved by `datasets.save_to_disk`, or a Hugging Face Hub id (`owner/name`,
    or `hub:ID`, which also reads a local folder of data files the way `datasets.load_dataset` does);
    `share` is its share of the tokens.

    ```toml
    { path = "hub:tatsu-lab/alpaca", share = 0.2 }
    { path = "corpora/chats.parquet", format = "sharegpt", columns = { conversations = "dialog" } }
    ```
    """

    path: str = ""
    share: float | None = None
    # the records' format; "auto" recognizes each record by its columns (text for CPT; messages,
    # conversations, prompt + completion or instruction + output for SFT)
    format: Literal["auto", "text", "messages", "sharegpt", "alpaca", "prompt_completion"] = "auto"
    columns: dict[str, str] = field(default_factory=dict)  # trex's field -> this source's column
    split: str = "train"  # of a Hub dataset, a saved DatasetDict or a folder of data files
    subset: str = ""  # a Hub dataset's configuration name
    revision: str = ""  # a Hub dataset's branch, tag or commit

    def __post_init__(self) -> None:
        unknown = sorted(set(self.columns) - set(RECORD_FIELDS))
        if unknown:
            raise ValueError(
                f"data source {self.path}: columns maps unknown fields {unknown}; map any of "
                f"{', '.join(RECORD_FIELDS)} to the source's column names"
            )

    def settings(self) -> dict:
        """The settings that decide what is read: path and share, and the others where not default."""
        defaults = SourceSpec()
        return {
            key: value for key, value in dataclasses.asdict(self).items()
            if key in ("path", "share") or value != getattr(defaults, key)
        }

    @classmethod
    def parse(cls, text: str) -> SourceSpec:
        """`PATH` or `PATH=SHARE`, the form of the `--source` flag."""
        path, share = text, None
        if "=" in text:
            head, tail = text.rsplit("=", 1)
            try:
                share = float(tail)
            except ValueError:
                raise ValueError(
                    f"--source {text!r}: the share after '=' must be a number, e.g. --source corpus.jsonl=0.2"
                ) from None
            path = head
        if not path:
            raise ValueError(f"--source {text!r}: give a path, e.g. --source runs/tiny-cpu/synth=0.8")
        return cls(path=path, share=share)


@dataclass
class CptSection:
    """`[data.cpt]`: continued-pretraining documents, packed into rows of exactly `seq_len` tokens."""

    sources: list[SourceSpec] = field(default_factory=list)  # empty: the run's synth folder
    seq_len: int = 1024
    # 0: the mixed total equals the tokens available after cleaning; else this many tokens
    total_tokens: int = 0
    out: str = ""  # default: <run_dir>/data/cpt


@dataclass
class SftSection:
    """`[data.sft]`: chat samples with loss on assistant tokens only."""

    sources: list[SourceSpec] = field(default_factory=list)  # empty: the run's synth folder
    seq_len: int = 2048
    packing: bool = False  # several samples per row (rows of exactly seq_len), boundaries kept
    # "program": only samples whose answer is a program (stage one of T-Rex's two-stage SFT);
    # replay samples without an answer style stay in both stages
    stage: Literal["all", "program"] = "all"
    total_tokens: int = 0
    out: str = ""  # default: <run_dir>/data/sft, or data/sft-program for stage "program"


@dataclass
class DataConfig:
    """The `[data]` table."""

    tokenizer: str = ""  # model folder with tokenizer.json; "" trains a byte-level BPE (SFT: reuses CPT's)
    vocab_size: int = 2048
    decontaminate: list[str] = field(default_factory=list)
    decontaminate_ngram: int = 13
    exact_dedup: bool = True
    near_dedup: bool = True
    minhash_threshold: float = 0.8
    minhash_permutations: int = 128
    shingle_words: int = 5
    validation_share: float = 0.05
    max_upsample: float = 4.0  # no source is repeated more than this many times to reach its share
    skip_bad: bool = False  # count malformed input lines into exclusions.jsonl instead of stopping
    seed: int = 0
    cpt: CptSection = field(default_factory=CptSection)
    sft: SftSection = field(default_factory=SftSection)

    def __post_init__(self) -> None:
        checks = [
            (self.vocab_size >= 300, "data.vocab_size must be at least 300 (256 bytes + special tokens)"),
            (0.0 < self.minhash_threshold <= 1.0, "data.minhash_threshold must be in (0, 1]"),
            (self.minhash_permutations >= 16, "data.minhash_permutations must be at least 16"),
            (self.shingle_words >= 1, "data.shingle_words must be at least 1"),
            (self.decontaminate_ngram >= 1, "data.decontaminate_ngram must be at least 1"),
            (0.0 <= self.validation_share < 1.0, "data.validation_share must be in [0, 1)"),
            (self.max_upsample >= 1.0, "data.max_upsample must be at least 1"),
            (self.cpt.seq_len >= 8, "data.cpt.seq_len must be at least 8"),
            (self.sft.seq_len >= 8, "data.sft.seq_len must be at least 8"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        for section in (self.cpt, self.sft):
            for source in section.sources:
                if source.share is not None and source.share <= 0:
                    raise ValueError(f"data source {source.path}: share must be positive, got {source.share}")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
