"""Pipeline parallelism with `torch.distributed.pipelining` (GPipe or 1F1B) and no-op layer padding.

Layer slots: the model's layers are laid out as `num_hidden_layers + len(noop)` slots, where the no-op
slots (T-Rex puts them at 3, 62 and 63 for V4-Pro's 61 layers on PP 8 x VPP 4) hold no block, so
every stage gets the same number of slots when the layer count does not divide. Stage s takes slots
[s * k, (s + 1) * k); without explicit no-op slots they are appended at the end as needed.

Each rank keeps only its stage of the model, under the full model's parameter names (blocks live in
a ModuleDict keyed by their layer index), so checkpoints and the HF export see one model. What
travels between stages is two float tensors per micro-batch: the mHC residual streams and the
embeddings of the next tokens (computed on the first stage, consumed by the MTP block on the last,
so the embedding is never duplicated and its gradient flows back through the pipeline). Token ids,
positions and loss masks are not sent: every stage reads the same micro-batches from the data loader.

Losses: the last stage returns each micro-batch's LM + MTP loss, each scaled by the micro-batch's
share of the global batch's targets. The sequence balance and indexer KL losses arise in every stage's blocks; each stage attaches
its share to its output through `AttachAuxiliaryLoss`, whose backward also back-propagates it.
"""

from __future__ import annotations

import collections
import dataclasses
import functools

import torch
import torch.nn.functional as F
from torch import nn


