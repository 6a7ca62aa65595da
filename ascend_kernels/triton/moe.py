"""Routed experts on CUDA: torch's grouped GEMM and Triton row gathers for the token permute/unpermute.

- grouped_matmul: torch._grouped_mm, one call for all experts, with int32 cumulative offsets, where it
  runs for the device and dtype (tried once; the reference's loop elsewhere). Its backward rejects a gradient
  with zero strides (what `y.sum()` hands back), so the output passes through an identity whose
  backward makes the gradient contiguous.
- moe_permute / moe_unpermute: the order comes from torch (stable argsort, bincount); every row
  movement, forward and backward, is one Triton gather: out[r] = sum_j w[r, j] * src[index[r * J + j]]
  in float32, with the inverse permutation turning each backward scatter-add into a gather too.
  The routing weights' gradient is a per-slot dot product, a second small kernel.
"""

from __future__ import annotations

import functools
import logging

import torch
import triton
import triton.language as tl

from ascend_kernels import buffers, reference
from ascend_kernels.registry import register
from ascend_kernels.triton.common import serves

logger = logging.getLogger("ascend_kernels")

_BLOCK_W = 256


class _ContiguousGradient(torch.autograd.Function):
    """Identity whose backward hands on a contiguous gradient."""

    @staticmethod
    def forward(ctx, tensor):
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        return grad.contiguous()


@functools.cache
def _grouped_mm_runs(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether torch._grouped_mm runs here for this dtype (its CUDA kernels need recent GPUs and
    dtypes), found by trying a small product once; where it does not, the reference's loop serves."""
    try:
        x = torch.ones(32, 16, device=device, dtype=dtype)
        weight = torch.ones(2, 16, 16, device=device, dtype=dtype)
        torch._grouped_mm(x, weight.transpose(-2, -1), offs=torch.tensor([16, 32], device=device, dtype=torch.int32))
        return True
    except RuntimeError as error:
        logger.warning("ascend_kernels: torch._grouped_mm does not run on %s for %s (%s); grouped_matmul uses the "
                       "reference loop", device, dtype, str(error).splitlines()[0] if str(error) else type(error).__name__)
        return False


@register("grouped_matmul", "triton")
def grouped_matmul(x: torch.Tensor, weight: torch.Tensor, tokens_per_expert: torch.Tensor) -> torch.Tensor:
    if (not serves(x, weight) or x.shape[0] == 0 or x.dtype != weight.dtype
            or not _grouped_mm_runs(x.device, x.dtype)):
        return reference.grouped_matmul(x, weight, tokens_per_expert)
    offsets = torch.cumsum(tokens_per_expert, dim=0).to(torch.int32)
    return _ContiguousGradient.apply(torch._grouped_mm(x, weight.transpose(-2, -1), offs=offsets))


@triton.jit
def _gather_rows_kernel(src_ptr, index_ptr, weights_ptr, out_ptr, slots, width,
                        WEIGHTED: tl.constexpr, BLOCK_W: tl.constexpr):
    """out[row] = sum over slots j of weights[row * slots + j] * src[index[row * slots + j]]."""
    row = tl.program_id(0).to(tl.int64)
    offs_w = tl.program_id(1) * BLOCK_W + tl.arange(0, BLOCK_W)
    w_valid = offs_w < width
    total = tl.zeros((BLOCK_W,), tl.float32)
    for slot in range(0, slots):
        source_row = tl.load(index_ptr + row * slots + slot).to(tl.int64)
        values = tl.load(src_ptr + source_row * width + offs_w, mask=w_valid, other=0.0).to(tl.float32)
        if WEIGHTED:
            values = values * tl.load(weights_ptr + row * slots + slot).to(tl.float32)
        total += values
    tl.store(out_ptr + row * width + offs_w, total.to(out_ptr.dtype.element_ty), mask=w_valid)


@triton.jit
def _slot_dots_kernel(grad_ptr, src_ptr, index_ptr, out_ptr, slots, width, BLOCK_W: tl.constexpr):
    """out[row * slots + j] = grad[row] . src[index[row * slots + j]], in float32."""
    row = tl.program_id(0).to(tl.int64)
    slot = tl.program_id(1)
    source_row = tl.load(index_ptr + row * slots + slot).to(tl.int64)
    total = tl.zeros((BLOCK_W,), tl.float32)
    for start in range(0, width, BLOCK_W):
        offs_w = start + tl.arange(0, BLOCK_W)
        w_valid = offs_w < width
        grad = tl.load(grad_ptr + row * width + offs_w, mask=w_valid, other=0.0).to(tl.float32)
        values = tl.load(src_ptr + source_row * width + offs_w, mask=w_valid, other=0.0).to(tl.float32)
        total += grad * values
    tl.store(out_ptr + row * slots + slot, tl.sum(total, axis=0))


def _gather_rows(src: torch.Tensor, index: torch.Tensor, slots: int, weights: torch.Tensor | None = None,
                 dtype: torch.dtype | None = None) -> torch.Tensor:
    rows = index.shape[0] // slots
    width = src.shape[1]
    out = buffers.empty((rows, width), dtype=dtype or src.dtype, device=src.device)
    if rows and width:
        _gather_rows_kernel[(rows, triton.cdiv(width, _BLOCK_W))](
            src, index, weights if weights is not None else src, out, slots, width,
            WEIGHTED=weights is not None, BLOCK_W=_BLOCK_W,
        )
    return out


def _inverse(order: torch.Tensor) -> torch.Tensor:
    """inverse[order[r]] = r: for each flat (token, slot) assignment, its permuted row."""
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=order.device)
    return inverse.contiguous()


