"""Check and time the Triton kernels of ascend_kernels on a CUDA machine (under 5 minutes).

For each Triton operator: forward and backward against the float64 reference on fresh random inputs
(largest error relative to the reference's largest magnitude, outputs and gradients), then forward +
backward time against the reference run on the same GPU, measured side by side with CUDA events.
Prints one table; exits with status 1 if any error exceeds its dtype's tolerance.

    python benchmarks/triton_check.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascend_kernels import buffers, reference, registry  # noqa: E402

TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 4e-2, torch.float16: 6e-3}


def _cases(device: str):
    """(operator, label, dtype, make_inputs) with inputs as (args, differentiable positions)."""
    def rms(dtype, weighted, shape):
        def make():
            x = torch.randn(shape, device=device).to(dtype)
            weight = torch.randn(shape[-1], device=device) if weighted else None
            return [x, weight, 1e-6], [0, 1] if weighted else [0]
        return make

    def rope(dtype, shape, pairs, inverse):
        def make():
            x = torch.randn(shape, device=device).to(dtype)
            angles = torch.rand(shape[0], shape[1], pairs, device=device) * 100
            return [x, angles.cos(), angles.sin(), inverse], [0]
        return make

    def swiglu(dtype, shape, limit):
        def make():
            return [torch.randn(shape, device=device).mul(8).to(dtype), torch.randn(shape, device=device).mul(8).to(dtype), limit], [0, 1]
        return make

    cases = []
    for dtype in (torch.float32, torch.bfloat16):
        name = str(dtype).replace("torch.", "")
        cases += [
            ("rms_norm", f"weight [8,4096,4096] {name}", dtype, rms(dtype, True, (8, 4096, 4096))),
            ("rms_norm", f"no weight [2,4096,64,512] {name}", dtype, rms(dtype, False, (2, 4096, 64, 512))),
            ("rms_norm", f"odd width [3,77,1000] {name}", dtype, rms(dtype, True, (3, 77, 1000))),
            ("apply_rope", f"q [2,4096,64,512] rope 64 {name}", dtype, rope(dtype, (2, 4096, 64, 512), 32, False)),
            ("apply_rope", f"kv [8,4096,512] inverse {name}", dtype, rope(dtype, (8, 4096, 512), 32, True)),
            ("swiglu", f"limit 10 [32768,2048] {name}", dtype, swiglu(dtype, (32768, 2048), 10.0)),
            ("swiglu", f"no limit [1000,333] {name}", dtype, swiglu(dtype, (1000, 333), None)),
        ]
    return cases


def _relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    actual, expected = actual.detach().double(), expected.detach().double()
    if torch.isnan(actual).any():
        return float("inf")
    return ((actual - expected).abs().max() / expected.abs().max().clamp_min(1e-6)).item()


def _leaves(inputs, differentiable, wide):
    return [
        (v.detach().double() if wide and v.is_floating_point() else v.detach()).requires_grad_(i in differentiable)
        if isinstance(v, torch.Tensor) else v
        for i, v in enumerate(inputs)
    ]


def _check(function, operator, inputs, differentiable) -> float:
    ours_inputs = _leaves(inputs, differentiable, wide=False)
    theirs_inputs = _leaves(inputs, differentiable, wide=True)
    with buffers.poisoned_buffers():
        ours = function(*ours_inputs)
    theirs = getattr(reference, operator)(*theirs_inputs)
    grad = torch.randn_like(theirs)
    with buffers.poisoned_buffers():
        ours.backward(grad.to(ours.dtype))
    theirs.backward(grad)
    errors = [_relative_error(ours, theirs)]
    errors += [_relative_error(ours_inputs[i].grad, theirs_inputs[i].grad) for i in differentiable]
    return max(errors)


def _time(function, inputs, differentiable, repeats=10) -> float:
    def step():
        leaves = _leaves(inputs, differentiable, wide=False)
        out = function(*leaves)
        out.backward(torch.ones_like(out))

    for _ in range(3):
        step()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def main() -> int:
    from rich.console import Console
    from rich.table import Table

    if not registry.backend_usable("triton"):
        print("triton_check: needs a CUDA GPU and the triton package (neither usable here)", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    table = Table(title=f"ascend_kernels Triton kernels on {torch.cuda.get_device_name()}")
    for column in ("operator", "case", "max rel. error", "tolerance", "triton ms", "reference ms", "speedup"):
        table.add_column(column)
    failed = False
    for operator, label, dtype, make in _cases("cuda"):
        function = registry.implementations(operator)["triton"]
        inputs, differentiable = make()
        error = _check(function, operator, inputs, differentiable)
        ours = _time(function, inputs, differentiable)
        theirs = _time(getattr(reference, operator), inputs, differentiable)
        ok = error <= TOLERANCE[dtype]
        failed |= not ok
        table.add_row(operator, label, f"{error:.2e}", f"{TOLERANCE[dtype]:.0e}" + ("" if ok else " FAIL"),
                      f"{ours:.3f}", f"{theirs:.3f}", f"{theirs / ours:.2f}x")
        del inputs
        torch.cuda.empty_cache()
    Console().print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
