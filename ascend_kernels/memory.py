"""Peak tensor memory of a block of PyTorch code on any device, CPU included.

torch has allocator statistics for accelerators but none for the CPU, so this counts storages
itself: a dispatch mode sees every tensor an operator creates (forward and backward), adds its
storage's size once, and a finalizer subtracts it when the storage is freed. Tensors that existed
before the block (inputs, weights) are not counted; what the block allocates is.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class PeakMemory(TorchDispatchMode):
    """`with PeakMemory() as memory: ...` then `memory.peak_bytes` (and `memory.current_bytes`)."""

    def __init__(self):
        super().__init__()
        self.current_bytes = 0
        self.peak_bytes = 0
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
            self._live.add(key)
            self.current_bytes += size
            self.peak_bytes = max(self.peak_bytes, self.current_bytes)
            weakref.finalize(storage, self._release, key, size)
        return output
