"""Output buffers for kernels that fill their results piece by piece (chunked attention, chunked
cross-entropy, Triton launches).

Such kernels allocate with `empty` and must write every element. Tests run them under
`poisoned_buffers()`, which fills each new buffer with NaN (floats) or an out-of-range value
(integers), so a forgotten element shows up as a wrong result instead of passing by luck.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

_poisoning = False


def empty(shape, *, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """torch.empty, filled with poison while `poisoned_buffers()` is active."""
    buffer = torch.empty(shape, dtype=dtype, device=device)
    if _poisoning:
        if buffer.is_floating_point():
            buffer.fill_(float("nan"))
        elif buffer.dtype != torch.bool:
            buffer.fill_(torch.iinfo(buffer.dtype).max)
    return buffer


def empty_like(tensor: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    return empty(tensor.shape, dtype=dtype or tensor.dtype, device=tensor.device)


@contextlib.contextmanager
def poisoned_buffers() -> Iterator[None]:
    """Within this block, buffers from `empty` start as NaN / out-of-range integers."""
    global _poisoning
    previous, _poisoning = _poisoning, True
    try:
        yield
    finally:
        _poisoning = previous
