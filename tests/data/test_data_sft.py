"""SFT: the loss-masked tokens of every sample decode to exactly its assistant messages; samples
without an assistant turn are errors; over-length samples are dropped and counted; packing keeps
sample boundaries; stage "program" keeps the program-only subset."""

from __future__ import annotations

import json
import random

import datasets
import numpy as np
import pytest
from data_fixtures import chat_sample, make_synth_folder, vocabulary, write_jsonl

from trex_cli.data.config import DataConfig, SftSection, SourceSpec
from trex_cli.data.normalize import normalize_text
from trex_cli.data.sft import build_sft, pack_samples, tokenize_conversation
from trex_cli.data.tokenizer import load_tokenizer, train_tokenizer

SEQ_LEN = 400


@pytest.fixture(scope="module")
def synth_with_samples(tmp_path_factory):
    root = tmp_path_factory.mktemp("sft")
    rng = random.Random(11)
    words = vocabulary(400)
    styles = ["program", "model", "model_program"]
    samples = [chat_sample(rng, words, f"toy-{i}", styles[i % 3]) for i in range(60)]
    # one over-length sample
    samples.append(chat_sample(rng, words, "toy-long", "program"))
    samples[-1]["messages"][1]["content"] = " ".join(rng.choice(words) for _ in range(900))
    replay = write_jsonl(root / "replay.jsonl", [
        {"messages": [{"role": "user", "content": f"Say {n} twice."}, {"role": "assistant", "content": f"{n} {n}"}]}
        for n in range(100, 120)
    ])
    return root, make_synth_folder(root / "synth", ["unused"], samples), replay, samples


def _expected_answers(samples) -> dict[str, list[str]]:
    return {
        sample["id"]: [normalize_text(m["content"]) for m in sample["messages"] if m["role"] == "assistant"]
        for sample in samples
    }


def _segments(row_ids, row_positions, row_mask):
    """(ids, mask) of each sample in a row: segments start where position_ids is 0."""
    starts = list(np.nonzero(np.array(row_positions) == 0)[0]) + [len(row_ids)]
    return [(row_ids[a:b], row_mask[a:b]) for a, b in zip(starts[:-1], starts[1:], strict=True)]


def _masked_runs(ids, mask) -> list[list[int]]:
    runs, current = [], []
    for token, flag in zip(ids, mask, strict=True):
        if flag:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


@pytest.mark.parametrize("packing", [False, True])
def test_masked_tokens_decode_to_exactly_the_assistant_messages(synth_with_samples, packing):
    root, synth, replay, samples = synth_with_samples
    out = root / f"sft-packing-{packing}"
    config = DataConfig(
        vocab_size=500,
        sft=SftSection(sources=[SourceSpec(str(synth)), SourceSpec(str(replay))], seq_len=SEQ_LEN, packing=packing),
    )
    stats = build_sft(config, out, root, show_progress=False)
    assert stats["drops_by_reason"] == {"too_long": 1}
    assert json.loads((out / "exclusions.jsonl").read_text())["id"] == "toy-long"
    tokenizer = load_tokenizer(out / "tokenizer")
    answers_by_rendering = {}
    for sample in samples[:-1]:
        messages = [{**m, "content": normalize_text(m["content"])} for m in sample["messages"]]
        answers_by_rendering[tokenizer.render_chat(messages)] = _expected_answers([sample])[sample["id"]]
    for line in replay.read_text().splitlines():
        messages = json.loads(line)["messages"]
        answers_by_rendering[tokenizer.render_chat(messages)] = [messages[1]["content"]]
    checked = 0
    for split in ("train", "validation"):
        dataset = datasets.load_from_disk(str(out / split))
        for row in dataset:
            if packing:
                assert len(row["input_ids"]) == SEQ_LEN
            assert len(row["input_ids"]) <= SEQ_LEN
            for ids, mask in _segments(row["input_ids"], row["position_ids"], row["loss_mask"]):
                if all(token == tokenizer.pad_token_id for token in ids):
                    assert not any(mask)
                    continue
                rendering = tokenizer.decode(ids)
                expected = answers_by_rendering[rendering]
                decoded = [tokenizer.decode(run, skip_special_tokens=True) for run in _masked_runs(ids, mask)]
                assert decoded == expected
                checked += 1
    assert checked == len(samples) - 1 + 20


def test_saved_chat_template_renders_the_same_tokens_in_transformers(synth_with_samples):
    root, synth, _, samples = synth_with_samples
    from transformers import AutoTokenizer

    out = root / "sft-packing-False"
    hf = AutoTokenizer.from_pretrained(str(out / "tokenizer"), local_files_only=True)
    tokenizer = load_tokenizer(out / "tokenizer")
    messages = [{**m, "content": normalize_text(m["content"])} for m in samples[0]["messages"]]
    ids, mask = tokenize_conversation(tokenizer, messages)
    assert hf.apply_chat_template(messages, tokenize=False) == tokenizer.decode(ids)
    prompt = hf.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|assistant|>") and tokenizer.decode(ids).startswith(prompt)
    assert ids[-1] == hf.eos_token_id and mask[-1] == 1  # the answer's end is learned


