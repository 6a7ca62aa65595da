"""AdamW over fp32 master weights, the warmup + cosine schedule, and the global gradient norm.

Master weights: the parameters the optimizer sees are fp32 (FSDP2 shards them and casts a bf16 copy
for each forward and backward through its mixed-precision policy, reducing gradients in fp32), so
AdamW's moments and updates are fp32 whatever the compute dtype.

Parameters are grouped by weight decay (matrices decay; vectors such as norms, biases, sinks and
hyper-connection scales do not) and by the mesh they are sharded on, because the foreach kernels need
every tensor of one call on one mesh (dense parameters live on the dense mesh, routed experts on the
expert mesh).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from trex_cli.console import warn
from trex_cli.train.config import StageSchedule, TrainSection

EXPERT_PARALLEL_ATTRIBUTE = "_trex_expert_parallel_size"  # set by expert_parallel on its parameters


def _mesh_key(parameter: torch.Tensor) -> str:
    if isinstance(parameter, DTensor):
        mesh = parameter.device_mesh
        return f"{mesh.mesh_dim_names}:{mesh.mesh.flatten().tolist()}:{parameter.placements}"
    return "local"


def build_optimizer(model: torch.nn.Module, train: TrainSection, schedule: StageSchedule) -> torch.optim.AdamW:
    groups: dict[tuple[bool, str], list[torch.Tensor]] = {}
    for _name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        decays = parameter.ndim >= 2
        groups.setdefault((decays, _mesh_key(parameter)), []).append(parameter)
    param_groups = [
        {"params": params, "weight_decay": train.weight_decay if decays else 0.0}
        for (decays, _key), params in sorted(groups.items(), key=lambda item: (not item[0][0], item[0][1]))
    ]
    # The fused kernel (one pass over each tensor) where torch has one: 3.7x the foreach version on
    # a CPU step of the `small` flavor; elsewhere (NPU) the foreach kernels.
    device_types = {p.device.type for group in param_groups for p in group["params"]}
    fused = device_types <= {"cpu", "cuda"}
    options = {"lr": schedule.lr, "betas": (train.adam_beta1, train.adam_beta2), "eps": train.adam_eps,
               **({"fused": True} if fused else {"foreach": True})}
    if train.parallel.swap_optimizer:
        from trex_cli.train.swap_optimizer import SwappedAdamW

        if device_types == {"cpu"}:
            warn("[train.parallel] swap_optimizer saves no memory on a CPU (host and device memory are one); the "
                 "step still streams the moments through its two buffers")
        return SwappedAdamW(param_groups, buckets=train.parallel.swap_optimizer_buckets, **options)
    return torch.optim.AdamW(param_groups, **options)


def warmup_cosine(schedule: StageSchedule):
    """LR multiplier for step (0-based): linear warmup to 1, then a cosine down to min_lr / lr at the
    last step."""
    warmup = max(0, schedule.warmup_steps)
    floor = schedule.min_lr / schedule.lr if schedule.lr > 0 else 0.0
    decay_steps = max(1, schedule.max_steps - warmup)

    def multiplier(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / decay_steps)
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return multiplier


def build_scheduler(optimizer: torch.optim.Optimizer, schedule: StageSchedule) -> torch.optim.lr_scheduler.LambdaLR:
    if schedule.lr <= 0:
        raise ValueError(f"[train] lr = {schedule.lr}: the learning rate must be positive")
    if schedule.min_lr > schedule.lr:
        raise ValueError(f"[train] min_lr {schedule.min_lr} is above lr {schedule.lr}; lower min_lr")
    return torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(schedule))


def _distinct_shards(parameter: torch.Tensor) -> int:
    """How many different pieces of this parameter the ranks of one pipeline stage hold together."""
    count = getattr(parameter, EXPERT_PARALLEL_ATTRIBUTE, 1)
    if isinstance(parameter, DTensor):
        mesh = parameter.device_mesh
        for dim, placement in enumerate(parameter.placements):
            # a Shard, or FSDP2's _StridedShard over a dimension TP splits too (a row-split TP weight
            # or vocabulary table under FSDP), which in torch 2.13 is neither a Shard nor is_shard()
            if not (placement.is_replicate() or placement.is_partial()):
                count *= mesh.size(dim)
    return count


def global_grad_norm(parameters: list[torch.Tensor], ranks_per_stage: int) -> torch.Tensor:
    """The L2 norm of the gradient of the whole model, over every rank and pipeline stage.

    Each rank adds its local squares divided by the number of ranks holding the same piece, then
    one all-reduce over the world sums the pieces: correct for any mix of FSDP shards, TP shards,
    expert-parallel slices, replicas and pipeline stages. Each local piece's norm comes from one
    foreach call per kind of piece; the squares are summed in float64.
    """
    groups: dict[tuple, list[torch.Tensor]] = {}
    for parameter in parameters:
        grad = parameter.grad
        if grad is None:
            continue
        local = (grad.to_local() if isinstance(grad, DTensor) else grad).detach()
        copies = ranks_per_stage / _distinct_shards(parameter)
        groups.setdefault((copies, local.device, local.dtype), []).append(local)
    total = torch.zeros((), dtype=torch.float64)
    for (copies, _device, _dtype), grads in groups.items():
        norms = torch.stack(torch._foreach_norm(grads)).double()
        total += norms.square().sum().cpu() / copies
    if dist.is_initialized() and dist.get_world_size() > 1:
        device_total = total.to(parameters[0].device if parameters else "cpu")
        dist.all_reduce(device_total)
        total = device_total.cpu()
    return total.sqrt().float()


@torch.no_grad()
def clip_gradients(parameters: list[torch.Tensor], total_norm: torch.Tensor, max_norm: float) -> None:
    """Scale every gradient by max_norm / total_norm when the norm is above max_norm (one foreach call
    per mesh: a foreach kernel takes tensors of one mesh only)."""
    if max_norm <= 0:
        return
    scale = max_norm / (float(total_norm) + 1e-6)
    if scale >= 1.0:
        return
    groups: dict[tuple, list[torch.Tensor]] = {}
    for parameter in parameters:
        if parameter.grad is not None:
            groups.setdefault((_mesh_key(parameter.grad), parameter.grad.dtype), []).append(parameter.grad)
    for grads in groups.values():
        torch._foreach_mul_(grads, scale)
