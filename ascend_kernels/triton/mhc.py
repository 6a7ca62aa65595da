"""Manifold-constrained hyper-connections (mHC) in Triton: Sinkhorn, the stream collapse of hc_pre and
hc_head, and the hc_post update, each forward and backward.

- Sinkhorn: one program per block of tokens holds their [n, n] matrices in registers for all rounds.
  The forward saves only the logits; the backward replays the rounds once, writing the matrix before
  each normalization to a transient buffer, then steps the gradient back through them.
- collapse (sum_j pre_j * stream_j) and hc_post (post_k * out + sum_j comb[j, k] * stream_j): one
  program per token, walking the hidden width in blocks; the backward forms every gradient of a
  token in the same walk, in float32.
- hc_pre / hc_head: the projection of the normalized streams is a torch matmul (tensor cores) after
  the Triton RMSNorm; the site weights use reference.hc_site_weights with the Triton Sinkhorn.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ascend_kernels import buffers, reference
from ascend_kernels.registry import register
from ascend_kernels.triton.common import block, serves
from ascend_kernels.triton.elementwise import rms_norm

_SINKHORN_TOKENS = 64  # tokens per program
_WIDTH_BLOCK = 256  # hidden channels per step of the per-token walks


@triton.jit
def _normalize(comb, valid, eps, COLUMNS: tl.constexpr):
    """comb / (sum + eps), summing over a column (axis 1) or a row (axis 2)."""
    if COLUMNS:
        total = tl.sum(comb, axis=1)[:, None, :]
    else:
        total = tl.sum(comb, axis=2)[:, :, None]
    return tl.where(valid, comb / (total + eps), 0.0)


@triton.jit
def _normalize_backward(normalized, grad, valid, total_plus_eps, COLUMNS: tl.constexpr):
    """Gradient through y = x / (sum(x) + eps): (dy - sum(dy * y)) / (sum(x) + eps)."""
    if COLUMNS:
        correction = tl.sum(grad * normalized, axis=1)[:, None, :]
    else:
        correction = tl.sum(grad * normalized, axis=2)[:, :, None]
    return tl.where(valid, (grad - correction) / total_plus_eps, 0.0)


@triton.jit
def _sum_plus_eps(comb, eps, COLUMNS: tl.constexpr):
    if COLUMNS:
        return tl.sum(comb, axis=1)[:, None, :] + eps
    return tl.sum(comb, axis=2)[:, :, None] + eps


@triton.jit
def _softmax_plus_eps(logits, valid, eps):
    row_max = tl.max(tl.where(valid, logits, float("-inf")), axis=2)
    exponentials = tl.where(valid, tl.exp(logits - row_max[:, :, None]), 0.0)
    total = tl.sum(exponentials, axis=2)[:, :, None]
    probabilities = exponentials / tl.where(total > 0.0, total, 1.0)  # padding rows sum to 0
    return probabilities, tl.where(valid, probabilities + eps, 0.0)


@triton.jit
def _sinkhorn_tile(tokens, n, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_t = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_r = tl.arange(0, BLOCK_N)
    offsets = offs_t[:, None, None] * n * n + offs_r[None, :, None] * n + offs_r[None, None, :]
    valid = (offs_t < tokens)[:, None, None] & (offs_r < n)[None, :, None] & (offs_r < n)[None, None, :]
    return offsets, valid


@triton.jit
def _sinkhorn_forward_kernel(logits_ptr, out_ptr, states_ptr, tokens, n, iters, eps,
                             SAVE_STATES: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr):
    """softmax + eps, then 2 * iters - 1 normalizations (column, row, column, ...). With SAVE_STATES the
    matrix before each normalization is written to states [2 * iters - 1, tokens, n, n] instead."""
    offsets, valid = _sinkhorn_tile(tokens, n, BLOCK_T, BLOCK_N)
    logits = tl.load(logits_ptr + offsets, mask=valid, other=0.0).to(tl.float32)
    _, comb = _softmax_plus_eps(logits, valid, eps)
    stride = tokens * n * n
    for step in range(0, 2 * iters - 1):
        if SAVE_STATES:
            tl.store(states_ptr + step * stride + offsets, comb, mask=valid)
        if step % 2 == 0:
            comb = _normalize(comb, valid, eps, True)
        else:
            comb = _normalize(comb, valid, eps, False)
    if not SAVE_STATES:
        tl.store(out_ptr + offsets, comb, mask=valid)


@triton.jit
def _sinkhorn_backward_kernel(logits_ptr, states_ptr, grad_out_ptr, grad_logits_ptr, tokens, n, iters, eps,
                              BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr):
    offsets, valid = _sinkhorn_tile(tokens, n, BLOCK_T, BLOCK_N)
    grad = tl.load(grad_out_ptr + offsets, mask=valid, other=0.0).to(tl.float32)
    stride = tokens * n * n
    rounds = 2 * iters - 1
    for back in range(0, rounds):
        step = rounds - 1 - back  # even: a column normalization, odd: a row one
        before = tl.load(states_ptr + step * stride + offsets, mask=valid, other=0.0)
        if step % 2 == 0:
            after = _normalize(before, valid, eps, True)
            grad = _normalize_backward(after, grad, valid, _sum_plus_eps(before, eps, True), True)
        else:
            after = _normalize(before, valid, eps, False)
            grad = _normalize_backward(after, grad, valid, _sum_plus_eps(before, eps, False), False)
    logits = tl.load(logits_ptr + offsets, mask=valid, other=0.0).to(tl.float32)
    probabilities, _ = _softmax_plus_eps(logits, valid, eps)
    grad = probabilities * (grad - tl.sum(grad * probabilities, axis=2)[:, :, None])
    tl.store(grad_logits_ptr + offsets, grad, mask=valid)


class _Sinkhorn(torch.autograd.Function):
    """Saves only the logits; the backward replays the rounds once into a transient buffer of the
    2 * iters - 1 intermediate matrices (what autograd would keep for the whole step), then walks back."""

    @staticmethod
    def forward(ctx, logits, iters, eps):
        n = logits.shape[-1]
        tokens = logits.numel() // (n * n)
        out = buffers.empty(logits.shape, dtype=torch.float32, device=logits.device)
        grid = (triton.cdiv(tokens, _SINKHORN_TOKENS),)
        _sinkhorn_forward_kernel[grid](logits, out, out, tokens, n, iters, eps,
                                       SAVE_STATES=False, BLOCK_T=_SINKHORN_TOKENS, BLOCK_N=block(n))
        ctx.save_for_backward(logits)
        ctx.iters, ctx.eps = iters, eps
        return out

    @staticmethod
    def backward(ctx, grad_out):
        (logits,) = ctx.saved_tensors
        n = logits.shape[-1]
        tokens = logits.numel() // (n * n)
        grid = (triton.cdiv(tokens, _SINKHORN_TOKENS),)
        sizes = {"BLOCK_T": _SINKHORN_TOKENS, "BLOCK_N": block(n)}
        states = buffers.empty((2 * ctx.iters - 1, tokens, n, n), dtype=torch.float32, device=logits.device)
        _sinkhorn_forward_kernel[grid](logits, states, states, tokens, n, ctx.iters, ctx.eps, SAVE_STATES=True, **sizes)
        grad_logits = buffers.empty(logits.shape, dtype=torch.float32, device=logits.device)
        _sinkhorn_backward_kernel[grid](logits, states, grad_out.contiguous(), grad_logits, tokens, n,
                                        ctx.iters, ctx.eps, **sizes)
        return grad_logits.to(logits.dtype), None, None


@register("sinkhorn", "triton")
def sinkhorn(logits: torch.Tensor, iters: int = 20, eps: float = 1e-6) -> torch.Tensor:
    if not serves(logits) or logits.numel() == 0 or iters < 1:
        return reference.sinkhorn(logits, iters, eps)
    return _Sinkhorn.apply(logits.contiguous(), int(iters), float(eps))


# ----------------------------------------------------------------------------------------------------
# Collapse and hc_post: per-token walks over the hidden width.


@triton.jit
def _collapse_forward_kernel(pre_ptr, streams_ptr, out_ptr, n, width,
                             BLOCK_N: tl.constexpr, BLOCK_W: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    offs_j = tl.arange(0, BLOCK_N)
    j_valid = offs_j < n
    pre = tl.load(pre_ptr + token * n + offs_j, mask=j_valid, other=0.0)
    for start in range(0, width, BLOCK_W):
        offs_w = start + tl.arange(0, BLOCK_W)
        w_valid = offs_w < width
        streams = tl.load(streams_ptr + (token * n + offs_j)[:, None] * width + offs_w[None, :],
                          mask=j_valid[:, None] & w_valid[None, :], other=0.0).to(tl.float32)
        out = tl.sum(pre[:, None] * streams, axis=0)
        tl.store(out_ptr + token * width + offs_w, out.to(out_ptr.dtype.element_ty), mask=w_valid)


@triton.jit
def _collapse_backward_kernel(pre_ptr, streams_ptr, grad_out_ptr, grad_pre_ptr, grad_streams_ptr, n, width,
                              BLOCK_N: tl.constexpr, BLOCK_W: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    offs_j = tl.arange(0, BLOCK_N)
    j_valid = offs_j < n
    pre = tl.load(pre_ptr + token * n + offs_j, mask=j_valid, other=0.0)
    grad_pre = tl.zeros((BLOCK_N,), tl.float32)
    for start in range(0, width, BLOCK_W):
        offs_w = start + tl.arange(0, BLOCK_W)
        w_valid = offs_w < width
        tile = j_valid[:, None] & w_valid[None, :]
        stream_offsets = (token * n + offs_j)[:, None] * width + offs_w[None, :]
        streams = tl.load(streams_ptr + stream_offsets, mask=tile, other=0.0).to(tl.float32)
        grad_out = tl.load(grad_out_ptr + token * width + offs_w, mask=w_valid, other=0.0).to(tl.float32)
        grad_pre += tl.sum(streams * grad_out[None, :], axis=1)
        tl.store(grad_streams_ptr + stream_offsets, (pre[:, None] * grad_out[None, :]).to(grad_streams_ptr.dtype.element_ty),
                 mask=tile)
    tl.store(grad_pre_ptr + token * n + offs_j, grad_pre, mask=j_valid)


class _Collapse(torch.autograd.Function):
    """sum_j pre_j * stream_j: pre [N, n] float32, streams [N, n, W] -> [N, W] in streams' dtype."""

    @staticmethod
    def forward(ctx, pre, streams):
        tokens, n, width = streams.shape
        out = buffers.empty((tokens, width), dtype=streams.dtype, device=streams.device)
        _collapse_forward_kernel[(tokens,)](pre, streams, out, n, width, BLOCK_N=block(n), BLOCK_W=_WIDTH_BLOCK)
        ctx.save_for_backward(pre, streams)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        pre, streams = ctx.saved_tensors
        tokens, n, width = streams.shape
        grad_pre = buffers.empty(pre.shape, dtype=torch.float32, device=pre.device)
        grad_streams = buffers.empty(streams.shape, dtype=streams.dtype, device=streams.device)
        _collapse_backward_kernel[(tokens,)](pre, streams, grad_out.contiguous(), grad_pre, grad_streams, n, width,
                                             BLOCK_N=block(n), BLOCK_W=_WIDTH_BLOCK)
        return grad_pre.to(pre.dtype), grad_streams


