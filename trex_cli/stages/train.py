"""The training stages: `trex train cpt`, `trex train sft` (native engine) and `trex run`'s model-init."""

from __future__ import annotations

import json
from pathlib import Path

from trex_cli.artifacts import MANIFEST, StageFolder, StageState
from trex_cli.stages import Stage


class TrainingFailed(ValueError):
    """Training stopped for a reason the recipe can fix (divergence, a failed worker)."""


class TrainStage(Stage):
    """Full-parameter training of one stage ("cpt" or "sft") with trex's own trainer."""

    def __init__(self, recipe, layout, stage: str, nproc: int = 1) -> None:
        super().__init__(recipe, layout)
        self.stage = stage
        self.nproc = nproc
        self.name = f"train-{stage}"
        self.needs = ("data-cpt",) if stage == "cpt" else ("data-sft", "train-cpt")
        self.does = ("continued pretraining, DCP checkpoints, HF export" if stage == "cpt"
                     else "supervised fine-tuning from the CPT export")

    @property
    def folder(self) -> Path:
        return self.layout.train(self.stage)

    @property
    def model_path(self) -> Path:
        """The HF export the evals load."""
        return self.folder / "hf"

    def job(self, warn_missing_cpt: bool = True):
        from trex_cli.train.job import resolve_job

        return resolve_job(self.stage, self.recipe, self.layout, warn_missing_cpt=warn_missing_cpt)

    def stage_folder(self, force: bool = False) -> StageFolder:
        from trex_cli.train.launch import stage_folder_of

        return stage_folder_of(self.job(warn_missing_cpt=False), force)

    def build(self, force: bool, show_progress: bool) -> dict | None:
        """The training summary, or None when the stage was finished already."""
        if self.recipe.section("train").engine != "native":
            raise ValueError(
                f"[train] engine = {self.recipe.section('train').engine!r}: this stage runs the native engine; "
                "for MindSpeed-LLM use `trex train cpt --engine mindspeed`"
            )
        if self.nproc < 1:
            raise ValueError(f"--nproc {self.nproc}: must be 1 or more")
        from trex_cli.train.launch import run_stage, spawn_torchrun, under_torchrun
        from trex_cli.train.trainer import TrainingDiverged

        job = self.job()
        job.show_progress = show_progress
        if self.nproc > 1 and not under_torchrun():
            from trex_cli.train.data import check_batch_sizes
            from trex_cli.train.launch import stage_folder_of
            from trex_cli.train.parallel_dims import ParallelDims

            # the ranks would each find a wrong layout and bury it in their tracebacks: check it here, once
            dims = ParallelDims.from_section(job.train.parallel, self.nproc)
            dims.check_engine_supports()
            meta = job.data_folder / "meta.json"
            if meta.is_file():  # sequence parallel splits every row's positions over tp (x cp)
                dims.check_sequence_length(int(json.loads(meta.read_text())["seq_len"]))
            check_batch_sizes(job.schedule.global_batch_size, job.schedule.micro_batch_size, dims.dp,
                              f"[train.{self.stage}] with --nproc {self.nproc}")
            if stage_folder_of(job, force).prepare() is StageState.DONE:
                return None
            self.recipe.save_resolved(job.stage_folder, ["run", "model", "train"])
            status = spawn_torchrun(job, self.nproc)
            if status == 130:  # torchrun stopped by Ctrl-C (run_torchrun's status) before this process saw it
                raise KeyboardInterrupt
            if status != 0:
                raise TrainingFailed(f"training failed in torchrun (exit status {status}); the ranks' output is above")
            return json.loads((job.stage_folder / MANIFEST).read_text())["summary"]
        if not under_torchrun():
            job.stage_folder.mkdir(parents=True, exist_ok=True)
        try:
            return run_stage(job, force=force and not under_torchrun(), recipe=self.recipe)
        except TrainingDiverged as error:
            # the usual cause is the recipe (learning rate, batch): say so in one line
            raise TrainingFailed(
                f"{error}; lower [train.{self.stage}] lr or raise warmup_steps, then run again"
            ) from None

    def run(self, *, force: bool = False, show_progress: bool = True):
        from trex_cli.train.launch import under_torchrun

        if under_torchrun():  # every rank of a torchrun job runs this; the launcher holds no lock per rank
            summary = self.build(force, show_progress)
            from trex_cli.stages import StageResult

            return StageResult(self.name, self.folder, summary is not None, self.recorded("manifest") or {}, 0.0,
                               summary)
        return super().run(force=force, show_progress=show_progress)


class ModelInitStage(Stage):
    """The model CPT starts from, exported in the HF layout so the first eval measures it: the random
    init of the recipe's seed (the trainer's own init), or the checkpoint `[train.cpt] init` names."""

    name = "model-init"
    needs = ("data-cpt",)
    does = "the starting model (random init of the recipe's seed), HF export"

    @property
    def given(self) -> Path | None:
        return self.layout.cpt_init

    @property
    def folder(self) -> Path:
        return self.given if self.given is not None else self.layout.model_init

    @property
    def model_path(self) -> Path:
        return self.given if self.given is not None else self.folder / "hf"

    def _settings(self) -> tuple[dict, object]:
        job = TrainStage(self.recipe, self.layout, "cpt").job(warn_missing_cpt=False)
        return {"model": job.model_config, "seed": job.train.seed}, job

    def stage_folder(self, force: bool = False) -> StageFolder:
        settings, _ = self._settings()
        return StageFolder(self.layout.model_init, "train-init", settings, inputs=[self.layout.data_cpt], force=force)

    def is_finished(self) -> bool:
        if self.given is not None:
            return (self.given / "config.json").is_file()
        return super().is_finished()

    def has_output(self) -> bool:
        return self.is_finished() if self.given is not None else super().has_output()

    def build(self, force: bool, show_progress: bool) -> int | None:
        """The parameter count of the exported model, or None when it was there already."""
        if self.given is not None:
            if not (self.given / "config.json").is_file():
                raise FileNotFoundError(f"[train.cpt] init = {self.given}: no config.json there")
            return None
        from trex_cli.models.deepseek_v4.config import DeepseekV4Config
        from trex_cli.train.trainer import export_random_init

        settings, job = self._settings()
        folder = StageFolder(self.layout.model_init, "train-init", settings, inputs=[self.layout.data_cpt], force=force)
        if folder.prepare() is StageState.DONE:
            return None
        parameters = export_random_init(
            DeepseekV4Config(**job.model_config), job.train.seed, self.model_path, self.layout.data_cpt / "tokenizer"
        )
        folder.finish(counts={"parameters": parameters}, extra={"hf": str(self.model_path)})
        return parameters
