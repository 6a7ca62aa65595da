"""Turn a plain single-device DeepSeek-V4 model into its parallel form, in one documented order (the
trainer applies it to a model on the meta device, whose shards get storage and weights afterwards:
`meta_init.py`):

1. tensor parallel (DTensor over the dense mesh's `tp` dimension) for attention, the shared expert,
   the embedding and the output head (split by vocabulary); the routed experts follow the expert grid
   instead (parallel folding: `parallel_dims.py`);
2. expert parallel (routed experts sliced over the expert mesh's `ep` dimension, all-to-all dispatch;
   with expert-TP 1 an expert group may span tensor ranks, which then split their shared tokens before
   dispatch unless sequence parallel already gave each its own; with expert-TP = TP each expert is split
   over the tensor ranks, `expert_parallel.py`);
   then sequence parallel (`[train.parallel] sequence_parallel`, on by default with tp > 1), which
   needs both in place: see below;
3. activation checkpointing (full: every block; selective: every n-th block; or the chosen parts of
   every block: attention, MoE, the mHC mixing);
4. FSDP2 `fully_shard`: each block is one unit, routed experts under EP / ETP get their own unit on the
   expert-data-parallel ranks, then the root takes the embedding, head and the rest. Mixed precision:
   fp32 master parameters, bf16 compute copies, fp32 gradient reduction. Gradients are summed across
   ranks (the trainer scales each rank's loss by its share of the global batch).
   A one-rank run has nothing to shard or reduce: it skips FSDP2 (whose flat-buffer copies of every
   parameter and gradient cost about a tenth of a CPU step) and gets the same mixed precision from
   `OneRankMixedPrecision` (unless the optimizer is to be offloaded, which FSDP2's policy does).
   Context-parallel ranks join the data ranks in FSDP's mesh (dp_shard x cp, as `ParallelDims`'s
   `dense_shard_group` counts them): they hold the same parameters and their gradients add up.

Every split is declared as a parallel style applied by `parallelize_module` (torch's, and this module's
`HeadParallelAttention` and `VocabRowsEmbedding`); no method of a module instance is replaced. Where a
module must compute differently (attention on local heads, the embedding on local rows, a shared expert
that returns an early result: `expert_parallel.py`), the style gives it a subclass of its own class, as
`fully_shard` does, so its names, hooks and state dict stay as they are.

Tensor parallel attention: the query projection is split by heads (column-wise), the grouped low-rank
output projection `wo_a` by its groups of heads, `wo_b` row-wise, the per-head sink by heads; each
rank then runs the model's own attention code on its heads. The key/value path, compressors and the
lightning indexer stay replicated (one shared KV head; the indexer is small): each rank computes them
whole, and because each rank uses the KV only with its own heads, their gradients are summed over the
TP ranks where they enter the attention (Megatron's "copy to tensor-parallel region"). The indexer's
KL target, an average over all heads, gathers the heads first.

Tensor parallel vocabulary (Megatron's vocab-parallel embedding and output head): the embedding table
is split by vocabulary rows (rank r holds ids [r V/tp, (r+1) V/tp); an id outside its rows reads zeros
and the ranks' rows are summed; each rank's weight gradient is its own rows), and the output head by its
vocabulary rows too (`ColwiseParallel`: each rank's logits are its slice of the vocabulary). The loss
never gathers the logits: `models/deepseek_v4/vocab_parallel.py` reduces the maximum, the sum of
exponentials and the target logit over the TP ranks. A call of the head module (logits asked for by
name: evaluation, generation) gathers the slices into whole-vocabulary logits. The MTP block shares
both, so it needs nothing of its own.

Sequence parallel (Megatron's, `apply_sequence_parallel`): without it every TP rank runs the norms, the
mHC mixing, the router and the routed experts (without EP) on every token of its rows. With it, between
the tensor-parallel regions each TP rank holds its tp-th of every row's positions (Shard(1) of
[B, S, ...]; under context parallel its tp-th of the chunk):

    embed (reduce-scatter) -> [mHC pre, attn_norm] -> gather -> attention -> wo_b (reduce-scatter)
      -> [mHC post, mHC pre, ffn_norm, router, routed experts] + gather -> shared expert -> w2 (reduce-scatter)
      -> [mHC post] ... -> [mHC head, final norm] -> gather -> vocab-parallel head and loss

(brackets: on the local positions). The gathers are torch's `PrepareModuleInput` / `PrepareModuleOutput`
(Shard -> Replicate), the reduce-scatters `RowwiseParallel(output_layouts=Shard(...))` and the
vocab-parallel embedding's own. Inside the regions the gradients reaching a gathered input are already
summed over the TP ranks (see above), so each gather's backward keeps this rank's part. What reads
per-token inputs on the local positions gets them cut to match: the MoE's hash routing (input ids) and
its sequence-wise balance loss (counts over the TP ranks, whole-row length; the rank's part is summed
over TP so every rank holds the whole loss, whose backward reaches each rank's own positions). Position
ids, document masks and the loss's targets are read only inside the regions, on every position, so they
stay whole. The routed-token counts stay per rank (the bias update divides by
`ParallelDims.routing_replicas`). Parameters used on the local positions only (norms, mHC, router, MTP
projections, the routed experts unless EP places them) get each rank's part of their gradient:
`SequenceParallelGradients` sums them over TP once per step, before the gradient norm.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
)
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    parallelize_module,
)
from torch.distributed.tensor.parallel.style import ParallelStyle
from torch.nn.utils import stateless

from trex_cli.console import warn
from trex_cli.models.deepseek_v4 import vocab_parallel
from trex_cli.models.deepseek_v4.model import SequenceShard, _outside_backward
from trex_cli.train.config import ParallelSection
from trex_cli.train.distributed import Distributed
from trex_cli.train.expert_parallel import SumOverRanks, apply_expert_parallel, blocks_of, with_mixin

# ---- 1. tensor parallel ---------------------------------------------------------------------------


def _shard_parameter(module: nn.Module, name: str, mesh) -> None:
    parameter = getattr(module, name)
    sharded = nn.Parameter(distribute_tensor(parameter.detach(), mesh, [Shard(0)]), parameter.requires_grad)
    module.register_parameter(name, sharded)


class _SharedAcrossHeads(torch.autograd.Function):
    """Identity forward; backward sums the gradient over the tensor-parallel ranks. Marks a tensor that
    every rank computes whole (the one shared KV head, the compressed entries) but that each rank then
    uses only with its own query heads: each rank's gradient is its heads' part of the total."""

    @staticmethod
    def forward(ctx, tensor, group):
        ctx.group = group
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        torch.distributed.all_reduce(grad, group=ctx.group)
        return grad, None


def _shared_across_heads_hook(group):
    def hook(module, inputs, output):
        return _SharedAcrossHeads.apply(output, group)

    return hook


class _OnLocalHeads:
    """An attention module whose heads are split over the TP ranks: its forward runs the model's code with
    `wo_a.weight` and `attn_sink` as this rank's local shards (the model reads them as tensors, in an
    einsum, not through a module call, so they must be plain tensors there; `to_local` keeps the gradient
    path to the sharded parameters), and the indexer's KL target, an average over every head, sees all of
    them (gathered; the target carries no gradient, nor does the gather)."""

    def forward(self, *args, **kwargs):
        local = {"wo_a.weight": self.wo_a.weight.to_local(), "attn_sink": self.attn_sink.to_local()}
        with stateless._reparametrize_module(self, local):
            return super().forward(*args, **kwargs)

    def _indexer_kl(self, query, *args):
        import torch.distributed._functional_collectives as functional_collectives

        all_heads = functional_collectives.all_gather_single(query.detach().contiguous(), gather_dim=2,
                                                             group=self.tensor_parallel_group)
        return super()._indexer_kl(all_heads, *args)


class HeadParallelAttention(ParallelStyle):
    """Tensor parallel for one V4 attention layer, as a style for `parallelize_module`: the query heads
    (`wq_b` column-wise), the grouped output projection `wo_a` by its groups, `wo_b` row-wise (its
    partial sums reduce-scattered along the sequence under `sequence_parallel`, all-reduced otherwise)
    and the per-head sink split over the ranks; the shared KV head and the compressed entries stay whole,
    their gradients summed over the ranks where they enter the attention (`_SharedAcrossHeads`). The
    module becomes an `_OnLocalHeads` attention of its own class (see there)."""

    def __init__(self, sequence_parallel: bool = False):
        self.sequence_parallel = sequence_parallel

    def _apply(self, module: nn.Module, device_mesh) -> nn.Module:
        tp, config = device_mesh.size(), module.config
        wo_b = RowwiseParallel(output_layouts=Shard(1)) if self.sequence_parallel else RowwiseParallel()
        parallelize_module(module, device_mesh, {"wq_b": ColwiseParallel(), "wo_b": wo_b})
        _shard_parameter(module.wo_a, "weight", device_mesh)
        _shard_parameter(module, "attn_sink", device_mesh)
        module.heads = config.num_attention_heads // tp
        module.config = dataclasses.replace(config, o_groups=config.o_groups // tp)  # every other field is the model's
        module.tensor_parallel_group = group = device_mesh.get_group()
        module.kv_norm.register_forward_hook(_shared_across_heads_hook(group))
        if getattr(module, "compressor", None) is not None:
            module.compressor.register_forward_hook(_shared_across_heads_hook(group))
        module.__class__ = with_mixin(_OnLocalHeads, type(module))
        return module


class _OnLocalRows:
    """An embedding whose table is split by vocabulary rows over the TP ranks (see `VocabRowsEmbedding`)."""

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return vocab_parallel.embedding(input_ids, self.weight, self.scatter_dim)


class VocabRowsEmbedding(ParallelStyle):
    """Megatron's vocab-parallel embedding as a style: the table split by rows, the ids whole on every
    tensor rank; each rank looks up its rows (an id outside them reads zeros) and the ranks' rows are
    summed, or reduce-scattered along the sequence under `sequence_parallel` (each rank keeps its part).
    Not torch's RowwiseParallel: its backward forms the whole table's gradient on every rank."""

    def __init__(self, sequence_parallel: bool = False):
        self.sequence_parallel = sequence_parallel

    def _apply(self, module: nn.Module, device_mesh) -> nn.Module:
        _shard_parameter(module, "weight", device_mesh)
        module.scatter_dim = 1 if self.sequence_parallel else None
        module.__class__ = with_mixin(_OnLocalRows, type(module))
        return module


def apply_tensor_parallel(model: nn.Module, tp_mesh, sequence_parallel: bool = False) -> None:
    """Split attention, the shared expert, the embedding and the head over the TP ranks. With
    `sequence_parallel` the regions' row-split outputs (`wo_b`, the shared expert's `w2`, the embedding)
    are reduce-scattered along the sequence instead of all-reduced; `apply_sequence_parallel` then adds
    the gathers before the regions and what the local tokens between them need."""
    tp = tp_mesh.size()
    config = model.config
    if config.num_attention_heads % tp or config.o_groups % tp:
        raise ValueError(
            f"[train.parallel] tp = {tp} must divide num_attention_heads ({config.num_attention_heads}) and "
            f"o_groups ({config.o_groups})"
        )
    if config.moe_intermediate_size * config.n_shared_experts % tp:
        raise ValueError(f"[train.parallel] tp = {tp} must divide the shared expert width")
    for block in blocks_of(model):
        parallelize_module(block.attn, tp_mesh, HeadParallelAttention(sequence_parallel))
        shared = block.ffn.shared_experts
        if sequence_parallel:
            # the MoE's tokens [N / tp, D] (this rank's, flattened): gathered once for w1 and w3, and w2's
            # partial sums reduce-scattered back to each rank's own rows
            parallelize_module(shared, tp_mesh, PrepareModuleInput(
                input_layouts=(Shard(0),), desired_input_layouts=(Replicate(),), use_local_output=True,
            ))
        w2 = RowwiseParallel(output_layouts=Shard(0)) if sequence_parallel else RowwiseParallel()
        parallelize_module(shared, tp_mesh, {"w1": ColwiseParallel(), "w3": ColwiseParallel(), "w2": w2})
    apply_vocabulary_parallel(model, tp_mesh, sequence_parallel)


def apply_vocabulary_parallel(model: nn.Module, tp_mesh, sequence_parallel: bool = False) -> None:
    """Split the embedding table and the output head by vocabulary rows over the TP ranks (those this
    rank holds: a pipeline stage without them has nothing to split)."""
    tp = tp_mesh.size()
    vocab = model.config.vocab_size
    if vocab % tp:
        raise ValueError(
            f"[train.parallel] tp = {tp} must divide vocab_size ({vocab}): the embedding and the output head are "
            f"split by vocabulary rows over the tensor ranks; choose a tp that divides {vocab}, or pad the "
            f"vocabulary (and the checkpoint's embed / head rows) to a multiple of {tp}"
        )
    if getattr(model, "embed", None) is not None:
        parallelize_module(model.embed, tp_mesh, VocabRowsEmbedding(sequence_parallel))
    if getattr(model, "head", None) is not None:
        # the loss reads head.weight's local rows itself; a call of the module gathers whole logits
        parallelize_module(model.head, tp_mesh, ColwiseParallel(output_layouts=Replicate()))


# ---- 1b. sequence parallel ------------------------------------------------------------------------


def _sum_without_grad(tensor: torch.Tensor, group) -> torch.Tensor:
    total = tensor.detach().clone()
    dist.all_reduce(total, group=group)
    return total


def _unavailable(*args):
    raise RuntimeError("sequence parallel: the MoE's token shard has no sequence collectives besides sum_over_ranks")


def _moe_takes_local_tokens(tp_group, tp_rank: int, tp: int):
    """A forward pre-hook for a MoE layer under sequence parallel: its input [B, S / tp, D] is this
    rank's part of the positions, so the context it reads (the ids hash routing looks up, and the
    balance loss's counts and whole length) is swapped for one of those positions: input ids cut to
    them, and a `SequenceShard` whose `sum_over_ranks` sums over the TP ranks (and, under context
    parallel, then over the context ranks), so the sequence-wise balance loss counts every token of
    the row once, as context parallel's chunks do."""

    def hook(module, args):
        x, ctx = args
        inner = object.__getattribute__(ctx, "_context") if isinstance(ctx, OpaqueContext) else ctx
        length = inner.input_ids.shape[1] // tp
        first = (0 if inner.sequence is None else inner.sequence.start) + tp_rank * length
        outer_sum = inner.sequence.sum_over_ranks if inner.sequence is not None else None

        def sum_over_ranks(tensor):
            total = _sum_without_grad(tensor, tp_group)
            return total if outer_sum is None else outer_sum(total)

        local = dataclasses.replace(
            inner,
            input_ids=inner.input_ids[:, tp_rank * length : (tp_rank + 1) * length],
            sequence=SequenceShard(first, first + length, _unavailable, sum_over_ranks, _unavailable, _unavailable),
            whole=inner.whole if inner.whole is not None else inner,
        )
        return x, local

    return hook


