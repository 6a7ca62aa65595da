"""Starting the training processes: one in this process, N through torchrun, or joining a torchrun job.

- `--nproc 1` (default) outside torchrun: train in this process (a one-rank process group).
- `--nproc N` outside torchrun: write the resolved job to `<stage folder>/launch.json` and start
  `torchrun --standalone --nproc-per-node N -m trex_cli.train.launch launch.json` on this machine
  (torchrun run from this module, so that Ctrl-C stops it and its workers without a traceback).
- inside a torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR set: multi-node jobs start `trex`
  itself under torchrun on every node): every process joins that job directly.

`run_stage` wraps training in the stage folder protocol: rank 0 decides fresh / resume / done, and
writes the manifest last.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from trex_cli.artifacts import StageFolder, StageState, write_json_atomic

TORCHRUN = "--torchrun"  # the first argument of `python -m trex_cli.train.launch` that starts torchrun


def under_torchrun() -> bool:
    return all(key in os.environ for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR"))


def job_to_dict(job) -> dict:
    data = dataclasses.asdict(job)
    for key in ("stage_folder", "data_folder", "init_path"):
        data[key] = str(data[key]) if data[key] is not None else None
    data["inputs"] = [str(p) for p in job.inputs]
    return data


def job_from_dict(data: dict):
    from trex_cli.recipe import build_dataclass
    from trex_cli.train.config import TrainSection
    from trex_cli.train.job import TrainJob

    data = dict(data)
    data["train"] = build_dataclass(TrainSection, data["train"], "launch.json: train")
    data["stage_folder"] = Path(data["stage_folder"])
    data["data_folder"] = Path(data["data_folder"])
    data["init_path"] = Path(data["init_path"]) if data["init_path"] else None
    data["inputs"] = [Path(p) for p in data["inputs"]]
    return TrainJob(**data)


def stage_folder_of(job, force: bool = False) -> StageFolder:
    return StageFolder(job.stage_folder, f"train-{job.stage}", job.fingerprint_config, inputs=job.inputs, force=force)


def run_stage(job, force: bool = False, recipe=None) -> dict | None:
    """Train one stage on this rank inside the stage folder protocol. None when it was already done.
    `recipe`, when given, is saved resolved into the stage folder (rank 0)."""
    import torch.distributed as dist

    from trex_cli.train.distributed import init_distributed
    from trex_cli.train.trainer import run_training

    distributed = init_distributed(job.train.parallel)
    try:
        decision, folder = [None], None
        if distributed.is_main:
            # one StageFolder from prepare() to finish(), so the manifest's wall time covers the training
            folder = stage_folder_of(job, force)
            decision = [folder.prepare().value]
            if recipe is not None and decision[0] != StageState.DONE.value:
                recipe.save_resolved(job.stage_folder, ["run", "model", "train"])
        dist.broadcast_object_list(decision, src=0)
        if decision[0] == StageState.DONE.value:
            return None
        summary = run_training(job, distributed)
        if distributed.is_main:
            counts = {"steps": summary["steps"], "tokens": summary["tokens"], "skipped_steps": summary["skipped_steps"]}
            folder.finish(counts=counts, extra={"summary": summary})
        distributed.barrier()
        return summary
    finally:
        distributed.close()


def spawn_torchrun(job, nproc: int) -> int:
    """Run the job in `nproc` local processes under torchrun; returns its exit status."""
    job.stage_folder.mkdir(parents=True, exist_ok=True)
    job_file = job.stage_folder / "launch.json"
    write_json_atomic(job_file, job_to_dict(job))
    env = dict(os.environ)
    # torchrun would pin every worker to one thread; share the cores instead.
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    command = [
        sys.executable, "-m", "trex_cli.train.launch", TORCHRUN, "--standalone", f"--nproc-per-node={nproc}",
        "-m", "trex_cli.train.launch", str(job_file),
    ]
    process = subprocess.Popen(command, env=env)
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.wait()  # torchrun got the same Ctrl-C and stops its workers: let it finish, then stop
        raise


def run_torchrun(arguments: list[str]) -> int:
    """torchrun with these arguments; after Ctrl-C (its agent has stopped the workers by then) it exits
    quietly, where torchrun itself would print its SignalException's traceback."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.run import main as torchrun

    try:
        torchrun(arguments)
    except SignalException:
        return 130
    return 0


def die_with_the_launcher() -> None:
    """Have the kernel SIGKILL this worker when torchrun's agent, its parent, dies (Linux).

    Ctrl-C and SIGTERM reach the agent, which stops its workers itself; SIGKILL cannot be caught, so
    without this a `kill -9` of `trex train` would leave the workers training on, writing checkpoints and
    the manifest while a rerun of the same command resumes in the same stage folder."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    parent = os.getppid()
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the agent died before the request was made: no one would stop this worker
        sys.exit(1)


def main(argv: list[str]) -> int:
    """The entry points `spawn_torchrun` starts: `python -m trex_cli.train.launch --torchrun <torchrun
    arguments>` (the launcher) and `python -m trex_cli.train.launch <launch.json>` (each worker)."""
    if argv[:1] == [TORCHRUN]:
        return run_torchrun(argv[1:])
    if len(argv) != 1:
        print("usage: python -m trex_cli.train.launch <launch.json>", file=sys.stderr)
        return 2
    die_with_the_launcher()
    job = job_from_dict(json.loads(Path(argv[0]).read_text()))
    job.show_progress = False  # several processes share the terminal
    try:
        run_stage(job)
    except KeyboardInterrupt:
        return 130  # Ctrl-C: the `trex train` that started torchrun says how to resume, once for every rank
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
