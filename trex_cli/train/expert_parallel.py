"""Expert parallelism: each rank of an `ep` group owns E / ep routed experts; tokens travel to their
experts and back with two all-to-alls of uneven sizes.

`apply_expert_parallel` replaces each MoE layer's `ffn.experts` (stacked weights [E, ...], called as
`experts(tokens, topk_ids, topk_weights)`) with `ExpertParallelExperts`, whose weights are DTensors
sharded on dim 0 over the expert mesh's `ep` dimension. So checkpoints, the full-state-dict export and
the gradient norm see whole [E, ...] tensors while each rank computes only its slice. The routed
computation itself is the model's own experts module, called through `torch.func.functional_call` on
the local slice: one implementation of the expert math (grouped matmul, clamped SwiGLU) for every
layout.

Dispatch, per layer:
1. sort the (token, slot) assignments by expert; count rows per expert;
2. exchange the counts (all-to-all of E integers) so each rank knows what it will receive;
3. all-to-all the token rows (uneven splits, differentiable), while the shared expert runs on the
   local tokens (the overlap T-Rex gets from its all-to-all dispatcher);
4. regroup the received rows by local expert, run the experts, undo the regrouping;
5. all-to-all the results back, weight them by the router and sum the top-k slots per token.

When the expert group spans tensor-parallel ranks (`ParallelDims.experts_split_tokens_over_tp`), the
tensor ranks of a data-parallel rank hold the same tokens: each takes its part of the rows (and of the
router's choices) before step 1 and the layer's output is gathered over the tensor ranks after step 5,
so every token is routed once. The gradients there are those of a replicated activation (the same on
every tensor rank): the gather's backward keeps this rank's rows, the split's gathers the rows back.

Under sequence parallel (`[train.parallel] sequence_parallel`) the tensor ranks hold different tokens
at the MoE layer already, so nothing is split: each routes its own. With expert-tensor parallel too,
each etp rank gathers the etp group's tokens (and router choices) before the dispatch and keeps its own
rows of the summed partial outputs after it (a reduce-scatter; backward the reverse), Megatron's
all-gather / reduce-scatter around the experts. The shared expert runs on the rank's own tokens while
the dispatch is in flight, its own tensor-parallel gather and reduce-scatter included
(`SharedExpertOverlap`), as without sequence parallel.

Expert-tensor parallel (`etp = tp`, Megatron's ETP): the etp group is the tensor group, whose ranks
hold the same tokens. Each expert's w1/w3 are split by rows of the intermediate dim and w2 by its
columns over etp (DTensors on the (ep, etp) mesh, `Shard(0)` then `Shard` of the intermediate dim).
Every etp rank routes all the layer's tokens, dispatching over its own ep group (the ranks with the
same etp index), so each expert sees each token once per etp slice; the clamped SwiGLU is elementwise,
so each slice's w2 gives a partial sum of the output, and an all-reduce over etp adds them. Backward:
the output's gradient is a replicated activation's (identity), and the gradients of the tokens and the
router weights are partial sums over the slices (all-reduced over etp).
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as functional_collectives
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor

from trex_cli.train.optim import EXPERT_PARALLEL_ATTRIBUTE


def _token_key(tokens: torch.Tensor) -> tuple:
    return (tokens.data_ptr(), tuple(tokens.shape), tuple(tokens.stride()), tokens.dtype)


class _TakesEarlyResult:
    """A shared expert whose output may have been computed early (`SharedExpertOverlap`): called on the
    same tokens, it returns that result once, without running again (hooks included); on any other input
    it runs as usual."""

    early_result: tuple[tuple, torch.Tensor] | None = None

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        early, self.early_result = self.early_result, None
        if early is not None and early[0] == _token_key(tokens):
            return early[1]
        return super().__call__(tokens)


@functools.cache
def with_mixin(mixin: type, base: type) -> type:
    """`base` with `mixin`'s methods first, for a module that must compute differently under a parallel
    layout: the module keeps its parameters, buffers, names, hooks and state dict, and its own code runs
    through `super()` (how `fully_shard` turns a module into an FSDPModule)."""
    return type(f"{mixin.__name__.strip('_')}{base.__name__}", (mixin, base), {})


class SharedExpertOverlap:
    """Lets the expert-parallel dispatch compute a layer's shared expert while the token all-to-all is
    in flight. The shared expert becomes a `_TakesEarlyResult` module of its own class (its names, hooks
    and state dict stay as they are; how `fully_shard` turns a module into an FSDPModule); the early call
    runs it whole, hooks included (under sequence parallel: the gather of the tensor ranks' tokens before
    it and the reduce-scatter after `w2`), and when the model then calls it on the same tokens, that
    result is returned."""

    def __init__(self, shared: nn.Module):
        shared.__class__ = with_mixin(_TakesEarlyResult, type(shared))
        self.shared = shared

    def compute_early(self, tokens: torch.Tensor) -> None:
        self.shared.early_result = (_token_key(tokens), super(_TakesEarlyResult, self.shared).__call__(tokens))


def _pad_rows(tensor: torch.Tensor, rows: int) -> torch.Tensor:
    if tensor.shape[0] == rows:
        return tensor.contiguous()
    return torch.cat([tensor, tensor.new_zeros((rows - tensor.shape[0], *tensor.shape[1:]))])


def _gather_rows(part: torch.Tensor, lengths: list[int], group) -> torch.Tensor:
    """Concatenate every tensor rank's rows (uneven counts, so each part travels padded)."""
    longest = max(lengths)
    gathered = torch.empty((len(lengths) * longest, *part.shape[1:]), dtype=part.dtype, device=part.device)
    dist.all_gather_into_tensor(gathered, _pad_rows(part, longest), group=group)
    pieces = gathered.view(len(lengths), longest, *part.shape[1:])
    return torch.cat([pieces[index, :length] for index, length in enumerate(lengths)])