def _moe_sums_over_tensor_ranks(tp_group):
    """A forward hook for a MoE layer under sequence parallel: its balance loss is this rank's tokens'
    part, summed over the TP ranks (`SumOverRanks`) so every rank holds the whole as before, and
    `expert_load` counts every TP rank's tokens. (`Gate.routed_tokens` keeps this rank's own counts:
    `ExpertBiasUpdate` sums them over all ranks, `ParallelDims.routing_replicas`.) A forward run again
    in the backward pass (activation checkpointing) kept nothing and is left alone."""

    def hook(module, args, output):
        if not _outside_backward():
            return
        if module.balance_loss is not None:
            module.balance_loss = SumOverRanks.apply(module.balance_loss, tp_group)
        if module.expert_load is not None:
            module.expert_load = _sum_without_grad(module.expert_load, tp_group)

    return hook


def apply_sequence_parallel(model: nn.Module, tp_mesh) -> None:
    """Megatron's sequence parallel over the TP ranks, on a model `apply_tensor_parallel(...,
    sequence_parallel=True)` (and expert parallel, if any) already split. Between the tensor-parallel
    regions every rank holds seq / tp positions of each row (the embedding hands out those parts). Declared
    with torch's parallel styles where they fit:

    - attention: its input is gathered along the sequence (`PrepareModuleInput`, Shard(1) -> Replicate);
      `wo_b` reduce-scatters (set by `apply_tensor_parallel`). The backward of the gather keeps this
      rank's part of the gradient: inside attention the gradients that reach its input are already
      summed over the TP ranks (the replicated KV path, `_SharedAcrossHeads`, and ColwiseParallel's
      input), so they are the same on every rank. Those sums are all-reduces of the narrow tensors the
      heads read (the query's low-rank residual, the KV head, the compressed entries) instead of
      Megatron's one reduce-scatter of the hidden-wide input gradient, and they move less: per token
      and tensor rank, 2 x (1024 + 512 + 128) = 3,328 elements x (tp-1)/tp on a V4-Flash CSA layer against
      4,096 x (tp-1)/tp, and 2 x (1536 + 512 + 128) = 4,352 against 7,168 on V4-Pro (q_lora_rank, head_dim,
      head_dim / 4 compressed entries; hidden_size), at the price of three collectives instead of one;
    - the MoE: the router, the routed experts and the shared expert's gather / reduce-scatter work on
      the rank's own tokens (a pre-hook hands the MoE the context of its positions: input ids for hash
      routing, the counts of the balance loss); its balance loss and expert load are summed over TP;
    - the final norms (the model's, each MTP block's): their output is gathered along the sequence
      (`PrepareModuleOutput`), so the vocab-parallel head and loss see every position as before (the
      loss's hidden gradient is summed over TP there, so the gather's backward keeps this rank's part).

    The parameters used on the local positions only (norms, mHC mixing, the router, MTP projections, the
    routed experts unless expert parallel places them) are the same on every TP rank but each rank's
    gradient covers its own positions: `SequenceParallelGradients` (kept on the model as
    `sequence_parallel_gradients`) sums them over the TP ranks once per step."""
    tp_group, tp_rank, tp = tp_mesh.get_group(), tp_mesh.get_local_rank(), tp_mesh.size()
    region_parameters = set()
    for block in blocks_of(model):
        parallelize_module(block.attn, tp_mesh, PrepareModuleInput(
            input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None), use_local_output=True,
        ))
        region_parameters.update(id(p) for p in block.attn.parameters())
        block.ffn.register_forward_pre_hook(_moe_takes_local_tokens(tp_group, tp_rank, tp))
        block.ffn.register_forward_hook(_moe_sums_over_tensor_ranks(tp_group))
    gather = PrepareModuleOutput(output_layouts=Shard(1), desired_output_layouts=Replicate(), use_local_output=True)
    final_norms = [model.norm] if getattr(model, "norm", None) is not None else []
    final_norms += [mtp.norm for mtp in getattr(model, "mtp", [])]
    for norm in final_norms:
        parallelize_module(norm, tp_mesh, gather)
    model.sequence_parallel_gradients = SequenceParallelGradients(
        [name for name, p in model.named_parameters() if not isinstance(p, DTensor) and id(p) not in region_parameters],
        tp_group,
    )


