"""The step-time model against published figures: calibrated on one, checked on others.

The timing model has one free knob per device profile, `compute_efficiency`. It is fitted to one
published run, T-Rex's DeepSeek-V4-Pro CPT/SFT layout at about 27 s per step (512 910C ranks, global
batch 1024, sequence 4096), and the fitted model then predicts runs it was not fitted to:

- torchtitan-npu's DeepSeek-V4-Flash on 64 Atlas A3 cards (128 dies), FSDP 128 + EP 128, sequence
  4096: 1,100 tokens/s per device, 28.78% MFU. The planner has no FSDP engine; the nearest layout it
  models is data parallel 128 with the distributed optimizer (sharded states, replicated bf16
  weights), one sequence per rank, full recompute.
- The open-source MindSpeed-LLM recipe on DeepSeek-V4-Pro: 11.67% MFU on the paper's ladder, where
  34.22% is the 27 s run, so its step is 27 x 34.22 / 11.67 s under the same FLOP count. Its layout
  is not published; the paper names MindSpeed-LLM's own V4 example (TP1 PP2 VPP11 EP128) as the likely
  baseline, used here on the same 512 ranks and global batch.

The relative error of each prediction is printed by `trex plan --validate` and `make bench`. Which
FLOP count gives the paper's 34.22% is found the same way: each convention's MFU at 27 s is printed
with the step time at which it would read 34.22%.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trex_cli.plan.clusters import ClusterProfile, load_cluster
from trex_cli.plan.layout import Job, PlannedLayout, default_noop_layers
from trex_cli.plan.mfu import flops_per_token
from trex_cli.plan.parameters import ModelShape
from trex_cli.plan.timing import calibrate_efficiency, estimate_time

TREX_STEP_SECONDS = 27.0
TREX_MFU = 0.3422
OPEN_SOURCE_MFU = 0.1167


@dataclasses.dataclass(frozen=True)
class PublishedRun:
    """One published training run: what ran, and the step time it implies."""

    name: str
    source: str
    flavor: str
    cluster: str
    world: int
    seq_len: int
    global_batch: int
    layout: PlannedLayout
    measured_step_seconds: float
    measured: str  # the figure as published
    assumptions: str


PRO_TREX = PlannedLayout(tp=2, pp=8, vpp_layers=4, ep=64, etp=1, cp=1, micro_batch=1, recompute="full",
                         optimizer_swap=True, noop_layers=(3, 62, 63))
CALIBRATION = PublishedRun(
    name="T-Rex DeepSeek-V4-Pro", source="T-Rex paper (arXiv 2607.20145), MFU ladder and training log",
    flavor="pro", cluster="cloudmatrix384", world=512, seq_len=4096, global_batch=1024, layout=PRO_TREX,
    measured_step_seconds=TREX_STEP_SECONDS, measured="about 27 s per step (34.22% MFU)",
    assumptions="the paper's layout and switches")
HELD_OUT = (
    PublishedRun(
        name="torchtitan-npu DeepSeek-V4-Flash", source="torchtitan-npu, 64 Atlas A3 cards, FSDP128 + EP128, 4K",
        flavor="flash", cluster="cloudmatrix384", world=128, seq_len=4096, global_batch=128,
        layout=PlannedLayout(tp=1, pp=1, ep=128, etp=1, cp=1, micro_batch=1, recompute="full",
                             optimizer_swap=False, sequence_parallel=False),
        measured_step_seconds=128 * 4096 / (1100 * 128), measured="1,100 tokens/s per device (28.78% MFU)",
        assumptions="FSDP modelled as DP128 with the distributed optimizer; one 4K sequence per rank; full "
                    "recompute"),
    PublishedRun(
        name="open-source MindSpeed-LLM recipe, DeepSeek-V4-Pro", source="T-Rex paper, MFU ladder rung 1",
        flavor="pro", cluster="cloudmatrix384", world=512, seq_len=4096, global_batch=1024,
        layout=PlannedLayout(tp=1, pp=2, vpp_layers=11, ep=128, etp=1, cp=1, micro_batch=1, recompute="full",
                             optimizer_swap=True, noop_layers=default_noop_layers(61, 2, 11), sequence_parallel=False),
        measured_step_seconds=TREX_STEP_SECONDS * TREX_MFU / OPEN_SOURCE_MFU,
        measured="11.67% MFU (27 s x 34.22 / 11.67 on the ladder's FLOP count)",
        assumptions="layout of MindSpeed-LLM's V4 example (TP1 PP2 VPP11 EP128) on the paper's 512 ranks"),
)


def _shape_and_flops(run: PublishedRun) -> tuple[Any, ModelShape, float]:
    from trex_cli.models.deepseek_v4.config import get_flavor

    config = get_flavor(run.flavor)
    return config, ModelShape.from_config(config), flops_per_token(config, run.seq_len, "v4")


def job_of(run: PublishedRun) -> Job:
    return Job(shape=_shape_and_flops(run)[1], world=run.world, seq_len=run.seq_len, global_batch=run.global_batch)


def calibrated_cluster(run: PublishedRun = CALIBRATION) -> ClusterProfile:
    """The run's device profile with the compute efficiency that reproduces its step time."""
    cluster = load_cluster(run.cluster)
    _, _, flops = _shape_and_flops(run)
    efficiency = calibrate_efficiency(job_of(run), run.layout, cluster, flops, run.measured_step_seconds)
    return dataclasses.replace(cluster, compute_efficiency=efficiency)


