"""`trex data cpt`: documents -> cleaned -> tokenized -> mixed by token shares -> packed rows.

Each document becomes `[bos] + tokens + [eos]` (no bos when the tokenizer has none). Documents are
split into train and validation before mixing (so no document is in both), mixed by token shares,
shuffled, concatenated and cut into rows of exactly `seq_len` tokens; the tail that does not fill a
row is dropped and counted. `position_ids` restart at 0 at every document start and at every row
start (a document cut by a row boundary continues in the next row from position 0), so the trainer
can keep attention inside a document; `loss_mask` is 0 exactly where `position_ids` is 0, since those
tokens have no earlier token of their document to be predicted from.

The build streams (see `build_cpt`): memory follows the document count (tens of bytes to a few
hundred per document: token counts, source numbers, dedup digests and band keys), not the corpus;
texts, signatures and tokens wait in scratch files beside the output folder, removed at the end.
"""

from __future__ import annotations

import array
import dataclasses
import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from trex_cli.artifacts import StageState, write_json_atomic
from trex_cli.data import build, dataset_card
from trex_cli.data.cleaning import clean_streaming
from trex_cli.data.config import DataConfig
from trex_cli.data.decontaminate import BenchmarkIndex
from trex_cli.data.exclusions import ExclusionLog
from trex_cli.data.mixing import mix_by_shares
from trex_cli.data.normalize import WordHasher, normalize_text
from trex_cli.data.readers import BadInput, Document, iter_documents
from trex_cli.data.shards import RowWriter, write_dataset_dict
from trex_cli.data.tokenizer import load_resumed, load_tokenizer, train_tokenizer

CHUNK_TOKENS = 1 << 23  # tokens per packed chunk: about 100 MB of row arrays at a time


def _timed(phase: build.PhaseTimer, name: str, chunks: Iterator) -> Iterator:
    """`chunks`, with the time spent making each one counted under `name`."""
    while True:
        with phase(name):
            chunk = next(chunks, None)
        if chunk is None:
            return
        yield chunk