class SequenceParallelGradients:
    """Sums, over the TP ranks, the gradients of the parameters sequence parallel uses on each rank's own
    positions (by name: FSDP2 swaps the parameter objects but keeps the names). Called once per optimizer
    step, after the last backward (the sum is linear, so accumulated micro-batches and FSDP's data-rank
    reduction may come first): one all-reduce of their flattened local shards."""

    def __init__(self, names: list[str], group):
        self.names, self.group = list(names), group

    @torch.no_grad()
    def sum_over_tensor_ranks(self, model: nn.Module) -> None:
        grads = []
        for name in self.names:
            grad = model.get_parameter(name).grad
            if grad is not None:
                grads.append(grad.to_local() if isinstance(grad, DTensor) else grad)
        if not grads:
            return
        flat = torch.cat([grad.reshape(-1).float() for grad in grads])
        dist.all_reduce(flat, group=self.group)
        offset = 0
        for grad in grads:
            grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
            offset += grad.numel()


# ---- 3. activation checkpointing ------------------------------------------------------------------


def apply_activation_checkpointing(model: nn.Module, mode: str | list[str], every: int) -> int:
    """Recompute whole blocks, or chosen parts of every block, in the backward pass instead of keeping
    their activations; returns how many blocks recompute something. Declared on each block
    (`Block.recompute`: "block" for the whole block, or any of "attention", "moe", "mhc"), which
    checkpoints exactly those calls itself, so parameter names (and checkpoints) do not change, hooks
    around the block (FSDP's) run once, and a part's module runs its forward again, hooks included, in
    the backward pass."""
    if isinstance(mode, list | tuple):
        for block in blocks_of(model):
            block.recompute = frozenset(mode)
        return len(blocks_of(model)) if mode else 0
    if mode == "none":
        return 0
    if every < 1:
        raise ValueError(f"[train.parallel] selective_every = {every}: must be 1 or more")
    count = 0
    for index, block in enumerate(blocks_of(model)):
        if mode == "full" or index % every == 0:
            block.recompute = frozenset({"block"})
            count += 1
    return count


