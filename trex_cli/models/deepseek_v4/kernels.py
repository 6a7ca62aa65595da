"""The fused operators the DeepSeek-V4 model calls: those of `ascend_kernels.ops`.

The model never calls a device-specific kernel itself: it calls `kernels.<op>(...)`, and each op
dispatches on the device of its first tensor to the implementation the ascend_kernels registry picks
(the registry owns every fallback, down to the PyTorch reference). `document_ids` numbers the packed
documents of a batch from its position ids, as the attention masks do.
"""

from __future__ import annotations

from ascend_kernels.ops import (
    apply_rope,
    grouped_matmul,
    hc_head,
    hc_post,
    hc_pre,
    indexer_kl_target,
    indexer_scores,
    indexer_topk,
    linear_cross_entropy,
    moe_expert_ffn,
    moe_permute,
    moe_unpermute,
    rms_norm,
    sinkhorn,
    sparse_attention,
    swiglu,
)
from ascend_kernels.reference import document_ids

__all__ = [
    "apply_rope",
    "document_ids",
    "grouped_matmul",
    "hc_head",
    "hc_post",
    "hc_pre",
    "indexer_kl_target",
    "indexer_scores",
    "indexer_topk",
    "linear_cross_entropy",
    "moe_expert_ffn",
    "moe_permute",
    "moe_unpermute",
    "rms_norm",
    "sinkhorn",
    "sparse_attention",
    "swiglu",
]
