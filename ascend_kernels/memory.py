"""Peak memory of a block of PyTorch code on the CPU, where torch keeps no allocator statistics.

Two measures:
- `PeakMemory`: exact tensor bytes. A dispatch mode sees every tensor an operator creates (forward
  and backward), adds its storage's size once, and a finalizer subtracts it when the storage is freed.
  Tensors that existed before the block are not counted. It cannot see inside torch.compile'd code
  (compilation does not run under a Python dispatch mode).
- `ProcessPeakMemory`: the process's resident-set high-water mark over the block (Linux), after
  resetting it and asking glibc to serve every allocation above 64 KiB with its own mapping, so that
  freed tensors leave the resident set at once. It sees everything, compiled code included, plus some
  noise from the allocator and the interpreter; benchmarks use it to compare implementations alike.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import weakref
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class PeakMemory(TorchDispatchMode):
    """`with PeakMemory() as memory: ...` then `memory.peak_bytes` (and `memory.current_bytes`, and
    `memory.largest_elements`: the element count of the largest tensor created in the block)."""

    def __init__(self):
        super().__init__()
        self.current_bytes = 0
        self.peak_bytes = 0
        self.largest_elements = 0
        self._live: set[int] = set()

    def _release(self, key: int, size: int) -> None:
        self._live.discard(key)
        self.current_bytes -= size

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        output = func(*args, **(kwargs or {}))
        # Views and in-place results share an input's storage: they allocate nothing.
        input_storages = {
            value.untyped_storage().data_ptr()
            for value in tree_flatten((args, kwargs))[0]
            if isinstance(value, torch.Tensor) and value.device.type != "meta"
        }
        for tensor in tree_flatten(output)[0]:
            if not isinstance(tensor, torch.Tensor) or tensor.device.type == "meta":
                continue
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            if key == 0 or key in self._live or key in input_storages:
                continue
            size = storage.nbytes()
            self.largest_elements = max(self.largest_elements, tensor.numel())
            self._live.add(key)
            self.current_bytes += size
            self.peak_bytes = max(self.peak_bytes, self.current_bytes)
            weakref.finalize(storage, self._release, key, size)
        return output


@functools.cache
def _allocate_large_blocks_by_mmap() -> None:
    # M_MMAP_THRESHOLD = -3; setting it also turns off glibc's sliding threshold, which would otherwise
    # keep freed blocks of up to 32 MiB in the heap, invisible to the resident-set measure.
    ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 16)


def _status_bytes(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise OSError(f"/proc/self/status has no {key}")


class ProcessPeakMemory:
    """`with ProcessPeakMemory() as memory: ...` then `memory.peak_bytes`: the resident-set high-water
    mark during the block above the resident set at its start (Linux only)."""

    def __enter__(self):
        _allocate_large_blocks_by_mmap()
        # Give back what is already free (garbage cycles, heap slack) so that the starting resident set
        # holds no memory the block could reuse without raising the mark.
        gc.collect()
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        Path("/proc/self/clear_refs").write_text("5")  # 5 = reset the high-water mark to the current RSS
        self.start_bytes = _status_bytes("VmRSS")
        self.peak_bytes = 0
        return self

    def __exit__(self, *exc_info):
        self.peak_bytes = max(0, _status_bytes("VmHWM") - self.start_bytes)
        return False
