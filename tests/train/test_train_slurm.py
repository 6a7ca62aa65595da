"""The Slurm template (`scripts/slurm/trex-train.sbatch`) starts a real multi-rank job: run here with
`srun` and `scontrol` standing in for Slurm's (one node, two gloo ranks), through the same torchrun c10d
rendezvous a multi-node job uses, with the validation loss computed across both ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import free_port, make_data_folder, trex_environment

REPO = Path(__file__).resolve().parents[2]
SBATCH = REPO / "scripts" / "slurm" / "trex-train.sbatch"


def _stand_in_slurm(folder: Path) -> Path:
    """`scontrol show hostnames` names this machine; `srun` drops its own options and runs the task here."""
    folder.mkdir()
    (folder / "scontrol").write_text("#!/bin/sh\necho 127.0.0.1\n")
    (folder / "srun").write_text('#!/bin/sh\nwhile [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"\n')
    for tool in ("scontrol", "srun"):
        (folder / tool).chmod(0o755)
    return folder


@pytest.mark.slow
def test_sbatch_template_runs_a_two_rank_job_through_the_rendezvous(tmp_path):
    root = tmp_path / "run"
    make_data_folder(root / "data" / "cpt", "cpt", rows=8, seq_len=32)
    env = trex_environment()
    env.update({
        "PATH": f"{_stand_in_slurm(tmp_path / 'bin')}{os.pathsep}{env['PATH']}",
        "SLURM_NNODES": "1", "SLURM_JOB_NODELIST": "node-a", "SLURM_JOB_ID": "4242",
        "GPUS_PER_NODE": "2", "PYTHON": sys.executable, "RDZV_PORT": str(free_port()),
        "PYTHONPATH": str(REPO),
    })
    result = subprocess.run(
        ["bash", str(SBATCH), "cpt", "--run-dir", str(root), "--max-steps", "2", "--eval-every", "1",
         "--set", 'train.dtype="fp32"', "--set", "train.cpt.global_batch_size=2", "--set", "train.cpt.micro_batch_size=1"],
        env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert "1 nodes x 2 ranks, rendezvous 127.0.0.1:" in result.stdout
    manifest = json.loads((root / "train" / "cpt" / "manifest.json").read_text())
    assert manifest["counts"]["steps"] == 2 and manifest["summary"]["layout"]["dp_shard"] == 2
    # validation runs on both FSDP ranks (each its half of every batch), reduced to one figure per step
    validation = [json.loads(line) for line in (root / "train" / "cpt" / "validation.jsonl").read_text().splitlines()]
    assert [r["step"] for r in validation] == [1, 2] and all(0 < r["loss"] < 20 for r in validation)


def test_sbatch_template_needs_a_stage_and_parses():
    assert subprocess.run(["bash", "-n", str(SBATCH)]).returncode == 0
    missing = subprocess.run(["bash", str(SBATCH)], capture_output=True, text=True, env={**os.environ, "SLURM_NNODES": "1"})
    assert missing.returncode != 0 and "give the stage: cpt or sft" in missing.stderr
