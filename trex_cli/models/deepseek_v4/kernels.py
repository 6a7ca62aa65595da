"""The fused operators the DeepSeek-V4 model calls, resolved through the `ascend_kernels` registry.

The model never calls a device-specific kernel itself: it calls `kernels.<op>(...)` and this module
hands it the registry's implementation for the current device (`ascend_kernels.ops`). Where the
registry does not offer an op (an older ascend_kernels, or an op it does not have yet) the plain
PyTorch version below is used; it follows the same signature and the semantics of transformers'
DeepSeek-V4, so the model gives the same numbers either way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F


@functools.cache
def _registry():
    try:
        from ascend_kernels import ops  # the registry: one callable per op for the current device
    except Exception:  # not importable yet (or broken on this device): fall back to local versions
        return None
    return ops


def _resolve(name: str, local: Callable) -> Callable:
    registry = _registry()
    op = getattr(registry, name, None) if registry is not None else None
    return op if callable(op) else local


def source(name: str) -> str:
    """'registry' or 'local': where op `name` comes from (benchmarks and tests report it)."""
    registry = _registry()
    return "registry" if registry is not None and callable(getattr(registry, name, None)) else "local"


# ---- local fallbacks ---------------------------------------------------------------------------------


def _rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    # float32 statistics; weighted norms multiply in float32 (V4 keeps norm weights in float32)
    if weight is None:
        return x * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + eps).to(x.dtype)
    x32 = x.float()
    return (weight.float() * (x32 * torch.rsqrt(x32.square().mean(-1, keepdim=True) + eps))).to(x.dtype)


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    # interleaved pairs (2i, 2i+1) on the trailing 2*R channels; cos/sin [B, S, R]
    if x.dim() == 4:
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    rope_dim = 2 * cos.shape[-1]
    rotary = x[..., -rope_dim:].float()
    even, odd = rotary[..., 0::2], rotary[..., 1::2]
    cos, sin = cos.float(), (-sin if inverse else sin).float()
    rotated = torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1).flatten(-2)
    return torch.cat([x[..., :-rope_dim], rotated.to(x.dtype)], dim=-1)


def _swiglu(gate: torch.Tensor, up: torch.Tensor, limit: float | None = None) -> torch.Tensor:
    if limit:
        gate = gate.clamp(max=limit)
        up = up.clamp(min=-limit, max=limit)
    return F.silu(gate) * up


def _sinkhorn(logits: torch.Tensor, iters: int = 20, eps: float = 1e-6) -> torch.Tensor:
    comb = torch.softmax(logits.float(), dim=-1) + eps
    comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(dim=-1, keepdim=True) + eps)
        comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)
    return comb


def _hc_pre(streams, fn, base, scale, iters: int = 20, eps: float = 1e-6, norm_eps: float = 1e-6):
    # mHC weights from the [..., n, D] streams: pre (collapse), post (expand), comb (Sinkhorn), float32
    n = streams.shape[-2]
    flat = _rms_norm(streams.flatten(-2).float(), None, norm_eps)
    pre, post, comb = F.linear(flat, fn.float()).split([n, n, n * n], dim=-1)
    base, scale = base.float(), scale.float()
    pre = torch.sigmoid(pre * scale[0] + base[:n]) + eps
    post = 2 * torch.sigmoid(post * scale[1] + base[n : 2 * n])
    comb = _sinkhorn(comb.unflatten(-1, (n, n)) * scale[2] + base[2 * n :].view(n, n), iters, eps)
    return (pre.unsqueeze(-1) * streams.float()).sum(dim=-2).to(streams.dtype), post, comb


def _hc_post(out, post, comb, streams):
    # new_k = post_k * out + sum_j comb[j, k] * stream_j, in float32
    mixed = (comb.unsqueeze(-1) * streams.float().unsqueeze(-2)).sum(dim=-3)
    return (post.unsqueeze(-1) * out.float().unsqueeze(-2) + mixed).to(streams.dtype)


def _hc_head(streams, fn, base, scale, eps: float = 1e-6, norm_eps: float = 1e-6):
    # sigmoid collapse of the [..., n, D] streams (no Sinkhorn), in float32
    flat = _rms_norm(streams.flatten(-2).float(), None, norm_eps)
    pre = torch.sigmoid(F.linear(flat, fn.float()) * scale.float() + base.float()) + eps
    return (pre.unsqueeze(-1) * streams.float()).sum(dim=-2).to(streams.dtype)


def _indexer_kl_target(query, compressed_kv, selected, scale: float):
    # mean over heads of each head's softmax over the selected entries (no gradient), float32
    with torch.no_grad():
        logits = torch.einsum("bshd,btd->bsht", query.float(), compressed_kv.float()) * scale
        logits = logits.masked_fill(~selected.unsqueeze(2), float("-inf"))
        return torch.softmax(logits, dim=-1).nan_to_num(0.0).mean(dim=2)


def _document_ids(position_ids: torch.Tensor) -> torch.Tensor:
    starts = torch.ones_like(position_ids, dtype=torch.bool)
    starts[:, 1:] = position_ids[:, 1:] != position_ids[:, :-1] + 1
    return starts.long().cumsum(dim=1)


def _sparse_attention(
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
    # One masked score matrix over [window keys | compressed entries | sink]; no loop over queries.
    batch, seq_len, heads, head_dim = query.shape
    scale = head_dim**-0.5 if scale is None else scale
    if position_ids is None:
        position_ids = torch.arange(seq_len, device=query.device).expand(batch, seq_len)
    index = torch.arange(seq_len, device=query.device)
    distance = index.view(-1, 1) - index.view(1, -1)
    docs = _document_ids(position_ids)
    visible = ((distance >= 0) & (distance < window)).unsqueeze(0) & (docs.unsqueeze(2) == docs.unsqueeze(1))
    keys = kv
    if compressed_kv is not None:
        num_entries = compressed_kv.shape[1]
        if compressed_indices is not None:
            chosen = torch.zeros(batch, seq_len, num_entries + 1, dtype=torch.bool, device=query.device)
            safe = torch.where(compressed_indices >= 0, compressed_indices, torch.full_like(compressed_indices, num_entries))
            chosen.scatter_(-1, safe.long(), True)
            chosen = chosen[..., :num_entries]
        else:
            threshold = (position_ids + 1) // compress_ratio
            chosen = torch.arange(num_entries, device=query.device).view(1, 1, -1) < threshold.unsqueeze(-1)
        visible = torch.cat([visible, chosen], dim=-1)
        keys = torch.cat([kv, compressed_kv.to(kv.dtype)], dim=1)
    logits = torch.einsum("bshd,btd->bhst", query, keys).float() * scale
    logits = logits.masked_fill(~visible.unsqueeze(1), float("-inf"))
    sink_logits = sink.float().view(1, heads, 1, 1).expand(batch, heads, seq_len, 1)
    probabilities = torch.softmax(torch.cat([logits, sink_logits], dim=-1), dim=-1)[..., :-1]
    return torch.einsum("bhst,btd->bshd", probabilities.to(keys.dtype), keys).to(query.dtype)


def _indexer_scores(query: torch.Tensor, keys: torch.Tensor, weights: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    per_head = torch.relu(torch.einsum("bshd,btd->bsht", query.float(), keys.float())) * scale
    return torch.einsum("bsht,bsh->bst", per_head, weights.float())


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    """Cross-entropy of hidden @ weight.T without keeping [N, V] logits: logits are made one row
    chunk at a time in forward and made again in backward."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, ignore_index, chunk_rows):
        total = hidden.new_zeros((), dtype=torch.float32)
        for start in range(0, hidden.shape[0], chunk_rows):
            rows = slice(start, start + chunk_rows)
            logits = (hidden[rows] @ weight.t()).float()
            total += F.cross_entropy(logits, targets[rows], ignore_index=ignore_index, reduction="sum")
        ctx.save_for_backward(hidden, weight, targets)
        ctx.ignore_index, ctx.chunk_rows = ignore_index, chunk_rows
        return total

    @staticmethod
    def backward(ctx, grad_total):
        hidden, weight, targets = ctx.saved_tensors
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        for start in range(0, hidden.shape[0], ctx.chunk_rows):
            rows = slice(start, start + ctx.chunk_rows)
            chunk_targets = targets[rows]
            probabilities = torch.softmax((hidden[rows] @ weight.t()).float(), dim=-1)
            keep = chunk_targets != ctx.ignore_index
            safe = torch.where(keep, chunk_targets, torch.zeros_like(chunk_targets))
            probabilities[torch.arange(len(safe), device=safe.device), safe] -= 1.0
            probabilities *= keep.unsqueeze(-1) * grad_total
            grad_logits = probabilities.to(hidden.dtype)
            grad_hidden[rows] = grad_logits @ weight
            grad_weight += (grad_logits.t() @ hidden[rows]).float()
        return grad_hidden, grad_weight.to(weight.dtype), None, None, None


