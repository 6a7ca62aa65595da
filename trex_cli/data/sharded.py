"""`trex data cpt` as sharded tasks on an executor (`[run.executor]`, `--executor`, `--tasks`).

The one-process build (`trex_cli.data.cpt`) streams; this one spreads the per-document work over tasks that
datatrove's executors run (this machine's process pool, a Slurm array, Ray), and gives the same dataset, row
for row, with the same exclusion file and stats. The work is split by *units*: the files of the sources
(`readers.document_units`; a Hub dataset or a saved table is one unit), `k, k + T, k + 2T, ...` to task k.

1. **clean** (tasks): read a unit, normalize, drop empty documents and benchmark overlaps (decontamination),
   and for every other document compute the exact-dedup digest and the MinHash signature (the costly part of
   near dedup). Each unit's results are written whole, atomically, to `units/<k>/`: the documents' ids and
   verdicts, the digests, the signatures and the texts.
2. **dedup** (this process): one pass over the units in read order decides duplicates from the digests and
   the signatures' LSH band keys (`BandedDeduplicator.decide`), so the first copy of a document wins exactly as
   in one process; it reads a few bytes per document and a signature per candidate, never a text.
3. **tokenizer** (this process, unless one is given): trained on the kept texts in read order, as in one
   process.
4. **tokenize** (tasks): a unit's kept texts to a token file.
5. **split, mix, pack** (this process): `cpt.finish_cpt`, over all units' token files at once.

A unit's files and each task's completion marker survive an interruption: the same command skips the
finished units (and tasks). The scratch folder (`.<out>.shards-<digest of the settings>/`, beside `out`) is
removed when the build finishes. docs/executors.md shows the commands.
"""

from __future__ import annotations

import array
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trex_cli.artifacts import StageState, write_text_atomic
from trex_cli.data import build
from trex_cli.data.cleaning import deduplicator_settings
from trex_cli.data.config import DataConfig, SourceSpec
from trex_cli.data.cpt import Corpus, TokenStore, batches, finish_cpt, spilled_texts, tokenize_to_file
from trex_cli.data.decontaminate import BenchmarkIndex
from trex_cli.data.dedup import BandedDeduplicator, Deduplicator, exact_digest
from trex_cli.data.exclusions import ExclusionLog
from trex_cli.data.normalize import WordHasher, normalize_text
from trex_cli.data.readers import BadInput, Unit, document_units, unit_documents

_DIGEST = 16  # bytes of an exact-dedup digest


@dataclass
class ShardPlan:
    """What every task of a sharded build needs: the settings, the sources and their units, the folders."""

    config: DataConfig
    sources: list[SourceSpec]
    units: list[Unit]
    work: Path  # the scratch folder
    out: Path

    def unit_folder(self, number: int) -> Path:
        return self.work / "units" / f"{number:05d}"

    def source_of(self, unit: Unit) -> SourceSpec:
        return next(source for source in self.sources if source.path == unit.source)


def scratch_folder(out: Path, fingerprint: dict) -> Path:
    """The scratch folder of a sharded build of `out` with these settings and inputs: a rerun of the same
    command finds it, a changed one starts afresh."""
    digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:12]
    out = Path(out).resolve()
    return out.parent / f".{out.name}.shards-{digest}"


def document_items(plan: ShardPlan, unit: Unit, bad: BadInput) -> Iterator[tuple[str, str, str | None, str]]:
    """A CPT unit's items for `CleanTask`: (id, origin, normalized text, what to keep of it: the text)."""
    for document in unit_documents(plan.source_of(unit), unit, bad):
        text = normalize_text(document.text)
        yield document.id, document.origin, text, text