# ---- 4. FSDP2 -------------------------------------------------------------------------------------


class OpaqueContext:
    """Hands a block the model's per-forward context (a dataclass of tensors, the context-parallel shard's
    callables and generate()'s capture dict) as an object FSDP2 does not look into.

    FSDP2 walks a unit's inputs (to cast floating tensors under mixed precision, and to hook the ones
    requiring grad for the backward pass) and rebuilds the dataclasses, lists and dicts it passes
    through, so each block could get its own copy of the context and generate() would lose what the
    blocks capture into it. (The blocks keep their auxiliary losses on themselves: `take_auxiliary`.)"""

    __slots__ = ("_context",)

    def __init__(self, context):
        object.__setattr__(self, "_context", context)

    def __getattr__(self, name: str):
        return getattr(object.__getattribute__(self, "_context"), name)


class _ContextShielded:
    """A block that wraps its dataclass arguments in OpaqueContext before any hook (FSDP's) sees them."""

    def __call__(self, *args, **kwargs):
        args = tuple(
            OpaqueContext(a) if dataclasses.is_dataclass(a) and not isinstance(a, type) else a for a in args
        )
        return super().__call__(*args, **kwargs)


def shield_context(block: nn.Module) -> None:
    """Make `block` wrap dataclass arguments in OpaqueContext before any hook (FSDP's) sees them."""
    if not isinstance(block, OpaqueContext | _ContextShielded):
        block.__class__ = with_mixin(_ContextShielded, type(block))


