"""The MindSpeed-LLM launch files of one stage: per-node training scripts, preprocessing and the two
checkpoint conversions, rendered from the recipe in the vocabulary of the pinned framework.

The training command is what T-Rex's own scripts run: `pretrain_deepseek4.py` for CPT,
`posttrain_gpt.py --finetune --stage sft --is-instruction-dataset --prompt-type deepseek4` for SFT,
the DeepSeek-V4 spec module of MindSpeed-LLM (`deepseek4_spec layer_spec` / `mtp_spec`), V4's
attention as MindSpeed-LLM models it (multi-latent attention with the 512-wide shared KV, the DSA
indexer, mHC, compressed KV with per-slot compress ratios), its MoE (hash layers, sqrt-softplus
router with expert bias) and the paper's layout and switches. Every flag is defined by MindSpeed-LLM
v26.1.0 / MindSpeed 26.1.0_core_r0.12.1 / Megatron core_v0.12.1 (the shipped `catalogue.json`
says so, tests check it); flags that only T-Rex's patched image defines are rendered when
`[mindspeed] patched_image = true`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from pathlib import Path
from typing import Any

from trex_cli.plan.layout import Job, PlannedLayout, slot_count, validate
from trex_cli.plan.parameters import ModelShape
from trex_cli.train.engines.mindspeed.config import MindSpeedSection, MindSpeedStageSchedule

STAGES = ("cpt", "sft")
ENTRY_POINTS = {"cpt": "pretrain_deepseek4.py", "sft": "posttrain_gpt.py"}
REQUIRED_FILES = ("pretrain_deepseek4.py", "posttrain_gpt.py", "preprocess_data.py", "convert_ckpt_v2.py")
SPEC_MODULE = "mindspeed_llm.tasks.models.spec.deepseek4_spec"
SFT_MAP_KEYS = {
    "messages": "messages",
    "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
             "system_tag": "system"},
}
# Values T-Rex's scripts and MindSpeed-LLM's V4 example pass that the V4 config does not carry.
MLA_V_HEAD_DIM = 128  # MLA's validation needs a value head size; V4 attends with the shared 512-wide KV
MAX_BATCH_SIZE = 4  # size of the compressor's KV-state buffers (dsa_indexer_feature.py)
# Megatron's YaRN for the main rotary tables, as T-Rex passes it; V4's own YaRN on the compressed
# layers is --rope-factor / --original-seq-len from the model config
MEGATRON_YARN = {"--rope-scaling-factor": "40", "--rope-scaling-mscale": "1.0",
                 "--rope-scaling-mscale-all-dim": "1.0"}


def stage_schedule(section: MindSpeedSection, stage: str) -> MindSpeedStageSchedule:
    if stage not in STAGES:
        raise ValueError(f"stage {stage!r}: use cpt or sft")
    return getattr(section, stage)


def layout_of(section: MindSpeedSection) -> PlannedLayout:
    return PlannedLayout(tp=section.tp, pp=section.pp, vpp_layers=section.vpp_layers, ep=section.ep,
                         etp=section.etp, cp=section.cp, micro_batch=section.micro_batch,
                         recompute=section.recompute, optimizer_swap=section.swap_optimizer,
                         noop_layers=tuple(section.noop_layers), sequence_parallel=section.sequence_parallel,
                         distributed_optimizer=section.distributed_optimizer)


def check_section(section: MindSpeedSection, shape: ModelShape, stage: str, where: str = "[mindspeed]") -> Job:
    """The job the recipe describes; a ValueError naming the recipe keys when the layout is invalid."""
    schedule = stage_schedule(section, stage)
    if section.nodes < 1 or section.ranks_per_node < 1:
        raise ValueError(f"{where}: nodes and ranks_per_node must be at least 1")
    world = section.nodes * section.ranks_per_node
    job = Job(shape=shape, world=world, seq_len=schedule.seq_len or section.seq_len,
                     global_batch=schedule.global_batch or section.global_batch)
    problems = validate(layout_of(section), job, section.ranks_per_node)
    if problems:
        raise ValueError(f"{where} layout on {section.nodes} nodes x {section.ranks_per_node} ranks = {world} ranks "
                         f"({stage}): " + "; ".join(problems) + " (fix tp/pp/vpp_layers/ep/etp/cp/noop_layers/"
                         "global_batch in the recipe, or run `trex plan` for a valid layout)")
    if schedule.warmup_iters >= (schedule.lr_decay_iters or schedule.train_iters):
        raise ValueError(f"{where}.{stage}: warmup_iters {schedule.warmup_iters} must be smaller than the decay "
                         f"iterations {schedule.lr_decay_iters or schedule.train_iters}")
    return job


def environment_switches(section: MindSpeedSection) -> dict[str, str]:
    """The paper's host-side switches, as environment variables every rank inherits."""
    env = {
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",  # Megatron's overlap relies on ordered kernel queues
        "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
        # a 512-rank first step (HCCL links, operator compilation) takes longer than the defaults
        "HCCL_CONNECT_TIMEOUT": "7200",
        "HCCL_EXEC_TIMEOUT": "7200",
        "ACL_DEVICE_SYNC_TIMEOUT": "7200",
    }
    if section.cpu_affinity:
        env["CPU_AFFINITY_CONF"] = "1"  # bind each rank's threads to the cores near its die
    if section.task_queue_level:
        env["TASK_QUEUE_ENABLE"] = str(section.task_queue_level)
    if section.hccl_alltoall_pipeline:
        env["HCCL_ALGO"] = "alltoall=level0:NA;level1:pipeline"
    if section.hccl_op_expansion_aiv:
        env["HCCL_OP_EXPANSION_MODE"] = "AIV"
    if section.hccl_buffer_mb:
        env["HCCL_BUFFSIZE"] = str(section.hccl_buffer_mb)
    env.update(section.extra_env)
    return env


