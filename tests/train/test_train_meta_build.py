"""The trainer builds no whole model on a rank: it builds on the meta device, shards, then materializes.

- The random init does not depend on the layout: one rank of a 4-rank layout (TP, EP, ETP, pipeline
  stages, FSDP; meshes over a fake process group) initialized in place holds exactly its blocks of the
  one-process model, and never draws a whole routed-expert stack.
- The real trainer (`trex train cpt --init`, torchrun, 4 gloo ranks, FSDP 4 with experts EP 4) starting
  from a `small` checkpoint: each rank's host memory grows by under 40% of what the one-process build
  and load grows by (peak RSS minus RSS before, as the trainer records it under TREX_BUILD_MEMORY_DIR),
  no rank holds or reads a whole expert stack, and both runs train from the same weights (the same
  first loss).
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import fake_rank, losses, make_data_folder, run_trex

from trex_cli.models.deepseek_v4 import initialization, state_dict_adapter
from trex_cli.models.deepseek_v4.config import get_flavor
from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
from trex_cli.train.config import ParallelSection
from trex_cli.train.meta_init import InitialWeights, build_rank_model, materialize
from trex_cli.train.parallel_dims import ParallelDims
from trex_cli.train.parallelize import apply_fsdp

LAYOUTS = {  # 4 ranks each; the rank checked is the last
    "tp2_ep4": ParallelSection(tp=2, ep=4),
    "tp2_ep2_etp2": ParallelSection(tp=2, ep=2, etp=2),
    "pp2_ep2": ParallelSection(pp=2, ep=2),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_rank_initializes_exactly_its_blocks_of_the_one_process_model(layout, monkeypatch):
    config = get_flavor("tiny")
    whole = DeepseekV4ForCausalLM(config)
    whole.reset_parameters(seed=5)
    expected = whole.state_dict()
    parallel = LAYOUTS[layout]
    dims = ParallelDims.from_section(parallel, 4)
    drawn: list[tuple[int, ...]] = []
    randn = torch.randn

    def recording_randn(*args, **kwargs):
        drawn.append(tuple(args[0]) if len(args) == 1 and not isinstance(args[0], int) else tuple(args))
        return randn(*args, **kwargs)

    monkeypatch.setattr(torch, "randn", recording_randn)
    with fake_rank(3, dims) as distributed:
        model = build_rank_model(config, distributed, parallel)
        apply_fsdp(model, distributed, torch.float32, offload_optimizer=False, expert_parallel=True)
        materialize(model, InitialWeights(seed=5), torch.device("cpu"), torch.device("cpu"))
        checked = 0
        for name, tensor in initialization.checkpointed_tensors(model):
            local = initialization.local_tensor(tensor)
            block = initialization.owned_block(tensor)
            assert torch.equal(local, expected[name][block].to(local.dtype)), name
            checked += 1
            if ".ffn.experts." in name:
                assert local.shape[0] < config.n_routed_experts, name  # this rank's experts only
        if parallel.pp > 1:
            assert 0 < checked < len(expected)  # a pipeline rank holds its stage only
        else:
            assert checked == len(expected)
        assert torch.equal(model.inv_freq_main, whole.inv_freq_main)
    stack = (config.moe_intermediate_size, config.hidden_size)
    assert drawn and not any(len(shape) == 3 for shape in drawn)  # experts are drawn one at a time
    assert stack in drawn or stack[::-1] in drawn


def _train(init, data, run_dir, memory_dir, *extra: str) -> dict[int, dict]:
    run_trex(
        "train", "cpt", "--data", str(data), "--run-dir", str(run_dir), "--init", str(init),
        "--max-steps", "1", "--set", 'train.dtype="fp32"', "--set", "train.cpt.global_batch_size=4",
        "--set", "train.cpt.micro_batch_size=1", "--set", "train.eval_every=0", *extra,
        env={"TREX_BUILD_MEMORY_DIR": str(memory_dir)},
    )
    return {int(p.stem[4:]): json.loads(p.read_text()) for p in memory_dir.glob("rank*.json")}


@pytest.mark.slow
def test_four_trainer_ranks_each_build_and_load_under_40_percent_of_one_process(tmp_path):
    torch.manual_seed(0)
    config = get_flavor("small")
    init = state_dict_adapter.export_hf(DeepseekV4ForCausalLM(config), tmp_path / "init")
    data = make_data_folder(tmp_path / "data", "cpt", rows=8, seq_len=32)
    one = _train(init, data, tmp_path / "one", tmp_path / "memory-one")[0]
    ranks = _train(init, data, tmp_path / "four", tmp_path / "memory-four", "--nproc", "4", "--set", "train.parallel.ep=4")
    print(f"RSS growth of build + load: one process {one['growth_kib']} KiB, 4 ranks "
          f"{[ranks[r]['growth_kib'] for r in sorted(ranks)]} KiB")
    assert sorted(ranks) == [0, 1, 2, 3]
    stack_elements = config.n_routed_experts * config.moe_intermediate_size * config.hidden_size
    stack_bytes = stack_elements * 2  # stored in bf16
    assert one["expert_local_elements"] == one["expert_stack_elements"] == stack_elements
    assert one["expert_bytes_read"] == stack_bytes
    for rank, result in ranks.items():
        assert result["growth_kib"] < 0.4 * one["growth_kib"], (rank, result, one)
        assert result["expert_stack_elements"] == stack_elements
        assert result["expert_local_elements"] == stack_elements // 4, (rank, result)  # EP 4: never a whole stack
        assert result["expert_bytes_read"] == stack_bytes // 4, (rank, result)
    # the same starting weights: the first loss (before any update) is the one process's
    first = losses(tmp_path / "one" / "train" / "cpt")[0]
    assert losses(tmp_path / "four" / "train" / "cpt")[0] == pytest.approx(first, rel=1e-5)


def test_the_init_export_is_the_trainers_random_init(tmp_path):
    """`model-init` writes the random init file by file, drawing each tensor by name: what it writes is
    the trainer's own init of that seed (in bf16, as an HF export stores it)."""
    from trex_cli.train.trainer import build_model, export_random_init

    config = get_flavor("tiny")
    parameters = export_random_init(config, 3, tmp_path / "init", None)
    exported = state_dict_adapter.load_state_dict(tmp_path / "init", config, torch.bfloat16)
    expected = build_model(config, None, seed=3).state_dict()
    assert parameters == sum(t.numel() for n, t in expected.items() if "tid2eid" not in n and "gate.bias" not in n)
    assert sorted(exported) == sorted(expected)
    for name, tensor in exported.items():
        assert torch.equal(tensor, expected[name].to(tensor.dtype)), name


