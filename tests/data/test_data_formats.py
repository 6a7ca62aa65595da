"""Input formats users bring from other tools (Parquet, JSON, CSV, Hub ids through `datasets.load_dataset`,
Alpaca, ShareGPT, prompt/completion, column mappings), the data folder as a DatasetDict with trl's mask
name, and the reader faults of issue #25 (a bad byte costs its line only; an empty file is named)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import datasets
import pytest
from data_fixtures import chat_sample, random_document, vocabulary, write_jsonl

from trex_cli.data.config import CptSection, DataConfig, SftSection, SourceSpec
from trex_cli.data.cpt import build_cpt
from trex_cli.data.readers import hub_id, source_kind
from trex_cli.data.sft import build_sft


@pytest.fixture(autouse=True)
def private_datasets_cache(tmp_path, monkeypatch):
    """`datasets.load_dataset` caches what it prepares: keep that inside the test's folder."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


def _documents(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = vocabulary(300)
    return [random_document(rng, words, 80) for _ in range(count)]


def _chats(count: int, seed: int = 0) -> list[list[dict]]:
    rng = random.Random(seed)
    words = vocabulary(300)
    return [chat_sample(rng, words, f"c{i}")["messages"] for i in range(count)]


def _cpt(tmp_path, *sources: SourceSpec, **settings) -> dict:
    config = DataConfig(vocab_size=400, validation_share=0.0, cpt=CptSection(sources=list(sources), seq_len=64), **settings)
    return build_cpt(config, tmp_path / "cpt", tmp_path, show_progress=False, force=True)


def _sft(tmp_path, *sources: SourceSpec, **settings) -> dict:
    config = DataConfig(vocab_size=400, validation_share=0.0, sft=SftSection(sources=list(sources), seq_len=1024), **settings)
    return build_sft(config, tmp_path / "sft", tmp_path, show_progress=False, force=True)


def test_a_bad_byte_costs_only_its_line_and_names_it(tmp_path):
    """#25.1: one non-UTF-8 byte on line 51 of 151 used to drop lines 50-151 and name line 50."""
    corpus = tmp_path / "corpus.jsonl"
    lines = [json.dumps({"text": text}).encode() for text in _documents(151)]
    lines[50] = b'{"text": "caf\xe9 au lait ' + b"word " * 30 + b'"}'  # latin-1, not UTF-8
    corpus.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(ValueError, match=rf"{corpus}:51: not UTF-8 \(byte 0xe9"):
        _cpt(tmp_path, SourceSpec(str(corpus)))
    stats = _cpt(tmp_path, SourceSpec(str(corpus)), skip_bad=True)
    assert stats["documents_read"] == 150 and stats["drops_by_reason"]["bad_input"] == 1
    excluded = [json.loads(line) for line in (tmp_path / "cpt" / "exclusions.jsonl").read_text().splitlines()]
    assert [row["where"] for row in excluded if row["reason"] == "bad_input"] == [f"{corpus}:51"]


def test_an_empty_corpus_file_is_named(tmp_path):
    """#25.8: an empty file among the sources is named, not folded into 'no documents left'."""
    good = write_jsonl(tmp_path / "good.jsonl", [{"text": text} for text in _documents(30)])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match=rf"{empty}: the file is empty"):
        _cpt(tmp_path, SourceSpec(str(good)), SourceSpec(str(empty)))
    stats = _cpt(tmp_path, SourceSpec(str(good)), SourceSpec(str(empty)), skip_bad=True)
    assert stats["documents_read"] == 30
    excluded = [json.loads(line) for line in (tmp_path / "cpt" / "exclusions.jsonl").read_text().splitlines()]
    assert [row["where"] for row in excluded if row["reason"] == "bad_input"] == [str(empty)]


def test_parquet_and_csv_files_with_a_mapped_text_column(tmp_path):
    texts = _documents(40)
    datasets.Dataset.from_dict({"body": texts[:20]}).to_parquet(str(tmp_path / "a.parquet"))
    datasets.Dataset.from_dict({"body": texts[20:]}).to_csv(str(tmp_path / "b.csv"))
    with pytest.raises(ValueError, match=r"a.parquet has no 'text' column \(it has body\).*columns"):
        _cpt(tmp_path, SourceSpec(str(tmp_path / "a.parquet")))
    mapped = {"columns": {"text": "body"}}
    stats = _cpt(tmp_path, SourceSpec(str(tmp_path / "a.parquet"), **mapped), SourceSpec(str(tmp_path / "b.csv"), **mapped))
    assert [source["read"] for source in stats["sources"]] == [20, 20] and stats["documents_kept"] == 40


