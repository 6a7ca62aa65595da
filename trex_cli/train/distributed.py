"""Process group, device and the device meshes the trainer parallelizes over.

Every training process, even a lone one, runs inside a process group, so one code path serves one
CPU process and a 512-rank SuperPOD: FSDP2, DCP and the collectives behave the same at world size 1.
The device is npu when torch_npu imports and works, else cuda, else cpu; the backend follows
(hccl, nccl, gloo).

Two meshes share the same ranks (rank = ((pp * dp) + dp_index) * tp + tp_index):
- the dense mesh (pp, dp_replicate, dp_shard, tp) for attention and dense parts,
- the expert mesh (pp, edp, ep, tp), the same data-parallel ranks folded as edp x ep, for the routed
  experts (expert-TP 1: experts are replicated over tp).
"""

from __future__ import annotations

import dataclasses
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from trex_cli.train.config import ParallelSection


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
class Layout:
    """Sizes of the mesh dimensions, checked against the world size."""

    pp: int
    dp_replicate: int
    dp_shard: int
    tp: int
    ep: int

    @property
    def dp(self) -> int:
        return self.dp_replicate * self.dp_shard

    @property
    def world(self) -> int:
        return self.pp * self.dp * self.tp

    @classmethod
    def resolve(cls, parallel: ParallelSection, world_size: int) -> Layout:
        fixed = parallel.pp * parallel.tp * parallel.dp_replicate
        for key in ("pp", "tp", "ep", "dp_replicate"):
            if getattr(parallel, key) < 1:
                raise ValueError(f"[train.parallel] {key} = {getattr(parallel, key)}: must be 1 or more")
        interleaved = parallel.pp_schedule == "Interleaved1F1B"
        if parallel.pp_virtual_stages < 1 or (parallel.pp_virtual_stages > 1) != interleaved:
            raise ValueError(
                f"[train.parallel] pp_virtual_stages = {parallel.pp_virtual_stages} with pp_schedule = "
                f"{parallel.pp_schedule!r}: interleaved 1F1B needs pp_virtual_stages >= 2, the other schedules "
                "take 1; set both (e.g. pp_schedule = \"Interleaved1F1B\", pp_virtual_stages = 2)"
            )
        if world_size % fixed:
            raise ValueError(
                f"[train.parallel] pp x tp x dp_replicate = {fixed} does not divide the {world_size} ranks; "
                "change the layout or --nproc"
            )
        dp_shard = parallel.dp_shard if parallel.dp_shard != -1 else world_size // fixed
        layout = cls(parallel.pp, parallel.dp_replicate, dp_shard, parallel.tp, parallel.ep)
        if layout.world != world_size:
            raise ValueError(
                f"[train.parallel] pp {layout.pp} x dp_replicate {layout.dp_replicate} x dp_shard "
                f"{layout.dp_shard} x tp {layout.tp} = {layout.world} ranks, but {world_size} are running; "
                "set dp_shard = -1 to use the rest, or change --nproc"
            )
        if layout.dp % layout.ep:
            raise ValueError(
                f"[train.parallel] ep = {layout.ep} must divide the data-parallel size "
                f"dp_replicate x dp_shard = {layout.dp} (experts fold into data-parallel ranks)"
            )
        return layout


@dataclasses.dataclass
class Distributed:
    """The running process's place in the job."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str
    layout: Layout
    dense_mesh: DeviceMesh
    expert_mesh: DeviceMesh

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def dp_rank(self) -> int:
        return self.dense_mesh["dp_replicate"].get_local_rank() * self.layout.dp_shard + self.dense_mesh[
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
    from trex_cli.train.host_memory import keep_freed_memory

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
    layout = Layout.resolve(parallel, world_size)
    ranks = torch.arange(world_size)
    dense_mesh = DeviceMesh(
        device_type,
        ranks.reshape(layout.pp, layout.dp_replicate, layout.dp_shard, layout.tp),
        mesh_dim_names=("pp", "dp_replicate", "dp_shard", "tp"),
    )
    expert_mesh = DeviceMesh(
        device_type,
        ranks.reshape(layout.pp, layout.dp // layout.ep, layout.ep, layout.tp),
        mesh_dim_names=("pp", "edp", "ep", "tp"),
    )
    return Distributed(rank, world_size, local_rank, device, backend, layout, dense_mesh, expert_mesh)