def _collapse(pre: torch.Tensor, streams: torch.Tensor) -> torch.Tensor:
    n, width = streams.shape[-2:]
    flat = _Collapse.apply(pre.float().reshape(-1, n).contiguous(), streams.reshape(-1, n, width).contiguous())
    return flat.view(*streams.shape[:-2], width)


def _normalized_mixes(streams: torch.Tensor, fn: torch.Tensor, norm_eps: float) -> torch.Tensor:
    """fn @ rms_norm(flattened streams), in float32 ([..., M])."""
    return F.linear(rms_norm(streams.flatten(-2).float(), None, norm_eps), fn.float())


@register("hc_pre", "triton")
def hc_pre(streams, fn, base, scale, iters: int = 20, eps: float = 1e-6, norm_eps: float = 1e-6):
    if not serves(streams, fn, base, scale) or streams.numel() == 0:
        return reference.hc_pre(streams, fn, base, scale, iters, eps, norm_eps)
    mixes = _normalized_mixes(streams, fn, norm_eps)
    pre, post, comb = reference.hc_site_weights(mixes, streams.shape[-2], base, scale, iters, eps, sinkhorn)
    return _collapse(pre, streams), post, comb


@register("hc_head", "triton")
def hc_head(streams, fn, base, scale, eps: float = 1e-6, norm_eps: float = 1e-6):
    if not serves(streams, fn, base, scale) or streams.numel() == 0:
        return reference.hc_head(streams, fn, base, scale, eps, norm_eps)
    pre = torch.sigmoid(_normalized_mixes(streams, fn, norm_eps) * scale.float() + base.float()) + eps
    return _collapse(pre, streams)


