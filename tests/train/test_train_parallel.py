"""Parallel correctness on CPU (gloo, fp32): each layout trains the tiny model for 10 steps through the
real command (`trex train cpt --nproc N`, torchrun) and must give the single-process loss at every
step within 1e-5 relative, the same gradient norm, and the same validation loss where the layout computes
one."""

from __future__ import annotations

import json

import pytest
from conftest import TINY_FP32, losses, make_data_folder, run_trex

# tensor-parallel layouts without sequence parallel (on by default): every token on every tensor rank
NO_SP = "train.parallel.sequence_parallel=false"

LAYOUTS = {
    "fsdp2": ("2", []),
    "ep2": ("2", ["train.parallel.ep=2", "train.parallel.dp_replicate=2"]),
    "tp2": ("2", ["train.parallel.tp=2", NO_SP]),
    "pp2": ("2", ["train.parallel.pp=2"]),
    # 2 ranks x 2 virtual stages: layers [0, 1] [2, 3] [4] [] + head and MTP, rank 0 holds stages 0 and 2
    "pp2_interleaved": ("2", ["train.parallel.pp=2", 'train.parallel.pp_schedule="Interleaved1F1B"', "train.parallel.pp_virtual_stages=2"]),
    "pp2_fsdp2": ("4", ["train.parallel.pp=2"]),  # 2 stages, each a 2-way FSDP group
    "fsdp4_ep2": ("4", ["train.parallel.ep=2"]),  # experts: 2-way EP x 2-way FSDP; the rest: 4-way FSDP
    "pp2_tp2": ("4", ["train.parallel.pp=2", "train.parallel.tp=2", NO_SP]),  # each stage 2-way TP
    "pp2_ep2": ("4", ["train.parallel.pp=2", "train.parallel.ep=2"]),  # each stage: experts 2-way EP, the rest 2-way FSDP
    # EP spanning TP x DP (Megatron's expert model parallel): attention 2-way TP x 2-way FSDP, experts 4-way EP
    # over all four ranks, each tensor rank routing its half of the tokens
    "tp2_dp2_ep4": ("4", ["train.parallel.tp=2", "train.parallel.ep=4", NO_SP]),
    # context parallel: each row's 32 positions in two chunks of 16 (the tiny window is 16: rank 1's
    # window reaches into rank 0's chunk); with FSDP the 4 ranks are 2 data x 2 context ranks
    "cp2": ("2", ["train.parallel.cp=2"]),
    "cp2_fsdp2": ("4", ["train.parallel.cp=2"]),
    "pp2_cp2": ("4", ["train.parallel.pp=2", "train.parallel.cp=2"]),  # each stage on 2 context ranks
    # expert-tensor parallel: attention 2-way TP x 2-way FSDP; each routed expert split over the 2 tensor
    # ranks (w1/w3 by rows, w2 by columns), the experts 2-way EP over the data ranks
    "tp2_ep2_etp2": ("4", ["train.parallel.tp=2", "train.parallel.ep=2", "train.parallel.etp=2", NO_SP]),
    # sequence parallel: between attention and the shared expert each tensor rank holds 16 of the 32
    # positions (norms, mHC, router, routed experts, MTP projections), gathered before attention and
    # reduce-scattered after wo_b / the shared expert's w2
    "tp2_sp": ("2", ["train.parallel.tp=2", "train.parallel.sequence_parallel=true"]),
    # ... with the experts 4-way EP over all ranks, each tensor rank routing its own positions
    "tp2_dp2_ep4_sp": ("4", ["train.parallel.tp=2", "train.parallel.ep=4", "train.parallel.sequence_parallel=true"]),
    # ... with pipeline stages passing each tensor rank's part of the streams
    "pp2_tp2_sp": ("4", ["train.parallel.pp=2", "train.parallel.tp=2", "train.parallel.sequence_parallel=true"]),
    # ... with interleaved 1F1B (2 virtual stages per pipeline rank)
    "pp2_interleaved_tp2_sp": ("4", [
        "train.parallel.pp=2", 'train.parallel.pp_schedule="Interleaved1F1B"', "train.parallel.pp_virtual_stages=2",
        "train.parallel.tp=2", "train.parallel.sequence_parallel=true",
    ]),
    # ... with expert-tensor parallel: each expert slice gathers the tensor ranks' positions, reduce-scatters after
    "tp2_ep2_etp2_sp": (
        "4", ["train.parallel.tp=2", "train.parallel.ep=2", "train.parallel.etp=2", "train.parallel.sequence_parallel=true"]
    ),
    # ... with context parallel: each context chunk of 16 positions split 8 / 8 over the tensor ranks
    "cp2_tp2_sp": ("4", ["train.parallel.cp=2", "train.parallel.tp=2", "train.parallel.sequence_parallel=true"]),
    # ... on by default, with attention, MoE and mHC recomputed in the backward pass (the gather before
    # attention and the MoE's hooks run again there)
    "tp2_recompute_sp": ("2", ["train.parallel.tp=2", 'train.parallel.activation_checkpoint=["attention", "moe", "mhc"]']),
    # whole blocks recomputed inside FSDP's units (the block checkpoints itself; FSDP's hooks run once)
    "fsdp2_full_recompute": ("2", ['train.parallel.activation_checkpoint="full"']),
}


