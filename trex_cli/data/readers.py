"""Turn the sources named in `[data]` into documents (CPT) and conversations (SFT).

A source is one of:
- a synth folder (a finished `trex synth` stage): `cpt_docs/*.jsonl` for CPT, `sft/*.jsonl` for SFT;
- a folder saved by `datasets.save_to_disk` (a Dataset, or a DatasetDict whose `split` is read);
- a Hugging Face Hub dataset id (`owner/name`, or `hub:ID` to force the Hub loader, which is also how a
  local folder of data files is read as `datasets.load_dataset(folder)` reads it);
- a folder of resources, read recursively: `.md`/`.txt` files (one document each), `.jsonl` files,
  `.mps`/`.lp` optimization models (solved with HiGHS and described, see `model_files`);
- a single file of any of those kinds, or a `.parquet`, `.json` or `.csv` file (read by `datasets`).

Records (JSONL lines, dataset rows) are read in the formats the tools our users come from write:
`text` (CPT); for SFT trl's `messages` (role/content), ShareGPT's `conversations` (from/value), Alpaca's
`instruction`/`input`/`output` and trl's `prompt`/`completion` (strings or message lists). `format =
"auto"` recognizes each record by its columns; `columns` maps these names to a dataset's own.

A malformed line stops the build with an error naming its file and line, or, with `skip_bad`, is
counted and written to the exclusion file; each line is decoded on its own, so a bad byte costs only
its line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from trex_cli.data.config import SourceSpec
from trex_cli.data.exclusions import ExclusionLog

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
MODEL_SUFFIXES = (".mps", ".lp")
# file types `datasets` reads (its packaged builders), by suffix
TABLE_SUFFIXES = {".parquet": "parquet", ".json": "json", ".csv": "csv"}
ROLES = ("system", "user", "assistant")
HUB_PREFIX = "hub:"
# what `datasets.load_dataset` takes as a Hub id: `name` or `owner/name`
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
# ShareGPT speakers -> chat roles
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "chatgpt": "assistant", "model": "assistant", "system": "system"}


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


def hub_id(path: str) -> str | None:
    """The id to give `datasets.load_dataset` when `path` names a Hub dataset, else None: `hub:ID`
    always, a bare `owner/name` only when no such local path exists."""
    if path.startswith(HUB_PREFIX):
        return path[len(HUB_PREFIX):]
    if not Path(path).exists() and HUB_ID.match(path) and not Path(path).suffix:
        return path
    return None


def source_kind(path: Path) -> str:
    """'hub', 'synth', 'dataset', 'folder' or 'file'; a missing path is an error that names it."""
    if hub_id(str(path)) is not None:
        return "hub"
    if not path.exists():
        raise FileNotFoundError(
            f"data source {path} does not exist (check [data] sources or --source; a Hub dataset is "
            f"owner/name or {HUB_PREFIX}ID)"
        )
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


def iter_json_lines(path: Path, source: str, bad: BadInput, empty_is_bad: bool = True) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-empty line; malformed lines go to `bad`. Each line is decoded
    on its own, so one bad byte costs its line only; a file with no record at all goes to `bad` too,
    unless `empty_is_bad` is False (a synth shard of a block whose candidates were all rejected)."""
    records = 0
    with open(path, "rb") as stream:
        for line_number, raw in enumerate(stream, start=1):
            where = f"{path}:{line_number}"
            try:
                line = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                bad(source, where, f"not UTF-8 (byte {raw[error.start]:#04x} at column {error.start + 1})",
                    "re-encode the line as UTF-8")
                continue
            if not line.strip():
                continue
            records += 1
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                bad(source, where, f"not valid JSON ({error.msg}, column {error.colno})", "fix or remove the line")
                continue
            if not isinstance(record, dict):
                bad(source, where, "expected a JSON object", "write one object per line")
                continue
            yield line_number, record
    if records == 0 and empty_is_bad:
        bad(source, str(path), "the file is empty (no JSON lines)", "fill it or remove it from the sources")


def _jsonl_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.jsonl"))


def _field(record: dict, spec: SourceSpec, name: str):
    """`record`'s value for trex's field `name`, through the source's column mapping."""
    return record.get(spec.columns.get(name, name))


