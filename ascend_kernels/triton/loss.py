"""Fused linear + cross-entropy for CUDA: the [N, V] logits never exist whole.

Tokens go through in chunks sized so one chunk's float32 logits stay under _LOGITS_PER_CHUNK values.
For each chunk, torch multiplies (tensor cores), then one Triton program per row finds the row's
log-sum-exp and loss and overwrites the logits, in place, with their gradient (softmax - one-hot,
scaled for the reduction, zero on ignored rows); two more matmuls turn it into the chunk's hidden
gradient and its share of the weight gradient. The gradients are therefore formed during the forward
(the loss is a scalar: the backward only scales them), and peak memory is one logits chunk plus the
gradients. The logits are the product in the inputs' dtype, upcast, as in the reference.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ascend_kernels import buffers, reference
from ascend_kernels.registry import register
from ascend_kernels.triton.common import serves

_LOGITS_PER_CHUNK = 2**25  # float32 values of one chunk's logits (128 MiB)
_BLOCK_V = 4096


@triton.jit
def _cross_entropy_rows_kernel(logits_ptr, targets_ptr, loss_ptr, grad_scale_ptr, vocab, ignore_index,
                               BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * vocab
    target = tl.load(targets_ptr + row)
    keep = target != ignore_index
    # Per-lane running maximum and sum, merged once at the end (one pass over the row). The finite
    # floor keeps lanes past the vocabulary at exp(floor - max) = 0 instead of exp(-inf + inf).
    row_max = tl.full((BLOCK_V,), -1e30, tl.float32)
    row_sum = tl.zeros((BLOCK_V,), tl.float32)
    for start in range(0, vocab, BLOCK_V):
        offsets = start + tl.arange(0, BLOCK_V)
        valid = offsets < vocab
        logits = tl.load(base + offsets, mask=valid, other=-1e30)
        new_max = tl.maximum(row_max, logits)
        row_sum = row_sum * tl.exp(row_max - new_max) + tl.where(valid, tl.exp(logits - new_max), 0.0)
        row_max = new_max
    overall_max = tl.max(row_max, axis=0)
    lse = overall_max + tl.log(tl.sum(row_sum * tl.exp(row_max - overall_max), axis=0))
    safe_target = tl.where(keep, target, 0)
    target_logit = tl.load(base + safe_target)
    tl.store(loss_ptr + row, tl.where(keep, lse - target_logit, 0.0))
    scale = tl.where(keep, tl.load(grad_scale_ptr), 0.0)
    for start in range(0, vocab, BLOCK_V):
        offsets = start + tl.arange(0, BLOCK_V)
        valid = offsets < vocab
        logits = tl.load(base + offsets, mask=valid, other=0.0)
        grad = tl.exp(logits - lse) - tl.where(offsets == safe_target, 1.0, 0.0)
        tl.store(base + offsets, grad * scale, mask=valid)


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, ignore_index, reduction):
        num_tokens = hidden.shape[0]
        vocab = weight.shape[0]
        valid_count = (targets != ignore_index).sum()
        # mean: each kept row's gradient is divided by the number of kept rows (1 when there are none,
        # where the loss is nan as in torch but no gradient reaches any row).
        grad_scale = (1.0 / valid_count.clamp_min(1).float()) if reduction == "mean" else torch.ones((), device=hidden.device)
        grad_scale = grad_scale.reshape(1).contiguous()
        row_losses = buffers.empty((num_tokens,), dtype=torch.float32, device=hidden.device)
        grad_hidden = buffers.empty_like(hidden)
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        chunk = max(1, min(num_tokens, _LOGITS_PER_CHUNK // vocab))
        for start in range(0, num_tokens, chunk):
            rows = slice(start, start + chunk)
            logits = (hidden[rows] @ weight.t()).float().contiguous()
            _cross_entropy_rows_kernel[(logits.shape[0],)](
                logits, targets[rows], row_losses[rows], grad_scale, vocab, ignore_index,
                BLOCK_V=_BLOCK_V, num_warps=8,
            )
            grad_logits = logits.to(hidden.dtype)
            del logits
            torch.mm(grad_logits, weight, out=grad_hidden[rows])
            grad_weight.add_(grad_logits.t() @ hidden[rows])
        total = row_losses.sum()
        loss = total / valid_count if reduction == "mean" else total
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.weight_dtype = weight.dtype
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        grad_hidden, grad_weight = ctx.saved_tensors
        return (
            (grad_hidden * grad_loss).to(grad_hidden.dtype),
            (grad_weight * grad_loss).to(ctx.weight_dtype),
            None, None, None,
        )


@register("linear_cross_entropy", "triton")
def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> torch.Tensor:
    if not serves(hidden, weight) or hidden.shape[0] == 0 or hidden.dtype != weight.dtype:
        return reference.linear_cross_entropy(hidden, weight, targets, ignore_index=ignore_index, reduction=reduction)
    if reduction not in ("mean", "sum"):
        raise ValueError(f"linear_cross_entropy: reduction must be 'mean' or 'sum', got {reduction!r}")
    return _LinearCrossEntropy.apply(
        hidden.contiguous(), weight.contiguous(), targets.long().contiguous(), int(ignore_index), reduction
    )
