"""Resume: a run killed with SIGKILL between two checkpoints, then re-run with the same command, gives
a loss sequence bitwise identical to the run that was never interrupted (fp32, CPU)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from conftest import TINY_FP32, losses, make_data_folder, run_trex, trex_command, trex_environment

STEPS = ("--max-steps", "12", "--save-every", "5")


def _metrics_steps(folder) -> int:
    path = folder / "metrics.jsonl"
    if not path.is_file():
        return 0
    lines = [line for line in path.read_text().splitlines() if line]
    return json.loads(lines[-1])["step"] if lines else 0


@pytest.mark.slow
def test_sigkill_then_same_command_gives_identical_losses(tmp_path):
    data = make_data_folder(tmp_path / "data", "cpt", rows=16, seq_len=32)
    # TINY_FP32 sets 10 steps and no checkpoints; the later flags win (typer keeps the last value)
    common = ("train", "cpt", "--data", str(data), *TINY_FP32, *STEPS)
    run_trex(*common, "--run-dir", str(tmp_path / "straight"))
    expected = losses(tmp_path / "straight" / "train" / "cpt")
    assert len(expected) == 12

    run_dir = tmp_path / "killed"
    stage = run_dir / "train" / "cpt"
    process = subprocess.Popen(
        trex_command(*common, "--run-dir", str(run_dir)), env=trex_environment(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.time() + 300
    while _metrics_steps(stage) < 6 and process.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    done_at_kill = _metrics_steps(stage)
    checkpoints = sorted(p.name for p in (stage / "checkpoints").iterdir())
    assert checkpoints == ["step-5"], f"killed at step {done_at_kill} with {checkpoints}: not between checkpoints"
    assert 6 <= done_at_kill < 10
    assert not (stage / "manifest.json").exists()

    result = run_trex(*common, "--run-dir", str(run_dir))
    assert "resuming from" in result.stdout
    assert losses(stage) == expected  # bitwise: the same floats, step for step
