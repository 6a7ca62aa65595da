"""One rank's part of the model, built on the meta device, then given storage and its first weights.

The trainer never builds the whole model on a rank (a full fp32 V4-Flash is about 1.1 TB): every rank
builds it on the meta device (`meta_model`), cuts its pipeline stages, applies TP / EP / ETP,
activation checkpointing and FSDP2 (`Engine`: the same code and order as for a built model), and only
then `materialize`s: storage on the device for its own shards alone, filled either from an HF
checkpoint by reading only the owned slices (`sharded_load.py`) or with the random init, which draws
each tensor from (seed, name) and each routed expert from (seed, name, expert) so that every layout,
the one-process run included, starts from the same weights (`models/deepseek_v4/initialization.py`).

`build_rank_model` does the cut and the TP / EP sharding alone (FSDP left to the caller): it lets a
test check a 512-rank layout's arithmetic in one process (the meshes over a fake process group),
against the planner's memory model. The pieces are the engine's own: `pipeline_parallel.stage_layers`
and `prune_to_stages` choose and keep the stage, `parallelize.apply_model_parallel` shards.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from trex_cli.models.deepseek_v4.config import DeepseekV4Config
from trex_cli.models.deepseek_v4.initialization import initialize
from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
from trex_cli.train.config import ParallelSection
from trex_cli.train.distributed import Distributed
from trex_cli.train.parallelize import apply_model_parallel
from trex_cli.train.pipeline_parallel import prune_to_stages, stage_layers


def rank_layers(config: DeepseekV4Config, parallel: ParallelSection, pp: int, pp_rank: int) -> list[int]:
    """The real layer indices a pipeline rank holds, over all its virtual stages, in execution order."""
    virtual = parallel.pp_virtual_stages
    stages = stage_layers(config.num_hidden_layers, pp * virtual, parallel.noop_layer_slots)
    return [layer for chunk in range(virtual) for layer in stages[pp_rank + chunk * pp]]


def meta_model(config: DeepseekV4Config) -> nn.Module:
    """The whole model on the meta device: shapes and names, no storage and no init."""
    with torch.device("meta"):
        return DeepseekV4ForCausalLM(config)


def build_rank_model(config: DeepseekV4Config, distributed: Distributed, parallel: ParallelSection) -> nn.Module:
    """This rank's stages of the model on the meta device, tensor- and expert-parallel sharded as the
    engine shards them (FSDP, which shards them further over the data ranks, is left to the caller)."""
    dims = distributed.dims
    model = meta_model(config)
    if dims.pp > 1:
        pp_rank = distributed.pp_rank
        prune_to_stages(model, rank_layers(config, parallel, dims.pp, pp_rank), pp_rank == 0, pp_rank == dims.pp - 1)
    apply_model_parallel(model, distributed)
    return model


@dataclasses.dataclass(frozen=True)
class InitialWeights:
    """Where a meta-built model's first weights come from.

    `checkpoint`: an HF checkpoint folder (either layout the adapter reads), each rank reading only its
    slices; None: the random init of `seed` (which also fills a checkpoint's missing MTP block).
    `storage_only`: allocate without filling, for a model whose every checkpointed tensor is loaded
    next anyway (a resume from the trainer's own DCP checkpoint), so no time goes into an init that
    would be overwritten."""

    checkpoint: Path | None = None
    seed: int = 0
    storage_only: bool = False


@torch.no_grad()
def materialize(model: nn.Module, weights: InitialWeights, device: torch.device, buffer_device: torch.device) -> dict[str, int]:
    """Give a meta-device, parallelized `model` storage for this rank's shards on `device` and fill them
    as `weights` says; buffers (which FSDP2 never offloads) go to `buffer_device`. Returns the bytes
    read from the checkpoint per tensor name (empty without one)."""
    from trex_cli.train.sharded_load import load_owned_shards

    bytes_read: dict[str, int] = {}
    if weights.checkpoint is not None and not weights.storage_only:
        bytes_read = load_owned_shards(model, weights.checkpoint, device, weights.seed).bytes_read
    else:
        model.to_empty(device=device)
        if weights.storage_only:
            model.init_computed_buffers()
        else:
            initialize(model, weights.seed)
    if buffer_device != device:
        for module in model.modules():
            for name, buffer in module.named_buffers(recurse=False):
                setattr(module, name, buffer.to(buffer_device))
    return bytes_read


@dataclasses.dataclass(frozen=True)
class LocalElements:
    """Trainable elements one rank holds after TP and EP (before FSDP): dense parts and routed experts."""

    dense: int
    experts: int

    @property
    def total(self) -> int:
        return self.dense + self.experts


def local_elements(model: nn.Module) -> LocalElements:
    """Count the trainable elements this rank holds (a DTensor counts its local shard)."""
    expert_parameters = {id(p) for name, p in model.named_parameters() if ".ffn.experts." in f".{name}"}
    dense = experts = 0
    for parameter in model.parameters():
        if not parameter.requires_grad:
            continue
        count = (parameter.to_local() if isinstance(parameter, DTensor) else parameter).numel()
        if id(parameter) in expert_parameters:
            experts += count
        else:
            dense += count
    return LocalElements(dense, experts)
