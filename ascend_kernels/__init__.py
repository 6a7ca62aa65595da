"""ascend_kernels: DeepSeek-V4 operators behind one registry, with a readable PyTorch reference for each
and faster implementations per device (torch_npu on Ascend, Triton on CUDA, fused functions on CPU).

    from ascend_kernels import ops
    y = ops.rms_norm(x, weight, eps=1e-6)

Force a backend with TREX_KERNELS=reference|cpu|triton|npu|auto (optionally `op=backend` entries,
comma separated) or `ascend_kernels.configure("reference")`. See README.md for every signature.
This package imports nothing from trex_cli.
"""

from ascend_kernels import ops
from ascend_kernels.device import detect_device, distributed_backend, torch_device
from ascend_kernels.registry import BACKENDS, configure, implementations, operators

__all__ = [
    "BACKENDS",
    "configure",
    "detect_device",
    "distributed_backend",
    "implementations",
    "operators",
    "ops",
    "torch_device",
]
