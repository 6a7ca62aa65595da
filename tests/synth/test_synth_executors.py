"""`trex synth` as sharded tasks on datatrove's executors (#27): 4 local tasks give the records of one task, a
killed run resumes to the same records, the Slurm submission is rendered by a dry run (and its tasks, run here
the way Slurm's job array would run them, give the same records), and Ray's local mode runs the same pipeline."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trex_cli.app import app

pytestmark = pytest.mark.slow

# fast families at the small size. The check is --n 2000 (TREX_TEST_SHARDED_N=2000, about three
# minutes a run on 2 cores); the suite runs 400, which already spans several blocks per task
FAMILIES = "knapsack_01,production_mix,transportation,assignment"
N = int(os.environ.get("TREX_TEST_SHARDED_N", "400"))
BIG = ["--n", str(N), "--eval-n", "50", "--seed", "11", "--families", FAMILIES, "--difficulty", "small",
       "--no-progress"]
SMALL = ["--n", "60", "--eval-n", "10", "--seed", "3", "--families", FAMILIES, "--difficulty", "small",
         "--set", "synth.block_size=16", "--no-progress"]
RECORD_FILES = ("problems/*.jsonl", "cpt_docs/*.jsonl", "sft/*.jsonl", "eval/problems/*.jsonl", "rejects.jsonl",
                "eval/test.jsonl", "blocks/*.json")


def records(out: Path) -> dict[str, str]:
    found = {str(p.relative_to(out)): p.read_text() for pattern in RECORD_FILES for p in sorted(out.glob(pattern))}
    assert any(name.startswith("problems/") for name in found), f"{out} has no records"
    return found


def synth(out: Path, *flags: str) -> None:
    result = CliRunner().invoke(app, ["synth", "--out", str(out), "--run-dir", str(out.parent), *flags])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def one_task(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("one") / "synth"
    synth(out, "--workers", "2", *BIG)
    return out


@pytest.fixture(scope="module")
def one_task_small(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("one_small") / "synth"
    synth(out, "--workers", "1", *SMALL)
    return out


def test_four_local_tasks_give_the_records_of_one_task(one_task, tmp_path):
    out = tmp_path / "synth"
    synth(out, "--tasks", "4", "--set", "run.executor.workers=2", *BIG)
    assert records(out) == records(one_task)
    assert json.loads((out / "manifest.json").read_text())["counts"]["problems"] == N
    assert not (out / "blocks" / "raw").exists()  # blocks verified past the cut are not left behind
    rounds = sorted((out / "blocks" / "executor").iterdir())
    assert rounds, "no executor round was logged"
    assert sorted(p.name for p in (rounds[0] / "completions").iterdir()) == [f"{r:05d}" for r in range(4)]


def test_a_killed_sharded_run_resumes_to_the_records_of_an_uninterrupted_run(one_task, tmp_path):
    out = tmp_path / "synth"
    command = [sys.executable, "-m", "trex_cli.app", "synth", "--out", str(out), "--run-dir", str(tmp_path),
               "--tasks", "4", "--set", "run.executor.workers=2", *BIG]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.time() + 300
    while len(list(out.glob("blocks/raw/*.jsonl"))) < 2 and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, f"the run ended before it could be killed: {process.stderr.read()}"
    os.killpg(process.pid, signal.SIGKILL)  # the launcher and every task, mid-round
    process.wait()
    finished = sorted(p.name for p in out.glob("blocks/raw/*.jsonl"))
    assert finished and not (out / "manifest.json").exists()
    stamps = {name: (out / "blocks" / "raw" / name).stat().st_mtime_ns for name in finished}

    resumed = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # while the rerun is in its first round, the blocks the killed tasks finished are not verified again
    while resumed.poll() is None and not list(out.glob("problems/*.jsonl")):
        for name, stamp in stamps.items():
            path = out / "blocks" / "raw" / name
            assert not path.is_file() or path.stat().st_mtime_ns == stamp, f"{name} was verified again"
        time.sleep(0.05)
    _, stderr = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, stderr
    assert records(out) == records(one_task)


def test_slurm_dry_run_renders_the_submission_and_its_array_tasks_give_the_same_records(one_task_small, tmp_path):
    out = tmp_path / "synth"
    result = CliRunner().invoke(app, ["synth", "--out", str(out), "--run-dir", str(tmp_path), "--executor", "slurm",
                                      "--tasks", "3", "--dry-run", "--set", "run.executor.partition=cpu",
                                      "--set", "run.executor.venv=/shared/trex/.venv/bin/activate", *SMALL])
    assert result.exit_code == 0, result.output
    assert "not submitted" in " ".join(result.output.split())
    (logging_dir,) = (out / "blocks" / "executor").glob("train-00000-*")  # the first round's folder
    script = (logging_dir / "launch_script.slurm").read_text()
    for line in ("#SBATCH --array=0-2", "#SBATCH --partition=cpu", "#SBATCH --cpus-per-task=2",
                 "source /shared/trex/.venv/bin/activate", "launch_pickled_pipeline"):
        assert line in script, f"{line!r} not in the sbatch script:\n{script}"
    assert json.loads((logging_dir / "ranks_to_run.json").read_text()) == [0, 1, 2]
    assert not list(out.glob("blocks/raw/*.jsonl")) and not (out / "manifest.json").exists()  # nothing ran

    # what each job of the array runs, with the array index Slurm would give it
    launcher = shutil.which("launch_pickled_pipeline", path=str(Path(sys.executable).parent))
    assert launcher is not None
    # a job asks Slurm for its node names (`scontrol show hostnames $SLURM_NODELIST`); this machine has no
    # Slurm, so the one node is named by a two-line scontrol of the test's own
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text('#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && echo "$3"\n')
    (bin_dir / "scontrol").chmod(0o755)
    for index in range(3):
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_ARRAY_TASK_ID": str(index), "SLURM_ARRAY_JOB_ID": "1", "SLURM_JOB_ID": str(2 + index),
               "SLURM_NODELIST": "localhost", "SLURM_NODEID": "0"}
        job = subprocess.run([launcher, str(logging_dir / "executor.pik")], env=env, capture_output=True, text=True,
                             timeout=600)
        assert job.returncode == 0, job.stderr[-3000:]
    assert sorted(p.name for p in (logging_dir / "completions").iterdir()) == ["00000", "00001", "00002"]
    assert list(out.glob("blocks/raw/*.jsonl"))

    # the same command without --dry-run merges the array's results (a local run finishes any short round)
    synth(out, "--tasks", "3", *SMALL)
    assert records(out) == records(one_task_small)


def test_ray_local_mode_runs_the_same_pipeline(one_task_small, tmp_path):
    pytest.importorskip("ray", reason="Ray is an extra (pip install 'trex[ray]')")
    out = tmp_path / "synth"
    command = [sys.executable, "-m", "trex_cli.app", "synth", "--out", str(out), "--run-dir", str(tmp_path),
               "--executor", "ray", "--tasks", "2", *SMALL]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}  # offline: no usage report
    run = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert records(out) == records(one_task_small)
    (first_round,) = (out / "blocks" / "executor").glob("train-00000-*")
    assert sorted(p.name for p in (first_round / "completions").iterdir()) == ["00000", "00001"]


def test_bad_executor_settings_are_one_line_before_any_work(tmp_path):
    runner = CliRunner()
    no_partition = runner.invoke(app, ["synth", "--out", str(tmp_path / "a"), "--run-dir", str(tmp_path),
                                       "--executor", "slurm", "--tasks", "2", *SMALL])
    assert no_partition.exit_code == 1 and "needs a partition" in " ".join(no_partition.output.split())
    dry_local = runner.invoke(app, ["synth", "--out", str(tmp_path / "b"), "--run-dir", str(tmp_path), "--tasks", "2",
                                    "--dry-run", *SMALL])
    assert dry_local.exit_code == 1 and "use it with --executor slurm" in " ".join(dry_local.output.split())
    for result in (no_partition, dry_local):
        assert "Traceback" not in result.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
