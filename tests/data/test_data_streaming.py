"""The streaming CPT build's pieces equal the in-memory ones: the bounded-memory dedup makes the same
decisions as `Deduplicator`, chunked packing gives `pack_documents`' rows for any chunk size, and a
streamed build gives the rows of the same steps run in memory."""

from __future__ import annotations

import random

import numpy as np
import pytest
from data_fixtures import random_document, vocabulary

from trex_cli.data.cleaning import clean, clean_streaming
from trex_cli.data.config import DataConfig
from trex_cli.data.dedup import BandedDeduplicator, Deduplicator
from trex_cli.data.exclusions import ExclusionLog
from trex_cli.data.normalize import WordHasher
from trex_cli.data.readers import Document


def _edit(rng: random.Random, text: str, words: list[str], edits: int) -> str:
    tokens = text.split(" ")
    for _ in range(edits):
        position = rng.randrange(1, len(tokens) - 1)
        tokens[position] = rng.choice(words)
    return " ".join(tokens)


def _corpus_with_planted_copies(seed: int, count: int) -> list[Document]:
    """Distinct documents, plus exact copies and near copies of 1 to 30 edited words (some above the
    0.8 threshold, some below it), and a few copies of copies, shuffled."""
    rng = random.Random(seed)
    words = vocabulary(2000, seed=seed)
    texts = [random_document(rng, words, rng.randint(60, 300)) for _ in range(count)]
    for _ in range(count // 3):
        original = rng.choice(texts)
        if rng.random() < 0.2:
            texts.append(original.upper())
        else:
            texts.append(_edit(rng, original, words, rng.choice([1, 2, 4, 8, 15, 30])))
    rng.shuffle(texts)
    # ids repeat across sources, as they may in real corpora
    return [Document(f"doc-{i % (count // 2)}", f"source-{i % 3}", text, f"file:{i}") for i, text in enumerate(texts)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_banded_dedup_keeps_what_the_datasketch_index_keeps(seed, tmp_path):
    documents = _corpus_with_planted_copies(seed, 240)
    config = DataConfig()
    reference_log, streamed_log = ExclusionLog(), ExclusionLog()
    reference = clean(documents, lambda d: d.text, config, None, reference_log, WordHasher())
    streamed = list(clean_streaming(
        iter(documents), lambda d: d.text, config, None, streamed_log, WordHasher(), tmp_path
    ))
    assert [d.origin for d in streamed] == [d.origin for d in reference]
    assert streamed_log.counts == reference_log.counts
    assert streamed_log.counts["near_duplicate"] > 10 and streamed_log.counts["exact_duplicate"] > 3
    assert len(streamed) > len(documents) / 2  # the far edits stay
    for ours, theirs in zip(streamed_log.rows, reference_log.rows, strict=True):
        # the named twin may differ only between equally similar kept documents
        assert {k: v for k, v in ours.items() if k != "duplicate_of"} == {
            k: v for k, v in theirs.items() if k != "duplicate_of"
        }
    assert not list(tmp_path.iterdir())  # the signature file is removed


def test_banded_dedup_uses_datasketch_bands_and_finds_each_near_copy(tmp_path):
    from datasketch import MinHashLSH

    deduplicator = BandedDeduplicator(tmp_path, threshold=0.7, num_permutations=64)
    lsh = MinHashLSH(threshold=0.7, num_perm=64)
    assert (deduplicator._bands, deduplicator._rows) == (lsh.b, lsh.r)
    hasher = WordHasher()
    rng = random.Random(5)
    words = vocabulary(500, seed=5)
    reference = Deduplicator(threshold=0.7, num_permutations=64)
    for index in range(150):
        text = random_document(rng, words, 120)
        for copy in (text, _edit(rng, text, words, 2)):
            hashes = hasher(copy)
            ours, theirs = deduplicator.check(f"d{index}", hashes), reference.check(f"d{index}", hashes)
            assert (ours is None) == (theirs is None)
            if ours is not None:
                assert (ours.reason, ours.similarity) == (theirs.reason, theirs.similarity)
    deduplicator.close()
    # nearly every near copy shares a band with its original (the same ones the reference finds)
    assert 150 <= len(deduplicator._kept_ids) <= 165
    keys = np.array([deduplicator.band_keys(np.arange(64, dtype=np.uint64))])
    assert keys.shape == (1, lsh.b) and len(set(keys[0].tolist())) == lsh.b
