"""`ascend_kernels` benchmark: per operator, forward + backward time and peak memory of every
implementation usable on this machine, measured side by side with the reference in the same run.

Times are medians over interleaved repetitions (reference, implementation, reference, ...) so that
load from other processes hits both alike. Peak memory, measured after all timings over one
forward + backward, is the exact count of tensor bytes allocated (`ascend_kernels.memory.PeakMemory`),
or, where the CPU implementation runs torch.compile'd code that a tensor counter cannot see into
(RMSNorm, RoPE, SwiGLU), the rise of the process's resident-set high-water mark (`ProcessPeakMemory`,
for both that implementation and its reference). Targets on CPU (issue 5): fused RMSNorm, SwiGLU and RoPE at least 1.5x the reference;
linear + cross-entropy at vocabulary 129280 at most 1/8 of the unfused peak memory.

    .venv/bin/python benchmarks/bench_kernels.py [--quick]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascend_kernels import registry  # noqa: E402
from ascend_kernels.memory import PeakMemory, ProcessPeakMemory  # noqa: E402

DEVICE = "cpu"
SPEED_TARGET = {"rms_norm": ">= 1.5x", "rms_norm (no weight)": ">= 1.5x", "swiglu": ">= 1.5x", "apply_rope": ">= 1.5x"}
MEMORY_TARGET = {"linear_cross_entropy": "<= 0.125"}


def _case(name: str, operator: str, make: Callable[[], tuple[list, dict, list[int]]], repeats: int,
          compiled: bool = False):
    # compiled: the CPU implementation runs torch.compile'd code, which the exact tensor counter cannot
    # see into; its memory is measured on the resident set instead.
    return {"name": name, "operator": operator, "make": make, "repeats": repeats, "compiled": compiled}


def _cases(quick: bool) -> list[dict]:
    scale = 2 if quick else 1
    bf16 = torch.bfloat16

    def rms(weighted):
        def make():
            x = torch.randn(4, 1024 // scale, 1024, dtype=bf16)
            weight = torch.randn(1024) if weighted else None
            return [x, weight, 1e-6], {}, [0, 1] if weighted else [0]
        return make

    def rope():
        x = torch.randn(4, 1024 // scale, 16, 128, dtype=bf16)
        angles = torch.rand(4, 1024 // scale, 32) * 100
        return [x, angles.cos(), angles.sin()], {}, [0]

    def swiglu():
        shape = (4096 // scale, 1024)
        return [torch.randn(shape, dtype=bf16) * 4, torch.randn(shape, dtype=bf16) * 4, 10.0], {}, [0, 1]

    def sinkhorn():
        return [torch.randn(4, 2048 // scale, 4, 4)], {"iters": 20}, [0]

    def attention(mode):
        def make():
            batch, seq_len, heads, head_dim, window = 1, 2048 // scale, 8, 128, 128
            query = torch.randn(batch, seq_len, heads, head_dim, dtype=bf16)
            kv = torch.randn(batch, seq_len, head_dim, dtype=bf16)
            sink = torch.randn(heads)
            kwargs = {"window": window}
            if mode == "csa":
                entries, k = seq_len // 4, 64
                kwargs["compressed_kv"] = torch.randn(batch, entries, head_dim, dtype=bf16)
                indices = torch.rand(batch, seq_len, entries).topk(k, dim=-1).indices
                threshold = ((torch.arange(seq_len) + 1) // 4).view(1, -1, 1)
                kwargs["compressed_indices"] = torch.where(indices < threshold, indices, -1)
            return [query, kv, sink], kwargs, [0, 1, 2]
        return make

    def cross_entropy():
        tokens, hidden, vocab = 1024, 256, 129280
        targets = torch.randint(0, vocab, (tokens,))
        return [torch.randn(tokens, hidden, dtype=bf16), torch.randn(vocab, hidden, dtype=bf16) / 16, targets], {}, [0, 1]

    def grouped():
        experts, hidden, width = 16, 256, 512
        counts = torch.distributions.Dirichlet(torch.full((experts,), 0.3)).sample() * (2048 * 8 // scale)
        counts = counts.floor().long()
        counts[3] = 0
        x = torch.randn(int(counts.sum()), hidden, dtype=bf16)
        return [x, torch.randn(experts, width, hidden, dtype=bf16) / 16, counts], {}, [0, 1]

    return [
        _case("rms_norm", "rms_norm", rms(True), 5, compiled=True),
        _case("rms_norm (no weight)", "rms_norm", rms(False), 5, compiled=True),
        _case("apply_rope", "apply_rope", rope, 5, compiled=True),
        _case("swiglu", "swiglu", swiglu, 5, compiled=True),
        _case("sinkhorn", "sinkhorn", sinkhorn, 3),
        _case("sparse_attention (window)", "sparse_attention", attention("window"), 2),
        _case("sparse_attention (CSA)", "sparse_attention", attention("csa"), 2),
        _case("linear_cross_entropy", "linear_cross_entropy", cross_entropy, 1),
        _case("grouped_matmul", "grouped_matmul", grouped, 3),
    ]


def _forward_backward(function: Callable, inputs: list, kwargs: dict, differentiable: list[int]) -> Callable:
    def step():
        leaves = [
            value.detach().requires_grad_(index in differentiable) if isinstance(value, torch.Tensor) else value
            for index, value in enumerate(inputs)
        ]
        output = function(*leaves, **kwargs)
        output = output[0] if isinstance(output, tuple) else output
        # A contiguous upstream gradient, as a real loss would give (not the zero-stride one of .sum()).
        output.backward(torch.ones_like(output))
    return step


def _steps(case: dict, warm_up: bool = True) -> dict[str, Callable]:
    inputs, kwargs, differentiable = case["make"]()
    available = registry.implementations(case["operator"])
    names = [
        name for name in registry.BACKENDS[::-1]
        if name in available and registry.BACKEND_DEVICES[name] in (None, {DEVICE})
    ]
    if names == ["reference"]:
        return {}
    steps = {name: _forward_backward(available[name], inputs, kwargs, differentiable) for name in names}
    for step in steps.values() if warm_up else ():  # warm-up (and compilation) outside the timed runs
        step()
    return steps


def _times(case: dict) -> dict[str, float]:
    steps = _steps(case)
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(case["repeats"]):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1e3 for name, values in samples.items()}


def _peaks(case: dict) -> dict[str, float]:
    steps = _steps(case, warm_up=False)  # already compiled during the timings
    meter = ProcessPeakMemory if case["compiled"] else PeakMemory
    peaks = {}
    for name, step in steps.items():
        with meter() as memory:
            step()
        peaks[name] = memory.peak_bytes / 2**20
    return peaks


def _rows(case: dict, times: dict[str, float], peaks: dict[str, float]) -> list[dict]:
    rows = []
    for name in times:
        if name == "reference":
            continue
        rows.append({
            "benchmark": "kernels",
            "figure": f"{case['name']}: {name} forward+backward time",
            "value": round(times[name], 2),
            "unit": "ms",
            "baseline": "reference",
            "baseline_value": round(times["reference"], 2),
            "ratio": round(times["reference"] / times[name], 2),
            "target": SPEED_TARGET.get(case["name"], ""),
        })
        rows.append({
            "benchmark": "kernels",
            "figure": f"{case['name']}: {name} peak memory (forward+backward, "
            + ("resident set)" if case["compiled"] else "tensor bytes)"),
            "value": round(peaks[name], 1),
            "unit": "MiB",
            "baseline": "reference",
            "baseline_value": round(peaks["reference"], 1),
            "ratio": round(peaks[name] / peaks["reference"], 3) if peaks["reference"] else "",
            "target": MEMORY_TARGET.get(case["name"], ""),
        })
    return rows


def run(quick: bool = False) -> list[dict]:
    torch.manual_seed(0)
    cases = _cases(quick)
    # All timings first: the memory measure switches glibc to one mapping per large allocation for the
    # rest of the process, which would slow every allocation-heavy implementation it then timed.
    times = [_times(case) for case in cases]
    # Exact tensor counts first; resident-set measures (which retune glibc for good) last.
    peaks = [{} for _ in cases]
    for compiled in (False, True):
        for index, case in enumerate(cases):
            if times[index] and case["compiled"] == compiled:
                peaks[index] = _peaks(case)
    rows = []
    for case, case_times, case_peaks in zip(cases, times, peaks, strict=True):
        rows.extend(_rows(case, case_times, case_peaks))
    reference_only = [
        op for op in registry.operators() if set(registry.implementations(op)) <= {"reference", "triton", "npu"}
    ]
    rows.append({
        "benchmark": "kernels",
        "figure": "operators served by the reference on CPU (no faster CPU version kept): " + ", ".join(reference_only),
        "value": len(reference_only), "unit": "operators", "baseline": "", "baseline_value": "", "ratio": "", "target": "",
    })
    return rows


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    rows = run(quick="--quick" in sys.argv)
    table = Table(title="ascend_kernels on CPU: each implementation against the reference, measured side by side")
    for column in ("figure", "value", "unit", "baseline_value", "ratio", "target"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(str(row[c]) for c in ("figure", "value", "unit", "baseline_value", "ratio", "target")))
    Console().print(table)


if __name__ == "__main__":
    main()
