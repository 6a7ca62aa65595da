"""Step time of a layout: compute at a calibrated efficiency, collectives in the alpha-beta model,
the pipeline bubble and send/recv, the expert all-to-all, the optimizer step, and what overlaps.

Compute: the model's training FLOPs (Megatron convention, V4-aware attention, from
`models.deepseek_v4.flops`) plus one more forward of the layers under full recompute, split over
TP x CP and over pipeline stages by the real layers each stage holds (the last stage also runs the
output head and MTP), at `compute_efficiency` x peak.

Communication per micro-batch and layer: with sequence parallel, each block all-gathers and
reduce-scatters its token activations around attention and around the shared expert (four
collectives forward, four backward, four again when the forward is recomputed); context parallel
all-gathers the single shared KV head of the other sequence chunks; each MoE layer dispatches and
combines tokens with two all-to-alls per pass. Per step: the distributed optimizer
reduce-scatters gradients and all-gathers parameters over the (expert-)data-parallel group,
overlapped with backward; pipeline stages exchange the hc_mult residual streams at every virtual
stage boundary. A ring collective over g ranks costs (g - 1) (alpha + bytes / (g bandwidth)); an
all-to-all costs (g - 1) alpha + bytes (g - 1) / (g bandwidth).
"""

from __future__ import annotations

import dataclasses

from trex_cli.plan.clusters import ClusterProfile
from trex_cli.plan.layout import (
    Job,
    PlannedLayout,
    data_parallel,
    expert_data_parallel,
    microbatches,
    real_layer_of_slot,
    stage_slots,
    virtual_chunks,
)
from trex_cli.plan.memory import Precision, stage_parameter_counts

# Fractions of each kind of communication hidden behind compute: gradient reduce-scatter and
# parameter all-gather run during backward/forward (overlap-grad-reduce / overlap-param-gather);
# the all-to-all dispatcher overlaps with the shared expert and with the other micro-batch's
# compute (moe-alltoall-overlap-comm); pipeline send/recv overlaps with the next micro-batch.
OVERLAP = {"data_parallel": 0.8, "expert_all_to_all": 0.5, "pipeline_p2p": 0.5, "tensor_parallel": 0.0,
           "context_parallel": 0.5, "optimizer_swap": 0.7}
# FLOPs the device runs per model FLOP: full recompute runs each layer's forward once more (4/3);
# selective recompute only the activation functions and norms
RECOMPUTE_FACTOR = {"full": 4.0 / 3.0, "selective": 1.1, "none": 1.0}


def ring_collective_seconds(num_bytes: float, group: int, latency: float, bandwidth: float) -> float:
    """All-gather or reduce-scatter of a `num_bytes` full tensor over a ring of `group` ranks."""
    if group <= 1:
        return 0.0
    return (group - 1) * (latency + num_bytes / (group * bandwidth))


def all_to_all_seconds(bytes_per_rank: float, group: int, latency: float, bandwidth: float) -> float:
    """Each rank sends (group-1)/group of its `bytes_per_rank` to the others."""
    if group <= 1:
        return 0.0
    return (group - 1) * latency + bytes_per_rank * (group - 1) / (group * bandwidth)


@dataclasses.dataclass
class TimeEstimate:
    step: float
    compute: float  # busy compute of the slowest stage over all micro-batches (incl. recompute)
    bubble: float
    tensor_parallel: float
    context_parallel: float
    expert_all_to_all: float
    pipeline_p2p: float
    data_parallel: float
    optimizer: float
    exposed_communication: float
    microbatches: int
    flops_per_token: float  # model FLOPs (Megatron convention, V4 attention)
    model_flops_per_step: float

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def stage_compute_weights(job: Job, layout: PlannedLayout, layer_flops: float, head_flops: float) -> list[float]:
    """FLOPs per token each stage computes (before the TP x CP split)."""
    shape = job.shape
    slot_to_layer = real_layer_of_slot(layout, shape)
    stages = stage_slots(layout, shape)
    weights = []
    for index, chunks in enumerate(stages):
        real = sum(1 for chunk in chunks for slot in chunk if slot in slot_to_layer)
        flops = real * layer_flops
        if index == len(stages) - 1:
            flops += len(shape.mtp_ratios) * layer_flops + (1 + len(shape.mtp_ratios)) * head_flops
        weights.append(flops)
    return weights


