"""Per-rank memory of a layout: parameters, gradients, optimizer states, activations, buffers.

Parameters, gradients and optimizer states are counted exactly from the model's components
(`parameters.py`) as each parallel dimension splits them: TP splits heads, the shared expert and the
vocabulary; EP (and expert-TP) split the routed experts; the distributed optimizer shards the fp32
master weights and Adam moments over the data-parallel group (DP x CP for dense parameters, the
expert-data-parallel group for experts); optimizer swap keeps them in host memory with a
double buffer on the device.

Activations are the tensors a block saves for its backward pass, counted per token for each layer
type (sliding window, CSA, HCA) and split by sequence parallel (token-sized tensors) or TP
(head-sized tensors). Two kernel sets are modelled: `fused` is the set trex trains with, its CPU
kernels (held within 20% of the tensors autograd saves on the tiny and small flavors, tests/plan)
and the NPU/GPU ones, with hand-written backward passes that keep only their inputs; `eager` is
plain differentiated torch, which also keeps fp32 copies in the mHC mixers and Sinkhorn, the
indexer's fp32 scores and an fp32 expert combine. Both keep only the inputs, output and softmax
statistics of the attention core (flash-style). Full recompute keeps each layer's input
streams and rebuilds one layer at a time in backward; a pipeline stage holds activations for as many
micro-batches as its (interleaved) 1F1B schedule has in flight.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

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
from trex_cli.plan.parameters import (
    CSA,
    HCA,
    WINDOW,
    ComponentCounts,
    ModelShape,
    embedding_counts,
    head_counts,
    layer_counts,
    mtp_counts,
)

GB = 1e9


@dataclasses.dataclass(frozen=True)
class Precision:
    """Bytes per parameter of each training state.

    megatron: bf16 weights, fp32 gradient buffers, fp32 master weights + Adam m and v (12 bytes).
    fp32_master: fp32 weights that are themselves the master copy (bf16 compute by autocast), fp32
    gradients, Adam m and v (8 bytes): trex's native trainer on CPU.
    """

    weight_bytes: int = 2
    grad_bytes: int = 4
    optimizer_bytes: int = 12
    activation_bytes: int = 2

    @classmethod
    def named(cls, name: str) -> Precision:
        if name == "megatron":
            return cls(2, 4, 12, 2)
        if name == "fp32_master":
            return cls(4, 4, 8, 2)
        if name == "fp32":
            return cls(4, 4, 8, 4)
        raise ValueError(f"unknown precision '{name}': use megatron, fp32_master or fp32")


AttentionKernel = Literal["fused", "eager"]


def local_counts(counts: ComponentCounts, layout: PlannedLayout) -> ComponentCounts:
    """What one rank holds of a component under TP (dense) and EP x expert-TP (experts)."""
    return ComponentCounts(
        tensor_parallel=counts.tensor_parallel // layout.tp,
        replicated=counts.replicated,
        experts=counts.experts // (layout.ep * layout.etp),
        buffers=counts.buffers,
    )


def stage_parameter_counts(shape: ModelShape, layout: PlannedLayout) -> list[ComponentCounts]:
    """Per pipeline stage, the parameters one rank of that stage holds."""
    slot_to_layer = real_layer_of_slot(layout, shape)
    result = []
    stages = stage_slots(layout, shape)
    for stage, chunks in enumerate(stages):
        total = ComponentCounts()
        for chunk in chunks:
            for slot in chunk:
                if slot in slot_to_layer:
                    layer = slot_to_layer[slot]
                    block = layer_counts(shape, shape.layer_ratios[layer], layer < shape.num_hash_layers)
                    total = total + local_counts(block, layout)
        if stage == 0:
            total = total + local_counts(embedding_counts(shape), layout)
        if stage == len(stages) - 1:
            total = total + local_counts(head_counts(shape), layout) + local_counts(mtp_counts(shape), layout)
        result.append(total)
    return result


def hyper_connection_elements(shape: ModelShape, kernel: AttentionKernel, sp: int) -> float:
    """Elements one mHC mixer saves per token (fp32 tensors count as two bf16-sized elements)."""
    n, hidden = shape.hc_mult, shape.hidden_size
    if kernel == "eager":
        # the flattened streams in fp32 before and after their RMS normalization (2 x 2 n hidden), the
        # streams themselves (n hidden), the collapsed input (hidden), the mixing logits (fp32), every
        # Sinkhorn iteration's row and column normalization (fp32) and the small pre/post weights
        elements = 5 * n * hidden + hidden
        elements += 2 * n * n * (2 + n) + 2 * shape.sinkhorn_iters * (2 * n * n + 2 * n) + 4 * n
    else:
        # fused mHC kernels keep the streams, their normalized copy and the collapsed input
        elements = 2 * n * hidden + hidden + 2 * n * n * (2 + n)
    return elements / sp


def activation_elements_per_token(shape: ModelShape, kind: str, layout: PlannedLayout, seq_len: int,
                                  kernel: AttentionKernel) -> dict[str, float]:
    """Elements one block saves for backward, per token of the micro-batch (no recompute), by part;
    fp32 tensors count as two bf16-sized elements.

    Token-sized tensors are split by sequence parallel (sp), head-sized ones by TP; the single shared
    KV head, the low-rank query and the indexer are replicated across TP ranks. Both kernels keep
    the attention core's inputs, output and log-sum-exp only (trex's CPU path is chunked, as flash
    attention is); `eager` adds what plain torch keeps around the core: fp32 copies in mHC and
    Sinkhorn, the indexer's fp32 scores over all compressed entries, the fp32 expert combine.
    """
    hidden, tp = shape.hidden_size, layout.tp
    sp = tp if layout.sequence_parallel else 1
    heads = shape.num_heads / tp
    attn_width = shape.num_heads * shape.head_dim / tp
    head_dim, rope = shape.head_dim, shape.rope_head_dim
    seq = seq_len / layout.cp
    ratio = {WINDOW: 0, CSA: shape.csa_ratio, HCA: shape.hca_ratio}[kind]
    parts: dict[str, float] = {"hyper_connections": 2 * hyper_connection_elements(shape, kernel, sp)}
    # norm input (+ fp32 rstd) on the sequence shard; wq_a/wkv read the all-gathered normed input
    attention = (hidden + 2) / sp + hidden
    attention += 2 * shape.q_lora_rank + head_dim  # q_norm input, wq_b input, kv_norm input
    attention += 2 * attn_width  # the query after its per-head rescale and after RoPE
    attention += 2 * 2 * head_dim + head_dim  # the shared kv head: fp32 normed and rotated, bf16 copy
    attention += 3 * rope  # RoPE cos/sin tables (fp32, half width)
    attention += shape.sliding_window / 2  # window mask (bytes)
    attention += attn_width + 2 * 2 * heads  # core output and fp32 log-sum-exp
    attention += attn_width  # inverse-RoPE output feeding wo_a
    attention += shape.o_groups * shape.o_lora_rank / tp  # wo_a output feeding wo_b
    if kind == CSA:
        attention += 4 * min(shape.index_topk, seq / ratio)  # int64 indices of the chosen entries
    if ratio:
        attention += head_dim / ratio  # the compressed entries
    parts["attention"] = attention
    if ratio:
        width = 2 * head_dim if kind == CSA else head_dim
        # kv and gate projections (bf16 and fp32 softmax inputs) and the pooled entries
        parts["compressor"] = 4 * width + 2 * head_dim / ratio
    if kind == CSA:
        index_width = 2 * shape.index_head_dim
        entries = seq / ratio
        indexer = 2 * shape.index_heads * shape.index_head_dim + 2 * shape.index_heads  # fp32 query, weights
        indexer += 4 * index_width + 2 * shape.index_head_dim / ratio  # its compressor
        if kernel == "eager":
            # fp32 ReLU scores over every compressed entry (kept twice) and the causal mask (bytes)
            indexer += 2 * 2 * shape.index_heads * entries + entries / 2
        parts["indexer"] = indexer
    k, inter = shape.experts_per_token, shape.expert_intermediate
    moe = (hidden + 2) / sp + hidden / sp  # ffn_norm input (+ rstd), router input
    moe += shape.num_experts * 2 * 2 / sp  # router scores (fp32)
    moe += k * (hidden + 3 * inter + hidden) / sp  # permuted tokens, w1/w3 outputs, SwiGLU, w2 output
    if kernel == "eager":
        moe += 2 * k * hidden / sp  # the weighted combine of the top-k outputs in fp32
    moe += hidden + 2 * shape.num_shared_experts * inter / tp  # shared expert: gathered input, w1/w3 outputs
    parts["moe"] = moe
    return parts


def head_elements_per_token(shape: ModelShape, layout: PlannedLayout, kernel: AttentionKernel) -> float:
    """What the last stage keeps outside the blocks per token: the final stream collapse, the final
    norm, and per loss head (main and MTP) its fp32 hidden rows and, for MTP, its own collapse and
    input projections. The fused (chunked) linear + cross-entropy keeps no logits."""
    sp = layout.tp if layout.sequence_parallel else 1
    n, hidden = shape.hc_mult, shape.hidden_size
    collapse = (5 * n * hidden if kernel == "eager" else 2 * n * hidden) + hidden
    heads = 1 + len(shape.mtp_ratios)
    elements = collapse + hidden + heads * 2 * hidden
    elements += len(shape.mtp_ratios) * (collapse + 6 * hidden)
    return elements / sp


def layer_activation_bytes(shape: ModelShape, kind: str, layout: PlannedLayout, seq_len: int,
                           kernel: AttentionKernel, precision: Precision) -> float:
    """Bytes one block saves for one micro-batch without recompute."""
    tokens = layout.micro_batch * seq_len / layout.cp
    elements = sum(activation_elements_per_token(shape, kind, layout, seq_len, kernel).values())
    return tokens * elements * precision.activation_bytes


def layer_input_bytes(shape: ModelShape, layout: PlannedLayout, seq_len: int, precision: Precision) -> float:
    """The block input kept under full recompute: the hc_mult residual streams."""
    sp = layout.tp if layout.sequence_parallel else 1
    tokens = layout.micro_batch * seq_len / layout.cp
    return tokens * shape.hc_mult * shape.hidden_size / sp * precision.activation_bytes


def selective_layer_bytes(shape: ModelShape, kind: str, layout: PlannedLayout, seq_len: int, kernel: AttentionKernel,
                          precision: Precision) -> float:
    """Selective recompute (activation functions and the indexer scoring) drops the SwiGLU
    intermediates and the indexer's scores, and rebuilds them in backward."""
    tokens = layout.micro_batch * seq_len / layout.cp
    parts = activation_elements_per_token(shape, kind, layout, seq_len, kernel)
    sp = layout.tp if layout.sequence_parallel else 1
    dropped = shape.experts_per_token * 2 * shape.expert_intermediate / sp
    if kind == CSA and kernel == "eager":
        entries = seq_len / layout.cp / shape.csa_ratio
        dropped += 2 * 2 * shape.index_heads * entries
    kept = sum(parts.values()) - dropped
    return tokens * kept * precision.activation_bytes


