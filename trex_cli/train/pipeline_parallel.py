"""Pipeline parallelism with `torch.distributed.pipelining` (GPipe, 1F1B or interleaved 1F1B) and
no-op layer padding.

Layer slots: the model's layers are laid out as `num_hidden_layers + len(noop)` slots, where the no-op
slots (T-Rex puts them at 3, 62 and 63 for V4-Pro's 61 layers on PP 8 x VPP 4) hold no block, so
every stage gets the same number of slots when the layer count does not divide. With pp ranks and v
virtual stages per rank there are pp * v stages; stage s takes slots [s * k, (s + 1) * k); without
explicit no-op slots they are appended at the end as needed. Interleaved (v > 1) places stages round
robin as torch's ScheduleInterleaved1F1B expects: rank r holds stages r, r + pp, r + 2 pp, ...
(so rank 0 holds the embedding and rank pp - 1 the head).

Each rank keeps only its stages of the model, under the full model's parameter names (blocks live in
a ModuleDict keyed by their layer index), so checkpoints and the HF export see one model. A stage is
that model with parts removed, run by its own forward, which skips what the stage lacks (no method is
swapped: `DeepseekV4ForCausalLM.forward`'s `stage_input`, `layers` and `finish`). What
travels between stages is two float tensors per micro-batch: the mHC residual streams and the
embeddings of the next tokens (computed on the first stage, consumed by the MTP block on the last,
so the embedding is never duplicated and its gradient flows back through the pipeline). Token ids,
positions and loss masks are not sent: every stage reads the same micro-batches from the data loader.

Losses (the model's `total_loss`, as without a pipeline): the last stage returns each micro-batch's LM +
MTP loss, each scaled by the micro-batch's share of the global batch's targets. The sequence balance and indexer KL losses arise in every stage's blocks; each stage attaches
its share to its output through `AttachAuxiliaryLoss`, whose backward also back-propagates it.

With context parallel every stage works on its rank's chunk of each row (`sequence`): the tensors
between stages hold the chunk's positions, and the last stage takes the targets from the whole rows.
"""

from __future__ import annotations

import collections
import dataclasses

import torch
from torch import nn


def stage_layers(num_layers: int, pp: int, noop_slots: list[int]) -> list[list[int]]:
    """Real layer indices of each of `pp` stages (pipeline ranks x virtual stages), after padding
    with no-op slots."""
    noop = sorted(set(noop_slots))
    total = num_layers + len(noop)
    if not noop and total % pp:
        noop = list(range(total, total + (pp - total % pp)))
        total = num_layers + len(noop)
    if total % pp:
        raise ValueError(
            f"[train.parallel] {num_layers} layers + {len(noop)} no-op slots = {total} slots do not split into "
            f"{pp} equal stages (pp x pp_virtual_stages); add or remove entries of noop_layer_slots"
        )
    if any(s < 0 or s >= total for s in noop):
        raise ValueError(f"[train.parallel] noop_layer_slots {noop} must lie in 0 .. {total - 1}")
    layer_of_slot: list[int | None] = []
    next_layer = 0
    for slot in range(total):
        if slot in noop:
            layer_of_slot.append(None)
        else:
            layer_of_slot.append(next_layer)
            next_layer += 1
    per_stage = total // pp
    stages = [[i for i in layer_of_slot[s * per_stage : (s + 1) * per_stage] if i is not None] for s in range(pp)]
    if any(not layers for layers in stages[:-1]):
        raise ValueError(f"[train.parallel] a pipeline stage before the last got no layer: {stages}")
    return stages


def prune_to_stages(model: nn.Module, layers: list[int], is_first: bool, is_last: bool) -> None:
    """Keep only a rank's pipeline stages of `model`, in place: the blocks `layers` (in a ModuleDict keyed
    by layer index, so parameter names stay the full model's), the embedding on the first stage, the
    final norm, head, mHC head and MTP blocks on the last."""
    model.layers = nn.ModuleDict({str(i): model.layers[i] for i in layers})
    if not is_first:
        del model.embed
    if not is_last:
        for name in ("norm", "head", "mtp", "hc_head_fn", "hc_head_base", "hc_head_scale"):
            delattr(model, name)


class AttachAuxiliaryLoss(torch.autograd.Function):
    """Identity on `tensor`; in backward, also back-propagates `auxiliary` (a scalar loss) with grad 1."""

    @staticmethod
    def forward(ctx, tensor, auxiliary):
        ctx.auxiliary_shape = auxiliary.shape
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        return grad, torch.ones(ctx.auxiliary_shape, dtype=grad.dtype, device=grad.device)


@dataclasses.dataclass
class StageStatistics:
    """What one optimizer step's micro-batches reported on this stage (detached floats)."""

    lm: float = 0.0
    mtp: float = 0.0
    balance: float = 0.0
    kl: float = 0.0


