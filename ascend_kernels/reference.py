"""Plain PyTorch references for every operator: the definitions all faster implementations are held to.

Each function here is written to be read, not to be fast: it follows the DeepSeek-V4 semantics of
transformers 5.24 (`models/deepseek_v4/modeling_deepseek_v4.py`) step by step, materializes whatever
intermediate makes the maths obvious, and lets autograd derive the backward. Shapes use the letters
B (batch), S (query positions), H (heads), D (head or hidden dim), T (compressed entries),
K (selected entries), E (experts), N (tokens), V (vocabulary). Steps said to run in float32 run in
float64 when the inputs are float64, so that float64 runs are the ground truth of the tests.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _wide(tensor: torch.Tensor) -> torch.Tensor:
    """Upcast to the compute precision: float32, or float64 for float64 inputs (the tests' ground truth)."""
    return tensor if tensor.dtype == torch.float64 else tensor.float()


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dim.

    With a weight (V4 keeps norm weights in float32): normalize in float32, multiply by the weight in
    float32, cast once to x's dtype. Without a weight (the per-head query rescale and the mHC input
    norm): the inverse RMS is computed in float32, cast to x's dtype, and multiplied in x's dtype.
    """
    if weight is None:
        inverse_rms = torch.rsqrt(_wide(x).square().mean(-1, keepdim=True) + eps)
        return x * inverse_rms.to(x.dtype)
    x_float = _wide(x)
    normalized = x_float * torch.rsqrt(x_float.pow(2).mean(-1, keepdim=True) + eps)
    return (weight.to(normalized.dtype) * normalized).to(x.dtype)


def _rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    # Interleaved layout: channels (2i, 2i+1) form one complex pair; (a, b) -> (-b, a).
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((-odd, even), dim=-1).flatten(-2)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Partial interleaved rotary embedding on the trailing 2*R channels of x.

    x: [B, S, D] or [B, S, H, D]. cos, sin: [B, S, R] or [S, R], one angle per channel pair, with
    2*R <= D. The leading D - 2*R channels pass through unchanged. The rotation runs in float32 and the
    result is cast to x's dtype. `inverse=True` rotates by the negative angle (V4 applies it to the
    attention output, whose values carried the keys' rotation). cos and sin are constants: only x
    receives a gradient (the fused implementations return none for them).
    """
    if x.dim() == 4:
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    cos = _wide(cos).repeat_interleave(2, dim=-1)
    sin = _wide(sin).repeat_interleave(2, dim=-1)
    if inverse:
        sin = -sin
    rope_dim = cos.shape[-1]
    passthrough, rotary = x[..., :-rope_dim], x[..., -rope_dim:]
    rotated = (_wide(rotary) * cos + _wide(_rotate_pairs(rotary)) * sin).to(x.dtype)
    return torch.cat([passthrough, rotated], dim=-1)


def swiglu(gate: torch.Tensor, up: torch.Tensor, limit: float | None = None) -> torch.Tensor:
    """Clamped SwiGLU: silu(min(gate, limit)) * clamp(up, -limit, limit), in the inputs' dtype.

    gate, up: same shape. `limit=None` (or 0) disables clamping (plain SwiGLU).
    """
    if limit:
        gate = gate.clamp(max=limit)
        up = up.clamp(min=-limit, max=limit)
    return F.silu(gate) * up


def sinkhorn(logits: torch.Tensor, iters: int = 20, eps: float = 1e-6) -> torch.Tensor:
    """The mHC comb matrix: a near doubly-stochastic [n, n] matrix per token from its logits.

    logits: [..., n, n] (already scaled and biased). Computed in float32 like V4: a row softmax plus eps,
    one column normalization, then iters - 1 rounds of (row, column) normalization, each sum offset by
    eps. Returns float32 [..., n, n].
    """
    comb = torch.softmax(_wide(logits), dim=-1) + eps
    comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(dim=-1, keepdim=True) + eps)
        comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)
    return comb


