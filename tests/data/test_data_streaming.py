"""The streaming CPT build's pieces equal the in-memory ones: the bounded-memory dedup makes the same
decisions as `Deduplicator`, chunked packing gives `pack_documents`' rows for any chunk size, and a
streamed build gives the rows of the same steps run in memory."""

from __future__ import annotations

import json
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


def _in_memory_reference(config, sources):
    """The CPT rows built the in-memory way from the same functions: every document, every token
    array and every row held at once (the build before it streamed)."""
    from trex_cli.data import build
    from trex_cli.data.cpt import pack_documents
    from trex_cli.data.mixing import mix_by_shares
    from trex_cli.data.normalize import normalize_text
    from trex_cli.data.readers import BadInput, read_documents
    from trex_cli.data.tokenizer import train_tokenizer

    exclusions = ExclusionLog()
    bad = BadInput(exclusions, config.skip_bad)
    documents = []
    for source in sources:
        for document in read_documents(source, bad):
            document.text = normalize_text(document.text)
            documents.append(document)
    kept = clean(documents, lambda d: d.text, config, None, exclusions, WordHasher())
    tokenizer = train_tokenizer([d.text for d in kept], config.vocab_size)
    arrays = [np.array([tokenizer.bos_token_id] + ids + [tokenizer.eos_token_id], dtype=np.int32)
              for ids in tokenizer.encode_many([d.text for d in kept])]
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    rng = np.random.default_rng(config.seed)
    train, validation = build.split_validation(lengths, config.validation_share, config.cpt.seq_len, rng)
    rows = {}
    for split, items, max_upsample, total in (
        ("train", train, config.max_upsample, config.cpt.total_tokens), ("validation", validation, 1.0, 0)
    ):
        by_source = {s.path: [int(i) for i in items if kept[i].source == s.path] for s in sources}
        mix = mix_by_shares({name: lengths[np.array(ix, dtype=np.int64)] for name, ix in by_source.items()},
                            {s.path: s.share for s in sources}, total, max_upsample, rng)
        order = np.array([by_source[s.path][i] for s in sources for i in mix[s.path].selected], dtype=np.int64)
        order = order[rng.permutation(len(order))]
        rows[split] = pack_documents(arrays, order, config.cpt.seq_len)
    return rows, exclusions, len(documents), len(kept)


@pytest.mark.parametrize("chunk_tokens", [40, 1 << 23])
def test_streamed_build_equals_the_in_memory_build(chunk_tokens, tmp_path, monkeypatch):
    import datasets

    from trex_cli.data import cpt
    from trex_cli.data.config import CptSection, SourceSpec

    monkeypatch.setattr(cpt, "CHUNK_TOKENS", chunk_tokens)  # 40: a chunk of one 32-token row
    documents = _corpus_with_planted_copies(11, 150)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    # three sources, one a folder of several files with a malformed line
    for part in range(3):
        lines = [json.dumps({"id": d.id, "text": d.text}) for d in documents[part * 30 : part * 30 + 30]]
        (corpus / f"part-{part}.jsonl").write_text("\n".join(lines + (["{not json"] if part == 1 else [])) + "\n")
    for name, chunk in (("a.jsonl", documents[90:150]), ("b.jsonl", documents[150:])):
        (tmp_path / name).write_text("".join(json.dumps({"text": d.text}) + "\n" for d in chunk))
    config = DataConfig(
        vocab_size=400, skip_bad=True, validation_share=0.1,
        cpt=CptSection(
            sources=[SourceSpec(str(corpus), 0.5), SourceSpec(str(tmp_path / "a.jsonl"), 0.3),
                     SourceSpec(str(tmp_path / "b.jsonl"), 0.2)],
            seq_len=32, total_tokens=12000,
        ),
    )
    out = tmp_path / "data" / "cpt"
    stats = cpt.build_cpt(config, out, tmp_path, show_progress=False)
    expected, exclusions, read, kept = _in_memory_reference(config, config.cpt.sources)
    assert (stats["documents_read"], stats["documents_kept"]) == (read, kept)
    assert stats["drops_by_reason"] == exclusions.by_reason() and exclusions.counts["near_duplicate"] > 5
    excluded = [json.loads(line) for line in (out / "exclusions.jsonl").read_text().splitlines()]
    assert [(r["reason"], r["where"]) for r in excluded] == [(r["reason"], r["where"]) for r in exclusions.rows]
    for split in ("train", "validation"):
        loaded = datasets.load_from_disk(str(out / split))
        ids, positions, mask, tail = expected[split]
        assert len(ids) > 0 and stats["splits"][split]["tail_tokens_dropped"] == tail
        np.testing.assert_array_equal(np.array(loaded["input_ids"]), ids)
        np.testing.assert_array_equal(np.array(loaded["position_ids"]), positions)
        np.testing.assert_array_equal(np.array(loaded["loss_mask"]), mask)
    # the scratch files are gone, beside and inside the output folder
    assert sorted(p.name for p in out.parent.iterdir()) == ["cpt"]
    assert not list(out.rglob("*.bin")) and not list(out.rglob("*.i32")) and not list(out.rglob("*.u64"))
