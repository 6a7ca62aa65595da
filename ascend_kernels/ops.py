"""The public operators: each call dispatches to the implementation the registry picks for the device
of its first tensor argument. Signatures and semantics are those of `ascend_kernels.reference` (each
function below carries its reference's docstring); every implementation is held to them by the tests.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from ascend_kernels import reference, registry


def _dispatched(reference_function: Callable) -> Callable:
    operator = reference_function.__name__

    @functools.wraps(reference_function)
    def dispatch(first: torch.Tensor, *args, **kwargs):
        return registry.resolve(operator, first.device.type)[1](first, *args, **kwargs)

    return dispatch


rms_norm = _dispatched(reference.rms_norm)
apply_rope = _dispatched(reference.apply_rope)
swiglu = _dispatched(reference.swiglu)
sinkhorn = _dispatched(reference.sinkhorn)
hc_pre = _dispatched(reference.hc_pre)
hc_post = _dispatched(reference.hc_post)
hc_head = _dispatched(reference.hc_head)
sparse_attention = _dispatched(reference.sparse_attention)
indexer_scores = _dispatched(reference.indexer_scores)
indexer_topk = _dispatched(reference.indexer_topk)
indexer_kl_target = _dispatched(reference.indexer_kl_target)
linear_cross_entropy = _dispatched(reference.linear_cross_entropy)
moe_permute = _dispatched(reference.moe_permute)
moe_unpermute = _dispatched(reference.moe_unpermute)
grouped_matmul = _dispatched(reference.grouped_matmul)


def moe_expert_ffn(
    tokens: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
    w1: torch.Tensor,
    w3: torch.Tensor,
    w2: torch.Tensor,
    swiglu_limit: float | None = None,
) -> torch.Tensor:
    """Routed experts of a MoE layer from the operators above: permute, gate and up grouped matmuls,
    clamped SwiGLU, down grouped matmul, weighted unpermute.

    tokens: [N, D]; topk_ids, topk_weights: [N, k]; w1 (gate), w3 (up): [E, F, D]; w2 (down): [E, D, F].
    Returns [N, D] in tokens' dtype.
    """
    num_experts = w1.shape[0]
    permuted, tokens_per_expert, sorted_order = moe_permute(tokens, topk_ids, num_experts)
    gate = grouped_matmul(permuted, w1, tokens_per_expert)
    up = grouped_matmul(permuted, w3, tokens_per_expert)
    down = grouped_matmul(swiglu(gate, up, swiglu_limit), w2, tokens_per_expert)
    return moe_unpermute(down, sorted_order, topk_weights)
