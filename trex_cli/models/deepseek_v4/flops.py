"""Training FLOPs per token of DeepSeek-V4 under the Megatron convention, for MFU figures.

Per token: 3 (forward, input gradient, weight gradient) x 2 (a multiply and an add) x the matrix
parameters the token goes through (top-k routed experts plus the shared expert, not all experts;
the router, norms and element-wise ops are not counted, nor is recompute), plus the attention score
and value products over what each query really attends to, plus the output logits and the MTP block.

`attention="v4"` counts each layer type's real key set: sliding window (causal at the sequence
start), CSA = window + up to index_topk selected compressed entries (+ the indexer scoring every
visible compressed entry), HCA = window + every visible compressed entry. `attention="dense"` counts
plain causal attention over the whole sequence in every layer (the usual figure, for comparison).
"""

from __future__ import annotations

from typing import Literal

from trex_cli.models.deepseek_v4.config import CSA, HCA, SLIDING, DeepseekV4Config


def _sum_min(seq_len: int, cap: int) -> int:
    """sum over t = 1..seq_len of min(t, cap): keys a sliding window of `cap` gives the queries."""
    if seq_len <= cap:
        return seq_len * (seq_len + 1) // 2
    return cap * (cap + 1) // 2 + (seq_len - cap) * cap


def _sum_floor(seq_len: int, ratio: int, cap: int | None = None) -> int:
    """sum over t = 1..seq_len of min(t // ratio, cap): compressed entries complete at each query."""
    def total(n: int) -> int:  # sum of t // ratio for t = 1..n
        q, r = divmod(n, ratio)
        return ratio * q * (q - 1) // 2 + q * (r + 1)

    if cap is None or seq_len < ratio * (cap + 1):
        return total(seq_len)
    last_uncapped = ratio * (cap + 1) - 1  # t // ratio <= cap up to here
    return total(last_uncapped) + (seq_len - last_uncapped) * cap


def _linear_params(config: DeepseekV4Config, layer_index: int) -> int:
    """Matrix parameters one token multiplies with in block `layer_index` (router excluded)."""
    hidden, heads, head_dim = config.hidden_size, config.num_attention_heads, config.head_dim
    attention = (
        hidden * config.q_lora_rank
        + config.q_lora_rank * heads * head_dim
        + hidden * head_dim
        + heads * head_dim * config.o_lora_rank  # grouped: each group maps heads*head_dim/g -> o_lora_rank
        + config.o_groups * config.o_lora_rank * hidden
    )
    kind = config.layer_type(layer_index)
    if kind == CSA:
        attention += 2 * hidden * 2 * head_dim  # compressor kv and gate, two series
        index_width = config.index_n_heads * config.index_head_dim
        attention += config.q_lora_rank * index_width + hidden * config.index_n_heads
        attention += 2 * hidden * 2 * config.index_head_dim  # the indexer's own compressor
    elif kind == HCA:
        attention += 2 * hidden * head_dim
    experts_used = config.num_experts_per_tok + config.n_shared_experts
    moe = experts_used * 3 * hidden * config.moe_intermediate_size
    n = config.hc_mult
    hyper_connections = 2 * (2 + n) * n * n * hidden
    return attention + moe + hyper_connections


def _attended_keys(config: DeepseekV4Config, layer_index: int, seq_len: int, attention: str) -> tuple[float, float]:
    """(keys each query attends on average, compressed entries the indexer scores on average)."""
    if attention == "dense":
        return (seq_len + 1) / 2, 0.0
    window = _sum_min(seq_len, config.sliding_window) / seq_len
    kind = config.layer_type(layer_index)
    if kind == SLIDING:
        return window, 0.0
    ratio = config.compress_ratios[layer_index]
    visible = _sum_floor(seq_len, ratio) / seq_len
    if kind == HCA:
        return window + visible, 0.0
    return window + _sum_floor(seq_len, ratio, config.index_topk) / seq_len, visible


def training_flops_per_token(
    config: DeepseekV4Config, seq_len: int, attention: Literal["v4", "dense"] = "v4", include_mtp: bool = True
) -> float:
    """Model FLOPs one trained token costs (forward + backward), Megatron convention."""
    if attention not in ("v4", "dense"):
        raise ValueError(f"attention must be 'v4' or 'dense', got {attention!r}")
    if seq_len < 1:
        raise ValueError(f"seq_len must be positive, got {seq_len}")
    blocks = list(range(config.num_hidden_layers))
    if include_mtp:
        blocks += [config.num_hidden_layers + i for i in range(config.num_nextn_predict_layers)]
    matmul_params = 0
    attention_flops = 0.0
    heads, head_dim = config.num_attention_heads, config.head_dim
    for block in blocks:
        matmul_params += _linear_params(config, block)
        keys, indexed = _attended_keys(config, block, seq_len, attention)
        # scores (q.k) and the weighted sum of values: 2 products x 2 FLOPs per multiply-add
        attention_flops += 2 * 2 * heads * head_dim * keys
        attention_flops += 2 * config.index_n_heads * config.index_head_dim * indexed
    logits_heads = 1 + (config.num_nextn_predict_layers if include_mtp else 0)
    matmul_params += logits_heads * config.hidden_size * config.vocab_size
    if include_mtp:
        matmul_params += config.num_nextn_predict_layers * 2 * config.hidden_size * config.hidden_size  # e_proj, h_proj
    return 3 * (2 * matmul_params + attention_flops)


def flops_breakdown(config: DeepseekV4Config, seq_len: int) -> dict[str, float]:
    """Both attention conventions side by side, and the attention share of each."""
    v4 = training_flops_per_token(config, seq_len, "v4")
    dense = training_flops_per_token(config, seq_len, "dense")
    return {"v4": v4, "dense": dense, "dense_over_v4": dense / v4}