class StageRunner:
    """This rank's stages: the pruned model, the micro-batch queues its stages read, and `run`, what one
    stage does with one micro-batch: the model's own forward on the stage's blocks.

    One stage per rank (1F1B, GPipe) or several (interleaved): `stages` are their global indices. The
    model keeps the blocks of all of them; `is_first` / `is_last` say whether this rank holds the
    pipeline's first stage (the embedding) / last stage (the head, the MTP block and the LM losses).
    """

    def __init__(
        self, model: nn.Module, stages: list[int], num_stages: int, layers: dict[int, list[int]], train, seq_len: int,
        sequence=None,
    ):
        self.model = model
        self.sequence = sequence  # context parallel: this rank's chunk of every row (model.SequenceShard)
        self.stages, self.num_stages = list(stages), num_stages
        self.stage_index = self.stages[0]
        self.is_first, self.is_last = 0 in self.stages, num_stages - 1 in self.stages
        self.layers_of = {stage: list(layers[stage]) for stage in self.stages}
        self.train = train
        config = model.config
        prune_to_stages(model, [i for stage in self.stages for i in self.layers_of[stage]], self.is_first, self.is_last)
        all_blocks = list(range(config.num_hidden_layers + config.num_nextn_predict_layers))
        has_entries = seq_len // config.compress_rate_csa > 0
        self.indexer_layers_total = sum(1 for i in all_blocks if config.layer_type(i) == "compressed_sparse_attention") if has_entries else 0
        # every stage runs every micro-batch once: a queue of (micro-batch, loss shares) per stage
        self.queues: dict[int, collections.deque] = {stage: collections.deque() for stage in self.stages}
        self.statistics = StageStatistics()

    def push(self, batch, shares: tuple[float, float, float]) -> None:
        """Queue one micro-batch (and its loss shares) for every stage on this rank."""
        for queue in self.queues.values():
            queue.append((batch, shares))

    def blocks(self, stage: int | None = None) -> list[tuple[int, nn.Module]]:
        """(global block index, block) of one stage, or of all this rank's stages; the last stage also
        has the MTP blocks."""
        stages = self.stages if stage is None else [stage]
        blocks = [(i, self.model.layers[str(i)]) for s in stages for i in self.layers_of[s]]
        if self.num_stages - 1 in stages:
            blocks += [(self.model.config.num_hidden_layers + j, block) for j, block in enumerate(self.model.mtp)]
        return blocks

    def run(self, model: nn.Module, stage: int, *inputs):
        """Stage `stage` on its next micro-batch: `model` (the parallelized stage model) runs its own forward
        on the stage's blocks, from the token ids (first stage) or the stage before's (streams,
        next-token embeddings). The last stage returns the micro-batch's loss; the others their outputs,
        with the stage's part of the balance and indexer KL losses attached to the streams, so the
        schedule's backward back-propagates it. Every stage's loss is the model's `total_loss` of its
        parts, scaled by the micro-batch's shares of the global batch."""
        from trex_cli.models.deepseek_v4.model import total_loss

        batch, shares = self.queues[stage].popleft()
        train = self.train
        first, last = stage == 0, stage == self.num_stages - 1
        stage_input = None
        if not first:
            streams, next_embeddings = inputs
            stage_input = (streams, next_embeddings.view_as(next_embeddings))  # an output distinct from the input
        output = model(
            batch.input_ids, batch.position_ids, batch.loss_mask, mtp_loss_weight=train.mtp_loss_weight,
            balance_loss_weight=train.balance_loss_weight, indexer_kl_weight=train.indexer_kl_weight,
            sequence=self.sequence, stage_input=stage_input, layers=self.layers_of[stage], finish=last,
        )
        loss = total_loss(
            output.lm_loss, output.mtp_loss, output.balance_loss, output.indexer_kl_loss,
            mtp_weight=train.mtp_loss_weight, balance_weight=train.balance_loss_weight,
            indexer_kl_weight=train.indexer_kl_weight, shares=shares,
        )
        self._record(output, shares)
        if loss is None:  # a stage without a learned gate or an indexer loss
            loss = torch.zeros((), device=batch.input_ids.device)
        if last:
            return loss
        return AttachAuxiliaryLoss.apply(output.streams, loss), output.next_embeddings

    def _record(self, output, shares: tuple[float, float, float]) -> None:
        lm_share, mtp_share, mean_share = shares
        statistics = self.statistics
        for name, value, share in (
            ("lm", output.lm_loss, lm_share), ("mtp", output.mtp_loss, mtp_share),
            ("balance", output.balance_loss, mean_share), ("kl", output.indexer_kl_loss, mean_share),
        ):
            if value is not None:
                setattr(statistics, name, getattr(statistics, name) + float(value.detach()) * share)


class StageChunk(nn.Module):
    """What one virtual stage's PipelineStage runs (interleaved schedules): `StageRunner.run` of that stage
    with the (parallelized) model.

    It holds no parameters of its own; calling the model itself keeps FSDP2's root hooks in the
    path. The model is kept out of this module's children so its parameters are not listed twice."""

    def __init__(self, model: nn.Module, runner: StageRunner, stage: int):
        super().__init__()
        self.stage, self.runner = stage, runner
        self._model = [model]

    def forward(self, *inputs):
        return self.runner.run(self._model[0], self.stage, *inputs)


