"""The cleaning pass shared by CPT and SFT: empty rows, benchmark overlap, exact and near duplicates.

Decontamination runs before dedup, so that a kept copy is never one that would later be dropped for
overlapping a benchmark. Every drop goes to the exclusion log with what it matched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from trex_cli.data.config import DataConfig
from trex_cli.data.decontaminate import BenchmarkIndex
from trex_cli.data.dedup import Deduplicator
from trex_cli.data.exclusions import ExclusionLog
from trex_cli.data.normalize import WordHasher

Item = TypeVar("Item")


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
    deduplicator = Deduplicator(
        threshold=config.minhash_threshold,
        num_permutations=config.minhash_permutations,
        shingle_words=config.shingle_words,
        seed=config.seed + 1,
        exact=config.exact_dedup,
        near=config.near_dedup,
    )
    kept = []
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
            kept.append(item)
        if advance is not None:
            advance(1)
    return kept