def apply_fsdp(
    model: nn.Module,
    distributed: Distributed,
    compute_dtype: torch.dtype,
    offload_optimizer: bool,
    expert_parallel: bool,
) -> None:
    dims = distributed.dims
    dense = distributed.dense_mesh
    shard = "dp_shard"
    if dims.cp > 1:
        # context-parallel ranks hold the same parameters and add up like data ranks: one shard group
        dense["dp_shard", "cp"]._flatten("dp_shard_cp")
        shard = "dp_shard_cp"
    dp_mesh = dense["dp_replicate", shard] if dims.dp_replicate > 1 else dense[shard]
    # No input casting: blocks take the forward context (a dataclass whose lists the blocks fill with
    # router statistics and indexer losses) and a cast would hand each block a copy.
    policy = MixedPrecisionPolicy(
        param_dtype=None if compute_dtype == torch.float32 else compute_dtype,
        reduce_dtype=torch.float32,
        cast_forward_inputs=False,
    )
    offload: OffloadPolicy = OffloadPolicy()
    if offload_optimizer:
        if distributed.device.type == "cpu":
            warn("offload_optimizer has no effect on CPU: the optimizer state is already in host memory")
        else:
            offload = CPUOffloadPolicy(pin_memory=True)
    # Resharding after forward saves memory only when there is more than one shard to free.
    reshard = dims.dp_shard > 1
    common = {"mp_policy": policy, "offload_policy": offload}
    for block in blocks_of(model):
        shield_context(block)
        if expert_parallel:
            fully_shard(
                block.ffn.experts, mesh=distributed.expert_mesh["edp"], reshard_after_forward=reshard, **common
            )
        fully_shard(block, mesh=dp_mesh, reshard_after_forward=reshard, **common)
    fully_shard(model, mesh=dp_mesh, reshard_after_forward=False, **common)
    set_prefetch(model, expert_parallel)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)  # sum: each rank's loss already carries its share
            module.set_force_sum_reduction_for_comms(True)  # plain SUM (gloo has no pre-multiplied sum)