def stage_layers(num_layers: int, pp: int, noop_slots: list[int]) -> list[list[int]]:
    """Real layer indices of each stage, after padding with no-op slots."""
    noop = sorted(set(noop_slots))
    total = num_layers + len(noop)
    if not noop and total % pp:
        noop = list(range(total, total + (pp - total % pp)))
        total = num_layers + len(noop)
    if total % pp:
        raise ValueError(
            f"[train.parallel] {num_layers} layers + {len(noop)} no-op slots = {total} slots do not split into "
            f"pp = {pp} equal stages; add or remove entries of noop_layer_slots"
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
    expert_load: torch.Tensor | None = None


class StageRunner:
    """This rank's stage: the pruned model, its forward, and the micro-batch queue it reads."""

    def __init__(self, model: nn.Module, stage_index: int, num_stages: int, layers: list[int], train, seq_len: int):
        self.model = model
        self.stage_index, self.num_stages = stage_index, num_stages
        self.is_first, self.is_last = stage_index == 0, stage_index == num_stages - 1
        self.layer_indices = layers
        self.train = train
        config = model.config
        model.layers = nn.ModuleDict({str(i): model.layers[i] for i in layers})
        if not self.is_first:
            del model.embed
        if not self.is_last:
            for name in ("norm", "head", "mtp", "hc_head_fn", "hc_head_base", "hc_head_scale"):
                delattr(model, name)
        # Totals over the whole model, for each stage's share of the mean auxiliary losses.
        mtp_blocks = config.num_nextn_predict_layers
        self.learned_gates_total = config.num_hidden_layers - config.num_hash_layers + mtp_blocks
        all_blocks = list(range(config.num_hidden_layers + mtp_blocks))
        has_entries = seq_len // config.compress_rate_csa > 0
        self.indexer_layers_total = sum(1 for i in all_blocks if config.layer_type(i) == "compressed_sparse_attention") if has_entries else 0
        self.routed_rows = config.num_hidden_layers + mtp_blocks  # rows of the model's expert_load
        self.queue: collections.deque = collections.deque()
        self.shares: collections.deque = collections.deque()
        self.statistics = StageStatistics()
        model.forward = functools.partial(StageRunner.forward, self)

    def blocks(self) -> list[tuple[int, nn.Module]]:
        blocks = [(i, self.model.layers[str(i)]) for i in self.layer_indices]
        if self.is_last:
            blocks += [(self.model.config.num_hidden_layers + j, block) for j, block in enumerate(self.model.mtp)]
        return blocks

    def _auxiliary(self, ctx, batch: int, seq_len: int, mean_share: float) -> torch.Tensor:
        model, train = self.model, self.train
        total = torch.zeros((), device=ctx.position_ids.device)
        learned = sum(1 for scores, _ in ctx.router_stats if scores is not None)
        if learned:
            balance = model._balance_loss(ctx, batch, seq_len) * (learned / self.learned_gates_total)
            self.statistics.balance += float(balance.detach()) * mean_share
            total = total + train.balance_loss_weight * balance
        if ctx.indexer_kl:
            kl = torch.stack(ctx.indexer_kl).sum() / self.indexer_layers_total
            self.statistics.kl += float(kl.detach()) * mean_share
            total = total + train.indexer_kl_weight * kl
        loads = torch.stack([torch.bincount(ids.reshape(-1), minlength=model.config.n_routed_experts) for _, ids in ctx.router_stats])
        rows = torch.zeros(self.routed_rows, model.config.n_routed_experts, device=loads.device)
        for (global_index, _block), load in zip(self.blocks(), loads, strict=True):
            rows[global_index] = load.float()
        self.statistics.expert_load = rows if self.statistics.expert_load is None else self.statistics.expert_load + rows
        return total * mean_share

    def forward(self, *inputs):
        from trex_cli.models.deepseek_v4 import kernels
        from trex_cli.models.deepseek_v4.model import HyperHead

        model = self.model
        batch = self.queue.popleft()
        lm_share, mtp_share, mean_share = self.shares.popleft()
        config = model.config
        ctx = model._context(batch.input_ids, batch.position_ids, training_losses=True)
        if self.is_first:
            embeddings = model.embed(batch.input_ids)
            streams = embeddings.unsqueeze(2).expand(-1, -1, config.hc_mult, -1).contiguous()
            next_embeddings = model.embed(F.pad(batch.input_ids[:, 1:], (0, 1)))
        else:
            streams, next_embeddings = inputs
            next_embeddings = next_embeddings.view_as(next_embeddings)  # an output distinct from the input
        for index in self.layer_indices:
            streams = model.layers[str(index)](streams, ctx)
        if not self.is_last:
            auxiliary = self._auxiliary(ctx, *batch.input_ids.shape, mean_share)
            return AttachAuxiliaryLoss.apply(streams, auxiliary), next_embeddings
        collapsed = HyperHead.collapse(streams, model.hc_head_fn, model.hc_head_base, model.hc_head_scale, config)
        hidden = model.norm(collapsed)
        documents = kernels.document_ids(batch.position_ids)
        lm_loss, _ = model._shifted_loss(hidden, batch.input_ids, batch.loss_mask, documents, shift=1)
        loss = lm_loss * lm_share
        self.statistics.lm += float(lm_loss.detach()) * lm_share
        if len(model.mtp):
            mtp_hidden = model.mtp[0](streams, next_embeddings, ctx)
            mtp_loss, _ = model._shifted_loss(mtp_hidden, batch.input_ids, batch.loss_mask, documents, shift=2)
            self.statistics.mtp += float(mtp_loss.detach()) * mtp_share
            loss = loss + self.train.mtp_loss_weight * mtp_loss * mtp_share
        return loss + self._auxiliary(ctx, *batch.input_ids.shape, mean_share)


@torch.no_grad()
def update_stage_expert_bias(runner: StageRunner, expert_load: torch.Tensor, rate: float) -> None:
    """The model's aux-loss-free rule (`update_expert_bias`) on this stage's gates only: raise the bias
    of experts below the mean load, lower it above."""
    for global_index, block in runner.blocks():
        gate = block.ffn.gate
        if gate.hashed:
            continue
        load = expert_load[global_index].to(gate.bias.device).float()
        gate.bias += rate * torch.sign(load.mean() - load)


def build_pipeline(
    model: nn.Module, distributed, train, seq_len: int, micro_batches: int, micro_batch_size: int, compute_dtype
):
    """Prune `model` to this rank's stage; returns (runner, schedule factory taking the parallelized
    stage model). Stage inputs and outputs are declared up front (static shapes), so the schedule
    never runs a stage on placeholder data to discover them."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    parallel = train.parallel
    pp = distributed.layout.pp
    config = model.config
    stages = stage_layers(config.num_hidden_layers, pp, parallel.noop_layer_slots)
    stage_index = distributed.pp_rank
    runner = StageRunner(model, stage_index, pp, stages[stage_index], train, seq_len)
    meta = torch.device("meta")
    # requires_grad marks what the schedule sends gradients back for
    between = (
        torch.empty(micro_batch_size, seq_len, config.hc_mult, config.hidden_size, dtype=compute_dtype, device=meta, requires_grad=True),
        torch.empty(micro_batch_size, seq_len, config.hidden_size, dtype=compute_dtype, device=meta, requires_grad=True),
    )
    tokens = torch.empty(micro_batch_size, seq_len, dtype=torch.long, device=meta)
    inputs = (tokens,) if runner.is_first else between
    outputs = (torch.empty((), dtype=torch.float32, device=meta),) if runner.is_last else between

    def make_schedule(parallelized: nn.Module):
        stage = PipelineStage(
            parallelized, stage_index, pp, distributed.device, input_args=inputs, output_args=outputs,
            # gradients travel back for both float tensors; token ids have none
            input_grads=(None,) if runner.is_first else between,
            output_grads=(None,) if runner.is_last else between,
            group=distributed.dense_mesh["pp"].get_group(),
        )
        schedule_class = {"1F1B": Schedule1F1B, "GPipe": ScheduleGPipe}[parallel.pp_schedule]
        return schedule_class(stage, micro_batches, loss_fn=lambda output, target: output, scale_grads=False)

    return runner, make_schedule
