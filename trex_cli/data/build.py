"""What the CPT and SFT builds (`trex data cpt`, `trex data sft`) share: resolving sources, the stage
folder and its fingerprint (`plan_build`), the validation split, phase timing, progress display."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from trex_cli.artifacts import StageFolder, StageState, read_manifest
from trex_cli.data.config import DataConfig, SourceSpec
from trex_cli.data.readers import hub_id, source_kind

TRANSFORM_VERSION = 2  # bump when a change to the build changes its output for the same inputs


@dataclasses.dataclass
class BuildPlan:
    """A build before it starts: its settings (defaults filled in), sources, tokenizer and stage folder."""

    config: DataConfig
    sources: list[SourceSpec]
    tokenizer_path: Path | None
    folder: StageFolder


def plan_build(config: DataConfig, kind: str, out: Path, run_dir: Path, force: bool = False) -> BuildPlan:
    """The `kind` ("cpt" or "sft") build of `config` into `out`. Without sources it reads the run's synth
    folder; SFT without a tokenizer reuses the run's CPT tokenizer when there is one. Reads only file
    metadata (signatures), so `trex run` can ask a build's fingerprint without building."""
    from trex_cli.run_layout import RunLayout

    defaults = RunLayout.at(run_dir)
    if kind == "sft" and not config.tokenizer:
        cpt_tokenizer = (Path(config.cpt.out) if config.cpt.out else defaults.data_cpt) / "tokenizer"
        if (cpt_tokenizer / "tokenizer.json").is_file():
            config = dataclasses.replace(config, tokenizer=str(cpt_tokenizer))
    sources = resolve_sources(getattr(config, kind).sources, defaults.synth)
    tokenizer_path = Path(config.tokenizer) if config.tokenizer else None
    extra_inputs = []
    if tokenizer_path is not None:
        if not (tokenizer_path / "tokenizer.json").is_file():  # a tokenizer, not a data source: say which
            raise FileNotFoundError(
                f"--tokenizer {tokenizer_path} ([data] tokenizer): no tokenizer.json there; name a folder "
                "holding tokenizer.json (a model folder, or a trex data folder's tokenizer/), or pass "
                "--train-tokenizer N to train one"
            )
        # a trex CPT data folder's tokenizer: track that folder's manifest, else the files
        in_data_folder = (tokenizer_path.parent / "meta.json").is_file()
        extra_inputs = [tokenizer_path.parent if in_data_folder else tokenizer_path]
    stage_inputs, signatures = stage_inputs_and_signature(sources, config, extra_inputs)
    folder = StageFolder(
        out, f"data-{kind}", fingerprint_config(config, kind, sources, signatures), inputs=stage_inputs, force=force
    )
    return BuildPlan(config, sources, tokenizer_path, folder)


def resolve_sources(sources: list[SourceSpec], default: Path) -> list[SourceSpec]:
    """The sources to read: the given ones, or the `default` synth folder; duplicates are an error."""
    if not sources:
        if not default.exists():
            raise FileNotFoundError(
                f"no data sources given and {default} does not exist; run `trex synth` first or pass --source PATH"
            )
        sources = [SourceSpec(path=str(default))]
    seen = set()
    for source in sources:
        key = str(Path(source.path).resolve())
        if key in seen:
            raise ValueError(f"data source {source.path} is named twice; name each source once")
        seen.add(key)
    return sources


def _file_signature(path: Path) -> list:
    """Names, sizes and modification times of a non-stage input: a change to it re-runs the build."""
    if path.is_file():
        stat = path.stat()
        return [[path.name, stat.st_size, stat.st_mtime_ns]]
    entries = []
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = file.stat()
        entries.append([str(file.relative_to(path)), stat.st_size, stat.st_mtime_ns])
    return entries


def stage_inputs_and_signature(
    sources: list[SourceSpec], config: DataConfig, extra_paths: list[Path]
) -> tuple[list[Path], dict]:
    """Stage folders among the inputs (tracked by manifest lineage) and signatures of the rest."""
    stage_inputs: list[Path] = []
    signatures: dict[str, list] = {}
    for name in [s.path for s in sources] + [str(p) for p in extra_paths]:
        identifier = hub_id(name)
        if identifier is not None:
            if Path(identifier).exists():  # a local folder read the Hub way
                signatures[name] = _file_signature(Path(identifier))
            # a Hub id is decided by its id, split, subset and revision (pin `revision` to rebuild on change)
            continue
        path = Path(name)
        if path.is_dir() and (path / "manifest.json").is_file():
            stage_inputs.append(path)
        elif source_kind(path) == "synth":
            read_manifest(path, "synth")  # refuses an unfinished synth folder, naming the fix
        else:
            signatures[str(path)] = _file_signature(path)
    for benchmark in config.decontaminate:
        if Path(benchmark).exists():
            signatures[benchmark] = _file_signature(Path(benchmark))
    return stage_inputs, signatures


def fingerprint_config(config: DataConfig, kind: str, sources: list[SourceSpec], signatures: dict) -> dict:
    settings = dataclasses.asdict(config)
    other = "sft" if kind == "cpt" else "cpt"
    settings.pop(other)
    # a build that succeeds without --skip-bad had nothing to skip: the flag never changes an output
    settings.pop("skip_bad")
    settings[kind]["sources"] = [s.settings() for s in sources]
    return {"data": settings, "input_files": signatures, "transform_version": TRANSFORM_VERSION}


def cleaning_settings(config: DataConfig) -> dict:
    """The cleaning knobs, as the stats and the dataset card report them."""
    return {
        "normalization": "NFC, Unix newlines, no trailing spaces, at most one blank line in a row",
        "exact_dedup": config.exact_dedup,
        "near_dedup": config.near_dedup,
        "minhash_threshold": config.minhash_threshold,
        "minhash_permutations": config.minhash_permutations,
        "shingle_words": config.shingle_words,
        "decontaminate_ngram": config.decontaminate_ngram,
    }


def finished_already(folder: StageFolder) -> bool:
    """True when `folder` holds a finished build with the same settings and inputs (a mismatch is
    an error asking for --force). Builds call this first and `prepare()` only after their inputs
    were read, so a bad input line stops the build before the output folder is touched."""
    if folder.force or not folder.manifest_path.is_file():
        return False
    return folder.prepare() is StageState.DONE


def split_validation(
    lengths: np.ndarray, share: float, minimum_tokens: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) item indices: a random `share` of the tokens goes to validation, at least
    `minimum_tokens` (one row) when the data allows; none when the data is too small for two rows."""
    count = len(lengths)
    if share <= 0 or count < 2:
        return np.arange(count), np.zeros(0, dtype=np.int64)
    total = int(lengths.sum())
    target = max(share * total, minimum_tokens)
    if total - target < minimum_tokens:
        return np.arange(count), np.zeros(0, dtype=np.int64)
    order = rng.permutation(count)
    cumulative = np.cumsum(lengths[order])
    take = min(int(np.searchsorted(cumulative, target, side="left")) + 1, count - 1)
    return np.sort(order[take:]), np.sort(order[:take])


class PhaseTimer:
    """Wall seconds per build phase, reported in stats.json (where the time went)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - started, 3)


@contextlib.contextmanager
def progress_bar(enabled: bool) -> Iterator:
    """A rich progress display on stderr (transient, so the summary table stays clean)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from trex_cli.console import err

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not enabled,
    ) as progress:
        yield progress
