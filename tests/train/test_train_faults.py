"""Faults around a training stage folder: a second `trex train` on a live run folder is refused, and a
mistake found before any training step leaves a folder the corrected command simply uses."""

from __future__ import annotations

import fcntl
import json

from conftest import TINY_FP32, make_data_folder, trex_command, trex_environment


def run(*args: str):
    import subprocess

    return subprocess.run(trex_command(*args), env=trex_environment(), capture_output=True, text=True, timeout=600)


def test_a_second_train_on_a_live_stage_folder_is_refused_and_touches_nothing(tmp_path):
    root = tmp_path / "run"
    make_data_folder(root / "data" / "cpt", "cpt", rows=8, seq_len=32)
    lock_path = root / ".locks" / "train-cpt.lock"
    lock_path.parent.mkdir(parents=True)
    with open(lock_path, "a+") as lock:  # what a live `trex train cpt` holds
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write("pid 4242 (trex train cpt)")
        lock.flush()
        second = run("train", "cpt", "--run-dir", str(root), *TINY_FP32)
    assert second.returncode == 1
    message = " ".join(second.stderr.split())
    assert "stage train-cpt" in message and "in use by pid 4242" in message, second.stderr
    assert "Traceback" not in second.stderr
    assert not (root / "train" / "cpt").exists()


def test_a_mistake_found_before_any_step_leaves_a_folder_the_corrected_command_uses(tmp_path):
    root = tmp_path / "run"
    make_data_folder(root / "data" / "cpt", "cpt", rows=8, seq_len=32)
    common = ("train", "cpt", "--run-dir", str(root), *TINY_FP32)
    wrong = run(*common, "--set", "train.cpt.micro_batch_size=3")
    assert wrong.returncode == 1 and "micro_batch_size" in wrong.stderr, wrong.stderr
    assert "Traceback" not in wrong.stderr
    # the stage had started (its state names the wrong settings) but done no work
    assert (root / "train" / "cpt" / "stage.json").is_file()
    fixed = run(*common)  # the corrected command, no --force
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    manifest = json.loads((root / "train" / "cpt" / "manifest.json").read_text())
    assert manifest["counts"]["steps"] == 10
    assert manifest["config"]["train"]["schedule"]["micro_batch_size"] != 3
