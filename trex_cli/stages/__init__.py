"""The stage protocol: what `trex synth`, `trex data ...`, `trex train ...`, `trex eval` and `trex run` all call.

A stage is built from a recipe (the command's flags already applied to its keys, `trex_cli.recipe`) and
the run layout (`trex_cli.run_layout`), and has

- `name` ("synth", "data-cpt", ...) and `needs`: the stages whose folders it reads;
- `folder`: where it writes, in the run layout;
- `stage_folder()`: its `StageFolder` (settings and input folders), whose `fingerprint` covers the
  settings, the input stages' fingerprints and the signatures of input files (corpora, benchmark
  files, tokenizers, weights): the same fingerprint its manifest records when it finishes;
- `run(force=, show_progress=)` -> `StageResult`: builds the folder (a finished one with the same
  fingerprint is a no-op; an interrupted one resumes), under the stage's lock.

A command parses its flags, builds the stage, calls `run` and prints; `trex run` builds every stage of
the recipe the same way (`build_stages`), so a folder made by one is the folder the other would make.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trex_cli.artifacts import MANIFEST, STAGE_STATE, StageFolder, exclusive_lock, sha256_file

if TYPE_CHECKING:
    from trex_cli.recipe import Recipe
    from trex_cli.run_layout import RunLayout


@dataclass
class StageResult:
    """What one `Stage.run` did: `ran` is False when the folder was finished already (nothing changed)."""

    name: str
    folder: Path
    ran: bool
    manifest: dict
    seconds: float
    details: Any = None  # what the stage's library returned (stats, summary, results), for printing
    notes: list[str] = field(default_factory=list)

    def said(self) -> str:
        """The one line every command prints for a stage that had nothing to do."""
        return f"{self.name}: already done ({self.folder}); pass --force to rebuild it"


class Stage(ABC):
    """One stage of a run; see the module docstring."""

    name: str = ""
    needs: tuple[str, ...] = ()
    does: str = ""

    def __init__(self, recipe: Recipe, layout: RunLayout) -> None:
        self.recipe = recipe
        self.layout = layout

    @property
    @abstractmethod
    def folder(self) -> Path:
        """The stage's output folder."""

    @abstractmethod
    def stage_folder(self, force: bool = False) -> StageFolder:
        """The stage folder with the settings and inputs that decide its output."""

    @abstractmethod
    def build(self, force: bool, show_progress: bool) -> Any:
        """Build (or resume, or leave finished) the folder; returns the library's result."""

    def fingerprint(self) -> str:
        return self.stage_folder().fingerprint

    def is_finished(self) -> bool:
        """Finished with the settings and inputs it has now (a changed corpus or benchmark file counts)."""
        manifest = self.recorded("manifest")
        return manifest is not None and manifest.get("fingerprint") == self.fingerprint()

    def recorded(self, which: str) -> dict | None:
        """The folder's manifest ("manifest") or its interrupted run's state ("state"), if any."""
        import json

        path = self.folder / (MANIFEST if which == "manifest" else STAGE_STATE)
        return json.loads(path.read_text()) if path.is_file() else None

    def stale_inputs(self) -> list[str]:
        """Input folders rebuilt since this stage's folder was made from them (their manifests differ)."""
        record = self.recorded("manifest") or self.recorded("state") or {}
        stale = []
        for entry in record.get("inputs", []):
            manifest = Path(entry["path"]) / MANIFEST
            if manifest.is_file() and sha256_file(manifest) != entry.get("manifest_sha256"):
                stale.append(entry["path"])
        return stale

    def has_output(self) -> bool:
        """The folder holds a finished stage (with whatever settings): a later stage can read it."""
        return (self.folder / MANIFEST).is_file()

    def manifest_sha(self) -> str | None:
        path = self.folder / MANIFEST
        return sha256_file(path) if path.is_file() else None

    def lock_path(self) -> Path:
        return self.layout.root / ".locks" / f"{self.name}.lock"

    def run(self, *, force: bool = False, show_progress: bool = True) -> StageResult:
        """Build the stage under its lock (one process per stage folder at a time)."""
        with exclusive_lock(self.lock_path(), f"stage {self.name} ({self.folder})"):
            before = None if force else self.manifest_sha()
            started = time.perf_counter()
            details = self.build(force, show_progress)
            seconds = time.perf_counter() - started
            after = self.manifest_sha()
        manifest = self.recorded("manifest") or {}
        return StageResult(self.name, self.folder, after is not None and after != before, manifest, seconds, details)


def build_stages(recipe: Recipe, layout: RunLayout) -> dict[str, Stage]:
    """Every stage of `trex run`, in order, by name."""
    from trex_cli.stages.data import DataStage
    from trex_cli.stages.eval import RUN_EVALS, EvalStage
    from trex_cli.stages.synth import SynthStage
    from trex_cli.stages.train import ModelInitStage, TrainStage

    stages: list[Stage] = [
        SynthStage(recipe, layout),
        DataStage(recipe, layout, "cpt"),
        DataStage(recipe, layout, "sft"),
        ModelInitStage(recipe, layout),
        TrainStage(recipe, layout, "cpt"),
        TrainStage(recipe, layout, "sft"),
    ]
    models = {stage.name: stage for stage in stages if stage.name in ("model-init", "train-cpt", "train-sft")}
    for label, model_stage in RUN_EVALS:
        stages.append(EvalStage.of_model(recipe, layout, label, models[model_stage]))
    return {stage.name: stage for stage in stages}
