"""`trex data cpt` build throughput: raw JSONL documents -> cleaned (exact + MinHash dedup, 13-gram
decontamination) -> tokenized -> mixed -> packed Arrow shards, in tokens per second of packed output.

The baseline is the same pipeline written the obvious way, one document at a time: datasketch
`MinHash.update_batch` over shingle strings, a Python set of 13-gram tuples, `Tokenizer.encode` per
document, rows cut from a Python list and saved with `Dataset.from_dict`. Both run in this process
on the same documents (the baseline on a slice, as it is slow) with the same trained tokenizer.
Libraries are imported before either build is timed (a long build pays them once). Besides wall
tokens/s, both builds report tokens per CPU-second of the process (all its threads): on a shared,
loaded machine wall figures move with the load, CPU cost does not; on 2 idle cores the wall figure
lies between one and two times the CPU figure. The machine's load average is reported too.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "da", "fe", "gi", "ho", "ju"]
OR_TERMS = ["minimize", "maximize", "cost", "profit", "subject", "to", "capacity", "demand", "supply", "plant",
            "warehouse", "shift", "worker", "machine", "hours", "units", "per", "each", "total", "constraint",
            "the", "a", "of", "and", "at", "most", "least", "is", "for", "with"]


def _corpus(documents: int, seed: int = 0) -> list[str]:
    """Markdown documents shaped like synth's: prose with numbers, a formulation, a program; 2% of
    them near copies of earlier ones (one word changed), 2% exact copies."""
    rng = random.Random(seed)
    names = sorted({"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))) for _ in range(3000)})
    vocabulary = names + OR_TERMS * 20
    texts: list[str] = []
    for index in range(documents):
        if index > 50 and rng.random() < 0.04:
            source = texts[rng.randrange(len(texts))].split(" ")
            if rng.random() < 0.5:
                source[rng.randrange(len(source))] = rng.choice(vocabulary)
            texts.append(" ".join(source))
            continue
        prose = " ".join(
            str(rng.randint(1, 9999)) if rng.random() < 0.1 else rng.choice(vocabulary) for _ in range(rng.randint(250, 700))
        )
        program = "\n".join(
            f"m.c{k} = pyo.Constraint(expr={rng.randint(1, 99)} * m.x[{k}] <= {rng.randint(100, 999)})" for k in range(8)
        )
        texts.append(f"# Plan {index}\n\n{prose}\n\n## Program\n\n```python\n{program}\n```\n")
    return texts


def _naive_build(texts: list[str], tokenizer_file: Path, questions: list[str], seq_len: int, out: Path) -> int:
    """The baseline: every step per document in plain Python and library calls."""
    import datasets
    from datasketch import MinHash, MinHashLSH
    from tokenizers import Tokenizer

    from trex_cli.data.normalize import normalize_text, words

    datasets.disable_progress_bars()
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    bos, eos = tokenizer.token_to_id("<|bos|>"), tokenizer.token_to_id("<|eos|>")
    benchmark_ngrams = set()
    for question in questions:
        tokens = words(question)
        benchmark_ngrams.update(tuple(tokens[i : i + 13]) for i in range(len(tokens) - 12))
    lsh = MinHashLSH(threshold=0.8, num_perm=128)
    seen_exact = set()
    stream: list[int] = []
    for index, text in enumerate(texts):
        text = normalize_text(text)
        tokens = words(text)
        key = " ".join(tokens)
        if key in seen_exact:
            continue
        seen_exact.add(key)
        if any(tuple(tokens[i : i + 13]) in benchmark_ngrams for i in range(len(tokens) - 12)):
            continue
        minhash = MinHash(num_perm=128)
        minhash.update_batch([" ".join(tokens[i : i + 5]).encode() for i in range(max(1, len(tokens) - 4))])
        if lsh.query(minhash):
            continue
        lsh.insert(str(index), minhash)
        stream += [bos, *tokenizer.encode(text, add_special_tokens=False).ids, eos]
    rows = [stream[start : start + seq_len] for start in range(0, len(stream) - seq_len + 1, seq_len)]
    positions, masks = [], []
    for row in rows:
        position, row_positions = 0, []
        for k in range(len(row)):
            position = 0 if k == 0 or row[k - 1] == eos else position + 1
            row_positions.append(position)
        positions.append(row_positions)
        masks.append([int(p != 0) for p in row_positions])
    datasets.Dataset.from_dict({"input_ids": rows, "loss_mask": masks, "position_ids": positions}).save_to_disk(str(out))
    return len(rows) * seq_len


def _signature_rows(texts: list[str]) -> dict:
    """MinHash signatures per second: trex's numpy form against datasketch's update_batch."""
    from datasketch import MinHash

    from trex_cli.data.dedup import Deduplicator
    from trex_cli.data.normalize import WordHasher, words

    hasher = WordHasher()
    hashes = [hasher(text) for text in texts]
    deduplicator = Deduplicator()
    started = time.perf_counter()
    for word_hashes in hashes:
        deduplicator.signature(word_hashes)
    ours = len(texts) / (time.perf_counter() - started)
    started = time.perf_counter()
    for text in texts:
        tokens = words(text)
        MinHash(num_perm=128).update_batch([" ".join(tokens[i : i + 5]).encode() for i in range(max(1, len(tokens) - 4))])
    baseline = len(texts) / (time.perf_counter() - started)
    return {"ours": ours, "baseline": baseline}


def run(quick: bool = False) -> list[dict]:
    from trex_cli.data.config import CptSection, DataConfig, SourceSpec
    from trex_cli.data.cpt import build_cpt
    from trex_cli.data.tokenizer import train_tokenizer

    documents = 1200 if quick else 4000
    seq_len = 1024
    texts = _corpus(documents)
    rng = random.Random(1)
    questions = [" ".join(rng.choice(OR_TERMS + ["fish", "truck", "sled"]) for _ in range(60)) for _ in range(300)]
    workspace = Path(tempfile.mkdtemp(prefix="trex-bench-data-"))
    try:
        corpus = workspace / "raw.jsonl"
        corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
        benchmark = workspace / "benchmark.jsonl"
        benchmark.write_text("".join(json.dumps({"en_question": q, "en_answer": "1.0"}) + "\n" for q in questions))
        tokenizer = train_tokenizer(texts[:400], 2048)  # trained once, outside the timed builds
        tokenizer.save(workspace / "tokenizer")

        # warm the imports both builds use, so neither timing includes them
        import datasets  # noqa: F401
        import datasketch  # noqa: F401
        import matplotlib.pyplot  # noqa: F401
        import pyarrow  # noqa: F401
        from datasketch import MinHashLSH

        MinHashLSH(threshold=0.8, num_perm=128)  # its band parameters come from a scipy integral, once

        load_before = os.getloadavg()[0]
        config = DataConfig(
            tokenizer=str(workspace / "tokenizer"),
            decontaminate=[str(benchmark)],
            validation_share=0.0,
            cpt=CptSection(sources=[SourceSpec(str(corpus))], seq_len=seq_len),
        )
        started, cpu_started = time.perf_counter(), time.process_time()
        stats = build_cpt(config, workspace / "cpt", workspace, show_progress=False)
        ours_seconds, ours_cpu = time.perf_counter() - started, time.process_time() - cpu_started
        packed = stats["splits"]["train"]["tokens"]
        ours = packed / ours_seconds

        baseline_texts = texts[: max(200, len(texts) // 5)]
        started, cpu_started = time.perf_counter(), time.process_time()
        baseline_packed = _naive_build(baseline_texts, workspace / "tokenizer" / "tokenizer.json", questions, seq_len, workspace / "naive")
        baseline = baseline_packed / (time.perf_counter() - started)
        baseline_cpu = time.process_time() - cpu_started

        signatures = _signature_rows(texts[:400])
        load_after = os.getloadavg()[0]
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    return [
        {
            "benchmark": "data",
            "figure": f"CPT build, raw JSONL to packed shards ({packed:,} tokens, seq_len {seq_len}, dedup + decontam)",
            "value": round(ours),
            "unit": "tokens/s",
            "baseline": "naive one-document-at-a-time build",
            "baseline_value": round(baseline),
            "ratio": round(ours / baseline, 2),
            "target": ">= 500,000 tokens/s on 2 cores",
        },
        {
            "benchmark": "data",
            "figure": "CPT build CPU cost: packed tokens per CPU-second (all threads of the process)",
            "value": round(packed / ours_cpu),
            "unit": "tokens/CPU-s",
            "baseline": "naive one-document-at-a-time build",
            "baseline_value": round(baseline_packed / baseline_cpu),
            "ratio": round((packed / ours_cpu) / (baseline_packed / baseline_cpu), 2),
            "target": "",
        },
        {
            "benchmark": "data",
            "figure": "MinHash signatures (128 permutations, word 5-gram shingles)",
            "value": round(signatures["ours"]),
            "unit": "documents/s",
            "baseline": "datasketch MinHash.update_batch",
            "baseline_value": round(signatures["baseline"]),
            "ratio": round(signatures["ours"] / signatures["baseline"], 2),
            "target": "",
        },
        {
            "benchmark": "data",
            "figure": "machine load average (1 min) before / after: wall-clock figures scale with it",
            "value": f"{load_before:.1f} / {load_after:.1f}",
            "unit": "runnable processes",
            "baseline": "",
            "baseline_value": "",
            "ratio": "",
            "target": f"{os.cpu_count()} cores",
        },
    ]


if __name__ == "__main__":
    from rich.console import Console
    from rich.table import Table

    quick = "--quick" in sys.argv
    table = Table(title="bench_data" + (" (quick)" if quick else ""))
    for column in ("figure", "value", "unit", "baseline", "baseline_value", "ratio", "target"):
        table.add_column(column)
    for row in run(quick=quick):
        table.add_row(*(str(row[column]) for column in ("figure", "value", "unit", "baseline", "baseline_value", "ratio", "target")))
    Console().print(table)