class CleanTask:
    """Phase 1 as an executor's pipeline step (a callable `(data, rank, world_size)`): task `rank` reads and
    cleans units `rank, rank + world_size, ...`; a unit whose folder exists is skipped. A bad input line
    (without `skip_bad`) stops the task with the reader's message, which is also written to
    `errors/<rank>.txt` for the launching process to show.

    `items(plan, unit, bad)` yields a unit's (id, origin, normalized text, payload): the text is what
    cleaning compares (None: the item is not selected, e.g. by SFT's stage), the payload what a kept item
    keeps for the later phases (CPT: the text; SFT: the conversation as JSON). A module-level function, so
    the task pickles for Slurm and Ray."""

    def __init__(self, plan: ShardPlan, items=document_items) -> None:
        self.plan = plan
        self.items = items

    def __call__(self, data=None, rank: int = 0, world_size: int = 1):
        plan = self.plan
        todo = [k for k in range(rank, len(plan.units), world_size) if not plan.unit_folder(k).is_dir()]
        if not todo:
            return data
        config = plan.config
        hasher = WordHasher()
        benchmarks = (BenchmarkIndex(config.decontaminate, config.decontaminate_ngram, hasher)
                      if config.decontaminate else None)
        signer = Deduplicator(**{**deduplicator_settings(config), "exact": False})  # signatures only
        with reporting_errors(plan.work, rank):
            for number in todo:
                _clean_unit(plan, number, self.items, hasher, benchmarks, signer)
        return data


