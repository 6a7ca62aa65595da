"""Recipe tables of the planner (`[plan]`) and of the MindSpeed-LLM engine (`[mindspeed]`).

`[plan]` says what to plan for (cluster, ranks, sequence, global batch) and, optionally, a layout
to check. `[mindspeed]` carries everything the SuperPOD launch needs: the nodes, the layout, the
paper's switches (host side and engine side), the checkpoints, and one schedule per stage
(`[mindspeed.cpt]`, `[mindspeed.sft]`). The model itself comes from the recipe's `[model]` table.
"""

from __future__ import annotations

import dataclasses
from typing import Literal


@dataclasses.dataclass
class PlanSection:
    """The `[plan]` table."""

    cluster: str = "cloudmatrix384"  # built-in profile (cloudmatrix384/910c, h100, h200, cpu) or a profile file
    ranks: int = 0  # world size; 0 = required on the command line
    seq_len: int = 4096
    global_batch: int = 0  # sequences per optimizer step; 0 = required on the command line
    micro_batches: list[int] = dataclasses.field(default_factory=lambda: [1, 2])  # micro-batch sizes to try
    precision: Literal["megatron", "fp32_master", "fp32"] = "megatron"
    top: int = 10  # rows of the ranked table
    check: str = ""  # "TP,PP,VPP,EP,ETP,CP" to evaluate one layout instead of searching
    recompute: Literal["full", "selective", "none"] = "full"  # for `check`
    optimizer_swap: bool = True  # for `check`
    micro_batch: int = 1  # for `check`
    noop_layers: list[int] = dataclasses.field(default_factory=list)  # for `check`; empty = automatic


@dataclasses.dataclass
class StageSchedule:
    """`[mindspeed.cpt]` / `[mindspeed.sft]`: the schedule and inputs of one training stage."""

    lr: float = 1e-6
    min_lr: float = 0.0
    lr_decay_style: Literal["cosine", "linear", "constant"] = "cosine"
    warmup_iters: int = 0
    train_iters: int = 1000
    global_batch: int = 0  # 0: [mindspeed].global_batch
    seq_len: int = 0  # 0: [mindspeed].seq_len
    data: str = ""  # trex data folder (data/cpt) or, for SFT, a synth folder; "" = the run's own
    load: str = ""  # Megatron checkpoint to start from; "" = the converted base (CPT) or the CPT output (SFT)
    save_interval: int = 0  # 0 = only at the end


@dataclasses.dataclass
class MindSpeedSection:
    """The `[mindspeed]` table: launch DeepSeek-V4 training through MindSpeed-LLM on a SuperPOD."""

    # where and how
    mindspeed_llm_dir: str = ""  # MindSpeed-LLM source checkout; "" = $MINDSPEED_LLM_DIR
    python: str = "python"
    nodes: int = 1
    ranks_per_node: int = 16
    master_addr: str = "localhost"  # node 0's address (torchrun rendezvous)
    master_port: int = 6000
    # layout (the T-Rex Pro layout: TP2 PP8 VPP 4 layers per virtual stage EP64 ETP1 CP1)
    tp: int = 1
    pp: int = 1
    vpp_layers: int = 0  # layers per virtual pipeline stage; 0 = no interleaving
    ep: int = 1
    etp: int = 1
    cp: int = 1
    cp_algo: str = "megatron_cp_algo"
    noop_layers: list[int] = dataclasses.field(default_factory=list)
    micro_batch: int = 1
    global_batch: int = 128
    seq_len: int = 4096
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
    router_fp32: bool = True
    mtp_loss_scale: float = 0.3
    seq_aux_loss_coeff: float = 1e-3
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    clip_grad: float = 1.0
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
    sft_prompt_type: str = "deepseek3"  # MindSpeed-LLM chat template name for instruction data
    preprocess_workers: int = 16
    cpt: StageSchedule = dataclasses.field(default_factory=StageSchedule)
    sft: StageSchedule = dataclasses.field(default_factory=lambda: StageSchedule(lr=1e-5))
