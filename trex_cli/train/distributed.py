"""Process group, device and the device meshes the trainer parallelizes over.

Every training process, even a lone one, runs inside a process group, so one code path serves one
CPU process and a 512-rank SuperPOD: FSDP2, DCP and the collectives behave the same at world size 1.
The device is npu when torch_npu imports and works, else cuda, else cpu; the backend follows
(hccl, nccl, gloo).

The layout, its checks and its two meshes over the same ranks (dense: pp, dp_replicate, dp_shard,
cp, tp; expert: pp, edp, ep, etp) are `ParallelDims` (`parallel_dims.py`).
"""

from __future__ import annotations

import dataclasses
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from trex_cli.train.config import ParallelSection
from trex_cli.train.parallel_dims import ParallelDims


def detect_device() -> tuple[str, str]:
    """(device type, process-group backend). Tried, never guessed from installed packages: torch_npu
    can break on import where CANN is missing."""
    try:
        from ascend_kernels.device import detect_device as kernels_detect_device  # one helper for the project

        found = kernels_detect_device()
        if isinstance(found, tuple) and len(found) == 2:
            return found
    except Exception:  # noqa: BLE001 - the kernels package is optional here; fall back to our own probe
        pass
    try:
        import torch_npu  # noqa: F401

        if torch.npu.is_available():  # type: ignore[attr-defined]
            return "npu", "hccl"
    except Exception:  # noqa: BLE001
        pass
    if torch.cuda.is_available():
        return "cuda", "nccl"
    return "cpu", "gloo"


@dataclasses.dataclass
class Distributed:
    """The running process's place in the job."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str
    dims: ParallelDims
    dense_mesh: DeviceMesh
    expert_mesh: DeviceMesh

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def dp_rank(self) -> int:
        return self.dense_mesh["dp_replicate"].get_local_rank() * self.dims.dp_shard + self.dense_mesh[
            "dp_shard"
        ].get_local_rank()

    @property
    def pp_rank(self) -> int:
        return self.dense_mesh["pp"].get_local_rank()

    def barrier(self) -> None:
        dist.barrier()

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def init_distributed(parallel: ParallelSection) -> Distributed:
    """Join the torchrun job named by the environment (RANK, WORLD_SIZE, MASTER_ADDR...) or start a
    one-rank group in this process; build both meshes. Every training process comes through here, so
    this is also where it sets its host allocator policy (host_memory.py)."""
    from trex_cli.host_memory import keep_freed_memory

    keep_freed_memory()
    device_type, backend = detect_device()
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device_type == "cpu":
        device = torch.device("cpu")
    else:
        device = torch.device(device_type, local_rank)
        getattr(torch, device_type).set_device(device)
    if not dist.is_initialized():
        timeout = datetime.timedelta(minutes=int(os.environ.get("TREX_DIST_TIMEOUT_MIN", "30")))
        if "MASTER_ADDR" in os.environ and world_size >= 1 and "RANK" in os.environ:
            dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=timeout)
        else:
            # One process, no launcher: an in-memory store is all a one-rank group needs.
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    dims = ParallelDims.from_section(parallel, world_size)
    dims.check_engine_supports()
    dense_mesh, expert_mesh = dims.build_meshes(device_type)
    return Distributed(rank, world_size, local_rank, device, backend, dims, dense_mesh, expert_mesh)