def estimate_time(job: Job, layout: PlannedLayout, cluster: ClusterProfile, flops_per_token: float,
                  precision: Precision | None = None, overlap: dict[str, float] | None = None) -> TimeEstimate:
    """Seconds per optimizer step of `layout` for `job`; `flops_per_token` is the model's training
    FLOPs per token (Megatron convention)."""
    shape = job.shape
    precision = precision or Precision()
    overlap = {**OVERLAP, **(overlap or {})}
    tp, pp, cp, ep = layout.tp, layout.pp, layout.cp, layout.ep
    dp = data_parallel(layout, job.world)
    edp = expert_data_parallel(layout, job.world)
    count = microbatches(layout, job)
    chunks = virtual_chunks(layout, shape)
    tokens_per_microbatch = layout.micro_batch * job.seq_len

    # Split the model FLOPs into blocks and output heads (6 x hidden x vocab per token per head).
    head_flops = 6.0 * shape.hidden_size * shape.vocab_size
    blocks = shape.num_layers + len(shape.mtp_ratios)
    layer_flops = max(flops_per_token - (1 + len(shape.mtp_ratios)) * head_flops, 0.0) / blocks
    stage_flops = [w * RECOMPUTE_FACTOR[layout.recompute] for w in stage_compute_weights(job, layout, layer_flops, head_flops)]
    rate = cluster.peak_bf16_tflops * 1e12 * cluster.compute_efficiency
    per_microbatch = [f * tokens_per_microbatch / (tp * cp) / rate for f in stage_flops]
    slowest = max(per_microbatch)
    compute = count * slowest
    bubble = (pp - 1) / chunks * slowest

    # Tensor parallel (sequence parallel) collectives: per block and micro-batch.
    act = precision.activation_bytes
    tp_latency, tp_bandwidth = cluster.link(tp)
    token_bytes = tokens_per_microbatch / cp * shape.hidden_size * act
    passes = 3 if layout.recompute == "full" else 2  # forward, backward, and the recomputed forward
    per_block_tp = 4 * passes * ring_collective_seconds(token_bytes, tp, tp_latency, tp_bandwidth)
    slot_to_layer = real_layer_of_slot(layout, shape)
    stages = stage_slots(layout, shape)
    blocks_on_stage = max(sum(1 for chunk in chunks_ for slot in chunk if slot in slot_to_layer)
                          + (len(shape.mtp_ratios) if index == len(stages) - 1 else 0)
                          for index, chunks_ in enumerate(stages))
    tensor_parallel = count * blocks_on_stage * per_block_tp

    # Context parallel: each block all-gathers the shared KV head (and the indexer's keys on CSA
    # layers) of the other sequence chunks, and reduce-scatters their gradients in backward. Ranks of
    # a CP group sit TP ranks apart.
    cp_latency, cp_bandwidth = cluster.link(cp * tp)
    kv_bytes = tokens_per_microbatch * (shape.head_dim + shape.index_head_dim) * act
    per_block_cp = passes * ring_collective_seconds(kv_bytes, cp, cp_latency, cp_bandwidth)
    context_parallel = count * blocks_on_stage * per_block_cp

    # Expert all-to-all: each rank dispatches its sequence-parallel share of tokens, top-k copies.
    # Ranks are ordered TP fastest, then CP, DP, PP (Megatron); the EP group spans ep x etp ranks.
    ep_latency, ep_bandwidth = cluster.link(ep * layout.etp)
    dispatch_bytes = tokens_per_microbatch / (cp * tp) * shape.experts_per_token * shape.hidden_size * act
    a2a_per_block = 2 * passes * all_to_all_seconds(dispatch_bytes, ep, ep_latency, ep_bandwidth)
    expert_all_to_all = count * blocks_on_stage * a2a_per_block

    # Pipeline: the hc_mult residual streams cross each virtual-stage boundary, forward and backward.
    p2p_bytes = tokens_per_microbatch / cp * shape.hc_mult * shape.hidden_size * act / \
        (tp if layout.sequence_parallel else 1)
    pp_latency, pp_bandwidth = cluster.link(job.world // pp * 2) if pp > 1 else (0.0, 1.0)
    pipeline_p2p = 0.0
    if pp > 1:
        pipeline_p2p = (count * chunks + pp - 1) * 2 * (pp_latency + p2p_bytes / pp_bandwidth)

    # Distributed optimizer: reduce-scatter gradients, all-gather bf16 parameters, per step.
    heaviest = max(stage_parameter_counts(shape, layout), key=lambda c: c.trainable)
    dense = heaviest.tensor_parallel + heaviest.replicated
    dense_group = dp * cp
    dense_latency, dense_bandwidth = cluster.link(job.world // pp)
    expert_latency, expert_bandwidth = cluster.link(job.world // pp)
    data_parallel_time = (
        ring_collective_seconds(dense * precision.grad_bytes, dense_group, dense_latency, dense_bandwidth)
        + ring_collective_seconds(dense * precision.weight_bytes, dense_group, dense_latency, dense_bandwidth)
        + ring_collective_seconds(heaviest.experts * precision.grad_bytes, edp, expert_latency, expert_bandwidth)
        + ring_collective_seconds(heaviest.experts * precision.weight_bytes, edp, expert_latency, expert_bandwidth)
    )

    # Optimizer step: read and write master weights, moments, gradients once (memory bound); with
    # swap, the shard's states also cross the host link both ways.
    local_states = dense / (dense_group if layout.distributed_optimizer else 1) + \
        heaviest.experts / (edp if layout.distributed_optimizer else 1)
    optimizer = local_states * (2 * precision.optimizer_bytes + precision.grad_bytes + precision.weight_bytes) \
        / (cluster.memory_bandwidth_gbps * 1e9)
    if layout.optimizer_swap:
        swap = 2 * local_states * precision.optimizer_bytes / (cluster.host_link_bandwidth_gbps * 1e9)
        optimizer += swap * (1 - overlap["optimizer_swap"])

    exposed = (tensor_parallel * (1 - overlap["tensor_parallel"])
               + context_parallel * (1 - overlap["context_parallel"])
               + expert_all_to_all * (1 - overlap["expert_all_to_all"])
               + pipeline_p2p * (1 - overlap["pipeline_p2p"])
               + data_parallel_time * (1 - overlap["data_parallel"]))
    step = compute + bubble + exposed + optimizer
    tokens = job.global_batch * job.seq_len
    return TimeEstimate(
        step=step, compute=compute, bubble=bubble, tensor_parallel=tensor_parallel, context_parallel=context_parallel,
        expert_all_to_all=expert_all_to_all, pipeline_p2p=pipeline_p2p, data_parallel=data_parallel_time,
        optimizer=optimizer, exposed_communication=exposed, microbatches=count,
        flops_per_token=flops_per_token, model_flops_per_step=flops_per_token * tokens)


def mfu(estimate: TimeEstimate, world: int, cluster: ClusterProfile) -> float:
    """Model FLOPs utilization (Megatron convention, V4 attention, recompute not counted)."""
    return estimate.model_flops_per_step / (estimate.step * world * cluster.peak_bf16_tflops * 1e12)


def hardware_flops_utilization(estimate: TimeEstimate, world: int, cluster: ClusterProfile,
                               recompute: str) -> float:
    """The same with the recomputed forward counted: the count under which T-Rex's Pro step of about
    27 s reads its published 34.22% (`trex plan --validate` compares the conventions)."""
    return mfu(estimate, world, cluster) * RECOMPUTE_FACTOR[recompute]


def calibrate_efficiency(job: Job, layout: PlannedLayout, cluster: ClusterProfile, flops_per_token: float,
                         measured_step_seconds: float) -> float:
    """The compute efficiency at which the model's estimate of `layout` equals a measured step time
    (bisection; communication terms do not depend on it)."""
    low, high = 1e-3, 1.0
    fastest = estimate_time(job, layout, dataclasses.replace(cluster, compute_efficiency=high), flops_per_token)
    if fastest.step > measured_step_seconds:
        raise ValueError(f"the measured step {measured_step_seconds:.2f} s is faster than this cluster model "
                         f"allows even at 100% compute efficiency ({fastest.step:.2f} s): check the profile's "
                         "peak and link figures")
    for _ in range(60):
        middle = (low + high) / 2
        step = estimate_time(job, layout, dataclasses.replace(cluster, compute_efficiency=middle),
                             flops_per_token).step
        low, high = (middle, high) if step > measured_step_seconds else (low, middle)
    return (low + high) / 2
