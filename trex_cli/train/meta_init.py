"""One rank's part of the model, built on the meta device: its pipeline stages' blocks, its tensor-parallel
shards and its expert slice, with no storage behind any parameter.

This is the first half of building a model of V4-Flash or V4-Pro size (a full fp32 V4-Flash is about
1.1 TB): shapes and placements are decided without memory, and only then does each rank allocate and
fill its own shards (`sharded_load.py`). It also lets a test check a 512-rank layout's arithmetic in
one process (the meshes over a fake process group), against the planner's memory model.

The pieces are the engine's own: `pipeline_parallel.stage_layers` and `prune_to_stages` choose and
keep the stage, `parallelize.apply_tensor_parallel` and `expert_parallel.apply_expert_parallel` shard.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from trex_cli.models.deepseek_v4.config import DeepseekV4Config
from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
from trex_cli.train.config import ParallelSection
from trex_cli.train.distributed import Distributed
from trex_cli.train.expert_parallel import apply_expert_parallel
from trex_cli.train.parallelize import apply_tensor_parallel
from trex_cli.train.pipeline_parallel import prune_to_stages, stage_layers


def rank_layers(config: DeepseekV4Config, parallel: ParallelSection, pp: int, pp_rank: int) -> list[int]:
    """The real layer indices a pipeline rank holds, over all its virtual stages, in execution order."""
    virtual = parallel.pp_virtual_stages
    stages = stage_layers(config.num_hidden_layers, pp * virtual, parallel.noop_layer_slots)
    return [layer for chunk in range(virtual) for layer in stages[pp_rank + chunk * pp]]


def build_rank_model(config: DeepseekV4Config, distributed: Distributed, parallel: ParallelSection) -> nn.Module:
    """This rank's stages of the model on the meta device, tensor- and expert-parallel sharded as the
    engine shards them (FSDP, which shards them further over the data ranks, is left to the caller)."""
    dims = distributed.dims
    with torch.device("meta"):
        model = DeepseekV4ForCausalLM(config)
    if dims.pp > 1:
        pp_rank = distributed.pp_rank
        prune_to_stages(model, rank_layers(config, parallel, dims.pp, pp_rank), pp_rank == 0, pp_rank == dims.pp - 1)
    if dims.tp > 1:
        apply_tensor_parallel(model, distributed.dense_mesh["tp"])
    if dims.ep > 1:
        token_split = distributed.dense_mesh["tp"] if dims.experts_split_tokens_over_tp else None
        apply_expert_parallel(model, distributed.expert_mesh["ep"], token_split)
    return model


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