def pack_documents(
    documents: list[np.ndarray], order: np.ndarray, seq_len: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Concatenate `documents[i] for i in order` and cut into rows of `seq_len` tokens.

    Returns (input_ids, position_ids, loss_mask), each of shape (rows, seq_len), and the number of
    tail tokens that did not fill a row."""
    if len(order) == 0:
        empty = np.zeros((0, seq_len), dtype=np.int32)
        return empty, empty.copy(), empty.astype(np.int8), 0
    lengths = np.fromiter((len(documents[i]) for i in order), dtype=np.int64, count=len(order))
    flat = np.concatenate([documents[i] for i in order]).astype(np.int32, copy=False)
    rows = len(flat) // seq_len
    used = rows * seq_len
    document_starts = np.cumsum(lengths) - lengths
    positions = np.arange(len(flat), dtype=np.int64) - np.repeat(document_starts, lengths)
    document_of_token = np.repeat(np.arange(len(order)), lengths)
    input_ids = flat[:used].reshape(rows, seq_len)
    positions = positions[:used].reshape(rows, seq_len)
    document_of_token = document_of_token[:used].reshape(rows, seq_len)
    # a document that began in an earlier row restarts at 0 at this row's start
    continues = document_of_token == document_of_token[:, :1]
    positions = np.where(continues, positions - positions[:, :1], positions).astype(np.int32)
    loss_mask = (positions != 0).astype(np.int8)
    return input_ids, positions, loss_mask, len(flat) - used


def pack_in_chunks(
    lengths: np.ndarray,
    order: np.ndarray,
    seq_len: int,
    read_tokens: Callable[[int, int, int], np.ndarray],
    rows_per_chunk: int,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """`pack_documents`' rows, `rows_per_chunk` at a time, reading only the tokens each chunk needs:
    `read_tokens(document, start, stop)` gives tokens `[start, stop)` of a document whose length is
    `lengths[document]`. Rows are cut and positioned exactly as `pack_documents` cuts them: a chunk
    starts at a row start, where a document that began earlier restarts at position 0 anyway."""
    ordered_lengths = lengths[order].astype(np.int64)
    ends = np.cumsum(ordered_lengths)
    rows = int(ends[-1]) // seq_len if len(ends) else 0
    for first_row in range(0, rows, rows_per_chunk):
        last_row = min(rows, first_row + rows_per_chunk)
        begin, end = first_row * seq_len, last_row * seq_len
        first = int(np.searchsorted(ends, begin, side="right"))  # the document holding token `begin`
        last = int(np.searchsorted(ends, end, side="left"))  # ... and token `end - 1`
        tokens, positions, documents = [], [], []
        for k in range(first, last + 1):
            start_of_document = int(ends[k] - ordered_lengths[k])
            lo, hi = max(begin, start_of_document) - start_of_document, min(end, int(ends[k])) - start_of_document
            tokens.append(read_tokens(int(order[k]), lo, hi))
            positions.append(np.arange(lo, hi, dtype=np.int64))
            documents.append(np.full(hi - lo, k, dtype=np.int64))
        count = last_row - first_row
        input_ids = np.concatenate(tokens).astype(np.int32, copy=False).reshape(count, seq_len)
        position = np.concatenate(positions).reshape(count, seq_len)
        document_of_token = np.concatenate(documents).reshape(count, seq_len)
        continues = document_of_token == document_of_token[:, :1]
        position = np.where(continues, position - position[:, :1], position).astype(np.int32)
        yield input_ids, position, (position != 0).astype(np.int8)


def tail_tokens(lengths: np.ndarray, order: np.ndarray, seq_len: int) -> int:
    """The tokens of the ordered documents that do not fill a last row."""
    return int(lengths[order].sum()) % seq_len if len(order) else 0


def spilled_texts(path: Path) -> Iterator[str]:
    """The texts of a spill file (8-byte length, UTF-8 bytes, repeated), in order."""
    with open(path, "rb", buffering=1 << 20) as stream:
        while header := stream.read(8):
            yield stream.read(int.from_bytes(header, "little")).decode("utf-8")


def batches(texts: Iterator[str], size: int) -> Iterator[list[str]]:
    """`texts` in lists of `size` (the last one shorter)."""
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class TextSpill:
    """The kept documents' stored texts in one file (8-byte length, UTF-8 bytes), written once while
    cleaning streams and read back in order as often as needed (tokenizer training, tokenizing)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.count = 0
        self._file = open(self.path, "wb")  # noqa: SIM115 - closed by close()

    def add(self, text: str) -> None:
        data = text.encode("utf-8")
        self._file.write(len(data).to_bytes(8, "little"))
        self._file.write(data)
        self.count += 1

    def close(self) -> None:
        self._file.close()

    def __iter__(self) -> Iterator[str]:
        return spilled_texts(self.path)

    def batches(self, size: int) -> Iterator[list[str]]:
        return batches(iter(self), size)


def tokenize_to_file(tokenizer, text_batches: Iterable[list[str]], count: int, path: Path) -> np.ndarray:
    """`[bos] + ids + [eos]` of every text (`count` of them, in batches) appended to `path` as int32;
    returns the int64 offsets (document i is tokens `[offsets[i], offsets[i+1])`). Batches are small:
    the tokenizer returns Python lists, about 36 bytes per token while a batch is in flight."""
    bos = tokenizer.bos_token_id
    extra = 1 if bos is None else 2
    offsets = np.zeros(count + 1, dtype=np.int64)
    done = 0
    with open(path, "wb") as stream:
        for texts in text_batches:
            encoded = tokenizer.encode_many(texts)
            lengths = np.fromiter((len(ids) + extra for ids in encoded), dtype=np.int64, count=len(encoded))
            ends = np.cumsum(lengths)
            flat = np.empty(int(ends[-1]), dtype=np.int32)
            body = np.ones(len(flat), dtype=bool)
            if bos is not None:
                flat[ends - lengths] = bos
                body[ends - lengths] = False
            flat[ends - 1] = tokenizer.eos_token_id
            body[ends - 1] = False
            flat[body] = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int32,
                                     count=int(lengths.sum()) - extra * len(encoded))
            del encoded
            stream.write(flat.tobytes())
            offsets[done + 1 : done + 1 + len(lengths)] = offsets[done] + ends
            done += len(lengths)
    return offsets


