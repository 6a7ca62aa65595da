"""Kernel tests: without a CUDA device, Triton's kernels run on CPU tensors in its interpreter.

TRITON_INTERPRET must be set before triton is imported, so it is set here, when pytest collects this
folder; on a CUDA machine it is left alone and the same tests run the compiled kernels on the GPU.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
