"""V4-Flash and V4-Pro under the paper's layouts, one rank built on the meta device (no storage) in this
process: the meshes of all 128 / 512 ranks stand over a fake process group (collectives do nothing), the
rank keeps its pipeline stage's blocks, its TP shards and its expert slice exactly as the engine builds
them, and what it holds must be what the planner's memory model (`trex_cli/plan/memory.py`) counts:
parameters per stage, and the parameter, gradient and optimizer bytes of the heaviest stage."""

from __future__ import annotations

import pytest
from conftest import fake_rank

from trex_cli.models.deepseek_v4.config import get_flavor
from trex_cli.plan.clusters import load_cluster
from trex_cli.plan.layout import Job, PlannedLayout, default_noop_layers
from trex_cli.plan.memory import Precision, estimate_memory, stage_parameter_counts
from trex_cli.plan.parameters import ModelShape
from trex_cli.train.config import ParallelSection
from trex_cli.train.meta_init import build_rank_model, local_elements
from trex_cli.train.parallel_dims import ParallelDims

# (flavor, world, tp, pp, ep, layers per virtual stage): T-Rex's Flash and Pro layouts
PAPER_LAYOUTS = {
    "flash": ("flash", 128, 1, 4, 32, 0),
    "pro": ("pro", 512, 2, 8, 64, 4),  # PP8, 4 slots per virtual stage (2 per rank), no-op slots 3, 62, 63
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PAPER_LAYOUTS))
def test_one_rank_of_the_papers_layout_holds_what_the_planner_counts(name):
    flavor, world, tp, pp, ep, vpp_layers = PAPER_LAYOUTS[name]
    config = get_flavor(flavor)
    shape = ModelShape.from_config(config)
    noop = default_noop_layers(config.num_hidden_layers, pp, vpp_layers)
    plan_layout = PlannedLayout(tp=tp, pp=pp, vpp_layers=vpp_layers, ep=ep, noop_layers=noop)
    virtual = (config.num_hidden_layers + len(noop)) // (pp * vpp_layers) if vpp_layers else 1
    parallel = ParallelSection(
        tp=tp, pp=pp, ep=ep, noop_layer_slots=list(noop), pp_virtual_stages=virtual,
        pp_schedule="Interleaved1F1B" if virtual > 1 else "1F1B",
    )
    dims = ParallelDims.from_section(parallel, world)
    precision = Precision.named("fp32_master")
    estimate = estimate_memory(Job(shape, world, seq_len=4096, global_batch=dims.dp * pp), plan_layout,
                               load_cluster("cloudmatrix384"), precision)
    planned_stages = stage_parameter_counts(shape, plan_layout)
    # the last rank of the heaviest stage (its last tensor rank and its last expert slice) for the bytes,
    # and the last ranks of the first and last stages, which hold the vocabulary tables (the embedding,
    # the output head): all split over TP as the planner splits them, nothing to reconcile
    heaviest = estimate.stage
    for stage in sorted({0, heaviest, pp - 1}):
        rank = (stage + 1) * dims.ranks_per_stage - 1
        with fake_rank(rank, dims) as distributed:
            assert distributed.pp_rank == stage and distributed.dense_mesh["tp"].get_local_rank() == tp - 1
            assert distributed.expert_mesh["ep"].get_local_rank() == ep - 1
            model = build_rank_model(config, distributed, parallel)
        assert all(p.is_meta for p in model.parameters())
        held = local_elements(model)
        planned = planned_stages[stage]
        assert held.experts == planned.experts, f"stage {stage}"
        assert held.dense == planned.tensor_parallel + planned.replicated, f"stage {stage}"
        # each tensor rank holds vocab / tp rows of the embedding (first stage) and the head (last stage)
        tables = (["embed"] if stage == 0 else []) + (["head"] if stage == pp - 1 else [])
        for name in tables:
            weight = getattr(model, name).weight
            local = weight.to_local() if tp > 1 else weight
            assert tuple(local.shape) == (config.vocab_size // tp, config.hidden_size), f"{name}: {tuple(local.shape)}"
        # the expert slice: E / ep experts per layer, the TP shards: heads / tp
        first_block = next(iter(model.layers.values()))
        assert first_block.ffn.experts.w1.to_local().shape[0] == config.n_routed_experts // ep
        assert first_block.attn.heads == config.num_attention_heads // tp
        if stage != heaviest:
            continue
        # bytes: fp32 weights and gradients of the TP / EP shards; AdamW's two fp32 moments sharded over
        # the dense (DP x CP) and the expert-data-parallel ranks
        assert held.total * precision.weight_bytes == estimate.weights
        assert held.total * precision.grad_bytes == estimate.gradients
        optimizer = held.dense / dims.dense_shard_group + held.experts / dims.expert_shard_group
        assert optimizer * precision.optimizer_bytes == pytest.approx(estimate.optimizer, rel=1e-12)