def _work_folder(out: Path) -> Path:
    """A scratch folder beside `out` (not in it: the build streams its inputs before it may touch the
    output folder, and a bad input must leave that folder as it was); removed when the build ends."""
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.work-", dir=out.parent))


def build_cpt(
    config: DataConfig,
    out: Path,
    run_dir: Path,
    force: bool = False,
    show_progress: bool = True,
    save_recipe: Callable[[Path], object] | None = None,
    executor=None,
    dry_run: bool = False,
) -> dict | Path | None:
    """Build the CPT data folder `out`; returns the summary (also saved in stats.json), or None when
    `out` holds this build finished already. `executor` (`[run.executor]`) with more than one task, or a
    cluster executor, runs the per-document work as sharded tasks (`trex_cli.data.sharded`): the same
    dataset; None or one local task builds in this process. `dry_run` (Slurm) writes the clean phase's
    submission and returns its script, running nothing.

    The build streams: documents are read, normalized and cleaned one at a time and the kept texts go
    to a scratch file; the tokenizer trains from that file, tokens go to a second one, and rows are
    packed and written a chunk at a time. What stays in memory is per document and small (token
    counts, source numbers, dedup keys), so peak memory follows the document count, not the corpus
    size; the output is the in-memory build's, row for row."""
    started = time.perf_counter()
    if executor is not None:
        from trex_cli.executors import check_settings

        check_settings(executor)  # bad executor settings: an error before any work
    if dry_run and (executor is None or executor.kind != "slurm"):
        raise ValueError("--dry-run writes the Slurm submission without sending it; use it with --executor slurm")
    plan = build.plan_build(config, "cpt", out, run_dir, force)
    config, sources, tokenizer_path, folder = plan.config, plan.sources, plan.tokenizer_path, plan.folder
    if build.finished_already(folder):
        return None
    if executor is not None and (executor.kind != "local" or executor.tasks > 1):
        from trex_cli.data.sharded import build_cpt_sharded

        return build_cpt_sharded(config, plan, Path(out), executor, started, show_progress, save_recipe,
                                 dry_run)
    work = _work_folder(Path(out))
    try:
        return _build_cpt_streaming(config, Path(out), sources, tokenizer_path, folder, work, started,
                                    show_progress, save_recipe)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _build_cpt_streaming(config, out, sources, tokenizer_path, folder, work, started, show_progress, save_recipe):
    exclusions = ExclusionLog()  # bad input, as the readers meet it
    cleaning_exclusions = ExclusionLog()  # drops of the cleaning pass, listed after the bad input
    bad = BadInput(exclusions, config.skip_bad)
    hasher = WordHasher()
    phase = build.PhaseTimer()
    source_names = [s.path for s in sources]
    source_number = {name: number for number, name in enumerate(source_names)}
    with build.progress_bar(show_progress) as progress:
        read_task = progress.add_task("reading + cleaning sources", total=len(sources))
        read_counts: dict[str, int] = {name: 0 for name in source_names}
        spill = TextSpill(work / "texts.bin")
        kept_source = array.array("H")
        with phase("read+clean"):
            benchmarks = (
                BenchmarkIndex(config.decontaminate, config.decontaminate_ngram, hasher) if config.decontaminate else None
            )

            def normalized() -> Iterator[Document]:
                for source in sources:
                    for document in iter_documents(source, bad):
                        document.text = normalize_text(document.text)
                        read_counts[source.path] += 1
                        yield document
                    progress.advance(read_task)

            for document in clean_streaming(
                normalized(), lambda d: d.text, config, benchmarks, cleaning_exclusions, hasher, work
            ):
                spill.add(document.text)
                kept_source.append(source_number[document.source])
            spill.close()
        exclusions.rows.extend(cleaning_exclusions.rows)
        exclusions.counts.update(cleaning_exclusions.counts)
        documents_read = sum(read_counts.values())
        if spill.count == 0:
            raise ValueError(
                f"no documents left after cleaning ({documents_read} read; dropped: {exclusions.by_reason()}); "
                "check the sources and exclusions"
            )
        state = folder.prepare()  # inputs are read and clean: now the output folder is touched

        with phase("tokenizer"):
            saved_tokenizer = out / "tokenizer"
            tokenizer = load_tokenizer(tokenizer_path) if tokenizer_path is not None else None
            if tokenizer is None and state is StageState.RESUME and (saved_tokenizer / "tokenizer.json").is_file():
                tokenizer = load_resumed(saved_tokenizer)  # trained before the interruption
            elif tokenizer is None:
                tokenizer = train_tokenizer(iter(spill), config.vocab_size)
            tokenizer.save(saved_tokenizer)
        with phase("tokenize"):
            token_file = work / "tokens.i32"
            offsets = tokenize_to_file(tokenizer, spill.batches(512), spill.count, token_file)
            spill.path.unlink()
        corpus = Corpus(TokenStore([token_file], [offsets]), np.frombuffer(kept_source, dtype=np.uint16),
                        read_counts, exclusions, tokenizer,
                        benchmarks.item_counts if benchmarks is not None else None)
        return finish_cpt(config, out, sources, folder, corpus, phase, progress, started, save_recipe)


