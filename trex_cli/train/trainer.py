"""The native training loop for `trex train cpt|sft`: build, parallelize, load, loop (step, log, save), export.

Every rank runs `run_training`. No rank builds the whole model: each builds it on the meta device, cuts
its pipeline stages, applies TP / EP / ETP, activation checkpointing and FSDP2 (`Engine`), and only
then gives its own shards storage and fills them (`meta_init.materialize`): from the init checkpoint,
reading only the slices it owns (`sharded_load.py`), or with the random init, which draws every tensor
(every routed expert) from a generator seeded by (seed, name[, expert]), so a one-process run and every
layout start from the same weights (`models/deepseek_v4/initialization.py`). A resume only allocates:
the DCP checkpoint then fills every tensor.

One optimizer step:
1. the global batch for this step (a pure function of the step: see data.py) is cut into this
   data-parallel rank's micro-batches;
2. each micro-batch's losses are scaled by its share of the global batch (the LM and MTP losses by
   its share of the global batch's targets, so they are token-weighted exactly as one big batch; the
   per-sequence balance loss and the indexer KL by 1 / number of micro-batches over all ranks) and
   back-propagated; FSDP sums the gradients over ranks, once per step after the last micro-batch
   (`[train.parallel] gradient_sync`; a pipeline's schedule defers it the same way), so any layout computes the same gradient as
   one process walking the whole batch (context-parallel ranks each do this for their chunk of the
   rows: context_parallel.py);
3. the global gradient norm is checked (NaN/Inf: skip the step and count it; too many in a row:
   stop), gradients are clipped, AdamW steps on the fp32 master weights (right before, an optimizer
   pre-step hook moves the routing bias of every learned gate by the aux-loss-free rule on the global
   expert load: expert_bias.py) and the LR schedule advances.

Every `eval_every` steps (and at the last) the validation split's LM and MTP loss is computed in eval
mode, token-weighted the same way. The trainer's own state (step, schedule, NaN counters) is checkpointed beside the model and
optimizer, so re-running the same command resumes from the last checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule

from trex_cli.console import out
from trex_cli.host_memory import peak_rss_kib, start_peak_measurement
from trex_cli.models.deepseek_v4.model import total_loss
from trex_cli.train.checkpoint import Checkpointer
from trex_cli.train.config import StageSchedule, TrainSection
from trex_cli.train.data import MicroBatch, TrainData, check_batch_sizes
from trex_cli.train.distributed import Distributed
from trex_cli.train.expert_bias import ExpertBiasUpdate
from trex_cli.train.job import TrainJob
from trex_cli.train.meta_init import InitialWeights, materialize, meta_model
from trex_cli.train.metrics import MetricsLogger, device_peak, flops_per_token, peak_memory_bytes
from trex_cli.train.optim import build_optimizer, build_scheduler, clip_gradients, global_grad_norm
from trex_cli.train.parallelize import one_rank_mixed_precision, parallelize

COMPUTE_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


class TrainingDiverged(RuntimeError):
    """Too many non-finite steps in a row."""


@dataclasses.dataclass
class StepResult:
    loss: float
    lm_loss: float
    mtp_loss: float | None
    balance_loss: float | None
    indexer_kl_loss: float | None
    grad_norm: float
    skipped: bool
    target_tokens: int


def target_count(batch: MicroBatch, shift: int = 1, sequence=None) -> int:
    """Targets the model's LM (shift 1) or MTP (shift 2) loss averages over: masked-in tokens predicted
    from `shift` positions earlier in the same document (the model's own rule); under context parallel
    (`sequence`, this rank's `SequenceShard`) those its chunk's positions predict."""
    from trex_cli.models.deepseek_v4 import kernels
    from trex_cli.train.context_parallel import chunk_target_count

    documents = kernels.document_ids(batch.position_ids)
    keep = (batch.loss_mask[:, shift:] > 0) & (documents[:, shift:] == documents[:, :-shift])
    return chunk_target_count(keep, shift, sequence)


def _share(part: int, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def build_model(config, init_path: Path | None, seed: int) -> torch.nn.Module:
    """The whole fp32 master model in this process: the random init of `seed`, or the weights of
    `init_path` (the MTP block from random init when the checkpoint has none). The same values the
    trainer gives any multi-rank layout, built the same way: on the meta device, then materialized."""
    model = meta_model(config)
    materialize(model, InitialWeights(init_path, seed), torch.device("cpu"), torch.device("cpu"))
    return model


class Engine:
    """A parallelized model with its optimizer and schedule: one `step()` is one optimizer step.

    `model` is either a built model (`build_model`: moved to the device, then sharded) or, as the
    trainer passes it, one on the meta device (`meta_init.meta_model`): then this rank cuts its pipeline
    stages and shards it first, and only then allocates its own shards and fills them as `weights`
    says, so no rank ever holds the whole model."""

    def __init__(
        self,
        model: torch.nn.Module,
        train: TrainSection,
        schedule: StageSchedule,
        distributed: Distributed,
        seq_len: int,
        micro_batches: int,
        weights: InitialWeights | None = None,
    ):
        self.train = train
        self.schedule = schedule
        self.distributed = distributed
        self.compute_dtype = COMPUTE_DTYPES[train.dtype]
        dims = distributed.dims
        on_meta = any(p.device.type == "meta" for p in model.parameters())
        if on_meta != (weights is not None):
            raise ValueError("Engine: a meta-device model needs its InitialWeights, a built model takes none")
        # context parallel: this rank's chunk of every row (context_parallel.py); None without
        dims.check_sequence_length(seq_len)
        self.sequence = None
        if dims.cp > 1:
            from trex_cli.train.context_parallel import sequence_shard

            self.sequence = sequence_shard(seq_len, distributed.dense_mesh["cp"].get_group())
        self.pipeline = None
        if dims.pp > 1:
            from trex_cli.train.pipeline_parallel import build_pipeline

            self.pipeline, make_schedule = build_pipeline(
                model, distributed, train, seq_len, micro_batches, schedule.micro_batch_size, self.compute_dtype,
                self.sequence,
            )
        self.model = parallelize(
            model if on_meta else model.to(distributed.device), distributed, train.parallel, self.compute_dtype
        )
        # what this rank read of the init checkpoint, per tensor name (empty: random init or a built model)
        self.bytes_read: dict[str, int] = {}
        if on_meta:
            # FSDP2's CPU offload keeps the sharded parameters in host memory from the start
            home = torch.device("cpu") if train.parallel.offload_optimizer else distributed.device
            self.bytes_read = materialize(self.model, weights, home, distributed.device)
        self.mixed_precision = one_rank_mixed_precision(self.model, distributed, train.parallel, self.compute_dtype)
        self.model.train()
        if self.pipeline is not None:
            self.pipeline_schedule = make_schedule(self.model)
        self.optimizer = build_optimizer(self.model, train, schedule)
        # aux-loss-free balancing: the routing bias moves right before each optimizer step, on the tokens
        # every gate routed in the step's forwards, summed over the ranks (tensor-parallel ranks count
        # the same tokens unless sequence parallel gives each its own; pipeline stages count their own
        # blocks' rows)
        self.expert_bias = ExpertBiasUpdate(
            self.model, train.expert_bias_update_rate, dims.routing_replicas, distributed.device
        )
        self.expert_bias.register(self.optimizer)
        self.scheduler = build_scheduler(self.optimizer, schedule)
        self.parameters = [p for p in self.model.parameters() if p.requires_grad]
        self.replicas_of_data = dims.data_replicas  # ranks that see the same micro-batches
        self.bad_steps_in_a_row = 0
        self.skipped_steps = 0

    def _world_sum(self, values: list[float], replicas: int | None = None) -> list[float]:
        """Sum over all ranks, divided by how many ranks hold each contribution."""
        tensor = torch.tensor(values, dtype=torch.float64, device=self.distributed.device)
        if dist.get_world_size() > 1:
            dist.all_reduce(tensor)
        return (tensor / (replicas or self.replicas_of_data)).cpu().tolist()

    def _gradient_sync(self, last_micro_batch: bool) -> None:
        """Under FSDP with `gradient_sync = "step"`, reduce-scatter (and, across replicas, all-reduce)
        only in the last micro-batch's backward: the earlier ones add into each unit's unsharded fp32
        gradient, which the last one's collective then reduces with its own."""
        if isinstance(self.model, FSDPModule):
            self.model.set_requires_gradient_sync(last_micro_batch or self.train.parallel.gradient_sync == "micro_batch")

    def _forward_backward(self, micro_batches: list[MicroBatch], global_targets: tuple[float, float]):
        """Plain (no pipeline) accumulation over this rank's micro-batches."""
        train, device = self.train, self.distributed.device
        mean_share = 1.0 / (len(micro_batches) * self.distributed.dims.dp)
        sums = {"lm": 0.0, "mtp": 0.0, "balance": 0.0, "kl": 0.0}
        seen = set()
        for index, batch in enumerate(micro_batches):
            self._gradient_sync(index == len(micro_batches) - 1)
            lm_share = _share(target_count(batch, 1, self.sequence), global_targets[0])
            mtp_share = _share(target_count(batch, 2, self.sequence), global_targets[1])
            batch = batch.to(device)
            with self.mixed_precision.compute() if self.mixed_precision else contextlib.nullcontext():
                output = self.model(
                    batch.input_ids,
                    position_ids=batch.position_ids,
                    loss_mask=batch.loss_mask,
                    mtp_loss_weight=train.mtp_loss_weight,
                    balance_loss_weight=train.balance_loss_weight,
                    indexer_kl_weight=train.indexer_kl_weight,
                    sequence=self.sequence,
                )
                loss = total_loss(
                    output.lm_loss, output.mtp_loss, output.balance_loss, output.indexer_kl_loss,
                    mtp_weight=train.mtp_loss_weight, balance_weight=train.balance_loss_weight,
                    indexer_kl_weight=train.indexer_kl_weight, shares=(lm_share, mtp_share, mean_share),
                )
                sums["lm"] += float(output.lm_loss.detach()) * lm_share
                for key, value, share in (
                    ("mtp", output.mtp_loss, mtp_share),
                    ("balance", output.balance_loss, mean_share),
                    ("kl", output.indexer_kl_loss, mean_share),
                ):
                    if value is not None:
                        seen.add(key)
                        sums[key] += float(value.detach()) * share
                loss.backward()
        return sums, seen, self.replicas_of_data

    def _pipeline_forward_backward(self, micro_batches: list[MicroBatch], global_targets: tuple[float, float]):
        """The pipeline schedule over the micro-batches (every stage reads the same ones)."""
        from trex_cli.train.pipeline_parallel import StageStatistics

        runner, device = self.pipeline, self.distributed.device
        mean_share = 1.0 / (len(micro_batches) * self.distributed.dims.dp)
        runner.statistics = StageStatistics()
        for batch in micro_batches:
            runner.push(
                batch.to(device),
                (
                    _share(target_count(batch, 1, self.sequence), global_targets[0]),
                    _share(target_count(batch, 2, self.sequence), global_targets[1]),
                    mean_share,
                ),
            )
        if runner.is_first:
            self.pipeline_schedule.step(torch.cat([b.input_ids for b in micro_batches]).to(device))
        elif runner.is_last:
            rows = sum(b.input_ids.shape[0] for b in micro_batches)
            self.pipeline_schedule.step(target=torch.zeros(rows, device=device), losses=[], return_outputs=False)
        else:
            self.pipeline_schedule.step()
        statistics = runner.statistics
        sums = {"lm": statistics.lm, "mtp": statistics.mtp, "balance": statistics.balance, "kl": statistics.kl}
        seen = {"balance"} | ({"mtp"} if self.model.config.num_nextn_predict_layers else set())
        if runner.indexer_layers_total and self.train.indexer_kl_weight > 0:
            seen.add("kl")
        # each stage holds different parts of these: only tensor-parallel ranks repeat them
        return sums, seen, self.distributed.dims.tp

    def step(self, micro_batches: list[MicroBatch]) -> StepResult:
        train = self.train
        global_targets = tuple(
            self._world_sum([float(sum(target_count(b, shift, self.sequence) for b in micro_batches)) for shift in (1, 2)])
        )
        run = self._pipeline_forward_backward if self.pipeline is not None else self._forward_backward
        sums, seen, replicas = run(micro_batches, global_targets)
        sequence_parallel = getattr(self.model, "sequence_parallel_gradients", None)
        if sequence_parallel is not None:  # parameters each TP rank used on its own positions only
            sequence_parallel.sum_over_tensor_ranks(self.model)
        totals = dict(zip(sums, self._world_sum(list(sums.values()), replicas), strict=True))
        loss = totals["lm"] + sum(
            weight * totals[key]
            for key, weight in (
                ("mtp", train.mtp_loss_weight), ("balance", train.balance_loss_weight), ("kl", train.indexer_kl_weight),
            )
        )
        grad_norm = float(global_grad_norm(self.parameters, self.distributed.dims.ranks_per_stage))
        finite = math.isfinite(grad_norm) and math.isfinite(loss)
        if finite:
            self.bad_steps_in_a_row = 0
            clip_gradients(self.parameters, torch.tensor(grad_norm), train.clip_grad_norm)
            self.optimizer.step()  # its pre-step hook moves the routing bias (self.expert_bias)
            self.scheduler.step()
        else:
            self.bad_steps_in_a_row += 1
            self.skipped_steps += 1
            self.expert_bias.reset()  # the skipped step's routing counts go with it; the bias stays
        self.optimizer.zero_grad(set_to_none=True)
        if self.bad_steps_in_a_row >= max(1, train.max_bad_steps):
            raise TrainingDiverged(
                f"{self.bad_steps_in_a_row} steps in a row had a non-finite loss or gradient; stopping "
                "(lower the learning rate, or raise [train] max_bad_steps)"
            )
        return StepResult(
            loss=loss,
            lm_loss=totals["lm"],
            mtp_loss=totals["mtp"] if "mtp" in seen else None,
            balance_loss=totals["balance"] if "balance" in seen else None,
            indexer_kl_loss=totals["kl"] if "kl" in seen else None,
            grad_norm=grad_norm,
            skipped=not finite,
            target_tokens=int(global_targets[0]),
        )

    @torch.no_grad()
    def evaluate(self, passes: list[list[MicroBatch]]) -> dict:
        """Validation LM and MTP loss over these global batches (this rank's micro-batches of each),
        token-weighted over all ranks exactly as the training loss; the model is not updated."""
        train, device = self.train, self.distributed.device
        batches = [batch for micro_batches in passes for batch in micro_batches]
        targets = self._world_sum([float(sum(target_count(b, shift, self.sequence) for b in batches)) for shift in (1, 2)])
        sums = [0.0, 0.0]
        has_mtp = False
        self.model.eval()  # eval mode: no balance loss, indexer KL or routing statistics
        try:
            for batch in batches:
                shares = (
                    _share(target_count(batch, 1, self.sequence), targets[0]),
                    _share(target_count(batch, 2, self.sequence), targets[1]),
                )
                batch = batch.to(device)
                with self.mixed_precision.compute() if self.mixed_precision else contextlib.nullcontext():
                    output = self.model(
                        batch.input_ids, position_ids=batch.position_ids, loss_mask=batch.loss_mask,
                        mtp_loss_weight=train.mtp_loss_weight, balance_loss_weight=0.0, indexer_kl_weight=0.0,
                        sequence=self.sequence,
                    )
                sums[0] += float(output.lm_loss) * shares[0]
                if output.mtp_loss is not None:
                    has_mtp = True
                    sums[1] += float(output.mtp_loss) * shares[1]
        finally:
            self.model.train()
        lm_loss, mtp_loss = self._world_sum(sums)
        return {
            "loss": lm_loss + (train.mtp_loss_weight * mtp_loss if has_mtp else 0.0),
            "lm_loss": lm_loss,
            "mtp_loss": mtp_loss if has_mtp else None,
            "target_tokens": int(targets[0]),
        }

    def state(self, step: int) -> dict:
        return {
            "step": step,
            "scheduler": self.scheduler.state_dict(),
            "bad_steps_in_a_row": self.bad_steps_in_a_row,
            "skipped_steps": self.skipped_steps,
        }

    def load_state(self, state: dict) -> int:
        self.scheduler.load_state_dict(state["scheduler"])
        self.bad_steps_in_a_row = state["bad_steps_in_a_row"]
        self.skipped_steps = state["skipped_steps"]
        return int(state["step"])


def export_checkpoint(checkpoint: Path, config, target: Path, tokenizer_dir: Path | None) -> Path:
    """Write a DCP checkpoint in the official HF layout (bf16), one output file at a time: each file's
    tensors are read from the checkpoint alone (DCP reads only the requested keys and reshards from any
    training layout: FSDP, TP, EP slices, pipeline stages), so no process ever holds the whole model."""
    import torch.distributed.checkpoint as dcp

    from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
    from trex_cli.models.deepseek_v4.state_dict_adapter import export_hf_by_shard

    with torch.device("meta"):
        specs = DeepseekV4ForCausalLM(config).state_dict()

    def read(names: list[str]) -> dict[str, torch.Tensor]:
        state = {name: torch.empty_like(specs[name], device="cpu") for name in names}
        with warnings.catch_warnings():  # DCP warns that no_dist means one process: that is the intent here
            warnings.filterwarnings("ignore", message="torch.distributed is disabled", category=UserWarning)
            dcp.load({"model": state}, checkpoint_id=str(checkpoint), no_dist=True)
        return state

    tokenizer = tokenizer_dir if tokenizer_dir and tokenizer_dir.is_dir() else None
    return export_hf_by_shard(config, specs, read, target, tokenizer_dir=tokenizer)


def export_random_init(config, seed: int, target: Path, tokenizer_dir: Path | None) -> int:
    """Write the random init of `seed` (the trainer's own: `initialization.py`) in the official HF
    layout (bf16), one output file at a time: each tensor is drawn by name when its file is written, so
    no process holds the whole model. Returns the parameter count."""
    from trex_cli.models.deepseek_v4.initialization import initial_block
    from trex_cli.models.deepseek_v4.state_dict_adapter import export_hf_by_shard

    model = meta_model(config)
    specs = model.state_dict()

    def draw(names: list[str]) -> dict[str, torch.Tensor]:
        return {name: initial_block(config, name, tuple(specs[name].shape), seed).to(specs[name].dtype) for name in names}

    export_hf_by_shard(config, specs, draw, target, tokenizer_dir=tokenizer_dir)
    return sum(p.numel() for p in model.parameters())


def _validation_data(job: TrainJob, train: TrainSection, engine: Engine, is_main: bool) -> TrainData | None:
    """The data folder's validation split, or None (with a note on rank 0) when validation is off,
    the split is empty, or the layout is pipelined (its forward-only schedule is not built yet)."""
    if train.eval_every == 0:
        return None
    reason = None
    meta_rows = TrainData.validation_rows(job.data_folder)
    if engine.pipeline is not None:
        reason = "pipeline-parallel layouts do not compute it yet"
    elif meta_rows == 0 or not (job.data_folder / "validation").is_dir():
        reason = f"{job.data_folder / 'validation'} has no rows (raise \\[data] validation_share)"
    if reason is not None:
        if is_main:
            out.print(f"validation loss is off: {reason}", highlight=False)
        return None
    return TrainData(job.data_folder, split="validation")


# A folder: each rank writes rank<r>.json there, what building and loading its model cost it (tests)
BUILD_MEMORY_ENV = "TREX_BUILD_MEMORY_DIR"


def _record_build_memory(folder: Path, rank: int, before_kib: int, engine: Engine) -> None:
    """This rank's host memory growth while it cut, sharded, allocated and loaded its model (peak RSS
    minus RSS before, KiB), the largest routed-expert block it holds (elements, with the whole stack's)
    and the most it read of any one expert stack from the init checkpoint (bytes). The meta build before
    holds no storage; what it costs is torch's meta kernels, modules (torch._dynamo among them, about
    100 MB) a process loads once whatever the model's size, so it is measured apart from it."""
    growth = peak_rss_kib() - before_kib
    largest, stack = 0, 0
    for name, parameter in engine.model.named_parameters():
        if ".ffn.experts." in name:
            local = parameter.to_local() if hasattr(parameter, "to_local") else parameter
            if local.numel() > largest:
                largest, stack = local.numel(), parameter.numel()
    read = max((count for name, count in engine.bytes_read.items() if ".ffn.experts." in name), default=0)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"rank{rank}.json").write_text(json.dumps({
        "growth_kib": growth, "expert_local_elements": largest, "expert_stack_elements": stack,
        "expert_bytes_read": read,
    }))


def run_training(job: TrainJob, distributed: Distributed) -> dict:
    """Train one stage on this rank; returns the summary (rank 0 also writes the stage's files)."""
    import warnings

    from trex_cli.models.deepseek_v4.config import DeepseekV4Config

    # FSDP2 warns once per unit whose output is a view (the MTP block's); nothing edits it in place.
    warnings.filterwarnings("ignore", message=".*returned a view tensor.*", category=UserWarning)
    train, schedule = job.train, job.schedule
    import ascend_kernels

    # the recipe (or TREX_KERNELS) forces the kernel backend; the plan is shown once, at start
    kernel_plan = ascend_kernels.configure(train.kernels or None)
    if distributed.is_main:
        out.print("kernels: " + ", ".join(f"{op}={choice}" for op, choice in kernel_plan.items()), highlight=False)
    config = DeepseekV4Config(**job.model_config)
    data = TrainData(job.data_folder)
    if data.vocab_size > config.vocab_size:
        raise ValueError(
            f"{job.data_folder}: the tokenizer has {data.vocab_size} tokens but the model only "
            f"{config.vocab_size}; use a model with a larger vocabulary or rebuild the data"
        )
    accumulation = check_batch_sizes(
        schedule.global_batch_size, schedule.micro_batch_size, distributed.dims.dp, f"[train.{job.stage}]"
    )
    checkpointer = Checkpointer(job.stage_folder / "checkpoints", train.keep_last, distributed.rank)
    latest = checkpointer.resume_point()
    # Built on the meta device, cut and sharded, then only this rank's shards get storage and weights;
    # a resume loads every tensor from its checkpoint, so then they only get storage.
    weights = InitialWeights(job.init_path, train.seed, storage_only=latest is not None)
    model = meta_model(config)
    memory_record = os.environ.get(BUILD_MEMORY_ENV)
    before = start_peak_measurement() if memory_record else 0
    engine = Engine(model, train, schedule, distributed, data.seq_len, accumulation, weights)
    if memory_record:
        _record_build_memory(Path(memory_record), distributed.rank, before, engine)
    start_step = 0
    if latest is not None:
        start_step = engine.load_state(checkpointer.load(latest, engine.model, engine.optimizer))
        if distributed.is_main:
            out.print(f"resuming from {latest} (step {start_step})")
    # Calibrate on rank 0 alone: ranks that share a CPU would otherwise measure each other.
    peak = [0.0, ""]
    if distributed.is_main:
        peak = list(device_peak(distributed.device, engine.compute_dtype))
    dist.broadcast_object_list(peak, src=0)
    peak_flops, peak_name = float(peak[0]), str(peak[1])
    flops = flops_per_token(config, data.seq_len)
    validation = _validation_data(job, train, engine, distributed.is_main)
    metrics = MetricsLogger(
        job.stage_folder, distributed.is_main, schedule.max_steps, start_step, train.log_every,
        report_to=train.report_to, wandb_project=train.wandb_project,
        run_name=f"{job.stage_folder.parent.parent.name}-{job.stage}", run_config=job.fingerprint_config,
        show_progress=job.show_progress,
    )
    # torch.compile (cpu) and Triton kernels compile on their first call: say so before a silent first step
    compiles = sorted({choice for choice in kernel_plan.values() if choice in ("cpu", "triton")})
    if distributed.is_main:
        out.print(
            f"train {job.stage}: {schedule.max_steps} steps, global batch {schedule.global_batch_size} x "
            f"{data.seq_len} tokens, {accumulation} micro-batch(es) of {schedule.micro_batch_size} per rank, "
            f"layout {dataclasses.asdict(distributed.dims)}, {train.dtype} on {distributed.device.type}; "
            f"MFU against {peak_name}",
            highlight=False,
        )
    tokens_per_step = schedule.global_batch_size * data.seq_len
    result = None
    try:
        for step in range(start_step, schedule.max_steps):
            batches = data.micro_batches(
                step, schedule.global_batch_size, schedule.micro_batch_size,
                distributed.dp_rank, distributed.dims.dp, train.seed,
            )
            first_in_process = step == start_step
            if first_in_process and compiles and distributed.is_main:
                out.print(
                    f"step {step + 1}: compiling kernels ({', '.join(compiles)}; first run, minutes on a cold "
                    "cache; later steps and runs reuse them)",
                    highlight=False,
                )
            started = time.perf_counter()
            lr = engine.scheduler.get_last_lr()[0]
            result = engine.step(batches)
            seconds = time.perf_counter() - started
            tokens_per_s = tokens_per_step / seconds
            record = {
                "step": step + 1,
                "loss": result.loss,
                "lm_loss": result.lm_loss,
                "mtp_loss": result.mtp_loss,
                "balance_loss": result.balance_loss,
                "indexer_kl_loss": result.indexer_kl_loss,
                "grad_norm": result.grad_norm,
                "lr": lr,
                "tokens": tokens_per_step,
                "target_tokens": result.target_tokens,
                "step_time_s": seconds,
                "tokens_per_s": tokens_per_s,
                "skipped": result.skipped,
                "skipped_total": engine.skipped_steps,
                "peak_memory_bytes": peak_memory_bytes(distributed.device),
                "peak": peak_name,
            }
            for kind, per_token in flops.items():
                record[f"mfu_{kind}"] = (
                    tokens_per_s * per_token / (peak_flops * distributed.world_size) if per_token else None
                )
            metrics.log(record)
            if validation is not None and ((step + 1) % train.eval_every == 0 or step + 1 == schedule.max_steps):
                validation_started = time.perf_counter()
                values = engine.evaluate(validation.validation_batches(
                    schedule.global_batch_size, schedule.micro_batch_size, distributed.dp_rank,
                    distributed.dims.dp, train.eval_steps,
                ))
                metrics.log_validation({"step": step + 1, **values, "seconds": time.perf_counter() - validation_started})
            if (step + 1) % train.save_every == 0 or step + 1 == schedule.max_steps:
                checkpointer.save(step + 1, engine.model, engine.optimizer, engine.state(step + 1))
    finally:
        metrics.close()
    hf_folder = job.stage_folder / "hf"
    if distributed.is_main:
        export_checkpoint(checkpointer.latest(), config, hf_folder, data.tokenizer_dir)
    dist.barrier()
    summary = {
        "steps": schedule.max_steps,
        "resumed_from": start_step,
        "skipped_steps": engine.skipped_steps,
        "tokens": schedule.max_steps * tokens_per_step,
        "final_loss": result.loss if result is not None else None,
        "hf": str(hf_folder),
        "layout": dataclasses.asdict(distributed.dims),
    }
    return summary
