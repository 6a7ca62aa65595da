"""The embedding lookup and the output head's cross-entropy when both are split over the vocabulary
(tensor parallel).

Under tensor parallel the embedding table `embed.weight` and the output head `head.weight`, both
[V, D], are DTensors sharded by rows over the TP ranks (`Shard(0)`): rank r holds vocabulary ids
[r * V / tp, (r + 1) * V / tp).

The embedding (Megatron's vocab-parallel embedding): each rank looks up the ids its rows hold, writes
zeros for the others, and the rows are summed over the TP ranks (one all-reduce of the [B, S, D]
output; each token's row comes from exactly one rank). The backward needs no communication: the
output's gradient is the same on every TP rank (what follows is replicated), and each rank adds it to
its own rows only, so the weight's gradient is this rank's rows of the full one, never the whole table.
Under sequence parallel the sum is a reduce-scatter along the sequence instead (each TP rank keeps its
tp-th of the positions), and the backward all-gathers the parts' gradients before the lookup's.

The output head: rank r's logits are those of its vocabulary slice. The loss
is then computed without ever gathering the logits (Megatron's vocab-parallel cross-entropy): every
rank holds the same hidden rows, computes its own slice of the logits, one block of tokens at a time,
and per token

- the maximum logit is all-reduced (MAX) over the TP ranks, so every rank shifts by the same value;
- the sum of the shifted exponentials and the target's logit (taken by the rank whose slice holds the
  target id, zero on the others) are all-reduced (SUM) together;
- loss = max + log(sum) - target logit, the same on every rank.

The gradients are formed in the forward pass, block by block, as the fused single-device kernel does
(`ascend_kernels`: softmax - one_hot never outlives its block): each rank's head-weight gradient is
exactly its own rows of the full one, and its hidden gradient is its slice's part of the total, which
the backward sums over the TP ranks (the hidden rows entered every rank's slice).

Without a sharded head the loss goes to the fused kernel (`kernels.linear_cross_entropy`) unchanged.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Shard

from trex_cli.models.deepseek_v4 import kernels
from trex_cli.models.deepseek_v4.initialization import owned_block

# One token block's float32 logits of the local vocabulary slice: at most this many elements (64 MiB);
# with the slice's width this decides the rows per block (at least one, at most _MAX_BLOCK_ROWS).
_LOGITS_BUDGET_ELEMENTS = 1 << 24
_MAX_BLOCK_ROWS = 8192


def _vocabulary_rows(weight: DTensor, what: str) -> tuple[torch.Tensor, int]:
    """(this rank's rows of `weight`, differentiable; the vocabulary id of its first row)."""
    mesh = weight.device_mesh
    if mesh.ndim != 1 or tuple(weight.placements) != (Shard(0),):
        raise ValueError(
            f"vocab-parallel {what}: the weight must be split by vocabulary rows over one tensor-parallel mesh "
            f"dimension (placements (Shard(0),)); got placements {tuple(weight.placements)} over a {mesh.ndim}-D mesh"
        )
    return weight.to_local(), owned_block(weight)[0].start


def embedding(input_ids: torch.Tensor, weight: DTensor, scatter_dim: int | None = None) -> torch.Tensor:
    """The rows of `input_ids` from an embedding table split by vocabulary rows over a 1-D tensor-parallel
    mesh: [..., D], the same plain tensor on every TP rank. With `scatter_dim` (sequence parallel: the
    sequence dim of `input_ids`) the rows are reduce-scattered along it instead of all-reduced: TP rank r
    gets the r-th of tp equal parts of the positions, and the backward all-gathers the parts' gradients."""
    local_weight, vocab_start = _vocabulary_rows(weight, "embedding")
    return _VocabParallelEmbedding.apply(input_ids, local_weight, vocab_start, weight.device_mesh.get_group(), scatter_dim)


def _reduce_scatter_along(tensor: torch.Tensor, dim: int, group) -> torch.Tensor:
    """The sum over `group` of `tensor`, this rank's part of `dim` (tp equal parts, in rank order)."""
    size = dist.get_world_size(group)
    front = tensor.movedim(dim, 0).contiguous()
    if front.shape[0] % size:
        raise ValueError(f"sequence parallel: {front.shape[0]} positions do not split evenly over {size} tensor ranks")
    part = front.new_empty((front.shape[0] // size, *front.shape[1:]))
    dist.reduce_scatter_tensor(part, front, op=dist.ReduceOp.SUM, group=group)
    return part.movedim(0, dim)


def _all_gather_along(part: torch.Tensor, dim: int, group) -> torch.Tensor:
    """Every rank's part of `dim`, concatenated in rank order (the inverse of the scatter above)."""
    size = dist.get_world_size(group)
    front = part.movedim(dim, 0).contiguous()
    whole = front.new_empty((front.shape[0] * size, *front.shape[1:]))
    dist.all_gather_into_tensor(whole, front, group=group)
    return whole.movedim(0, dim)


class _VocabParallelEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_ids, weight, vocab_start: int, group, scatter_dim: int | None):
        local_vocab = weight.shape[0]
        owned = (input_ids >= vocab_start) & (input_ids < vocab_start + local_vocab)
        local_ids = torch.where(owned, input_ids - vocab_start, 0)
        rows = torch.nn.functional.embedding(local_ids, weight)
        rows.masked_fill_(~owned.unsqueeze(-1), 0)
        if scatter_dim is None:
            dist.all_reduce(rows, op=dist.ReduceOp.SUM, group=group)
        else:
            rows = _reduce_scatter_along(rows, scatter_dim, group)
        ctx.save_for_backward(local_ids, owned)
        ctx.local_vocab, ctx.group, ctx.scatter_dim = local_vocab, group, scatter_dim
        return rows

    @staticmethod
    def backward(ctx, grad_rows):
        local_ids, owned = ctx.saved_tensors
        if ctx.scatter_dim is not None:  # each rank's part of the positions: the whole rows' gradient
            grad_rows = _all_gather_along(grad_rows, ctx.scatter_dim, ctx.group)
        grad_rows = grad_rows.masked_fill(~owned.unsqueeze(-1), 0)
        # nn.Embedding's own backward (no padding index), over this rank's rows only
        grad_weight = torch.ops.aten.embedding_dense_backward(grad_rows, local_ids, ctx.local_vocab, -1, False)
        return None, grad_weight, None, None, None


def linear_cross_entropy_sum(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Summed cross-entropy (float32 scalar) of the logits hidden @ weight.T against `targets` ([N] ids,
    `ignore_index` = no loss). `weight` is the output head: a plain tensor (the fused kernel) or a DTensor
    split by vocabulary rows over a 1-D tensor-parallel mesh (the vocab-parallel loss below)."""
    if not isinstance(weight, DTensor):
        return kernels.linear_cross_entropy(hidden, weight, targets, ignore_index=ignore_index, reduction="sum")
    local_weight, vocab_start = _vocabulary_rows(weight, "cross-entropy (the output head)")
    want_grad = torch.is_grad_enabled() and (hidden.requires_grad or local_weight.requires_grad)
    return _VocabParallelLinearCrossEntropy.apply(
        hidden, local_weight, targets, int(ignore_index), weight.device_mesh.get_group(), vocab_start, want_grad
    )


def block_rows(local_vocab: int) -> int:
    """Tokens per block: [rows, local_vocab] float32 logits within the budget."""
    return max(1, min(_MAX_BLOCK_ROWS, _LOGITS_BUDGET_ELEMENTS // max(1, local_vocab)))


class _VocabParallelLinearCrossEntropy(torch.autograd.Function):
    """hidden [N, D] (the same on every TP rank), weight [V_local, D] (this rank's vocabulary rows, from
    `vocab_start`), targets [N] global ids. Returns the summed loss over the targets not ignored."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, ignore_index: int, group, vocab_start: int, want_grad: bool):
        num_tokens, local_vocab = hidden.shape[0], weight.shape[0]
        targets = targets.long()
        valid = targets != ignore_index
        # the targets this rank's slice holds, as local column indices (0 elsewhere, masked out)
        owned = valid & (targets >= vocab_start) & (targets < vocab_start + local_vocab)
        local_ids = torch.where(owned, targets - vocab_start, 0)
        grad_hidden = torch.zeros(hidden.shape, dtype=torch.float32, device=hidden.device) if want_grad else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if want_grad else None
        loss_sum = torch.zeros((), dtype=torch.float64, device=hidden.device)
        step = block_rows(local_vocab)
        for start in range(0, num_tokens, step):
            end = min(num_tokens, start + step)
            block_hidden = hidden[start:end].to(weight.dtype)
            logits = (block_hidden @ weight.t()).float()  # [r, V_local]
            maximum = logits.amax(dim=1)
            dist.all_reduce(maximum, op=dist.ReduceOp.MAX, group=group)
            block_owned, block_ids = owned[start:end], local_ids[start:end]
            target_logit = torch.where(block_owned, logits.gather(1, block_ids.unsqueeze(1)).squeeze(1), 0.0)
            exponentials = (logits - maximum.unsqueeze(1)).exp_()
            del logits
            sums = torch.stack([exponentials.sum(dim=1), target_logit])  # one all-reduce for both
            dist.all_reduce(sums, op=dist.ReduceOp.SUM, group=group)
            total, target_logit = sums[0], sums[1]
            block_valid = valid[start:end]
            row_loss = torch.where(block_valid, maximum + total.log() - target_logit, 0.0)
            loss_sum += row_loss.sum(dtype=torch.float64)
            if want_grad:
                # softmax - one_hot on this rank's columns, zero on ignored rows
                grad_logits = exponentials.div_(total.unsqueeze(1))
                rows = torch.arange(end - start, device=grad_logits.device)
                grad_logits[rows, block_ids] -= block_owned.to(grad_logits.dtype)
                grad_logits.mul_(block_valid.unsqueeze(1).to(grad_logits.dtype))
                grad_logits = grad_logits.to(weight.dtype)
                grad_hidden[start:end] = (grad_logits @ weight).float()
                grad_weight += (grad_logits.t() @ block_hidden).float()
            del exponentials
        ctx.group = group
        ctx.dtypes = (hidden.dtype, weight.dtype)
        ctx.save_for_backward(grad_hidden, grad_weight)
        return loss_sum.float()

    @staticmethod
    def backward(ctx, grad_loss):
        grad_hidden, grad_weight = ctx.saved_tensors
        if grad_hidden is None:
            raise RuntimeError("vocab-parallel cross-entropy: backward through a forward run without gradients")
        hidden_dtype, weight_dtype = ctx.dtypes
        factor = grad_loss.float()
        hidden_grad = weight_grad = None
        if ctx.needs_input_grad[0]:
            # each rank's part comes from its vocabulary slice: the hidden rows' gradient is their sum
            hidden_grad = grad_hidden * factor
            dist.all_reduce(hidden_grad, op=dist.ReduceOp.SUM, group=ctx.group)
            hidden_grad = hidden_grad.to(hidden_dtype)
        if ctx.needs_input_grad[1]:
            weight_grad = (grad_weight * factor).to(weight_dtype)
        return hidden_grad, weight_grad, None, None, None, None, None
