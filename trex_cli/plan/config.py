"""The planner's recipe table, `[plan]`: what to plan for (cluster, ranks, sequence, global batch)
and, optionally, a layout to check. (`[mindspeed]`, the MindSpeed-LLM engine's table, lives in
`trex_cli.train.engines.mindspeed.config`.)"""

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