def inflight_microbatches(layout: PlannedLayout, job: Job, stage: int) -> float:
    """Micro-batches whose activations a stage holds at the peak of a 1F1B (interleaved) schedule,
    in units of one micro-batch through all of the stage's layers."""
    count = microbatches(layout, job)
    chunks = virtual_chunks(layout, job.shape)
    if chunks == 1:
        return float(min(layout.pp - stage, count))
    # Megatron's interleaved schedule warms up 2 (pp - stage - 1) + (chunks - 1) pp chunk-passes
    warmup = 2 * (layout.pp - stage - 1) + (chunks - 1) * layout.pp + 1
    return min(warmup, count * chunks) / chunks


@dataclasses.dataclass
class MemoryEstimate:
    """Per-rank bytes at the peak of the heaviest pipeline stage (and that stage's index)."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    recompute_workspace: float
    logits: float
    communication_buffers: float
    buffers: float
    host_optimizer_per_node: float
    parameters_on_rank: int
    stages_total: list[float] = dataclasses.field(default_factory=list)

    @property
    def total(self) -> float:
        return (self.weights + self.gradients + self.optimizer + self.activations + self.recompute_workspace
                + self.logits + self.communication_buffers + self.buffers)

    def as_dict(self) -> dict:
        data = {k: v for k, v in dataclasses.asdict(self).items() if k != "stages_total"}
        data["total"] = self.total
        data["stages_total"] = self.stages_total
        return data


def estimate_memory(job: Job, layout: PlannedLayout, cluster: ClusterProfile, precision: Precision | None = None,
                    kernel: AttentionKernel | None = None, fused_loss: bool = True) -> MemoryEstimate:
    """Peak per-rank memory of `layout` for `job` (the heaviest stage)."""
    shape = job.shape
    precision = precision or Precision()
    kernel = kernel or cluster.kernels
    dp = data_parallel(layout, job.world)
    edp = expert_data_parallel(layout, job.world)
    dense_shard = dp * layout.cp if layout.distributed_optimizer else 1
    expert_shard = edp if layout.distributed_optimizer else 1
    slot_to_layer = real_layer_of_slot(layout, shape)
    stages = stage_slots(layout, shape)
    estimates = []
    for stage, counts in enumerate(stage_parameter_counts(shape, layout)):
        trainable = counts.trainable
        weights = trainable * precision.weight_bytes
        gradients = trainable * precision.grad_bytes
        dense = counts.tensor_parallel + counts.replicated
        optimizer_full = (dense / dense_shard + counts.experts / expert_shard) * precision.optimizer_bytes
        layers = [slot_to_layer[s] for chunk in stages[stage] for s in chunk if s in slot_to_layer]
        if layout.optimizer_swap:
            # Host keeps the states; the device streams them layer by layer through a double buffer.
            per_layer = optimizer_full / max(len(layers), 1)
            optimizer = 2 * per_layer
            host = optimizer_full * cluster.ranks_per_node
        else:
            optimizer, host = optimizer_full, 0.0
        inflight = inflight_microbatches(layout, job, stage)
        kinds = [shape.layer_kinds[i] for i in layers]
        if stage == len(stages) - 1:
            kinds += [shape.kind(r) for r in shape.mtp_ratios]
        full = [layer_activation_bytes(shape, kind, layout, job.seq_len, kernel, precision) for kind in kinds]
        if layout.recompute == "full":
            activations = inflight * len(kinds) * layer_input_bytes(shape, layout, job.seq_len, precision)
            workspace = max(full, default=0.0)
        elif layout.recompute == "selective":
            activations = inflight * sum(selective_layer_bytes(shape, kind, layout, job.seq_len, kernel, precision)
                                         for kind in kinds)
            workspace = 0.0
        else:
            activations = inflight * sum(full)
            workspace = 0.0
        tokens = layout.micro_batch * job.seq_len / layout.cp
        logits = 0.0
        if stage == len(stages) - 1:
            heads = 1 + len(shape.mtp_ratios)
            head_side = tokens * head_elements_per_token(shape, layout, kernel) * precision.activation_bytes
            activations += inflight * head_side
            if fused_loss:
                # the chunked linear + cross-entropy keeps a working copy of the head's vocabulary shard
                logits = heads * shape.vocab_size / layout.tp * shape.hidden_size * precision.activation_bytes
            else:
                # fp32 logits of the vocabulary shard and their gradient, per loss head
                logits = heads * tokens * shape.vocab_size / layout.tp * 4 * 2
        groups = [g for g in (layout.tp, layout.cp, dp, layout.ep, edp, layout.pp) if g > 1]
        sp = layout.tp if layout.sequence_parallel else 1
        dispatch = 2 * tokens / sp * shape.experts_per_token * shape.hidden_size * precision.activation_bytes \
            if layout.ep > 1 else 0.0
        communication = len(groups) * cluster.collective_buffer_mb * 1e6 + dispatch
        estimates.append(MemoryEstimate(
            stage=stage, weights=weights, gradients=gradients, optimizer=optimizer, activations=activations,
            recompute_workspace=workspace, logits=logits, communication_buffers=communication,
            buffers=counts.buffers * 4.0, host_optimizer_per_node=host, parameters_on_rank=trainable))
    worst = max(estimates, key=lambda e: e.total)
    worst.stages_total = [e.total for e in estimates]
    worst.host_optimizer_per_node = max(e.host_optimizer_per_node for e in estimates)
    return worst
