"""Training step speed on CPU, side by side: trex's engine vs transformers' DeepseekV4ForCausalLM.

Both train the `small` DeepSeek-V4 flavor on the same batch of random tokens (batch x sequence), one
optimizer step = forward, backward and AdamW:
- trex: the native engine exactly as `trex train` runs it on one rank (bf16 compute copies of fp32
  master weights and AdamW states, as FSDP2's mixed precision computes them; LM + MTP + balance +
  indexer-KL losses, gradient norm, clipping, the expert-bias update), with the kernels the registry
  picks for this machine;
- transformers: its DeepseekV4ForCausalLM in bf16 with torch's AdamW. It builds no MTP layer and
  computes the LM loss only, so trex is also run on that same objective (MTP, balance and indexer-KL
  weights 0: no MTP block or second head in the step; the indexer, which learns from its KL loss
  alone, gets no gradient in either model, and trex runs it without autograd), the like-for-like
  comparison the target is set on;
  the full-objective row shows what the recipe's extra losses cost.

Each side runs in its own fresh process, one after the other, so peak memory (max RSS) is its own and
neither competes with the other for the cores; the sides take turns over two rounds and each side's
figure is its fastest timed step. MFU is
model FLOPs per second (the model's Megatron count for this sequence length) over the bf16 matmul
peak measured at the start of this run.

The trex process sets its host allocator policy as `trex train` does (trex_cli/host_memory.py:
freed memory stays in the process). For transparency transformers is also run a second time under
that same policy, so the table shows how much of the ratio is the engine and how much the allocator.
"""

from __future__ import annotations

import json
import multiprocessing
import resource
import time

SEQ_LEN, BATCH, STEPS, WARMUP, ROUNDS = 1024, 4, 3, 2, 2
QUICK = {"seq_len": 256, "batch": 2, "steps": 2, "warmup": 2}


def _small_config():
    from trex_cli.models.deepseek_v4.config import get_flavor

    return get_flavor("small")


def _batch(config, batch: int, seq_len: int):
    import torch

    generator = torch.Generator().manual_seed(0)
    return torch.randint(3, config.vocab_size, (batch, seq_len), generator=generator)


