"""The eval stage: `trex eval` (any backend) and the three evals of `trex run` (`trex_cli.evaluate.runner`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from trex_cli.artifacts import StageFolder
from trex_cli.stages import Stage

# trex run's evals: (label, the stage that built the model); the folder is eval/<label>
RUN_EVALS = (("start", "model-init"), ("cpt", "train-cpt"), ("sft", "train-sft"))
REPORT_LABELS = {"start": "start", "cpt": "after CPT", "sft": "after SFT"}


class EvalStage(Stage):
    """Pass@1 of one model (or endpoint, or completions file) on the benchmarks of `[eval]`."""

    def __init__(self, recipe, layout, eval_name: str, *, out: Path | None = None, synth_dir: Path | None = None,
                 config=None, needs: tuple[str, ...] = ()) -> None:
        super().__init__(recipe, layout)
        self.eval_name = eval_name
        self.name = f"eval-{eval_name}"
        self.needs = needs
        self._folder = Path(out) if out is not None else layout.eval(eval_name)
        self._config = config if config is not None else recipe.section("eval")
        if synth_dir is None and "synth" in [b.lower() for b in self._config.benchmarks]:
            synth_dir = layout.synth if layout.synth.is_dir() or "synth" in needs else None
        self.synth_dir = synth_dir
        self.does = f"Pass@1 of {eval_name}"

    @classmethod
    def of_model(cls, recipe, layout, label: str, model_stage) -> EvalStage:
        """`trex run`'s eval of the model a stage built: the hf backend on its export; the other [eval]
        keys (benchmarks, sampling, sandbox, rule) come from the recipe."""
        config = dataclasses.replace(recipe.section("eval"), backend="hf", checkpoint=str(model_stage.model_path))
        stage = cls(recipe, layout, label, config=config, synth_dir=layout.synth, needs=("synth", model_stage.name))
        stage.does = f"Pass@1 {REPORT_LABELS[label]}"
        return stage

    @property
    def folder(self) -> Path:
        return self._folder

    @property
    def config(self):
        return self._config

    def stage_folder(self, force: bool = False) -> StageFolder:
        from trex_cli.evaluate.generators import build_generator
        from trex_cli.evaluate.runner import eval_stage_folder, load_benchmarks

        benchmarks = load_benchmarks(self.config, self.synth_dir)
        return eval_stage_folder(self.config, self.folder, benchmarks, build_generator(self.config), self.synth_dir,
                                 force)

    def build(self, force: bool, show_progress: bool) -> dict:
        from trex_cli.evaluate.runner import run_eval

        return run_eval(self.config, self.folder, name=self.folder.name, synth_dir=self.synth_dir, force=force,
                        show_progress=show_progress)
