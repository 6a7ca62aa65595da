"""Dedup: planted exact and near duplicates are removed, distinct documents are kept."""

from __future__ import annotations

import random

import numpy as np
from data_fixtures import random_document, vocabulary

from trex_cli.data.cleaning import clean
from trex_cli.data.config import DataConfig
from trex_cli.data.dedup import Deduplicator
from trex_cli.data.exclusions import ExclusionLog
from trex_cli.data.normalize import WordHasher
from trex_cli.data.readers import Document


def _small_edit(rng: random.Random, text: str, words: list[str], edits: int) -> str:
    tokens = text.split(" ")
    for _ in range(edits):
        position = rng.randrange(1, len(tokens) - 1)
        action = rng.choice(["replace", "insert", "delete"])
        if action == "replace":
            tokens[position] = rng.choice(words)
        elif action == "insert":
            tokens.insert(position, rng.choice(words))
        else:
            del tokens[position]
    return " ".join(tokens)


def test_planted_duplicates_removed_and_distinct_documents_kept():
    rng = random.Random(7)
    words = vocabulary(3000, seed=7)
    distinct = [random_document(rng, words, rng.randint(200, 400)) for _ in range(400)]
    documents = [Document(f"distinct-{i}", "corpus", text, f"corpus:{i}") for i, text in enumerate(distinct)]
    planted, twin_of = [], {}
    for index in rng.sample(range(len(distinct)), 60):
        original = distinct[index]
        if len(planted) % 2 == 0:
            # exact after normalization: case, spacing and punctuation changes only
            copy = original.upper().replace(". ", " .  ").replace("\n", "\n\n")
        else:
            # a small edit: one to three words replaced, inserted or deleted
            copy = _small_edit(rng, original, words, edits=rng.randint(1, 3))
        twin_of[f"planted-{len(planted)}"] = f"distinct-{index}"
        planted.append(Document(f"planted-{len(planted)}", "corpus", copy, f"planted:{len(planted)}"))
    mixed = documents + planted
    rng.shuffle(mixed)

    exclusions = ExclusionLog()
    kept = clean(mixed, lambda d: d.text, DataConfig(), None, exclusions, WordHasher())
    kept_ids = {d.id for d in kept}

    # a pair is removed when only one of its two copies is kept (whichever came first)
    pairs_removed = sum(1 for copy, original in twin_of.items() if (copy in kept_ids) != (original in kept_ids))
    assert pairs_removed >= 0.95 * len(planted), exclusions.by_reason()
    twins = set(twin_of.values())
    distinct_lost = sum(1 for d in documents if d.id not in kept_ids and d.id not in twins)
    assert distinct_lost <= 0.01 * len(documents)
    for row in exclusions.rows:  # every drop names the copy it duplicates
        assert {row["id"], row["duplicate_of"]} & set(twin_of) and row["similarity"] >= 0.8
    assert exclusions.counts["exact_duplicate"] >= 28 and exclusions.counts["near_duplicate"] >= 25


def test_minhash_estimate_tracks_true_jaccard():
    rng = random.Random(3)
    words = vocabulary(2000, seed=3)
    hasher = WordHasher()
    deduplicator = Deduplicator(num_permutations=256, shingle_words=5)
    base = random_document(rng, words, 600)
    for edits in (5, 20, 60):
        other = _small_edit(rng, base, words, edits)
        first, second = hasher(base), hasher(other)

        def shingles(hashes: np.ndarray) -> set:
            return {tuple(hashes[i : i + 5]) for i in range(len(hashes) - 4)}

        true_jaccard = len(shingles(first) & shingles(second)) / len(shingles(first) | shingles(second))
        estimate = float(np.mean(deduplicator.signature(first) == deduplicator.signature(second)))
        assert abs(estimate - true_jaccard) < 0.1, (edits, estimate, true_jaccard)