def build_pipeline(
    model: nn.Module, distributed, train, seq_len: int, micro_batches: int, micro_batch_size: int, compute_dtype,
    sequence=None,
):
    """Prune `model` to this rank's stages; returns (runner, schedule factory taking the parallelized
    stage model). The trainer passes a meta-device model (pruning needs only names and shapes) and makes
    the schedule once the stages' shards have storage. Stage inputs and outputs are declared up front (static shapes), so the schedule
    never runs a stage on placeholder data to discover them; under context parallel (`sequence`) the
    tensors between stages hold the chunk's positions, and under sequence parallel this tensor rank's part of them."""
    from torch.distributed.pipelining import (
        PipelineStage,
        Schedule1F1B,
        ScheduleGPipe,
        ScheduleInterleaved1F1B,
    )

    parallel = train.parallel
    pp, virtual = distributed.dims.pp, parallel.pp_virtual_stages
    config = model.config
    num_stages = pp * virtual
    layers = dict(enumerate(stage_layers(config.num_hidden_layers, num_stages, parallel.noop_layer_slots)))
    rank = distributed.pp_rank
    runner = StageRunner(model, [rank + i * pp for i in range(virtual)], num_stages, layers, train, seq_len, sequence)
    positions = seq_len if sequence is None else sequence.end - sequence.start
    if distributed.dims.sequence_parallel_on:  # each tensor rank sends its part of the positions
        positions //= distributed.dims.tp
    meta = torch.device("meta")
    # requires_grad marks what the schedule sends gradients back for
    between = (
        torch.empty(micro_batch_size, positions, config.hc_mult, config.hidden_size, dtype=compute_dtype, device=meta, requires_grad=True),
        torch.empty(micro_batch_size, positions, config.hidden_size, dtype=compute_dtype, device=meta, requires_grad=True),
    )
    tokens = torch.empty(micro_batch_size, seq_len, dtype=torch.long, device=meta)
    loss = (torch.empty((), dtype=torch.float32, device=meta),)

    def stage_arguments(stage_index: int) -> dict:
        first, last = stage_index == 0, stage_index == num_stages - 1
        return {
            "num_stages": num_stages, "device": distributed.device,
            "input_args": (tokens,) if first else between, "output_args": loss if last else between,
            # gradients travel back for both float tensors; token ids have none
            "input_grads": (None,) if first else between, "output_grads": (None,) if last else between,
            "group": distributed.dense_mesh["pp"].get_group(),
        }

    class ModelStage(PipelineStage):
        """The one stage of this rank (1F1B, GPipe). Its module is the parallelized model itself, so torch's
        schedule handles its FSDP units (gradient sync deferred to the last micro-batch); a forward is the
        runner's `run`: the model's forward on the micro-batch the stage reads from the runner's queue."""

        def forward_maybe_with_nosync(self, *args, **kwargs):
            if kwargs:
                raise ValueError(f"a pipeline stage takes its micro-batch from the runner, not {sorted(kwargs)}")
            return runner.run(self.submod, self.stage_index, *args)

    class DeferredSyncStage(PipelineStage):
        """A virtual stage whose FSDP units reduce their gradients only in the stage's last backward of
        the step. Its module (a StageChunk) is no FSDP module, so torch's schedule, which defers the
        sync of an FSDP stage module, would let every micro-batch's backward reduce-scatter."""

        def __init__(self, chunk: StageChunk, stage_index: int, units: list, root_units: list):
            super().__init__(chunk, stage_index, **stage_arguments(stage_index))
            self.units, self.root_units = units, root_units

        def backward_maybe_with_nosync(self, backward_type, bwd_kwargs, last_backward=False):
            # the schedule counts this stage's backwards: `last_backward` is its n-th of n
            for unit in self.units:
                unit.set_requires_gradient_sync(last_backward)
            for unit in self.root_units:  # the root's own parameters only: its blocks are other units
                unit.set_requires_gradient_sync(last_backward, recurse=False)
            return super().backward_maybe_with_nosync(backward_type, bwd_kwargs, last_backward)

    def make_schedule(parallelized: nn.Module):
        from torch.distributed.fsdp import FSDPModule

        options = {"loss_fn": lambda output, target: output, "scale_grads": False}
        if parallel.pp_schedule == "Interleaved1F1B":
            # one PipelineStage per virtual stage, each deferring its own blocks' gradient sync; the
            # root unit (embedding on the first stage, head and final norm on the last) follows the
            # stage that uses its parameters
            stages = []
            for stage in runner.stages:
                units = [block for _, block in runner.blocks(stage) if isinstance(block, FSDPModule)]
                owns_root = stage in (0, num_stages - 1) and isinstance(parallelized, FSDPModule)
                chunk = StageChunk(parallelized, runner, stage)
                stages.append(DeferredSyncStage(chunk, stage, units, [parallelized] if owns_root else []))
            return ScheduleInterleaved1F1B(stages, micro_batches, **options)
        schedule_class = {"1F1B": Schedule1F1B, "GPipe": ScheduleGPipe}[parallel.pp_schedule]
        stage = ModelStage(parallelized, runner.stage_index, **stage_arguments(runner.stage_index))
        return schedule_class(stage, micro_batches, **options)

    return runner, make_schedule
