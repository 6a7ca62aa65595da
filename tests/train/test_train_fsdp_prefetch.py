"""Explicit FSDP prefetch (`parallelize.set_prefetch`): on one rank of a 2-rank FSDP x EP 2 layout, built on
the meta device over a fake process group, each block's forward gathers its own routed experts and the next
block, and its backward its experts and the block before; the blocks run in the model's order (the main
layers, then the MTP block)."""

from __future__ import annotations

import pytest
import torch
from conftest import fake_rank

from trex_cli.models.deepseek_v4.config import get_flavor
from trex_cli.train.config import ParallelSection
from trex_cli.train.expert_parallel import blocks_of
from trex_cli.train.meta_init import build_rank_model
from trex_cli.train.parallel_dims import ParallelDims
from trex_cli.train.parallelize import apply_fsdp


def _prefetch_lists(module) -> tuple[list, list]:
    # FSDP2 keeps the lists in its per-module state; there is no public getter
    state = module._get_fsdp_state()
    return list(state._states_to_forward_prefetch), list(state._states_to_backward_prefetch)


@pytest.mark.parametrize("ep", [1, 2])
def test_each_block_prefetches_its_experts_and_its_neighbour(ep):
    config = get_flavor("tiny")
    parallel = ParallelSection(ep=ep)
    dims = ParallelDims.from_section(parallel, 2)
    with fake_rank(1, dims) as distributed:
        model = build_rank_model(config, distributed, parallel)
        apply_fsdp(model, distributed, torch.float32, offload_optimizer=False, expert_parallel=ep > 1)
    blocks = blocks_of(model)
    assert len(blocks) == config.num_hidden_layers + config.num_nextn_predict_layers
    state = {id(block): block._get_fsdp_state() for block in blocks}
    for index, block in enumerate(blocks):
        forward, backward = _prefetch_lists(block)
        experts = [block.ffn.experts._get_fsdp_state()] if ep > 1 else []
        assert forward == experts + ([state[id(blocks[index + 1])]] if index + 1 < len(blocks) else [])
        assert backward == experts + ([state[id(blocks[index - 1])]] if index > 0 else [])