class _SplitOverTensorRanks(torch.autograd.Function):
    """Forward: this tensor rank's rows of a tensor every tensor rank holds whole. Backward: the
    gradient of the whole tensor, gathered from every rank's rows."""

    @staticmethod
    def forward(ctx, tensor, group, rank: int, lengths: list[int]):
        ctx.group, ctx.lengths = group, lengths
        start = sum(lengths[:rank])
        return tensor[start : start + lengths[rank]].clone()

    @staticmethod
    def backward(ctx, grad):
        return _gather_rows(grad, ctx.lengths, ctx.group), None, None, None


class _GatherOverTensorRanks(torch.autograd.Function):
    """Forward: every tensor rank's rows, concatenated. Backward: the gradient arriving is that of a
    replicated activation, whole on every tensor rank; this rank's rows of it are its part's gradient."""

    @staticmethod
    def forward(ctx, part, group, rank: int, lengths: list[int]):
        ctx.rank, ctx.lengths = rank, lengths
        return _gather_rows(part, lengths, group)

    @staticmethod
    def backward(ctx, grad):
        start = sum(ctx.lengths[: ctx.rank])
        return grad[start : start + ctx.lengths[ctx.rank]].contiguous(), None, None, None


class _CopyToExpertTensorRanks(torch.autograd.Function):
    """Forward: the tensor as is (every etp rank holds it whole). Backward: the sum over the etp ranks
    of the partial gradients each slice of the experts gives."""

    @staticmethod
    def forward(ctx, tensor, group):
        ctx.group = group
        return tensor

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class SumOverRanks(torch.autograd.Function):
    """Forward: the sum over `group` of every rank's part. Backward: the identity, for a sum whose result
    every rank then uses alike (so its gradient is the same on every rank and is each part's gradient):
    the etp ranks' partial outputs of an expert slice; under sequence parallel, the TP ranks' parts of
    the balance loss (`parallelize.py`)."""

    @staticmethod
    def forward(ctx, partial, group):
        total = partial.contiguous().clone()
        dist.all_reduce(total, group=group)
        return total

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _gather_equal_rows(part: torch.Tensor, group) -> torch.Tensor:
    whole = part.new_empty((part.shape[0] * dist.get_world_size(group), *part.shape[1:]))
    dist.all_gather_into_tensor(whole, part.contiguous(), group=group)
    return whole


