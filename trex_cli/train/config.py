"""The recipe's `[train]` table: optimizer, schedule, losses, parallel layout, checkpoints, metrics.

One table serves both training stages; the few settings that differ between CPT and SFT (data folder,
starting checkpoint, learning-rate schedule, batch, steps) live in the `[train.cpt]` and `[train.sft]`
sub-tables. The defaults follow the T-Rex paper where it states a value (AdamW 0.9/0.999, weight decay
0.01, clipping 1.0, MTP 0.3, sequence balance 1e-3) and fit a laptop CPU elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# `report_to` names -> the package each needs (the extra of the same name installs it)
REPORTERS = {"tensorboard": "tensorboard", "wandb": "wandb"}
# `[train.parallel] activation_checkpoint`: whole-block modes, or a list of these parts of each block
CHECKPOINT_MODES = ("none", "full", "selective")
RECOMPUTE_PARTS = ("attention", "moe", "mhc")


@dataclass
class StageSchedule:
    """What differs between `trex train cpt` and `trex train sft`."""

    data: str = ""  # data folder; default <run_dir>/data/<stage>
    init: str = ""  # HF checkpoint folder to start from; default: random init (cpt), the CPT export (sft)
    lr: float = 3e-4
    min_lr: float = 3e-5  # the cosine decays to this
    warmup_steps: int = 10
    max_steps: int = 100
    global_batch_size: int = 8  # rows per optimizer step, over all data-parallel ranks
    micro_batch_size: int = 2  # rows per forward/backward on one rank


@dataclass
class ParallelSection:
    """The device mesh: world = pp x dp_replicate x dp_shard x cp x tp for attention and the dense
    parts; the routed experts fold onto the same ranks of each pipeline stage as edp x ep x etp, so ep
    may span data and tensor ranks (Megatron's expert model parallel; `parallel_dims.py`)."""

    dp_replicate: int = 1
    dp_shard: int = -1  # -1: every rank left over after pp, cp, tp and dp_replicate
    cp: int = 1  # context parallel: each row's sequence split into cp contiguous chunks
    tp: int = 1
    ep: int = 1
    etp: int = 1  # expert-tensor parallel: 1 or tp
    pp: int = 1
    pp_schedule: Literal["1F1B", "GPipe", "Interleaved1F1B"] = "1F1B"
    # stages per pipeline rank: 1, or >= 2 with "Interleaved1F1B" (T-Rex V4-Pro: 4 layers per virtual stage,
    # 64 slots on PP 8: 2)
    pp_virtual_stages: int = 1
    # layer slots that hold no block, so stages get equal slot counts (T-Rex V4-Pro: [3, 62, 63]);
    # empty: no-op slots are appended at the end when pp does not divide the layer count
    noop_layer_slots: list[int] = field(default_factory=list)
    # recompute in the backward pass instead of keeping activations: "none"; "full" (every block);
    # "selective" (every selective_every-th block); or a list of the parts of every block to recompute,
    # any of "attention", "moe", "mhc" (the hyper-connection mixing around both), e.g. ["attention", "mhc"]
    activation_checkpoint: str | list[str] = "none"
    selective_every: int = 2  # "selective": recompute every n-th layer
    offload_optimizer: bool = False  # keep the sharded fp32 master weights and AdamW states in host memory
    # T-Rex's swap optimizer: AdamW's two fp32 moments live in host memory and stream through two device
    # buffers for a step that runs on the device (`swap_optimizer.py`); the master weights stay on the device
    swap_optimizer: bool = False
    swap_optimizer_buckets: int = 16  # transfers per step; the device holds two buckets of moments at once
    # when FSDP reduce-scatters gradients: "step", once per optimizer step after the last micro-batch
    # (each unit keeps its unsharded fp32 gradient between micro-batches); "micro_batch", after every
    # micro-batch (one collective per micro-batch, but only sharded gradients are kept); pipelined
    # layouts always reduce once per step (each stage after its last micro-batch's backward)
    gradient_sync: Literal["step", "micro_batch"] = "step"
    # Megatron's sequence parallel, with tp > 1 (nothing with tp = 1): between the tensor-parallel regions
    # (attention, the shared expert, the vocab-parallel embedding and head) each tensor rank holds
    # seq_len / tp of every row's tokens (the mHC streams, the norms, the mHC mixing, the router and the
    # routed experts), gathered along the sequence before a region and reduce-scattered after it; the
    # sequence length must then be a multiple of tp x cp (`parallelize.py`). On by default, as the
    # planner's memory model assumes (and `trex plan --out` writes); false runs those parts on every
    # token on every tensor rank
    sequence_parallel: bool = True


    def __post_init__(self) -> None:
        if self.swap_optimizer and self.offload_optimizer:
            raise ValueError(
                "[train.parallel] swap_optimizer and offload_optimizer are both set: offload runs the AdamW step on "
                "the host, swap keeps it on the device with the moments in host memory; choose one"
            )
        if self.swap_optimizer_buckets < 1:
            raise ValueError(f"[train.parallel] swap_optimizer_buckets = {self.swap_optimizer_buckets}: use 1 or more")
        mode = self.activation_checkpoint
        if isinstance(mode, str) and mode in CHECKPOINT_MODES:
            return
        unknown = [part for part in mode if part not in RECOMPUTE_PARTS] if isinstance(mode, list | tuple) else [mode]
        if unknown:
            raise ValueError(
                f"[train.parallel] activation_checkpoint = {mode!r}: use one of "
                f"{', '.join(repr(m) for m in CHECKPOINT_MODES)}, or a list of the block parts to recompute "
                f"from {', '.join(repr(p) for p in RECOMPUTE_PARTS)} (e.g. [\"attention\", \"mhc\"])"
            )
        self.activation_checkpoint = sorted(set(mode), key=RECOMPUTE_PARTS.index)


@dataclass
class TrainSection:
    """The `[train]` table."""

    cpt: StageSchedule = field(default_factory=StageSchedule)
    sft: StageSchedule = field(
        default_factory=lambda: StageSchedule(lr=1e-4, min_lr=1e-5, warmup_steps=5, max_steps=60)
    )
    engine: Literal["native", "mindspeed"] = "native"
    dtype: Literal["bf16", "fp32"] = "bf16"  # compute dtype; master weights and AdamW states stay fp32
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    clip_grad_norm: float = 1.0  # 0 turns clipping off
    mtp_loss_weight: float = 0.3
    balance_loss_weight: float = 1e-3
    indexer_kl_weight: float = 1.0
    expert_bias_update_rate: float = 1e-3  # aux-loss-free balancing; 0 turns the update off
    max_bad_steps: int = 3  # NaN/Inf guard: skip a bad step, stop after this many in a row
    save_every: int = 50  # DCP checkpoint every n steps (and at the end)
    keep_last: int = 2  # checkpoints kept on disk
    log_every: int = 10  # one console line every n steps (and at least every 30 s)
    # where metrics go besides metrics.jsonl: "tensorboard" (<stage>/tensorboard), "wandb" (W&B; set
    # WANDB_MODE=offline to write <stage>/wandb only); the `--report-to` flag sets this list
    report_to: list[str] = field(default_factory=list)
    wandb_project: str = "trex"
    eval_every: int = 50  # validation loss every n steps and at the last; 0: never
    eval_steps: int = 10  # global batches of the validation split per evaluation; 0: the whole split
    seed: int = 0
    # fused-kernel choice for every operator, in TREX_KERNELS syntax ("auto", "cpu", "reference",
    # "triton", "npu", or "cpu,sparse_attention=reference"); empty: the TREX_KERNELS variable, else auto
    kernels: str = ""
    parallel: ParallelSection = field(default_factory=ParallelSection)

    def __post_init__(self) -> None:
        unknown = [name for name in self.report_to if name not in REPORTERS]
        if unknown:
            raise ValueError(f"[train].report_to: {unknown} unknown; use any of {', '.join(REPORTERS)}")
        if self.eval_every < 0 or self.eval_steps < 0:
            raise ValueError("[train] eval_every and eval_steps must be 0 or more (eval_every = 0 turns validation off)")

    def stage(self, name: str) -> StageSchedule:
        if name not in ("cpt", "sft"):
            raise ValueError(f"unknown training stage {name!r}; use cpt or sft")
        return getattr(self, name)
