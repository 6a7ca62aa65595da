"""RMSNorm, partial interleaved RoPE, clamped SwiGLU, Sinkhorn and the mHC pre / post / head mixes: every
implementation against the float64 reference, forward and backward, in several shapes and dtypes."""

from __future__ import annotations

import pytest
import torch
from kernels_testing import backend_params, check_against_reference

DTYPES = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(3, 17, 64), (2, 5, 4, 96), (1, 1, 512)], ids=str)
@pytest.mark.parametrize("weighted", [True, False], ids=["weight", "no-weight"])
def test_rms_norm(backend, dtype, shape, weighted):
    generator = torch.Generator().manual_seed(hash((shape, weighted)) % 2**31)
    x = torch.randn(shape, generator=generator) * 3 + 0.5
    # V4 keeps norm weights in float32 whatever the activations' dtype.
    weight = torch.randn(shape[-1], generator=generator) if weighted else None
    check_against_reference(
        "rms_norm", backend, dtype, [x, weight, 1e-6], cast=[0], differentiable=[0, 1] if weighted else [0]
    )


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "x_shape, angle_shape",
    [((2, 7, 3, 80), (2, 7, 32)), ((2, 9, 64), (2, 9, 32)), ((3, 5, 2, 16), (5, 8))],
    ids=["heads-partial", "single-head-full", "shared-angles"],
)
@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
def test_apply_rope(backend, dtype, x_shape, angle_shape, inverse):
    generator = torch.Generator().manual_seed(sum(x_shape) + inverse)
    x = torch.randn(x_shape, generator=generator)
    angles = torch.rand(angle_shape, generator=generator) * 100
    check_against_reference(
        "apply_rope", backend, dtype, [x, angles.cos(), angles.sin(), inverse], cast=[0, 1, 2], differentiable=[0]
    )


@pytest.mark.parametrize("x_shape", [(2, 7, 3, 80), (1, 5, 1, 128), (3, 1, 4, 16)], ids=str)
def test_cpu_rope_bf16_word_kernel_is_bit_exact(x_shape):
    """The CPU backend rotates bf16 pairs as int32 words and rounds them itself: the result must be
    exactly the bits of the reference (which rotates in float32 and casts), NaN included, both ways."""
    from ascend_kernels import cpu, reference

    generator = torch.Generator().manual_seed(sum(x_shape))
    x = (torch.randn(x_shape, generator=generator) * 5).to(torch.bfloat16)
    x[0, 0, 0, -1] = float("nan")
    angles = torch.rand(x_shape[0], x_shape[1], 8, generator=generator) * 100
    cos, sin = angles.cos(), angles.sin()
    for inverse in (False, True):
        expected = reference.apply_rope(x, cos, sin, inverse)
        assert torch.equal(cpu.apply_rope(x, cos, sin, inverse).isnan(), expected.isnan())
        assert torch.equal(cpu.apply_rope(x, cos, sin, inverse).nan_to_num(), expected.nan_to_num())
    # The gradient is the inverse rotation of the incoming gradient, rounded once (autograd through the
    # reference rounds each of its two terms to bf16 before adding them: within one bf16 step of it).
    x = x.nan_to_num().requires_grad_()
    grad = torch.randn(x_shape, generator=generator).to(torch.bfloat16)
    (grad_x,) = torch.autograd.grad(cpu.apply_rope(x, cos, sin), x, grad)
    assert torch.equal(grad_x, reference.apply_rope(grad, cos, sin, inverse=True))
    (autograd_x,) = torch.autograd.grad(reference.apply_rope(x, cos, sin), x, grad)
    torch.testing.assert_close(grad_x, autograd_x, rtol=2**-7, atol=2**-7)


def test_cpu_rope_bf16_takes_any_contiguous_layout():
    """Contiguous tensors may start at an odd element or carry odd strides on size-1 dims; the word
    kernel's int32 view must cope with both."""
    from ascend_kernels import cpu, reference

    angles = torch.rand(1, 5, 8) * 10
    cos, sin = angles.cos(), angles.sin()
    storage = torch.randn(1 + 5 * 2 * 16).to(torch.bfloat16)
    odd_offset = storage[1:].view(1, 5, 2, 16)
    odd_strides = torch.randn(5, 2, 16).to(torch.bfloat16).as_strided((1, 5, 2, 16), (1, 32, 16, 1))
    for x in (odd_offset, odd_strides):
        assert x.is_contiguous()
        assert torch.equal(cpu.apply_rope(x, cos, sin), reference.apply_rope(x, cos, sin))


def test_rope_leaves_leading_channels_and_inverse_undoes_it():
    from ascend_kernels import ops

    x = torch.randn(2, 6, 3, 40, dtype=torch.float64)
    angles = torch.rand(2, 6, 8, dtype=torch.float64) * 10
    rotated = ops.apply_rope(x, angles.cos(), angles.sin())
    assert torch.equal(rotated[..., :24], x[..., :24])
    assert not torch.allclose(rotated[..., 24:], x[..., 24:])
    restored = ops.apply_rope(rotated, angles.cos(), angles.sin(), inverse=True)
    torch.testing.assert_close(restored, x)


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(64, 96), (2, 3, 40)], ids=str)
@pytest.mark.parametrize("limit", [10.0, None], ids=["limit10", "no-limit"])
def test_swiglu(backend, dtype, shape, limit):
    generator = torch.Generator().manual_seed(len(shape))
    # Spread wide enough that both clamps bind on part of the inputs.
    gate = torch.randn(shape, generator=generator) * 8
    up = torch.randn(shape, generator=generator) * 8
    check_against_reference("swiglu", backend, dtype, [gate, up, limit], cast=[0, 1], differentiable=[0, 1])