def test_hub_ids_go_through_load_dataset_and_a_local_folder_takes_the_same_path(tmp_path, monkeypatch):
    """`hub:FOLDER` is read by `datasets.load_dataset(FOLDER, split=...)`, the call a Hub id gets; offline."""
    folder = tmp_path / "sharegpt"
    folder.mkdir()
    turns = [[{"from": "human" if m["role"] == "user" else ("gpt" if m["role"] == "assistant" else "system"),
               "value": m["content"]} for m in chat] for chat in _chats(12)]
    datasets.Dataset.from_dict({"conversations": turns[:8]}).to_parquet(str(folder / "train-00000.parquet"))
    datasets.Dataset.from_dict({"conversations": turns[8:]}).to_parquet(str(folder / "test-00000.parquet"))
    calls = []
    real_load_dataset = datasets.load_dataset

    def recording_load_dataset(path, *args, **kwargs):
        calls.append((path, kwargs.get("split")))
        return real_load_dataset(path, *args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", recording_load_dataset)
    stats = _sft(tmp_path, SourceSpec(f"hub:{folder}"))
    assert calls == [(str(folder), "train")] and stats["samples_kept"] == 8
    _sft(tmp_path, SourceSpec(f"hub:{folder}", split="test"))
    assert calls[-1] == (str(folder), "test")
    # what names the Hub: `hub:ID` always, a bare owner/name only when no such local path exists
    assert hub_id("tatsu-lab/alpaca") == "tatsu-lab/alpaca" and source_kind(Path("a/b")) == "hub"
    assert hub_id(str(folder)) is None and hub_id("corpus.jsonl") is None
    with pytest.raises(ValueError, match=r"data source hub:.*sharegpt: Unknown split \"dev\""):
        _sft(tmp_path, SourceSpec(f"hub:{folder}", split="dev"))


def test_alpaca_prompt_completion_and_messages_records_build_one_sft_set(tmp_path):
    chats = _chats(30, seed=3)
    alpaca = [{"instruction": c[1]["content"], "input": "Use integers." if i % 2 else "", "output": c[2]["content"]}
              for i, c in enumerate(chats[:10])]
    (tmp_path / "alpaca.json").write_text(json.dumps(alpaca))  # one JSON array, as Alpaca ships
    completions = write_jsonl(tmp_path / "pc.jsonl", [
        {"prompt": c[1]["content"], "completion": c[2]["content"]} if i % 2 else
        {"prompt": c[:2], "completion": [c[2]]}  # trl's conversational prompt-completion
        for i, c in enumerate(chats[10:20])
    ])
    renamed = write_jsonl(tmp_path / "dialog.jsonl", [{"dialog": c} for c in chats[20:]])
    stats = _sft(
        tmp_path, SourceSpec(str(tmp_path / "alpaca.json")), SourceSpec(str(completions)),
        SourceSpec(str(renamed), format="messages", columns={"messages": "dialog"}),
    )
    assert [source["kept"] for source in stats["sources"]] == [10, 10, 10]
    # the Alpaca input is appended to the instruction; the mask covers the output only
    train = datasets.load_from_disk(str(tmp_path / "sft"))["train"]
    assert train.num_rows == 30 and train["completion_mask"] == train["loss_mask"]
    with pytest.raises(ValueError, match=r"dialog.jsonl:1: no chat columns \(it has dialog\)"):
        _sft(tmp_path, SourceSpec(str(renamed)))
    with pytest.raises(ValueError, match="columns maps unknown fields"):
        SourceSpec("x.jsonl", columns={"question": "q"})


def test_the_data_folder_is_a_dataset_dict(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"text": text} for text in _documents(40)])
    config = DataConfig(vocab_size=400, validation_share=0.2, cpt=CptSection(sources=[SourceSpec(str(corpus))], seq_len=64))
    stats = build_cpt(config, tmp_path / "cpt", tmp_path, show_progress=False)
    loaded = datasets.load_from_disk(str(tmp_path / "cpt"))
    assert isinstance(loaded, datasets.DatasetDict) and set(loaded) == {"train", "validation"}
    assert loaded["train"].num_rows == stats["splits"]["train"]["rows"] and loaded["validation"].num_rows > 0
    assert "completion_mask" not in loaded["train"].column_names  # CPT: trl has no name for its mask


def test_an_unknown_hub_id_offline_is_one_clear_line(tmp_path):
    """A bare owner/name with no such local path goes to the Hub; offline, the error says both."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "cache"), "COLUMNS": "400"}
    result = subprocess.run(
        [sys.executable, "-m", "trex_cli.app", "data", "cpt", "--source", "nobody-here/no-such-set", "--run-dir",
         str(tmp_path)], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "data source nobody-here/no-such-set: no such local path, and datasets.load_dataset could not load it" in result.stderr
