"""The lightning indexer in Triton: its scores (forward and backward), its top-k, and the target of its
KL loss.

- scores[b, s, t] = scale * sum_h w[b, s, h] * relu(q[b, s, h] . k[b, t]): one program per (query
  block, entry block) sums the heads in registers, so the per-head [B, S, H, T] products of the
  reference never exist. The backward recomputes q . k: one kernel per query block (query and weight
  gradients), one per entry block (key gradient, summed over queries and heads).
- top-k: the Triton scores, then reference.select_visible_topk (torch.topk on the masked scores).
- KL target: per query block, a first walk over the entries finds each head's log-sum-exp over the
  selected entries; a second writes the head-averaged probabilities, block by block (no gradient).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ascend_kernels import buffers, reference
from ascend_kernels.registry import register
from ascend_kernels.triton.common import block, dot, dot_precision, serves

_BLOCK_S = 32
_BLOCK_T = 32


def _block_d(head_dim: int) -> int:
    return max(16, block(head_dim))


@triton.jit
def _head_logits(q_ptr, keys, batch, offs_s, s_valid, head, seq_len, heads, head_dim,
                 BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """The query block of one head and its unscaled products with a block of keys [S, T]."""
    offs_d = tl.arange(0, BLOCK_D)
    rows = (batch * seq_len + offs_s) * heads + head
    q = tl.load(q_ptr + rows[:, None] * head_dim + offs_d[None, :],
                mask=s_valid[:, None] & (offs_d[None, :] < head_dim), other=0.0)
    return q, dot(q, tl.trans(keys), PRECISION)


@triton.jit
def _load_keys(keys_ptr, batch, offs_t, num_entries, head_dim, BLOCK_D: tl.constexpr):
    offs_d = tl.arange(0, BLOCK_D)
    return tl.load(keys_ptr + (batch * num_entries + offs_t)[:, None] * head_dim + offs_d[None, :],
                   mask=(offs_t < num_entries)[:, None] & (offs_d[None, :] < head_dim), other=0.0)


@triton.jit
def _scores_forward_kernel(q_ptr, keys_ptr, weights_ptr, scores_ptr, seq_len, heads, head_dim, num_entries, scale,
                           BLOCK_S: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
                           PRECISION: tl.constexpr):
    batch = tl.program_id(2).to(tl.int64)
    offs_s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    offs_t = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
    s_valid = offs_s < seq_len
    keys = _load_keys(keys_ptr, batch, offs_t, num_entries, head_dim, BLOCK_D)
    total = tl.zeros((BLOCK_S, BLOCK_T), tl.float32)
    for head in range(0, heads):
        _, logits = _head_logits(q_ptr, keys, batch, offs_s, s_valid, head, seq_len, heads, head_dim,
                                 BLOCK_D, PRECISION)
        weight = tl.load(weights_ptr + (batch * seq_len + offs_s) * heads + head, mask=s_valid, other=0.0)
        total += weight.to(tl.float32)[:, None] * tl.maximum(logits, 0.0)
    tl.store(scores_ptr + (batch * seq_len + offs_s)[:, None] * num_entries + offs_t[None, :], total * scale,
             mask=s_valid[:, None] & (offs_t < num_entries)[None, :])


@triton.jit
def _scores_query_backward_kernel(q_ptr, keys_ptr, weights_ptr, grad_scores_ptr, grad_q_ptr, grad_weights_ptr,
                                  seq_len, heads, head_dim, num_entries, scale,
                                  BLOCK_S: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
                                  PRECISION: tl.constexpr):
    batch = tl.program_id(1).to(tl.int64)
    offs_s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_valid = offs_s < seq_len
    for head in range(0, heads):
        weight = tl.load(weights_ptr + (batch * seq_len + offs_s) * heads + head, mask=s_valid, other=0.0)
        weight = weight.to(tl.float32)
        grad_q = tl.zeros((BLOCK_S, BLOCK_D), tl.float32)
        grad_weight = tl.zeros((BLOCK_S,), tl.float32)
        for start in range(0, num_entries, BLOCK_T):
            offs_t = start + tl.arange(0, BLOCK_T)
            keys = _load_keys(keys_ptr, batch, offs_t, num_entries, head_dim, BLOCK_D)
            _, logits = _head_logits(q_ptr, keys, batch, offs_s, s_valid, head, seq_len, heads, head_dim,
                                     BLOCK_D, PRECISION)
            grad_scores = tl.load(grad_scores_ptr + (batch * seq_len + offs_s)[:, None] * num_entries + offs_t[None, :],
                                  mask=s_valid[:, None] & (offs_t < num_entries)[None, :], other=0.0)
            grad_weight += tl.sum(grad_scores * tl.maximum(logits, 0.0), axis=1)
            grad_logits = tl.where(logits > 0.0, grad_scores * weight[:, None], 0.0)
            grad_q += dot(grad_logits.to(keys.dtype), keys, PRECISION)
        rows = (batch * seq_len + offs_s) * heads + head
        tl.store(grad_q_ptr + rows[:, None] * head_dim + offs_d[None, :], (grad_q * scale).to(grad_q_ptr.dtype.element_ty),
                 mask=s_valid[:, None] & (offs_d[None, :] < head_dim))
        tl.store(grad_weights_ptr + rows, grad_weight * scale, mask=s_valid)


@triton.jit
def _scores_key_backward_kernel(q_ptr, keys_ptr, weights_ptr, grad_scores_ptr, grad_keys_ptr,
                                seq_len, heads, head_dim, num_entries, scale,
                                BLOCK_S: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
                                PRECISION: tl.constexpr):
    batch = tl.program_id(1).to(tl.int64)
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_d = tl.arange(0, BLOCK_D)
    keys = _load_keys(keys_ptr, batch, offs_t, num_entries, head_dim, BLOCK_D)
    grad_keys = tl.zeros((BLOCK_T, BLOCK_D), tl.float32)
    for start in range(0, seq_len, BLOCK_S):
        offs_s = start + tl.arange(0, BLOCK_S)
        s_valid = offs_s < seq_len
        grad_scores = tl.load(grad_scores_ptr + (batch * seq_len + offs_s)[:, None] * num_entries + offs_t[None, :],
                              mask=s_valid[:, None] & (offs_t < num_entries)[None, :], other=0.0)
        for head in range(0, heads):
            q, logits = _head_logits(q_ptr, keys, batch, offs_s, s_valid, head, seq_len, heads, head_dim,
                                     BLOCK_D, PRECISION)
            weight = tl.load(weights_ptr + (batch * seq_len + offs_s) * heads + head, mask=s_valid, other=0.0)
            grad_logits = tl.where(logits > 0.0, grad_scores * weight.to(tl.float32)[:, None], 0.0)
            grad_keys += dot(tl.trans(grad_logits).to(q.dtype), q, PRECISION)
    tl.store(grad_keys_ptr + (batch * num_entries + offs_t)[:, None] * head_dim + offs_d[None, :],
             (grad_keys * scale).to(grad_keys_ptr.dtype.element_ty),
             mask=(offs_t < num_entries)[:, None] & (offs_d[None, :] < head_dim))


class _IndexerScores(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, keys, weights, scale):
        batch, seq_len, heads, head_dim = query.shape
        num_entries = keys.shape[1]
        scores = buffers.empty((batch, seq_len, num_entries), dtype=torch.float32, device=query.device)
        grid = (triton.cdiv(seq_len, _BLOCK_S), triton.cdiv(num_entries, _BLOCK_T), batch)
        _scores_forward_kernel[grid](query, keys, weights, scores, seq_len, heads, head_dim, num_entries, scale,
                                     BLOCK_S=_BLOCK_S, BLOCK_T=_BLOCK_T, BLOCK_D=_block_d(head_dim),
                                     PRECISION=dot_precision(query.dtype))
        ctx.save_for_backward(query, keys, weights)
        ctx.scale = scale
        return scores

    @staticmethod
    def backward(ctx, grad_scores):
        query, keys, weights = ctx.saved_tensors
        batch, seq_len, heads, head_dim = query.shape
        num_entries = keys.shape[1]
        grad_scores = grad_scores.float().contiguous()
        grad_q = buffers.empty_like(query)
        grad_weights = buffers.empty(weights.shape, dtype=torch.float32, device=weights.device)
        grad_keys = buffers.empty_like(keys)
        shared = {"BLOCK_S": _BLOCK_S, "BLOCK_T": _BLOCK_T, "BLOCK_D": _block_d(head_dim),
                  "PRECISION": dot_precision(query.dtype)}
        _scores_query_backward_kernel[(triton.cdiv(seq_len, _BLOCK_S), batch)](
            query, keys, weights, grad_scores, grad_q, grad_weights, seq_len, heads, head_dim, num_entries,
            ctx.scale, **shared,
        )
        _scores_key_backward_kernel[(triton.cdiv(num_entries, _BLOCK_T), batch)](
            query, keys, weights, grad_scores, grad_keys, seq_len, heads, head_dim, num_entries, ctx.scale, **shared,
        )
        return grad_q, grad_keys, grad_weights.to(weights.dtype), None


@register("indexer_scores", "triton")
def indexer_scores(
    query: torch.Tensor, keys: torch.Tensor, weights: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    if not serves(query, keys, weights) or query.numel() == 0 or keys.shape[1] == 0:
        return reference.indexer_scores(query, keys, weights, scale)
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    return _IndexerScores.apply(query.contiguous(), keys.to(query.dtype).contiguous(), weights.contiguous(), float(scale))


@register("indexer_topk", "triton")
def indexer_topk(
    query: torch.Tensor,
    keys: torch.Tensor,
    weights: torch.Tensor,
    topk: int,
    *,
    compress_ratio: int,
    scale: float | None = None,
    position_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    return reference.select_visible_topk(indexer_scores(query, keys, weights, scale), topk, compress_ratio, position_ids)


@triton.jit
def _kl_target_kernel(q_ptr, entries_ptr, selected_ptr, lse_ptr, target_ptr, seq_len, heads, head_dim,
                      num_entries, scale, BLOCK_S: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
                      PRECISION: tl.constexpr):
    batch = tl.program_id(1).to(tl.int64)
    offs_s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    s_valid = offs_s < seq_len
    # First walk: each head's log-sum-exp over the selected entries (-inf where none is selected).
    for head in range(0, heads):
        row_max = tl.full((BLOCK_S,), -1e30, tl.float32)  # finite: exp(-inf - row_max) must be 0, not nan
        row_sum = tl.zeros((BLOCK_S,), tl.float32)
        for start in range(0, num_entries, BLOCK_T):
            offs_t = start + tl.arange(0, BLOCK_T)
            tile = s_valid[:, None] & (offs_t < num_entries)[None, :]
            keys = _load_keys(entries_ptr, batch, offs_t, num_entries, head_dim, BLOCK_D)
            _, logits = _head_logits(q_ptr, keys, batch, offs_s, s_valid, head, seq_len, heads, head_dim,
                                     BLOCK_D, PRECISION)
            chosen = tl.load(selected_ptr + (batch * seq_len + offs_s)[:, None] * num_entries + offs_t[None, :],
                             mask=tile, other=0)
            logits = tl.where(chosen != 0, logits * scale, float("-inf"))
            new_max = tl.maximum(row_max, tl.max(logits, axis=1))
            row_sum = row_sum * tl.exp(row_max - new_max) + tl.sum(tl.exp(logits - new_max[:, None]), axis=1)
            row_max = new_max
        some = row_sum > 0.0
        lse = tl.where(some, row_max + tl.log(tl.where(some, row_sum, 1.0)), float("-inf"))
        tl.store(lse_ptr + (batch * seq_len + offs_s) * heads + head, lse, mask=s_valid)
    # Second walk: the head-averaged probabilities, one entry block at a time.
    for start in range(0, num_entries, BLOCK_T):
        offs_t = start + tl.arange(0, BLOCK_T)
        tile = s_valid[:, None] & (offs_t < num_entries)[None, :]
        keys = _load_keys(entries_ptr, batch, offs_t, num_entries, head_dim, BLOCK_D)
        chosen = tl.load(selected_ptr + (batch * seq_len + offs_s)[:, None] * num_entries + offs_t[None, :],
                         mask=tile, other=0) != 0
        total = tl.zeros((BLOCK_S, BLOCK_T), tl.float32)
        for head in range(0, heads):
            _, logits = _head_logits(q_ptr, keys, batch, offs_s, s_valid, head, seq_len, heads, head_dim,
                                     BLOCK_D, PRECISION)
            lse = tl.load(lse_ptr + (batch * seq_len + offs_s) * heads + head, mask=s_valid, other=0.0)
            total += tl.where(chosen, tl.exp(logits * scale - lse[:, None]), 0.0)
        tl.store(target_ptr + (batch * seq_len + offs_s)[:, None] * num_entries + offs_t[None, :], total / heads,
                 mask=tile)


@register("indexer_kl_target", "triton")
def indexer_kl_target(
    query: torch.Tensor, compressed_kv: torch.Tensor, selected: torch.Tensor, scale: float
) -> torch.Tensor:
    if not serves(query, compressed_kv) or query.numel() == 0 or compressed_kv.shape[1] == 0:
        return reference.indexer_kl_target(query, compressed_kv, selected, scale)
    batch, seq_len, heads, head_dim = query.shape
    num_entries = compressed_kv.shape[1]
    with torch.no_grad():
        query = query.contiguous()
        entries = compressed_kv.to(query.dtype).contiguous()
        chosen = selected.to(torch.int8).contiguous()
        lse = buffers.empty((batch, seq_len, heads), dtype=torch.float32, device=query.device)
        target = buffers.empty((batch, seq_len, num_entries), dtype=torch.float32, device=query.device)
        _kl_target_kernel[(triton.cdiv(seq_len, _BLOCK_S), batch)](
            query, entries, chosen, lse, target, seq_len, heads, head_dim, num_entries, float(scale),
            BLOCK_S=_BLOCK_S, BLOCK_T=_BLOCK_T, BLOCK_D=_block_d(head_dim), PRECISION=dot_precision(query.dtype),
        )
    return target