def set_prefetch(model: nn.Module, expert_parallel: bool) -> None:
    """Explicit prefetch: each FSDP unit's all-gather is issued one unit ahead of its use.

    Forward: when block i starts, its routed experts (their own unit under EP, needed after its attention)
    and block i+1 are gathered, so the gathers overlap block i's compute instead of waiting at block i+1's
    start. Backward runs the blocks in reverse and each block's experts before its attention: when block i's
    backward starts, its experts and block i-1 are gathered. FSDP2's implicit prefetch only covers the
    backward pass, one unit ahead in the order of the previous iteration's post-forward."""
    blocks = blocks_of(model)
    for index, block in enumerate(blocks):
        experts = [block.ffn.experts] if expert_parallel and isinstance(block.ffn.experts, FSDPModule) else []
        following = [blocks[index + 1]] if index + 1 < len(blocks) else []
        preceding = [blocks[index - 1]] if index > 0 else []
        if experts or following:
            block.set_modules_to_forward_prefetch(experts + following)
        if experts or preceding:
            block.set_modules_to_backward_prefetch(experts + preceding)


class OneRankMixedPrecision:
    """FSDP2's mixed precision for a one-rank run, without FSDP2.

    The parameters stay fp32 master weights: the optimizer, the gradient norm, checkpoints and the
    export see only them. Inside `compute()` every parameter's data is swapped for a copy in the
    compute dtype, so the forward, the backward and any activation recompute in it run on those
    copies; on leaving, the new low-precision gradients are added to fp32 gradients that persist
    across micro-batches, and the fp32 data is put back. These are FSDP2's numbers at one rank (bf16
    compute copies, fp32 gradient accumulation, a parameter that got no gradient keeps none).
    """

    def __init__(self, model: nn.Module, compute_dtype: torch.dtype):
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        self.compute_dtype = compute_dtype
        # Persistent buffers for the compute copies and the fp32 gradients: written in place every
        # step instead of allocated afresh (fresh pages cost a page fault each on first touch).
        self.compute_copies = [torch.empty_like(p, dtype=compute_dtype) for p in self.parameters]
        self.grad_buffers = [torch.empty_like(p) for p in self.parameters]

    @contextlib.contextmanager
    def compute(self) -> Iterator[None]:
        masters = [p.data for p in self.parameters]
        master_grads = [p.grad for p in self.parameters]
        with torch.no_grad():
            for parameter, master, copy in zip(self.parameters, masters, self.compute_copies, strict=True):
                parameter.grad = None
                parameter.data = copy.copy_(master)
        try:
            yield
        finally:
            with torch.no_grad():
                for index, (parameter, master) in enumerate(zip(self.parameters, masters, strict=True)):
                    grad, parameter.grad = parameter.grad, None
                    parameter.data = master
                    if grad is not None:
                        if master_grads[index] is None:
                            # a gradient left from the previous step is no longer the parameter's
                            master_grads[index] = self.grad_buffers[index].copy_(grad)
                        else:
                            master_grads[index].add_(grad)
                    parameter.grad = master_grads[index]


