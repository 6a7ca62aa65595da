"""Resumable checkpoints: one DCP folder per saved step, the last K kept.

`checkpoints/step-N/` holds the model and optimizer state as a DCP (torch.distributed.checkpoint)
sharded save, so every rank writes its own shards and a run can resume on the same layout (DCP also
reshards to another one). Beside it: `trainer.pt` (the step, the LR scheduler, the NaN-guard counters:
the trainer's own state) and `rng-rank<r>.pt` (each rank's random generators). The data position is
the step itself (see data.py). A checkpoint is written under `.step-N.partial/` and renamed when every
rank is done, so a folder named `step-N` is always complete, even after a SIGKILL mid-save.

Last into the folder, before the rename, goes `complete.json`: every file's size. A resume verifies the
newest checkpoint against it (a disk that filled up, a truncated copy, a file lost in a transfer) and,
when it is damaged, moves it aside as `step-N.damaged` (kept for inspection, never read again) and takes
the newest intact one, so a rerun is never stuck on a bad checkpoint while an older one is good.

DCP runs with one intra-op thread (`_one_intraop_thread`). DCP does some of its tensor work on a thread
of its own; with more than one intra-op thread that thread starts an OpenMP team of its own, and from
then on the process holds more OpenMP threads than it has CPUs. libgomp then stops spinning at its
barriers (its "throttled" spin count, 100 iterations instead of 300,000) and every parallel region of
every later step sleeps and wakes its threads through futexes: after the first save of the demo's SFT
run each step took 9.5 s instead of 7.5 s (2-core machine, both threads doing thousands of context
switches a second). A save is I/O-bound; one thread costs it nothing measurable.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import re
import shutil
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from trex_cli.artifacts import write_json_atomic
from trex_cli.console import warn

STEP_FOLDER = re.compile(r"^step-(\d+)$")
COMPLETE = "complete.json"  # written last: the size of every file of the checkpoint
FULL_DISK_BYTES = 64 << 20  # free space below this after a failed save: the disk was full


def _rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    try:
        import numpy

        state["numpy"] = numpy.random.get_state()
    except ImportError:
        pass
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "numpy" in state:
        import numpy

        numpy.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@contextlib.contextmanager
def _one_intraop_thread():
    """Run DCP with one intra-op thread, so that no thread of its own starts an OpenMP team that outlives
    the save (see the module docstring); the caller's thread count is restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class Checkpointer:
    """Saves and finds the checkpoints of one training stage folder."""

    def __init__(self, folder: Path, keep_last: int, rank: int):
        if keep_last < 1:
            raise ValueError(f"[train] keep_last = {keep_last}: keep at least 1 checkpoint")
        self.folder = Path(folder)
        self.keep_last = keep_last
        self.rank = rank

    def steps(self) -> list[int]:
        if not self.folder.is_dir():
            return []
        found = [STEP_FOLDER.match(p.name) for p in self.folder.iterdir() if p.is_dir()]
        return sorted(int(m.group(1)) for m in found if m)

    def latest(self) -> Path | None:
        steps = self.steps()
        return self.folder / f"step-{steps[-1]}" if steps else None

    @staticmethod
    def _state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        return {"model": get_model_state_dict(model), "optimizer": get_optimizer_state_dict(model, optimizer)}

    def save(self, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, trainer_state: dict) -> Path:
        target = self.folder / f"step-{step}"
        partial = self.folder / f".step-{step}.partial"
        if self.rank == 0:
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
        dist.barrier()
        try:
            with _one_intraop_thread():
                dcp.save(self._state(model, optimizer), checkpoint_id=str(partial))
            torch.save(_rng_state(), partial / f"rng-rank{self.rank}.pt")
            if self.rank == 0:
                torch.save(trainer_state, partial / "trainer.pt")
        except (OSError, RuntimeError, CheckpointException) as error:
            self._failed_save(partial, error)
        dist.barrier()
        if self.rank == 0:
            write_json_atomic(partial / COMPLETE, {"step": step, "files": _file_sizes(partial)})
            shutil.rmtree(target, ignore_errors=True)
            partial.rename(target)
            for old in self.steps()[: -self.keep_last]:
                shutil.rmtree(self.folder / f"step-{old}", ignore_errors=True)
        dist.barrier()
        return target

    def _failed_save(self, partial: Path, error: BaseException) -> None:
        """A write of `partial` failed: remove it (the kept checkpoints stay as they are, and a full disk
        gets its space back) and raise. torch.save and DCP report a short write as a RuntimeError with no
        errno, so a disk left (almost) full by the attempt is reported as what it is: ENOSPC."""
        free = shutil.disk_usage(self.folder).free
        if self.rank == 0:
            shutil.rmtree(partial, ignore_errors=True)
        if isinstance(error, OSError) or free >= FULL_DISK_BYTES:
            raise error
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.folder)) from error

    def resume_point(self) -> Path | None:
        """The newest intact checkpoint, or None (train from step 0). Collective: rank 0 verifies, moves
        damaged ones aside with a warning naming them, and tells every rank its choice."""
        choice: list[str | None] = [None]
        if self.rank == 0:
            for step in reversed(self.steps()):
                path = self.folder / f"step-{step}"
                problem = damage(path)
                if problem is None:
                    choice = [str(path)]
                    break
                aside = self.folder / f"step-{step}.damaged"
                shutil.rmtree(aside, ignore_errors=True)  # an older damaged copy of the same step
                path.rename(aside)
                warn(f"checkpoint {path} is damaged ({problem}); moved it to {aside.name} and looking for an "
                     "older intact one")
            if choice[0] is None and any(self.folder.glob("step-*.damaged")):
                warn(f"no intact checkpoint is left in {self.folder}: training starts again from step 0")
        dist.broadcast_object_list(choice, src=0)
        return Path(choice[0]) if choice[0] is not None else None

    def load(self, path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        """Restore model, optimizer and this rank's RNG from `path`; returns the trainer state."""
        state = self._state(model, optimizer)
        with _one_intraop_thread():
            dcp.load(state, checkpoint_id=str(path))
        set_model_state_dict(model, state["model"])
        set_optimizer_state_dict(model, optimizer, state["optimizer"])
        rng_path = Path(path) / f"rng-rank{self.rank}.pt"
        if rng_path.is_file():
            _set_rng_state(torch.load(rng_path, weights_only=False))
        else:
            warn(f"{rng_path} is missing (a different number of ranks?): random generators are not restored")
        return torch.load(Path(path) / "trainer.pt", weights_only=False)


def _file_sizes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}


def damage(path: Path) -> str | None:
    """What is wrong with the checkpoint folder `path` (a file missing, shorter or longer than it was
    written), or None when it is intact."""
    marker = Path(path) / COMPLETE
    if not marker.is_file():
        return f"it has no {COMPLETE}: it was not written to the end"
    try:
        listed = json.loads(marker.read_text())["files"]
    except (ValueError, KeyError, TypeError):
        return f"its {COMPLETE} is unreadable"
    for name, size in listed.items():
        file = Path(path) / name
        if not file.is_file():
            return f"{name} is missing"
        if file.stat().st_size != size:
            return f"{name} holds {file.stat().st_size} bytes, {size} were written"
    return None
