"""Helpers shared by the Triton kernels: block sizes, launch widths, and which calls they serve.

Under TRITON_INTERPRET=1 the same kernels run on CPU tensors in Triton's interpreter (that is how the
tests check them without a GPU); nothing here assumes a CUDA device is present.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ascend_kernels import device

# Triton 3.9's interpreter multiplies bf16 tiles as raw 16-bit integers in tl.dot (results off by
# 1e10, checked): interpreted runs upcast dot operands to float32 first, compiled runs keep bf16.
INTERPRETED = tl.constexpr(device.triton_interpreted())


def block(columns: int) -> int:
    """The power-of-two tile width covering `columns` (Triton's tile sizes are powers of two)."""
    return triton.next_power_of_2(max(1, columns))


def warps(block_width: int) -> int:
    """Warps for one row of `block_width` values per program: a few dozen values per thread at most."""
    return min(16, max(1, block_width // 256))


def program_count(device: torch.device) -> int:
    """Programs for a persistent launch: four per streaming multiprocessor on CUDA; four under the
    interpreter, where programs run one after another."""
    if device.type == "cuda":
        return 4 * torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def serves(*tensors: torch.Tensor | None) -> bool:
    """Whether the Triton kernels take this call: plain float32 / bfloat16 / float16 tensors. Float64
    (the tests' ground truth) and tensor subclasses (DTensor) go to the reference."""
    present = [t for t in tensors if t is not None]
    return all(type(t) is torch.Tensor for t in present) and all(
        t.dtype != torch.float64 for t in present if t.is_floating_point()
    )


def dot_precision(dtype: torch.dtype) -> str:
    """tl.dot's input precision: exact float32 products for float32 inputs (TF32 would lose 3 digits);
    bf16 / fp16 inputs use the tensor cores as they are."""
    return "ieee" if dtype == torch.float32 else "tf32"


@triton.jit
def dot(a, b, PRECISION: tl.constexpr):
    """a @ b with float32 accumulation."""
    if INTERPRETED:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee", out_dtype=tl.float32)
    return tl.dot(a, b, input_precision=PRECISION, out_dtype=tl.float32)
