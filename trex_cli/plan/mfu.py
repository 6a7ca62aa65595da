"""MFU of a training step, under both FLOP conventions, with the peak named.

Model FLOPs per token come from the model package (`training_flops_per_token`, Megatron
convention: 6 x the matmul parameters a token uses, attention products with causal halving, the
output logits and MTP; recompute not counted). "v4" counts attention over what each V4 layer
attends to (window, CSA top-k, HCA entries, indexer scoring); "dense" counts full causal attention
over the sequence, as tools that do not know V4's sparsity would. MFU = model FLOPs per step /
(step time x ranks x peak bf16 FLOP/s per rank). `hfu_full_recompute` also counts the forward that
full recompute runs again (4/3 of the V4 count): the count under which T-Rex's Pro step of about 27 s
reads its published 34.22% (`trex plan --validate` compares the conventions).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trex_cli.plan.clusters import ClusterProfile
from trex_cli.plan.timing import RECOMPUTE_FACTOR

CONVENTIONS = ("v4", "dense")


def flops_per_token(config: Any, seq_len: int, attention: str = "v4") -> float:
    from trex_cli.models.deepseek_v4.flops import training_flops_per_token

    return float(training_flops_per_token(config, seq_len, attention=attention))


@dataclasses.dataclass
class MfuReport:
    ranks: int
    step_seconds: float
    seq_len: int
    global_batch: int
    tokens_per_step: int
    tokens_per_second: float
    peak_tflops_per_rank: float
    peak_name: str
    flops_per_token: dict[str, float]
    mfu: dict[str, float]
    hfu_full_recompute: float

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def compute_mfu(config: Any, ranks: int, step_seconds: float, seq_len: int, global_batch: int,
                cluster: ClusterProfile) -> MfuReport:
    for name, value in (("--ranks", ranks), ("--step-time", step_seconds), ("--seq", seq_len),
                        ("--global-batch", global_batch)):
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    tokens = global_batch * seq_len
    peak = cluster.peak_bf16_tflops * 1e12
    per_token = {c: flops_per_token(config, seq_len, c) for c in CONVENTIONS}
    mfu = {c: per_token[c] * tokens / (step_seconds * ranks * peak) for c in CONVENTIONS}
    return MfuReport(
        ranks=ranks, step_seconds=step_seconds, seq_len=seq_len, global_batch=global_batch,
        tokens_per_step=tokens, tokens_per_second=tokens / step_seconds,
        peak_tflops_per_rank=cluster.peak_bf16_tflops,
        peak_name=f"{cluster.description}: {cluster.peak_bf16_tflops:g} TFLOP/s bf16 dense per rank",
        flops_per_token=per_token, mfu=mfu, hfu_full_recompute=mfu["v4"] * RECOMPUTE_FACTOR["full"])
