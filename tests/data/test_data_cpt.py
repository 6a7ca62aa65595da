"""CPT: rows of exactly seq_len tokens whose document boundaries match the source documents;
mixing by token shares; optimization model files as documents; the saved tokenizer."""

from __future__ import annotations

import json
import random
from collections import Counter

import datasets
import numpy as np
import pytest
from data_fixtures import make_synth_folder, random_document, vocabulary, write_jsonl

from trex_cli.data.config import CptSection, DataConfig, SourceSpec
from trex_cli.data.cpt import build_cpt, pack_documents
from trex_cli.data.normalize import normalize_text
from trex_cli.data.tokenizer import load_tokenizer

SEQ_LEN = 96


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One synth source, one JSONL corpus and one resource folder (Markdown + an LP model), mixed 3:1:… by shares."""
    root = tmp_path_factory.mktemp("cpt")
    rng = random.Random(5)
    words = vocabulary(600)
    synth_documents = [random_document(rng, words, rng.randint(20, 250)) for _ in range(120)]
    synth = make_synth_folder(root / "synth", synth_documents)
    corpus_documents = [random_document(rng, words, rng.randint(40, 120)) for _ in range(30)]
    corpus = write_jsonl(root / "general.jsonl", [{"text": text} for text in corpus_documents])
    resources = root / "resources"
    resources.mkdir()
    (resources / "notes.md").write_text("# Duality\r\n\r\n\r\n\r\nEvery LP has a dual.   \r\nWeak duality bounds it.\r\n")
    (resources / "plant.lp").write_text(
        "Maximize\n obj: 3 x + 2 y\nSubject To\n c1: x + y <= 4\n c2: x + 3 y <= 6\nBounds\n 0 <= x <= 3\nEnd\n"
    )
    config = DataConfig(
        vocab_size=600,
        cpt=CptSection(
            sources=[SourceSpec(str(synth), 0.6), SourceSpec(str(corpus), 0.3), SourceSpec(str(resources), 0.1)],
            seq_len=SEQ_LEN,
        ),
    )
    out = root / "data" / "cpt"
    stats = build_cpt(config, out, root, show_progress=False)
    texts = {normalize_text(t) for t in synth_documents + corpus_documents}
    return out, stats, texts


def _rows(out, split):
    dataset = datasets.load_from_disk(str(out / split))
    return [np.array(dataset[column]) for column in ("input_ids", "position_ids", "loss_mask")]


def test_every_row_has_exactly_seq_len_tokens_and_masks_follow_positions(built):
    out, stats, _ = built
    for split in ("train", "validation"):
        input_ids, position_ids, loss_mask = _rows(out, split)
        assert input_ids.shape[1:] == (SEQ_LEN,) and position_ids.shape == input_ids.shape
        assert input_ids.dtype == np.int32 or input_ids.dtype == np.int64
        assert len(input_ids) == stats["splits"][split]["rows"] > 0
        assert (position_ids[:, 0] == 0).all()
        assert ((loss_mask == 1) == (position_ids != 0)).all()
    features = datasets.load_from_disk(str(out / "train")).features
    assert str(features["input_ids"].feature.dtype) == "int32" and str(features["loss_mask"].feature.dtype) == "int8"


def test_document_boundaries_match_source_documents(built):
    out, _, texts = built
    tokenizer = load_tokenizer(out / "tokenizer")
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    seen_documents = Counter()
    for split in ("train", "validation"):
        input_ids, position_ids, _ = _rows(out, split)
        flat, positions = input_ids.reshape(-1), position_ids.reshape(-1)
        # positions count up inside a document and restart exactly after each EOS (or at a row start)
        for index in range(1, len(flat)):
            if index % SEQ_LEN == 0:
                continue
            expected = 0 if flat[index - 1] == eos else positions[index - 1] + 1
            assert positions[index] == expected, index
        # every complete document (BOS ... EOS inside the stream) decodes to a source document
        starts = np.nonzero(flat == bos)[0]
        for start in starts:
            end = start + 1 + int(np.argmax(flat[start + 1 :] == eos)) if (flat[start + 1 :] == eos).any() else None
            if end is None:
                continue
            text = tokenizer.decode(flat[start + 1 : end].tolist())
            if text.startswith("# Optimization model") or text.startswith("# Duality"):
                seen_documents["resource"] += 1
                continue
            assert text in texts
            seen_documents["document"] += 1
    assert seen_documents["document"] > 50 and seen_documents["resource"] >= 1


def test_shares_and_stats(built):
    out, stats, _ = built
    shares = {row["source"].rsplit("/", 1)[-1]: row["share_of_mix"] for row in stats["sources"]}
    assert abs(shares["synth"] - 0.6) < 0.05 and abs(shares["general.jsonl"] - 0.3) < 0.05
    resources_row = next(row for row in stats["sources"] if row["source"].endswith("resources"))
    assert resources_row["kept"] == 2 and resources_row["capped_by_max_upsample"]  # 10% is more than 4 copies
    assert resources_row["repeats"] <= 4.0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["kind"] == "cpt" and meta["seq_len"] == SEQ_LEN and meta["num_train_rows"] == stats["splits"]["train"]["rows"]
    assert {"bos_token_id", "eos_token_id", "pad_token_id", "vocab_size", "num_validation_rows"} <= set(meta)
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "\n---\n" in card[4:] and "kind: \"cpt\"" in card
    assert 'license: "apache-2.0"' in card and "seed: 0" in card and "Built with python " in card
    assert (out / "lengths.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stage"] == "data-cpt" and manifest["inputs"][0]["stage"] == "synth"


def test_lp_model_becomes_a_solved_document(built):
    out, _, _ = built
    tokenizer = load_tokenizer(out / "tokenizer")
    input_ids, _, _ = _rows(out, "train")
    text = tokenizer.decode(input_ids.reshape(-1).tolist())
    assert "The optimal objective value is 11." in text
    assert "| c2 | 6 | 0.666667 |" in text  # the binding constraint's dual


def test_tokenizer_splits_digits_and_loads_in_both_libraries(built):
    out, _, _ = built
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    backend = Tokenizer.from_file(str(out / "tokenizer" / "tokenizer.json"))
    pieces = backend.encode("cost 4096.25", add_special_tokens=False).tokens
    assert [p for p in pieces if p.strip("Ġ").isdigit()] == ["4", "0", "9", "6", "2", "5"]
    hf = AutoTokenizer.from_pretrained(str(out / "tokenizer"), local_files_only=True)
    meta = json.loads((out / "meta.json").read_text())
    assert (hf.bos_token_id, hf.eos_token_id, hf.pad_token_id) == (meta["bos_token_id"], meta["eos_token_id"], meta["pad_token_id"])
    assert hf.chat_template and json.loads((out / "tokenizer" / "tokenizer_config.json").read_text())["chat_template"]


def test_rerun_is_a_no_op_and_train_validation_documents_are_disjoint(built, tmp_path):
    out, stats, _ = built
    config_path = out / "manifest.json"
    before = config_path.read_text()
    manifest = json.loads(before)
    assert manifest["counts"]["train_rows"] == stats["splits"]["train"]["rows"]
    train_ids, _, _ = _rows(out, "train")
    validation_ids, _, _ = _rows(out, "validation")
    tokenizer = load_tokenizer(out / "tokenizer")

    def documents(rows):
        text = tokenizer.decode(rows.reshape(-1).tolist(), skip_special_tokens=False)
        return {piece.split("<|eos|>")[0] for piece in text.split("<|bos|>")[1:] if "<|eos|>" in piece}

    assert not documents(train_ids) & documents(validation_ids)


def test_pack_documents_cuts_and_restarts_positions():
    documents = [np.array([1, 5, 6, 2]), np.array([1, 7, 2]), np.array([1, 8, 9, 9, 9, 2])]
    input_ids, positions, loss_mask, tail = pack_documents(documents, np.array([0, 1, 2, 0]), 5)
    assert input_ids.tolist() == [[1, 5, 6, 2, 1], [7, 2, 1, 8, 9], [9, 9, 2, 1, 5]]
    assert positions.tolist() == [[0, 1, 2, 3, 0], [0, 1, 0, 1, 2], [0, 1, 2, 0, 1]]
    assert loss_mask.tolist() == [[0, 1, 1, 1, 0], [0, 1, 0, 1, 1], [0, 1, 1, 0, 1]]
    assert tail == 2
