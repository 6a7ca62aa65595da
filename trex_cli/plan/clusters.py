"""Cluster profiles: what one rank can compute and hold, and how fast ranks talk to each other.

A profile describes one training rank (an Ascend 910C die, an H100, a CPU process) and the links
between ranks at three distances: inside a node, inside the scale-up domain (the CloudMatrix384
unified bus joins 384 chips; NVLink joins the 8 GPUs of an HGX node), and across the scale-out
network. Communication follows the alpha-beta model: a message of b bytes over a link costs
alpha + b / bandwidth.

Built-in profiles carry public figures (vendor data sheets, the CloudMatrix384 and T-Rex papers);
`compute_efficiency` is the fraction of peak the model's compute reaches. For the 910C it is fitted
to the paper's Pro run (512 ranks, sequence 4096, global batch 1024, about 27 s per step:
`timing.calibrate_efficiency` gives 0.469) and checked against runs it was not fitted to
(`trex plan --validate`, `validation.py`). The GPU profiles carry their own figure: 0.39, Megatron-Core's
published 390 TFLOP/s per H100 on GPT-3 175B (a dense model; no V4 run on GPUs is published), until a
measurement replaces it (`trex plan --check ... --measured-step-time S` prints the value to put in a
profile file). `engine` names the trex engine that runs on the profile: MindSpeed-LLM on Ascend, the
native trainer elsewhere; the planner recommends only layouts that engine can run.
A TOML or JSON profile file overrides any field: `base = "cloudmatrix384"` plus the keys to change.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class ClusterProfile:
    name: str
    description: str
    ranks_per_node: int
    device_memory_gb: float  # memory of one rank (HBM per die / GPU)
    reserved_memory_gb: float  # runtime, workspace and allocator reserve the job cannot use
    peak_bf16_tflops: float  # dense bf16 matmul peak of one rank
    compute_efficiency: float  # fraction of peak the model's compute reaches (calibrated)
    memory_bandwidth_gbps: float  # device memory bandwidth per rank, GB/s (optimizer step)
    intra_node_bandwidth_gbps: float  # per rank, one direction, GB/s
    intra_node_latency_us: float
    scale_up_domain_ranks: int  # ranks joined by the scale-up fabric (beyond one node)
    scale_up_bandwidth_gbps: float
    scale_up_latency_us: float
    scale_out_bandwidth_gbps: float
    scale_out_latency_us: float
    host_memory_gb: float  # host memory per node available for swapped optimizer state
    host_link_bandwidth_gbps: float  # host <-> device per rank, GB/s
    collective_buffer_mb: float = 256.0  # per communicator (HCCL_BUFFSIZE / NCCL buffers)
    kernels: str = "fused"  # "fused": trex's CPU kernels and the NPU/GPU ones; "eager": plain torch (see memory.py)
    engine: str = "native"  # the trex engine that trains here: "mindspeed" (Ascend) or "native"

    @property
    def usable_memory_bytes(self) -> float:
        return (self.device_memory_gb - self.reserved_memory_gb) * 1e9

    def link(self, group_span_ranks: int) -> tuple[float, float]:
        """(latency in s, bandwidth in bytes/s) of the slowest link inside a group of ranks that
        spans `group_span_ranks` consecutive ranks."""
        if group_span_ranks <= self.ranks_per_node:
            return self.intra_node_latency_us * 1e-6, self.intra_node_bandwidth_gbps * 1e9
        if group_span_ranks <= self.scale_up_domain_ranks:
            return self.scale_up_latency_us * 1e-6, self.scale_up_bandwidth_gbps * 1e9
        return self.scale_out_latency_us * 1e-6, self.scale_out_bandwidth_gbps * 1e9


PROFILES: dict[str, ClusterProfile] = {
    # Ascend 910C: two dies per chip, one rank per die, 8 chips (16 ranks) per node; 384 chips on
    # the unified bus (392 GB/s per chip one way, half per die); 128 GB HBM3 per chip (64 per die);
    # about 780 TFLOP/s bf16 per chip (390 per die); RDMA plane about 400 Gb/s per chip.
    "cloudmatrix384": ClusterProfile(
        name="cloudmatrix384",
        description="Huawei CloudMatrix384 SuperPOD, Ascend 910C (one rank per die)",
        ranks_per_node=16,
        device_memory_gb=64.0,
        reserved_memory_gb=4.0,
        peak_bf16_tflops=390.0,
        compute_efficiency=0.469,
        memory_bandwidth_gbps=1600.0,
        intra_node_bandwidth_gbps=196.0,
        intra_node_latency_us=3.0,
        scale_up_domain_ranks=768,
        scale_up_bandwidth_gbps=150.0,
        scale_up_latency_us=6.0,
        scale_out_bandwidth_gbps=25.0,
        scale_out_latency_us=15.0,
        host_memory_gb=1536.0,
        host_link_bandwidth_gbps=32.0,
        engine="mindspeed",
    ),
    "h100": ClusterProfile(
        name="h100",
        description="NVIDIA HGX H100 SXM 80 GB, NVLink 4 inside the node, 400 Gb/s InfiniBand per GPU",
        ranks_per_node=8,
        device_memory_gb=80.0,
        reserved_memory_gb=3.0,
        peak_bf16_tflops=989.0,
        compute_efficiency=0.39,
        memory_bandwidth_gbps=3350.0,
        intra_node_bandwidth_gbps=450.0,
        intra_node_latency_us=3.0,
        scale_up_domain_ranks=8,
        scale_up_bandwidth_gbps=450.0,
        scale_up_latency_us=3.0,
        scale_out_bandwidth_gbps=50.0,
        scale_out_latency_us=10.0,
        host_memory_gb=2048.0,
        host_link_bandwidth_gbps=50.0,
    ),
    # A development machine: gloo processes sharing one host (platform_notes.md: bf16 matmul about
    # 0.7-1.1 TFLOP/s on 2 cores with AMX; gloo over loopback).
    "cpu": ClusterProfile(
        name="cpu",
        description="CPU processes on one host, gloo over loopback",
        ranks_per_node=2,
        device_memory_gb=24.0,
        reserved_memory_gb=2.0,
        peak_bf16_tflops=0.7,
        compute_efficiency=0.3,
        memory_bandwidth_gbps=20.0,
        intra_node_bandwidth_gbps=3.0,
        intra_node_latency_us=50.0,
        scale_up_domain_ranks=2,
        scale_up_bandwidth_gbps=3.0,
        scale_up_latency_us=50.0,
        scale_out_bandwidth_gbps=1.0,
        scale_out_latency_us=100.0,
        host_memory_gb=24.0,
        host_link_bandwidth_gbps=10.0,
        kernels="fused",  # trex's CPU kernels save what the fused set saves (tests/plan)
    ),
}
# The H200 is an H100 with more and faster HBM; everything else (NVLink, InfiniBand, peak) is the same.
PROFILES["h200"] = dataclasses.replace(
    PROFILES["h100"],
    name="h200",
    description="NVIDIA HGX H200 SXM 141 GB, NVLink 4 inside the node, 400 Gb/s InfiniBand per GPU",
    device_memory_gb=141.0,
    memory_bandwidth_gbps=4800.0,
)
ALIASES = {"910c": "cloudmatrix384", "ascend": "cloudmatrix384", "superpod": "cloudmatrix384"}


def load_cluster(name_or_path: str) -> ClusterProfile:
    """A built-in profile by name (cloudmatrix384 / 910c, h100, h200, cpu) or a TOML/JSON profile file
    whose keys override its `base` profile (default cloudmatrix384)."""
    key = name_or_path.strip().lower()
    key = ALIASES.get(key, key)
    if key in PROFILES:
        return PROFILES[key]
    path = Path(name_or_path)
    if not path.is_file():
        raise ValueError(
            f"unknown cluster profile '{name_or_path}': use one of {', '.join(PROFILES)} (or 910c), "
            "or a TOML/JSON profile file with `base = \"cloudmatrix384\"` and the keys to override"
        )
    try:
        table = json.loads(path.read_text()) if path.suffix == ".json" else tomllib.loads(path.read_text())
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path}: cannot parse the cluster profile ({error})") from None
    base_name = str(table.pop("base", "cloudmatrix384")).lower()
    base_name = ALIASES.get(base_name, base_name)
    if base_name not in PROFILES:
        raise ValueError(f"{path}: base '{base_name}' is not a built-in profile ({', '.join(PROFILES)})")
    base = PROFILES[base_name]
    fields = {f.name: f for f in dataclasses.fields(ClusterProfile)}
    changes = {"name": path.stem}
    for key, value in table.items():
        if key not in fields:
            raise ValueError(f"{path}: unknown key '{key}'; allowed keys: {', '.join(sorted(fields))}")
        expected = type(getattr(base, key))
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected) or isinstance(value, bool) != (expected is bool):
            raise ValueError(f"{path}: '{key}' must be a {expected.__name__}, got {value!r}")
        if expected in (int, float) and key != "name" and value <= 0 and key != "reserved_memory_gb":
            raise ValueError(f"{path}: '{key}' must be positive, got {value!r}")
        changes[key] = value
    if changes.get("kernels", base.kernels) not in ("fused", "eager"):
        raise ValueError(f"{path}: 'kernels' must be \"fused\" or \"eager\"")
    if changes.get("engine", base.engine) not in ("mindspeed", "native"):
        raise ValueError(f"{path}: 'engine' must be \"mindspeed\" or \"native\"")
    return dataclasses.replace(base, **changes)
