"""Benchmark files as files: where a named benchmark lies, how its records are read (JSON array or JSON
Lines), which published layout they follow, and which field holds each item's question and id. The eval
(`trex_cli.evaluate.benchmarks` builds graded items from them) and decontamination (`trex_cli.data`
indexes their questions) read benchmarks through this one module, so both see the same items.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

BENCHMARK_DIR_ENV = "TREX_BENCHMARK_DIR"
DATA_FILE_NAME = "data.json"  # what a program opens in its working folder

# Fields that split a benchmark into subsets for per-subset Pass@1 (problem type, wording, difficulty).
SUBSET_FIELDS = ("problem_type", "problem_class", "wp_type", "difficulty")

# Benchmark names -> candidate paths under the benchmark folder (first existing wins).
NAMED_BENCHMARKS: dict[str, tuple[str, ...]] = {
    "nl4opt": ("slai_trex_eval/NL4OPT/test.jsonl", "NL4OPT/test.jsonl"),
    "optibench": ("slai_trex_eval/optibench/OptiBench.json", "optibench/OptiBench.json"),
    "b4o-feasible": ("slai_trex_eval/bench4opt_feasible/test.jsonl", "bench4opt_feasible/test.jsonl"),
    "b4o-solver": ("slai_trex_eval/bench4opt/solver_test.jsonl", "bench4opt/solver_test.jsonl"),
    "b4o-orgeval": ("slai_trex_eval/bench4opt/test.jsonl", "bench4opt/test.jsonl"),
    "industryor": ("sirl_test_data/IndustryOR_fixedV2.json", "IndustryOR_fixedV2.json"),
    "mamo-easy": ("sirl_test_data/MAMO_EasyLP_fixed.jsonl", "MAMO_EasyLP_fixed.jsonl"),
    "mamo-complex": ("sirl_test_data/MAMO_ComplexLP_fixed.jsonl", "MAMO_ComplexLP_fixed.jsonl"),
    "optmath": ("sirl_test_data/OptMATH_Bench_166.jsonl", "OptMATH_Bench_166.jsonl"),
    "optmath-193": ("sirl_test_data/OptMATH_Bench_193.jsonl", "OptMATH_Bench_193.jsonl"),
    "nl4opt-sirl": ("sirl_test_data/NL4OPT.jsonl",),
    "optibench-605": ("sirl_test_data/OptiBench.jsonl",),
    # trex's own held-out split, under a run folder or a synth folder
    "synth": ("synth/eval/test.jsonl", "eval/test.jsonl"),
}


def read_records(path: Path) -> list[tuple[int, dict]]:
    """(line number, record) pairs from a JSON array or a JSON Lines file."""
    text = Path(path).read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from None
        records = list(enumerate(rows, start=1))  # position in the array stands in for a line
    else:
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append((number, json.loads(line)))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not valid JSON ({error})") from None
    for number, record in records:
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object per item, got {type(record).__name__}")
    return records


def detect_layout(keys: set[str]) -> str:
    if "en_question" in keys and "data_file" in keys:
        return "trex-eval-split"
    if "en_question" in keys:
        return "en_question"
    if "problem" in keys and ({"optimal_value", "gt_optimal_value"} & keys):
        return "bench4opt"
    if "problem" in keys and "reference_lp_path" in keys:
        return "bench4opt-orgeval"
    return "unknown"


def resolve_benchmark(spec: str, benchmark_dir: str | Path | None = None) -> tuple[str, Path]:
    """(name, file) for a benchmark name or a path. Names are looked up under `benchmark_dir`, else
    $TREX_BENCHMARK_DIR; a folder holding an `eval/test.jsonl` (a synth folder) is accepted too."""
    candidate = Path(spec)
    if candidate.is_file():
        return candidate.stem if candidate.stem != "test" else candidate.parent.name, candidate
    if candidate.is_dir() and (candidate / "eval" / "test.jsonl").is_file():
        return "synth", candidate / "eval" / "test.jsonl"
    key = spec.lower()
    if key not in NAMED_BENCHMARKS:
        raise FileNotFoundError(
            f"benchmark {spec!r} is neither a file nor a known name; known names: "
            f"{', '.join(NAMED_BENCHMARKS)} (or give a path to a JSON / JSONL file)"
        )
    root = benchmark_dir or os.environ.get(BENCHMARK_DIR_ENV, "")
    if not root:
        raise ValueError(
            f"benchmark {spec!r}: set --benchmark-dir (or ${BENCHMARK_DIR_ENV}, or [eval] benchmark_dir) "
            "to the folder holding the benchmark files"
        )
    for relative in NAMED_BENCHMARKS[key]:
        path = Path(root) / relative
        if path.is_file():
            return key, path
    tried = ", ".join(str(Path(root) / r) for r in NAMED_BENCHMARKS[key])
    raise FileNotFoundError(f"benchmark {spec!r}: none of these files exists: {tried}")


# layout -> the field holding the question (a "mapped" file names its own)
QUESTION_FIELDS = {
    "trex-eval-split": "en_question",
    "en_question": "en_question",
    "bench4opt": "problem",
    "bench4opt-orgeval": "problem",
}


def question_of(layout: str, record: dict, where: str, question_field: str = "") -> str:
    """The item's question text; a clear error when the field is missing or empty."""
    key = question_field if layout == "mapped" else QUESTION_FIELDS[layout]
    if key not in record:
        raise ValueError(f"{where}: no field {key!r}; fields: {', '.join(record)}")
    question = record[key]
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"{where}: the question is empty or not a string")
    return question


def item_id_of(record: dict, position: int, where: str, id_field: str = "") -> str:
    """The record's `id_field`, else its `id`, else its 0-based position in the file, as a string."""
    if id_field:
        if id_field not in record:
            raise ValueError(f"{where}: no field {id_field!r} (--id-field); fields: {', '.join(record)}")
        return str(record[id_field])
    return str(record["id"]) if "id" in record else str(position)


def benchmark_questions(spec: str | Path, benchmark_dir: str | Path | None = None) -> tuple[Path, list[tuple[str, str]]]:
    """(file, [(item id, question)]) of one benchmark name, file or synth folder."""
    _, path = resolve_benchmark(str(spec), benchmark_dir)
    records = read_records(path)
    if not records:
        return path, []
    layout = detect_layout(set(records[0][1]))
    if layout == "unknown":
        raise ValueError(f"{path}: unknown benchmark layout (fields: {', '.join(sorted(records[0][1]))}); "
                         "give a file with en_question or problem fields")
    return path, [(item_id_of(record, position, f"{path}:{line}"), question_of(layout, record, f"{path}:{line}"))
                  for position, (line, record) in enumerate(records)]
