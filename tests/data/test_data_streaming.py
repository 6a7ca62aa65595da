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


@pytest.mark.parametrize("seq_len", [7, 32])
@pytest.mark.parametrize("rows_per_chunk", [1, 2, 3, 5, 1000])
def test_chunked_packing_equals_pack_documents(seq_len, rows_per_chunk):
    from trex_cli.data.cpt import pack_documents, pack_in_chunks, tail_tokens

    rng = np.random.default_rng(seq_len * 100 + rows_per_chunk)
    # short and long documents: some fit many times in a row, some span several rows
    documents = [rng.integers(0, 1000, size=int(n), dtype=np.int32) for n in rng.integers(1, 3 * seq_len, 60)]
    lengths = np.array([len(d) for d in documents], dtype=np.int64)
    order = rng.permutation(np.concatenate([np.arange(60), rng.integers(0, 60, 20)]))  # with repeats
    expected_ids, expected_positions, expected_mask, expected_tail = pack_documents(documents, order, seq_len)
    reads = []

    def read_tokens(document, start, stop):
        reads.append(stop - start)
        return documents[document][start:stop]

    chunks = list(pack_in_chunks(lengths, order, seq_len, read_tokens, rows_per_chunk))
    assert all(len(chunk[0]) <= rows_per_chunk for chunk in chunks)
    assert len(chunks) == -(-len(expected_ids) // rows_per_chunk)
    ids, positions, mask = (np.concatenate([c[i] for c in chunks]) for i in range(3))
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_array_equal(positions, expected_positions)
    np.testing.assert_array_equal(mask, expected_mask)
    assert ids.dtype == np.int32 and positions.dtype == np.int32 and mask.dtype == np.int8
    assert tail_tokens(lengths, order, seq_len) == expected_tail
    assert sum(reads) == ids.size  # each chunk read only its own tokens


def test_chunked_packing_of_nothing():
    from trex_cli.data.cpt import pack_in_chunks, tail_tokens

    lengths = np.array([3, 4], dtype=np.int64)
    assert list(pack_in_chunks(lengths, np.zeros(0, dtype=np.int64), 8, None, 4)) == []
    assert list(pack_in_chunks(lengths, np.array([0, 1]), 8, None, 4)) == []  # 7 tokens: no full row
    assert tail_tokens(lengths, np.array([0, 1]), 8) == 7


def test_row_writer_folder_loads_like_save_rows(tmp_path):
    import datasets

    from trex_cli.data.shards import RowWriter, save_rows

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, size=(23, 5)).astype(np.int32)
    positions = rng.integers(0, 5, size=(23, 5)).astype(np.int32)
    mask = (positions != 0).astype(np.int8)
    save_rows(tmp_path / "whole", np.arange(24) * 5, ids.reshape(-1), mask.reshape(-1), positions.reshape(-1))
    writer = RowWriter(tmp_path / "chunked", shard_bytes=300)  # several shards
    for start in range(0, 23, 4):
        writer.append(ids[start : start + 4], mask[start : start + 4], positions[start : start + 4])
    assert writer.close() == 23
    assert len(list((tmp_path / "chunked").glob("data-*-of-*.arrow"))) > 1
    whole, chunked = datasets.load_from_disk(str(tmp_path / "whole")), datasets.load_from_disk(str(tmp_path / "chunked"))
    assert chunked.features == whole.features and chunked.num_rows == 23
    for column in ("input_ids", "loss_mask", "position_ids"):
        assert chunked[column] == whole[column]
    empty = RowWriter(tmp_path / "empty")
    assert empty.close() == 0 and datasets.load_from_disk(str(tmp_path / "empty")).num_rows == 0