@dataclasses.dataclass
class Corpus:
    """The cleaned, tokenized documents a CPT build mixes and packs: per kept document (in read order)
    its tokens (`tokens`) and source number, with what reading and cleaning counted."""

    tokens: TokenStore
    source_numbers: np.ndarray  # uint16, one per kept document
    read_counts: dict[str, int]  # documents read per source
    exclusions: ExclusionLog
    tokenizer: object
    benchmark_items: dict[str, int] | None  # decontamination's benchmark item counts, None without


class TokenStore:
    """Token files of int32 ids (each with int64 offsets: document i of a file is tokens `[offsets[i],
    offsets[i+1])`), read as one sequence of documents by `pread`: the corpus is never in memory. `dtype`
    reads files of another item type with the same offsets (SFT's int8 loss masks)."""

    def __init__(self, files: list[Path], offsets: list[np.ndarray], dtype=np.int32) -> None:
        self.dtype = np.dtype(dtype)
        self.files = [Path(file) for file in files]
        self.offsets = offsets
        counts = np.array([len(o) - 1 for o in offsets], dtype=np.int64)
        self.first = np.concatenate([[0], np.cumsum(counts)])  # global number of each file's first document
        self.lengths = np.concatenate([np.diff(o) for o in offsets]) if offsets else np.zeros(0, np.int64)
        self._descriptors: list[int] = []

    def __enter__(self) -> TokenStore:
        self._descriptors = [os.open(file, os.O_RDONLY) for file in self.files]
        return self

    def __exit__(self, *_) -> None:
        for descriptor in self._descriptors:
            os.close(descriptor)
        self._descriptors = []

    def read(self, document: int, start: int, stop: int) -> np.ndarray:
        """Tokens `[start, stop)` of global document `document`."""
        file = int(np.searchsorted(self.first, document, side="right")) - 1
        base = int(self.offsets[file][document - self.first[file]])
        size = self.dtype.itemsize
        data = os.pread(self._descriptors[file], (stop - start) * size, (base + start) * size)
        return np.frombuffer(data, dtype=self.dtype)