def compress_ratios_by_slot(shape: ModelShape, noop_layers: tuple[int, ...] | list[int]) -> list[int]:
    """MindSpeed-LLM reads --compress-ratios by layer slot, then one entry per MTP layer: the real
    layers' ratios in order, 0 at each no-op slot (Pro: 64 slots + 1 MTP = 65 entries)."""
    noop = set(noop_layers)
    real = iter(shape.layer_ratios)
    slots = shape.num_layers + len(noop)
    return [0 if slot in noop else next(real) for slot in range(slots)] + list(shape.mtp_ratios)


def _number(value: float) -> str:
    return f"{value:g}"


def layout_arguments(section: MindSpeedSection, shape: ModelShape) -> list[str]:
    args = [
        "--tensor-model-parallel-size", str(section.tp),
        "--pipeline-model-parallel-size", str(section.pp),
        "--expert-model-parallel-size", str(section.ep),
        "--expert-tensor-parallel-size", str(section.etp),
        "--context-parallel-size", str(section.cp),
        "--context-parallel-algo", section.cp_algo,
        "--num-layers", str(slot_count(layout_of(section), shape)),
    ]
    if section.vpp_layers:
        args += ["--num-layers-per-virtual-pipeline-stage", str(section.vpp_layers)]
    if section.noop_layers:
        args += ["--noop-layers", ",".join(map(str, section.noop_layers))]
    if section.sequence_parallel:
        args.append("--sequence-parallel")  # Megatron turns it off by itself at TP 1, as T-Rex's Flash runs
    return args


