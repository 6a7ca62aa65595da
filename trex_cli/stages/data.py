"""The data stages: `trex data cpt` and `trex data sft` (`trex_cli.data.cpt`, `trex_cli.data.sft`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from trex_cli.artifacts import StageFolder
from trex_cli.data.config import DataConfig, SourceSpec
from trex_cli.stages import Stage


class DataStage(Stage):
    """The CPT (`kind` "cpt") or SFT ("sft") dataset of the run."""

    dry_run = False  # `trex data ... --executor slurm --dry-run`: write the clean phase's submission, run nothing

    def __init__(self, recipe, layout, kind: str) -> None:
        super().__init__(recipe, layout)
        self.kind = kind
        self.name = f"data-{kind}"
        self.needs = ("synth",) if kind == "cpt" else ("synth", "data-cpt")
        self.does = ("tokenizer and packed CPT rows" if kind == "cpt"
                     else "chat-templated SFT rows, loss on assistant tokens")

    @property
    def folder(self) -> Path:
        return self.layout.data_cpt if self.kind == "cpt" else self.layout.data_sft

    def config(self) -> DataConfig:
        """The [data] table; without sources it reads the run's synth folder, wherever that lies."""
        config = self.recipe.section("data")
        section = getattr(config, self.kind)
        if not section.sources:
            section = dataclasses.replace(section, sources=[SourceSpec(path=str(self.layout.synth))])
            config = dataclasses.replace(config, **{self.kind: section})
        return config

    def stage_folder(self, force: bool = False) -> StageFolder:
        from trex_cli.data.build import plan_build

        return plan_build(self.config(), self.kind, self.folder, self.layout.root, force).folder

    def build(self, force: bool, show_progress: bool) -> dict:
        from trex_cli.data.cpt import build_cpt
        from trex_cli.data.sft import build_sft

        save_recipe = lambda folder: self.recipe.save_resolved(folder, ["run", "data"])  # noqa: E731
        builder = build_cpt if self.kind == "cpt" else build_sft  # per-file work as tasks on [run.executor]
        return builder(self.config(), self.folder, self.layout.root, force=force, show_progress=show_progress,
                       save_recipe=save_recipe, executor=self.recipe.section("run").executor, dry_run=self.dry_run)
