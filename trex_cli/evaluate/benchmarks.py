"""Benchmark loaders: every published layout (and trex's own eval split) mapped to one item record.

Layouts, detected from the fields of the first record (JSON array or JSON Lines, whatever the file's
extension says):
- `en_question` / `en_answer` (NL4OPT, OptiBench, IndustryOR, MAMO, OptMATH): the answer is a number, a
  numeric string, "No Best Solution", or the -9999 / -99999 infeasible markers.
- trex's eval split (`trex synth` writes `eval/test.jsonl`): the same fields plus `data_file` (relative
  to the file's folder, given to the program as `data.json`) and `reference_program`.
- Bench4Opt (`problem`, `optimal_value` or `gt_optimal_value`, `data_path` relative to the file's
  folder, given to the program as `data.json`, `reference_code`).
- B4O-ORGEval (`problem`, `data_path`, `reference_lp_path`: a reference model in LP format, relative
  to the file's folder): no objective; graded by structural equivalence with the reference LP.
- anything else through `question_field` / `answer_field` (and `id_field`).

Item ids are the record's `id` field where it has one, else its 0-based position in the file, as a
string. Each item keeps a content hash; each benchmark keeps its file's SHA-256 as its version.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trex_cli.artifacts import sha256_file
from trex_cli.benchmark_files import (
    DATA_FILE_NAME,
    SUBSET_FIELDS,
    detect_layout,
    item_id_of,
    question_of,
    read_records,
    resolve_benchmark,
)
from trex_cli.evaluate.grading import Truth, parse_answer


@dataclass
class BenchmarkItem:
    """One benchmark question with its reference answer (the record every loader maps to)."""

    id: str
    question: str
    truth: Truth
    answer: Any  # the answer exactly as the file has it
    benchmark: str
    version: str  # SHA-256 of the benchmark file
    data_files: dict[str, str] = field(default_factory=dict)  # name in the work folder -> path here
    reference_program: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    reference_model: str | None = None  # B4O-ORGEval: the reference LP file the program's model must match
    content_hash: str = ""

    def __post_init__(self) -> None:
        if not self.content_hash:
            digest = hashlib.sha256()
            digest.update(json.dumps([self.question, self.answer], default=str).encode())
            references = {"(reference model)": self.reference_model} if self.reference_model else {}
            for name, path in sorted({**self.data_files, **references}.items()):
                digest.update(name.encode())
                digest.update(sha256_file(Path(path)).encode())
            self.content_hash = digest.hexdigest()


@dataclass
class Benchmark:
    name: str
    path: Path
    version: str
    layout: str
    items: list[BenchmarkItem]


def load_benchmark(
    spec: str,
    benchmark_dir: str | Path | None = None,
    *,
    question_field: str = "",
    answer_field: str = "",
    id_field: str = "",
    limit: int = 0,
) -> Benchmark:
    """Load one benchmark (a name or a path) into items."""
    name, path = resolve_benchmark(spec, benchmark_dir)
    records = read_records(path)
    if not records:
        raise ValueError(f"{path}: holds no items")
    version = sha256_file(path)
    layout = "mapped" if question_field or answer_field else detect_layout(set(records[0][1]))
    if layout == "mapped" and not (question_field and answer_field):
        raise ValueError(f"{path}: give both --question-field and --answer-field (got only one)")
    if layout == "unknown":
        raise ValueError(
            f"{path}: unknown layout (fields: {', '.join(sorted(records[0][1]))}); pass --question-field "
            "and --answer-field (and --id-field) to say which fields hold the question and the answer"
        )
    folder = path.parent
    items: list[BenchmarkItem] = []
    seen: set[str] = set()
    for position, (line, record) in enumerate(records):
        where = f"{path}:{line}"
        item_id = item_id_of(record, position, where, id_field)
        if item_id in seen:
            raise ValueError(f"{where}: item id {item_id!r} appears twice; pass --id-field to name a unique field")
        seen.add(item_id)
        item = _build_item(layout, record, where, folder, name, version, item_id, question_field, answer_field)
        items.append(item)
        if limit and len(items) >= limit:
            break
    return Benchmark(name=name, path=path, version=version, layout=layout, items=items)


def _field(record: dict, key: str, where: str) -> Any:
    if key not in record:
        raise ValueError(f"{where}: no field {key!r}; fields: {', '.join(record)}")
    return record[key]


def _build_item(
    layout: str,
    record: dict,
    where: str,
    folder: Path,
    name: str,
    version: str,
    item_id: str,
    question_field: str,
    answer_field: str,
) -> BenchmarkItem:
    data_files: dict[str, str] = {}
    reference_program = None
    metadata: dict[str, Any] = {key: record[key] for key in SUBSET_FIELDS if key in record}
    if record.get("data_path"):
        metadata["data_path"] = record["data_path"]  # as the benchmark names it (the paper's prompt shows it)
    if layout == "bench4opt-orgeval":
        question = question_of(layout, record, where)
        reference = _existing(folder / str(_field(record, "reference_lp_path", where)), where)
        if record.get("data_path"):
            data_files[DATA_FILE_NAME] = str(_existing(folder / record["data_path"], where))
        return BenchmarkItem(
            id=item_id, question=question, truth=Truth(infeasible=False), answer=None, benchmark=name,
            version=version, data_files=data_files, reference_program=record.get("reference_code"),
            metadata=metadata, reference_model=str(reference),
        )  # fmt: skip
    question = question_of(layout, record, where, question_field)
    if layout == "mapped":
        answer = _field(record, answer_field, where)
    elif layout in ("en_question", "trex-eval-split"):
        answer = _field(record, "en_answer", where)
        for key in ("family", "representation"):
            if key in record:
                metadata[key] = record[key]
        if layout == "trex-eval-split":
            reference_program = record.get("reference_program")
            if record.get("data_file"):
                data_files[DATA_FILE_NAME] = str(_existing(folder / record["data_file"], where))
    else:  # bench4opt
        answer = record["optimal_value"] if "optimal_value" in record else record["gt_optimal_value"]
        reference_program = record.get("reference_code")
        if record.get("data_path"):
            data_files[DATA_FILE_NAME] = str(_existing(folder / record["data_path"], where))
    try:
        truth = parse_answer(answer)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    if truth is None:
        raise ValueError(f"{where}: item {item_id!r} has no reference answer")
    return BenchmarkItem(
        id=item_id,
        question=question,
        truth=truth,
        answer=answer,
        benchmark=name,
        version=version,
        data_files=data_files,
        reference_program=reference_program,
        metadata=metadata,
    )


def _existing(path: Path, where: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{where}: file {path} does not exist")
    return path