def model_arguments(config: Any, shape: ModelShape, section: MindSpeedSection, seq_len: int) -> list[str]:
    """DeepSeek-V4's architecture in MindSpeed-LLM's vocabulary."""
    yarn = config.yarn if hasattr(config, "yarn") else None
    patched = section.patched_image
    args = [
        "--use-mcore-models",
        "--transformer-impl", "local",
        "--spec", SPEC_MODULE, "layer_spec",
        "--mtp-spec", SPEC_MODULE, "mtp_spec",
        "--hidden-size", str(shape.hidden_size),
        # every V4 layer is MoE (--first-k-dense-replace -1); Megatron still validates a dense width
        "--ffn-hidden-size", str(shape.hidden_size),
        "--num-attention-heads", str(shape.num_heads),
        "--seq-length", str(seq_len),
        "--max-position-embeddings", str(section.max_position_embeddings),
        "--vocab-size", str(shape.vocab_size),
        "--padded-vocab-size", str(shape.vocab_size),
        "--make-vocab-size-divisible-by", "1",
        "--disable-bias-linear",
        "--normalization", "RMSNorm",
        "--norm-epsilon", _number(config.rms_norm_eps),
        "--swiglu",
        "--swiglu-limit", _number(config.swiglu_limit),
        "--position-embedding-type", "g2" if patched else "deepseek4",
        "--rotary-base", _number(config.rope_theta),
        "--init-method-std", _number(config.initializer_range),
        "--attention-dropout", "0.0",
        "--hidden-dropout", "0.0",
    ]
    if not config.tie_word_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    # attention: MLA with V4's shared KV, the DSA indexer, mHC, compressed KV
    args += [
        "--multi-latent-attention",
        "--qk-head-dim", str(shape.head_dim),
        "--qk-pos-emb-head-dim", str(shape.rope_head_dim),
        "--q-lora-rank", str(shape.q_lora_rank),
        "--kv-lora-rank", str(shape.head_dim),
        "--v-head-dim", str(MLA_V_HEAD_DIM),
        "--o-lora-rank", str(shape.o_lora_rank),
        "--o-groups", str(shape.o_groups),
        "--qk-layernorm",
        "--mla-fa-without-pad",
        "--enable-dsa-indexer",
        "--index-n-heads", str(shape.index_heads),
        "--index-head-dim", str(shape.index_head_dim),
        "--index-topk", str(shape.index_topk),
        "--indexer-loss-coeff", _number(section.indexer_loss_coeff),
        "--enable-mhc",
        "--hc-mult", str(shape.hc_mult),
        "--hc-sinkhorn-iters", str(shape.sinkhorn_iters),
        "--kv-compress",
        "--compress-ratios", *map(str, compress_ratios_by_slot(shape, section.noop_layers)),
        "--compress-rope-theta", _number(config.compress_rope_theta),
        "--max-batch-size", str(MAX_BATCH_SIZE),
    ]
    if patched:
        args += ["--use-g2-attention", "--g2-window-size", str(shape.sliding_window),
                 "--rope-head-dim", str(shape.rope_head_dim), "--norm-eps", _number(config.rms_norm_eps)]
    else:
        args += ["--sliding-window-size", str(shape.sliding_window)]
    if yarn:
        args += ["--original-seq-len", str(int(yarn["original_max_position_embeddings"])),
                 "--rope-factor", _number(float(yarn["factor"])),
                 "--beta-fast", _number(float(yarn.get("beta_fast", 32))),
                 "--beta-slow", _number(float(yarn.get("beta_slow", 1)))]
    args += ["--rope-scaling-type", "yarn",
             "--rope-scaling-original-max-position-embeddings", str(seq_len)]
    for flag, value in MEGATRON_YARN.items():
        args += [flag, value]
    # MoE: every layer routed, the first num_hash_layers by token-id hash
    args += [
        "--num-experts", str(shape.num_experts),
        "--moe-router-topk", str(shape.experts_per_token),
        "--moe-ffn-hidden-size", str(shape.expert_intermediate),
        "--moe-shared-expert-intermediate-size", str(shape.num_shared_experts * shape.expert_intermediate),
        "--moe-layer-freq", "1",
        "--first-k-dense-replace", "-1",
        "--n-hash-layers", str(shape.num_hash_layers),
        "--moe-router-score-function", str(config.scoring_func),
        "--moe-router-topk-scaling-factor", _number(config.routed_scaling_factor),
        "--moe-router-enable-expert-bias",
        "--moe-router-num-groups", "1",
        "--moe-router-group-topk", "1",
        "--mtp-num-layers", str(len(shape.mtp_ratios)),
    ]
    return args


