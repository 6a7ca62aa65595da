"""The `triton` backend: what CUDA tensors get, one module per operator family.

The registry imports this package only when triton imports and can run (a CUDA device, or
TRITON_INTERPRET=1 for the tests on CPU tensors). Every operator of the reference has an
implementation here, written in Triton or, where torch already has the fused operator, torch-native:

| operator | implementation | module |
|---|---|---|
| rms_norm, swiglu, apply_rope | Triton, forward and backward | elementwise |
| sparse_attention | Triton flash-style: window + CSA (gathered) / HCA entries + sink, online softmax, recomputing backward; no [S, S] tensor | attention |
| indexer_scores | Triton, forward and backward | indexer |
| indexer_topk | Triton scores, then torch.topk | indexer |
| indexer_kl_target | Triton (no gradient) | indexer |
| sinkhorn | Triton, all rounds in registers, backward by recomputation | mhc |
| hc_pre, hc_head | torch matmul for the projection, Triton Sinkhorn and stream collapse | mhc |
| hc_post | Triton, forward and backward | mhc |
| linear_cross_entropy | torch matmuls per token chunk, a Triton kernel for the loss and its logit gradient in place; no [N, V] tensor | loss |
| grouped_matmul | torch._grouped_mm | moe |
| moe_permute, moe_unpermute | torch argsort / bincount, Triton row gathers both ways | moe |

Each implementation hands float64 inputs and tensor subclasses (DTensor) to the reference.
"""

from ascend_kernels.triton import attention, elementwise, indexer, loss, mhc, moe

__all__ = ["attention", "elementwise", "indexer", "loss", "mhc", "moe"]