def load_table(spec: SourceSpec, path: Path | None = None):
    """A `datasets.Dataset` for a Hub id, a local folder given as one, a saved dataset or a data file:
    the split `spec.split` of whichever it is. Failures are ValueErrors that name the source."""
    import datasets

    kind = "file" if path is not None else source_kind(Path(spec.path))
    try:
        if kind == "hub":
            identifier = hub_id(spec.path)
            loaded = datasets.load_dataset(
                identifier, name=spec.subset or None, split=spec.split, revision=spec.revision or None
            )
        elif kind == "dataset":
            loaded = datasets.load_from_disk(spec.path)
            if isinstance(loaded, datasets.DatasetDict):
                if spec.split not in loaded:
                    raise ValueError(f"it has no split '{spec.split}' (it has {', '.join(loaded)}); set the source's split")
                loaded = loaded[spec.split]
        else:
            builder = TABLE_SUFFIXES[path.suffix.lower()]
            loaded = datasets.load_dataset(builder, data_files=str(path), split="train")
    except ValueError as error:
        raise ValueError(f"data source {path or spec.path}: {error}") from None
    except Exception as error:  # datasets raises its own types (not found, gated, offline, parse errors)
        what = "no such local path, and " if kind == "hub" and not spec.path.startswith(HUB_PREFIX) else ""
        reader = "datasets.load_from_disk" if kind == "dataset" else "datasets.load_dataset"
        raise ValueError(
            f"data source {path or spec.path}: {what}{reader} could not load it ({type(error).__name__}: {error}); "
            "check the path or id, the source's split and subset, and for a gated Hub dataset `hf auth login`"
        ) from None
    return loaded


def _table_records(
    spec: SourceSpec, path: Path | None = None, required: str | None = None
) -> Iterator[tuple[str, str, dict]]:
    """(fallback id, where, row) for every row of a table source (see `load_table`); a table without
    the `required` column, or without rows, is an error naming the source."""
    table = load_table(spec, path)
    name = (path or Path(spec.path)).name
    label = str(path) if path is not None else spec.path
    if required is not None and required not in table.column_names:
        raise ValueError(
            f"data source {label} has no '{required}' column (it has {', '.join(table.column_names)}); "
            f"name the column it has with the source's columns = {{ text = \"...\" }}"
        )
    if table.num_rows == 0:
        raise ValueError(f"data source {label}: the {spec.split} split is empty (no rows)")
    for index, row in enumerate(table):
        yield f"{name}:{index}", f"{label}[{index}]", row


# ---------------------------------------------------------------- CPT documents


def read_documents(spec: SourceSpec, bad: BadInput) -> list[Document]:
    """All documents of one CPT source."""
    return list(iter_documents(spec, bad))


def iter_documents(spec: SourceSpec, bad: BadInput) -> Iterator[Document]:
    """The documents of one CPT source, one at a time, in `read_documents`' order (a build that
    streams holds one document, not the source)."""
    for unit in document_units(spec):
        yield from unit_documents(spec, unit, bad)


@dataclass(frozen=True)
class Unit:
    """A piece of a CPT source read as one: a file of it, or the whole source (a table, a Hub dataset).
    A source's documents are its units' documents, in order; sharded builds give each task whole units."""

    source: str
    file: str | None  # None: the whole source


def document_units(spec: SourceSpec, warn_ignored: bool = True) -> list[Unit]:
    """The units of one CPT source, in reading order (a folder's files sorted by path)."""
    path = Path(spec.path)
    kind = source_kind(path)
    if kind == "synth":
        folder = path / "cpt_docs"
        if not folder.is_dir():
            raise ValueError(f"synth folder {path} has no cpt_docs/ (run `trex synth` with CPT documents on)")
        return [Unit(spec.path, str(file)) for file in _jsonl_files(folder)]
    if kind in ("hub", "dataset"):
        return [Unit(spec.path, None)]
    if kind == "file":
        return [Unit(spec.path, str(path))]
    units, ignored = [], []
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        if file.suffix.lower() in TEXT_SUFFIXES + MODEL_SUFFIXES + (".jsonl",):
            units.append(Unit(spec.path, str(file)))
        elif not file.name.startswith("."):
            ignored.append(file.name)
    if ignored and warn_ignored:
        from trex_cli.console import warn

        warn(
            f"{path}: {len(ignored)} files of other types are not read (e.g. {', '.join(ignored[:3])}); "
            f"resource folders hold .md, .txt, .jsonl, .mps and .lp files (read data files as {HUB_PREFIX}{path})"
        )
    return units