def optimization_arguments(section: MindSpeedSection) -> list[str]:
    """The paper's engine switches and MindSpeed's fused kernels."""
    args = ["--bf16", "--initial-loss-scale", "65536", "--use-flash-attn", "--use-fused-rmsnorm",
            "--use-fused-swiglu", "--use-fused-rotary-pos-emb", "--use-rotary-position-embeddings",
            "--no-masked-softmax-fusion", "--attention-softmax-in-fp32", "--use-sparse-flash-attn",
            "--use-fused-lightning-indexer", "--use-fused-lightning-indexer-loss", "--use-triton-mhc",
            "--use-fused-mhc", "--moe-permute-fusion", "--mtp-mem-efficient-logits",
            # Python's collector pauses ranks at different moments; collect every 50 steps on all
            "--manual-gc", "--manual-gc-interval", "50"]
    if section.patched_image:
        args += ["--use-triton-sinkhorn", "--use-triton-rmsnorm-without-weight", "--use-g2-indexer-loss"]
    if section.distributed_optimizer:
        args.append("--use-distributed-optimizer")
    if section.recompute == "full":
        args += ["--recompute-granularity", "full", "--recompute-method", section.recompute_method,
                 "--recompute-num-layers", str(section.recompute_num_layers)]
    elif section.recompute == "selective":
        args += ["--recompute-granularity", "selective", "--recompute-activation-function"]
    if section.swap_optimizer:
        args.append("--swap-optimizer")  # states in host memory, streamed through a double buffer
    args += ["--moe-token-dispatcher-type", section.moe_token_dispatcher, "--moe-permutation-async-comm"]
    if section.moe_alltoall_overlap_comm:
        args.append("--moe-alltoall-overlap-comm")
    if section.moe_grouped_gemm:
        args.append("--moe-grouped-gemm")
    args.append("--gemm-gradient-accumulation-fusion" if section.gradient_accumulation_fusion == "gemm"
                else "--no-gradient-accumulation-fusion")
    if section.router_fp32:
        args += ["--moe-router-dtype", "fp32"]
    args += ["--moe-router-load-balancing-type", "none", "--seq-aux",
             "--moe-aux-loss-coeff", _number(section.seq_aux_loss_coeff),
             "--mtp-loss-scaling-factor", _number(section.mtp_loss_scale)]
    return args


def training_arguments(section: MindSpeedSection, schedule: MindSpeedStageSchedule, stage: str,
                       job: Job) -> list[str]:
    args = [
        "--micro-batch-size", str(section.micro_batch),
        "--global-batch-size", str(job.global_batch),
        "--train-iters", str(schedule.train_iters),
        "--lr", _number(schedule.lr),
        "--min-lr", _number(schedule.min_lr),
        "--lr-decay-style", schedule.lr_decay_style,
        "--lr-decay-iters", str(schedule.lr_decay_iters or schedule.train_iters),
        "--lr-warmup-iters", str(schedule.warmup_iters),
        "--weight-decay", _number(section.weight_decay),
        "--adam-beta1", _number(section.adam_beta1),
        "--adam-beta2", _number(section.adam_beta2),
        "--clip-grad", _number(section.clip_grad),
        "--seed", "42",
    ]
    if schedule.fix_router:
        args.append("--fix-router")
    if stage == "sft":
        args += ["--finetune", "--stage", "sft", "--is-instruction-dataset", "--prompt-type",
                 section.sft_prompt_type]
    return args


def _bash_words(words: list[str], indent: str = "    ") -> str:
    """Arguments one flag per line: `--flag value \\`."""
    lines, current = [], []
    for word in words:
        if word.startswith("--") and current:
            lines.append(" ".join(current))
            current = []
        current.append(word if word.startswith("$") or word.startswith('"$') else shlex.quote(word))
    if current:
        lines.append(" ".join(current))
    return " \\\n".join(indent + line for line in lines)


@dataclasses.dataclass
class Paths:
    """Where the stage's files go and where its inputs are."""

    folder: Path  # <run_dir>/mindspeed/<stage>
    mindspeed_llm: Path | None
    data_source: Path
    data_jsonl: Path
    data_prefix: Path  # preprocess output prefix
    dataset_path: str  # what --data-path receives
    hf_source: Path | None
    hf_bf16: Path
    megatron_load: Path
    checkpoints: Path
    hf_export: Path
    tokenizer: Path | None
    logs: Path


