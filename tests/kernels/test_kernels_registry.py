"""The registry: automatic choice by device, forcing by TREX_KERNELS or configure(), one log line per
choice, clear errors for unknown or unusable backends, and the device helper."""

from __future__ import annotations

import logging

import pytest
import torch

import ascend_kernels
from ascend_kernels import device, ops, registry


@pytest.fixture(autouse=True)
def fresh_choice(monkeypatch):
    """Each test starts from the environment's choice (TREX_KERNELS unset) and leaves no forcing behind."""
    monkeypatch.delenv(registry.ENVIRONMENT_VARIABLE, raising=False)
    registry._forced = None
    registry._resolved.clear()
    yield
    registry._forced = None
    registry._resolved.clear()


def test_every_operator_has_a_reference_and_a_public_function():
    names = ascend_kernels.operators()
    assert set(names) >= {
        "rms_norm", "apply_rope", "swiglu", "sinkhorn", "hc_pre", "hc_post", "hc_head", "sparse_attention", "indexer_scores", "indexer_topk", "indexer_kl_target",
        "linear_cross_entropy", "moe_permute", "moe_unpermute", "grouped_matmul",
    }
    for name in names:
        assert callable(getattr(ops, name))
        assert getattr(ops, name).__doc__, f"ops.{name} has no docstring"


def test_automatic_choice_on_cpu_prefers_the_cpu_backend():
    assert registry.resolve("rms_norm", "cpu")[0] == "cpu"
    assert registry.resolve("indexer_topk", "cpu")[0] == "reference"  # no faster CPU version registered
    assert registry.resolve("rms_norm", "meta")[0] == "reference"  # an unknown device gets the reference


def test_environment_variable_forces_the_reference(monkeypatch):
    monkeypatch.setenv(registry.ENVIRONMENT_VARIABLE, "reference")
    assert registry.resolve("rms_norm", "cpu")[0] == "reference"
    assert registry.resolve("sparse_attention", "cpu")[0] == "reference"


def test_per_operator_choice(monkeypatch):
    monkeypatch.setenv(registry.ENVIRONMENT_VARIABLE, "cpu,sparse_attention=reference")
    assert registry.resolve("rms_norm", "cpu")[0] == "cpu"
    assert registry.resolve("sparse_attention", "cpu")[0] == "reference"


def test_configure_forces_and_logs_the_plan_once(caplog):
    with caplog.at_level(logging.INFO, logger="ascend_kernels"):
        plan = ascend_kernels.configure("reference", device="cpu")
        for _ in range(3):
            ops.rms_norm(torch.randn(4, 8))
    assert set(plan.values()) == {"reference"}
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and "ascend_kernels on cpu" in messages[0] and "rms_norm=reference" in messages[0]
    ascend_kernels.configure(None, device="cpu")
    assert registry.resolve("rms_norm", "cpu")[0] == "cpu"


def test_without_configure_each_choice_is_logged_at_first_use(caplog):
    with caplog.at_level(logging.INFO, logger="ascend_kernels"):
        for _ in range(3):
            ops.sinkhorn(torch.randn(4, 3, 3))
            ops.indexer_scores(torch.randn(1, 8, 2, 4), torch.randn(1, 2, 4), torch.rand(1, 8, 2), 0.5)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("sinkhorn on cpu uses cpu" in m for m in messages) == 1
    assert sum("indexer_scores on cpu uses reference" in m for m in messages) == 1


def test_forced_backend_that_cannot_run_here_is_a_clear_error():
    if registry.backend_usable("npu"):
        pytest.skip("the npu backend is usable on this machine")
    with pytest.raises(ValueError, match="npu.*cannot run here.*TREX_KERNELS=auto"):
        ascend_kernels.configure("npu")


def test_unknown_backend_names_the_variable_and_choices(monkeypatch):
    monkeypatch.setenv(registry.ENVIRONMENT_VARIABLE, "fastest")
    with pytest.raises(ValueError, match="TREX_KERNELS='fastest'.*unknown kernel backend 'fastest'.*reference"):
        ops.rms_norm(torch.randn(2, 4))


def test_unknown_operator():
    with pytest.raises(ValueError, match="unknown operator 'layer_norm'"):
        registry.resolve("layer_norm", "cpu")


def test_dispatch_uses_the_device_of_the_first_tensor():
    x = torch.randn(3, 16, dtype=torch.float64)
    forced = ascend_kernels.configure("reference", device="cpu")
    assert forced["rms_norm"] == "reference"
    torch.testing.assert_close(ops.rms_norm(x), x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6))


def test_device_detection_on_this_machine():
    found = device.detect_device()
    assert found in ("npu", "cuda", "cpu")
    if not torch.cuda.is_available() and not device.npu_available():
        assert found == "cpu"
        assert device.distributed_backend() == "gloo"
        assert device.torch_device(3) == torch.device("cpu")
    assert device.distributed_backend("npu") == "hccl"
    assert device.distributed_backend("cuda") == "nccl"
    assert device.torch_device(1, "cuda") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        device.distributed_backend("tpu")


def test_npu_probe_survives_a_broken_torch_npu(monkeypatch):
    """A torch_npu that raises on import (no CANN libraries) means 'no NPU', not a crash."""
    import builtins
    import sys

    real_import = builtins.__import__

    def failing_import(name, *args, **kwargs):
        if name == "torch_npu":
            raise OSError("libhccl.so: cannot open shared object file")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    monkeypatch.setattr(builtins, "__import__", failing_import)
    device.npu_available.cache_clear()
    try:
        assert device.npu_available() is False
    finally:
        device.npu_available.cache_clear()
