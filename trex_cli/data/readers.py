"""Turn the sources named in `[data]` into documents (CPT) and conversations (SFT).

A source is one of:
- a synth folder (a finished `trex synth` stage): `cpt_docs/*.jsonl` for CPT, `sft/*.jsonl` for SFT;
- a folder saved by `datasets.save_to_disk` with a `text` (CPT) or `messages` (SFT) column;
- a folder of resources, read recursively: `.md`/`.txt` files (one document each), `.jsonl` files
  (`text` or `messages` per line), `.mps`/`.lp` optimization models (solved with HiGHS and described,
  see `model_files`);
- a single file of any of those kinds.

A malformed line stops the build with an error naming its file and line, or, with `skip_bad`, is
counted and written to the exclusion file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from trex_cli.data.exclusions import ExclusionLog

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
MODEL_SUFFIXES = (".mps", ".lp")
ROLES = ("system", "user", "assistant")


@dataclass(slots=True)
class Document:
    """One CPT document: `source` is the source path as given, `origin` the file and line it came from."""

    id: str
    source: str
    text: str
    origin: str


@dataclass(slots=True)
class Conversation:
    """One SFT sample; `answer_style` is synth's ("model", "model_program", "program") or None."""

    id: str
    source: str
    messages: list[dict]
    answer_style: str | None
    origin: str

    @property
    def text(self) -> str:
        """All message text, the form dedup and decontamination compare."""
        return "\n\n".join(message["content"] for message in self.messages)


class BadInput:
    """Raise or record a malformed input, depending on `skip_bad`."""

    def __init__(self, exclusions: ExclusionLog, skip_bad: bool) -> None:
        self.exclusions = exclusions
        self.skip_bad = skip_bad

    def __call__(self, source: str, where: str, problem: str, fix: str) -> None:
        if not self.skip_bad:
            raise ValueError(f"{where}: {problem}; {fix}, or pass --skip-bad to count and skip bad input")
        self.exclusions.add("bad_input", source=source, where=where, detail=problem)