def test_no_assistant_message_is_an_error_naming_file_and_line(tmp_path):
    bad = write_jsonl(tmp_path / "chats.jsonl", [
        {"messages": [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi"}]},
        {"messages": [{"role": "user", "content": "only a question, no answer"}]},
    ])
    config = DataConfig(vocab_size=300, validation_share=0.0, sft=SftSection(sources=[SourceSpec(str(bad))]))
    with pytest.raises(ValueError, match=r"chats.jsonl:2: .*no assistant message"):
        build_sft(config, tmp_path / "out", tmp_path, show_progress=False)
    skipping = DataConfig(vocab_size=300, validation_share=0.0, skip_bad=True, sft=SftSection(sources=[SourceSpec(str(bad))]))
    stats = build_sft(skipping, tmp_path / "out", tmp_path, show_progress=False)
    assert stats["samples_kept"] == 1 and stats["drops_by_reason"] == {"bad_input": 1}
    row = json.loads((tmp_path / "out" / "exclusions.jsonl").read_text())
    assert row["where"] == f"{bad}:2" and "no assistant message" in row["detail"]
    tokenizer = train_tokenizer(["hello there hi"] * 10, 300)
    with pytest.raises(ValueError, match="no assistant message"):
        tokenize_conversation(tokenizer, [{"role": "user", "content": "q"}])


def test_program_stage_keeps_program_answers_and_replay(synth_with_samples):
    root, synth, replay, samples = synth_with_samples
    config = DataConfig(
        vocab_size=500,
        validation_share=0.0,
        sft=SftSection(sources=[SourceSpec(str(synth)), SourceSpec(str(replay))], seq_len=SEQ_LEN, stage="program"),
    )
    stats = build_sft(config, root / "sft-program", root, show_progress=False)
    assert stats["answer_styles"] == {"program": 20, "none": 20}
    synth_row = stats["sources"][0]
    assert synth_row["not_selected_for_stage"] == 40
    assert json.loads((root / "sft-program" / "meta.json").read_text())["stage"] == "program"


def test_pack_samples_best_fit():
    lengths = [7, 5, 3, 3, 2, 6]
    bins = pack_samples(np.array(lengths), 10)
    assert sorted(i for b in bins for i in b) == list(range(6))
    assert all(sum(lengths[i] for i in b) <= 10 for b in bins)
    assert len(bins) == 3  # 26 tokens need at least three rows of 10


def test_deepseek_style_tokenizer_without_template_gets_the_v4_chat_format(tmp_path):
    """A model folder shaped like DeepSeek-V4's (tokenizer.json + tokenizer_config.json with AddedToken
    dicts, no chat template, no pad token): SFT renders the V4 non-thinking chat format."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = random.Random(3)
    words = vocabulary(200)
    bos, eos = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(
        [" ".join(rng.choice(words) for _ in range(50)) for _ in range(50)],
        trainers.BpeTrainer(vocab_size=400, special_tokens=[bos, eos, "<｜User｜>", "<｜Assistant｜>", "</think>"],
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False),
    )
    model = tmp_path / "model"
    model.mkdir()
    backend.save(str(model / "tokenizer.json"))
    (model / "tokenizer_config.json").write_text(json.dumps({
        "add_bos_token": False,
        "bos_token": {"content": bos, "special": True},
        "eos_token": {"content": eos, "special": True},
        "tokenizer_class": "PreTrainedTokenizerFast",
    }, ensure_ascii=False))
    chats = write_jsonl(tmp_path / "chats.jsonl", [chat_sample(rng, words, f"d{i}") for i in range(6)])
    config = DataConfig(tokenizer=str(model), validation_share=0.0, sft=SftSection(sources=[SourceSpec(str(chats))], seq_len=2048))
    stats = build_sft(config, tmp_path / "sft", tmp_path, show_progress=False)
    assert stats["samples_kept"] == 6
    saved = json.loads((tmp_path / "sft" / "tokenizer" / "tokenizer_config.json").read_text())
    assert saved["add_bos_token"] is False and saved["pad_token"] == eos and "</think>" in saved["chat_template"]
    row = datasets.load_from_disk(str(tmp_path / "sft" / "train"))[0]
    tokenizer = load_tokenizer(tmp_path / "sft" / "tokenizer")
    text = tokenizer.decode(row["input_ids"])
    assert text.startswith(bos + "You are an operations research expert.<｜User｜>")
    assert "<｜Assistant｜></think>" in text and text.endswith(eos)
    masked = tokenizer.decode([t for t, m in zip(row["input_ids"], row["loss_mask"], strict=True) if m])
    assert masked.endswith(eos) and "</think>" not in masked and "<｜User｜>" not in masked
