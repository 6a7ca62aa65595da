"""Triton kernels for the memory-bound elementwise operators: RMSNorm, clamped SwiGLU, RoPE (the same
language serves Triton-Ascend).

Each kernel reads its inputs once and writes its outputs once, computing in float32 whatever the
storage dtype:
- RMSNorm: one program per row for the forward (saves the row's inverse RMS); the backward walks a
  block of rows per program and leaves per-program partial weight gradients that torch sums;
- clamped SwiGLU: flat elementwise forward and backward (the backward recomputes silu);
- RoPE: one program per (token, head) row; each channel reads its pair partner at `column ^ 1`. The
  backward is the same kernel with the sine negated (the rotation is orthogonal).
tests/kernels and benchmarks/gpu_check.py hold them to the reference.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ascend_kernels import buffers, reference
from ascend_kernels.registry import register
from ascend_kernels.triton.common import block as _block
from ascend_kernels.triton.common import program_count, serves
from ascend_kernels.triton.common import warps as _warps

# ----------------------------------------------------------------------------------------------------
# RMSNorm


@triton.jit
def _rms_norm_forward_kernel(
    x_ptr, weight_ptr, y_ptr, inverse_rms_ptr, columns, eps,
    HAS_WEIGHT: tl.constexpr, BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < columns
    raw = tl.load(x_ptr + row * columns + offsets, mask=mask, other=0.0)
    x = raw.to(tl.float32)
    inverse_rms = tl.rsqrt(tl.sum(x * x, axis=0) / columns + eps)
    tl.store(inverse_rms_ptr + row, inverse_rms)
    if HAS_WEIGHT:
        weight = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        y = x * inverse_rms * weight
    else:
        # V4's weight-free norm multiplies in the input dtype by the inverse RMS cast to that dtype. The
        # product of two bf16 / fp16 values is exact in float32, so multiplying there and rounding on
        # the store gives the same bits (and Triton's interpreter cannot do bf16 arithmetic).
        y = x * inverse_rms.to(raw.dtype).to(tl.float32)
    tl.store(y_ptr + row * columns + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_norm_backward_kernel(
    x_ptr, weight_ptr, grad_y_ptr, inverse_rms_ptr, grad_x_ptr, partial_grad_weight_ptr,
    rows, columns, rows_per_program,
    HAS_WEIGHT: tl.constexpr, BLOCK: tl.constexpr,
):
    program = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < columns
    if HAS_WEIGHT:
        weight = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    else:
        weight = tl.full((BLOCK,), 1.0, tl.float32)
    grad_weight = tl.zeros((BLOCK,), dtype=tl.float32)
    first = program * rows_per_program
    for index in range(0, rows_per_program):
        row = first + index
        if row < rows:
            row64 = row.to(tl.int64)
            x = tl.load(x_ptr + row64 * columns + offsets, mask=mask, other=0.0).to(tl.float32)
            grad_y = tl.load(grad_y_ptr + row64 * columns + offsets, mask=mask, other=0.0).to(tl.float32)
            inverse_rms = tl.load(inverse_rms_ptr + row64)
            normalized = x * inverse_rms
            scaled_grad = grad_y * weight
            correction = tl.sum(scaled_grad * normalized, axis=0) / columns
            grad_x = (scaled_grad - normalized * correction) * inverse_rms
            tl.store(grad_x_ptr + row64 * columns + offsets, grad_x.to(grad_x_ptr.dtype.element_ty), mask=mask)
            grad_weight += grad_y * normalized
    if HAS_WEIGHT:
        tl.store(partial_grad_weight_ptr + program * columns + offsets, grad_weight, mask=mask)


class _TritonRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        flat = x.reshape(-1, x.shape[-1]).contiguous()
        rows, columns = flat.shape
        y = buffers.empty(flat.shape, dtype=x.dtype, device=x.device)
        inverse_rms = buffers.empty((rows,), dtype=torch.float32, device=x.device)
        has_weight = weight is not None
        weight_arg = weight.contiguous() if has_weight else flat  # unused pointer when there is no weight
        block = _block(columns)
        _rms_norm_forward_kernel[(rows,)](
            flat, weight_arg, y, inverse_rms, columns, eps,
            HAS_WEIGHT=has_weight, BLOCK=block, num_warps=_warps(block),
        )
        ctx.save_for_backward(flat, weight_arg if has_weight else None, inverse_rms)
        ctx.has_weight = has_weight
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, grad_y):
        flat, weight, inverse_rms = ctx.saved_tensors
        rows, columns = flat.shape
        grad_flat = grad_y.reshape(-1, columns).contiguous()
        grad_x = buffers.empty(flat.shape, dtype=flat.dtype, device=flat.device)
        programs = max(1, min(rows, program_count(flat.device)))
        rows_per_program = triton.cdiv(rows, programs)
        # Per-program partial weight gradients (summed by torch below); without a weight the kernel never
        # touches this pointer, so any float32 buffer stands in.
        partial = (
            torch.empty((programs, columns), dtype=torch.float32, device=flat.device) if ctx.has_weight else inverse_rms
        )
        block = _block(columns)
        _rms_norm_backward_kernel[(programs,)](
            flat, weight if ctx.has_weight else flat, grad_flat, inverse_rms, grad_x, partial,
            rows, columns, rows_per_program, HAS_WEIGHT=ctx.has_weight, BLOCK=block, num_warps=_warps(block),
        )
        grad_weight = partial.sum(0).to(weight.dtype) if ctx.has_weight else None
        return grad_x.view(grad_y.shape), grad_weight, None


@register("rms_norm", "triton")
def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    if not serves(x, weight) or x.shape[-1] > 65536 or x.numel() == 0:
        return reference.rms_norm(x, weight, eps)
    return _TritonRMSNorm.apply(x, weight, eps)


# ----------------------------------------------------------------------------------------------------
# Clamped SwiGLU


@triton.jit
def _swiglu_forward_kernel(gate_ptr, up_ptr, out_ptr, count, limit, HAS_LIMIT: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < count
    gate = tl.load(gate_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(up_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    if HAS_LIMIT:
        gate = tl.minimum(gate, limit)
        up = tl.minimum(tl.maximum(up, -limit), limit)
    out = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_backward_kernel(
    gate_ptr, up_ptr, grad_out_ptr, grad_gate_ptr, grad_up_ptr, count, limit,
    HAS_LIMIT: tl.constexpr, BLOCK: tl.constexpr,
):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < count
    gate_in = tl.load(gate_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    up_in = tl.load(up_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    grad_out = tl.load(grad_out_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    gate = gate_in
    up = up_in
    if HAS_LIMIT:
        gate = tl.minimum(gate_in, limit)
        up = tl.minimum(tl.maximum(up_in, -limit), limit)
    sigmoid = tl.sigmoid(gate)
    silu = gate * sigmoid
    grad_gate = grad_out * up * sigmoid * (1.0 + gate * (1.0 - sigmoid))
    grad_up = grad_out * silu
    if HAS_LIMIT:
        # torch.clamp passes the gradient where the input lies within the bounds, ends included.
        grad_gate = tl.where(gate_in <= limit, grad_gate, 0.0)
        grad_up = tl.where((up_in >= -limit) & (up_in <= limit), grad_up, 0.0)
    tl.store(grad_gate_ptr + offsets, grad_gate.to(grad_gate_ptr.dtype.element_ty), mask=mask)
    tl.store(grad_up_ptr + offsets, grad_up.to(grad_up_ptr.dtype.element_ty), mask=mask)


_ELEMENTWISE_BLOCK = 1024


class _TritonSwiglu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate, up, limit):
        gate, up = gate.contiguous(), up.contiguous()
        out = buffers.empty(gate.shape, dtype=gate.dtype, device=gate.device)
        count = gate.numel()
        grid = (triton.cdiv(count, _ELEMENTWISE_BLOCK),)
        _swiglu_forward_kernel[grid](
            gate, up, out, count, float(limit or 0.0), HAS_LIMIT=bool(limit), BLOCK=_ELEMENTWISE_BLOCK
        )
        ctx.save_for_backward(gate, up)
        ctx.limit = limit
        return out

    @staticmethod
    def backward(ctx, grad_out):
        gate, up = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        grad_gate = buffers.empty(gate.shape, dtype=gate.dtype, device=gate.device)
        grad_up = buffers.empty(up.shape, dtype=up.dtype, device=up.device)
        count = gate.numel()
        grid = (triton.cdiv(count, _ELEMENTWISE_BLOCK),)
        _swiglu_backward_kernel[grid](
            gate, up, grad_out, grad_gate, grad_up, count, float(ctx.limit or 0.0),
            HAS_LIMIT=bool(ctx.limit), BLOCK=_ELEMENTWISE_BLOCK,
        )
        return grad_gate, grad_up, None


@register("swiglu", "triton")
def swiglu(gate: torch.Tensor, up: torch.Tensor, limit: float | None = None) -> torch.Tensor:
    if not serves(gate, up) or gate.shape != up.shape or gate.numel() == 0:
        return reference.swiglu(gate, up, limit)
    return _TritonSwiglu.apply(gate, up, limit)


# ----------------------------------------------------------------------------------------------------
# Partial interleaved RoPE


@triton.jit
def _rope_kernel(
    x_ptr, cos_ptr, sin_ptr, out_ptr, heads, columns, pairs, sine_sign,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)  # one (batch, position, head) row of `columns` channels
    token = row // heads
    offsets = tl.arange(0, BLOCK)
    mask = offsets < columns
    x = tl.load(x_ptr + row * columns + offsets, mask=mask, other=0.0)
    first_rotary = columns - 2 * pairs
    rotary = (offsets >= first_rotary) & mask
    # Pair partner of each channel: (2i, 2i+1) -> (2i+1, 2i), relative to the start of the rotary slice.
    partner = first_rotary + ((offsets - first_rotary) ^ 1)
    partner_x = tl.load(x_ptr + row * columns + partner, mask=rotary, other=0.0).to(tl.float32)
    pair = (offsets - first_rotary) // 2
    cos = tl.load(cos_ptr + token * pairs + pair, mask=rotary, other=1.0).to(tl.float32)
    sin = tl.load(sin_ptr + token * pairs + pair, mask=rotary, other=0.0).to(tl.float32) * sine_sign
    is_even = ((offsets - first_rotary) % 2) == 0
    # even channel a of (a, b): a cos - b sin; odd channel b: b cos + a sin.
    rotated = x.to(tl.float32) * cos + tl.where(is_even, -partner_x, partner_x) * sin
    out = tl.where(rotary, rotated.to(x.dtype), x)
    tl.store(out_ptr + row * columns + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def _launch_rope(x4: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, sine_sign: float) -> torch.Tensor:
    batch, seq_len, heads, columns = x4.shape
    out = buffers.empty(x4.shape, dtype=x4.dtype, device=x4.device)
    block = _block(columns)
    _rope_kernel[(batch * seq_len * heads,)](
        x4, cos, sin, out, heads, columns, cos.shape[-1], sine_sign, BLOCK=block, num_warps=_warps(block)
    )
    return out


class _TritonRope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x4, cos, sin, sine_sign):
        ctx.save_for_backward(cos, sin)
        ctx.sine_sign = sine_sign
        return _launch_rope(x4, cos, sin, sine_sign)

    @staticmethod
    def backward(ctx, grad_out):
        cos, sin = ctx.saved_tensors
        return _launch_rope(grad_out.contiguous(), cos, sin, -ctx.sine_sign), None, None, None


@register("apply_rope", "triton")
def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    if not serves(x, cos, sin) or x.numel() == 0:
        return reference.apply_rope(x, cos, sin, inverse)
    x4 = (x if x.dim() == 4 else x.unsqueeze(2)).contiguous()
    if cos.dim() == 2:
        cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)
    # Angles per (batch, position): materialized so the kernel can index them as token * pairs + pair.
    cos = cos.expand(x4.shape[0], x4.shape[1], -1).contiguous()
    sin = sin.expand(x4.shape[0], x4.shape[1], -1).contiguous()
    out = _TritonRope.apply(x4, cos, sin, -1.0 if inverse else 1.0)
    return out if x.dim() == 4 else out.squeeze(2)
