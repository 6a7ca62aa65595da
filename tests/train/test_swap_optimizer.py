"""The swapped AdamW (`[train.parallel] swap_optimizer`): its moments live in host memory and stream through
two device buckets for a device-side step, and a step must give exactly what `torch.optim.AdamW` gives.
On a CPU the copies go through the same bucket and slot code as on an accelerator (host and device are one
memory); a CUDA test runs the streams where a GPU is present."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
import torch
from conftest import TINY_FP32, losses, make_data_folder, run_trex, trex_command, trex_environment

from trex_cli.train.config import ParallelSection
from trex_cli.train.swap_optimizer import SwappedAdamW


def _parameters(device: str, seed: int = 0) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(33, 17), (17,), (5, 7, 3), (128,), (64, 40), (1,), (9, 9)]
    return [torch.nn.Parameter(torch.randn(shape, generator=generator).to(device)) for shape in shapes]


def _groups(parameters: list[torch.nn.Parameter]) -> list[dict]:
    # two groups as the trainer makes them: matrices decay, vectors do not
    return [{"params": [p for p in parameters if p.ndim >= 2], "weight_decay": 0.01},
            {"params": [p for p in parameters if p.ndim < 2], "weight_decay": 0.0}]


def _run(optimizer_class, device: str, steps: int, options: dict, **extra):
    parameters = _parameters(device)
    optimizer = optimizer_class(_groups(parameters), lr=1e-2, betas=(0.9, 0.999), eps=1e-8, **options, **extra)
    generator = torch.Generator().manual_seed(1)
    for step in range(steps):
        for index, parameter in enumerate(parameters):
            if step == 1 and index == 3:
                parameter.grad = None  # a parameter without a gradient this step is left alone, as AdamW does
            else:
                parameter.grad = torch.randn(parameter.shape, generator=generator).to(device)
        optimizer.step()
    return parameters, optimizer


@pytest.mark.parametrize("options", [{"fused": True}, {"foreach": True}, {"foreach": False}])
@pytest.mark.parametrize("buckets", [1, 3, 16])
def test_steps_equal_torch_adamw_bitwise(options, buckets):
    expected, reference = _run(torch.optim.AdamW, "cpu", 4, options)
    got, swapped = _run(SwappedAdamW, "cpu", 4, options, buckets=buckets)
    for want, have in zip(expected, got, strict=True):
        assert torch.equal(want, have)
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(reference.state[want][key], swapped.state[have][key]), key


def test_the_device_holds_two_buckets_not_the_moments():
    parameters, optimizer = _run(SwappedAdamW, "cpu", 2, {"fused": True}, buckets=8)
    elements = sum(p.numel() for p in parameters)
    largest = max(p.numel() for p in parameters)
    assert len(optimizer._slots) == 2
    # a slot holds both moments of one bucket: about elements / 8, plus at most one parameter's overshoot
    assert optimizer._slots[0].numel() <= 2 * (-(-elements // 8) + largest)
    assert optimizer._slots[0].numel() < 2 * elements
    for state in optimizer.state.values():
        for key in ("exp_avg", "exp_avg_sq"):
            assert state[key].device.type == "cpu"
            assert all(state[key].untyped_storage().data_ptr() != slot.untyped_storage().data_ptr()
                       for slot in optimizer._slots)


def test_a_state_dict_round_trip_resumes_bitwise():
    straight, _ = _run(SwappedAdamW, "cpu", 5, {"fused": True}, buckets=3)
    parameters, first = _run(SwappedAdamW, "cpu", 2, {"fused": True}, buckets=3)
    saved = first.state_dict()
    resumed = SwappedAdamW(_groups(parameters), lr=1e-2, fused=True, buckets=3)
    resumed.load_state_dict(saved)
    for state in resumed.state.values():
        assert state["exp_avg"].device.type == "cpu"
    generator = torch.Generator().manual_seed(1)
    for step in range(5):  # replay the same gradients; apply only steps 2..4
        grads = [None if (step == 1 and index == 3) else torch.randn(p.shape, generator=generator)
                 for index, p in enumerate(parameters)]
        if step < 2:
            continue
        for parameter, grad in zip(parameters, grads, strict=True):
            parameter.grad = grad
        resumed.step()
    for want, have in zip(straight, parameters, strict=True):
        assert torch.equal(want, have)


def test_settings_that_cannot_work_are_refused():
    with pytest.raises(ValueError, match="choose one"):
        ParallelSection(swap_optimizer=True, offload_optimizer=True)
    with pytest.raises(ValueError, match="swap_optimizer_buckets"):
        ParallelSection(swap_optimizer=True, swap_optimizer_buckets=0)
    with pytest.raises(ValueError, match="amsgrad"):
        SwappedAdamW(_parameters("cpu"), amsgrad=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device: the copy stream and pinned host memory")
def test_on_cuda_the_moments_are_pinned_host_memory_and_steps_equal_adamw():
    expected, _ = _run(torch.optim.AdamW, "cuda", 4, {"fused": True})
    got, swapped = _run(SwappedAdamW, "cuda", 4, {"fused": True}, buckets=3)
    swapped.wait_for_downloads()
    for want, have in zip(expected, got, strict=True):
        assert torch.equal(want, have)
        assert swapped.state[have]["exp_avg"].is_pinned() and swapped.state[have]["exp_avg"].device.type == "cpu"
        assert swapped.state[have]["step"].device.type == "cuda"


@pytest.mark.slow
def test_training_with_the_swapped_optimizer_gives_the_same_losses_and_resumes(tmp_path):
    """`trex train` on 2 FSDP ranks with swap_optimizer gives the one-process AdamW losses; a run killed
    between two checkpoints and started again (DCP holds the host-resident moments) gives them bitwise."""
    data = make_data_folder(tmp_path / "data", "cpt", rows=16, seq_len=32)
    common = ("train", "cpt", "--data", str(data), *TINY_FP32, "--max-steps", "12", "--save-every", "5",
              "--set", "train.parallel.swap_optimizer=true", "--set", "train.parallel.swap_optimizer_buckets=5")
    run_trex("train", "cpt", "--data", str(data), *TINY_FP32, "--max-steps", "12", "--run-dir", str(tmp_path / "plain"))
    expected = losses(tmp_path / "plain" / "train" / "cpt")
    result = run_trex(*common, "--nproc", "2", "--run-dir", str(tmp_path / "swap"))
    assert "saves no memory on a CPU" in result.stdout + result.stderr
    straight = losses(tmp_path / "swap" / "train" / "cpt")
    assert len(straight) == 12
    assert max(abs(a - b) / abs(a) for a, b in zip(expected, straight, strict=True)) < 1e-5

    run_dir = tmp_path / "killed"
    stage = run_dir / "train" / "cpt"
    process = subprocess.Popen(trex_command(*common, "--nproc", "2", "--run-dir", str(run_dir)),
                               env=trex_environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.time() + 300
    while _steps_logged(stage) < 6 and process.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert sorted(p.name for p in (stage / "checkpoints").iterdir()) == ["step-5"]
    run_trex(*common, "--nproc", "2", "--run-dir", str(run_dir))
    assert json.loads((stage / "manifest.json").read_text())["summary"]["resumed_from"] == 5
    assert losses(stage) == straight


def _steps_logged(stage) -> int:
    path = stage / "metrics.jsonl"
    lines = [line for line in path.read_text().splitlines() if line] if path.is_file() else []
    return json.loads(lines[-1])["step"] if lines else 0