@triton.jit
def _hc_post_forward_kernel(out_ptr, post_ptr, comb_ptr, streams_ptr, new_ptr, n, width,
                            BLOCK_N: tl.constexpr, BLOCK_W: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    offs_j = tl.arange(0, BLOCK_N)
    j_valid = offs_j < n
    post = tl.load(post_ptr + token * n + offs_j, mask=j_valid, other=0.0).to(tl.float32)
    # comb[j, k]: rows index the input stream j, columns the output stream k.
    comb = tl.load(comb_ptr + token * n * n + offs_j[:, None] * n + offs_j[None, :],
                   mask=j_valid[:, None] & j_valid[None, :], other=0.0).to(tl.float32)
    for start in range(0, width, BLOCK_W):
        offs_w = start + tl.arange(0, BLOCK_W)
        w_valid = offs_w < width
        tile = j_valid[:, None] & w_valid[None, :]
        stream_offsets = (token * n + offs_j)[:, None] * width + offs_w[None, :]
        streams = tl.load(streams_ptr + stream_offsets, mask=tile, other=0.0).to(tl.float32)
        out = tl.load(out_ptr + token * width + offs_w, mask=w_valid, other=0.0).to(tl.float32)
        mixed = tl.sum(comb[:, :, None] * streams[:, None, :], axis=0)  # [k, W]
        new = post[:, None] * out[None, :] + mixed
        tl.store(new_ptr + stream_offsets, new.to(new_ptr.dtype.element_ty), mask=tile)


@triton.jit
def _hc_post_backward_kernel(out_ptr, post_ptr, comb_ptr, streams_ptr, grad_ptr,
                             grad_out_ptr, grad_post_ptr, grad_comb_ptr, grad_streams_ptr, n, width,
                             BLOCK_N: tl.constexpr, BLOCK_W: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    offs_j = tl.arange(0, BLOCK_N)
    j_valid = offs_j < n
    square = j_valid[:, None] & j_valid[None, :]
    comb_offsets = token * n * n + offs_j[:, None] * n + offs_j[None, :]
    post = tl.load(post_ptr + token * n + offs_j, mask=j_valid, other=0.0).to(tl.float32)
    comb = tl.load(comb_ptr + comb_offsets, mask=square, other=0.0).to(tl.float32)
    grad_post = tl.zeros((BLOCK_N,), tl.float32)
    grad_comb = tl.zeros((BLOCK_N, BLOCK_N), tl.float32)
    for start in range(0, width, BLOCK_W):
        offs_w = start + tl.arange(0, BLOCK_W)
        w_valid = offs_w < width
        tile = j_valid[:, None] & w_valid[None, :]
        stream_offsets = (token * n + offs_j)[:, None] * width + offs_w[None, :]
        streams = tl.load(streams_ptr + stream_offsets, mask=tile, other=0.0).to(tl.float32)
        grad = tl.load(grad_ptr + stream_offsets, mask=tile, other=0.0).to(tl.float32)  # [k, W]
        out = tl.load(out_ptr + token * width + offs_w, mask=w_valid, other=0.0).to(tl.float32)
        grad_post += tl.sum(grad * out[None, :], axis=1)
        grad_comb += tl.sum(streams[:, None, :] * grad[None, :, :], axis=2)  # [j, k]
        grad_streams = tl.sum(comb[:, :, None] * grad[None, :, :], axis=1)  # [j, W]
        tl.store(grad_streams_ptr + stream_offsets, grad_streams.to(grad_streams_ptr.dtype.element_ty), mask=tile)
        grad_out = tl.sum(post[:, None] * grad, axis=0)
        tl.store(grad_out_ptr + token * width + offs_w, grad_out.to(grad_out_ptr.dtype.element_ty), mask=w_valid)
    tl.store(grad_post_ptr + token * n + offs_j, grad_post, mask=j_valid)
    tl.store(grad_comb_ptr + comb_offsets, grad_comb, mask=square)


class _HcPost(torch.autograd.Function):
    """On token-flattened contiguous operands: out [N, W], post [N, n], comb [N, n, n], streams [N, n, W]."""

    @staticmethod
    def forward(ctx, out, post, comb, streams):
        tokens, n, width = streams.shape
        new = buffers.empty(streams.shape, dtype=streams.dtype, device=streams.device)
        _hc_post_forward_kernel[(tokens,)](out, post, comb, streams, new, n, width,
                                           BLOCK_N=block(n), BLOCK_W=_WIDTH_BLOCK)
        ctx.save_for_backward(out, post, comb, streams)
        return new

    @staticmethod
    def backward(ctx, grad):
        out, post, comb, streams = ctx.saved_tensors
        tokens, n, width = streams.shape
        grad_out = buffers.empty_like(out)
        grad_post = buffers.empty(post.shape, dtype=torch.float32, device=post.device)
        grad_comb = buffers.empty(comb.shape, dtype=torch.float32, device=comb.device)
        grad_streams = buffers.empty_like(streams)
        _hc_post_backward_kernel[(tokens,)](out, post, comb, streams, grad.contiguous(),
                                            grad_out, grad_post, grad_comb, grad_streams, n, width,
                                            BLOCK_N=block(n), BLOCK_W=_WIDTH_BLOCK)
        return grad_out, grad_post.to(post.dtype), grad_comb.to(comb.dtype), grad_streams


@register("hc_post", "triton")
def hc_post(out, post, comb, streams):
    if not serves(out, post, comb, streams) or streams.numel() == 0:
        return reference.hc_post(out, post, comb, streams)
    n, width = streams.shape[-2:]
    new = _HcPost.apply(
        out.reshape(-1, width).contiguous(), post.reshape(-1, n).contiguous(),
        comb.reshape(-1, n, n).contiguous(), streams.reshape(-1, n, width).contiguous(),
    )
    return new.view(streams.shape)
