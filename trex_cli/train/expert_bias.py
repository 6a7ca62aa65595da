"""Aux-loss-free balancing as an optimizer pre-step hook.

Every learned gate counts the tokens its training forwards route to each expert (`Gate.routed_tokens`,
a non-persistent buffer; recomputation in the backward pass does not count again). Right before the
optimizer steps, `ExpertBiasUpdate` sums those counts over the ranks, raises the routing bias of the
experts below the mean load and lowers it for those above (by `rate`, sign rule; hash layers and gates
that routed nothing are left alone), and resets the counts. With gradient accumulation the counts add up
over the step's micro-batches, so the bias moves once per optimizer step, on the whole global batch's load.
A step the trainer skips (non-finite gradient) never reaches the optimizer: it calls `reset` instead, and
the bias stays. The counts live within one step, so a checkpoint needs nothing of them; the bias is a
persistent buffer of the model and saved with it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn


class ExpertBiasUpdate:
    """The hook (`optimizer.register_step_pre_hook(update)`) for the gates `model` holds.

    `replicas`: how many ranks count the same tokens (tensor-parallel ranks run every token of their
    data rank, unless sequence parallel gives each its own part: `ParallelDims.routing_replicas`); the
    counts are summed over the world and divided by it. A pipeline stage holds only its
    blocks' gates: each row of the summed table is the whole model's block (`routed_gate_rows`), so the
    stages' rows do not mix."""

    def __init__(self, model: nn.Module, rate: float, replicas: int, device: torch.device):
        self.model, self.rate, self.replicas, self.device = model, rate, replicas, device
        config = model.config
        self.rows = config.num_hidden_layers + config.num_nextn_predict_layers
        self.experts = config.n_routed_experts
        self.updates = 0  # optimizer steps that moved the bias (tests)
        self.reset()

    def __call__(self, optimizer, args, kwargs) -> None:
        self.update()

    def register(self, optimizer: torch.optim.Optimizer):
        """Run before every step of `optimizer`; returns the hook's handle."""
        return optimizer.register_step_pre_hook(self)

    @torch.no_grad()
    def reset(self) -> None:
        for _, gate in self.model.routed_gate_rows():
            gate.routed_tokens.zero_()

    @torch.no_grad()
    def expert_load(self) -> torch.Tensor:
        """[rows, E] tokens routed per expert since the last reset, summed over the ranks."""
        load = torch.zeros(self.rows, self.experts, device=self.device)
        for row, gate in self.model.routed_gate_rows():
            load[row] = gate.routed_tokens.to(self.device).float()
        if dist.is_initialized() and dist.get_world_size() > 1:
            dist.all_reduce(load)
        return load / self.replicas

    @torch.no_grad()
    def update(self) -> None:
        if self.rate > 0:
            self.model.update_expert_bias(self.expert_load(), self.rate)
            self.updates += 1
        self.reset()
