"""`trex synth` under faults: Ctrl-C (one line, no worker traceback), a disk that fills up mid-run and an
output path under a regular file. Each prints one line naming the path and the fix, keeps the finished
blocks, and the corrected (or repeated) command gives the records of a clean run."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trex_cli.app import app

# blocks of 4: when the first block's marker appears, most of the run is still to do (the pool verifies up
# to 12 candidates a worker ahead, 24 with 2 workers, of the 160 + 4; these two families verify at about
# 50 a second, so about 3 s of the run are left), so Ctrl-C lands mid-run even on a loaded machine
FLAGS = ["--n", "160", "--eval-n", "4", "--seed", "5", "--families", "production_mix,knapsack_01",
         "--set", "synth.block_size=4", "--no-progress"]
RECORD_FILES = ("problems/*.jsonl", "cpt_docs/*.jsonl", "sft/*.jsonl", "rejects.jsonl", "eval/test.jsonl")


def records(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): p.read_text() for pattern in RECORD_FILES for p in sorted(out.glob(pattern))}


def squeezed(text: str) -> str:
    """Without whitespace: rich wraps long paths anywhere, even inside a word."""
    return "".join(text.split())


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("clean")
    result = CliRunner().invoke(app, ["synth", "--out", str(root / "synth"), "--run-dir", str(root), "--workers", "1",
                                      *FLAGS])
    assert result.exit_code == 0, result.output
    return root / "synth"


def _as_a_terminal_starts_it() -> None:
    """The child's SIGINT as a shell's foreground command gets it: handled and not blocked, whatever this
    test process inherited or was left with by earlier tests in the session (a disposition of SIG_IGN and
    the blocked-signal mask both carry over fork and exec, and Python keeps an inherited SIG_IGN)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_prints_one_line_without_worker_tracebacks_and_the_rerun_equals_a_clean_run(clean, tmp_path):
    out = tmp_path / "synth"
    command = [sys.executable, "-m", "trex_cli.app", "synth", "--out", str(out), "--run-dir", str(tmp_path),
               "--workers", "2", *FLAGS]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, preexec_fn=_as_a_terminal_starts_it)
    deadline = time.time() + 300
    while not list(out.glob("blocks/train-*.json")) and process.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before the test could press Ctrl-C"
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C does: every process of the terminal's group gets it
    try:
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:  # a hang fails the test below; leave no process of it behind
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130, stderr
    # nothing else, from no process: no worker traceback. (A worker stopped by the pool while Pyomo's
    # import-time semaphore is registered can leave the stdlib resource tracker's shutdown note; that is
    # Python's bookkeeping, not an error of the run, so it is left out of the comparison.)
    lines = [line for line in stderr.strip().splitlines()
             if "resource_tracker" not in line and not line.strip().startswith("warnings.warn(")]
    assert lines == ["interrupted: run the same command again to resume"], stderr
    assert not (out / "manifest.json").exists()

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert records(out) == records(clean)


def test_a_full_disk_names_the_file_keeps_finished_blocks_and_the_rerun_equals_a_clean_run(clean, tmp_path,
                                                                                          monkeypatch):
    import data_synth.files
    import data_synth.synthesis

    out = tmp_path / "synth"
    failing = out / "problems" / "shard-00001.jsonl"
    real_write, real_fsync = data_synth.synthesis.write_text_atomic, os.fsync

    def disk_full(_fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as the kernel reports it: no file name

    def write_text_atomic(path, text):
        # the second block's shard meets a full disk inside the real writer (its error path is under test)
        monkeypatch.setattr(data_synth.files.os, "fsync", disk_full if Path(path) == failing else real_fsync)
        real_write(path, text)

    monkeypatch.setattr(data_synth.synthesis, "write_text_atomic", write_text_atomic)
    args = ["synth", "--out", str(out), "--run-dir", str(tmp_path), "--workers", "1", *FLAGS]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert squeezed(f"cannot write {failing} (No space left on device): the disk is full") in squeezed(result.output)
    assert "run the same command again" in " ".join(result.output.split()) and "Traceback" not in result.output
    assert (out / "blocks" / "train-00000.json").is_file()  # the finished block is kept
    assert not failing.exists() and not list(failing.parent.glob(".*.tmp"))  # no half-written file left

    monkeypatch.setattr(data_synth.synthesis, "write_text_atomic", real_write)  # space freed
    monkeypatch.setattr(data_synth.files.os, "fsync", real_fsync)
    assert CliRunner().invoke(app, args).exit_code == 0
    assert records(out) == records(clean)


def test_a_run_folder_under_a_regular_file_is_one_line_and_another_folder_works(clean, tmp_path):
    blocker = tmp_path / "runs"
    blocker.write_text("a file where the run folder should go")
    result = CliRunner().invoke(app, ["synth", "--run-dir", str(blocker / "demo"), "--workers", "1", *FLAGS])
    assert result.exit_code == 1
    text = squeezed(result.output)
    assert squeezed(f"cannot write {blocker / 'demo'} (Not a directory)") in text, result.output
    assert squeezed("a part of that path is a file where a folder is expected") in text and "Traceback" not in text
    assert blocker.read_text() == "a file where the run folder should go"

    fixed = CliRunner().invoke(app, ["synth", "--run-dir", str(tmp_path / "demo"), "--workers", "1", *FLAGS])
    assert fixed.exit_code == 0, fixed.output
    assert records(tmp_path / "demo" / "synth") == records(clean)