def finish_cpt(config, out, sources, folder, corpus: Corpus, phase, progress, started, save_recipe) -> dict:
    """Split, mix, shuffle and pack `corpus` into `out`, then write its card, stats and manifest: the part
    of the build after tokenizing, the same for one process and for sharded tasks."""
    seq_len = config.cpt.seq_len
    rng = np.random.default_rng(config.seed)
    exclusions, tokenizer = corpus.exclusions, corpus.tokenizer
    read_counts, documents_read = corpus.read_counts, sum(corpus.read_counts.values())
    source_names = [s.path for s in sources]
    lengths = corpus.tokens.lengths
    kept_source_numbers = corpus.source_numbers
    documents_kept = len(lengths)
    train_items, validation_items = build.split_validation(lengths, config.validation_share, seq_len, rng)
    shares = {s.path: s.share for s in sources}
    split_rows = {}
    mixes = {}
    pack_task = progress.add_task("mixing + packing", total=2)
    rows_per_chunk = max(1, CHUNK_TOKENS // seq_len)
    with corpus.tokens as tokens:
        for split, items, max_upsample, total in (
            ("train", train_items, config.max_upsample, config.cpt.total_tokens),
            ("validation", validation_items, 1.0, 0),
        ):
            with phase("mix"):
                items = np.asarray(items, dtype=np.int64)
                by_source = {name: items[kept_source_numbers[items] == number]
                             for number, name in enumerate(source_names)}
                token_counts = {name: lengths[by_source[name]] for name in source_names}
                mix = mix_by_shares(token_counts, shares, total, max_upsample, rng)
                order = np.concatenate(
                    [by_source[name][np.asarray(mix[name].selected, dtype=np.int64)] for name in source_names]
                )
                order = order[rng.permutation(len(order))]
            writer = RowWriter(out / split)
            for chunk in _timed(phase, "pack", pack_in_chunks(lengths, order, seq_len, tokens.read, rows_per_chunk)):
                with phase("save"):
                    writer.append(chunk[0], chunk[2], chunk[1])
            with phase("save"):
                rows = writer.close()
            tail = tail_tokens(lengths, order, seq_len)
            split_rows[split] = {"rows": rows, "tokens": rows * seq_len, "tail_tokens_dropped": tail}
            mixes[split] = mix
            progress.advance(pack_task)

    wall = time.perf_counter() - started
    kept_counts = np.bincount(kept_source_numbers, minlength=len(source_names))
    kept_tokens = np.bincount(kept_source_numbers, weights=lengths, minlength=len(source_names))
    kept_by_source = {name: int(kept_counts[number]) for number, name in enumerate(source_names)}
    tokens_by_source = {name: int(kept_tokens[number]) for number, name in enumerate(source_names)}
    train_total = sum(m.tokens_selected for m in mixes["train"].values()) or 1
    source_rows = []
    for name in source_names:
        train_mix = mixes["train"][name]
        source_rows.append(
            {
                "source": name,
                "read": read_counts[name],
                "kept": kept_by_source[name],
                "tokens_kept": tokens_by_source[name],
                "tokens_in_mix": train_mix.tokens_selected,
                "target_share": shares[name],
                "share_of_mix": round(train_mix.tokens_selected / train_total, 4),
                "repeats": round(train_mix.repeats, 3),
                "capped_by_max_upsample": train_mix.capped,
            }
        )
    write_dataset_dict(out, list(split_rows))
    exclusions.write(Path(out) / "exclusions.jsonl")
    histogram = "lengths.png"
    dataset_card.write_histogram(Path(out) / histogram, lengths, seq_len, "CPT document lengths (after cleaning)", "document")
    meta = dataset_card.write_meta(out, "cpt", seq_len, tokenizer, split_rows["train"]["rows"], split_rows["validation"]["rows"])
    packed_tokens = split_rows["train"]["tokens"] + split_rows["validation"]["tokens"]
    stats = {
        "kind": "cpt",
        "out": str(out),
        "sources": source_rows,
        "documents_read": documents_read,
        "documents_kept": documents_kept,
        "drops_by_reason": exclusions.by_reason(),
        "splits": split_rows,
        "tokenizer": {"origin": tokenizer.origin, "vocab_size": tokenizer.vocab_size},
        "cleaning": build.cleaning_settings(config),
        "seed": config.seed,
        "versions": dataset_card.software_versions(),
        "lengths": dataset_card.length_summary(lengths),
        "histogram": histogram,
        "decontamination": {"ngram": config.decontaminate_ngram, "benchmarks": corpus.benchmark_items}
        if corpus.benchmark_items is not None
        else None,
        "wall_time_s": round(wall, 3),
        "phase_seconds": phase.seconds,
        "tokens_per_second": round(packed_tokens / wall, 1) if wall > 0 else None,
    }
    write_json_atomic(Path(out) / "stats.json", stats)
    dataset_card.write_card(out, "cpt", stats, meta)
    if save_recipe is not None:
        save_recipe(Path(out))
    folder.finish(
        counts={
            "documents_read": documents_read,
            "documents_kept": documents_kept,
            "train_rows": split_rows["train"]["rows"],
            "validation_rows": split_rows["validation"]["rows"],
            "train_tokens": split_rows["train"]["tokens"],
            "dropped": sum(exclusions.counts.values()),
        },
        extra={"meta": meta},
    )
    return stats
