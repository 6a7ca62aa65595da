"""The `[mindspeed]` recipe table: everything a SuperPOD launch through MindSpeed-LLM needs.

The nodes, the parallel layout, the engine and host-side switches of T-Rex's launch scripts, the
checkpoints, and one schedule per stage (`[mindspeed.cpt]`, `[mindspeed.sft]`). The model itself
comes from the recipe's `[model]` table.
"""

from __future__ import annotations

import dataclasses
from typing import Literal


@dataclasses.dataclass
class MindSpeedStageSchedule:
    """`[mindspeed.cpt]` / `[mindspeed.sft]`: the schedule and inputs of one MindSpeed-LLM stage."""

    lr: float = 1e-6
    min_lr: float = 0.0
    lr_decay_style: Literal["cosine", "linear", "constant"] = "cosine"
    lr_decay_iters: int = 0  # 0: train_iters
    warmup_iters: int = 0
    train_iters: int = 1000
    global_batch: int = 0  # 0: [mindspeed].global_batch
    seq_len: int = 0  # 0: [mindspeed].seq_len
    fix_router: bool = False  # --fix-router (T-Rex: Pro CPT and SFT, Flash SFT)
    data: str = ""  # trex data folder (data/cpt) or, for SFT, a synth folder; "" = the run's own
    load: str = ""  # Megatron checkpoint to start from; "" = the converted base (CPT) or the CPT output (SFT)
    save_interval: int = 0  # 0 = only at the end


@dataclasses.dataclass
class MindSpeedSection:
    """The `[mindspeed]` table: launch DeepSeek-V4 training through MindSpeed-LLM on a SuperPOD."""

    # where and how
    mindspeed_llm_dir: str = ""  # MindSpeed-LLM source checkout; "" = $MINDSPEED_LLM_DIR
    python: str = "python"
    # T-Rex's image carries a framework patch (G2 attention, fused kernels) whose flags the stock
    # MindSpeed-LLM v26.1.0 rejects; render them only where that image runs
    patched_image: bool = False
    nodes: int = 1
    ranks_per_node: int = 16
    master_addr: str = ""  # node 0's address (torchrun rendezvous); "" = $MASTER_ADDR, else Slurm's first host
    master_port: int = 6000
    # layout (the T-Rex Pro layout: TP2 PP8 VPP 4 layers per virtual stage EP64 ETP1 CP1)
    tp: int = 1
    pp: int = 1
    vpp_layers: int = 0  # layers per virtual pipeline stage; 0 = no interleaving
    ep: int = 1
    etp: int = 1
    cp: int = 1
    cp_algo: str = "ulysses_cp_algo"
    noop_layers: list[int] = dataclasses.field(default_factory=list)
    micro_batch: int = 1
    global_batch: int = 128
    seq_len: int = 4096
    # the longest position the rotary tables are built for (T-Rex: 163840); the V4 config's own
    # 1M context is not what 4K/8K post-training needs to allocate
    max_position_embeddings: int = 163840
    # engine switches (the paper's common switches)
    sequence_parallel: bool = True
    distributed_optimizer: bool = True
    recompute: Literal["full", "selective", "none"] = "full"
    recompute_method: Literal["uniform", "block"] = "uniform"
    recompute_num_layers: int = 1
    swap_optimizer: bool = True
    moe_token_dispatcher: Literal["alltoall", "alltoall_seq", "allgather"] = "alltoall"
    moe_alltoall_overlap_comm: bool = True
    moe_grouped_gemm: bool = True
    # "gemm": MindSpeed's fused weight-gradient accumulation in the grouped GEMM (T-Rex Pro);
    # "off": --no-gradient-accumulation-fusion (T-Rex Flash)
    gradient_accumulation_fusion: Literal["gemm", "off"] = "gemm"
    router_fp32: bool = True
    mtp_loss_scale: float = 0.3
    seq_aux_loss_coeff: float = 1e-3
    indexer_loss_coeff: float = 1.0
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    clip_grad: float = 1.0
    shared_storage: bool = False  # False: --no-shared-storage (each node writes its own checkpoint shards)
    # host-side switches
    cpu_affinity: bool = True  # CPU_AFFINITY_CONF: bind each rank's threads to its NUMA cores
    tcmalloc_path: str = "/usr/lib64/libtcmalloc.so"  # LD_PRELOAD; "" = off
    task_queue_level: int = 2  # TASK_QUEUE_ENABLE
    hccl_alltoall_pipeline: bool = True  # HCCL_ALGO all-to-all pipeline algorithm
    hccl_op_expansion_aiv: bool = True  # HCCL_OP_EXPANSION_MODE=AIV
    hccl_buffer_mb: int = 256  # HCCL_BUFFSIZE
    extra_env: dict[str, str] = dataclasses.field(default_factory=dict)
    extra_args: list[str] = dataclasses.field(default_factory=list)
    # checkpoints and tokenizer
    hf_checkpoint: str = ""  # official (FP8/FP4) or bf16 DeepSeek-V4 folder
    hf_model_type: str = "deepseek4"  # convert_ckpt_v2.py --model-type-hf
    tokenizer: str = ""  # "" = the checkpoint folder
    sft_prompt_type: str = "deepseek4"  # MindSpeed-LLM chat template name for instruction data
    preprocess_workers: int = 16
    cpt: MindSpeedStageSchedule = dataclasses.field(default_factory=MindSpeedStageSchedule)
    sft: MindSpeedStageSchedule = dataclasses.field(default_factory=lambda: MindSpeedStageSchedule(lr=1e-5))