def _reduce_scatter_equal_rows(whole: torch.Tensor, group) -> torch.Tensor:
    part = whole.new_empty((whole.shape[0] // dist.get_world_size(group), *whole.shape[1:]))
    dist.reduce_scatter_tensor(part, whole.contiguous(), op=dist.ReduceOp.SUM, group=group)
    return part


class _GatherFromSequenceRanks(torch.autograd.Function):
    """Sequence parallel under expert-tensor parallel: forward, every etp rank's own rows (equal counts)
    concatenated in rank order; backward, the sum over the etp ranks of the partial gradients each slice
    of the experts gives, this rank's rows of it (a reduce-scatter)."""

    @staticmethod
    def forward(ctx, part, group):
        ctx.group = group
        return _gather_equal_rows(part, group)

    @staticmethod
    def backward(ctx, grad):
        return _reduce_scatter_equal_rows(grad, ctx.group), None


class _ReduceScatterToSequenceRanks(torch.autograd.Function):
    """Sequence parallel under expert-tensor parallel: forward, the sum over the etp ranks of each slice's
    partial output, this rank's rows of it; backward, every rank's rows' gradients gathered (each
    partial output fed every rank's rows)."""

    @staticmethod
    def forward(ctx, partial, group):
        ctx.group = group
        return _reduce_scatter_equal_rows(partial, group)

    @staticmethod
    def backward(ctx, grad):
        return _gather_equal_rows(grad, ctx.group), None


class ExpertParallelExperts(nn.Module):
    """This rank's slice of a layer's routed experts plus the dispatch and combine around them."""

    def __init__(
        self,
        experts: nn.Module,
        ep_mesh: DeviceMesh,
        shared: SharedExpertOverlap | None = None,
        tp_mesh: DeviceMesh | None = None,
        ep_etp_mesh: DeviceMesh | None = None,
        sequence_parallel: bool = False,
    ):
        """`ep_etp_mesh`: the expert mesh's (ep, etp) dimensions, for expert-tensor parallel (the
        weights are then split over etp along the dims the experts module's `tensor_parallel_dims`
        names); None keeps each expert whole. `sequence_parallel`: each tensor (= etp) rank holds its
        own tokens, so under expert-tensor parallel they are gathered over etp first."""
        super().__init__()
        if sequence_parallel and tp_mesh is not None:
            raise ValueError("sequence parallel gives each tensor rank its own tokens: there is nothing to split over tp")
        self.sequence_parallel = sequence_parallel
        stacked = dict(experts.named_parameters(recurse=False))
        if not stacked:
            raise TypeError(f"{type(experts).__name__} holds no stacked expert weights to shard")
        self.num_experts = next(iter(stacked.values())).shape[0]
        self.ep_size = ep_mesh.size()
        if self.num_experts % self.ep_size:
            raise ValueError(
                f"[train.parallel] ep = {self.ep_size} must divide the number of routed experts "
                f"({self.num_experts})"
            )
        self.local_experts = self.num_experts // self.ep_size
        self.ep_mesh = ep_mesh
        self.ep_group = ep_mesh.get_group()
        self.etp_group = None
        split_dims: dict[str, int] = {}
        if ep_etp_mesh is not None and ep_etp_mesh["etp"].size() > 1:
            self.etp_group = ep_etp_mesh["etp"].get_group()
            etp = ep_etp_mesh["etp"].size()
            split_dims = getattr(experts, "tensor_parallel_dims", None) or {}
            if set(split_dims) != set(stacked):
                raise TypeError(
                    f"{type(experts).__name__} must name the dim each of {sorted(stacked)} splits on under "
                    "expert-tensor parallel (its tensor_parallel_dims); set [train.parallel] etp = 1"
                )
        for name, weight in stacked.items():
            if weight.shape[0] != self.num_experts:
                raise TypeError(f"expert weight {name} has leading size {weight.shape[0]}, not {self.num_experts}")
            if name in split_dims:
                if weight.shape[split_dims[name]] % etp:
                    raise ValueError(
                        f"[train.parallel] etp = {etp} must divide the expert width {weight.shape[split_dims[name]]} "
                        f"(moe_intermediate_size) of {name}"
                    )
                placed = distribute_tensor(weight.detach(), ep_etp_mesh, [Shard(0), Shard(split_dims[name])])
            else:
                placed = distribute_tensor(weight.detach(), ep_mesh, [Shard(0)])
            sharded = nn.Parameter(placed, weight.requires_grad)
            setattr(sharded, EXPERT_PARALLEL_ATTRIBUTE, 1)  # the DTensor placement already counts the ep slices
            self.register_parameter(name, sharded)
        # The model's experts module computes on whatever weights functional_call hands it; it stays
        # out of the module tree so its own (full-size) parameters are neither saved nor trained.
        compute = experts.to("meta")
        if hasattr(compute, "num_experts"):  # it groups rows by expert id: only the local ids arrive here
            compute.num_experts = self.local_experts
        self.__dict__["_compute"] = compute
        self.__dict__["_shared"] = shared
        # the tensor ranks whose shared tokens are split before dispatch (None: each rank routes its own)
        self.tp_group = tp_mesh.get_group() if tp_mesh is not None else None
        self.tp_rank = tp_mesh.get_local_rank() if tp_mesh is not None else 0
        self.tp_size = tp_mesh.size() if tp_mesh is not None else 1

    def _local_weights(self) -> dict[str, torch.Tensor]:
        return {
            name: (p.to_local() if isinstance(p, DTensor) else p)
            for name, p in self.named_parameters(recurse=False)
        }

    def forward(self, tokens: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        shared = self.__dict__["_shared"]
        if self.etp_group is not None and self.sequence_parallel:
            # every etp rank runs its slice of the experts on the etp group's tokens (its own and the other
            # tensor ranks'), and keeps its own rows of the summed outputs
            gathered = _GatherFromSequenceRanks.apply(tokens, self.etp_group)
            partial = self._dispatch_compute_combine(
                gathered,
                _gather_equal_rows(topk_ids, self.etp_group),
                _GatherFromSequenceRanks.apply(topk_weights, self.etp_group),
                tokens,  # the shared expert takes this rank's own tokens, not the gathered ones
                shared,
            )
            return _ReduceScatterToSequenceRanks.apply(partial, self.etp_group)
        if self.etp_group is not None:
            partial = self._dispatch_compute_combine(
                _CopyToExpertTensorRanks.apply(tokens, self.etp_group),
                topk_ids,
                _CopyToExpertTensorRanks.apply(topk_weights, self.etp_group),
                tokens,
                shared,
            )
            return SumOverRanks.apply(partial, self.etp_group)
        if self.tp_group is None:
            return self._dispatch_compute_combine(tokens, topk_ids, topk_weights, tokens, shared)
        lengths = [len(part) for part in torch.arange(tokens.shape[0]).tensor_split(self.tp_size)]
        start = sum(lengths[: self.tp_rank])
        split = (self.tp_group, self.tp_rank, lengths)
        routed = self._dispatch_compute_combine(
            _SplitOverTensorRanks.apply(tokens, *split),
            topk_ids[start : start + lengths[self.tp_rank]],
            _SplitOverTensorRanks.apply(topk_weights, *split),
            tokens,
            shared,
        )
        return _GatherOverTensorRanks.apply(routed, *split)

    def _dispatch_compute_combine(
        self,
        tokens: torch.Tensor,
        topk_ids: torch.Tensor,
        topk_weights: torch.Tensor,
        layer_tokens: torch.Tensor,
        shared: SharedExpertOverlap | None,
    ) -> torch.Tensor:
        """Route `tokens` to their experts over the ep group and back; `layer_tokens` are the layer's
        tokens the shared expert runs on while the dispatch is in flight."""
        num_tokens, hidden = tokens.shape
        top_k = topk_ids.shape[1]
        flat_ids = topk_ids.reshape(-1)
        order = torch.argsort(flat_ids, stable=True)
        source_token = order // top_k
        send_rows = tokens[source_token]
        counts = torch.bincount(flat_ids, minlength=self.num_experts).to(torch.long)
        received_counts = torch.empty_like(counts)
        dist.all_to_all_single(received_counts, counts, group=self.ep_group)
        send_splits = counts.view(self.ep_size, self.local_experts).sum(1).tolist()
        received_per_expert = received_counts.view(self.ep_size, self.local_experts)
        receive_splits = received_per_expert.sum(1).tolist()
        received = functional_collectives.all_to_all_single_autograd(
            send_rows, receive_splits, send_splits, self.ep_group
        )
        if shared is not None:  # runs while the dispatch is in flight
            shared.compute_early(layer_tokens)
        # Rows arrive grouped by source rank, then by local expert; the experts want them by expert.
        local_expert = torch.arange(self.local_experts, device=tokens.device).repeat(self.ep_size)
        expert_of_row = torch.repeat_interleave(local_expert, received_per_expert.flatten())
        regroup = torch.argsort(expert_of_row, stable=True)
        grouped_rows = received[regroup]
        ones = torch.ones((grouped_rows.shape[0], 1), dtype=topk_weights.dtype, device=tokens.device)
        expert_out = torch.func.functional_call(
            self.__dict__["_compute"], self._local_weights(), (grouped_rows, expert_of_row[regroup, None], ones)
        )
        restored = torch.empty_like(expert_out)
        restored[regroup] = expert_out
        returned = functional_collectives.all_to_all_single_autograd(
            restored, send_splits, receive_splits, self.ep_group
        )
        weights = topk_weights.reshape(-1)[order].unsqueeze(1).to(returned.dtype)
        combined = torch.zeros((num_tokens, hidden), dtype=returned.dtype, device=tokens.device)
        return combined.index_add(0, source_token, returned * weights).to(tokens.dtype)


def blocks_of(model: nn.Module) -> list[nn.Module]:
    """Every transformer block: the main layers, then the MTP blocks."""
    layers = getattr(model, "layers", [])
    layers = list(layers.values()) if isinstance(layers, nn.ModuleDict) else list(layers)  # pipeline stages: a dict
    return layers + list(getattr(model, "mtp", []))


def apply_expert_parallel(
    model: nn.Module,
    ep_mesh: DeviceMesh,
    tp_mesh: DeviceMesh | None = None,
    overlap_shared: bool = True,
    ep_etp_mesh: DeviceMesh | None = None,
    sequence_parallel: bool = False,
) -> int:
    """Swap every layer's routed experts for the expert-parallel version; returns how many. `tp_mesh`:
    the tensor ranks to split the tokens over before dispatch, when the expert group spans them;
    `ep_etp_mesh`: the (ep, etp) mesh, to split each expert over etp (expert-tensor parallel);
    `sequence_parallel`: each tensor rank already holds its own tokens (gathered over etp under
    expert-tensor parallel)."""
    swapped = 0
    for block in blocks_of(model):
        ffn = getattr(block, "ffn", None)
        experts = getattr(ffn, "experts", None) if ffn is not None else None
        if experts is None:
            continue
        shared = None
        if overlap_shared and isinstance(getattr(ffn, "shared_experts", None), nn.Module):
            shared = SharedExpertOverlap(ffn.shared_experts)
        ffn.experts = ExpertParallelExperts(experts, ep_mesh, shared, tp_mesh, ep_etp_mesh, sequence_parallel)
        swapped += 1
    return swapped