@pytest.fixture(scope="module")
def single_process_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("parallel")
    data = make_data_folder(root / "data", "cpt", rows=16, seq_len=32)
    run_trex("train", "cpt", "--data", str(data), "--run-dir", str(root / "single"), *TINY_FP32)
    single = root / "single" / "train" / "cpt"
    return data, losses(single), validation_losses(single), single


def grad_norms(stage_folder) -> list[float]:
    return [json.loads(line)["grad_norm"] for line in (stage_folder / "metrics.jsonl").read_text().splitlines() if line]


def validation_losses(stage_folder) -> list[float]:
    """The validation passes' losses (the last step's: TINY_FP32 trains fewer steps than eval_every)."""
    path = stage_folder / "validation.jsonl"
    return [json.loads(line)["loss"] for line in path.read_text().splitlines() if line] if path.is_file() else []


@pytest.mark.slow
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layout_matches_single_process(layout, single_process_run, tmp_path):
    data, reference, reference_validation, single_folder = single_process_run
    nproc, settings = LAYOUTS[layout]
    overrides = [arg for setting in settings for arg in ("--set", setting)]
    run_dir = tmp_path / layout
    result = run_trex("train", "cpt", "--data", str(data), "--run-dir", str(run_dir), "--nproc", nproc, *TINY_FP32, *overrides)
    if "tp" in layout:  # the layout the engine ran has sequence parallel on, or off, as named
        shown = f"'sequence_parallel': {layout.endswith('_sp')}"
        assert shown in " ".join(result.stdout.split()), f"{layout}: no {shown} in\n{result.stdout[-2000:]}"
    parallel = losses(run_dir / "train" / "cpt")
    assert len(parallel) == len(reference) == 10
    worst = max(abs(a - b) / abs(a) for a, b in zip(reference, parallel, strict=True))
    print(f"{layout}: worst relative loss difference {worst:.2e}")
    assert worst < 1e-5, f"{layout}: worst relative loss difference {worst:.2e}\n{reference}\n{parallel}"
    # the gradient norm (clipping scales by it; AdamW hides a wrong count of shards from the loss) too
    norms, reference_norms = grad_norms(run_dir / "train" / "cpt"), grad_norms(single_folder)
    assert norms == pytest.approx(reference_norms, rel=1e-5), f"{layout}: gradient norms\n{reference_norms}\n{norms}"
    # the validation loss, reduced over the data-parallel ranks, is the single process's too (pipelined
    # layouts do not compute it yet)
    validation = validation_losses(run_dir / "train" / "cpt")
    if "pp" in layout:
        assert validation == []
    else:
        assert len(reference_validation) == 1 and validation == pytest.approx(reference_validation, rel=1e-5)
