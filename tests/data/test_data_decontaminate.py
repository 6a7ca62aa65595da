"""Decontamination: a benchmark question planted in a training document removes that document, and
the exclusion file names the benchmark and the item."""

from __future__ import annotations

import json
import random

import numpy as np
from data_fixtures import make_synth_folder, random_document, vocabulary, write_jsonl

from trex_cli.data.config import CptSection, DataConfig, SourceSpec
from trex_cli.data.cpt import build_cpt
from trex_cli.data.decontaminate import BenchmarkIndex, read_benchmark_questions
from trex_cli.data.normalize import WordHasher

QUESTION = (
    "A fishery wants to transport their catch. They can either use local sled dogs or trucks. Local sled "
    "dogs can take 100 fish per trip while trucks can take 300 fish per trip. Formulate an LP to maximize "
    "the number of fish that can be transported."
)


def _benchmarks(tmp_path):
    """One file per benchmark form the eval loaders read."""
    jsonl = write_jsonl(tmp_path / "bench" / "nl4opt.jsonl", [
        {"en_question": "Some unrelated question about scheduling nurses over seven days with rest rules.", "en_answer": "3.0"},
        {"en_question": QUESTION, "en_answer": "3000.0"},
    ])
    array = tmp_path / "bench" / "optibench.json"
    array.write_text(json.dumps([{"en_question": "Minimize the cost of a diet with two foods and three nutrients please.", "en_answer": "1.5"}]))
    (tmp_path / "bench" / "lp_final").mkdir()
    (tmp_path / "bench" / "lp_final" / "data_7.json").write_text('{"capacity": [3, 4]}')
    b4o = write_jsonl(tmp_path / "bench" / "b4o.jsonl", [
        {"id": "BENCH4OPT_7", "problem": "**Problem Statement: Network Flow Problem in water_distribution_system** pipes carry water",
         "data_path": "lp_final/data_7.json", "optimal_value": 531.15}
    ])
    return jsonl, array, b4o


def test_every_benchmark_form_is_read(tmp_path):
    jsonl, array, b4o = _benchmarks(tmp_path)
    synth = make_synth_folder(tmp_path / "synth", ["doc"], eval_items=[
        {"id": "toy-eval-1", "en_question": "How many trucks?", "en_answer": "3.0"}
    ])
    assert [item.item_id for item, _ in read_benchmark_questions(jsonl)] == ["0", "1"]
    assert read_benchmark_questions(array)[0][1].startswith("Minimize the cost")
    assert read_benchmark_questions(b4o)[0][0].item_id == "BENCH4OPT_7"
    assert read_benchmark_questions(synth)[0][0].item_id == "toy-eval-1"
    # B4O-ORGEval has no answer to score, so eval refuses it, but its questions must not leak either
    orgeval = write_jsonl(tmp_path / "bench" / "orgeval.jsonl", [
        {"id": "B4O_1", "problem": "Schedule three machines over a week.", "reference_lp_path": "lp_code/1.lp"}
    ])
    assert read_benchmark_questions(orgeval)[0][0].item_id == "B4O_1"


def test_index_finds_question_through_case_and_punctuation_changes(tmp_path):
    jsonl, array, b4o = _benchmarks(tmp_path)
    hasher = WordHasher()
    index = BenchmarkIndex([jsonl, array, b4o], ngram=13, hasher=hasher)
    rng = random.Random(0)
    words = vocabulary(500)
    clean_text = random_document(rng, words, 300)
    assert index.find(clean_text, hasher(clean_text)) is None
    # a 13-word window of the question, reformatted, inside a longer document
    window = " ".join(QUESTION.split()[10:23]).upper().replace(" ", "  ,")
    contaminated = clean_text + "\n\n" + window + "\n\n" + random_document(rng, words, 50)
    hit = index.find(contaminated, hasher(contaminated))
    assert hit is not None and hit.benchmark == str(jsonl) and hit.item_id == "1"
    assert len(hit.ngram.split()) == 13
    # a 12-word window is not enough
    shorter = clean_text + " " + " ".join(QUESTION.split()[10:22])
    assert index.find(shorter, hasher(shorter)) is None
    # a question shorter than n words still matches when it appears whole
    short = write_jsonl(tmp_path / "short.jsonl", [{"en_question": "maximize widgets made by two machines", "en_answer": "1"}])
    short_index = BenchmarkIndex([short], ngram=13)
    text = clean_text + " Maximize widgets made by two machines. " + clean_text
    assert short_index.find(text, short_index.hasher(text)).item_id == "0"


def test_planted_question_removed_from_cpt_and_named_in_exclusions(tmp_path):
    jsonl, array, b4o = _benchmarks(tmp_path)
    rng = random.Random(1)
    words = vocabulary(800)
    documents = [random_document(rng, words, rng.randint(120, 300)) for _ in range(60)]
    documents[17] = documents[17] + "\n\nExample: " + QUESTION.lower() + "\n"
    synth = make_synth_folder(tmp_path / "synth", documents)
    config = DataConfig(
        vocab_size=512,
        decontaminate=[str(jsonl), str(array), str(b4o)],
        cpt=CptSection(sources=[SourceSpec(str(synth))], seq_len=128),
    )
    out = tmp_path / "data" / "cpt"
    stats = build_cpt(config, out, tmp_path, show_progress=False)
    assert stats["drops_by_reason"] == {"benchmark_overlap": 1}
    rows = [json.loads(line) for line in (out / "exclusions.jsonl").read_text().splitlines()]
    assert len(rows) == 1
    assert rows[0]["id"] == "doc-17" and rows[0]["benchmark"] == str(jsonl) and rows[0]["item"] == "1"
    assert rows[0]["where"].endswith("shard-00000.jsonl:18")
    # the question's words appear nowhere in the packed data
    import datasets

    from trex_cli.data.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(out / "tokenizer")
    for split in ("train", "validation"):
        ids = np.concatenate([np.array(r) for r in datasets.load_from_disk(str(out / split))["input_ids"]] or [np.zeros(0)])
        assert "sled dogs" not in tokenizer.decode(ids.astype(int).tolist())
