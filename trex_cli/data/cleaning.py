"""The cleaning pass shared by CPT and SFT: empty rows, benchmark overlap, exact and near duplicates.

Decontamination runs before dedup, so that a kept copy is never one that would later be dropped for
overlapping a benchmark. Every drop goes to the exclusion log with what it matched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from trex_cli.data.config import DataConfig
from trex_cli.data.decontaminate import BenchmarkIndex
from trex_cli.data.dedup import BandedDeduplicator, Deduplicator
from trex_cli.data.exclusions import ExclusionLog
from trex_cli.data.normalize import WordHasher

Item = TypeVar("Item")


def deduplicator_settings(config: DataConfig) -> dict:
    return {
        "threshold": config.minhash_threshold,
        "num_permutations": config.minhash_permutations,
        "shingle_words": config.shingle_words,
        "seed": config.seed + 1,
        "exact": config.exact_dedup,
        "near": config.near_dedup,
    }


def clean(
    items: Sequence[Item],
    text_of: Callable[[Item], str],
    config: DataConfig,
    benchmarks: BenchmarkIndex | None,
    exclusions: ExclusionLog,
    hasher: WordHasher,
    advance: Callable[[int], None] | None = None,
) -> list[Item]:
    """The items that survive, in their original order; each item needs `id`, `source`, `origin`."""
    deduplicator = Deduplicator(**deduplicator_settings(config))
    return list(clean_stream(items, text_of, benchmarks, exclusions, hasher, deduplicator, advance))


def clean_streaming(
    items: Iterable[Item],
    text_of: Callable[[Item], str],
    config: DataConfig,
    benchmarks: BenchmarkIndex | None,
    exclusions: ExclusionLog,
    hasher: WordHasher,
    work_folder: Path,
    advance: Callable[[int], None] | None = None,
) -> Iterator[Item]:
    """`clean` over an iterable, yielding the survivors as they come, with the bounded-memory
    deduplicator (`BandedDeduplicator`, its signatures in `work_folder`): the same survivors."""
    deduplicator = BandedDeduplicator(work_folder, **deduplicator_settings(config))
    try:
        yield from clean_stream(items, text_of, benchmarks, exclusions, hasher, deduplicator, advance)
    finally:
        deduplicator.close()


def clean_stream(
    items: Iterable[Item],
    text_of: Callable[[Item], str],
    benchmarks: BenchmarkIndex | None,
    exclusions: ExclusionLog,
    hasher: WordHasher,
    deduplicator: Deduplicator,
    advance: Callable[[int], None] | None = None,
) -> Iterator[Item]:
    """The cleaning pass: yields each item that survives, in order; drops go to `exclusions`."""
    for item in items:
        text = text_of(item)
        where = {"source": item.source, "id": item.id, "where": item.origin}
        word_hashes = hasher(text)
        if len(word_hashes) == 0:
            exclusions.add("empty", **where)
        elif benchmarks is not None and (hit := benchmarks.find(text, word_hashes)) is not None:
            exclusions.add("benchmark_overlap", **where, benchmark=hit.benchmark, item=hit.item_id, ngram=hit.ngram)
        elif (duplicate := deduplicator.check(item.id, word_hashes)) is not None:
            exclusions.add(duplicate.reason, **where, duplicate_of=duplicate.duplicate_of, similarity=duplicate.similarity)
        else:
            yield item
        if advance is not None:
            advance(1)
