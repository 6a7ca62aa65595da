"""Benchmark loaders for every layout (fixtures built here), name resolution, prompts, extraction."""

from __future__ import annotations

import json

import pytest
from eval_fixtures import bench4opt_fixture, en_question_rows, write_jsonl

from trex_cli.benchmark_files import DATA_FILE_NAME, resolve_benchmark
from trex_cli.evaluate.benchmarks import load_benchmark
from trex_cli.evaluate.grading import Truth
from trex_cli.evaluate.prompts import PromptBuilder, extract_program


def test_en_question_as_json_lines_and_as_json_array_load_the_same(tmp_path):
    rows = en_question_rows()
    lines = write_jsonl(tmp_path / "lines.json", rows)  # a .json file holding JSON Lines
    array = tmp_path / "array.json"
    array.write_text(json.dumps(rows, indent=2))
    from_lines, from_array = load_benchmark(str(lines)), load_benchmark(str(array))
    assert [i.truth for i in from_lines.items] == [i.truth for i in from_array.items]
    assert [i.id for i in from_lines.items] == ["0", "1", "2", "3"]  # positions, as strings
    assert from_lines.items[0].truth == Truth(infeasible=False, value=7.0)
    assert from_lines.items[2].truth.infeasible and from_lines.items[3].truth.infeasible
    assert from_lines.version != from_array.version  # the file hash is the version
    assert from_lines.items[0].content_hash == from_array.items[0].content_hash


def test_ids_come_from_the_id_field_when_there_is_one(tmp_path):
    rows = [dict(row, id=f"q{n}", difficulty="Easy") for n, row in enumerate(en_question_rows())]
    benchmark = load_benchmark(str(write_jsonl(tmp_path / "industry.json", rows)))
    assert [i.id for i in benchmark.items] == ["q0", "q1", "q2", "q3"]
    assert benchmark.items[0].metadata["difficulty"] == "Easy"


def test_bench4opt_items_carry_their_data_file_and_reference_program(tmp_path):
    benchmark = load_benchmark(str(bench4opt_fixture(tmp_path / "b4o")))
    assert benchmark.layout == "bench4opt"
    item = benchmark.items[1]
    assert item.id == "B4O_1" and item.truth.value == 12.0
    assert json.loads(open(item.data_files[DATA_FILE_NAME]).read())["capacity"] == 6.0
    assert "pyo.SolverFactory" in item.reference_program


def test_the_synth_eval_split_is_read_with_its_data_files(tmp_path):
    folder = tmp_path / "synth" / "eval"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "p1.json").write_text('{"capacity": 3}')
    write_jsonl(folder / "test.jsonl", [
        {"id": "p1", "en_question": "Q1", "en_answer": "3.0", "family": "knapsack", "difficulty": "small",
         "representation": "file", "data_file": "data/p1.json", "reference_program": "print('Objective: 3')"},
        {"id": "p2", "en_question": "Q2", "en_answer": "No Best Solution", "family": "knapsack", "difficulty": "small",
         "representation": "text", "data_file": None, "reference_program": "print('No Best Solution')"},
    ])  # fmt: skip
    name, path = resolve_benchmark(str(tmp_path / "synth"))
    benchmark = load_benchmark(str(path))
    assert name == "synth" and benchmark.layout == "trex-eval-split"
    assert list(benchmark.items[0].data_files) == [DATA_FILE_NAME]
    assert benchmark.items[1].data_files == {} and benchmark.items[1].truth.infeasible


def test_a_generic_mapping_reads_other_layouts(tmp_path):
    path = write_jsonl(tmp_path / "custom.jsonl", [{"key": "a", "text": "Q", "gold": "1.5e+06"}])
    with pytest.raises(ValueError, match="--question-field"):
        load_benchmark(str(path))
    benchmark = load_benchmark(str(path), question_field="text", answer_field="gold", id_field="key")
    assert benchmark.items[0].id == "a" and benchmark.items[0].truth.value == 1.5e6


