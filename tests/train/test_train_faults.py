"""Faults around a training stage folder: a second `trex train` on a live run folder is refused, a
mistake found before any training step leaves a folder the corrected command simply uses, and a damaged
newest checkpoint gives way to an older intact one."""

from __future__ import annotations

import fcntl
import json
import shutil

import pytest
from conftest import TINY_FP32, losses, make_data_folder, run_trex, trex_command, trex_environment


def _squeezed(text: str) -> str:
    """Without whitespace: rich wraps long paths anywhere, even inside a word."""
    return "".join(text.split())


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


@pytest.mark.slow
def test_a_damaged_newest_checkpoint_is_moved_aside_and_the_rerun_resumes_from_an_intact_one(tmp_path):
    data = make_data_folder(tmp_path / "data", "cpt", rows=16, seq_len=32)
    common = ("train", "cpt", "--data", str(data), *TINY_FP32, "--save-every", "5")  # keeps step-5 and step-10
    run_trex(*common, "--run-dir", str(tmp_path / "clean"))
    expected = losses(tmp_path / "clean" / "train" / "cpt")

    root = tmp_path / "damaged"
    run_trex(*common, "--run-dir", str(root))
    stage = root / "train" / "cpt"
    # what a SIGKILL during the HF export leaves (both checkpoints, no manifest), then the newest shard cut
    # short as a full disk or a broken copy leaves it
    (stage / "manifest.json").unlink()
    shutil.rmtree(stage / "hf")
    shard = max((stage / "checkpoints" / "step-10").glob("*.distcp"), key=lambda p: p.stat().st_size)
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])

    rerun = run_trex(*common, "--run-dir", str(root))
    message = _squeezed(rerun.stderr)
    assert _squeezed(f"checkpoint {stage / 'checkpoints' / 'step-10'} is damaged ({shard.name} holds") in message, \
        rerun.stderr
    assert "Traceback" not in rerun.stderr
    assert _squeezed(f"resuming from {stage / 'checkpoints' / 'step-5'} (step 5)") in _squeezed(rerun.stdout)
    assert losses(stage) == expected  # bitwise: steps 6-10 retrained from step 5 equal the clean run
    assert (stage / "manifest.json").is_file()
    # nothing lost: the damaged folder is kept aside, never read again; the new step-10 is intact
    assert sorted(p.name for p in (stage / "checkpoints").iterdir()) == ["step-10", "step-10.damaged", "step-5"]


def test_checkpoint_verification_names_what_is_wrong(tmp_path):
    from trex_cli.artifacts import write_json_atomic
    from trex_cli.train.checkpoint import COMPLETE, damage

    folder = tmp_path / "step-3"
    folder.mkdir()
    (folder / "__0_0.distcp").write_bytes(b"x" * 100)
    (folder / "trainer.pt").write_bytes(b"y" * 10)
    assert "no complete.json" in damage(folder)
    write_json_atomic(folder / COMPLETE, {"step": 3, "files": {"__0_0.distcp": 100, "trainer.pt": 10}})
    assert damage(folder) is None
    (folder / "__0_0.distcp").write_bytes(b"x" * 60)
    assert damage(folder) == "__0_0.distcp holds 60 bytes, 100 were written"
    (folder / "trainer.pt").unlink()
    (folder / "__0_0.distcp").write_bytes(b"x" * 100)
    assert damage(folder) == "trainer.pt is missing"
    (folder / COMPLETE).write_text("{")
    assert damage(folder) == f"its {COMPLETE} is unreadable"


def _private_mounts_work() -> bool:
    """A private mount namespace where this user may mount a tmpfs (root with CAP_SYS_ADMIN)."""
    import os
    import subprocess
    import tempfile

    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    with tempfile.TemporaryDirectory() as folder:
        probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {folder}"],
                               capture_output=True)
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _private_mounts_work(), reason="needs root and a private mount namespace for a small tmpfs")
def test_a_full_disk_is_one_line_keeps_the_last_checkpoint_and_the_rerun_with_space_equals_a_clean_run(tmp_path):
    import shlex
    import subprocess

    data = make_data_folder(tmp_path / "data", "cpt", rows=16, seq_len=32)
    common = ("train", "cpt", "--data", str(data), *TINY_FP32, "--save-every", "5")
    run_trex(*common, "--run-dir", str(tmp_path / "clean"))
    expected = losses(tmp_path / "clean" / "train" / "cpt")

    # a real full disk: a 14 MiB tmpfs holds step-5 (about 9.5 MiB) but not step-10 beside it; then the
    # disk is grown (the user freed space) and the same command runs again
    disk, results = tmp_path / "disk", tmp_path / "results"
    disk.mkdir()
    results.mkdir()
    command = " ".join(shlex.quote(part) for part in trex_command(*common, "--run-dir", str(disk / "run")))
    script = f"""
        mount -t tmpfs -o size=14m tmpfs {disk}
        {command} > {results}/full.out 2> {results}/full.err; echo $? > {results}/full.rc
        ls -a {disk}/run/train/cpt/checkpoints > {results}/after_full.txt
        mount -o remount,size=128m {disk}
        {command} > {results}/fixed.out 2> {results}/fixed.err; echo $? > {results}/fixed.rc
        cp -a {disk}/run {results}/run
    """
    subprocess.run(["unshare", "-m", "sh", "-c", script], env=trex_environment(), check=True, timeout=1200)
    full_err = (results / "full.err").read_text()
    assert (results / "full.rc").read_text().strip() == "1", full_err
    checkpoints = disk / "run" / "train" / "cpt" / "checkpoints"
    assert _squeezed(f"cannot write {checkpoints} (No space left on device): the disk is full") in _squeezed(full_err)
    assert "Traceback" not in full_err
    # nothing finished is lost: step-5 is kept, the half-written step-10 is gone (its space given back)
    assert (results / "after_full.txt").read_text().split() == [".", "..", "step-5"]
    assert (results / "fixed.rc").read_text().strip() == "0", (results / "fixed.err").read_text()
    assert "resuming from" in (results / "fixed.out").read_text()
    assert losses(results / "run" / "train" / "cpt") == expected


