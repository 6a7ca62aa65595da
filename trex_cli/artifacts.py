"""Stage folders and their manifests.

A stage folder is complete when its `manifest.json` exists; the manifest is written last, by atomic
rename. It records what the folder holds (counts), the resolved recipe section, the manifests it was
built from (by SHA-256: the lineage), package versions and wall time. A stage refuses an input folder
without a manifest; re-running a finished stage with the same settings and inputs is a no-op unless
`force`; a folder with a `stage.json` but no manifest is an interrupted run, which the stage resumes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from data_synth.files import write_json_atomic, write_text_atomic

__all__ = ["write_json_atomic", "write_text_atomic"]  # the one implementation, shared with data_synth

MANIFEST = "manifest.json"
STAGE_STATE = "stage.json"
# what a stage writes before it does any work: a folder holding only these has nothing to lose
BOOKKEEPING = (STAGE_STATE, "recipe.resolved.toml", "launch.json")
TRACKED_PACKAGES = ("trex", "torch", "pyomo", "highspy", "datasets", "tokenizers", "transformers", "numpy")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_json(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def package_versions() -> dict[str, str]:
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def read_manifest(folder: Path, stage: str | None = None) -> dict:
    """The manifest of a finished stage folder; a clear error when there is none."""
    folder = Path(folder)
    manifest_path = folder / MANIFEST
    hint = f"run `trex {stage}` first, or let it finish" if stage else "let its stage finish"
    if not folder.exists():
        raise FileNotFoundError(f"{folder} does not exist ({hint})")
    if not manifest_path.is_file():
        raise ValueError(f"{folder} has no {MANIFEST}: it is not a finished trex stage folder ({hint})")
    manifest = json.loads(manifest_path.read_text())
    if stage and not str(manifest.get("stage", "")).startswith(stage):
        raise ValueError(f"{folder} holds a '{manifest.get('stage')}' stage, not '{stage}'")
    return manifest


class StageConflict(ValueError):
    """The folder holds a stage (finished or interrupted) built with other settings or inputs: only
    `--force` (or another folder) lets the stage run there. `trex run` adds how to rebuild what reads it."""


class FolderBusy(ValueError):
    """Another trex process holds the lock of this run or stage."""


@contextlib.contextmanager
def exclusive_lock(path: Path, what: str, shared: bool = False) -> Iterator[None]:
    """Hold the kernel's lock (flock) on `path` while the block runs; a killed process leaves none behind.
    `shared` locks exclude only exclusive ones: stage commands share the run lock, which `trex run`
    takes exclusively. Busy: `FolderBusy` naming the holder and `what` is locked."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as lock:
        try:
            fcntl.flock(lock, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another trex process"
            raise FolderBusy(
                f"{what} is in use by {holder}; wait for it to finish or stop it (a stopped stage resumes "
                "when its command runs again)"
            ) from None
        if not shared:
            lock.seek(0)
            lock.truncate()
            lock.write(f"pid {os.getpid()} ({' '.join(sys.argv[:3])})")
            lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class StageState(Enum):
    FRESH = "fresh"  # nothing there yet: start from the beginning
    RESUME = "resume"  # an interrupted run with the same settings: continue it
    DONE = "done"  # finished with the same settings and inputs: nothing to do


@dataclass
class StageFolder:
    """One stage's output folder. Call `prepare()` first, `finish()` last.

    `config` is the resolved settings that decide the output (a plain dict); `inputs` are the stage
    folders it reads, each of which must hold a manifest.
    """

    path: Path
    stage: str
    config: dict
    inputs: list[Path] = field(default_factory=list)
    force: bool = False

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self.inputs = [Path(p) for p in self.inputs]
        self._started = time.time()

    def input_lineage(self) -> list[dict]:
        lineage = []
        for folder in self.inputs:
            manifest = read_manifest(folder)
            lineage.append(
                {
                    "path": str(folder),
                    "stage": manifest.get("stage"),
                    "manifest_sha256": sha256_file(folder / MANIFEST),
                    "fingerprint": manifest.get("fingerprint"),
                }
            )
        return lineage

    @property
    def fingerprint(self) -> str:
        """What decides the output: stage, settings, and the fingerprints of the inputs."""
        inputs = [entry["fingerprint"] for entry in self.input_lineage()]
        return sha256_json({"stage": self.stage, "config": self.config, "inputs": inputs})

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def prepare(self) -> StageState:
        """Decide fresh / resume / done; with `force`, wipe the folder and start fresh."""
        fingerprint = self.fingerprint  # also refuses inputs without a manifest
        if self.force and self.path.exists():
            shutil.rmtree(self.path)
        if self.manifest_path.is_file():
            manifest = json.loads(self.manifest_path.read_text())
            if manifest.get("fingerprint") == fingerprint:
                return StageState.DONE
            raise StageConflict(
                f"{self.path} holds a finished {self.stage} built with other settings or inputs; "
                "pass --force to rebuild it, or choose another output folder"
            )
        state_path = self.path / STAGE_STATE
        if state_path.is_file():
            state = json.loads(state_path.read_text())
            if state.get("fingerprint") == fingerprint:
                return StageState.RESUME
            work = self.work_done()
            if work:
                shown = ", ".join(work[:5]) + (f" and {len(work) - 5} more" if len(work) > 5 else "")
                raise StageConflict(
                    f"{self.path} holds an unfinished {self.stage} started with other settings or inputs; the new "
                    f"settings would discard its work ({shown}): pass --force to start again with them, run it "
                    "again with its old settings to finish it, or choose another output folder"
                )
            # it stopped before doing any work (a mistake found early): start again with the new settings
            shutil.rmtree(self.path)
        if self.path.exists() and any(self.path.iterdir()):
            raise ValueError(
                f"{self.path} is not empty and is not a trex {self.stage} folder; "
                "choose another output folder or pass --force to replace it"
            )
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(state_path, {"stage": self.stage, "fingerprint": fingerprint, "started": self._started,
                                       "inputs": self.input_lineage()})
        return StageState.FRESH

    def work_done(self) -> list[str]:
        """The files an unfinished run of the stage left, besides its own bookkeeping (what `--force` or
        other settings would throw away)."""
        if not self.path.is_dir():
            return []
        return sorted(
            str(path.relative_to(self.path)) for path in self.path.rglob("*")
            if path.is_file() and path.name not in BOOKKEEPING and not path.name.startswith(".")
        )

    def finish(self, counts: dict | None = None, extra: dict | None = None) -> dict:
        """Write the manifest, last, by atomic rename."""
        state_path = self.path / STAGE_STATE
        started = self._started
        if state_path.is_file():
            started = json.loads(state_path.read_text()).get("started", started)
        manifest = {
            "stage": self.stage,
            "fingerprint": self.fingerprint,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "config": self.config,
            "inputs": self.input_lineage(),
            "counts": counts or {},
            "versions": package_versions(),
            "wall_time_s": round(time.time() - self._started, 3),
            "first_started": started,
        }
        if extra:
            manifest.update(extra)
        write_json_atomic(self.manifest_path, manifest)
        return manifest

    def read(self) -> dict:
        return read_manifest(self.path, self.stage)