def apply_model_parallel(model: nn.Module, distributed: Distributed) -> None:
    """Steps 1 and 2: tensor parallel, then expert (and expert-tensor) parallel, as the layout asks. A
    meta-device model is sharded the same way (no storage, no communication): `meta_init.py`."""
    dims = distributed.dims
    sequence_parallel = dims.sequence_parallel_on
    if dims.tp > 1:
        apply_tensor_parallel(model, distributed.dense_mesh["tp"], sequence_parallel)
    if dims.ep > 1 or dims.etp > 1:
        token_split = distributed.dense_mesh["tp"] if dims.experts_split_tokens_over_tp else None
        ep_etp = distributed.expert_mesh["ep", "etp"] if dims.etp > 1 else None
        # the shared expert runs while the dispatch is in flight (under sequence parallel with its gather
        # and reduce-scatter over the tensor ranks: `SharedExpertOverlap`)
        apply_expert_parallel(
            model, distributed.expert_mesh["ep"], token_split, ep_etp_mesh=ep_etp, sequence_parallel=sequence_parallel,
        )
    if sequence_parallel:
        apply_sequence_parallel(model, distributed.dense_mesh["tp"])


def uses_fsdp(distributed: Distributed, parallel: ParallelSection) -> bool:
    """Whether `parallelize` wraps the model in FSDP2 (a one-rank run does not, unless it offloads)."""
    return distributed.world_size > 1 or parallel.offload_optimizer