class _PermuteRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tokens, source_tokens, inverse, top_k):
        ctx.save_for_backward(inverse)
        ctx.top_k = top_k
        return _gather_rows(tokens, source_tokens, 1)

    @staticmethod
    def backward(ctx, grad_permuted):
        (inverse,) = ctx.saved_tensors
        # Each token's gradient is the sum of its k copies' rows: a gather through the inverse order.
        return _gather_rows(grad_permuted.contiguous(), inverse, ctx.top_k), None, None, None


@register("moe_permute", "triton")
def moe_permute(
    tokens: torch.Tensor, topk_ids: torch.Tensor, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if not serves(tokens) or tokens.numel() == 0:
        return reference.moe_permute(tokens, topk_ids, num_experts)
    top_k = topk_ids.shape[1]
    flat_ids = topk_ids.reshape(-1)
    sorted_order = torch.argsort(flat_ids, stable=True)
    tokens_per_expert = torch.bincount(flat_ids, minlength=num_experts)
    source_tokens = (sorted_order // top_k).contiguous()
    permuted = _PermuteRows.apply(tokens.contiguous(), source_tokens, _inverse(sorted_order), top_k)
    return permuted, tokens_per_expert, sorted_order


class _UnpermuteRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, expert_output, sorted_order, inverse, topk_weights):
        top_k = topk_weights.shape[1]
        out = _gather_rows(expert_output, inverse, top_k, weights=topk_weights)
        ctx.save_for_backward(expert_output, sorted_order, inverse, topk_weights)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        expert_output, sorted_order, inverse, topk_weights = ctx.saved_tensors
        num_tokens, top_k = topk_weights.shape
        grad_out = grad_out.contiguous()
        # Row r of the expert output came from assignment a = sorted_order[r]: grad = w[a] * grad_out[a // k].
        row_weights = topk_weights.reshape(-1)[sorted_order].contiguous()
        grad_expert = _gather_rows(grad_out, (sorted_order // top_k).contiguous(), 1, weights=row_weights,
                                   dtype=expert_output.dtype)
        grad_weights = buffers.empty((num_tokens, top_k), dtype=torch.float32, device=grad_out.device)
        _slot_dots_kernel[(num_tokens, top_k)](grad_out, expert_output, inverse, grad_weights, top_k,
                                               expert_output.shape[1], BLOCK_W=_BLOCK_W)
        return grad_expert, None, None, grad_weights.to(topk_weights.dtype)


@register("moe_unpermute", "triton")
def moe_unpermute(
    expert_output: torch.Tensor, sorted_order: torch.Tensor, topk_weights: torch.Tensor
) -> torch.Tensor:
    if not serves(expert_output, topk_weights) or expert_output.numel() == 0:
        return reference.moe_unpermute(expert_output, sorted_order, topk_weights)
    return _UnpermuteRows.apply(
        expert_output.contiguous(), sorted_order.contiguous(), _inverse(sorted_order), topk_weights.contiguous()
    )
