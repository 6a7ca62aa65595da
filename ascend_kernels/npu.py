"""The `npu` backend: torch_npu fused operators, where their semantics match the reference.

The registry imports this module only when torch_npu imports and sees an NPU. torch_npu's operator
signatures differ between releases, so each binding is also checked once, at import, on small random
inputs against the reference (forward and backward); only bindings that pass are registered, and the
others are logged with the reason. Operators without a binding run the reference on the NPU.

Bindings:
- rms_norm -> torch_npu.npu_rms_norm (weight cast to the input dtype; no weight = ones);
- apply_rope -> torch_npu.npu_rotary_mul in interleaved mode on the rotary slice;
- swiglu -> torch_npu.npu_swiglu on [clamped gate | clamped up] (the clamp stays a torch op);
- grouped_matmul -> torch_npu.npu_grouped_matmul with a cumulative group list;
- moe_permute / moe_unpermute -> torch_npu.npu_moe_token_permute / npu_moe_token_unpermute. Their
  index is the inverse of the contract's `sorted_order`: CANN documents it as
  argsort(argsort(flatten(indices))), the permuted row of each (token, slot) assignment, where
  `sorted_order` is the assignment of each permuted row. Both bindings convert between the two
  (before, passing it through unconverted failed the self-check wherever tokens change order).
Not bound: npu_fusion_attention, which has no attention sink and no per-query selected compressed
entries, so it cannot compute V4's sparse attention. Every other operator (Sinkhorn, mHC, sparse
attention, the indexer, linear + cross-entropy) runs the reference on the NPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
import torch_npu

from ascend_kernels import reference
from ascend_kernels.registry import register

logger = logging.getLogger("ascend_kernels")


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    if x.dtype == torch.float64:
        return reference.rms_norm(x, weight, eps)
    gamma = weight.to(x.dtype) if weight is not None else torch.ones(x.shape[-1], dtype=x.dtype, device=x.device)
    return torch_npu.npu_rms_norm(x, gamma, epsilon=eps)[0]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    if x.dtype == torch.float64:
        return reference.apply_rope(x, cos, sin, inverse)
    x4 = x if x.dim() == 4 else x.unsqueeze(2)
    if cos.dim() == 2:
        cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)
    rope_dim = 2 * cos.shape[-1]
    # npu_rotary_mul takes full-width factors [B, S, 1, 2R]: each angle repeated for its channel pair.
    full_cos = cos.repeat_interleave(2, dim=-1).unsqueeze(2).expand(x4.shape[0], -1, -1, -1).to(x.dtype)
    full_sin = sin.repeat_interleave(2, dim=-1).unsqueeze(2).expand(x4.shape[0], -1, -1, -1).to(x.dtype)
    if inverse:
        full_sin = -full_sin
    passthrough, rotary = x4[..., :-rope_dim], x4[..., -rope_dim:]
    rotated = torch_npu.npu_rotary_mul(rotary.contiguous(), full_cos.contiguous(), full_sin.contiguous(),
                                       rotary_mode="interleave")
    out = torch.cat([passthrough, rotated], dim=-1)
    return out if x.dim() == 4 else out.squeeze(2)


def swiglu(gate: torch.Tensor, up: torch.Tensor, limit: float | None = None) -> torch.Tensor:
    if gate.dtype == torch.float64:
        return reference.swiglu(gate, up, limit)
    if limit:
        gate, up = gate.clamp(max=limit), up.clamp(min=-limit, max=limit)
    return torch_npu.npu_swiglu(torch.cat([gate, up], dim=-1), dim=-1)


def grouped_matmul(x: torch.Tensor, weight: torch.Tensor, tokens_per_expert: torch.Tensor) -> torch.Tensor:
    if x.dtype == torch.float64 or x.shape[0] == 0:
        return reference.grouped_matmul(x, weight, tokens_per_expert)
    group_list = torch.cumsum(tokens_per_expert, dim=0).to(torch.int64)
    # split_item=3 with group_type=0: one x and one output, split along M by the cumulative group list.
    return torch_npu.npu_grouped_matmul(
        [x], [weight.transpose(1, 2)], group_list=group_list, split_item=3, group_type=0
    )[0]


def _inverse_permutation(permutation: torch.Tensor) -> torch.Tensor:
    inverse = torch.empty_like(permutation, dtype=torch.int64)
    inverse[permutation.long()] = torch.arange(permutation.numel(), device=permutation.device)
    return inverse


def moe_permute(
    tokens: torch.Tensor, topk_ids: torch.Tensor, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    permuted, row_of_assignment = torch_npu.npu_moe_token_permute(tokens, topk_ids.to(torch.int32))
    tokens_per_expert = torch.bincount(topk_ids.reshape(-1), minlength=num_experts)
    return permuted, tokens_per_expert, _inverse_permutation(row_of_assignment)


def moe_unpermute(expert_output: torch.Tensor, sorted_order: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
    row_of_assignment = _inverse_permutation(sorted_order).to(torch.int32)
    return torch_npu.npu_moe_token_unpermute(
        expert_output, row_of_assignment, probs=topk_weights.to(expert_output.dtype)
    )


def _self_check(operator: str, binding: Callable, device: torch.device) -> str | None:
    """Run the binding and the reference on small random inputs; None if they agree, else the reason."""
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    if operator == "rms_norm":
        cases = [((randn(4, 7, 64), randn(64), 1e-6), (0, 1)), ((randn(3, 64), None, 1e-6), (0,))]
    elif operator == "apply_rope":
        angles = torch.rand(2, 5, 8, generator=generator) * 10
        cases = [((randn(2, 5, 3, 48), angles.cos(), angles.sin(), inverse), (0,)) for inverse in (False, True)]
    elif operator == "swiglu":
        cases = [((randn(6, 32) * 8, randn(6, 32) * 8, 10.0), (0, 1)), ((randn(6, 32), randn(6, 32), None), (0, 1))]
    elif operator == "grouped_matmul":
        cases = [((randn(12, 32), randn(4, 16, 32), torch.tensor([5, 0, 7, 0])), (0, 1))]
    elif operator == "moe_permute":
        ids = torch.stack([torch.randperm(6, generator=generator)[:2] for _ in range(9)])
        cases = [((randn(9, 16), ids, 6), (0,))]
    elif operator == "moe_unpermute":
        ids = torch.stack([torch.randperm(6, generator=generator)[:2] for _ in range(9)])
        order = torch.argsort(ids.reshape(-1), stable=True)
        cases = [((randn(18, 16), order, torch.rand(9, 2, generator=generator)), (0, 2))]
    else:
        return "no self-check"
    for inputs, differentiable in cases:
        ours_inputs = [
            (v.to(device, torch.float32 if v.is_floating_point() else v.dtype).requires_grad_(i in differentiable)
             if isinstance(v, torch.Tensor) else v)
            for i, v in enumerate(inputs)
        ]
        theirs_inputs = [
            (v.detach().cpu().double().requires_grad_(i in differentiable)
             if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
            for i, v in enumerate(ours_inputs)
        ]
        ours = binding(*ours_inputs)
        theirs = getattr(reference, operator)(*theirs_inputs)
        ours_list = list(ours) if isinstance(ours, tuple) else [ours]
        theirs_list = list(theirs) if isinstance(theirs, tuple) else [theirs]
        for a, b in zip(ours_list, theirs_list, strict=True):
            if a.shape != b.shape:
                return f"shape {tuple(a.shape)} != {tuple(b.shape)}"
            if not b.is_floating_point():
                if not torch.equal(a.cpu().long(), b.long()):
                    return "integer output differs"
            elif not torch.allclose(a.detach().cpu().double(), b.detach(), rtol=2e-3, atol=2e-3):
                return f"forward differs by {(a.detach().cpu().double() - b.detach()).abs().max().item():.2e}"
        floating = [(a, b) for a, b in zip(ours_list, theirs_list, strict=True) if b.is_floating_point()]
        if floating and floating[0][1].requires_grad:
            weight = torch.randn(floating[0][1].shape, generator=generator, dtype=torch.float64)
            (floating[0][0] * weight.to(device, floating[0][0].dtype)).sum().backward()
            (floating[0][1] * weight).sum().backward()
            for index in differentiable:
                got, want = ours_inputs[index].grad, theirs_inputs[index].grad
                if got is None:
                    return f"no gradient for input {index}"
                if not torch.allclose(got.cpu().double(), want, rtol=2e-3, atol=2e-3):
                    return f"gradient of input {index} differs"
    return None


_BINDINGS = {
    "rms_norm": rms_norm,
    "apply_rope": apply_rope,
    "swiglu": swiglu,
    "grouped_matmul": grouped_matmul,
    "moe_permute": moe_permute,
    "moe_unpermute": moe_unpermute,
}


def _register_checked() -> None:
    device = torch.device("npu", torch.npu.current_device())
    for operator, binding in _BINDINGS.items():
        try:
            problem = _self_check(operator, binding, device)
        except Exception as error:  # a signature this torch_npu release does not have
            problem = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        if problem is None:
            register(operator, "npu")(binding)
        else:
            logger.warning("ascend_kernels: npu binding for %s not used (%s); the reference serves it", operator, problem)


_register_checked()