def _clean_unit(plan: ShardPlan, number: int, items, hasher: WordHasher, benchmarks, signer: Deduplicator) -> None:
    config = plan.config
    unit = plan.units[number]
    staging = plan.unit_folder(number).with_name(f".{number:05d}.{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    bad_log = ExclusionLog()
    bad = BadInput(bad_log, config.skip_bad)
    with open(staging / "texts.bin", "wb") as payloads, open(staging / "digests.bin", "wb") as digests, \
            open(staging / "signatures.u64", "wb") as signatures, \
            open(staging / "documents.jsonl", "w", encoding="utf-8") as verdicts:
        for item_id, origin, text, payload in items(plan, unit, bad):
            if text is None:
                verdict = [item_id, origin, "not_selected"]
            elif len(word_hashes := hasher(text)) == 0:
                verdict = [item_id, origin, "empty"]
            elif benchmarks is not None and (hit := benchmarks.find(text, word_hashes)) is not None:
                verdict = [item_id, origin, "benchmark", hit.benchmark, hit.item_id, hit.ngram]
            else:
                verdict = [item_id, origin, "ok"]
                encoded = payload.encode("utf-8")
                payloads.write(len(encoded).to_bytes(8, "little"))
                payloads.write(encoded)
                if config.exact_dedup:
                    digests.write(exact_digest(word_hashes))
                if config.near_dedup:
                    signatures.write(signer.signature(word_hashes).tobytes())
            verdicts.write(json.dumps(verdict, ensure_ascii=False) + "\n")
    (staging / "bad_input.json").write_text(json.dumps(bad_log.rows, ensure_ascii=False, default=str))
    os.replace(staging, plan.unit_folder(number))  # the unit appears whole or not at all


class TokenizeTask:
    """Phase 4 as a pipeline step: task `rank` tokenizes the kept texts of units `rank, rank + world_size,
    ...` with the build's tokenizer (`out/tokenizer`) into `units/<k>/tokens.i32` and `offsets.npy` (written
    last: a unit with its offsets is done)."""

    def __init__(self, plan: ShardPlan) -> None:
        self.plan = plan

    def __call__(self, data=None, rank: int = 0, world_size: int = 1):
        from trex_cli.data.tokenizer import load_tokenizer

        plan = self.plan
        todo = [k for k in range(rank, len(plan.units), world_size)
                if not (plan.unit_folder(k) / "offsets.npy").is_file()]
        if not todo:
            return data
        tokenizer = load_tokenizer(plan.out / "tokenizer")
        with reporting_errors(plan.work, rank):
            for number in todo:
                folder = plan.unit_folder(number)
                kept = np.load(folder / "kept.npy")
                texts = (text for text, keep in zip(spilled_texts(folder / "texts.bin"), kept, strict=True) if keep)
                partial = folder / f".tokens.{os.getpid()}"
                offsets = tokenize_to_file(tokenizer, batches(texts, 512), int(kept.sum()), partial)
                os.replace(partial, folder / "tokens.i32")
                np.save(folder / ".offsets.npy", offsets)
                os.replace(folder / ".offsets.npy", folder / "offsets.npy")
        return data


class reporting_errors:
    """In a task: an error's message goes to `errors/<rank>.txt` before the task fails with it."""

    def __init__(self, work: Path, rank: int) -> None:
        self.path = Path(work) / "errors" / f"{rank:05d}.txt"

    def __enter__(self):
        self.path.unlink(missing_ok=True)
        return self

    def __exit__(self, kind, error, _traceback):
        if error is not None and isinstance(error, ValueError | FileNotFoundError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self.path, str(error))
        return False


def run_phase(name: str, task, plan: ShardPlan, settings, dry_run: bool = False):
    """Run one phase's task on the executor `settings` (None: in this process, as one task); a task that
    failed on bad input raises its message here. `dry_run` (Slurm) writes the phase's submission and returns
    its script without running anything."""
    from trex_cli.executors import run_pipeline

    if settings is None:
        task(None, 0, 1)
        return None
    tasks = min(settings.tasks, len(plan.units))
    try:
        run = run_pipeline([task], tasks=tasks, logging_dir=plan.work / "executor" / name, settings=settings,
                           dry_run=dry_run)
    except RuntimeError:
        reports = sorted((plan.work / "errors").glob("*.txt")) if (plan.work / "errors").is_dir() else []
        if reports:
            raise ValueError(reports[0].read_text()) from None
        raise
    return run.launch_script if dry_run else None


def build_cpt_sharded(config: DataConfig, plan_: build.BuildPlan, out: Path, settings, started: float,
                      show_progress: bool, save_recipe, dry_run: bool = False) -> dict | Path:
    """The sharded CPT build of `plan_` into `out` on the executor `settings`; see the module docstring.
    `dry_run` (Slurm): write the clean phase's submission and return its script, running nothing."""
    from trex_cli.data.tokenizer import load_resumed, load_tokenizer, train_tokenizer

    sources, tokenizer_path, folder = plan_.sources, plan_.tokenizer_path, plan_.folder
    units = [unit for source in sources for unit in document_units(source)]
    if not units:
        raise ValueError(f"the sources ({', '.join(s.path for s in sources)}) hold no files to read; check them")
    work = scratch_folder(out, folder.config)
    work.mkdir(parents=True, exist_ok=True)
    plan = ShardPlan(config, sources, units, work, Path(out).resolve())
    if dry_run:
        return run_phase("clean", CleanTask(plan), plan, settings, dry_run=True)
    phase = build.PhaseTimer()
    with build.progress_bar(show_progress) as progress:
        bar = progress.add_task(f"cleaning {len(units)} files in {min(settings.tasks, len(units))} tasks", total=1)
        with phase("read+clean"):
            run_phase("clean", CleanTask(plan), plan, settings)
        progress.advance(bar)
        with phase("dedup"):
            decisions = decide_duplicates(plan)
        exclusions, read_counts, source_numbers = decisions.exclusions, decisions.read_counts, decisions.kept_sources
        kept = len(source_numbers)
        if kept == 0:
            raise ValueError(f"no documents left after cleaning ({sum(read_counts.values())} read; dropped: "
                             f"{exclusions.by_reason()}); check the sources and exclusions")
        state = folder.prepare()
        with phase("tokenizer"):
            saved = plan.out / "tokenizer"
            tokenizer = load_tokenizer(tokenizer_path) if tokenizer_path is not None else None
            if tokenizer is None and state is StageState.RESUME and (saved / "tokenizer.json").is_file():
                tokenizer = load_resumed(saved)
            elif tokenizer is None:
                tokenizer = train_tokenizer(_kept_texts(plan), config.vocab_size)
            tokenizer.save(saved)
        bar = progress.add_task("tokenizing", total=1)
        with phase("tokenize"):
            run_phase("tokenize", TokenizeTask(plan), plan, settings)
        progress.advance(bar)
        folders = [plan.unit_folder(k) for k in range(len(units))]
        tokens = TokenStore([f / "tokens.i32" for f in folders], [np.load(f / "offsets.npy") for f in folders])
        benchmarks = (BenchmarkIndex(config.decontaminate, config.decontaminate_ngram, WordHasher()).item_counts
                      if config.decontaminate else None)
        corpus = Corpus(tokens, source_numbers, read_counts, exclusions, tokenizer, benchmarks)
        stats = finish_cpt(config, plan.out, sources, folder, corpus, phase, progress, started, save_recipe)
    shutil.rmtree(work, ignore_errors=True)
    return stats


@dataclass
class Decisions:
    """Phase 2's result: the exclusions (bad input first, then the cleaning drops, as one process lists
    them), items read and items not selected (SFT's stage filter) per source, and the source number of every
    kept item in read order."""

    exclusions: ExclusionLog
    read_counts: dict[str, int]
    not_selected: dict[str, int]
    kept_sources: np.ndarray


def decide_duplicates(plan: ShardPlan) -> Decisions:
    """Phase 2: every unit's verdicts in read order, duplicates decided as one process decides them; writes
    each unit's `kept.npy` (one flag per item that reached dedup)."""
    config = plan.config
    source_number = {source.path: number for number, source in enumerate(plan.sources)}
    exclusions, cleaning = ExclusionLog(), ExclusionLog()
    read_counts = {source.path: 0 for source in plan.sources}
    not_selected = {source.path: 0 for source in plan.sources}
    kept_sources = array.array("H")
    width = config.minhash_permutations * 8
    deduplicator = BandedDeduplicator(plan.work, **deduplicator_settings(config))
    try:
        for number, unit in enumerate(plan.units):
            folder = plan.unit_folder(number)
            for row in json.loads((folder / "bad_input.json").read_text()):
                exclusions.add(row.pop("reason"), **row)
            keep = []
            with open(folder / "digests.bin", "rb") as digests, open(folder / "signatures.u64", "rb") as signatures:
                for line in (folder / "documents.jsonl").read_text(encoding="utf-8").splitlines():
                    item_id, origin, verdict, *hit = json.loads(line)
                    read_counts[unit.source] += 1
                    where = {"source": unit.source, "id": item_id, "where": origin}
                    if verdict == "not_selected":
                        not_selected[unit.source] += 1
                        continue
                    if verdict == "empty":
                        cleaning.add("empty", **where)
                        continue
                    if verdict == "benchmark":
                        cleaning.add("benchmark_overlap", **where, benchmark=hit[0], item=hit[1], ngram=hit[2])
                        continue
                    digest = digests.read(_DIGEST) if config.exact_dedup else None
                    signature = (np.frombuffer(signatures.read(width), dtype=np.uint64)
                                 if config.near_dedup else None)
                    duplicate = deduplicator.decide(item_id, digest, signature)
                    if duplicate is not None:
                        cleaning.add(duplicate.reason, **where, duplicate_of=duplicate.duplicate_of,
                                     similarity=duplicate.similarity)
                    keep.append(duplicate is None)
            mask = np.asarray(keep, dtype=bool)
            np.save(folder / ".kept.npy", mask)
            os.replace(folder / ".kept.npy", folder / "kept.npy")
            kept_sources.extend([source_number[unit.source]] * int(mask.sum()))
    finally:
        deduplicator.close()
    exclusions.rows.extend(cleaning.rows)
    exclusions.counts.update(cleaning.counts)
    return Decisions(exclusions, read_counts, not_selected, np.frombuffer(kept_sources, dtype=np.uint16).copy())


def _kept_texts(plan: ShardPlan) -> Iterator[str]:
    """The kept texts of every unit, in read order (what one process trains its tokenizer on)."""
    for number in range(len(plan.units)):
        folder = plan.unit_folder(number)
        kept = np.load(folder / "kept.npy")
        for text, keep in zip(spilled_texts(folder / "texts.bin"), kept, strict=True):
            if keep:
                yield text