def _linear_cross_entropy(hidden, weight, targets, *, ignore_index: int = -100, reduction: str = "mean"):
    total = _ChunkedLinearCrossEntropy.apply(hidden, weight, targets.long(), ignore_index, 2048)
    if reduction == "sum":
        return total
    return total / (targets != ignore_index).sum()


def _moe_permute(tokens: torch.Tensor, topk_ids: torch.Tensor, num_experts: int):
    top_k = topk_ids.shape[1]
    flat_ids = topk_ids.reshape(-1)
    sorted_order = torch.argsort(flat_ids, stable=True)
    tokens_per_expert = torch.bincount(flat_ids, minlength=num_experts)
    return tokens[sorted_order // top_k], tokens_per_expert, sorted_order


def _moe_unpermute(expert_output: torch.Tensor, sorted_order: torch.Tensor, topk_weights: torch.Tensor):
    num_tokens, top_k = topk_weights.shape
    unsorted = torch.zeros_like(expert_output).index_copy(0, sorted_order, expert_output)
    weighted = unsorted.view(num_tokens, top_k, -1).float() * topk_weights.float().unsqueeze(-1)
    return weighted.sum(dim=1).to(expert_output.dtype)


def _grouped_matmul(x: torch.Tensor, weight: torch.Tensor, tokens_per_expert: torch.Tensor) -> torch.Tensor:
    # torch._grouped_mm: one call for all experts (CPU needs int32 offsets and a contiguous grad)
    offsets = torch.cumsum(tokens_per_expert, dim=0).to(torch.int32)
    return torch._grouped_mm(x, weight.transpose(-2, -1), offs=offsets)


rms_norm = _resolve("rms_norm", _rms_norm)
apply_rope = _resolve("apply_rope", _apply_rope)
swiglu = _resolve("swiglu", _swiglu)
sinkhorn = _resolve("sinkhorn", _sinkhorn)
hc_pre = _resolve("hc_pre", _hc_pre)
hc_post = _resolve("hc_post", _hc_post)
hc_head = _resolve("hc_head", _hc_head)
sparse_attention = _resolve("sparse_attention", _sparse_attention)
indexer_scores = _resolve("indexer_scores", _indexer_scores)
indexer_kl_target = _resolve("indexer_kl_target", _indexer_kl_target)
linear_cross_entropy = _resolve("linear_cross_entropy", _linear_cross_entropy)
moe_permute = _resolve("moe_permute", _moe_permute)
moe_unpermute = _resolve("moe_unpermute", _moe_unpermute)
grouped_matmul = _resolve("grouped_matmul", _grouped_matmul)
document_ids = _document_ids
