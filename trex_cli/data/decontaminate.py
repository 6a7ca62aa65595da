"""Decontamination: drop any training row that shares a word n-gram (13 by default) with a
benchmark question, after both are put in matching form (see `normalize`).

Benchmarks are read through `trex_cli.benchmark_files`, the module the eval's loader reads them
with, so decontamination sees exactly the questions `trex eval` asks: JSON arrays or JSON Lines with
`en_question` (NL4Opt, OptiBench, MAMO, IndustryOR, OptMATH, trex's eval split), Bench4Opt and
B4O-ORGEval with `problem`, a synth folder (its `eval/test.jsonl`), or a benchmark name under
$TREX_BENCHMARK_DIR. A question shorter than n words is indexed as one n-gram of all its words, so it still matches a
training text that contains it whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trex_cli.data.normalize import WordHasher, ngram_hashes, words


@dataclass
class QuestionOrigin:
    benchmark: str  # the file it came from
    item_id: str


@dataclass
class Contamination:
    benchmark: str
    item_id: str
    ngram: str  # the shared words, in matching form


def read_benchmark_questions(spec: str | Path) -> list[tuple[QuestionOrigin, str]]:
    """(origin, question text) for every item of one benchmark file, synth folder or name."""
    from trex_cli.benchmark_files import benchmark_questions

    path, questions = benchmark_questions(spec)
    return [(QuestionOrigin(str(path), item_id), question) for item_id, question in questions]


class BenchmarkIndex:
    """Sorted n-gram hashes of every benchmark question, each pointing back to its first item."""

    def __init__(self, files: list[str | Path], ngram: int = 13, hasher: WordHasher | None = None) -> None:
        self.ngram = ngram
        self.hasher = hasher or WordHasher()
        self.items: list[QuestionOrigin] = []
        self.item_counts: dict[str, int] = {}
        self._short_lengths: set[int] = set()  # word counts of questions shorter than n, indexed whole
        hashes, owners = [], []
        for file in files:
            questions = read_benchmark_questions(file)
            self.item_counts[str(file)] = len(questions)
            for item, question in questions:
                question_hashes = self.hasher(question)
                if len(question_hashes) == 0:
                    continue
                if len(question_hashes) < ngram:
                    self._short_lengths.add(len(question_hashes))
                item_hashes = ngram_hashes(question_hashes, ngram)
                hashes.append(item_hashes)
                owners.append(np.full(len(item_hashes), len(self.items), dtype=np.int64))
                self.items.append(item)
        keys = np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.uint64)
        owner = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._owner = owner[order]

    def __len__(self) -> int:
        return len(self.items)

    def find(self, text: str, word_hashes: np.ndarray) -> Contamination | None:
        """The first benchmark item sharing an n-gram with this text (given its word hashes), or None."""
        if len(self._keys) == 0 or len(word_hashes) == 0:
            return None
        for length in [self.ngram, *sorted(self._short_lengths)]:
            if length > len(word_hashes):
                continue
            hit = self._hits(ngram_hashes(word_hashes, length))
            if hit is not None:
                position, item_index = hit
                item = self.items[item_index]
                matched = " ".join(words(text)[position : position + length])
                return Contamination(item.benchmark, item.item_id, matched)
        return None

    def _hits(self, queries: np.ndarray) -> tuple[int, int] | None:
        slots = np.searchsorted(self._keys, queries)
        slots = np.minimum(slots, len(self._keys) - 1)
        matches = np.nonzero(self._keys[slots] == queries)[0]
        if len(matches) == 0:
            return None
        first = int(matches[0])
        return first, int(self._owner[slots[first]])