def resolve_paths(stage: str, section: MindSpeedSection, run_dir: Path) -> Paths:
    schedule = stage_schedule(section, stage)
    folder = run_dir / "mindspeed" / stage
    base = run_dir / "mindspeed"
    mindspeed_dir = section.mindspeed_llm_dir or os.environ.get("MINDSPEED_LLM_DIR", "")
    if schedule.data:
        data_source = Path(schedule.data)
    else:
        data_source = run_dir / "data" / "cpt" if stage == "cpt" else run_dir / "synth"
    prefix = folder / "data" / stage
    dataset_path = f"{prefix}_text_document" if stage == "cpt" else str(prefix)
    hf_source = Path(section.hf_checkpoint) if section.hf_checkpoint else None
    if schedule.load:
        megatron_load = Path(schedule.load)
    elif stage == "sft" and (base / "cpt" / "checkpoints").exists():
        megatron_load = base / "cpt" / "checkpoints"
    else:
        megatron_load = base / "base-megatron"
    tokenizer = Path(section.tokenizer) if section.tokenizer else hf_source
    return Paths(
        folder=folder, mindspeed_llm=Path(mindspeed_dir) if mindspeed_dir else None, data_source=data_source,
        data_jsonl=folder / "data" / f"{stage}.jsonl", data_prefix=prefix, dataset_path=dataset_path,
        hf_source=hf_source, hf_bf16=base / "base-bf16", megatron_load=megatron_load,
        checkpoints=folder / "checkpoints", hf_export=folder / "hf", tokenizer=tokenizer, logs=folder / "logs")


def argument_groups(section: MindSpeedSection, stage: str, job: Job, config: Any,
                    shape: ModelShape) -> list[tuple[str, list[str]]]:
    """The training command's arguments, grouped as the script writes them (bash arrays)."""
    schedule = stage_schedule(section, stage)
    groups = [
        ("LAYOUT_ARGS", layout_arguments(section, shape)),
        ("MODEL_ARGS", model_arguments(config, shape, section, job.seq_len)),
        ("OPTIMIZE_ARGS", optimization_arguments(section)),
        ("TRAIN_ARGS", training_arguments(section, schedule, stage, job)),
        ("DATA_ARGS", ["--data-path", '"$DATA_PATH"', "--split", "100,0,0", "--data-cache-path",
                       '"$DATA_CACHE_PATH"', "--tokenizer-type", "PretrainedFromHF",
                       "--tokenizer-name-or-path", '"$TOKENIZER_PATH"']),
        ("OUTPUT_ARGS", ["--load", '"$CKPT_LOAD_DIR"', "--save", '"$CKPT_SAVE_DIR"', "--no-load-optim",
                         "--no-load-rng", "--no-save-optim", "--no-save-rng", "--log-interval", "1",
                         "--log-throughput", "--tensorboard-dir", '"$TENSORBOARD_DIR"',
                         "--log-timers-to-tensorboard",
                         "--save-interval", str(schedule.save_interval or schedule.train_iters),
                         "--eval-interval", str(schedule.train_iters), "--eval-iters", "0",
                         # MindSpeed maps the nccl backend name to HCCL on Ascend
                         "--distributed-backend", "nccl", "--distributed-timeout-minutes", "120",
                         "--ckpt-format", "torch"]
         + ([] if section.shared_storage else ["--no-shared-storage"])),
    ]
    if section.extra_args:
        groups.append(("EXTRA_ARGS", list(section.extra_args)))
    return groups


def _path_line(name: str, value, what: str) -> str:
    """`NAME=value`, or, where the recipe gives none, the environment's value with a clear stop when unset."""
    if value:
        return f"{name}={shlex.quote(str(value))}"
    return f'{name}="${{{name}:?set {name} to {what}}}"'


def _master_address_lines(section: MindSpeedSection) -> list[str]:
    """Node 0's address: the recipe's, else $MASTER_ADDR, else the first host of the Slurm allocation (the
    loopback for a one-node job)."""
    if section.master_addr:
        return [f"MASTER_ADDR={shlex.quote(section.master_addr)}"]
    if section.nodes == 1:  # a one-node job meets on its own loopback
        return ['MASTER_ADDR="${MASTER_ADDR:-127.0.0.1}"']
    return [
        'MASTER_ADDR="${MASTER_ADDR:-$( (scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null || true)'
        ' | head -n 1)}"',
        ': "${MASTER_ADDR:?set MASTER_ADDR to the address of node 0, or [mindspeed] master_addr, or run under Slurm}"',
    ]