def test_loader_errors_name_the_file_and_line(tmp_path):
    bad_answer = write_jsonl(tmp_path / "bad.jsonl", [{"en_question": "Q", "en_answer": "1"}, {"en_question": "Q", "en_answer": "lots"}])
    with pytest.raises(ValueError, match=r"bad.jsonl:2: .*neither a number"):
        load_benchmark(str(bad_answer))
    duplicate = write_jsonl(tmp_path / "dup.jsonl", [{"id": 1, "en_question": "Q", "en_answer": 1}] * 2)
    with pytest.raises(ValueError, match="appears twice"):
        load_benchmark(str(duplicate))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"en_question": "Q", "en_answer": 1}\n{not json\n')
    with pytest.raises(ValueError, match="broken.jsonl:2"):
        load_benchmark(str(broken))
    orgeval = write_jsonl(tmp_path / "org.jsonl", [{"id": "x", "problem": "P", "reference_lp_path": "a.lp", "data_path": "d"}])
    with pytest.raises(FileNotFoundError, match=r"org.jsonl:1: file .*a.lp does not exist"):
        load_benchmark(str(orgeval))  # B4O-ORGEval loads, but its reference LP must be there


def test_names_resolve_under_the_benchmark_folder_or_the_environment(tmp_path, monkeypatch):
    write_jsonl(tmp_path / "slai_trex_eval" / "NL4OPT" / "test.jsonl", en_question_rows())
    write_jsonl(tmp_path / "sirl_test_data" / "IndustryOR_fixedV2.json", en_question_rows())
    assert resolve_benchmark("nl4opt", tmp_path) == ("nl4opt", tmp_path / "slai_trex_eval" / "NL4OPT" / "test.jsonl")
    monkeypatch.setenv("TREX_BENCHMARK_DIR", str(tmp_path))
    assert resolve_benchmark("industryor")[1].name == "IndustryOR_fixedV2.json"
    assert len(load_benchmark("nl4opt", limit=2).items) == 2
    with pytest.raises(FileNotFoundError, match="mamo-easy"):
        resolve_benchmark("mamo-easy")
    with pytest.raises(FileNotFoundError, match="known names"):
        resolve_benchmark("no-such-benchmark")
    monkeypatch.delenv("TREX_BENCHMARK_DIR")
    with pytest.raises(ValueError, match="--benchmark-dir"):
        resolve_benchmark("nl4opt")


def test_prompt_styles_and_template_files(tmp_path):
    benchmark = load_benchmark(str(bench4opt_fixture(tmp_path / "b4o")))
    item = benchmark.items[0]
    default = PromptBuilder("trex").messages(item)[-1]["content"]
    assert item.question in default and "data.json" in default and "Pyomo" in default and "```python" in default
    # the paper's own templates: the data.json one for Bench4Opt items, the tagged one for questions
    system, user = PromptBuilder("trex-paper").messages(item)
    assert system["role"] == "system" and "gurobipy" in system["content"]
    assert user["content"].startswith("# Problem Description\n" + item.question)
    assert "lp_final/data_0.json" in user["content"] and "{{" not in user["content"]
    question = load_benchmark(str(write_jsonl(tmp_path / "q.jsonl", en_question_rows()))).items[0]
    system, user = PromptBuilder("trex-paper").messages(question)
    assert "<python>" in system["content"] and user["content"].startswith("Answer the following")
    assert question.question in user["content"] and user["content"].endswith("Please think step by step.")
    template = tmp_path / "template.txt"
    template.write_text('Solve: {question}\nReply with JSON like {"objective": 1}.{data_note}')
    custom = PromptBuilder(str(template)).messages(item)[-1]["content"]
    assert custom.startswith("Solve: " + item.question) and '{"objective": 1}' in custom
    (tmp_path / "empty.txt").write_text("no placeholder")
    with pytest.raises(ValueError, match="placeholder"):
        PromptBuilder(str(tmp_path / "empty.txt"))
    with pytest.raises(FileNotFoundError):
        PromptBuilder("no-such-style")


def test_program_extraction():
    fenced = "Model...\n```python\nprint('draft')\n```\nBetter:\n```python\nprint('final')\n```\n"
    assert extract_program(fenced) == "print('final')\n"
    tagged = "<think>```python\nprint('thinking')\n```</think><model>max x</model><python>\nprint('tagged')\n</python>"
    assert extract_program(tagged) == "print('tagged')\n"
    tagged_with_fence = "<python>\n```python\nprint('inner')\n```\n</python>"
    assert extract_program(tagged_with_fence) == "print('inner')\n"
    assert extract_program("<think>```python\nprint('only a draft')\n```</think> no code after") is None
    assert extract_program("plain text, no program") is None
    assert extract_program("```\nprint('untagged fence')\n```") == "print('untagged fence')\n"
    truncated = "```python\nimport pyomo.environ as pyo\nmodel = pyo.Concr"
    assert extract_program(truncated).startswith("import pyomo")
