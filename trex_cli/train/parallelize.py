"""Turn a plain single-device DeepSeek-V4 model into its parallel form, in one documented order (the
trainer applies it to a model on the meta device, whose shards get storage and weights afterwards:
`meta_init.py`):

1. tensor parallel (DTensor over the dense mesh's `tp` dimension) for attention, the shared expert,
   the embedding and the output head (split by vocabulary); the routed experts follow the expert grid
   instead (parallel folding: `parallel_dims.py`);
2. expert parallel (routed experts sliced over the expert mesh's `ep` dimension, all-to-all dispatch;
   with expert-TP 1 an expert group may span tensor ranks, which then split their shared tokens before
   dispatch; with expert-TP = TP each expert is split over the tensor ranks, `expert_parallel.py`);
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
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator

import torch
from torch import nn
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
)
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.utils import stateless
from torch.utils.checkpoint import checkpoint

from trex_cli.console import warn
from trex_cli.models.deepseek_v4 import vocab_parallel
from trex_cli.train.config import ParallelSection
from trex_cli.train.distributed import Distributed
from trex_cli.train.expert_parallel import apply_expert_parallel, blocks_of

# ---- 1. tensor parallel ---------------------------------------------------------------------------


def _shard_parameter(module: nn.Module, name: str, mesh) -> None:
    parameter = getattr(module, name)
    sharded = nn.Parameter(distribute_tensor(parameter.detach(), mesh, [Shard(0)]), parameter.requires_grad)
    module.register_parameter(name, sharded)


def _attention_on_local_heads(attention: nn.Module, *args, **kwargs):
    """Run the model's attention with `wo_a.weight` and `attn_sink` swapped for this rank's shards:
    the model reads them as tensors (an einsum, not a module call), so they must be plain local
    tensors there; `to_local` keeps the gradient path to the sharded parameters."""
    local = {
        "wo_a.weight": attention.wo_a.weight.to_local(),
        "attn_sink": attention.attn_sink.to_local(),
    }
    with stateless._reparametrize_module(attention, local):
        return type(attention).forward(attention, *args, **kwargs)


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


def _indexer_kl_over_all_heads(model_indexer_kl, tp_group, query, *args):
    """The indexer's KL target averages the attention over every head; under TP a rank holds only its
    heads, so gather them first (the target carries no gradient, nor does this gather)."""
    import torch.distributed._functional_collectives as functional_collectives

    all_heads = functional_collectives.all_gather_single(query.detach().contiguous(), gather_dim=2, group=tp_group)
    return model_indexer_kl(all_heads, *args)


def apply_tensor_parallel(model: nn.Module, tp_mesh) -> None:
    tp = tp_mesh.size()
    config = model.config
    if config.num_attention_heads % tp or config.o_groups % tp:
        raise ValueError(
            f"[train.parallel] tp = {tp} must divide num_attention_heads ({config.num_attention_heads}) and "
            f"o_groups ({config.o_groups})"
        )
    if config.moe_intermediate_size * config.n_shared_experts % tp:
        raise ValueError(f"[train.parallel] tp = {tp} must divide the shared expert width")
    local_config = dataclasses.replace(config, o_groups=config.o_groups // tp)
    for block in blocks_of(model):
        attention = block.attn
        parallelize_module(attention, tp_mesh, {"wq_b": ColwiseParallel(), "wo_b": RowwiseParallel()})
        _shard_parameter(attention.wo_a, "weight", tp_mesh)
        _shard_parameter(attention, "attn_sink", tp_mesh)
        attention.heads = config.num_attention_heads // tp
        attention.config = local_config  # o_groups per rank; every other field is the model's
        attention.forward = functools.partial(_attention_on_local_heads, attention)
        group = tp_mesh.get_group()
        attention.kv_norm.register_forward_hook(_shared_across_heads_hook(group))
        if getattr(attention, "compressor", None) is not None:
            attention.compressor.register_forward_hook(_shared_across_heads_hook(group))
        if getattr(attention, "indexer", None) is not None:
            attention._indexer_kl = functools.partial(
                _indexer_kl_over_all_heads, type(attention)._indexer_kl, tp_mesh.get_group()
            )
        parallelize_module(
            block.ffn.shared_experts,
            tp_mesh,
            {"w1": ColwiseParallel(), "w3": ColwiseParallel(), "w2": RowwiseParallel()},
        )
    apply_vocabulary_parallel(model, tp_mesh)


def apply_vocabulary_parallel(model: nn.Module, tp_mesh) -> None:
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
        # ids arrive whole on every tensor rank; each looks up its rows, the rows are summed. Not torch's
        # RowwiseParallel: its backward forms the whole table's gradient on every rank.
        _shard_parameter(model.embed, "weight", tp_mesh)
        model.embed.forward = functools.partial(_embedding_on_local_rows, model.embed)
    if getattr(model, "head", None) is not None:
        # the loss reads head.weight's local rows itself; a call of the module gathers whole logits
        parallelize_module(model.head, tp_mesh, ColwiseParallel(output_layouts=Replicate()))


def _embedding_on_local_rows(embedding: nn.Embedding, input_ids: torch.Tensor) -> torch.Tensor:
    return vocab_parallel.embedding(input_ids, embedding.weight)


# ---- 3. activation checkpointing ------------------------------------------------------------------


def _checkpointed_forward(module_forward, *args, **kwargs):
    return checkpoint(module_forward, *args, use_reentrant=False, **kwargs)


def apply_activation_checkpointing(model: nn.Module, mode: str | list[str], every: int) -> int:
    """Recompute whole blocks, or chosen parts of every block, in the backward pass instead of keeping
    their activations; returns how many blocks recompute something. Whole blocks: the block's `forward`
    is replaced on the instance so parameter names (and checkpoints) do not change. Parts (a list of
    "attention", "moe", "mhc"): the block checkpoints exactly those calls itself (`Block.recompute`),
    so a part's module runs its forward again, hooks included, in the backward pass."""
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
            block.forward = functools.partial(_checkpointed_forward, block.forward)
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


def _call_with_opaque_context(self, *args, **kwargs):
    args = tuple(
        OpaqueContext(a) if dataclasses.is_dataclass(a) and not isinstance(a, type) else a for a in args
    )
    return nn.Module.__call__(self, *args, **kwargs)


@functools.cache
def _shielded_class(block_class: type) -> type:
    return type(f"ContextShielded{block_class.__name__}", (block_class,), {"__call__": _call_with_opaque_context})


def shield_context(block: nn.Module) -> None:
    """Make `block` wrap dataclass arguments in OpaqueContext before any hook (FSDP's) sees them."""
    if not isinstance(block, OpaqueContext) and "ContextShielded" not in type(block).__name__:
        block.__class__ = _shielded_class(type(block))


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
    if dims.tp > 1:
        apply_tensor_parallel(model, distributed.dense_mesh["tp"])
    if dims.ep > 1 or dims.etp > 1:
        token_split = distributed.dense_mesh["tp"] if dims.experts_split_tokens_over_tp else None
        ep_etp = distributed.expert_mesh["ep", "etp"] if dims.etp > 1 else None
        apply_expert_parallel(model, distributed.expert_mesh["ep"], token_split, ep_etp_mesh=ep_etp)


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