def parallelize(model: nn.Module, distributed: Distributed, parallel: ParallelSection, compute_dtype: torch.dtype) -> nn.Module:
    """Apply TP, EP, activation checkpointing and FSDP2 in that order, in place; returns the model. It
    may be on the meta device (the trainer gives it storage and weights afterwards, shard by shard)."""
    dims = distributed.dims
    apply_model_parallel(model, distributed)
    apply_activation_checkpointing(model, parallel.activation_checkpoint, parallel.selective_every)
    if uses_fsdp(distributed, parallel):
        apply_fsdp(model, distributed, compute_dtype, parallel.offload_optimizer, expert_parallel=dims.ep > 1 or dims.etp > 1)
    return model


def one_rank_mixed_precision(
    model: nn.Module, distributed: Distributed, parallel: ParallelSection, compute_dtype: torch.dtype
) -> OneRankMixedPrecision | None:
    """The mixed precision a parallelized model's forward and backward passes must run under: for a
    one-rank run without FSDP2 in a low-precision compute dtype, `OneRankMixedPrecision` over its
    (materialized) parameters; None otherwise (FSDP2 casts itself, fp32 needs nothing)."""
    if uses_fsdp(distributed, parallel) or compute_dtype == torch.float32:
        return None
    return OneRankMixedPrecision(model, compute_dtype)