def hc_pre(
    streams: torch.Tensor,
    fn: torch.Tensor,
    base: torch.Tensor,
    scale: torch.Tensor,
    iters: int = 20,
    eps: float = 1e-6,
    norm_eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The mHC weights of one site and the collapsed input of its sublayer.

    streams: [..., n, D] (B, S, then n hyper-connection streams of width D); fn: [(2 + n) * n, n * D],
    base: [(2 + n) * n], scale: [3] (float32 parameters). In float32: the flattened streams are
    RMS-normalized (no weight, `norm_eps`) and projected by fn into n pre, n post and n * n comb
    logits, each scaled by its entry of `scale` and offset by its slice of `base`;
    pre = sigmoid(.) + eps, post = 2 * sigmoid(.), comb = sinkhorn(., iters, eps).
    Returns (collapsed, post, comb): collapsed [..., D] = sum_j pre_j * stream_j in streams' dtype,
    post [..., n] and comb [..., n, n] in float32.
    """
    wide_streams = _wide(streams)
    flat = rms_norm(wide_streams.flatten(-2), None, norm_eps)
    mixes = F.linear(flat, fn.to(flat.dtype))
    pre, post, comb = hc_site_weights(mixes, streams.shape[-2], base, scale, iters, eps, sinkhorn)
    collapsed = (pre.unsqueeze(-1) * wide_streams).sum(dim=-2).to(streams.dtype)
    return collapsed, post, comb


def hc_site_weights(
    mixes: torch.Tensor, n: int, base: torch.Tensor, scale: torch.Tensor, iters: int, eps: float, sinkhorn_function
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(pre, post, comb) of one mHC site of n streams from its [..., (2 + n) * n] projected mixes: the
    part of hc_pre after the projection (implementations pass their own Sinkhorn)."""
    pre, post, comb = mixes.split([n, n, n * n], dim=-1)
    base, scale = base.to(mixes.dtype), scale.to(mixes.dtype)
    pre = torch.sigmoid(pre * scale[0] + base[:n]) + eps
    post = 2 * torch.sigmoid(post * scale[1] + base[n : 2 * n])
    comb = sinkhorn_function(comb.unflatten(-1, (n, n)) * scale[2] + base[2 * n :].view(n, n), iters, eps)
    return pre, post, comb


def hc_post(out: torch.Tensor, post: torch.Tensor, comb: torch.Tensor, streams: torch.Tensor) -> torch.Tensor:
    """The mHC update after a sublayer: new_k = post_k * out + sum_j comb[j, k] * stream_j.

    out: [..., D] (the sublayer's output); post: [..., n]; comb: [..., n, n] (rows index the input
    stream j, columns the output stream k); streams: [..., n, D]. Computed in float32 and cast once
    to streams' dtype; returns [..., n, D].
    """
    mixed = torch.einsum("...jk,...jd->...kd", _wide(comb), _wide(streams))
    return (_wide(post).unsqueeze(-1) * _wide(out).unsqueeze(-2) + mixed).to(streams.dtype)


def hc_head(
    streams: torch.Tensor,
    fn: torch.Tensor,
    base: torch.Tensor,
    scale: torch.Tensor,
    eps: float = 1e-6,
    norm_eps: float = 1e-6,
) -> torch.Tensor:
    """The mHC head: collapses the streams into one hidden state (after the last block, and in each MTP
    block), with sigmoid weights and no Sinkhorn.

    streams: [..., n, D]; fn: [n, n * D], base: [n], scale: [1] (float32 parameters). In float32: the
    flattened streams are RMS-normalized (no weight, `norm_eps`) and projected by fn; pre =
    sigmoid(mix * scale + base) + eps. Returns sum_j pre_j * stream_j [..., D] in streams' dtype.
    """
    wide_streams = _wide(streams)
    flat = rms_norm(wide_streams.flatten(-2), None, norm_eps)
    mixes = F.linear(flat, fn.to(flat.dtype))
    pre = torch.sigmoid(mixes * scale.to(flat.dtype) + base.to(flat.dtype)) + eps
    return (pre.unsqueeze(-1) * wide_streams).sum(dim=-2).to(streams.dtype)


def indexer_kl_target(
    query: torch.Tensor, compressed_kv: torch.Tensor, selected: torch.Tensor, scale: float
) -> torch.Tensor:
    """The target of the lightning indexer's KL loss: the main attention over each query's selected
    compressed entries, averaged over heads (no gradient flows through it).

    query: [B, S, H, D]; compressed_kv: [B, T, D]; selected: [B, S, T] bool. Per head, a softmax of
    scale * q . k over the selected entries; a query with none selected gets zeros. Float32 [B, S, T].
    """
    with torch.no_grad():
        logits = torch.einsum("bshd,btd->bsht", _wide(query), _wide(compressed_kv)) * scale
        logits = logits.masked_fill(~selected.unsqueeze(2), float("-inf"))
        return torch.softmax(logits, dim=-1).nan_to_num(0.0).mean(dim=2).float()


def document_ids(position_ids: torch.Tensor) -> torch.Tensor:
    """[B, S] document number of each position: a new document starts wherever the position does not
    continue the previous one (packed samples restart their positions at 0)."""
    starts = torch.ones_like(position_ids, dtype=torch.bool)
    starts[:, 1:] = position_ids[:, 1:] != position_ids[:, :-1] + 1
    return starts.long().cumsum(dim=1)


def window_mask(position_ids: torch.Tensor, window: int) -> torch.Tensor:
    """[B, S, S] bool, True where query i may attend key j: j <= i, i - j < window, same document."""
    seq_len = position_ids.shape[1]
    index = torch.arange(seq_len, device=position_ids.device)
    distance = index.view(-1, 1) - index.view(1, -1)
    causal_window = (distance >= 0) & (distance < window)
    docs = document_ids(position_ids)
    same_document = docs.unsqueeze(2) == docs.unsqueeze(1)
    return causal_window.unsqueeze(0) & same_document


def compressed_mask(
    position_ids: torch.Tensor,
    num_entries: int,
    compress_ratio: int | None,
    indices: torch.Tensor | None,
) -> torch.Tensor:
    """[B, S, T] bool, True where a query may attend a compressed entry.

    With `indices` ([B, S, K], -1 = none; CSA): exactly the listed entries. Without (HCA): every entry
    whose window is complete at the query, i.e. entry t is visible at position p iff
    t < (p + 1) // compress_ratio.
    """
    batch, seq_len = position_ids.shape
    if indices is not None:
        mask = torch.zeros(batch, seq_len, num_entries + 1, dtype=torch.bool, device=position_ids.device)
        safe = torch.where(indices >= 0, indices, torch.full_like(indices, num_entries))
        mask.scatter_(-1, safe.long(), True)
        return mask[..., :num_entries]
    if compress_ratio is None:
        raise ValueError("sparse_attention: dense compressed attention needs compress_ratio (e.g. 128 for HCA)")
    threshold = (position_ids + 1) // compress_ratio
    entries = torch.arange(num_entries, device=position_ids.device)
    return entries.view(1, 1, -1) < threshold.unsqueeze(-1)


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
    """Shared-KV multi-query attention with a per-head sink over a sliding window plus compressed entries.

    query: [B, S, H, D]; kv: [B, S, D], one head used as both key and value; sink: [H] logits that join
    every softmax with a zero value vector. Query i sees kv positions j with j <= i, i - j < window and
    the same document (from position_ids, default 0..S-1). With compressed_kv [B, T, D] it also sees
    compressed entries: those listed in compressed_indices [B, S, K] (CSA; -1 = empty slot; valid
    entries distinct), or, without indices, every entry complete before it (HCA; needs compress_ratio).
    scale defaults to D**-0.5. The softmax runs in float32. Returns [B, S, H, D] in query's dtype.
    """
    batch, seq_len, heads, head_dim = query.shape
    scale = head_dim**-0.5 if scale is None else scale
    if position_ids is None:
        position_ids = torch.arange(seq_len, device=query.device).expand(batch, seq_len)
    q = _wide(query)
    keys = _wide(kv)
    logits = torch.einsum("bshd,btd->bhst", q, keys) * scale
    visible = window_mask(position_ids, window)
    if compressed_kv is not None:
        entries = _wide(compressed_kv)
        logits = torch.cat([logits, torch.einsum("bshd,btd->bhst", q, entries) * scale], dim=-1)
        visible_compressed = compressed_mask(position_ids, entries.shape[1], compress_ratio, compressed_indices)
        visible = torch.cat([visible, visible_compressed], dim=-1)
        keys = torch.cat([keys, entries], dim=1)
    logits = logits.masked_fill(~visible.unsqueeze(1), float("-inf"))
    sink_logits = sink.to(q.dtype).view(1, heads, 1, 1).expand(batch, heads, seq_len, 1)
    probabilities = torch.softmax(torch.cat([logits, sink_logits], dim=-1), dim=-1)[..., :-1]
    output = torch.einsum("bhst,btd->bshd", probabilities, keys)
    return output.to(query.dtype)


def indexer_scores(
    query: torch.Tensor, keys: torch.Tensor, weights: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    """Lightning-indexer scores: score[b, s, t] = sum_h weights[b, s, h] * relu(q[b, s, h] . k[b, t]) * scale.

    query: [B, S, H, D]; keys: [B, T, D] (compressed indexer keys); weights: [B, S, H] (weights_proj
    output already multiplied by H**-0.5); scale defaults to D**-0.5. Float32 [B, S, T].
    """
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    per_head = torch.relu(torch.einsum("bshd,btd->bsht", _wide(query), _wide(keys))) * scale
    return (per_head * weights.to(per_head.dtype).unsqueeze(-1)).sum(dim=2)


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
    """Score compressed entries with the indexer and pick the top-k visible ones per query.

    Entry t is visible at position p iff t < (p + 1) // compress_ratio. Returns (scores, indices):
    scores float32 [B, S, T] with -inf on invisible entries (differentiable, for the indexer KL loss);
    indices int64 [B, S, min(topk, T)] in descending score order, -1 where fewer entries are visible.
    """
    return select_visible_topk(indexer_scores(query, keys, weights, scale), topk, compress_ratio, position_ids)


def select_visible_topk(
    scores: torch.Tensor, topk: int, compress_ratio: int, position_ids: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The part of indexer_topk after scoring: -inf on entries not complete at each query, then the
    top-k indices (-1 where fewer are visible). scores: float32 [B, S, T]."""
    batch, seq_len, num_entries = scores.shape
    if position_ids is None:
        position_ids = torch.arange(seq_len, device=scores.device).expand(batch, seq_len)
    threshold = ((position_ids + 1) // compress_ratio).unsqueeze(-1)
    future = torch.arange(num_entries, device=scores.device).view(1, 1, -1) >= threshold
    scores = scores.masked_fill(future, float("-inf"))
    k = min(topk, num_entries)
    indices = scores.detach().topk(k, dim=-1).indices
    indices = torch.where(indices >= threshold, torch.full_like(indices, -1), indices)
    return scores, indices


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> torch.Tensor:
    """Cross-entropy of the logits hidden @ weight.T against targets, in float32.

    hidden: [N, D]; weight: [V, D] (the output head); targets: [N] int, ignore_index = no loss.
    reduction "mean" (over targets that are not ignored; nan when there are none, as in torch) or "sum".
    This reference materializes the full [N, V] logits.
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"linear_cross_entropy: reduction must be 'mean' or 'sum', got {reduction!r}")
    logits = _wide(hidden @ weight.t())
    return F.cross_entropy(logits, targets.long(), ignore_index=ignore_index, reduction=reduction)


def moe_permute(
    tokens: torch.Tensor, topk_ids: torch.Tensor, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Group token copies by expert.

    tokens: [N, D]; topk_ids: [N, k] expert of each (token, slot). Returns (permuted [N*k, D], rows for
    expert 0 first, then 1, ..., tokens in original order within an expert; tokens_per_expert int64
    [num_experts]; sorted_order int64 [N*k]: permuted row r holds the flat (token, slot) assignment
    sorted_order[r], i.e. token sorted_order[r] // k).
    """
    top_k = topk_ids.shape[1]
    flat_ids = topk_ids.reshape(-1)
    sorted_order = torch.argsort(flat_ids, stable=True)
    tokens_per_expert = torch.bincount(flat_ids, minlength=num_experts)
    permuted = tokens[sorted_order // top_k]
    return permuted, tokens_per_expert, sorted_order


def moe_unpermute(
    expert_output: torch.Tensor, sorted_order: torch.Tensor, topk_weights: torch.Tensor
) -> torch.Tensor:
    """Inverse of moe_permute with the routing weights: out[n] = sum_j topk_weights[n, j] * row of (n, j).

    expert_output: [N*k, D] in permuted order; topk_weights: [N, k]. Returns [N, D] in expert_output's
    dtype; the weighted sum runs in float32.
    """
    num_tokens, top_k = topk_weights.shape
    unsorted = torch.zeros_like(expert_output)
    unsorted = unsorted.index_copy(0, sorted_order, expert_output)
    weighted = _wide(unsorted).view(num_tokens, top_k, -1) * _wide(topk_weights).unsqueeze(-1)
    return weighted.sum(dim=1).to(expert_output.dtype)


def grouped_matmul(x: torch.Tensor, weight: torch.Tensor, tokens_per_expert: torch.Tensor) -> torch.Tensor:
    """Per-expert linear on rows grouped by expert: rows of expert e are multiplied by weight[e].T.

    x: [M, D_in], rows of expert 0 first (as moe_permute lays them out); weight: [E, D_out, D_in]
    (nn.Linear layout); tokens_per_expert: [E], summing to M, zeros allowed. Returns [M, D_out].
    """
    counts = [int(c) for c in tokens_per_expert.tolist()]
    pieces = [rows @ weight[e].t() for e, rows in enumerate(torch.split(x, counts))]
    return torch.cat(pieces, dim=0) if pieces else x.new_zeros(0, weight.shape[1])


def _register_all() -> None:
    from ascend_kernels.registry import register

    for function in (
        rms_norm,
        apply_rope,
        swiglu,
        sinkhorn,
        hc_pre,
        hc_post,
        hc_head,
        indexer_kl_target,
        sparse_attention,
        indexer_scores,
        indexer_topk,
        linear_cross_entropy,
        moe_permute,
        moe_unpermute,
        grouped_matmul,
    ):
        register(function.__name__, "reference")(function)


_register_all()