def unit_documents(spec: SourceSpec, unit: Unit, bad: BadInput) -> Iterator[Document]:
    """The documents of one unit of `spec` (`document_units`)."""
    if unit.file is None:
        yield from _documents_from_records(_table_records(spec, required=_text_column(spec)), spec, bad)
    elif source_kind(Path(spec.path)) == "synth":
        yield from _documents_from_records(_jsonl_records(Path(unit.file), spec.path, bad, False), spec, bad)
    else:
        yield from _documents_from_file(Path(unit.file), spec, bad)


def _documents_from_file(file: Path, spec: SourceSpec, bad: BadInput) -> Iterable[Document]:
    source = spec.path
    suffix = file.suffix.lower()
    if suffix == ".jsonl":
        return _documents_from_records(_jsonl_records(file, source, bad), spec, bad)
    if suffix in TABLE_SUFFIXES:
        return _documents_from_records(_table_records(spec, file, _text_column(spec)), spec, bad)
    if suffix in TEXT_SUFFIXES:
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            bad(source, str(file), f"not UTF-8 ({error.reason} at byte {error.start})", "re-encode the file")
            return []
        if not text.strip():
            bad(source, str(file), "the file is empty", "fill it or remove it from the sources")
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
        f"data source {file}: unsupported file type '{suffix}'; use .jsonl, .json, .parquet, .csv, .md, .txt, "
        ".mps or .lp"
    )


def _jsonl_records(
    file: Path, source: str, bad: BadInput, empty_is_bad: bool = True
) -> Iterator[tuple[str, str, dict]]:
    for line_number, record in iter_json_lines(file, source, bad, empty_is_bad):
        yield f"{file.name}:{line_number}", f"{file}:{line_number}", record


def _text_column(spec: SourceSpec) -> str:
    return spec.columns.get("text", "text")


def _documents_from_records(
    records: Iterable[tuple[str, str, dict]], spec: SourceSpec, bad: BadInput
) -> Iterator[Document]:
    column = _text_column(spec)
    for fallback_id, where, record in records:
        text = record.get(column)
        if not isinstance(text, str):
            bad(spec.path, where, f"no string field '{column}'",
                "give each record a text string, or map its column with the source's columns = { text = \"...\" }")
            continue
        record_id = _field(record, spec, "id")
        yield Document(
            id=str(record_id) if record_id is not None else fallback_id, source=spec.path, text=text, origin=where
        )


# ---------------------------------------------------------------- SFT conversations


def read_conversations(spec: SourceSpec, bad: BadInput) -> list[Conversation]:
    """All chat samples of one SFT source."""
    return [c for unit in conversation_units(spec) for c in unit_conversations(spec, unit, bad)]


def conversation_units(spec: SourceSpec) -> list[Unit]:
    """The units of one SFT source, in reading order: a synth folder's `sft/` shards, a folder's `.jsonl`
    files (sorted by path), a `.jsonl` file; a table file or a Hub dataset is one unit."""
    path = Path(spec.path)
    kind = source_kind(path)
    if kind == "synth":
        folder = path / "sft"
        if not folder.is_dir():
            raise ValueError(f"synth folder {path} has no sft/ (run `trex synth` with SFT samples on)")
        return [Unit(spec.path, str(file)) for file in _jsonl_files(folder)]
    if kind in ("hub", "dataset"):
        return [Unit(spec.path, None)]
    if kind == "file":
        suffix = path.suffix.lower()
        if suffix in TABLE_SUFFIXES:
            return [Unit(spec.path, None)]
        if suffix != ".jsonl":
            raise ValueError(f"SFT source {path}: expected a .jsonl, .json, .parquet or .csv file of chat records")
        return [Unit(spec.path, str(path))]
    return [Unit(spec.path, str(file)) for file in sorted(path.rglob("*.jsonl"))]


