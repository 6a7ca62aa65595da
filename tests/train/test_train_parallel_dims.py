"""ParallelDims: the layout checks (errors name the fields), the dense and expert grids folded onto the
same ranks as Megatron's expert model parallel, and the replica / shard arithmetic the engine and the
gradient norm use. Pure arithmetic: no process group is started."""

from __future__ import annotations

import pytest

from trex_cli.train.config import ParallelSection
from trex_cli.train.parallel_dims import ParallelDims


def test_dp_shard_takes_the_ranks_left_over():
    dims = ParallelDims.resolve(8, pp=2, tp=2)
    assert (dims.dp_shard, dims.dp, dims.ranks_per_stage, dims.edp) == (2, 2, 4, 4)


def test_expert_parallel_may_span_tensor_ranks():
    # TP2 x DP2 with EP4 on 4 ranks: one expert group of every rank, the tokens split over tp
    dims = ParallelDims.resolve(4, tp=2, ep=4)
    assert (dims.dp, dims.edp, dims.experts_split_tokens_over_tp) == (2, 1, True)
    # rank 1 is dp 0, tp 1 in the dense grid and the second expert slice in the expert grid
    assert dims.dense_coordinates(1) == {"pp": 0, "dp_replicate": 0, "dp_shard": 0, "cp": 0, "tp": 1}
    assert dims.expert_coordinates(1) == {"pp": 0, "edp": 0, "ep": 1, "etp": 0}
    # EP inside the data ranks keeps the tokens of each tensor rank whole only without TP
    assert not ParallelDims.resolve(4, ep=2).experts_split_tokens_over_tp


def test_the_papers_layouts_resolve():
    pro = ParallelDims.resolve(512, pp=8, tp=2, ep=64)  # T-Rex V4-Pro: TP2 PP8 EP64
    assert (pro.dp, pro.ranks_per_stage, pro.edp, pro.dense_shard_group, pro.expert_shard_group) == (32, 64, 1, 32, 1)
    assert pro.data_replicas == 16
    flash = ParallelDims.resolve(128, pp=4, ep=32)  # T-Rex V4-Flash: TP1 PP4 EP32
    assert (flash.dp, flash.edp) == (32, 1)
    # the last rank: the last stage, the last tensor rank, the last expert slice
    assert pro.dense_coordinates(511)["pp"] == 7 and pro.expert_coordinates(511) == {"pp": 7, "edp": 0, "ep": 63, "etp": 0}
    # ranks 64 .. 127 are the second stage in both grids
    assert {pro.dense_coordinates(r)["pp"] for r in range(64, 128)} == {1}
    assert {pro.expert_coordinates(r)["pp"] for r in range(64, 128)} == {1}


def test_layout_errors_name_the_fields_and_the_fix():
    with pytest.raises(ValueError, match=r"ep x etp = 3 x 1 = 3 must divide the ranks of a pipeline stage.*change ep"):
        ParallelDims.resolve(8, tp=2, ep=3)
    with pytest.raises(ValueError, match=r"pp x dp_replicate x cp x tp = 1 x 1 x 3 x 1 = 3 does not divide the 8"):
        ParallelDims.resolve(8, cp=3)
    with pytest.raises(ValueError, match="dp_shard 3 x cp 1 x tp 1 = 3 ranks, but 4 are running"):
        ParallelDims.resolve(4, dp_shard=3)
    with pytest.raises(ValueError, match="etp = 2: expert-tensor parallel is 1 or the tensor-parallel size"):
        ParallelDims.resolve(8, tp=4, ep=2, etp=2)
    with pytest.raises(ValueError, match=r"\[train.parallel\] tp = 0: must be 1 or more"):
        ParallelDims.resolve(8, tp=0)


def test_the_engine_runs_expert_tensor_parallel():
    dims = ParallelDims.from_section(ParallelSection(cp=2, tp=2, etp=2, ep=2), 8)
    assert (dims.cp, dims.etp, dims.edp) == (2, 2, 2)
    dims.check_engine_supports()
    assert not dims.experts_split_tokens_over_tp  # each expert is split over the tensor ranks instead
    ParallelDims.from_section(ParallelSection(cp=2, tp=2, ep=2), 8).check_engine_supports()
    ParallelDims.from_section(ParallelSection(tp=2, ep=4), 4).check_engine_supports()


def test_trex_plan_out_writes_a_train_parallel_table_the_engine_resolves(tmp_path):
    """`trex plan --check ... --out` on the paper's Pro layout: the fragment's [train.parallel] names the
    same layout in the engine's vocabulary, and ParallelDims resolves it on the 512 ranks."""
    from typer.testing import CliRunner

    from trex_cli.app import app
    from trex_cli.recipe import load_recipe

    fragment = tmp_path / "pro.toml"
    result = CliRunner().invoke(app, ["plan", "--flavor", "pro", "--ranks", "512", "--seq", "4096", "--global-batch",
                                      "1024", "--check", "2,8,4,64,1,1", "--out", str(fragment)])
    assert result.exit_code == 0, result.output
    parallel = load_recipe(fragment).section("train").parallel
    assert (parallel.pp_schedule, parallel.pp_virtual_stages, parallel.noop_layer_slots) == ("Interleaved1F1B", 2, [3, 62, 63])
    assert parallel.swap_optimizer  # the paper's layout swaps the optimizer; the engine's swap does the same
    dims = ParallelDims.from_section(parallel, 512)
    assert (dims.tp, dims.pp, dims.ep, dims.dp, dims.edp) == (2, 8, 64, 32, 1)
    dims.check_engine_supports()