@pytest.mark.slow
def test_a_layout_that_does_not_fit_nproc_is_one_line_before_any_rank_starts_and_the_fixed_command_trains(tmp_path):
    import os
    import signal
    import subprocess
    import time

    root = tmp_path / "run"
    data = make_data_folder(root / "data" / "cpt", "cpt", rows=8, seq_len=32)
    common = ("train", "cpt", "--run-dir", str(root), *TINY_FP32, "--save-every", "5")
    stage = root / "train" / "cpt"
    for extra, expected in (
        (("--nproc", "3", "--set", "train.parallel.tp=2"),
         "[train.parallel] pp x dp_replicate x cp x tp = 1 x 1 x 1 x 2 = 2 does not divide the 3 ranks; change "
         "the layout or --nproc"),
        (("--nproc", "3"),  # TINY_FP32's global batch of 4 rows over 3 data-parallel ranks
         "[train.cpt] with --nproc 3: global_batch_size 4 must be a multiple of micro_batch_size 1 x "
         "data-parallel ranks 3"),
    ):
        wrong = run(*common, *extra)
        assert wrong.returncode == 1, wrong.stderr
        assert _squeezed(f"error: {expected}") in _squeezed(wrong.stderr), wrong.stderr
        # said once, by the launcher: no rank was started to say it in its own traceback
        assert wrong.stderr.count("error:") == 1 and "Traceback" not in wrong.stderr
        assert not stage.exists()  # nothing written that the corrected command would have to deal with

    # the corrected command, stopped with Ctrl-C after its first step: torchrun and both ranks stop quietly
    fixed = (*common, "--nproc", "2")
    process = subprocess.Popen(trex_command(*fixed), env=trex_environment(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    metrics, deadline = stage / "metrics.jsonl", time.time() + 300
    while not (metrics.is_file() and metrics.read_text().strip()) and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr
    assert "interrupted: run the same command again to resume" in stderr and "Traceback" not in stderr, stderr

    rerun = run(*fixed)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    manifest = json.loads((stage / "manifest.json").read_text())
    assert manifest["counts"]["steps"] == 10 and manifest["summary"]["layout"]["dp_shard"] == 2
    run_trex("train", "cpt", "--data", str(data), "--run-dir", str(tmp_path / "single"), *TINY_FP32)
    reference = losses(tmp_path / "single" / "train" / "cpt")
    worst = max(abs(a - b) / abs(a) for a, b in zip(reference, losses(stage), strict=True))
    assert worst < 1e-5  # what test_train_parallel asks of a 2-rank FSDP run


@pytest.mark.slow
def test_rows_longer_than_the_model_positions_are_refused_before_training_and_rebuilt_data_trains(tmp_path):
    root = tmp_path / "run"
    data = make_data_folder(root / "data" / "cpt", "cpt", rows=2, seq_len=4100)  # tiny flavor: 4096 positions
    common = ("train", "cpt", "--run-dir", str(root), *TINY_FP32)
    wrong = run(*common)
    assert wrong.returncode == 1 and "Traceback" not in wrong.stderr
    assert _squeezed(
        f"{data / 'meta.json'}: seq_len 4100 is longer than the model's max_position_embeddings 4096; rebuild the "
        "data with --seq-len 4096 or less"
    ) in _squeezed(wrong.stderr), wrong.stderr
    assert not (root / "train" / "cpt").exists()  # refused before any process or folder
    shutil.rmtree(data)
    make_data_folder(data, "cpt", rows=8, seq_len=32)  # the fix: rebuilt with shorter rows
    fixed = run(*common)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert json.loads((root / "train" / "cpt" / "manifest.json").read_text())["counts"]["steps"] == 10


@pytest.mark.slow
@pytest.mark.skipif(not _private_mounts_work(), reason="needs root and a private mount namespace for a read-only bind")
def test_a_read_only_run_folder_is_one_line_and_the_command_trains_once_it_is_writable(tmp_path):
    import shlex
    import subprocess

    root, results = tmp_path / "run", tmp_path / "results"
    make_data_folder(root / "data" / "cpt", "cpt", rows=8, seq_len=32)
    results.mkdir()
    command = " ".join(shlex.quote(part) for part in trex_command("train", "cpt", "--run-dir", str(root), *TINY_FP32))
    # the run folder read-only (a read-only mount, as root sees one), then writable again (the fix)
    script = f"""
        mount --bind {root} {root} && mount -o remount,bind,ro {root}
        {command} > {results}/ro.out 2> {results}/ro.err; echo $? > {results}/ro.rc
        mount -o remount,bind,rw {root}
        {command} > {results}/rw.out 2> {results}/rw.err; echo $? > {results}/rw.rc
    """
    subprocess.run(["unshare", "-m", "sh", "-c", script], env=trex_environment(), check=True, timeout=1200)
    read_only = (results / "ro.err").read_text()
    assert (results / "ro.rc").read_text().strip() == "1", read_only
    message = _squeezed(read_only)  # the first file it would write: the run folder's lock
    assert _squeezed(f"cannot write {root}/") in message, read_only
    assert _squeezed("(Read-only file system): the file system is read-only: choose a writable") in message
    assert "Traceback" not in read_only
    assert (results / "rw.rc").read_text().strip() == "0", (results / "rw.err").read_text()[-3000:]
    assert json.loads((root / "train" / "cpt" / "manifest.json").read_text())["counts"]["steps"] == 10
