"""CPT documents and SFT samples as the JSON Lines MindSpeed-LLM's preprocessor reads.

`export_cpt_jsonl` writes `{"text": ...}` documents (what `GeneralPretrainHandler` reads) from a trex
data folder (packed token rows, decoded back into documents) or a synth folder's cpt_docs;
`export_sft_jsonl` writes `{"messages": [...]}` samples in the OpenAI/ShareGPT role-content form
(what `SharegptStyleInstructionHandler` reads) from a synth folder's sft shards or a messages JSONL.
Both stream to a temporary file and rename it into place, so an export is never half-written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def _folder_stage(folder: Path) -> str | None:
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        return None
    return str(json.loads(manifest.read_text()).get("stage", ""))


class _JsonlWriter:
    """Streams records to a temporary file beside `target` and renames it into place on success, so
    an export is never half-written and never held in memory whole."""

    def __init__(self, target: Path):
        self.target = Path(target)
        self.temporary = self.target.with_name(f".{self.target.name}.tmp")
        self.count = 0

    def __enter__(self) -> _JsonlWriter:
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.stream = open(self.temporary, "w", encoding="utf-8")  # closed in __exit__
        return self

    def write(self, record: dict) -> None:
        self.stream.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.count += 1

    def __exit__(self, kind, value, traceback) -> None:
        self.stream.close()
        if kind is None and self.count:
            os.replace(self.temporary, self.target)
        else:
            self.temporary.unlink(missing_ok=True)


def export_cpt_jsonl(source: Path, target: Path) -> int:
    """Write CPT documents as `{"text": ...}` lines; returns the document count.

    A trex data folder (data/cpt) holds packed token rows: documents are recovered where
    position_ids restart at 0 (a document cut at a row end continues in the next row) and decoded
    with the folder's tokenizer, special tokens dropped (MindSpeed-LLM appends its own EOD). A synth
    folder's cpt_docs are copied as they are."""
    stage = _folder_stage(source)
    if stage == "synth" or (source / "cpt_docs").is_dir():
        with _JsonlWriter(target) as writer:
            for shard in sorted((source / "cpt_docs").glob("*.jsonl")):
                with open(shard, encoding="utf-8") as stream:
                    for number, line in enumerate(stream, 1):
                        if not line.strip():
                            continue
                        record = json.loads(line)
                        if not isinstance(record.get("text"), str):
                            raise ValueError(f"{shard}:{number}: a CPT document needs a 'text' string")
                        writer.write({"text": record["text"]})
    elif (source / "train").is_dir():
        import datasets
        from tokenizers import Tokenizer

        tokenizer_file = source / "tokenizer" / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise FileNotFoundError(f"{tokenizer_file} not found: a trex data folder keeps its tokenizer there")
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        rows = datasets.load_from_disk(str(source / "train"))
        document: list[int] = []
        with _JsonlWriter(target) as writer:

            def flush() -> None:
                if document:
                    text = tokenizer.decode(document, skip_special_tokens=True)
                    if text.strip():
                        writer.write({"text": text})
                    document.clear()

            for row in rows:
                for token, position in zip(row["input_ids"], row["position_ids"], strict=True):
                    if position == 0:
                        flush()
                    document.append(int(token))
            flush()
    else:
        raise FileNotFoundError(f"{source} is neither a trex data folder (train/, tokenizer/) nor a synth folder "
                                "(cpt_docs/): run `trex data cpt` first or set [mindspeed.cpt] data")
    if writer.count == 0:
        raise ValueError(f"{source} holds no CPT documents to export")
    return writer.count


def export_sft_jsonl(source: Path, target: Path) -> int:
    """Write SFT samples as `{"messages": [{"role", "content"}, ...]}` lines (ShareGPT/OpenAI form).

    Reads a synth folder's sft/ shards or a JSONL file of records with `messages`. Token rows of a
    data/sft folder are not used: MindSpeed-LLM applies its own chat template (`--prompt-type`)."""
    if source.is_file():
        files = [source]
    elif (source / "sft").is_dir():
        files = sorted((source / "sft").glob("*.jsonl"))
    else:
        hint = " (a data/sft folder holds token rows; give the synth folder it was built from)" \
            if (source / "train").is_dir() else ""
        raise FileNotFoundError(f"{source}: no sft/ shards or messages JSONL to export{hint}; set [mindspeed.sft] data")
    with _JsonlWriter(target) as writer:
        for file in files:
            with open(file, encoding="utf-8") as stream:
                for number, line in enumerate(stream, 1):
                    if not line.strip():
                        continue
                    record = json.loads(line)
                    messages = record.get("messages")
                    if not isinstance(messages, list) or not messages:
                        raise ValueError(f"{file}:{number}: an SFT sample needs a non-empty 'messages' list")
                    clean = []
                    for message in messages:
                        if message.get("role") not in ("system", "user", "assistant") or not isinstance(
                                message.get("content"), str):
                            raise ValueError(f"{file}:{number}: each message needs role system/user/assistant "
                                             "and a content string")
                        clean.append({"role": message["role"], "content": message["content"]})
                    if not any(m["role"] == "assistant" for m in clean):
                        raise ValueError(f"{file}:{number}: the sample has no assistant message to learn from")
                    writer.write({"messages": clean})
    if writer.count == 0:
        raise ValueError(f"{source} holds no SFT samples to export")
    return writer.count