def render_node_script(section: MindSpeedSection, stage: str, node_rank: int, job: Job, config: Any,
                       shape: ModelShape, paths: Paths) -> str:
    """One node's launch script: environment switches, torchrun rendezvous, the argument arrays."""
    env = environment_switches(section)
    lines = [
        "#!/usr/bin/env bash",
        f"# trex: MindSpeed-LLM {stage.upper()} launch for node {node_rank} of {section.nodes} "
        f"({job.world} ranks). Run this file on node {node_rank}; every node runs its own script.",
        "# Flags: MindSpeed-LLM v26.1.0 / MindSpeed 26.1.0_core_r0.12.1 / Megatron core_v0.12.1"
        + (" plus T-Rex's patched image." if section.patched_image else " (stock)."),
        "set -euo pipefail",
        "",
        "# What the recipe leaves empty comes from the environment or the scheduler (Slurm's variables), and a",
        "# value missing there stops the script with a message naming it (no placeholder paths).",
        _path_line("MINDSPEED_LLM_DIR", paths.mindspeed_llm, "the MindSpeed-LLM checkout ([mindspeed] mindspeed_llm_dir)"),
        f"NNODES={section.nodes}",
        f'NODE_RANK="${{NODE_RANK:-${{SLURM_NODEID:-{node_rank}}}}}"',
        f"NPROC_PER_NODE={section.ranks_per_node}",
        *_master_address_lines(section),
        f"MASTER_PORT={section.master_port}",
        f"DATA_PATH={shlex.quote(paths.dataset_path)}",
        f"DATA_CACHE_PATH={shlex.quote(str(paths.folder / 'data' / 'cache'))}",
        _path_line("TOKENIZER_PATH", paths.tokenizer, "the tokenizer folder of the model"),
        f"CKPT_LOAD_DIR={shlex.quote(str(paths.megatron_load))}",
        f"CKPT_SAVE_DIR={shlex.quote(str(paths.checkpoints))}",
        f"TENSORBOARD_DIR={shlex.quote(str(paths.logs / 'tensorboard'))}",
        f"LOG_DIR={shlex.quote(str(paths.logs))}",
        "",
        "# host-side switches (T-Rex: CPU binding, task queue, HCCL all-to-all pipeline, AIV, buffer, tcmalloc)",
    ]
    lines += [f"export {key}={shlex.quote(value)}" for key, value in env.items()]
    if section.tcmalloc_path:
        lines.append(f"export LD_PRELOAD={shlex.quote(section.tcmalloc_path)}${{LD_PRELOAD:+:$LD_PRELOAD}}")
    lines += ["", "mkdir -p \"$LOG_DIR\" \"$CKPT_SAVE_DIR\" \"$DATA_CACHE_PATH\"", "cd \"$MINDSPEED_LLM_DIR\"", ""]
    distributed = ["--nproc_per_node", "$NPROC_PER_NODE", "--nnodes", "$NNODES", "--node_rank", "$NODE_RANK",
                   "--master_addr", "$MASTER_ADDR", "--master_port", "$MASTER_PORT"]
    groups = [("DISTRIBUTED_ARGS", distributed), *argument_groups(section, stage, job, config, shape)]
    for name, words in groups:
        # bash arrays keep each word intact (values with ';' or spaces survive)
        lines.append(f"{name}=(")
        lines.append(_bash_words(words).replace(" \\\n", "\n"))
        lines.append(")")
        lines.append("")
    expanded = " ".join(f'"${{{name}[@]}}"' for name, _ in groups if name != "DISTRIBUTED_ARGS")
    lines += [
        f'torchrun "${{DISTRIBUTED_ARGS[@]}}" {ENTRY_POINTS[stage]} {expanded} \\',
        f'    2>&1 | tee "$LOG_DIR/{stage}-node-$NODE_RANK.log"',
        "",
    ]
    return "\n".join(lines)


