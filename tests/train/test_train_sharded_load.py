"""Sharded load: one rank of a 4-rank layout (TP 2 x FSDP 2, experts EP 4 over all four ranks), built on
the meta device in this process over a fake process group, fills its shards from checkpoint folders in
every layout the adapter reads (official BF16, official FP8/FP4, transformers') by reading only its
slices; each shard must equal that block of the whole checkpoint as `load_state_dict` reads it, and no
expert stack may be read whole; 4 real gloo ranks loading `small` each grow by under 40% of a one-process
load; and the HF export reads a DCP checkpoint one output file at a time."""

from __future__ import annotations

import pytest
import torch
from conftest import fake_rank

from trex_cli.models.deepseek_v4 import state_dict_adapter
from trex_cli.models.deepseek_v4.config import get_flavor
from trex_cli.models.deepseek_v4.initialization import checkpointed_tensors
from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
from trex_cli.train.config import ParallelSection
from trex_cli.train.meta_init import build_rank_model
from trex_cli.train.parallel_dims import ParallelDims
from trex_cli.train.parallelize import apply_fsdp
from trex_cli.train.sharded_load import load_owned_shards, owned_block

EXPORTS = {
    "official_bf16": lambda model, out: state_dict_adapter.export_hf(model, out, max_shard_bytes=1 << 20),
    "official_fp8_fp4": state_dict_adapter.export_official_quantized,
    "transformers": state_dict_adapter.export_transformers_layout,
}


@pytest.mark.parametrize("kind", list(EXPORTS))
def test_a_rank_reads_only_its_blocks(kind, tmp_path):
    torch.manual_seed(0)
    config = get_flavor("tiny")
    folder = EXPORTS[kind](DeepseekV4ForCausalLM(config), tmp_path / kind)
    whole = state_dict_adapter.load_state_dict(folder, config, torch.float32)
    parallel = ParallelSection(tp=2, ep=4)
    dims = ParallelDims.from_section(parallel, 4)
    with fake_rank(3, dims) as distributed:
        model = build_rank_model(config, distributed, parallel)
        apply_fsdp(model, distributed, torch.float32, offload_optimizer=False, expert_parallel=True)
        reader = load_owned_shards(model, folder, torch.device("cpu"))
        checked = 0
        for name, tensor in checkpointed_tensors(model):  # the computed (non-persistent) buffers are no checkpoint's
            local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
            expected = whole[name][owned_block(tensor)]
            assert torch.equal(local, expected.to(local.dtype)), name
            checked += 1
        assert checked == len(whole)
        w1 = model.layers[0].ffn.experts.w1
        assert w1.to_local().shape[0] == config.n_routed_experts // 4  # EP 4 x (FSDP over edp = 1)
        # an expert stack's read: this rank's quarter of the experts (plus FP4's scales), never the stack
        stored_bytes = {"official_fp8_fp4": 0.5 + 1 / 32}.get(kind, 2)
        for name in whole:
            if ".ffn.experts." in name:
                assert reader.bytes_read[name] == pytest.approx(whole[name].numel() * stored_bytes / 4), name


def _load_on(nproc: int, ep: int, folder, out) -> list[dict]:
    import json
    import subprocess
    import sys
    from pathlib import Path

    from conftest import trex_environment

    out.mkdir()
    worker = Path(__file__).with_name("sharded_load_worker.py")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               str(worker), str(folder), str(out), str(ep)]
    result = subprocess.run(command, env=trex_environment(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(nproc)]


@pytest.mark.slow
def test_four_ranks_each_grow_by_under_40_percent_of_a_whole_load(tmp_path):
    """The `small` flavor from an official BF16 checkpoint: one process loading the whole model vs each
    of 4 gloo ranks (FSDP 4, experts EP 4) loading its slices; RSS growth is peak minus before the load."""
    torch.manual_seed(0)
    folder = state_dict_adapter.export_hf(DeepseekV4ForCausalLM(get_flavor("small")), tmp_path / "small")
    whole = _load_on(1, 1, folder, tmp_path / "one")[0]
    ranks = _load_on(4, 4, folder, tmp_path / "four")
    print(f"RSS growth of the load: one process {whole['growth_kib']} KiB, 4 ranks "
          f"{[r['growth_kib'] for r in ranks]} KiB")
    for rank, result in enumerate(ranks):
        assert result["growth_kib"] < 0.4 * whole["growth_kib"], (rank, result, whole)
        assert result["expert_rows"] == result["experts"] // 4  # never a whole expert stack
    assert whole["expert_rows"] == whole["experts"]


def test_the_export_reads_the_training_checkpoint_one_file_at_a_time(tmp_path, monkeypatch):
    """A DCP checkpoint exported file by file: every tensor equals the model's bf16 one, and no read asks
    for more than one output file's tensors."""
    import torch.distributed.checkpoint as dcp

    from trex_cli.train import trainer

    torch.manual_seed(0)
    config = get_flavor("tiny")
    model = DeepseekV4ForCausalLM(config)
    dcp.save({"model": model.state_dict()}, checkpoint_id=str(tmp_path / "dcp"), no_dist=True)
    requested: list[int] = []
    by_shard = state_dict_adapter.export_hf_by_shard

    def small_files(config, specs, read, out_dir, **options):
        def counted(names):
            requested.append(sum(specs[n].numel() for n in names))
            return read(names)

        return by_shard(config, specs, counted, out_dir, **{**options, "max_shard_bytes": 200_000})

    monkeypatch.setattr(state_dict_adapter, "export_hf_by_shard", small_files)
    folder = trainer.export_checkpoint(tmp_path / "dcp", config, tmp_path / "hf", None)
    exported = state_dict_adapter.load_state_dict(folder, config, torch.bfloat16)
    expected = model.state_dict()
    assert sorted(exported) == sorted(expected)
    for name, tensor in exported.items():
        assert torch.equal(tensor, expected[name].to(tensor.dtype)), name
    total = sum(t.numel() for t in expected.values())
    assert len(requested) > 3 and max(requested) < total / 3