def test_a_checkpoint_without_mtp_gets_the_random_mtp_block_and_one_with_extra_tensors_is_refused(tmp_path, capsys):
    from trex_cli.train.trainer import build_model

    config = get_flavor("tiny")
    torch.manual_seed(0)
    source = DeepseekV4ForCausalLM(config)
    folder = state_dict_adapter.export_hf(source, tmp_path / "full")
    tensors = state_dict_adapter.read_tensors(folder)

    def rewrite(name: str, kept: dict) -> object:
        (tmp_path / name).mkdir()
        state_dict_adapter._write_shards(kept, tmp_path / name, 1 << 30)
        (tmp_path / name / "config.json").write_text((folder / "config.json").read_text())
        return tmp_path / name

    no_mtp = rewrite("no_mtp", {k: v for k, v in tensors.items() if not k.startswith("mtp.")})
    model = build_model(config, no_mtp, seed=4)
    assert "has no MTP weights" in capsys.readouterr().err
    fresh = build_model(config, None, seed=4).state_dict()
    stored = state_dict_adapter.load_state_dict(folder, config, torch.float32)
    for name, tensor in model.state_dict().items():
        expected = fresh[name] if name.startswith("mtp.") else stored[name]
        assert torch.equal(tensor, expected.to(tensor.dtype)), name

    extra = rewrite("extra", {**tensors, "layers.9.attn.wq_a.weight": tensors["layers.0.attn.wq_a.weight"].clone()})
    with pytest.raises(ValueError, match="tensors this model does not have, e.g. \\['layers.9.attn.wq_a.weight'\\]"):
        build_model(config, extra, seed=4)
    beyond = rewrite("beyond", {**tensors, "layers.0.ffn.experts.8.w1.weight": tensors["layers.0.ffn.experts.0.w1.weight"].clone()})
    with pytest.raises(ValueError, match="experts.8.w1"):
        build_model(config, beyond, seed=4)


def test_a_dense_tensor_is_drawn_by_runs_of_rows_and_any_block_is_its_slice(monkeypatch):
    """With runs of a few rows, a block (FSDP's rows, TP's columns, an empty shard, the last row) is exactly
    that slice of the whole tensor, and a block of rows draws only the runs it falls in."""
    monkeypatch.setattr(initialization, "ELEMENTS_PER_DRAW", 100)  # 11 rows of 9 values per run
    config = get_flavor("tiny")
    name, shape = "layers.0.attn.wq_a.weight", (37, 9)
    whole = initialization.initial_block(config, name, shape, seed=3)
    assert abs(float(whole.std()) - config.initializer_range) < 0.01
    for block in [(slice(5, 20), slice(2, 7)), (slice(36, 37), slice(0, 9)), (slice(11, 11), slice(0, 9)),
                  (slice(0, 37), slice(4, 5))]:
        assert torch.equal(initialization.initial_block(config, name, shape, seed=3, block=block), whole[block])
    drawn = []
    original = initialization.tensor_generator
    monkeypatch.setattr(initialization, "tensor_generator",
                        lambda seed, key, expert=None: drawn.append(key) or original(seed, key, expert))
    initialization.initial_block(config, name, shape, seed=3, block=(slice(12, 20), slice(0, 9)))
    assert drawn == [f"{name}#rows1"]
