"""The MindSpeed-LLM engine: run T-Rex's SuperPOD training through MindSpeed-LLM (Megatron-Core).

`run_mindspeed(stage, recipe, run_dir, dry_run)` prepares and runs, in order:

1. data export: trex's CPT data as JSON Lines of `{"text": ...}` documents (the fields
   MindSpeed-LLM's `GeneralPretrainHandler` reads), SFT samples as `{"messages": [...]}` in the
   OpenAI/ShareGPT role-content form its `SharegptStyleInstructionHandler` reads;
2. `preprocess_data.py`: tokenize them into Megatron's indexed dataset;
3. checkpoint dequantization: the official FP8/FP4 checkpoint to BF16, shard by shard, with the
   model package's dequantizer (T-Rex trains on BF16);
4. `convert_ckpt_v2.py` HF -> Megatron for the layout (no-op layers, MTP, grouped GEMM);
5. the per-node launch scripts (torchrun rendezvous, node rank, the paper's host-side switches,
   MindSpeed-LLM's argument list for layout, model, data, schedule and optimizations);
6. the reverse conversion Megatron -> HF for export (it needs expert-tensor parallel 1).

Everything is written under `<run_dir>/mindspeed/<stage>/`. Where MindSpeed-LLM is installed (its
source checkout in `[mindspeed] mindspeed_llm_dir` or $MINDSPEED_LLM_DIR, with torch_npu working),
the steps run; elsewhere `dry_run` writes every file, lists the steps in order and says what is
missing. When MindSpeed-LLM is present, every rendered flag is also looked up in its source, so a
flag the installed version does not know is reported before a 512-rank job starts.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from trex_cli.console import out, warn
from trex_cli.plan.config import MindSpeedSection, StageSchedule
from trex_cli.plan.layout import Job, Layout, slot_count, validate
from trex_cli.plan.parameters import ModelShape

STAGES = ("cpt", "sft")
ENTRY_POINTS = {"cpt": "pretrain_gpt.py", "sft": "posttrain_gpt.py"}
REQUIRED_FILES = ("pretrain_gpt.py", "posttrain_gpt.py", "preprocess_data.py", "convert_ckpt_v2.py")
SFT_MAP_KEYS = {
    "messages": "messages",
    "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
             "system_tag": "system"},
}


# ---- what to launch ---------------------------------------------------------------------------------


def stage_schedule(section: MindSpeedSection, stage: str) -> StageSchedule:
    if stage not in STAGES:
        raise ValueError(f"stage {stage!r}: use cpt or sft")
    return getattr(section, stage)


def layout_of(section: MindSpeedSection) -> Layout:
    return Layout(tp=section.tp, pp=section.pp, vpp_layers=section.vpp_layers, ep=section.ep, etp=section.etp,
                  cp=section.cp, micro_batch=section.micro_batch, recompute=section.recompute,
                  optimizer_swap=section.swap_optimizer, noop_layers=tuple(section.noop_layers),
                  sequence_parallel=section.sequence_parallel, distributed_optimizer=section.distributed_optimizer)


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
    return job


def environment_switches(section: MindSpeedSection) -> dict[str, str]:
    """The paper's host-side switches, as environment variables every rank inherits."""
    env = {
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",  # Megatron's overlap relies on ordered kernel queues
        "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
        "HCCL_CONNECT_TIMEOUT": "1800",
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


def layout_arguments(section: MindSpeedSection, shape: ModelShape) -> list[str]:
    layout = layout_of(section)
    args = [
        "--tensor-model-parallel-size", str(section.tp),
        "--pipeline-model-parallel-size", str(section.pp),
        "--expert-model-parallel-size", str(section.ep),
        "--expert-tensor-parallel-size", str(section.etp),
        "--context-parallel-size", str(section.cp),
        "--num-layers", str(slot_count(layout, shape)),
    ]
    if section.cp > 1:
        args += ["--context-parallel-algo", section.cp_algo]
    if section.vpp_layers:
        args += ["--num-layers-per-virtual-pipeline-stage", str(section.vpp_layers)]
    if section.noop_layers:
        args += ["--noop-layers", ",".join(map(str, section.noop_layers))]
    if section.sequence_parallel and section.tp > 1:
        args.append("--sequence-parallel")
    return args


def model_arguments(config: Any, shape: ModelShape, seq_len: int) -> list[str]:
    """DeepSeek-V4's architecture in MindSpeed-LLM's vocabulary (Megatron names where they exist)."""
    ratios = [str(r) for r in shape.layer_ratios] + [str(r) for r in shape.mtp_ratios]
    yarn = getattr(config, "yarn", None) or {}
    args = [
        "--use-mcore-models",
        "--spec", "mindspeed_llm.tasks.models.spec.deepseek_v4_spec", "layer_spec",
        "--hidden-size", str(shape.hidden_size),
        "--num-attention-heads", str(shape.num_heads),
        "--group-query-attention", "--num-query-groups", "1",
        "--kv-channels", str(shape.head_dim),
        "--q-lora-rank", str(shape.q_lora_rank),
        "--qk-pos-emb-head-dim", str(shape.rope_head_dim),
        "--o-groups", str(shape.o_groups),
        "--o-lora-rank", str(shape.o_lora_rank),
        "--sliding-window", str(shape.sliding_window),
        "--compress-ratios", ",".join(ratios),
        "--index-n-heads", str(shape.index_heads),
        "--index-head-dim", str(shape.index_head_dim),
        "--index-topk", str(shape.index_topk),
        "--hc-mult", str(shape.hc_mult),
        "--hc-sinkhorn-iters", str(getattr(config, "hc_sinkhorn_iters", 20)),
        "--num-hash-layers", str(shape.num_hash_layers),
        "--swiglu-limit", f"{getattr(config, 'swiglu_limit', 10.0):g}",
        "--seq-length", str(seq_len),
        "--max-position-embeddings", str(getattr(config, "max_position_embeddings", seq_len)),
        "--vocab-size", str(shape.vocab_size),
        "--padded-vocab-size", str(shape.vocab_size),
        "--make-vocab-size-divisible-by", "1",
        "--untie-embeddings-and-output-weights",
        "--disable-bias-linear",
        "--normalization", "RMSNorm",
        "--norm-epsilon", f"{getattr(config, 'rms_norm_eps', 1e-6):g}",
        "--swiglu",
        "--position-embedding-type", "rope",
        "--rotary-base", f"{getattr(config, 'rope_theta', 10000.0):g}",
        "--compress-rotary-base", f"{getattr(config, 'compress_rope_theta', 160000.0):g}",
    ]
    if yarn:
        args += [
            "--rope-scaling-type", "yarn",
            "--rope-scaling-factor", f"{float(yarn['factor']):g}",
            "--rope-scaling-original-max-position-embeddings", str(int(yarn["original_max_position_embeddings"])),
            "--rope-scaling-beta-fast", f"{float(yarn.get('beta_fast', 32)):g}",
            "--rope-scaling-beta-slow", f"{float(yarn.get('beta_slow', 1)):g}",
        ]
    args += [
        "--num-experts", str(shape.num_experts),
        "--moe-router-topk", str(shape.experts_per_token),
        "--moe-ffn-hidden-size", str(shape.expert_intermediate),
        "--n-shared-experts", str(shape.num_shared_experts),
        "--moe-router-score-function", str(getattr(config, "scoring_func", "sqrtsoftplus")),
        "--moe-router-topk-scaling-factor", f"{getattr(config, 'routed_scaling_factor', 1.0):g}",
        "--norm-topk-prob",
        "--moe-router-enable-expert-bias",
        "--moe-layer-freq", "1",
        "--first-k-dense-replace", "0",
    ]
    return args


def optimization_arguments(section: MindSpeedSection) -> list[str]:
    """The paper's engine switches."""
    args = ["--bf16", "--use-flash-attn", "--use-fused-rmsnorm", "--use-fused-swiglu", "--use-fused-rotary-pos-emb",
            "--no-masked-softmax-fusion", "--attention-softmax-in-fp32"]
    if section.distributed_optimizer:
        args += ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
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
    if section.router_fp32:
        args += ["--moe-router-dtype", "fp32"]
    args += ["--moe-aux-loss-coeff", f"{section.seq_aux_loss_coeff:g}", "--seq-aux",
             "--moe-router-load-balancing-type", "none"]
    args += ["--mtp-num-layers", "1", "--mtp-loss-scaling-factor", f"{section.mtp_loss_scale:g}"]
    return args


def training_arguments(section: MindSpeedSection, schedule: StageSchedule, stage: str, job: Job) -> list[str]:
    args = [
        "--micro-batch-size", str(section.micro_batch),
        "--global-batch-size", str(job.global_batch),
        "--train-iters", str(schedule.train_iters),
        "--lr", f"{schedule.lr:g}",
        "--min-lr", f"{schedule.min_lr:g}",
        "--lr-decay-style", schedule.lr_decay_style,
        "--lr-warmup-iters", str(schedule.warmup_iters),
        "--weight-decay", f"{section.weight_decay:g}",
        "--adam-beta1", f"{section.adam_beta1:g}",
        "--adam-beta2", f"{section.adam_beta2:g}",
        "--clip-grad", f"{section.clip_grad:g}",
        "--init-method-std", "0.02",
        "--attention-dropout", "0.0",
        "--hidden-dropout", "0.0",
        "--seed", "42",
    ]
    if stage == "sft":
        args += ["--stage", "sft", "--is-instruction-dataset", "--prompt-type", section.sft_prompt_type,
                 "--reset-position-ids"]
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


def render_node_script(section: MindSpeedSection, stage: str, node_rank: int, job: Job, config: Any,
                       shape: ModelShape, paths: Paths) -> str:
    """One node's launch script: environment switches, torchrun rendezvous, the argument list."""
    schedule = stage_schedule(section, stage)
    env = environment_switches(section)
    lines = [
        "#!/usr/bin/env bash",
        f"# trex: MindSpeed-LLM {stage.upper()} launch for node {node_rank} of {section.nodes} "
        f"({job.world} ranks). Run this file on node {node_rank}; every node runs its own script.",
        "set -euo pipefail",
        "",
        f"MINDSPEED_LLM_DIR={shlex.quote(str(paths.mindspeed_llm or '/path/to/MindSpeed-LLM'))}",
        f"NNODES={section.nodes}",
        f"NODE_RANK={node_rank}",
        f"NPROC_PER_NODE={section.ranks_per_node}",
        f"MASTER_ADDR={shlex.quote(section.master_addr)}",
        f"MASTER_PORT={section.master_port}",
        f"DATA_PATH={shlex.quote(paths.dataset_path)}",
        f"TOKENIZER_PATH={shlex.quote(str(paths.tokenizer or '/path/to/tokenizer'))}",
        f"CKPT_LOAD_DIR={shlex.quote(str(paths.megatron_load))}",
        f"CKPT_SAVE_DIR={shlex.quote(str(paths.checkpoints))}",
        f"LOG_DIR={shlex.quote(str(paths.logs))}",
        "",
        "# host-side switches (T-Rex: CPU binding, task queue, HCCL all-to-all pipeline, AIV, buffer, tcmalloc)",
    ]
    lines += [f"export {key}={shlex.quote(value)}" for key, value in env.items()]
    if section.tcmalloc_path:
        lines.append(f"export LD_PRELOAD={shlex.quote(section.tcmalloc_path)}${{LD_PRELOAD:+:$LD_PRELOAD}}")
    lines += ["", "mkdir -p \"$LOG_DIR\" \"$CKPT_SAVE_DIR\"", "cd \"$MINDSPEED_LLM_DIR\"", ""]
    distributed = ["--nproc_per_node", "$NPROC_PER_NODE", "--nnodes", "$NNODES", "--node_rank", "$NODE_RANK",
                   "--master_addr", "$MASTER_ADDR", "--master_port", "$MASTER_PORT"]
    seq_len = job.seq_len
    groups = [
        ("DISTRIBUTED_ARGS", distributed),
        ("LAYOUT_ARGS", layout_arguments(section, shape)),
        ("MODEL_ARGS", model_arguments(config, shape, seq_len)),
        ("OPTIMIZE_ARGS", optimization_arguments(section)),
        ("TRAIN_ARGS", training_arguments(section, schedule, stage, job)),
        ("DATA_ARGS", ["--data-path", '"$DATA_PATH"', "--split", "100,0,0", "--tokenizer-type", "PretrainedFromHF",
                       "--tokenizer-name-or-path", '"$TOKENIZER_PATH"']),
        ("OUTPUT_ARGS", ["--load", '"$CKPT_LOAD_DIR"', "--save", '"$CKPT_SAVE_DIR"', "--finetune", "--no-load-optim",
                         "--no-load-rng", "--log-interval", "1",
                         "--save-interval", str(schedule.save_interval or schedule.train_iters),
                         "--eval-interval", str(schedule.train_iters), "--eval-iters", "0",
                         "--distributed-backend", "nccl", "--distributed-timeout-minutes", "120",
                         "--ckpt-format", "torch"]),
    ]
    if section.extra_args:
        groups.append(("EXTRA_ARGS", list(section.extra_args)))
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


def render_preprocess(section: MindSpeedSection, stage: str, paths: Paths) -> str:
    words = ["--input", str(paths.data_jsonl), "--tokenizer-type", "PretrainedFromHF",
             "--tokenizer-name-or-path", str(paths.tokenizer or "/path/to/tokenizer"),
             "--output-prefix", str(paths.data_prefix), "--workers", str(section.preprocess_workers),
             "--log-interval", "1000"]
    if stage == "cpt":
        words += ["--handler-name", "GeneralPretrainHandler", "--json-keys", "text", "--append-eod"]
    else:
        words += ["--handler-name", "SharegptStyleInstructionHandler", "--prompt-type", section.sft_prompt_type,
                  "--map-keys", json.dumps(SFT_MAP_KEYS, separators=(",", ":"))]
    return _script(paths, f"{section.python} preprocess_data.py", words,
                   f"tokenize the exported {stage.upper()} JSONL into Megatron's indexed dataset")


def render_convert_to_megatron(section: MindSpeedSection, shape: ModelShape, paths: Paths) -> str:
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
    words += ["--params-dtype", "bf16", "--load-dir", str(paths.hf_bf16), "--save-dir", str(paths.megatron_load)]
    return _script(paths, f"{section.python} convert_ckpt_v2.py", words,
                   "HF (BF16) -> Megatron for the training layout: no-op layers, MTP, grouped GEMM")


def render_convert_to_hf(section: MindSpeedSection, shape: ModelShape, paths: Paths) -> str:
    words = ["--load-model-type", "mg", "--save-model-type", "hf", "--model-type-hf", section.hf_model_type,
             "--target-tensor-parallel-size", "1", "--target-pipeline-parallel-size", "1",
             "--target-expert-parallel-size", "1", "--expert-tensor-parallel-size", "1"]
    if section.noop_layers:
        words += ["--noop-layers", ",".join(map(str, section.noop_layers))]
    words += ["--mtp-num-layers", str(len(shape.mtp_ratios))]
    if section.moe_grouped_gemm:
        words.append("--moe-grouped-gemm")
    words += ["--load-dir", str(paths.checkpoints), "--save-dir", str(paths.hf_export)]
    return _script(paths, f"{section.python} convert_ckpt_v2.py", words,
                   "Megatron -> HF export of the trained checkpoint (needs expert-tensor parallel 1)")


def _script(paths: Paths, program: str, words: list[str], purpose: str) -> str:
    return "\n".join([
        "#!/usr/bin/env bash",
        f"# trex: {purpose}",
        "set -euo pipefail",
        f"cd {shlex.quote(str(paths.mindspeed_llm or '/path/to/MindSpeed-LLM'))}",
        f"{program} \\",
        _bash_words(words),
        "",
    ])


# ---- data export --------------------------------------------------------------------------------------


def _folder_stage(folder: Path) -> str | None:
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        return None
    return str(json.loads(manifest.read_text()).get("stage", ""))


class _JsonlWriter:
    """Streams records to a temporary file beside `target` and renames it into place on success, so
    an export is never half-written and never held in memory whole."""

    def __init__(self, target: Path):
        self.target = Path(target)
        self.temporary = self.target.with_name(f".{self.target.name}.tmp")
        self.count = 0

    def __enter__(self) -> _JsonlWriter:
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.stream = open(self.temporary, "w", encoding="utf-8")  # closed in __exit__
        return self

    def write(self, record: dict) -> None:
        self.stream.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.count += 1

    def __exit__(self, kind, value, traceback) -> None:
        self.stream.close()
        if kind is None and self.count:
            os.replace(self.temporary, self.target)
        else:
            self.temporary.unlink(missing_ok=True)


def export_cpt_jsonl(source: Path, target: Path) -> int:
    """Write CPT documents as `{"text": ...}` lines; returns the document count.

    A trex data folder (data/cpt) holds packed token rows: documents are recovered where
    position_ids restart at 0 (a document cut at a row end continues in the next row) and decoded
    with the folder's tokenizer, special tokens dropped (MindSpeed-LLM appends its own EOD). A synth
    folder's cpt_docs are copied as they are."""
    stage = _folder_stage(source)
    if stage == "synth" or (source / "cpt_docs").is_dir():
        with _JsonlWriter(target) as writer:
            for shard in sorted((source / "cpt_docs").glob("*.jsonl")):
                with open(shard, encoding="utf-8") as stream:
                    for number, line in enumerate(stream, 1):
                        if not line.strip():
                            continue
                        record = json.loads(line)
                        if not isinstance(record.get("text"), str):
                            raise ValueError(f"{shard}:{number}: a CPT document needs a 'text' string")
                        writer.write({"text": record["text"]})
    elif (source / "train").is_dir():
        import datasets
        from tokenizers import Tokenizer

        tokenizer_file = source / "tokenizer" / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise FileNotFoundError(f"{tokenizer_file} not found: a trex data folder keeps its tokenizer there")
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        rows = datasets.load_from_disk(str(source / "train"))
        document: list[int] = []
        with _JsonlWriter(target) as writer:

            def flush() -> None:
                if document:
                    text = tokenizer.decode(document, skip_special_tokens=True)
                    if text.strip():
                        writer.write({"text": text})
                    document.clear()

            for row in rows:
                for token, position in zip(row["input_ids"], row["position_ids"], strict=True):
                    if position == 0:
                        flush()
                    document.append(int(token))
            flush()
    else:
        raise FileNotFoundError(f"{source} is neither a trex data folder (train/, tokenizer/) nor a synth folder "
                                "(cpt_docs/): run `trex data cpt` first or set [mindspeed.cpt] data")
    if writer.count == 0:
        raise ValueError(f"{source} holds no CPT documents to export")
    return writer.count


def export_sft_jsonl(source: Path, target: Path) -> int:
    """Write SFT samples as `{"messages": [{"role", "content"}, ...]}` lines (ShareGPT/OpenAI form).

    Reads a synth folder's sft/ shards or a JSONL file of records with `messages`. Token rows of a
    data/sft folder are not used: MindSpeed-LLM applies its own chat template (`--prompt-type`)."""
    if source.is_file():
        files = [source]
    elif (source / "sft").is_dir():
        files = sorted((source / "sft").glob("*.jsonl"))
    else:
        hint = " (a data/sft folder holds token rows; give the synth folder it was built from)" \
            if (source / "train").is_dir() else ""
        raise FileNotFoundError(f"{source}: no sft/ shards or messages JSONL to export{hint}; set [mindspeed.sft] data")
    with _JsonlWriter(target) as writer:
        for file in files:
            with open(file, encoding="utf-8") as stream:
                for number, line in enumerate(stream, 1):
                    if not line.strip():
                        continue
                    record = json.loads(line)
                    messages = record.get("messages")
                    if not isinstance(messages, list) or not messages:
                        raise ValueError(f"{file}:{number}: an SFT sample needs a non-empty 'messages' list")
                    clean = []
                    for message in messages:
                        if message.get("role") not in ("system", "user", "assistant") or not isinstance(
                                message.get("content"), str):
                            raise ValueError(f"{file}:{number}: each message needs role system/user/assistant "
                                             "and a content string")
                        clean.append({"role": message["role"], "content": message["content"]})
                    if not any(m["role"] == "assistant" for m in clean):
                        raise ValueError(f"{file}:{number}: the sample has no assistant message to learn from")
                    writer.write({"messages": clean})
    if writer.count == 0:
        raise ValueError(f"{source} holds no SFT samples to export")
    return writer.count


# ---- checkpoint dequantization ------------------------------------------------------------------------


def checkpoint_is_quantized(folder: Path) -> bool:
    config = folder / "config.json"
    if config.is_file() and json.loads(config.read_text()).get("quantization_config"):
        return True
    from safetensors import safe_open

    for file in sorted(folder.glob("*.safetensors"))[:1]:
        with safe_open(str(file), framework="pt") as handle:
            return any(key.endswith(".scale") or key.endswith("_scale_inv") for key in handle.keys())
    return False


def dequantize_checkpoint(source: Path, target: Path) -> dict[str, int]:
    """Official FP8/FP4 checkpoint -> BF16, one shard at a time (memory bounded by a shard), with the
    model package's dequantizer. Names stay official; scales are dropped; tensors V4 keeps in fp32
    stay fp32; config.json loses its quantization_config; tokenizer files are copied."""
    import shutil

    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    from trex_cli.artifacts import write_json_atomic
    from trex_cli.models.deepseek_v4.quantization import dequantize
    from trex_cli.models.deepseek_v4.state_dict_adapter import _storage_dtype as storage_dtype

    source, target = Path(source), Path(target)
    index_path = source / "model.safetensors.index.json"
    if index_path.is_file():
        weight_map = json.loads(index_path.read_text())["weight_map"]
    else:
        weight_map = {}
        for file in sorted(source.glob("*.safetensors")):
            with safe_open(str(file), framework="pt") as handle:
                weight_map.update({key: file.name for key in handle.keys()})
    if not weight_map:
        raise FileNotFoundError(f"{source} holds no safetensors shards: not a checkpoint folder")
    target.mkdir(parents=True, exist_ok=True)
    handles: dict[str, Any] = {}

    def tensor(name: str):
        file = weight_map[name]
        if file not in handles:
            handles[file] = safe_open(str(source / file), framework="pt")
        return handles[file].get_tensor(name)

    new_map: dict[str, str] = {}
    counts = {"tensors": 0, "dequantized": 0, "shards": 0, "resumed_shards": 0}
    by_file: dict[str, list[str]] = {}
    for name, file in weight_map.items():
        by_file.setdefault(file, []).append(name)
    for file in sorted(by_file):
        if (target / file).is_file():
            # written by an interrupted earlier run (shards land by atomic rename): keep it
            with safe_open(str(target / file), framework="pt") as handle:
                new_map.update({key: file for key in handle.keys()})
            counts["resumed_shards"] += 1
            continue
        shard = {}
        for name in sorted(by_file[file]):
            if name.endswith(".scale") or name.endswith("_scale_inv"):
                continue
            value = tensor(name)
            stem = name[: -len(".weight")] if name.endswith(".weight") else None
            scale_name = next((s for s in (f"{stem}.scale", f"{name}_scale_inv") if stem and s in weight_map), None)
            if scale_name:
                value = dequantize(value, tensor(scale_name), torch.bfloat16)
                counts["dequantized"] += 1
            else:
                # norms, hc mixers, sinks, ape and the router bias stay fp32, as the model keeps them
                value = value.to(storage_dtype(name, value, torch.bfloat16))
            shard[name] = value.contiguous()
            new_map[name] = file
            counts["tensors"] += 1
        partial = target / f".{file}.tmp"
        save_file(shard, str(partial), metadata={"format": "pt"})
        os.replace(partial, target / file)
        counts["shards"] += 1
        handles.pop(file, None)  # keep at most the scale shards open
    write_json_atomic(target / "model.safetensors.index.json",
                      {"metadata": {"dequantized_from": str(source), "tensors": len(new_map)},
                       "weight_map": new_map})
    config_path = source / "config.json"
    if config_path.is_file():
        config = json.loads(config_path.read_text())
        config.pop("quantization_config", None)
        config["torch_dtype"] = "bfloat16"
        write_json_atomic(target / "config.json", config)
    for extra in source.iterdir():
        if extra.is_file() and extra.suffix in (".json", ".model", ".txt", ".jinja") and not (target / extra.name).exists():
            shutil.copyfile(extra, target / extra.name)
    return counts


# ---- checks --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _torch_npu_works() -> bool:
    """Detect by trying, in a child process: torch_npu can break `import torch` where CANN is missing."""
    try:
        result = subprocess.run([sys.executable, "-c", "import torch, torch_npu; assert torch.npu.is_available()"],
                                capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def missing_requirements(paths: Paths, stage: str, needs_conversion: bool, check_device: bool = True) -> list[str]:
    missing = []
    if paths.mindspeed_llm is None:
        missing.append("MindSpeed-LLM: set [mindspeed] mindspeed_llm_dir or $MINDSPEED_LLM_DIR to its source checkout")
    elif not paths.mindspeed_llm.is_dir():
        missing.append(f"MindSpeed-LLM checkout {paths.mindspeed_llm} does not exist")
    else:
        absent = [name for name in REQUIRED_FILES if not (paths.mindspeed_llm / name).is_file()]
        if absent:
            missing.append(f"{paths.mindspeed_llm} lacks {', '.join(absent)}: not a MindSpeed-LLM checkout")
    if check_device and not _torch_npu_works():
        missing.append("torch_npu with a working Ascend device (CANN) on this machine")
    if paths.tokenizer is None:
        missing.append("a tokenizer: set [mindspeed] tokenizer or hf_checkpoint")
    if needs_conversion:
        if paths.hf_source is None:
            missing.append("the base checkpoint: set [mindspeed] hf_checkpoint to the official DeepSeek-V4 folder")
        elif not paths.hf_source.is_dir():
            missing.append(f"the base checkpoint folder {paths.hf_source} does not exist")
    if not paths.data_source.exists():
        what = "trex data folder (run `trex data cpt`)" if stage == "cpt" else "synth folder (run `trex synth`)"
        missing.append(f"{stage.upper()} data {paths.data_source}: no such {what}")
    return missing


FLAG = re.compile(r"^--[a-z0-9][a-z0-9_-]*$")


def unknown_flags(script_texts: list[str], mindspeed_dir: Path) -> list[str]:
    """Rendered flags that appear nowhere in the installed MindSpeed-LLM / Megatron sources."""
    flags = sorted({word for text in script_texts for word in re.findall(r"--[a-z0-9][a-z0-9_-]*", text)
                    if FLAG.match(word)})
    torchrun_flags = {"--nproc_per_node", "--nnodes", "--node_rank", "--master_addr", "--master_port"}
    remaining = set(flags) - torchrun_flags
    for source in mindspeed_dir.rglob("*.py"):
        if not remaining:
            break
        try:
            text = source.read_text(errors="ignore")
        except OSError:
            continue
        remaining = {flag for flag in remaining if f"'{flag}'" not in text and f'"{flag}"' not in text}
    return sorted(remaining)


# ---- the engine ----------------------------------------------------------------------------------------


def run_mindspeed(stage: str, recipe, run_dir: Path, dry_run: bool) -> dict:
    """Prepare (and unless `dry_run`, run) stage `cpt` or `sft` through MindSpeed-LLM.

    Returns {"stage", "folder", "dry_run", "steps": [...in order...], "missing": [...], "scripts": [...],
    "estimate": {...}}; the same is written to `<folder>/steps.json`."""
    from trex_cli.artifacts import write_json_atomic, write_text_atomic
    from trex_cli.plan.clusters import load_cluster
    from trex_cli.plan.search import evaluate

    section: MindSpeedSection = recipe.section("mindspeed")
    config = recipe.section("model").build_config()
    shape = ModelShape.from_config(config)
    where = f"{recipe.path or 'recipe'}: [mindspeed]"
    job = check_section(section, shape, stage, where)
    if section.etp != 1:
        raise ValueError(f"{where} etp = {section.etp}: the Megatron -> HF export needs expert-tensor parallel 1 "
                         "(T-Rex folds experts with etp = 1); set etp = 1")
    run_dir = Path(run_dir)
    paths = resolve_paths(stage, section, run_dir)
    paths.folder.mkdir(parents=True, exist_ok=True)
    # Start from the converted base unless the stage is given a Megatron checkpoint (SFT after CPT).
    needs_conversion = paths.megatron_load == run_dir / "mindspeed" / "base-megatron"

    # The planner's estimate for this layout on the cluster this recipe plans for.
    plan_section = recipe.section("plan")
    cluster = load_cluster(plan_section.cluster)
    from trex_cli.plan.mfu import flops_per_token

    evaluation = evaluate(job, layout_of(section), cluster, flops_per_token(config, job.seq_len, "v4"))
    estimate = evaluation.as_dict()
    if not evaluation.feasible:
        warn(f"the planner estimates this layout does not fit {cluster.name}: " + "; ".join(evaluation.reasons))

    scripts_dir = paths.folder / "scripts"
    written: list[str] = []

    def write_script(name: str, text: str) -> Path:
        target = scripts_dir / name
        write_text_atomic(target, text)
        target.chmod(0o755)
        written.append(str(target))
        return target

    node_scripts = [write_script(f"node-{rank:02d}.sh",
                                 render_node_script(section, stage, rank, job, config, shape, paths))
                    for rank in range(section.nodes)]
    preprocess = write_script("preprocess.sh", render_preprocess(section, stage, paths))
    to_megatron = write_script("convert_hf_to_megatron.sh", render_convert_to_megatron(section, shape, paths))
    to_hf = write_script("convert_megatron_to_hf.sh", render_convert_to_hf(section, shape, paths))

    missing = missing_requirements(paths, stage, needs_conversion, check_device=True)
    if paths.mindspeed_llm and paths.mindspeed_llm.is_dir():
        flags = unknown_flags([p.read_text() for p in [*node_scripts, preprocess, to_megatron, to_hf]],
                              paths.mindspeed_llm)
        if flags:
            warn(f"flags not found in {paths.mindspeed_llm}: {' '.join(flags)} (set [mindspeed] extra_args or "
                 "check the DeepSeek-V4 example of your MindSpeed-LLM version)")

    quantized = bool(paths.hf_source and paths.hf_source.is_dir() and checkpoint_is_quantized(paths.hf_source))
    steps: list[dict[str, Any]] = [
        {"name": "export-data", "kind": "python",
         "action": f"export {paths.data_source} -> {paths.data_jsonl}",
         "status": "pending"},
        {"name": "preprocess-data", "kind": "shell", "script": str(preprocess), "status": "pending"},
    ]
    if needs_conversion:
        steps.append({"name": "dequantize-checkpoint", "kind": "python",
                      "action": (f"dequantize {paths.hf_source or '[mindspeed] hf_checkpoint'} (FP8/FP4) -> "
                                 f"{paths.hf_bf16} (BF16)" if quantized or paths.hf_source is None else
                                 f"{paths.hf_source} is BF16 already: link it as {paths.hf_bf16}"),
                      "status": "pending"})
        steps.append({"name": "convert-hf-to-megatron", "kind": "shell", "script": str(to_megatron),
                      "status": "pending"})
    steps.append({"name": "launch", "kind": "shell", "script": str(node_scripts[0]),
                  "scripts": [str(p) for p in node_scripts], "status": "pending"})
    steps.append({"name": "convert-megatron-to-hf", "kind": "shell", "script": str(to_hf), "status": "pending"})

    result = {"stage": stage, "engine": "mindspeed", "folder": str(paths.folder), "dry_run": dry_run,
              "world": job.world, "layout": layout_of(section).describe(), "steps": steps, "missing": missing,
              "scripts": written, "estimate": estimate}

    if dry_run:
        # Data export is local and cheap: do it when the data is there, so the folder is complete.
        if paths.data_source.exists():
            count = (export_cpt_jsonl if stage == "cpt" else export_sft_jsonl)(paths.data_source, paths.data_jsonl)
            steps[0]["status"] = f"done ({count} records)"
        for step in steps:
            if step["status"] == "pending":
                step["status"] = "would run"
        write_json_atomic(paths.folder / "steps.json", result)
        _print_summary(result)
        return result

    if missing:
        raise ValueError(f"cannot run MindSpeed-LLM here: missing {'; '.join(missing)}. Run with --dry-run to "
                         f"write the launch files to {paths.folder}")
    node_rank = int(os.environ.get("NODE_RANK", "0"))
    for step in steps:
        name = step["name"]
        if name == "export-data":
            count = (export_cpt_jsonl if stage == "cpt" else export_sft_jsonl)(paths.data_source, paths.data_jsonl)
            step["status"] = f"done ({count} records)"
        elif name == "dequantize-checkpoint":
            if quantized:
                counts = dequantize_checkpoint(paths.hf_source, paths.hf_bf16)
                step["status"] = f"done ({counts['dequantized']} tensors dequantized)"
            else:
                if not paths.hf_bf16.exists():
                    paths.hf_bf16.parent.mkdir(parents=True, exist_ok=True)
                    paths.hf_bf16.symlink_to(paths.hf_source.resolve())
                step["status"] = "done (already BF16)"
        else:
            script = node_scripts[node_rank] if name == "launch" else Path(step["script"])
            out.print(f"[bold]{name}[/bold]: bash {script}")
            status = subprocess.run(["bash", str(script)]).returncode
            step["status"] = "done" if status == 0 else f"failed (exit {status})"
            if status != 0:
                write_json_atomic(paths.folder / "steps.json", result)
                raise ValueError(f"MindSpeed step {name} failed with exit status {status}; see {paths.logs}")
        write_json_atomic(paths.folder / "steps.json", result)
    _print_summary(result)
    return result


def _print_summary(result: dict) -> None:
    from rich.markup import escape

    mode = "dry run" if result["dry_run"] else "run"
    out.print(f"[bold]MindSpeed-LLM {result['stage'].upper()} ({mode})[/bold]: {result['layout']} on "
              f"{result['world']} ranks; files in {result['folder']}")
    for number, step in enumerate(result["steps"], 1):
        target = step.get("script") or step.get("action")
        out.print(f"  {number}. {step['name']}: {step['status']}  {escape(str(target))}", highlight=False)
    for item in result["missing"]:
        out.print(f"  [yellow]missing:[/yellow] {escape(item)}", highlight=False)
