"""Which accelerator this process runs on, found by trying rather than by looking for packages.

Order: an Ascend NPU when torch_npu imports and sees a device, else CUDA, else the CPU. The
process-group backend follows the device (hccl, nccl, gloo). torch_npu is probed inside try/except
because, where the CANN libraries are missing, importing it raises (or breaks torch's own import);
a package that is merely installed is not a working device.
"""

from __future__ import annotations

import functools
import os

import torch

DISTRIBUTED_BACKENDS = {"npu": "hccl", "cuda": "nccl", "cpu": "gloo"}


@functools.cache
def npu_available() -> bool:
    """True when torch_npu imports and reports at least one NPU."""
    try:
        import torch_npu  # noqa: F401

        return bool(torch.npu.is_available())
    except Exception:  # ImportError, OSError (libhccl.so), RuntimeError from a CANN without devices
        return False


def triton_interpreted() -> bool:
    """True when TRITON_INTERPRET=1: Triton runs its kernels on CPU tensors, in its Python interpreter
    (how the Triton kernels are tested on machines without a GPU). It must be set before triton is
    imported."""
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.cache
def triton_available() -> bool:
    """True when triton imports and can run its kernels: on a CUDA device, or on the CPU under
    TRITON_INTERPRET=1."""
    if not (torch.cuda.is_available() or triton_interpreted()):
        return False
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401

        return True
    except Exception:
        return False


def detect_device() -> str:
    """'npu', 'cuda' or 'cpu': the best device this process can use."""
    if npu_available():
        return "npu"
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def distributed_backend(device: str | None = None) -> str:
    """The torch.distributed backend for a device type (detected when not given): hccl, nccl or gloo."""
    device = device or detect_device()
    if device not in DISTRIBUTED_BACKENDS:
        raise ValueError(f"unknown device type {device!r}: expected one of {sorted(DISTRIBUTED_BACKENDS)}")
    return DISTRIBUTED_BACKENDS[device]


def torch_device(local_rank: int = 0, device: str | None = None) -> torch.device:
    """The torch.device for this rank: npu:<rank>, cuda:<rank>, or cpu (one CPU device for all ranks)."""
    device = device or detect_device()
    if device == "cpu":
        return torch.device("cpu")
    return torch.device(device, local_rank)
