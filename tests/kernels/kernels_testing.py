"""Shared helpers of the kernel tests: run one implementation and the float64 reference on the same
inputs, forward and backward, and compare with a tolerance chosen by dtype."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import torch
from torch.utils._pytree import tree_flatten

from ascend_kernels import buffers, reference, registry

# Without a GPU the Triton kernels run on CPU tensors in Triton's interpreter (conftest.py sets
# TRITON_INTERPRET=1); with one, on CUDA tensors.
BACKEND_DEVICE = {"reference": "cpu", "cpu": "cpu", "triton": "cuda" if torch.cuda.is_available() else "cpu", "npu": "npu"}
SKIP_REASON = {
    "triton": "triton backend needs the triton package (pip install -e '.[dev]') and CUDA or TRITON_INTERPRET=1",
    "npu": "npu backend needs an Ascend NPU with torch_npu and CANN; this machine has no NPU",
}
# Largest error allowed, relative to the largest magnitude of the float64 reference result.
TOLERANCE = {torch.float64: 1e-10, torch.float32: 2e-5, torch.bfloat16: 4e-2, torch.float16: 6e-3}


def backend_params(backends: Sequence[str] = ("reference", "cpu", "triton", "npu")) -> list:
    """pytest params for each backend; those whose device is absent are skipped with the reason. The
    Triton ones carry the `triton` mark (`pytest -m triton` runs every Triton kernel test)."""
    return [
        pytest.param(
            backend,
            id=backend,
            marks=[
                pytest.mark.skipif(not registry.backend_usable(backend), reason=SKIP_REASON.get(backend, "")),
                *([pytest.mark.triton] if backend == "triton" else []),
            ],
        )
        for backend in backends
    ]


def implementation(operator: str, backend: str) -> Callable:
    found = registry.implementations(operator).get(backend)
    if found is None:
        pytest.skip(f"the {backend} backend has no {operator} implementation (the registry uses the reference)")
    return found


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """max |actual - expected| / max(1e-6, max |expected|), over finite entries; infinities must agree."""
    actual = actual.detach().to("cpu", torch.float64)
    expected = expected.detach().to("cpu", torch.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    infinite = torch.isinf(expected)
    assert torch.equal(torch.isinf(actual), infinite), "infinite entries differ"
    assert torch.equal(actual[infinite], expected[infinite]), "infinite entries differ in sign"
    assert not torch.isnan(actual).any(), "NaN in the result (an unwritten poisoned buffer?)"
    finite = ~infinite
    if not finite.any():
        return 0.0
    scale = max(1e-6, expected[finite].abs().max().item())
    return ((actual[finite] - expected[finite]).abs().max().item()) / scale


def check_against_reference(
    operator: str,
    backend: str,
    dtype: torch.dtype,
    inputs: Sequence,
    kwargs: dict | None = None,
    cast: Sequence[int] = (),
    differentiable: Sequence[int] = (),
    tolerance: float | None = None,
    seed: int = 0,
) -> None:
    """Compare `backend`'s `operator` with the float64 reference, forward and backward.

    inputs: positional arguments (CPU tensors or plain values); those at `cast`, and floating keyword
    tensors, are rounded to `dtype` for the implementation (the reference gets the same rounded values
    in float64); the others keep their dtype. Gradients are compared for the inputs at `differentiable`, through a random weighted
    sum of every floating output. Buffers from ascend_kernels.buffers start poisoned.
    """
    kwargs = kwargs or {}
    tolerance = TOLERANCE[dtype] if tolerance is None else tolerance
    function = implementation(operator, backend)
    device = BACKEND_DEVICE[backend]
    rounded = [
        value.to(dtype) if index in cast and isinstance(value, torch.Tensor) else value
        for index, value in enumerate(inputs)
    ]

    def prepare(value, index, target_device, wide):
        if not isinstance(value, torch.Tensor):
            return value
        value = value.detach().to(target_device)
        if wide and value.is_floating_point():
            value = value.double()
        return value.requires_grad_(index in differentiable)

    reference_inputs = [prepare(v, i, "cpu", True) for i, v in enumerate(rounded)]
    tested_inputs = [prepare(v, i, device, False) for i, v in enumerate(rounded)]
    # Floating keyword tensors (compressed entries) are activations: rounded to dtype like the inputs.
    kwargs = {
        k: (v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in kwargs.items()
    }
    reference_kwargs = {k: prepare(v, -1, "cpu", True) for k, v in kwargs.items()}
    tested_kwargs = {k: prepare(v, -1, device, False) for k, v in kwargs.items()}

    expected = getattr(reference, operator)(*reference_inputs, **reference_kwargs)
    with buffers.poisoned_buffers():
        actual = function(*tested_inputs, **tested_kwargs)
    expected_leaves, actual_leaves = tree_flatten(expected)[0], tree_flatten(actual)[0]
    assert len(expected_leaves) == len(actual_leaves)
    generator = torch.Generator().manual_seed(seed)
    expected_total, actual_total = 0, 0
    for position, (want, got) in enumerate(zip(expected_leaves, actual_leaves, strict=True)):
        if not want.is_floating_point():
            assert torch.equal(got.cpu(), want), f"{operator}/{backend}: integer output {position} differs"
            continue
        error = relative_error(got, want)
        assert error <= tolerance, f"{operator}/{backend}/{dtype}: output {position} error {error:.2e} > {tolerance:.0e}"
        if want.requires_grad:
            weights = torch.randn(want.shape, generator=generator, dtype=torch.float64)
            finite = torch.isfinite(want.detach())
            weights = weights * finite
            expected_total = expected_total + (torch.where(finite, want, 0) * weights).sum()
            actual_total = actual_total + (torch.where(finite.to(got.device), got, 0) * weights.to(got.device, got.dtype)).sum()
    if not differentiable:
        return
    expected_total.backward()
    with buffers.poisoned_buffers():
        actual_total.backward()
    for index in differentiable:
        want, got = reference_inputs[index].grad, tested_inputs[index].grad
        assert got is not None, f"{operator}/{backend}: no gradient for input {index}"
        error = relative_error(got, want)
        assert error <= tolerance, (
            f"{operator}/{backend}/{dtype}: gradient of input {index} error {error:.2e} > {tolerance:.0e}"
        )