def flop_conventions(config: Any, seq_len: int) -> dict[str, float]:
    """FLOPs per token under the counts one may mean by "MFU": the Megatron model FLOPs with V4's
    sparse or with dense causal attention, and the same plus the forward that full recompute runs
    again (hardware FLOPs, 4/3 of the model FLOPs)."""
    v4 = flops_per_token(config, seq_len, "v4")
    dense = flops_per_token(config, seq_len, "dense")
    return {"Megatron model FLOPs, V4 attention": v4, "Megatron model FLOPs, dense causal attention": dense,
            "V4 attention + recomputed forward (HFU)": v4 * 4 / 3,
            "dense causal attention + recomputed forward (HFU)": dense * 4 / 3}


def trex_mfu_convention() -> list[dict[str, Any]]:
    """Each FLOP convention's MFU for T-Rex's 27 s Pro step, and the step at which it reads 34.22%."""
    from trex_cli.models.deepseek_v4.config import get_flavor

    run = CALIBRATION
    cluster = load_cluster(run.cluster)
    tokens = run.global_batch * run.seq_len
    peak = run.world * cluster.peak_bf16_tflops * 1e12
    rows = []
    for name, per_token in flop_conventions(get_flavor(run.flavor), run.seq_len).items():
        rows.append({"convention": name, "gflop_per_token": per_token / 1e9,
                     "mfu_at_27s": per_token * tokens / (run.measured_step_seconds * peak),
                     "step_for_34_22": per_token * tokens / (TREX_MFU * peak)})
    closest = min(rows, key=lambda row: abs(row["mfu_at_27s"] - TREX_MFU))
    for row in rows:
        row["closest"] = row is closest
    return rows


def validate_against_published() -> dict[str, Any]:
    """Calibrate on T-Rex's Pro step, predict the held-out runs; relative error of each."""
    cluster = calibrated_cluster()
    rows = []
    for role, run in [("calibration", CALIBRATION)] + [("held-out", run) for run in HELD_OUT]:
        config, shape, flops = _shape_and_flops(run)
        job = job_of(run)
        estimate = estimate_time(job, run.layout, cluster, flops)
        tokens_per_device = run.global_batch * run.seq_len / (estimate.step * run.world)
        rows.append({
            "name": run.name, "role": role, "source": run.source, "layout": run.layout.describe(),
            "world": run.world, "global_batch": run.global_batch, "measured": run.measured,
            "measured_step_s": run.measured_step_seconds, "predicted_step_s": estimate.step,
            "predicted_tokens_per_s_per_device": tokens_per_device,
            "error": estimate.step / run.measured_step_seconds - 1.0, "assumptions": run.assumptions,
        })
    return {"cluster": cluster.name, "compute_efficiency": cluster.compute_efficiency,
            "fitted_to": CALIBRATION.name, "runs": rows, "mfu_conventions": trex_mfu_convention()}
