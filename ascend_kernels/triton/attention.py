"""DeepSeek-V4 sparse attention in Triton: sliding window + compressed entries (CSA, selected per query,
or HCA, every complete entry) + a per-head attention sink, forward and backward.

Flash-style: each program holds a block of queries of one head and walks only the keys it can see,
keeping a running maximum and sum (the sink starts them: maximum = sink logit, sum = 1, value 0), so
neither [S, S] logits nor [S, T] masks exist. The window walk covers keys [first query - window + 1,
last query]; CSA gathers each query's K selected entries by index; HCA walks the entries up to the
block's largest visible count. The forward saves the output and the log-sum-exp per (position, head).

The backward recomputes the probabilities from the log-sum-exp: one kernel per query block for the
query gradient (CSA entries also receive their gradient there, by atomic adds, since many queries
select one entry), one per key block for the shared key/value gradient (walking the queries that can
see the block, all heads), one per HCA entry block. The sink's gradient is -sum(p_sink * delta),
formed by torch from the saved log-sum-exp.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ascend_kernels import buffers, reference
from ascend_kernels.registry import register
from ascend_kernels.triton.common import block, dot, dot_precision, serves

WINDOW_ONLY, ALL_COMPLETE, SELECTED = 0, 1, 2  # the compressed-entry modes: none, HCA, CSA
_TILE_BUDGET = 8192  # float32 values per [rows, head_dim] tile a program holds


@triton.jit
def _window_scores(q, kv_ptr, doc_ptr, batch, offs_m, doc_q, start, seq_len, head_dim, window, scale,
                   BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """Keys start..start+BLOCK_N and the scaled logits of the query block against them (-inf where
    not visible: outside the causal window or another document)."""
    offs_n = start + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    n_valid = offs_n < seq_len
    rows = batch * seq_len + offs_n
    keys = tl.load(kv_ptr + rows[:, None] * head_dim + offs_d[None, :],
                   mask=n_valid[:, None] & (offs_d[None, :] < head_dim), other=0.0)
    doc_k = tl.load(doc_ptr + rows, mask=n_valid, other=-1)
    distance = offs_m[:, None] - offs_n[None, :]
    visible = (distance >= 0) & (distance < window) & (doc_q[:, None] == doc_k[None, :])
    logits = dot(q, tl.trans(keys), PRECISION) * scale
    return keys, tl.where(visible, logits, float("-inf"))


@triton.jit
def _complete_entry_scores(q, entries_ptr, batch, limit_q, start, num_entries, head_dim, scale,
                           BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """HCA entries start..start+BLOCK_N and the scaled logits (-inf where entry t >= the query's count)."""
    offs_t = start + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    t_valid = offs_t < num_entries
    entries = tl.load(entries_ptr + (batch * num_entries + offs_t)[:, None] * head_dim + offs_d[None, :],
                      mask=t_valid[:, None] & (offs_d[None, :] < head_dim), other=0.0)
    logits = dot(q, tl.trans(entries), PRECISION) * scale
    visible = (offs_t[None, :] < limit_q[:, None]) & t_valid[None, :]
    return entries, tl.where(visible, logits, float("-inf"))


@triton.jit
def _selected_entry_scores(q, entries_ptr, index_ptr, batch, offs_m, m_valid, start, seq_len, num_entries,
                           selected, head_dim, scale, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr):
    """CSA: each query's selected entries start..start+BLOCK_K, gathered ([M, K, D] float32), their
    indices, and the scaled logits (-inf on empty slots)."""
    offs_k = start + tl.arange(0, BLOCK_K)
    offs_d = tl.arange(0, BLOCK_D)
    index = tl.load(index_ptr + (batch * seq_len + offs_m)[:, None] * selected + offs_k[None, :],
                    mask=m_valid[:, None] & (offs_k[None, :] < selected), other=-1)
    present = index >= 0
    pointers = entries_ptr + (batch * num_entries + index)[:, :, None] * head_dim + offs_d[None, None, :]
    entries = tl.load(pointers, mask=present[:, :, None] & (offs_d[None, None, :] < head_dim), other=0.0)
    entries = entries.to(tl.float32)
    logits = tl.sum(q.to(tl.float32)[:, None, :] * entries, axis=2) * scale
    return entries, index, tl.where(present, logits, float("-inf"))


@triton.jit
def _online_step(row_max, row_sum, logits):
    """Fold one block of logits into the running (maximum, sum); returns the rescale factor of the
    accumulated output and the block's unnormalized probabilities."""
    new_max = tl.maximum(row_max, tl.max(logits, axis=1))
    correction = tl.exp(row_max - new_max)
    probabilities = tl.exp(logits - new_max[:, None])
    return new_max, row_sum * correction + tl.sum(probabilities, axis=1), correction, probabilities


@triton.jit
def _attention_forward_kernel(
    q_ptr, kv_ptr, sink_ptr, doc_ptr, entries_ptr, limit_ptr, out_ptr, lse_ptr,
    seq_len, heads, head_dim, num_entries, selected, window, scale,
    MODE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr, PRECISION: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    batch = (pid_bh // heads).to(tl.int64)
    head = pid_bh % heads
    first = pid_m * BLOCK_M
    offs_m = first + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    m_valid = offs_m < seq_len
    tile_mask = m_valid[:, None] & (offs_d[None, :] < head_dim)
    q_rows = (batch * seq_len + offs_m) * heads + head
    q = tl.load(q_ptr + q_rows[:, None] * head_dim + offs_d[None, :], mask=tile_mask, other=0.0)
    doc_q = tl.load(doc_ptr + batch * seq_len + offs_m, mask=m_valid, other=-2)
    # The sink joins every softmax with a zero value: it starts the running maximum and sum.
    row_max = tl.zeros((BLOCK_M,), tl.float32) + tl.load(sink_ptr + head).to(tl.float32)
    row_sum = tl.full((BLOCK_M,), 1.0, tl.float32)
    accumulated = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    low = tl.maximum(first - window + 1, 0)
    high = tl.minimum(first + BLOCK_M, seq_len)
    for start in range(low, high, BLOCK_N):
        keys, logits = _window_scores(q, kv_ptr, doc_ptr, batch, offs_m, doc_q, start, seq_len, head_dim,
                                      window, scale, BLOCK_N, BLOCK_D, PRECISION)
        row_max, row_sum, correction, p = _online_step(row_max, row_sum, logits)
        accumulated = accumulated * correction[:, None] + dot(p.to(keys.dtype), keys, PRECISION)
    if MODE == 1:
        limit_q = tl.load(limit_ptr + batch * seq_len + offs_m, mask=m_valid, other=0)
        for start in range(0, tl.max(limit_q, axis=0), BLOCK_N):
            entries, logits = _complete_entry_scores(q, entries_ptr, batch, limit_q, start, num_entries, head_dim,
                                                     scale, BLOCK_N, BLOCK_D, PRECISION)
            row_max, row_sum, correction, p = _online_step(row_max, row_sum, logits)
            accumulated = accumulated * correction[:, None] + dot(p.to(entries.dtype), entries, PRECISION)
    if MODE == 2:
        for start in range(0, selected, BLOCK_K):
            entries, index, logits = _selected_entry_scores(q, entries_ptr, limit_ptr, batch, offs_m, m_valid, start,
                                                            seq_len, num_entries, selected, head_dim, scale,
                                                            BLOCK_K, BLOCK_D)
            row_max, row_sum, correction, p = _online_step(row_max, row_sum, logits)
            accumulated = accumulated * correction[:, None] + tl.sum(p[:, :, None] * entries, axis=1)
    out = accumulated / row_sum[:, None]
    tl.store(out_ptr + q_rows[:, None] * head_dim + offs_d[None, :], out.to(out_ptr.dtype.element_ty), mask=tile_mask)
    tl.store(lse_ptr + q_rows, row_max + tl.log(row_sum), mask=m_valid)


@triton.jit
def _attention_query_backward_kernel(
    q_ptr, kv_ptr, doc_ptr, entries_ptr, limit_ptr, grad_out_ptr, lse_ptr, delta_ptr, grad_q_ptr,
    grad_entries_ptr, seq_len, heads, head_dim, num_entries, selected, window, scale,
    MODE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr, PRECISION: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    batch = (pid_bh // heads).to(tl.int64)
    head = pid_bh % heads
    first = pid_m * BLOCK_M
    offs_m = first + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    m_valid = offs_m < seq_len
    d_valid = offs_d < head_dim
    tile_mask = m_valid[:, None] & d_valid[None, :]
    q_rows = (batch * seq_len + offs_m) * heads + head
    q = tl.load(q_ptr + q_rows[:, None] * head_dim + offs_d[None, :], mask=tile_mask, other=0.0)
    grad_out = tl.load(grad_out_ptr + q_rows[:, None] * head_dim + offs_d[None, :], mask=tile_mask, other=0.0)
    lse = tl.load(lse_ptr + q_rows, mask=m_valid, other=0.0)
    delta = tl.load(delta_ptr + q_rows, mask=m_valid, other=0.0)
    doc_q = tl.load(doc_ptr + batch * seq_len + offs_m, mask=m_valid, other=-2)
    grad_q = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    low = tl.maximum(first - window + 1, 0)
    high = tl.minimum(first + BLOCK_M, seq_len)
    for start in range(low, high, BLOCK_N):
        keys, logits = _window_scores(q, kv_ptr, doc_ptr, batch, offs_m, doc_q, start, seq_len, head_dim,
                                      window, scale, BLOCK_N, BLOCK_D, PRECISION)
        p = tl.exp(logits - lse[:, None])
        grad_logits = p * (dot(grad_out, tl.trans(keys), PRECISION) - delta[:, None])
        grad_q += dot(grad_logits.to(keys.dtype), keys, PRECISION)
    if MODE == 1:
        limit_q = tl.load(limit_ptr + batch * seq_len + offs_m, mask=m_valid, other=0)
        for start in range(0, tl.max(limit_q, axis=0), BLOCK_N):
            entries, logits = _complete_entry_scores(q, entries_ptr, batch, limit_q, start, num_entries, head_dim,
                                                     scale, BLOCK_N, BLOCK_D, PRECISION)
            p = tl.exp(logits - lse[:, None])
            grad_logits = p * (dot(grad_out, tl.trans(entries), PRECISION) - delta[:, None])
            grad_q += dot(grad_logits.to(entries.dtype), entries, PRECISION)
    if MODE == 2:
        q_wide = q.to(tl.float32)
        grad_out_wide = grad_out.to(tl.float32)
        for start in range(0, selected, BLOCK_K):
            entries, index, logits = _selected_entry_scores(q, entries_ptr, limit_ptr, batch, offs_m, m_valid, start,
                                                            seq_len, num_entries, selected, head_dim, scale,
                                                            BLOCK_K, BLOCK_D)
            p = tl.exp(logits - lse[:, None])
            grad_logits = p * (tl.sum(grad_out_wide[:, None, :] * entries, axis=2) - delta[:, None])
            grad_q += tl.sum(grad_logits[:, :, None] * entries, axis=1)
            # An entry is a key and a value: p * dO (value) + scale * dlogit * q (key), from every
            # query that selected it, hence the atomic adds.
            grad_entry = p[:, :, None] * grad_out_wide[:, None, :] + scale * grad_logits[:, :, None] * q_wide[:, None, :]
            pointers = grad_entries_ptr + (batch * num_entries + index)[:, :, None] * head_dim + offs_d[None, None, :]
            tl.atomic_add(pointers, grad_entry, mask=(index >= 0)[:, :, None] & d_valid[None, None, :])
    tl.store(grad_q_ptr + q_rows[:, None] * head_dim + offs_d[None, :],
             (grad_q * scale).to(grad_q_ptr.dtype.element_ty), mask=tile_mask)


@triton.jit
def _key_gradient_step(keys, q, grad_out, lse, delta, logits_t, PRECISION: tl.constexpr):
    """One query block's contribution to a block of shared keys/values (transposed logits [N, M])."""
    p_t = tl.exp(logits_t - lse[None, :])
    grad_logits_t = p_t * (dot(keys, tl.trans(grad_out), PRECISION) - delta[None, :])
    return dot(p_t.to(grad_out.dtype), grad_out, PRECISION), dot(grad_logits_t.to(q.dtype), q, PRECISION)


@triton.jit
def _attention_key_backward_kernel(
    q_ptr, kv_ptr, doc_ptr, limit_ptr, grad_out_ptr, lse_ptr, delta_ptr, grad_keys_ptr,
    seq_len, heads, head_dim, num_keys, window, scale,
    COMPRESSED: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Gradient of a block of window keys (COMPRESSED=False: kv rows) or of HCA entries (True)."""
    pid_n = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    first = pid_n * BLOCK_N
    offs_n = first + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    n_valid = offs_n < num_keys
    d_valid = offs_d < head_dim
    key_rows = batch * num_keys + offs_n
    keys = tl.load(kv_ptr + key_rows[:, None] * head_dim + offs_d[None, :],
                   mask=n_valid[:, None] & d_valid[None, :], other=0.0)
    if COMPRESSED:
        low = 0
        high = seq_len  # packed documents restart positions: any query may see any complete entry
    else:
        doc_k = tl.load(doc_ptr + key_rows, mask=n_valid, other=-1)
        low = first
        high = tl.minimum(first + BLOCK_N + window - 1, seq_len)
    grad_value = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    grad_key = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    for head in range(0, heads):
        for start in range(low, high, BLOCK_M):
            offs_m = start + tl.arange(0, BLOCK_M)
            m_valid = offs_m < seq_len
            q_rows = (batch * seq_len + offs_m) * heads + head
            tile_mask = m_valid[:, None] & d_valid[None, :]
            q = tl.load(q_ptr + q_rows[:, None] * head_dim + offs_d[None, :], mask=tile_mask, other=0.0)
            grad_out = tl.load(grad_out_ptr + q_rows[:, None] * head_dim + offs_d[None, :], mask=tile_mask, other=0.0)
            lse = tl.load(lse_ptr + q_rows, mask=m_valid, other=0.0)
            delta = tl.load(delta_ptr + q_rows, mask=m_valid, other=0.0)
            if COMPRESSED:
                limit_q = tl.load(limit_ptr + batch * seq_len + offs_m, mask=m_valid, other=0)
                visible = (offs_n[:, None] < limit_q[None, :]) & n_valid[:, None]
            else:
                doc_q = tl.load(doc_ptr + batch * seq_len + offs_m, mask=m_valid, other=-2)
                distance = offs_m[None, :] - offs_n[:, None]
                visible = (distance >= 0) & (distance < window) & (doc_k[:, None] == doc_q[None, :])
            logits_t = tl.where(visible, dot(keys, tl.trans(q), PRECISION) * scale, float("-inf"))
            value_part, key_part = _key_gradient_step(keys, q, grad_out, lse, delta, logits_t, PRECISION)
            grad_value += value_part
            grad_key += key_part
    tl.store(grad_keys_ptr + key_rows[:, None] * head_dim + offs_d[None, :],
             (grad_value + scale * grad_key).to(grad_keys_ptr.dtype.element_ty),
             mask=n_valid[:, None] & d_valid[None, :])


def _blocks(head_dim: int, selected: int) -> dict:
    block_d = max(16, block(head_dim))
    rows = max(16, min(64, _TILE_BUDGET // block_d))
    block_k = max(1, min(block(selected), _TILE_BUDGET // (16 * block_d)))
    return {"BLOCK_M": rows, "BLOCK_N": rows, "BLOCK_K": block_k, "BLOCK_D": block_d}


class _SparseAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, kv, sink, entries, limits, documents, window, scale, mode):
        batch, seq_len, heads, head_dim = query.shape
        num_entries = entries.shape[1] if entries is not None else 0
        selected = limits.shape[-1] if mode == SELECTED else 0
        sizes = _blocks(head_dim, selected)
        out = buffers.empty(query.shape, dtype=query.dtype, device=query.device)
        lse = buffers.empty((batch, seq_len, heads), dtype=torch.float32, device=query.device)
        entries_arg = entries if entries is not None else kv  # an unused pointer without entries
        limits_arg = limits if limits is not None else documents
        grid = (triton.cdiv(seq_len, sizes["BLOCK_M"]), batch * heads)
        _attention_forward_kernel[grid](
            query, kv, sink, documents, entries_arg, limits_arg, out, lse,
            seq_len, heads, head_dim, num_entries, selected, window, scale,
            MODE=mode, PRECISION=dot_precision(query.dtype), **sizes,
        )
        ctx.save_for_backward(query, kv, sink, entries, limits, documents, out, lse)
        ctx.window, ctx.scale, ctx.mode = window, scale, mode
        return out

    @staticmethod
    def backward(ctx, grad_out):
        query, kv, sink, entries, limits, documents, out, lse = ctx.saved_tensors
        batch, seq_len, heads, head_dim = query.shape
        mode, window, scale = ctx.mode, ctx.window, ctx.scale
        num_entries = entries.shape[1] if entries is not None else 0
        selected = limits.shape[-1] if mode == SELECTED else 0
        sizes = _blocks(head_dim, selected)
        precision = dot_precision(query.dtype)
        grad_out = grad_out.contiguous()
        delta = (grad_out.float() * out.float()).sum(-1)  # [B, S, H]: dO . O per query and head
        grad_q = buffers.empty(query.shape, dtype=query.dtype, device=query.device)
        grad_kv = buffers.empty(kv.shape, dtype=kv.dtype, device=kv.device)
        # CSA entries accumulate by atomic adds: a zeroed float32 buffer.
        grad_entries = (
            torch.zeros(entries.shape, dtype=torch.float32, device=entries.device)
            if mode == SELECTED else (buffers.empty_like(entries) if entries is not None else None)
        )
        entries_arg = entries if entries is not None else kv
        limits_arg = limits if limits is not None else documents
        _attention_query_backward_kernel[(triton.cdiv(seq_len, sizes["BLOCK_M"]), batch * heads)](
            query, kv, documents, entries_arg, limits_arg, grad_out, lse, delta, grad_q,
            grad_entries if grad_entries is not None else grad_q,
            seq_len, heads, head_dim, num_entries, selected, window, scale,
            MODE=mode, PRECISION=precision, **sizes,
        )
        key_sizes = {name: sizes[name] for name in ("BLOCK_M", "BLOCK_N", "BLOCK_D")}
        _attention_key_backward_kernel[(triton.cdiv(seq_len, sizes["BLOCK_N"]), batch)](
            query, kv, documents, documents, grad_out, lse, delta, grad_kv,
            seq_len, heads, head_dim, seq_len, window, scale,
            COMPRESSED=False, PRECISION=precision, **key_sizes,
        )
        if mode == ALL_COMPLETE:
            _attention_key_backward_kernel[(triton.cdiv(num_entries, sizes["BLOCK_N"]), batch)](
                query, entries, documents, limits, grad_out, lse, delta, grad_entries,
                seq_len, heads, head_dim, num_entries, window, scale,
                COMPRESSED=True, PRECISION=precision, **key_sizes,
            )
        # The sink's value is zero: d sink_h = -sum over queries of p_sink * delta.
        sink_probability = torch.exp(sink.float().view(1, 1, heads) - lse)
        grad_sink = -(sink_probability * delta).sum((0, 1)).to(sink.dtype)
        if grad_entries is not None:
            grad_entries = grad_entries.to(entries.dtype)
        return grad_q, grad_kv, grad_sink, grad_entries, None, None, None, None, None


@register("sparse_attention", "triton")
def sparse_attention(
    query: torch.Tensor,
    kv: torch.Tensor,
    sink: torch.Tensor,
    *,
    window: int,
    scale: float | None = None,
    compressed_kv: torch.Tensor | None = None,
    compressed_indices: torch.Tensor | None = None,
    compress_ratio: int | None = None,
    position_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    if not serves(query, kv, sink, compressed_kv) or query.numel() == 0:
        return reference.sparse_attention(
            query, kv, sink, window=window, scale=scale, compressed_kv=compressed_kv,
            compressed_indices=compressed_indices, compress_ratio=compress_ratio, position_ids=position_ids,
        )
    batch, seq_len, _, head_dim = query.shape
    scale = head_dim**-0.5 if scale is None else scale
    if position_ids is None:
        position_ids = torch.arange(seq_len, device=query.device).expand(batch, seq_len)
    documents = reference.document_ids(position_ids).to(torch.int32).contiguous()
    entries, limits, mode = None, None, WINDOW_ONLY
    if compressed_kv is not None:
        entries = compressed_kv.to(query.dtype).contiguous()
        if compressed_indices is not None:
            mode, limits = SELECTED, compressed_indices.to(torch.int32).contiguous()
        elif compress_ratio is None:
            raise ValueError("sparse_attention: dense compressed attention needs compress_ratio (e.g. 128 for HCA)")
        else:
            mode = ALL_COMPLETE
            limits = ((position_ids + 1) // compress_ratio).clamp(max=entries.shape[1]).to(torch.int32).contiguous()
    return _SparseAttention.apply(
        query.contiguous(), kv.to(query.dtype).contiguous(), sink.float().contiguous(), entries, limits, documents,
        int(window), float(scale), mode,
    )
