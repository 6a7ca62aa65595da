"""FSDP reduces gradients once per optimizer step, not once per micro-batch: a real count of FSDP2's
reduce-scatter calls on gloo ranks (one per FSDP unit that got a gradient, per step), and the loss of a
dp_shard 2 run with 4 micro-batches per rank against the one-process run over 10 steps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY_FP32, losses, make_data_folder, run_trex, trex_environment


def _count(data, out: Path, nproc: int, global_batch: int, *settings: str) -> list[list[dict]]:
    out.mkdir()
    worker = Path(__file__).with_name("grad_sync_worker.py")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               str(worker), str(data), str(out), str(global_batch), *settings]
    result = subprocess.run(command, env=trex_environment(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(nproc)]


LAYOUTS = {
    # name: (ranks, settings); every layout shards over 2 data ranks
    "fsdp2": (2, []),
    "fsdp2_ep2": (2, ["ep=2"]),  # the experts: their own units, on one expert-data rank (nothing to reduce)
    "pp2_fsdp2": (4, ["pp=2"]),  # torch's 1F1B defers the sync of an FSDP stage module
    "pp2_fsdp2_interleaved": (4, ["pp=2", "pp_schedule=Interleaved1F1B", "pp_virtual_stages=2"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_one_reduce_scatter_per_unit_per_step(layout, tmp_path):
    data = make_data_folder(tmp_path / "data", "cpt", rows=16, seq_len=32)
    nproc, settings = LAYOUTS[layout]
    for rank, steps in enumerate(_count(data, tmp_path / "counts", nproc, 8, *settings)):
        for step in steps:
            assert step["micro_batches"] == 4 and step["units_with_grad"] > 0
            # once per micro-batch would be 4x this
            assert step["reduce_scatters"] == step["units_with_grad"], (layout, rank, steps)


@pytest.mark.slow
def test_reducing_every_micro_batch_is_still_available(tmp_path):
    """`gradient_sync = "micro_batch"` keeps the old collective count (and so the counter sees real calls)."""
    data = make_data_folder(tmp_path / "data", "cpt", rows=16, seq_len=32)
    step_once, every = (
        _count(data, tmp_path / name, 2, 8, f"gradient_sync={name}") for name in ("step", "micro_batch")
    )
    for ours, theirs in zip(step_once, every, strict=True):
        for a, b in zip(ours, theirs, strict=True):
            assert b["reduce_scatters"] == a["micro_batches"] * a["units_with_grad"]
            assert a["loss"] == pytest.approx(b["loss"], rel=1e-6)


@pytest.mark.slow
def test_accumulating_fsdp_matches_the_single_process_loss(tmp_path):
    data = make_data_folder(tmp_path / "data", "cpt", rows=16, seq_len=32)
    batch = ["--set", "train.cpt.global_batch_size=8"]  # after TINY_FP32's 4: 4 micro-batches per rank
    run_trex("train", "cpt", "--data", str(data), "--run-dir", str(tmp_path / "single"), *TINY_FP32, *batch)
    run_trex("train", "cpt", "--data", str(data), "--run-dir", str(tmp_path / "fsdp2"), "--nproc", "2", *TINY_FP32, *batch)
    reference, parallel = (losses(tmp_path / name / "train" / "cpt") for name in ("single", "fsdp2"))
    assert len(parallel) == len(reference) == 10
    worst = max(abs(a - b) / abs(a) for a, b in zip(reference, parallel, strict=True))
    assert worst < 1e-5, f"worst relative loss difference {worst:.2e}\n{reference}\n{parallel}"
