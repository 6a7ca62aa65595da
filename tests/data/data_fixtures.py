"""Small fixtures for the data tests: random OR-flavoured documents, chat samples, and synth
folders in exactly the format `trex synth` writes (see the synth folder contract)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from trex_cli.artifacts import StageFolder

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "da", "fe", "gi", "ho", "ju"]
OR_WORDS = [
    "minimize", "maximize", "cost", "profit", "subject", "to", "capacity", "demand", "supply", "plant",
    "warehouse", "shift", "worker", "machine", "hours", "units", "per", "each", "total", "constraint",
    "variable", "integer", "binary", "objective", "the", "a", "of", "and", "at", "most", "least",
]


def vocabulary(size: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words) + OR_WORDS


def random_document(rng: random.Random, words: list[str], length: int) -> str:
    """Sentences of random words and numbers, with a Markdown heading."""
    parts = [f"# {rng.choice(words).title()} plan {rng.randint(1, 999)}", ""]
    sentence: list[str] = []
    for _ in range(length):
        sentence.append(str(rng.randint(2, 9999)) if rng.random() < 0.08 else rng.choice(words))
        if len(sentence) >= rng.randint(8, 16):
            parts.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    if sentence:
        parts.append(" ".join(sentence).capitalize() + ".")
    return "\n".join(parts)


def chat_sample(rng: random.Random, words: list[str], sample_id: str, style: str = "model_program") -> dict:
    question = random_document(rng, words, rng.randint(30, 60))
    answer = "```python\nimport pyomo.environ as pyo\nm = pyo.ConcreteModel()\n" + f"m.x = pyo.Var(bounds=(0, {rng.randint(1, 99)}))\n```"
    if style != "program":
        answer = f"## Model\nmaximize {rng.randint(2, 50)} x subject to x <= {rng.randint(1, 99)}.\n\n" + answer
    messages = [
        {"role": "system", "content": "You are an operations research expert."},
        {"role": "user", "content": question},
        {"role": "assistant", "content": answer},
    ]
    if rng.random() < 0.3:  # some multi-turn samples
        messages += [
            {"role": "user", "content": "Explain the result in one sentence. é ü 数字 12.5%"},
            {"role": "assistant", "content": f"The optimum is {rng.randint(1, 500)}.{rng.randint(0, 9)} — café ✓."},
        ]
    return {"id": sample_id, "family": "toy", "representation": "text", "answer_style": style, "messages": messages}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return path


def make_synth_folder(
    path: Path, documents: list[str], sft_samples: list[dict] | None = None, eval_items: list[dict] | None = None
) -> Path:
    """A finished synth stage folder (manifest written last, as `trex synth` does)."""
    folder = StageFolder(path, "synth", {"fixture": len(documents)})
    folder.prepare()
    write_jsonl(
        path / "cpt_docs" / "shard-00000.jsonl",
        [{"id": f"doc-{index}", "family": "toy", "text": text} for index, text in enumerate(documents)],
    )
    write_jsonl(path / "sft" / "shard-00000.jsonl", sft_samples or [])
    write_jsonl(path / "eval" / "test.jsonl", eval_items or [])
    folder.finish(counts={"documents": len(documents)})
    return path
