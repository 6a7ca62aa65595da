"""`trex run RECIPE`: every stage of a recipe in order, then the report.

    synth -> data-cpt -> data-sft -> model-init -> train-cpt -> train-sft -> eval-start -> eval-cpt -> eval-sft

`model-init` exports the model CPT starts from (the random init of the recipe's seed, or nothing when
`[train.cpt] init` names a checkpoint), so the three evals measure the same model before CPT, after CPT
and after SFT, on the run's held-out synthetic split and any benchmark the recipe's `[eval]` names.

This module only orders stages: each one is the `trex_cli.stages` object its own command runs, so a
folder built here is the folder `trex synth`, `trex data ...`, `trex train ...` or `trex eval` would
build. What the run adds:

- a stage whose input folder was rebuilt since it was made from it (its lineage names another
  manifest) is rebuilt too, so an eval follows its retrained model;
- `run.json` in the run folder: per stage the manifest it finished with and the seconds it took;
- when every stage is finished with the fingerprint it has now (settings, input stages, and the input
  files: corpora, benchmark files, weights) a re-run only prints the report;
- the report (`trex_cli.run_report`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from trex_cli.artifacts import MANIFEST, StageConflict, exclusive_lock, write_json_atomic
from trex_cli.console import out
from trex_cli.recipe import load_recipe
from trex_cli.run_layout import RunLayout
from trex_cli.stages import Stage, build_stages
from trex_cli.stages.eval import EvalStage

RECIPE_SECTIONS = ["run", "synth", "data", "model", "train", "eval"]  # the tables the run reads
STAGE_GROUPS = {
    "data": ("data-cpt", "data-sft"),
    "train": ("train-cpt", "train-sft"),
    "eval": ("eval-start", "eval-cpt", "eval-sft"),
}


def parse_only(text: str | None, names: tuple[str, ...]) -> tuple[str, ...]:
    """`--only synth,data` -> the named stages in run order (groups expand: data, train, eval)."""
    if not text:
        return names
    chosen: set[str] = set()
    for name in (part.strip() for part in text.split(",")):
        if not name:
            continue
        if name in STAGE_GROUPS:
            chosen.update(STAGE_GROUPS[name])
        elif name in names:
            chosen.add(name)
        else:
            allowed = ", ".join(names + tuple(STAGE_GROUPS))
            raise ValueError(f"--only {text!r}: unknown stage {name!r}; use a comma list of {allowed}")
    if not chosen:
        raise ValueError(f"--only {text!r}: name at least one stage, e.g. --only train-sft,eval-sft")
    return tuple(name for name in names if name in chosen)


def downstream_of(name: str, stages: dict[str, Stage]) -> list[str]:
    """`name` and every stage that reads it, directly or not, in run order."""
    affected = {name}
    for stage in stages.values():
        if affected.intersection(stage.needs):
            affected.add(stage.name)
    return [stage for stage in stages if stage in affected]


class RecipeRun:
    """One `trex run`: load the recipe, run the selected stages in order, write and print the report."""

    def __init__(
        self,
        recipe_path: str | Path,
        overrides: list[str] | None = None,
        *,
        force: bool = False,
        only: str | None = None,
        show_progress: bool = True,
    ) -> None:
        self.recipe_path = Path(recipe_path)
        self.overrides = list(overrides or [])
        self.recipe = load_recipe(self.recipe_path, self.overrides)
        self.layout = RunLayout(self.recipe)
        self.stages = build_stages(self.recipe, self.layout)
        self.selected = parse_only(only, tuple(self.stages))
        self.force = force
        self.show_progress = show_progress
        self.record = self._read_record()

    def _read_record(self) -> dict:
        path = self.layout.run_record
        return json.loads(path.read_text()) if path.is_file() else {}

    # -- the run -----------------------------------------------------------------------------------

    def nothing_to_do(self) -> bool:
        """True when every stage is finished with the fingerprint it has now and read inputs that are
        still the ones it was built from, and the report exists."""
        if self.force or self.selected != tuple(self.stages) or not self.layout.report.is_file():
            return False
        return all(stage.is_finished() and not stage.stale_inputs() for stage in self.stages.values())

    def run(self) -> Path:
        """Run what is left to run; returns the report's path (printed as well)."""
        from trex_cli.run_report import print_report, write_report

        if self.nothing_to_do():
            out.print(f"trex run {self.recipe.name}: every stage is finished; the report ({self.layout.report}):")
            print_report(self.layout.report)
            return self.layout.report
        self._check_inputs()
        self.layout.root.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.layout.lock, f"run folder {self.layout.root}"):
            self.record = self._read_record()  # again under the lock: a run that just finished may have written it
            self.recipe.save_resolved(self.layout.root, RECIPE_SECTIONS)
            self.record.setdefault("stages", {})
            self.record["recipe"] = str(self.recipe_path)
            self.record["overrides"] = self.overrides
            for name in self.selected:
                self._run_one(self.stages[name])
            write_report(self.layout, self.stages, self.record)
            self._save_record()  # the report records its figures
        print_report(self.layout.report)
        return self.layout.report

    def rerun_command(self, name: str) -> str:
        """The command that rebuilds `name` and what reads it, with this run's overrides."""
        sets = "".join(f" --set {override}" for override in self.overrides)
        return f"trex run {self.recipe_path}{sets} --force --only {','.join(downstream_of(name, self.stages))}"

    def _check_inputs(self) -> None:
        """Refuse, before any work, a selected stage whose input stage is neither finished nor selected,
        and evals that may not run their programs (found out only after training, otherwise)."""
        from trex_cli.evaluate.runner import EXECUTION_ENV, execution_allowed

        if self.recipe.section("train").engine != "native" and {"train-cpt", "train-sft"} & set(self.selected):
            raise ValueError(
                f"{self.recipe_path}: [train] engine = {self.recipe.section('train').engine!r}; `trex run` drives the "
                "native engine (set engine = \"native\"); for MindSpeed-LLM use `trex train cpt --engine mindspeed`"
            )
        if any(name.startswith("eval-") for name in self.selected) and not execution_allowed(self.recipe.section("eval")):
            raise ValueError(
                f"{self.recipe_path}: the evals run the programs the models write, which [eval] allow_code_execution "
                f"= false forbids; set it to true (or {EXECUTION_ENV}=1), or leave the evals out with "
                "--only synth,data,model-init,train"
            )
        for name in self.selected:
            for need in self.stages[name].needs:
                if need in self.selected or self.stages[need].has_output():
                    continue
                raise ValueError(
                    f"--only: stage {name} reads {need}, which has not finished ({self.stages[need].folder} has no "
                    f"{MANIFEST}); add {need} to --only, or run `trex run {self.recipe_path}` without --only"
                )

    def _run_one(self, stage: Stage) -> None:
        force = self.force
        stale = [] if force else stage.stale_inputs()
        if stale:
            out.print(f"{stage.name}: {', '.join(stale)} changed since {stage.folder} was built from it; building it again")
            force = True
        out.rule(f"[bold]{stage.name}[/bold]: {stage.does}")
        cpu_started = _cpu_seconds()
        try:
            result = stage.run(force=force, show_progress=self.show_progress)
        except StageConflict as error:
            raise ValueError(
                f"stage {stage.name}: {error} (from trex run: `{self.rerun_command(stage.name)}` rebuilds it and "
                "what reads it)"
            ) from None
        except ValueError as error:
            raise ValueError(f"stage {stage.name}: {error}") from None
        entry = self.record["stages"].setdefault(stage.name, {})
        entry["folder"] = str(stage.folder)
        entry["manifest_sha256"] = stage.manifest_sha()
        if isinstance(stage, EvalStage):
            entry["model"] = stage.config.checkpoint  # the export this eval measured
        if result.ran:
            entry["seconds"] = round(result.seconds, 2)
            entry["cpu_seconds"] = round(_cpu_seconds() - cpu_started, 2)
            entry["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            out.print(f"{stage.name}: finished in {result.seconds:.1f} s ({stage.folder})", highlight=False)
        else:
            out.print(result.said(), highlight=False)
        self._save_record()

    def _save_record(self) -> None:
        write_json_atomic(self.layout.run_record, self.record)


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (synth workers, sandboxed programs):
    on a shared machine, wall time alone says little about what a stage costs."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system
