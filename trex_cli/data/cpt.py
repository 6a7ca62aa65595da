"""`trex data cpt`: documents -> cleaned -> tokenized -> mixed by token shares -> packed rows.

Each document becomes `[bos] + tokens + [eos]` (no bos when the tokenizer has none). Documents are
split into train and validation before mixing (so no document is in both), mixed by token shares,
shuffled, concatenated and cut into rows of exactly `seq_len` tokens; the tail that does not fill a
row is dropped and counted. `position_ids` restart at 0 at every document start and at every row
start (a document cut by a row boundary continues in the next row from position 0), so the trainer
can keep attention inside a document; `loss_mask` is 0 exactly where `position_ids` is 0, since those
tokens have no earlier token of their document to be predicted from.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from trex_cli.artifacts import StageState, write_json_atomic
from trex_cli.data import build, dataset_card
from trex_cli.data.cleaning import clean
from trex_cli.data.config import DataConfig
from trex_cli.data.decontaminate import BenchmarkIndex
from trex_cli.data.exclusions import ExclusionLog
from trex_cli.data.mixing import mix_by_shares
from trex_cli.data.normalize import WordHasher, normalize_text
from trex_cli.data.readers import BadInput, Document, read_documents
from trex_cli.data.shards import save_rows, write_dataset_dict
from trex_cli.data.tokenizer import load_tokenizer, train_tokenizer


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


def _encode_documents(tokenizer, documents: list[Document], batch: int = 8192) -> list[np.ndarray]:
    """`[bos] + ids + [eos]` per document, as int32 arrays."""
    prefix = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    suffix = [tokenizer.eos_token_id]
    arrays = []
    for start in range(0, len(documents), batch):
        for ids in tokenizer.encode_many([d.text for d in documents[start : start + batch]]):
            arrays.append(np.array(prefix + ids + suffix, dtype=np.int32))
    return arrays


def build_cpt(
    config: DataConfig,
    out: Path,
    run_dir: Path,
    force: bool = False,
    show_progress: bool = True,
    save_recipe: Callable[[Path], object] | None = None,
) -> dict | None:
    """Build the CPT data folder `out`; returns the summary (also saved in stats.json), or None when
    `out` holds this build finished already."""
    started = time.perf_counter()
    plan = build.plan_build(config, "cpt", out, run_dir, force)
    config, sources, tokenizer_path, folder = plan.config, plan.sources, plan.tokenizer_path, plan.folder
    seq_len = config.cpt.seq_len
    if build.finished_already(folder):
        return None

    exclusions = ExclusionLog()
    bad = BadInput(exclusions, config.skip_bad)
    hasher = WordHasher()
    rng = np.random.default_rng(config.seed)
    phase = build.PhaseTimer()
    with build.progress_bar(show_progress) as progress, ThreadPoolExecutor(max_workers=1) as background:
        read_task = progress.add_task("reading sources", total=len(sources))
        documents: list[Document] = []
        read_counts: dict[str, int] = {}
        with phase("read"):
            for source in sources:
                source_documents = read_documents(source, bad)
                for document in source_documents:
                    document.text = normalize_text(document.text)
                read_counts[source.path] = len(source_documents)
                documents.extend(source_documents)
                progress.advance(read_task)

        tokenizer = load_tokenizer(tokenizer_path) if tokenizer_path is not None else None
        all_encoded = None
        if tokenizer is not None:
            # The Rust tokenizer releases the GIL: tokenize every document on its threads while
            # Python cleans them, then keep the arrays of the documents that survive.
            all_encoded = background.submit(_encode_documents, tokenizer, documents)

        with phase("clean"):
            benchmarks = (
                BenchmarkIndex(config.decontaminate, config.decontaminate_ngram, hasher) if config.decontaminate else None
            )
            clean_task = progress.add_task("dedup + decontamination", total=len(documents))
            kept = clean(
                documents, lambda d: d.text, config, benchmarks, exclusions, hasher,
                advance=lambda n: progress.advance(clean_task, n),
            )
        if not kept:
            raise ValueError(
                f"no documents left after cleaning ({len(documents)} read; dropped: {exclusions.by_reason()}); "
                "check the sources and exclusions"
            )
        state = folder.prepare()  # inputs are read and clean: now the output folder is touched

        with phase("tokenizer"):
            saved_tokenizer = Path(out) / "tokenizer"
            if tokenizer is None and state is StageState.RESUME and (saved_tokenizer / "tokenizer.json").is_file():
                tokenizer = load_tokenizer(saved_tokenizer)  # trained before the interruption
            elif tokenizer is None:
                tokenizer = train_tokenizer((d.text for d in kept), config.vocab_size)
            tokenizer.save(saved_tokenizer)
        with phase("tokenize"):
            if all_encoded is not None:
                position = {id(document): index for index, document in enumerate(documents)}
                encoded = all_encoded.result()
                token_arrays = [encoded[position[id(document)]] for document in kept]
            else:
                token_arrays = _encode_documents(tokenizer, kept)
        lengths = np.fromiter((len(a) for a in token_arrays), dtype=np.int64, count=len(token_arrays))

        train_items, validation_items = build.split_validation(lengths, config.validation_share, seq_len, rng)
        source_names = [s.path for s in sources]
        shares = {s.path: s.share for s in sources}
        split_rows = {}
        mixes = {}
        pack_task = progress.add_task("mixing + packing", total=2)
        for split, items, max_upsample, total in (
            ("train", train_items, config.max_upsample, config.cpt.total_tokens),
            ("validation", validation_items, 1.0, 0),
        ):
            with phase("mix+pack"):
                by_source = {name: [] for name in source_names}
                for index in items:
                    by_source[kept[index].source].append(int(index))
                token_counts = {name: lengths[np.array(by_source[name], dtype=np.int64)] for name in source_names}
                mix = mix_by_shares(token_counts, shares, total, max_upsample, rng)
                order = np.array(
                    [by_source[name][i] for name in source_names for i in mix[name].selected], dtype=np.int64
                )
                order = order[rng.permutation(len(order))]
                input_ids, position_ids, loss_mask, tail = pack_documents(token_arrays, order, seq_len)
            with phase("save"):
                rows = save_rows(
                    Path(out) / split,
                    np.arange(len(input_ids) + 1, dtype=np.int64) * seq_len,
                    input_ids.reshape(-1),
                    loss_mask.reshape(-1),
                    position_ids.reshape(-1),
                )
            split_rows[split] = {"rows": rows, "tokens": rows * seq_len, "tail_tokens_dropped": tail}
            mixes[split] = mix
            progress.advance(pack_task)

    wall = time.perf_counter() - started
    kept_by_source = {name: 0 for name in source_names}
    tokens_by_source = {name: 0 for name in source_names}
    for index, document in enumerate(kept):
        kept_by_source[document.source] += 1
        tokens_by_source[document.source] += int(lengths[index])
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
    write_dataset_dict(Path(out), list(split_rows))
    exclusions.write(Path(out) / "exclusions.jsonl")
    histogram = "lengths.png"
    dataset_card.write_histogram(Path(out) / histogram, lengths, seq_len, "CPT document lengths (after cleaning)", "document")
    meta = dataset_card.write_meta(out, "cpt", seq_len, tokenizer, split_rows["train"]["rows"], split_rows["validation"]["rows"])
    packed_tokens = split_rows["train"]["tokens"] + split_rows["validation"]["tokens"]
    stats = {
        "kind": "cpt",
        "out": str(out),
        "sources": source_rows,
        "documents_read": len(documents),
        "documents_kept": len(kept),
        "drops_by_reason": exclusions.by_reason(),
        "splits": split_rows,
        "tokenizer": {"origin": tokenizer.origin, "vocab_size": tokenizer.vocab_size},
        "cleaning": build.cleaning_settings(config),
        "seed": config.seed,
        "versions": dataset_card.software_versions(),
        "lengths": dataset_card.length_summary(lengths),
        "histogram": histogram,
        "decontamination": {"ngram": config.decontaminate_ngram, "benchmarks": benchmarks.item_counts}
        if benchmarks
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
            "documents_read": len(documents),
            "documents_kept": len(kept),
            "train_rows": split_rows["train"]["rows"],
            "validation_rows": split_rows["validation"]["rows"],
            "train_tokens": split_rows["train"]["tokens"],
            "dropped": sum(exclusions.counts.values()),
        },
        extra={"meta": meta},
    )
    return stats