def unit_conversations(spec: SourceSpec, unit: Unit, bad: BadInput) -> Iterator[Conversation]:
    """The chat samples of one unit of `spec` (`conversation_units`), one at a time."""
    path = Path(spec.path)
    if unit.file is None:
        records = _table_records(spec, path if source_kind(path) == "file" else None)
    else:
        records = _jsonl_records(Path(unit.file), spec.path, bad, empty_is_bad=source_kind(path) != "synth")
    return _conversations_from_records(records, spec, bad)


def _conversations_from_records(
    records: Iterable[tuple[str, str, dict]], spec: SourceSpec, bad: BadInput
) -> Iterator[Conversation]:
    for fallback_id, where, record in records:
        try:
            messages = chat_messages(record, spec)
        except ValueError as error:
            bad(spec.path, where, str(error), "fix the record")
            continue
        if not any(message["role"] == "assistant" for message in messages):
            # an SFT sample teaches through its assistant turns: without one its loss mask would be all zero
            bad(spec.path, where, "no assistant message: nothing to learn from", "add the assistant's answer")
            continue
        record_id = _field(record, spec, "id")
        style = record.get("answer_style")
        yield Conversation(
            id=str(record_id) if record_id is not None else fallback_id,
            source=spec.path,
            messages=messages,
            answer_style=style if isinstance(style, str) else None,
            origin=where,
        )


def record_format(record: dict, spec: SourceSpec) -> str:
    """The chat format of one record: the source's `format`, or with "auto" the first whose columns it has."""
    if spec.format != "auto":
        return spec.format
    for name, fields in (
        ("messages", ("messages",)), ("sharegpt", ("conversations",)),
        ("prompt_completion", ("prompt", "completion")), ("alpaca", ("instruction", "output")),
    ):
        if all(_field(record, spec, field) is not None for field in fields):
            return name
    raise ValueError(
        f"no chat columns (it has {', '.join(sorted(record)) or 'none'}); expected messages, conversations "
        "(ShareGPT), prompt + completion, or instruction + output (Alpaca), or map them with the source's "
        "columns = { messages = \"...\" }"
    )


def chat_messages(record: dict, spec: SourceSpec) -> list[dict]:
    """The record as a list of {role, content} messages; ValueError says what is wrong with it."""
    style = record_format(record, spec)
    if style == "text":
        raise ValueError("format 'text' is for CPT sources; an SFT source needs a chat format")
    if style == "messages":
        return _role_content(_field(record, spec, "messages"), "messages")
    if style == "sharegpt":
        turns = _field(record, spec, "conversations")
        if not isinstance(turns, list) or not turns:
            raise ValueError("no 'conversations' list")
        messages = []
        for position, turn in enumerate(turns):
            speaker = turn.get("from", turn.get("role")) if isinstance(turn, dict) else None
            value = turn.get("value", turn.get("content")) if isinstance(turn, dict) else None
            if SHAREGPT_ROLES.get(str(speaker).lower()) is None or not isinstance(value, str):
                raise ValueError(
                    f"conversations turn {position} is not {{'from': human|gpt|system, 'value': str}}"
                )
            messages.append({"role": SHAREGPT_ROLES[str(speaker).lower()], "content": value})
        return messages
    if style == "prompt_completion":
        prompt, completion = _field(record, spec, "prompt"), _field(record, spec, "completion")
        if isinstance(prompt, str) and isinstance(completion, str):
            return [{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}]
        return _role_content(prompt, "prompt") + _role_content(completion, "completion")
    instruction, extra, output = (_field(record, spec, name) for name in ("instruction", "input", "output"))
    system = _field(record, spec, "system")
    if not isinstance(instruction, str) or not isinstance(output, str) or not isinstance(extra or "", str):
        raise ValueError("Alpaca record needs string 'instruction' and 'output' (and 'input', when present)")
    question = f"{instruction}\n\n{extra}" if extra else instruction
    messages = [{"role": "system", "content": system}] if isinstance(system, str) and system else []
    return messages + [{"role": "user", "content": question}, {"role": "assistant", "content": output}]


def _role_content(messages, name: str) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"no '{name}' list")
    cleaned = []
    for position, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or message.get("role") not in ROLES
            or not isinstance(message.get("content"), str)
        ):
            raise ValueError(f"{name} message {position} is not {{'role': system|user|assistant, 'content': str}}")
        cleaned.append({"role": message["role"], "content": message["content"]})
    return cleaned