def _trex_side(batch: int, seq_len: int, steps: int, warmup: int, full_objective: bool, queue) -> None:
    import torch

    from trex_cli.train.config import ParallelSection, StageSchedule, TrainSection
    from trex_cli.train.data import MicroBatch
    from trex_cli.train.distributed import init_distributed
    from trex_cli.train.trainer import Engine, build_model

    config = _small_config()
    input_ids = _batch(config, batch, seq_len)
    micro = MicroBatch(input_ids, torch.arange(seq_len).repeat(batch, 1), torch.ones(batch, seq_len))
    distributed = init_distributed(ParallelSection())
    # not full_objective: the baseline's objective, the LM loss alone
    weights = {} if full_objective else {"mtp_loss_weight": 0.0, "balance_loss_weight": 0.0, "indexer_kl_weight": 0.0}
    train = TrainSection(dtype="bf16", **weights)
    schedule = StageSchedule(lr=1e-4, min_lr=1e-5, warmup_steps=1, max_steps=100, global_batch_size=batch, micro_batch_size=batch)
    engine = Engine(build_model(config, None, seed=0), train, schedule, distributed, seq_len, 1)
    times = []
    for index in range(warmup + steps):
        started = time.perf_counter()
        result = engine.step([micro])
        if index >= warmup:
            times.append(time.perf_counter() - started)
    distributed.close()
    queue.put({"seconds": min(times), "loss": result.loss, "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024})


def _transformers_side(batch: int, seq_len: int, steps: int, warmup: int, keep_freed_memory: bool, queue) -> None:
    if keep_freed_memory:
        from trex_cli.host_memory import keep_freed_memory as apply_policy

        apply_policy()
    import torch
    import transformers

    config = _small_config()
    input_ids = _batch(config, batch, seq_len)
    torch.manual_seed(0)
    hf_config = transformers.DeepseekV4Config(**config.to_hf_dict())
    model = transformers.DeepseekV4ForCausalLM(hf_config).to(torch.bfloat16).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    times = []
    for index in range(warmup + steps):
        started = time.perf_counter()
        loss = model(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if index >= warmup:
            times.append(time.perf_counter() - started)
    queue.put({"seconds": min(times), "loss": float(loss.detach()), "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024})


def _in_fresh_process(target, *args) -> dict:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=target, args=(*args, queue))
    process.start()
    result = queue.get(timeout=900)
    process.join()
    return result


def run(quick: bool = False) -> list[dict]:
    import torch

    from trex_cli.models.deepseek_v4.flops import training_flops_per_token
    from trex_cli.train.metrics import measure_matmul_peak

    batch, seq_len, steps, warmup = (
        (QUICK["batch"], QUICK["seq_len"], QUICK["steps"], QUICK["warmup"]) if quick else (BATCH, SEQ_LEN, STEPS, WARMUP)
    )
    config = _small_config()
    peak = measure_matmul_peak(torch.device("cpu"), torch.bfloat16)
    tokens = batch * seq_len
    sides = {
        "trex": (_trex_side, False), "trex_full": (_trex_side, True),
        "baseline": (_transformers_side, False), "same_allocator": (_transformers_side, True),
    }
    # Rounds of all four sides in turn, each side's best: the machine's speed drifts over minutes,
    # and interleaving gives every side the same share of fast and slow stretches.
    runs: dict[str, list[dict]] = {name: [] for name in sides}
    for _round in range(1 if quick else ROUNDS):
        for name, (target, option) in sides.items():
            runs[name].append(_in_fresh_process(target, batch, seq_len, steps, warmup, option))
    # fastest step of any round; peak memory: the highest of the rounds
    trex, trex_full, baseline, same_allocator = (
        {"seconds": min(r["seconds"] for r in results), "max_rss": max(r["max_rss"] for r in results)}
        for results in runs.values()
    )
    # model FLOPs of the work each step does: the LM-loss steps have no MTP block or head
    flops = training_flops_per_token(config, seq_len, attention="v4", include_mtp=False)
    full_flops = training_flops_per_token(config, seq_len, attention="v4", include_mtp=True)
    trex_speed, baseline_speed = tokens / trex["seconds"], tokens / baseline["seconds"]
    full_speed = tokens / trex_full["seconds"]
    same_allocator_speed = tokens / same_allocator["seconds"]
    shape = f"small, {batch}x{seq_len}, bf16, CPU"
    return [
        {
            "benchmark": "train", "figure": f"training step tokens/s ({shape}), LM loss as the baseline",
            "value": trex_speed, "unit": "tokens/s",
            "baseline": "transformers DeepseekV4ForCausalLM + torch AdamW", "baseline_value": baseline_speed,
            "ratio": trex_speed / baseline_speed, "target": ">= 3x",
        },
        {
            "benchmark": "train",
            "figure": f"training step tokens/s ({shape}), trex's full objective (+ MTP block and head, balance, indexer KL)",
            "value": full_speed, "unit": "tokens/s",
            "baseline": "transformers DeepseekV4ForCausalLM + torch AdamW (LM loss)", "baseline_value": baseline_speed,
            "ratio": full_speed / baseline_speed, "target": "",
        },
        {
            "benchmark": "train", "figure": f"training step tokens/s ({shape}), baseline under trex's allocator policy",
            "value": trex_speed, "unit": "tokens/s",
            "baseline": "transformers + torch AdamW, freed memory kept in the process", "baseline_value": same_allocator_speed,
            "ratio": trex_speed / same_allocator_speed, "target": "",
        },
        {
            "benchmark": "train", "figure": f"MFU vs measured bf16 matmul peak {peak / 1e9:.0f} GFLOP/s", "value": 100 * trex_speed * flops / peak,
            "unit": "%", "baseline": "transformers", "baseline_value": 100 * baseline_speed * flops / peak,
            "ratio": trex_speed / baseline_speed, "target": "",
        },
        {
            "benchmark": "train", "figure": "MFU of trex's full-objective step (model FLOPs incl. MTP)",
            "value": 100 * full_speed * full_flops / peak, "unit": "%", "baseline": "", "baseline_value": "",
            "ratio": "", "target": "",
        },
        {
            "benchmark": "train", "figure": "peak memory (max RSS of the process)", "value": trex["max_rss"] / 2**30, "unit": "GiB",
            "baseline": "transformers", "baseline_value": baseline["max_rss"] / 2**30,
            "ratio": trex["max_rss"] / baseline["max_rss"], "target": "",
        },
        {
            "benchmark": "train", "figure": "peak memory of trex's full-objective step (max RSS)",
            "value": trex_full["max_rss"] / 2**30, "unit": "GiB", "baseline": "transformers",
            "baseline_value": baseline["max_rss"] / 2**30, "ratio": trex_full["max_rss"] / baseline["max_rss"], "target": "",
        },
    ]


if __name__ == "__main__":
    import sys

    from rich.console import Console
    from rich.table import Table

    rows = run(quick="--quick" in sys.argv)
    columns = ("figure", "value", "unit", "baseline", "baseline_value", "ratio", "target")
    table = Table(title="bench_train")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(f"{row[c]:.3g}" if isinstance(row[c], float) else str(row[c]) for c in columns))
    Console().print(table)
    print(json.dumps(rows))