def source_kind(path: Path) -> str:
    """'synth', 'dataset', 'folder' or 'file'; a missing path is an error that names it."""
    if not path.exists():
        raise FileNotFoundError(f"data source {path} does not exist (check [data] sources or --source)")
    if path.is_file():
        return "file"
    if (path / "cpt_docs").is_dir() or (path / "sft").is_dir() or _manifest_stage(path) == "synth":
        return "synth"
    if (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file():
        return "dataset"
    return "folder"


def _manifest_stage(path: Path) -> str | None:
    manifest = path / "manifest.json"
    if not manifest.is_file():
        return None
    try:
        return json.loads(manifest.read_text()).get("stage")
    except (json.JSONDecodeError, OSError):
        return None


def iter_json_lines(path: Path, source: str, bad: BadInput) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-empty line; malformed lines go to `bad`."""
    with open(path, encoding="utf-8", errors="strict") as stream:
        line_number = 0
        while True:
            try:
                line = stream.readline()
            except UnicodeDecodeError as error:
                bad(source, f"{path}:{line_number + 1}", f"not UTF-8 ({error.reason})", "re-encode the file")
                return
            if not line:
                return
            line_number += 1
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                bad(source, f"{path}:{line_number}", f"not valid JSON ({error.msg}, column {error.colno})", "fix or remove the line")
                continue
            if not isinstance(record, dict):
                bad(source, f"{path}:{line_number}", "expected a JSON object", "write one object per line")
                continue
            yield line_number, record


def _jsonl_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.jsonl"))


# ---------------------------------------------------------------- CPT documents


def read_documents(spec_path: str, bad: BadInput) -> list[Document]:
    """All documents of one CPT source."""
    path = Path(spec_path)
    kind = source_kind(path)
    if kind == "synth":
        folder = path / "cpt_docs"
        if not folder.is_dir():
            raise ValueError(f"synth folder {path} has no cpt_docs/ (run `trex synth` with CPT documents on)")
        documents: list[Document] = []
        for file in _jsonl_files(folder):
            documents.extend(_documents_from_jsonl(file, spec_path, bad))
        return documents
    if kind == "dataset":
        return _documents_from_dataset(path, spec_path)
    if kind == "file":
        return _documents_from_file(path, spec_path, bad)
    documents = []
    ignored = []
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        if file.suffix.lower() in TEXT_SUFFIXES + MODEL_SUFFIXES + (".jsonl",):
            documents.extend(_documents_from_file(file, spec_path, bad))
        elif not file.name.startswith("."):
            ignored.append(file.name)
    if ignored:
        from trex_cli.console import warn

        warn(
            f"{path}: {len(ignored)} files of other types are not read (e.g. {', '.join(ignored[:3])}); "
            "resource folders hold .md, .txt, .jsonl, .mps and .lp files"
        )
    return documents


def _documents_from_file(file: Path, source: str, bad: BadInput) -> list[Document]:
    suffix = file.suffix.lower()
    if suffix == ".jsonl":
        return list(_documents_from_jsonl(file, source, bad))
    if suffix in TEXT_SUFFIXES:
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            bad(source, str(file), f"not UTF-8 ({error.reason})", "re-encode the file")
            return []
        return [Document(id=str(file), source=source, text=text, origin=str(file))]
    if suffix in MODEL_SUFFIXES:
        from trex_cli.data.model_files import describe_model_file

        try:
            text = describe_model_file(file)
        except ValueError as error:
            bad(source, str(file), str(error), "fix the model file")
            return []
        return [Document(id=str(file), source=source, text=text, origin=str(file))]
    raise ValueError(
        f"data source {file}: unsupported file type '{suffix}'; use .jsonl, .md, .txt, .mps or .lp"
    )


def _documents_from_jsonl(file: Path, source: str, bad: BadInput) -> Iterator[Document]:
    for line_number, record in iter_json_lines(file, source, bad):
        text = record.get("text")
        where = f"{file}:{line_number}"
        if not isinstance(text, str):
            bad(source, where, "no string field 'text'", "give each line a 'text' string")
            continue
        record_id = record.get("id")
        yield Document(
            id=str(record_id) if record_id is not None else f"{file.name}:{line_number}",
            source=source,
            text=text,
            origin=where,
        )


def _load_saved_dataset(path: Path, column: str):
    import datasets

    loaded = datasets.load_from_disk(str(path))
    if isinstance(loaded, datasets.DatasetDict):
        if "train" not in loaded:
            raise ValueError(f"dataset {path} has no 'train' split (it has {', '.join(loaded)})")
        loaded = loaded["train"]
    if column not in loaded.column_names:
        raise ValueError(
            f"dataset {path} has no '{column}' column (it has {', '.join(loaded.column_names)}); "
            f"save it with a '{column}' column"
        )
    return loaded


def _documents_from_dataset(path: Path, source: str) -> list[Document]:
    dataset = _load_saved_dataset(path, "text")
    ids = dataset["id"] if "id" in dataset.column_names else None
    return [
        Document(
            id=str(ids[index]) if ids else f"{path.name}:{index}",
            source=source,
            text=text if isinstance(text, str) else "",
            origin=f"{path}[{index}]",
        )
        for index, text in enumerate(dataset["text"])
    ]


# ---------------------------------------------------------------- SFT conversations


def read_conversations(spec_path: str, bad: BadInput) -> list[Conversation]:
    """All chat samples of one SFT source."""
    path = Path(spec_path)
    kind = source_kind(path)
    if kind == "synth":
        folder = path / "sft"
        if not folder.is_dir():
            raise ValueError(f"synth folder {path} has no sft/ (run `trex synth` with SFT samples on)")
        files = _jsonl_files(folder)
    elif kind == "dataset":
        dataset = _load_saved_dataset(path, "messages")
        conversations = []
        for index, row in enumerate(dataset):
            where = f"{path}[{index}]"
            conversation = _conversation(row, f"{path.name}:{index}", spec_path, where, bad)
            if conversation is not None:
                conversations.append(conversation)
        return conversations
    elif kind == "file":
        if path.suffix.lower() != ".jsonl":
            raise ValueError(f"SFT source {path}: expected a .jsonl file with 'messages' per line")
        files = [path]
    else:
        files = sorted(path.rglob("*.jsonl"))
    conversations = []
    for file in files:
        for line_number, record in iter_json_lines(file, spec_path, bad):
            conversation = _conversation(
                record, f"{file.name}:{line_number}", spec_path, f"{file}:{line_number}", bad
            )
            if conversation is not None:
                conversations.append(conversation)
    return conversations


def _conversation(record: dict, fallback_id: str, source: str, where: str, bad: BadInput) -> Conversation | None:
    messages = record.get("messages")
    if not isinstance(messages, list) or not messages:
        bad(source, where, "no 'messages' list", "give each line a non-empty 'messages' list")
        return None
    cleaned = []
    for position, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or message.get("role") not in ROLES
            or not isinstance(message.get("content"), str)
        ):
            bad(
                source,
                where,
                f"message {position} is not {{'role': system|user|assistant, 'content': str}}",
                "fix the message",
            )
            return None
        cleaned.append({"role": message["role"], "content": message["content"]})
    if not any(message["role"] == "assistant" for message in cleaned):
        # an SFT sample teaches through its assistant turns: without one its loss mask would be all zero
        bad(source, where, "no assistant message: nothing to learn from", "add the assistant's answer")
        return None
    record_id = record.get("id")
    style = record.get("answer_style")
    return Conversation(
        id=str(record_id) if record_id is not None else fallback_id,
        source=source,
        messages=cleaned,
        answer_style=style if isinstance(style, str) else None,
        origin=where,
    )
