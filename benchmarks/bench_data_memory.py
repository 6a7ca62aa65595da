"""`trex data cpt` peak memory: the streaming build against the in-memory build it replaced.

A corpus of CPT-like JSON Lines documents (OR prose with numbers, a formulation, a Pyomo program;
3% near copies with a few words changed, 1% exact copies) is generated into a temporary folder as
several files, and `trex data cpt` runs on it in a subprocess, as a user runs it (a trained
tokenizer with a small vocabulary, so training stays short). Peak RSS is the child's `ru_maxrss`
(from `os.wait4`, so each run is measured alone); wall time is the child's.

The in-memory build is the CPT builder as it was before it streamed (`trex_cli/data/cpt.py` at
IN_MEMORY_COMMIT, read with `git show`), run by the same CLI on a corpus `--baseline-fraction` of the
size (by default a quarter: on the full corpus it holds every text, token array and packed row at
once, more than a 23 GB machine has); the streaming build runs on that corpus too, so both figures
are side by side at one size, and on the full corpus for the acceptance figure (under 2 GB peak RSS
at 2 GB). `--gb 0.2` is a quick run.

    python benchmarks/bench_data_memory.py --gb 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
IN_MEMORY_COMMIT = "5b7b852"  # main before `trex data cpt` streamed
FILES = 8
SEQ_LEN = 2048
VOCAB = 1000
TARGET_GB = 2.0  # the acceptance figure: under 2 GB peak RSS on a 2 GB corpus

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "da", "fe", "gi", "ho", "ju"]
OR_TERMS = ["minimize", "maximize", "cost", "profit", "subject", "to", "capacity", "demand", "supply", "plant",
            "warehouse", "shift", "worker", "machine", "hours", "units", "per", "each", "total", "constraint",
            "the", "a", "of", "and", "at", "most", "least", "is", "for", "with", "binary", "integer", "route"]


def write_corpus(folder: Path, target_bytes: int, seed: int = 0) -> dict:
    """About `target_bytes` of JSON Lines documents in FILES files; returns counts."""
    rng = np.random.default_rng(seed)
    names = sorted({"".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 5)))) for _ in range(20000)})
    words = np.array(names + OR_TERMS * 200 + [str(n) for n in range(1, 2000)])
    folder.mkdir(parents=True, exist_ok=True)
    streams = [open(folder / f"part-{index:02d}.jsonl", "w", encoding="utf-8") for index in range(FILES)]
    recent: list[str] = []  # earlier documents that copies are made from (a bounded window)
    written = documents = near = exact = 0
    try:
        while written < target_bytes:
            roll = rng.random()
            if recent and roll < 0.03:
                tokens = recent[int(rng.integers(len(recent)))].split(" ")
                for _ in range(int(rng.integers(1, 4))):
                    tokens[int(rng.integers(len(tokens)))] = str(rng.choice(words))
                text, near = " ".join(tokens), near + 1
            elif recent and roll < 0.04:
                text, exact = recent[int(rng.integers(len(recent)))], exact + 1
            else:
                prose = " ".join(words[rng.integers(0, len(words), size=int(rng.integers(300, 900)))].tolist())
                plants = int(rng.integers(2, 9))
                program = "\n".join(
                    f"m.cap{k} = pyo.Constraint(expr=sum(m.x[{k}, j] for j in m.J) <= {int(rng.integers(50, 999))})"
                    for k in range(plants)
                )
                text = (f"# Plan {documents}\n\n{prose}\n\n## Formulation\n\nminimize sum_ij c_ij x_ij subject to "
                        f"capacity at {plants} plants.\n\n```python\n{program}\n```\n")
                if len(recent) < 2000:
                    recent.append(text)
                else:
                    recent[int(rng.integers(len(recent)))] = text
            line = json.dumps({"id": f"doc-{documents}", "text": text}) + "\n"
            streams[documents % FILES].write(line)
            written += len(line)
            documents += 1
    finally:
        for stream in streams:
            stream.close()
    return {"documents": documents, "bytes": written, "near_copies": near, "exact_copies": exact}


def in_memory_builder(workspace: Path) -> Path | None:
    """The pre-streaming `cpt.py` saved as a module in `workspace`, or None outside a git checkout."""
    try:
        source = subprocess.run(["git", "show", f"{IN_MEMORY_COMMIT}:trex_cli/data/cpt.py"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    (workspace / "trex_in_memory_cpt.py").write_text(source)
    return workspace


def run_cli(corpus: Path, out: Path, run_dir: Path, in_memory_module: Path | None = None) -> dict:
    """`trex data cpt` on `corpus` in a child process: its peak RSS (GB) and wall seconds."""
    prelude = "import sys\n"
    if in_memory_module is not None:  # the same CLI, with the builder of before
        prelude += (f"sys.path.insert(0, {str(in_memory_module)!r})\n"
                    "import trex_in_memory_cpt, trex_cli.data.cpt\n"
                    # the old one-process builder knows no executor settings (it is the baseline they replace)
                    "def build_cpt(*args, executor=None, dry_run=False, **kwargs):\n"
                    "    return trex_in_memory_cpt.build_cpt(*args, **kwargs)\n"
                    "trex_cli.data.cpt.build_cpt = build_cpt\n")
    prelude += "from trex_cli.app import main\nsys.argv = ['trex'] + sys.argv[1:]\nsys.exit(main())\n"
    command = [sys.executable, "-c", prelude, "data", "cpt", "--source", str(corpus), "--train-tokenizer",
               str(VOCAB), "--seq-len", str(SEQ_LEN), "--run-dir", str(run_dir), "--out", str(out), "--no-progress"]
    environment = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    started = time.perf_counter()
    child = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"trex data cpt failed ({child.returncode}):\n{output[-3000:]}")
    stats = json.loads((out / "stats.json").read_text())
    return {"peak_rss_gb": usage.ru_maxrss / 1024 / 1024, "wall_s": wall,
            "tokens": stats["splits"]["train"]["tokens"] + stats["splits"]["validation"]["tokens"],
            "kept": stats["documents_kept"], "read": stats["documents_read"]}


def measure(gb: float, baseline_fraction: float, workdir: str | None = None) -> dict:
    workspace = Path(tempfile.mkdtemp(prefix="trex-bench-memory-", dir=workdir))
    try:
        result = {"gb": gb, "baseline_fraction": baseline_fraction}
        small_gb = gb * baseline_fraction
        result["small_corpus"] = write_corpus(workspace / "small", int(small_gb * 1e9), seed=1)
        module = in_memory_builder(workspace)
        if module is not None:
            result["in_memory_small"] = run_cli(workspace / "small", workspace / "old", workspace, module)
            shutil.rmtree(workspace / "old")
        result["streaming_small"] = run_cli(workspace / "small", workspace / "new-small", workspace)
        shutil.rmtree(workspace / "new-small")
        if baseline_fraction < 1:
            shutil.rmtree(workspace / "small")
            result["corpus"] = write_corpus(workspace / "full", int(gb * 1e9), seed=2)
            result["streaming"] = run_cli(workspace / "full", workspace / "new", workspace)
        else:
            result["corpus"], result["streaming"] = result["small_corpus"], result["streaming_small"]
        return result
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def rows(result: dict) -> list[dict]:
    gb, small_gb = result["gb"], result["gb"] * result["baseline_fraction"]
    streaming, small = result["streaming"], result["streaming_small"]
    old = result.get("in_memory_small")
    table = [{
        "benchmark": "data memory",
        "figure": f"`trex data cpt` peak RSS, {result['corpus']['bytes'] / 1e9:.2f} GB JSONL corpus "
                  f"({result['corpus']['documents']:,} documents, {streaming['tokens']:,} packed tokens), streaming",
        "value": round(streaming["peak_rss_gb"], 3),
        "unit": "GB",
        "baseline": "", "baseline_value": "", "ratio": "",
        "target": f"< {TARGET_GB:g} GB at 2 GB",
    }, {
        "benchmark": "data memory",
        "figure": f"`trex data cpt` peak RSS, {result['small_corpus']['bytes'] / 1e9:.2f} GB corpus, "
                  "streaming vs the in-memory build",
        "value": round(small["peak_rss_gb"], 3),
        "unit": "GB",
        "baseline": f"in-memory build ({IN_MEMORY_COMMIT}), same corpus" if old else "not measured (no git checkout)",
        "baseline_value": round(old["peak_rss_gb"], 3) if old else "",
        "ratio": round(old["peak_rss_gb"] / small["peak_rss_gb"], 2) if old else "",
        "target": "",
    }, {
        "benchmark": "data memory",
        "figure": f"`trex data cpt` wall time, {result['small_corpus']['bytes'] / 1e9:.2f} GB corpus",
        "value": round(small["wall_s"], 1),
        "unit": "s",
        "baseline": f"in-memory build ({IN_MEMORY_COMMIT})" if old else "",
        "baseline_value": round(old["wall_s"], 1) if old else "",
        "ratio": round(old["wall_s"] / small["wall_s"], 2) if old else "",
        "target": "",
    }]
    if gb != small_gb:
        table.append({
            "benchmark": "data memory",
            "figure": f"`trex data cpt` wall time, {result['corpus']['bytes'] / 1e9:.2f} GB corpus, streaming",
            "value": round(streaming["wall_s"], 1), "unit": "s",
            "baseline": "", "baseline_value": "", "ratio": "", "target": "",
        })
    if old:
        assert (old["kept"], old["tokens"]) == (small["kept"], small["tokens"]), "the two builds disagree"
    return table


def run(quick: bool = False) -> list[dict]:
    """For `run_all.py`: 2 GB (the in-memory build on 0.125 GB of it, where it peaks at about 3 GB; about
    40 minutes on 2 cores); quick: 0.2 GB, both builds on all of it."""
    return rows(measure(0.2, 1.0) if quick else measure(2.0, 0.0625))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=2.0, help="corpus size in GB (default 2)")
    parser.add_argument("--baseline-fraction", type=float, default=None,
                        help="the in-memory build's corpus as a share of --gb (default: 1 up to 0.5 GB, else 0.25)")
    parser.add_argument("--workdir", default=None, help="where the temporary corpus and outputs go")
    args = parser.parse_args()
    fraction = args.baseline_fraction if args.baseline_fraction is not None else (1.0 if args.gb <= 0.5 else 0.25)
    result = measure(args.gb, fraction, args.workdir)
    for name in ("in_memory_small", "streaming_small", "streaming"):
        if name in result:
            figures = result[name]
            print(f"{name:16s} peak RSS {figures['peak_rss_gb']:6.3f} GB  wall {figures['wall_s']:7.1f} s  "
                  f"{figures['read']:,} read, {figures['kept']:,} kept, {figures['tokens']:,} tokens")
    print(f"corpus {result['corpus']}; in-memory build measured on {result['small_corpus']}")
    for row in rows(result):
        print(f"- {row['figure']}: {row['value']} {row['unit']}"
              + (f" (baseline {row['baseline']}: {row['baseline_value']})" if row["baseline_value"] != "" else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