def preprocess_arguments(section: MindSpeedSection, stage: str, paths: Paths) -> list[str]:
    words = ["--input", str(paths.data_jsonl), "--tokenizer-type", "PretrainedFromHF",
             "--tokenizer-name-or-path", str(paths.tokenizer) if paths.tokenizer else '"$TOKENIZER_PATH"',
             "--output-prefix", str(paths.data_prefix), "--workers", str(section.preprocess_workers),
             "--log-interval", "1000"]
    if stage == "cpt":
        words += ["--handler-name", "GeneralPretrainHandler", "--json-keys", "text", "--append-eod"]
    else:
        words += ["--handler-name", "SharegptStyleInstructionHandler", "--prompt-type", section.sft_prompt_type,
                  "--map-keys", json.dumps(SFT_MAP_KEYS, separators=(",", ":"))]
    return words


def render_preprocess(section: MindSpeedSection, stage: str, paths: Paths) -> str:
    return _script(paths, f"{section.python} preprocess_data.py", preprocess_arguments(section, stage, paths),
                   f"tokenize the exported {stage.upper()} JSONL into Megatron's indexed dataset")


def convert_to_megatron_arguments(section: MindSpeedSection, shape: ModelShape, paths: Paths) -> list[str]:
    words = ["--load-model-type", "hf", "--save-model-type", "mg", "--model-type-hf", section.hf_model_type,
             "--target-tensor-parallel-size", str(section.tp), "--target-pipeline-parallel-size", str(section.pp),
             "--target-expert-parallel-size", str(section.ep),
             "--expert-tensor-parallel-size", str(section.etp)]
    if section.vpp_layers:
        words += ["--num-layers-per-virtual-pipeline-stage", str(section.vpp_layers)]
    if section.noop_layers:
        words += ["--noop-layers", ",".join(map(str, section.noop_layers))]
    words += ["--mtp-num-layers", str(len(shape.mtp_ratios))]
    if section.moe_grouped_gemm:
        words.append("--moe-grouped-gemm")
    words += ["--load-dir", str(paths.hf_bf16), "--save-dir", str(paths.megatron_load)]
    return words


def render_convert_to_megatron(section: MindSpeedSection, shape: ModelShape, paths: Paths) -> str:
    return _script(paths, f"{section.python} convert_ckpt_v2.py",
                   convert_to_megatron_arguments(section, shape, paths),
                   "HF (BF16) -> Megatron for the training layout: no-op layers, MTP, grouped GEMM")


def convert_to_hf_arguments(section: MindSpeedSection, shape: ModelShape, paths: Paths) -> list[str]:
    words = ["--load-model-type", "mg", "--save-model-type", "hf", "--model-type-hf", section.hf_model_type,
             "--target-tensor-parallel-size", "1", "--target-pipeline-parallel-size", "1",
             "--target-expert-parallel-size", "1", "--expert-tensor-parallel-size", "1"]
    if section.noop_layers:
        words += ["--noop-layers", ",".join(map(str, section.noop_layers))]
    words += ["--mtp-num-layers", str(len(shape.mtp_ratios))]
    if section.moe_grouped_gemm:
        words.append("--moe-grouped-gemm")
    words += ["--load-dir", str(paths.checkpoints), "--save-dir", str(paths.hf_export)]
    return words


def render_convert_to_hf(section: MindSpeedSection, shape: ModelShape, paths: Paths) -> str:
    return _script(paths, f"{section.python} convert_ckpt_v2.py", convert_to_hf_arguments(section, shape, paths),
                   "Megatron -> HF export of the trained checkpoint (needs expert-tensor parallel 1)")


def _script(paths: Paths, program: str, words: list[str], purpose: str) -> str:
    return "\n".join([
        "#!/usr/bin/env bash",
        f"# trex: {purpose}",
        "set -euo pipefail",
        _path_line("MINDSPEED_LLM_DIR", paths.mindspeed_llm, "the MindSpeed-LLM checkout ([mindspeed] mindspeed_llm_dir)"),
        *([] if paths.tokenizer else [_path_line("TOKENIZER_PATH", None, "the tokenizer folder of the model")]),
        'cd "$MINDSPEED_LLM_DIR"',
        f"{program} \\",
        _bash_words(words),
        "",
    ])