def test_swiglu_clamps_like_v4():
    from ascend_kernels import ops

    gate = torch.tensor([20.0, -3.0, 1.0], dtype=torch.float64)
    up = torch.tensor([30.0, -40.0, 2.0], dtype=torch.float64)
    out = ops.swiglu(gate, up, 10.0)
    expected = torch.nn.functional.silu(torch.tensor([10.0, -3.0, 1.0], dtype=torch.float64)) * torch.tensor(
        [10.0, -10.0, 2.0], dtype=torch.float64
    )
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("shape", [(2, 33, 4, 4), (5, 3, 3)], ids=str)
@pytest.mark.parametrize("iters", [20, 3])
def test_sinkhorn(backend, shape, iters):
    generator = torch.Generator().manual_seed(iters)
    logits = torch.randn(shape, generator=generator) * 2
    check_against_reference(
        "sinkhorn", backend, torch.float32, [logits, iters, 1e-6], cast=[0], differentiable=[0]
    )


def _hc_inputs(shape, seed):
    """Streams [..., n, D] and one site's float32 mHC parameters (fn, base, scale), at V4's scales."""
    generator = torch.Generator().manual_seed(seed)
    n, width = shape[-2], shape[-1]
    streams = torch.randn(shape, generator=generator) * 2
    fn = torch.randn((2 + n) * n, n * width, generator=generator) * (n * width) ** -0.5
    base = torch.randn((2 + n) * n, generator=generator) * 0.5
    scale = torch.rand(3, generator=generator) + 0.5
    return streams, fn, base, scale


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 33, 4, 16), (3, 1, 4, 8), (5, 2, 24)], ids=str)
def test_hc_pre(backend, dtype, shape):
    streams, fn, base, scale = _hc_inputs(shape, seed=len(shape) * 100 + shape[-1])
    # Outputs: the collapsed input (in dtype), post and comb (float32); gradients reach the streams
    # and all three parameters.
    check_against_reference(
        "hc_pre", backend, dtype, [streams, fn, base, scale, 20, 1e-6, 1e-6], cast=[0], differentiable=[0, 1, 2, 3]
    )


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 33, 4, 16), (3, 1, 4, 8), (5, 2, 24)], ids=str)
def test_hc_head(backend, dtype, shape):
    generator = torch.Generator().manual_seed(shape[-1] + 7)
    n, width = shape[-2], shape[-1]
    streams = torch.randn(shape, generator=generator) * 2
    fn = torch.randn(n, n * width, generator=generator) * (n * width) ** -0.5
    base = torch.randn(n, generator=generator) * 0.5
    scale = torch.rand(1, generator=generator) + 0.5
    check_against_reference(
        "hc_head", backend, dtype, [streams, fn, base, scale, 1e-6, 1e-6], cast=[0], differentiable=[0, 1, 2, 3]
    )


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 33, 4, 16), (3, 1, 4, 8), (5, 2, 24)], ids=str)
def test_hc_post(backend, dtype, shape):
    generator = torch.Generator().manual_seed(shape[-1])
    n, width = shape[-2], shape[-1]
    out = torch.randn(*shape[:-2], width, generator=generator)
    post = 2 * torch.rand(*shape[:-2], n, generator=generator)
    comb = torch.rand(*shape[:-2], n, n, generator=generator)
    streams = torch.randn(shape, generator=generator)
    check_against_reference("hc_post", backend, dtype, [out, post, comb, streams], cast=[0, 3], differentiable=[0, 1, 2, 3])


def test_hc_post_mixes_input_streams_by_comb_rows():
    # comb[j, k] carries input stream j into output stream k (transformers applies comb transposed).
    from ascend_kernels import ops

    streams = torch.arange(8.0).view(1, 1, 2, 4)  # stream 0 = [0..3], stream 1 = [4..7]
    comb = torch.tensor([[[[0.0, 1.0], [0.0, 0.0]]]])  # only 0 -> 1
    mixed = ops.hc_post(torch.zeros(1, 1, 4), torch.zeros(1, 1, 2), comb, streams)
    assert torch.equal(mixed[0, 0, 0], torch.zeros(4)) and torch.equal(mixed[0, 0, 1], streams[0, 0, 0])


def test_sinkhorn_is_nearly_doubly_stochastic():
    from ascend_kernels import ops

    comb = ops.sinkhorn(torch.randn(7, 4, 4, generator=torch.Generator().manual_seed(0)), iters=20)
    # The last step normalizes columns, so they are exact; rows have converged to within a few percent.
    torch.testing.assert_close(comb.sum(-2), torch.ones(7, 4), atol=1e-5, rtol=0)
    torch.testing.assert_close(comb.sum(-1), torch.ones(7, 4), atol=3e-2, rtol=0)
    assert (comb > 0).all()
