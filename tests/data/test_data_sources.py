"""Sources other than synth folders (saved datasets, resource files), mixing arithmetic, and
resuming an interrupted build."""

from __future__ import annotations

import json
import random

import datasets
import numpy as np
import pytest
from data_fixtures import chat_sample, random_document, vocabulary, write_jsonl

from trex_cli.data.config import CptSection, DataConfig, SftSection, SourceSpec
from trex_cli.data.cpt import build_cpt
from trex_cli.data.mixing import mix_by_shares
from trex_cli.data.sft import build_sft


def test_saved_datasets_are_sources_for_cpt_and_sft(tmp_path):
    rng = random.Random(4)
    words = vocabulary(300)
    datasets.Dataset.from_dict({"text": [random_document(rng, words, 80) for _ in range(40)]}).save_to_disk(
        str(tmp_path / "general")
    )
    chats = [chat_sample(rng, words, f"c{i}")["messages"] for i in range(12)]
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"messages": chats})}).save_to_disk(str(tmp_path / "chats"))
    config = DataConfig(
        vocab_size=400,
        validation_share=0.0,
        cpt=CptSection(sources=[SourceSpec(str(tmp_path / "general"))], seq_len=64),
        sft=SftSection(sources=[SourceSpec(str(tmp_path / "chats"))], seq_len=1024),
    )
    cpt = build_cpt(config, tmp_path / "cpt", tmp_path, show_progress=False)
    assert cpt["documents_kept"] == 40 and cpt["splits"]["train"]["rows"] > 0
    assert datasets.load_from_disk(str(tmp_path / "cpt" / "validation")).num_rows == 0  # empty but loadable
    sft = build_sft(config, tmp_path / "sft", tmp_path, show_progress=False)
    assert sft["samples_kept"] == 12 and sft["tokenizer"]["vocab_size"] == 400


def test_saved_dataset_without_the_column_is_a_clear_error(tmp_path):
    datasets.Dataset.from_dict({"body": ["x"]}).save_to_disk(str(tmp_path / "wrong"))
    config = DataConfig(cpt=CptSection(sources=[SourceSpec(str(tmp_path / "wrong"))]))
    with pytest.raises(ValueError, match="has no 'text' column"):
        build_cpt(config, tmp_path / "cpt", tmp_path, show_progress=False)


def test_mix_by_shares_subsamples_upsamples_and_caps():
    rng = np.random.default_rng(0)
    counts = {"big": np.full(100, 10), "small": np.full(10, 10), "tiny": np.full(2, 10)}
    mix = mix_by_shares(counts, {"big": 0.5, "small": 0.3, "tiny": 0.2}, 0, 4.0, rng)
    total = 1120  # tokens available
    assert abs(mix["big"].tokens_selected - 0.5 * total) <= 10 and len(set(mix["big"].selected)) == len(mix["big"].selected)
    assert abs(mix["small"].tokens_selected - 0.3 * total) <= 10 and mix["small"].repeats > 3  # repeated
    assert mix["tiny"].capped and mix["tiny"].tokens_selected == 80  # 4 copies at most, not 224 tokens
    with pytest.raises(ValueError, match="give every source a share"):
        mix_by_shares(counts, {"big": 0.5, "small": None, "tiny": None}, 0, 4.0, rng)
    plain = mix_by_shares(counts, {"big": None, "small": None, "tiny": None}, 0, 4.0, rng)
    assert [m.tokens_selected for m in plain.values()] == [1000, 100, 20]


def test_interrupted_build_resumes_and_reuses_its_tokenizer(tmp_path):
    rng = random.Random(8)
    words = vocabulary(300)
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"text": random_document(rng, words, 100)} for _ in range(30)])
    config = DataConfig(vocab_size=400, cpt=CptSection(sources=[SourceSpec(str(corpus))], seq_len=64))
    out = tmp_path / "cpt"
    first = build_cpt(config, out, tmp_path, show_progress=False)
    vocabulary_file = (out / "tokenizer" / "tokenizer.json").read_text()
    (out / "manifest.json").unlink()  # as if the build died before its last step
    second = build_cpt(config, out, tmp_path, show_progress=False)
    assert second["splits"] == first["splits"]
    assert (out / "tokenizer" / "tokenizer.json").read_text() == vocabulary_file
    assert json.loads((out / "manifest.json").read_text())["counts"]["train_rows"] == first["splits"]["train"]["rows"]
    with pytest.raises(ValueError, match="--force"):
        build_cpt(DataConfig(vocab_size=512, cpt=config.cpt), out, tmp_path, show_progress=False)
