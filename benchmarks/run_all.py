"""`make bench`: run every benchmark of the stage issues and write BENCHMARKS.md.

Each `benchmarks/bench_<area>.py` exposes `run(quick=False) -> list[dict]`; every figure is measured in
this run, speed figures as ratios against a baseline measured side by side. The table is printed and
written to BENCHMARKS.md with the machine it ran on. `--only synth,eval` runs a subset; `--quick` runs
each benchmark's reduced form.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AREAS = ("synth", "data", "data_memory", "kernels", "model", "train", "eval", "plan")


def machine_description() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        total_kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {total_kb / 1024 / 1024:.0f} GiB memory"
    except (OSError, ValueError, IndexError):
        pass
    return (f"{cpu}, {os.cpu_count()} cores{memory}; Python {platform.python_version()}, "
            f"torch {torch.__version__}, {platform.system()} {platform.release()}")


def gpu_section() -> list[str]:
    """BENCHMARKS.md's GPU section: the table of the last `benchmarks/gpu_check.py` run on a GPU, kept
    in benchmarks/gpu_check.md, or the statement that no GPU figure exists yet."""
    table = ROOT / "benchmarks" / "gpu_check.md"
    lines = ["", "## GPU figures", ""]
    if table.exists():
        return lines + ["From `python benchmarks/gpu_check.py` (benchmarks/gpu_check.md):", "",
                        table.read_text().strip()]
    return lines + [
        "None exist yet: no GPU has been available to this project. `benchmarks/gpu_check.py` is the prepared",
        "script (Triton kernel tests, every Triton kernel against the reference and SDPA, `small` and",
        "flash-width 2-layer training steps with MFU, under 8 minutes); it has only been dry-run on the CPU,",
        "where Triton's interpreter runs the kernels and timings mean nothing.",
    ]


def format_value(value) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", default="", help="comma-separated areas: " + ",".join(AREAS))
    parser.add_argument("--quick", action="store_true", help="the reduced form of each benchmark")
    parser.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    areas = [a for a in args.only.split(",") if a] or list(AREAS)
    rows, failures = [], []
    started = time.time()
    for area in areas:
        module_path = ROOT / "benchmarks" / f"bench_{area}.py"
        if not module_path.exists():
            failures.append((area, "no benchmark script"))
            continue
        print(f"== {area}", flush=True)
        area_started = time.time()
        try:
            module = importlib.import_module(f"bench_{area}")
            for row in module.run(quick=args.quick):
                rows.append({"area": area, **row})
        except Exception:  # one broken benchmark must not hide the others' figures
            failures.append((area, traceback.format_exc(limit=3)))
            traceback.print_exc()
        print(f"   {area} took {time.time() - area_started:.0f} s", flush=True)

    columns = ("benchmark", "figure", "value", "unit", "baseline", "baseline_value", "ratio", "target")
    header = "| area | " + " | ".join(columns) + " |"
    lines = [
        "# Benchmarks",
        "",
        f"Measured by `make bench` on {time.strftime('%Y-%m-%d')}: {machine_description()}.",
        "Every figure below was measured in that run; ratios compare against the baseline measured side by",
        "side in the same run. Timings on these shared 2-core machines vary by about 30% between runs.",
        "",
        header,
        "|" + "---|" * (len(columns) + 1),
    ]
    for row in rows:
        lines.append("| " + " | ".join([row["area"], *[format_value(row.get(c)) for c in columns]]) + " |")
    if failures:
        lines += ["", "## Not measured in this run", ""]
        lines += [f"- {area}: {reason.strip().splitlines()[-1]}" for area, reason in failures]
    lines += gpu_section()
    lines += ["", f"Total wall time: {time.time() - started:.0f} s.", ""]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))
    return 1 if failures and not rows else 0


if __name__ == "__main__":
    sys.exit(main())
