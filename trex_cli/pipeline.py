"""The whole T-Rex pipeline in one call: `trex run RECIPE`.

The stages run in this order, each in its own stage folder under the run folder (runs/<name>/):

    synth -> data-cpt -> data-sft -> model-init -> train-cpt -> train-sft -> eval-start -> eval-cpt -> eval-sft

`model-init` exports the model CPT starts from (the random init of the recipe's seed, or nothing when
`[train.cpt] init` names a checkpoint), so the three evals measure the same model before CPT, after
CPT and after SFT, on the run's held-out synthetic split and any benchmark the recipe's `[eval]` names.

This module only orchestrates: every stage is the same library call its own command makes, so a stage
folder built by `trex run` is the folder `trex synth`, `trex data ...`, `trex train ...` or `trex eval`
would have built, and each stage keeps its own protocol (a manifest written last; a finished stage is
a no-op; an interrupted one resumes from its own progress files). The pipeline adds three things:

- `pipeline.json` in the run folder: for each stage, the SHA-256 of the manifest it finished with and
  the seconds it took here, and the hash of the resolved recipe. When the recipe is unchanged and every
  manifest is still the one recorded, a re-run prints the report without importing torch or touching
  any stage.
- Lineage the eval folders cannot record themselves: an eval's input is a model folder, so the SHA-256
  of that model's manifest is kept beside the eval, and a model rebuilt since makes its eval run again.
- `report.md` with Pass@1 per model and benchmark (and per family on the synthetic split), training
  loss curves and a score chart (PNG), and where every artifact lies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from trex_cli.artifacts import MANIFEST, sha256_file, sha256_json, write_json_atomic, write_text_atomic
from trex_cli.console import err, out
from trex_cli.recipe import Recipe, load_recipe

STATE_FILE = "pipeline.json"
LOCK_FILE = ".trex-run.lock"
REPORT_FILE = "report.md"
REPORT_FIGURES = "report"  # folder of the report's PNG files
RECIPE_SECTIONS = ["run", "synth", "data", "model", "train", "eval"]  # the tables the pipeline reads


@dataclass(frozen=True)
class StageSpec:
    name: str
    needs: tuple[str, ...]  # stages whose folders this one reads
    does: str


STAGES: tuple[StageSpec, ...] = (
    StageSpec("synth", (), "solver-verified problems, CPT documents, SFT samples, held-out eval split"),
    StageSpec("data-cpt", ("synth",), "tokenizer and packed CPT rows"),
    StageSpec("data-sft", ("synth", "data-cpt"), "chat-templated SFT rows, loss on assistant tokens"),
    StageSpec("model-init", ("data-cpt",), "the starting model (random init of the recipe's seed), HF export"),
    StageSpec("train-cpt", ("data-cpt",), "continued pretraining, DCP checkpoints, HF export"),
    StageSpec("train-sft", ("data-sft", "train-cpt"), "supervised fine-tuning from the CPT export"),
    StageSpec("eval-start", ("synth", "model-init"), "Pass@1 of the starting model"),
    StageSpec("eval-cpt", ("synth", "train-cpt"), "Pass@1 after CPT"),
    StageSpec("eval-sft", ("synth", "train-sft"), "Pass@1 after SFT"),
)
STAGE_NAMES = tuple(stage.name for stage in STAGES)
STAGE_GROUPS = {
    "data": ("data-cpt", "data-sft"),
    "train": ("train-cpt", "train-sft"),
    "eval": ("eval-start", "eval-cpt", "eval-sft"),
}
# (label in the report, eval stage, stage that built the model)
MODELS = (("start", "eval-start", "model-init"), ("after CPT", "eval-cpt", "train-cpt"), ("after SFT", "eval-sft", "train-sft"))


def parse_only(text: str | None) -> tuple[str, ...]:
    """`--only synth,data` -> the named stages in pipeline order (groups expand: data, train, eval)."""
    if not text:
        return STAGE_NAMES
    chosen: set[str] = set()
    for name in (part.strip() for part in text.split(",")):
        if not name:
            continue
        if name in STAGE_GROUPS:
            chosen.update(STAGE_GROUPS[name])
        elif name in STAGE_NAMES:
            chosen.add(name)
        else:
            allowed = ", ".join(STAGE_NAMES + tuple(STAGE_GROUPS))
            raise ValueError(f"--only {text!r}: unknown stage {name!r}; use a comma list of {allowed}")
    if not chosen:
        raise ValueError(f"--only {text!r}: name at least one stage, e.g. --only train-sft,eval-sft")
    return tuple(name for name in STAGE_NAMES if name in chosen)


def downstream_of(name: str) -> list[str]:
    """`name` and every stage that reads it, directly or not, in pipeline order."""
    affected = {name}
    for stage in STAGES:
        if affected.intersection(stage.needs):
            affected.add(stage.name)
    return [stage for stage in STAGE_NAMES if stage in affected]


class RunLayout:
    """Where each stage's folder lies, from the recipe (the same defaults the stage commands use)."""

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self.root = recipe.run_dir
        synth = recipe.section("synth")
        data = recipe.section("data")
        schedule = recipe.section("train")
        self.synth = Path(synth.out) if synth.out else self.root / "synth"
        self.data_cpt = Path(data.cpt.out) if data.cpt.out else self.root / "data" / "cpt"
        sft_name = "sft" if data.sft.stage == "all" else f"sft-{data.sft.stage}"
        self.data_sft = Path(data.sft.out) if data.sft.out else self.root / "data" / sft_name
        # the model CPT starts from: a checkpoint the recipe names, else our export of the random init
        self.cpt_init = Path(schedule.cpt.init) if schedule.cpt.init else None
        self.train = {"cpt": self.root / "train" / "cpt", "sft": self.root / "train" / "sft"}
        self.init = self.root / "train" / "init"

    def folder(self, stage: str) -> Path | None:
        """The stage's folder (None for model-init when the recipe names the starting checkpoint)."""
        if stage == "model-init":
            return None if self.cpt_init else self.init
        return {
            "synth": self.synth,
            "data-cpt": self.data_cpt,
            "data-sft": self.data_sft,
            "train-cpt": self.train["cpt"],
            "train-sft": self.train["sft"],
            "eval-start": self.root / "eval" / "start",
            "eval-cpt": self.root / "eval" / "cpt",
            "eval-sft": self.root / "eval" / "sft",
        }[stage]

    def model(self, model_stage: str) -> Path:
        """The HF folder a model stage produced (what the evals load)."""
        if model_stage == "model-init":
            return self.cpt_init if self.cpt_init else self.init / "hf"
        return self.folder(model_stage) / "hf"

    def finished(self, stage: str) -> bool:
        folder = self.folder(stage)
        if folder is None:
            return (self.cpt_init / "config.json").is_file()
        return (folder / MANIFEST).is_file()

    def manifest_sha(self, stage: str) -> str | None:
        folder = self.folder(stage)
        if folder is None or not (folder / MANIFEST).is_file():
            return None
        return sha256_file(folder / MANIFEST)


class Pipeline:
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
        self.selected = parse_only(only)
        self.force = force
        self.show_progress = show_progress
        self.state_path = self.layout.root / STATE_FILE
        self.state = json.loads(self.state_path.read_text()) if self.state_path.is_file() else {}
        self.recipe_sha = sha256_json(self.recipe.resolved(RECIPE_SECTIONS))

    # -- the run ---------------------------------------------------------------------------------

    def nothing_to_do(self) -> bool:
        """True when every stage finished with the manifest recorded by an earlier run of this recipe."""
        if self.force or self.selected != STAGE_NAMES or self.state.get("recipe_sha256") != self.recipe_sha:
            return False
        if not (self.layout.root / REPORT_FILE).is_file():
            return False
        recorded = self.state.get("stages", {})
        for name in STAGE_NAMES:
            if self.layout.folder(name) is None:
                continue
            sha = self.layout.manifest_sha(name)
            if sha is None or recorded.get(name, {}).get("manifest_sha256") != sha:
                return False
        return True

    def run(self) -> Path:
        """Run what is left to run; returns the report's path (printed as well)."""
        report_path = self.layout.root / REPORT_FILE
        if self.nothing_to_do():
            out.print(f"trex run {self.recipe.name}: every stage is finished; the report ({report_path}):")
            print_report(report_path)
            return report_path
        self._check_inputs()
        self.layout.root.mkdir(parents=True, exist_ok=True)
        with self._exclusive_run():
            return self._run_stages(report_path)

    def _run_stages(self, report_path: Path) -> Path:
        # read again under the lock: a run that just finished may have written it
        self.state = json.loads(self.state_path.read_text()) if self.state_path.is_file() else {}
        self.recipe.save_resolved(self.layout.root, RECIPE_SECTIONS)
        self.state.setdefault("stages", {})
        self.state["recipe"] = str(self.recipe_path)
        self.state["overrides"] = self.overrides
        for name in self.selected:
            self._run_one(name)
        if self.selected == STAGE_NAMES:
            self.state["recipe_sha256"] = self.recipe_sha
        self._save_state()
        write_report(self.layout, self.state, report_path)
        self._save_state()  # the report may have recorded figures
        print_report(report_path)
        return report_path

    @contextlib.contextmanager
    def _exclusive_run(self) -> Iterator[None]:
        """One `trex run` per run folder at a time: two would write the same stage folders. The lock is
        the kernel's (flock), so a killed run leaves none behind."""
        import fcntl

        lock_path = self.layout.root / LOCK_FILE
        with open(lock_path, "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                holder = lock.read().strip() or "another process"
                raise ValueError(
                    f"{self.layout.root} is in use by another `trex run` ({holder}); wait for it to finish "
                    "or stop it (a stopped run resumes on the next `trex run`)"
                ) from None
            lock.seek(0)
            lock.truncate()
            lock.write(f"pid {os.getpid()}")
            lock.flush()
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

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
        for spec in STAGES:
            if spec.name not in self.selected:
                continue
            for need in spec.needs:
                if need in self.selected or self.layout.finished(need):
                    continue
                where = self.layout.folder(need)
                raise ValueError(
                    f"--only: stage {spec.name} reads {need}, which has not finished ({where} has no {MANIFEST}); "
                    f"add {need} to --only, or run `trex run {self.recipe_path}` without --only"
                )

    def _run_one(self, name: str) -> None:
        runner = getattr(self, "_stage_" + name.replace("-", "_"))
        force = self.force
        record = self.state["stages"].setdefault(name, {})
        if name.startswith("eval-"):
            force = force or self._model_changed(name)
            # recorded before the eval starts, so an interrupted eval of a model rebuilt since is
            # started again rather than resumed with the old model's samples
            model_stage = next(model for _, evaluation, model in MODELS if evaluation == name)
            record["model"] = str(self.layout.model(model_stage))
            record["model_manifest_sha256"] = self.layout.manifest_sha(model_stage)
            self._save_state()
        started = time.perf_counter()
        cpu_started = _cpu_seconds()
        out.rule(f"[bold]{name}[/bold]: {next(s.does for s in STAGES if s.name == name)}")
        try:
            ran = runner(force)
        except ValueError as error:
            hint = ""
            if "--force" in str(error):
                again = ",".join(downstream_of(name))
                hint = f" (from trex run: `trex run {self.recipe_path} --force --only {again}` rebuilds it and what reads it)"
            raise ValueError(f"stage {name}: {error}{hint}") from None
        seconds = time.perf_counter() - started
        cpu_seconds = _cpu_seconds() - cpu_started
        folder = self.layout.folder(name)
        record["folder"] = str(folder) if folder else str(self.layout.cpt_init)
        record["manifest_sha256"] = self.layout.manifest_sha(name)
        if ran:
            record["seconds"] = round(seconds, 2)
            record["cpu_seconds"] = round(cpu_seconds, 2)
            record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            out.print(f"{name}: finished in {seconds:.1f} s ({record['folder']})", highlight=False)
        else:
            out.print(f"{name}: already done ({record['folder']})", highlight=False)
        self._save_state()

    def _model_changed(self, eval_stage: str) -> bool:
        """An eval whose model was rebuilt since it ran (or started) must run again from the start: its
        folder cannot tell, since the model's path is all its settings name."""
        model_stage = next(model for _, evaluation, model in MODELS if evaluation == eval_stage)
        recorded = self.state["stages"].get(eval_stage, {}).get("model_manifest_sha256")
        current = self.layout.manifest_sha(model_stage)
        folder = self.layout.folder(eval_stage)
        if recorded is None or not folder.exists() or recorded == current:
            return False
        out.print(f"{eval_stage}: the model in {self.layout.model(model_stage)} changed since it was evaluated; evaluating again")
        return True

    def _save_state(self) -> None:
        write_json_atomic(self.state_path, self.state)

    # -- the stages: thin calls into each stage's library ------------------------------------------

    def _stage_synth(self, force: bool) -> bool:
        from trex_cli.commands.synth import run_synth_stage

        result = run_synth_stage(self.recipe, self.layout.synth, force=force, show_progress=self.show_progress)
        return result.state != "done"

    def _data_config(self):
        """The [data] table; its sources default to the run's synth folder wherever that lies."""
        from trex_cli.data.config import SourceSpec

        config = self.recipe.section("data")
        if self.layout.synth != self.layout.root / "synth":
            synth = [SourceSpec(path=str(self.layout.synth))]
            config = dataclasses.replace(
                config,
                cpt=dataclasses.replace(config.cpt, sources=config.cpt.sources or synth),
                sft=dataclasses.replace(config.sft, sources=config.sft.sources or synth),
            )
        return config

    def _save_data_recipe(self, folder: Path) -> None:
        self.recipe.save_resolved(folder, ["run", "data"])

    def _stage_data_cpt(self, force: bool) -> bool:
        from trex_cli.data.cpt import build_cpt

        stats = build_cpt(
            self._data_config(), self.layout.data_cpt, self.layout.root, force=force,
            show_progress=self.show_progress, save_recipe=self._save_data_recipe,
        )
        return not stats.get("already_done")

    def _stage_data_sft(self, force: bool) -> bool:
        from trex_cli.data.sft import build_sft

        stats = build_sft(
            self._data_config(), self.layout.data_sft, self.layout.root, force=force,
            show_progress=self.show_progress, save_recipe=self._save_data_recipe,
        )
        return not stats.get("already_done")

    def _train_job(self, stage: str):
        from trex_cli.commands.train import resolve_job

        # resolve_job writes flags into the recipe's sections: give it a copy of its own
        recipe = load_recipe(self.recipe_path, self.overrides)
        data = self.layout.data_cpt if stage == "cpt" else self.layout.data_sft
        # the data folder is a flag only where it is not the default, so the stage's fingerprint is the
        # one `trex train` computes for the same recipe; SFT finds the run's CPT export itself
        # (and records it as an input: lineage)
        data_flag = None if data == self.layout.root / "data" / stage else data
        job = resolve_job(stage, recipe, data_flag, self.layout.root, None, None, None, None)
        return recipe, job

    def _stage_model_init(self, force: bool) -> bool:
        """Export the exact weights CPT starts from (the trainer's own init function and seed)."""
        if self.layout.cpt_init is not None:
            if not (self.layout.cpt_init / "config.json").is_file():
                raise FileNotFoundError(f"[train.cpt] init = {self.layout.cpt_init}: no config.json there")
            return False
        from trex_cli.artifacts import StageFolder, StageState
        from trex_cli.models.deepseek_v4.config import DeepseekV4Config
        from trex_cli.models.deepseek_v4.state_dict_adapter import export_hf
        from trex_cli.train.trainer import build_model

        _, job = self._train_job("cpt")
        settings = {"model": job.model_config, "seed": job.train.seed}
        folder = StageFolder(self.layout.init, "train-init", settings, inputs=[self.layout.data_cpt], force=force)
        if folder.prepare() is StageState.DONE:
            return False
        model = build_model(DeepseekV4Config(**job.model_config), None, job.train.seed)
        export_hf(model, self.layout.init / "hf", tokenizer_dir=self.layout.data_cpt / "tokenizer")
        parameters = sum(p.numel() for p in model.parameters())
        folder.finish(counts={"parameters": parameters}, extra={"hf": str(self.layout.init / "hf")})
        return True

    def _train(self, stage: str, force: bool) -> bool:
        from trex_cli.train.launch import run_stage
        from trex_cli.train.trainer import TrainingDiverged

        recipe, job = self._train_job(stage)
        job.show_progress = self.show_progress
        job.stage_folder.mkdir(parents=True, exist_ok=True)
        try:
            return run_stage(job, force=force, recipe=recipe) is not None
        except TrainingDiverged as error:
            # the usual cause is the recipe (learning rate, batch): say so in one line, like `trex train`
            raise ValueError(f"{error}; lower [train.{stage}] lr or raise warmup_steps, then run again") from None

    def _stage_train_cpt(self, force: bool) -> bool:
        return self._train("cpt", force)

    def _stage_train_sft(self, force: bool) -> bool:
        return self._train("sft", force)

    def _evaluate(self, eval_stage: str, model_stage: str, force: bool) -> bool:
        from trex_cli.evaluate.runner import run_eval

        folder = self.layout.folder(eval_stage)
        already = (folder / MANIFEST).is_file() and not force
        # the pipeline evaluates its own checkpoints; the other [eval] keys (benchmarks, sampling,
        # sandbox, rule) come from the recipe
        config = dataclasses.replace(
            self.recipe.section("eval"), backend="hf", checkpoint=str(self.layout.model(model_stage))
        )
        run_eval(config, folder, name=folder.name, synth_dir=self.layout.synth, force=force,
                 show_progress=self.show_progress)
        return not already

    def _stage_eval_start(self, force: bool) -> bool:
        return self._evaluate("eval-start", "model-init", force)

    def _stage_eval_cpt(self, force: bool) -> bool:
        return self._evaluate("eval-cpt", "train-cpt", force)

    def _stage_eval_sft(self, force: bool) -> bool:
        return self._evaluate("eval-sft", "train-sft", force)


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (synth workers, sandboxed programs):
    on a shared machine, wall time alone says little about what a stage costs."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


# -- the report ------------------------------------------------------------------------------------


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _percent(value: float | None, stderr: float | None = None) -> str:
    if value is None:
        return "–"
    return f"{100 * value:.1f}%" + (f" ± {100 * stderr:.1f}" if stderr is not None else "")


def collect_scores(layout: RunLayout) -> dict:
    """{"rule", "benchmarks": {benchmark: {label: score}}, "families": {family: {label: (correct, items)}},
    "outcomes": {label: {outcome: count}}} from the finished evals."""
    families_of = {row["id"]: row.get("family", "?") for row in _read_jsonl(layout.synth / "eval" / "test.jsonl")}
    scores: dict = {"rule": None, "benchmarks": defaultdict(dict), "families": defaultdict(dict), "outcomes": {}}
    for label, eval_stage, _ in MODELS:
        folder = layout.folder(eval_stage)
        results = _read_json(folder / "results.json") if (folder / MANIFEST).is_file() else None
        if results is None:
            continue
        rule = results["headline_rule"]
        scores["rule"] = rule
        outcomes: dict[str, int] = defaultdict(int)
        for benchmark, score in results["scores"].items():
            scores["benchmarks"][benchmark][label] = score["rules"][rule]
            for outcome, count in score["outcomes"].items():
                outcomes[outcome] += count
        scores["outcomes"][label] = dict(outcomes)
        # per family on the synthetic split: the mean over items of the share of correct samples
        per_item: dict[str, list[bool]] = defaultdict(list)
        for record in _read_jsonl(folder / "samples.jsonl"):
            if record["benchmark"] == "synth":
                per_item[record["item_id"]].append(bool(record["verdicts"].get(rule)))
        per_family: dict[str, list[float]] = defaultdict(list)
        for item_id, verdicts in per_item.items():
            per_family[families_of.get(item_id, "?")].append(sum(verdicts) / len(verdicts))
        for family, values in per_family.items():
            scores["families"][family][label] = (sum(values), len(values))
    return scores


def collect_training(layout: RunLayout) -> dict:
    """{stage: {"records": [...], "summary": {...}}} for the finished or running training stages."""
    from trex_cli.train.metrics import read_metrics

    training = {}
    for stage, folder in layout.train.items():
        records = [r for r in read_metrics(folder / "metrics.jsonl") if not r.get("skipped")]
        manifest = _read_json(folder / MANIFEST) or {}
        training[stage] = {"records": records, "summary": manifest.get("summary", {}), "manifest": manifest}
    return training


def draw_loss_curves(training: dict, path: Path) -> Path | None:
    if not any(entry["records"] for entry in training.values()):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(training), figsize=(5.5 * len(training), 3.8), squeeze=False)
    for axis, (stage, entry) in zip(axes[0], training.items(), strict=True):
        records = entry["records"]
        steps = [r["step"] for r in records]
        axis.plot(steps, [r["loss"] for r in records], label="total loss")
        axis.plot(steps, [r["lm_loss"] for r in records], label="LM loss", alpha=0.8)
        axis.set_title(f"train {stage.upper()}")
        axis.set_xlabel("step")
        axis.set_ylabel("loss")
        axis.grid(alpha=0.3)
        if records:
            axis.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def draw_score_chart(scores: dict, path: Path) -> Path | None:
    """Grouped bars: Pass@1 per benchmark (and per family of the synthetic split) for each model."""
    groups: list[tuple[str, dict[str, float]]] = []
    for benchmark, by_label in scores["benchmarks"].items():
        groups.append((benchmark, {label: s["pass@1"] for label, s in by_label.items()}))
    for family, by_label in sorted(scores["families"].items()):
        groups.append((f"synth/{family}", {label: c / n for label, (c, n) in by_label.items() if n}))
    if not groups:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [label for label, _, _ in MODELS]
    width = 0.8 / len(labels)
    figure, axis = plt.subplots(figsize=(max(6.0, 0.9 * len(groups) + 2), 4.2))
    for index, label in enumerate(labels):
        positions = [g + (index - (len(labels) - 1) / 2) * width for g in range(len(groups))]
        bars = axis.bar(positions, [100 * values.get(label, 0.0) for _, values in groups], width, label=label)
        axis.bar_label(bars, fmt="%.0f", fontsize=7)  # so a score of 0 is seen, not mistaken for a missing bar
    axis.set_xticks(range(len(groups)), [name for name, _ in groups], rotation=30, ha="right")
    axis.set_ylabel(f"Pass@1 (%), {scores['rule']} rule")
    axis.set_ylim(0, 100)
    axis.legend()
    axis.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def render_report(layout: RunLayout, state: dict, scores: dict, training: dict, figures: dict[str, Path | None]) -> str:
    labels = [label for label, _, _ in MODELS]
    recipe = state.get("recipe", "?")
    overrides = " ".join(f"--set {o}" for o in state.get("overrides", []))
    lines = [
        f"# trex run: {layout.recipe.name}",
        "",
        f"Recipe `{recipe}`{' with ' + overrides if overrides else ''}; resolved copy `{layout.root / 'recipe.resolved.toml'}`.",
        "",
        f"## Pass@1 ({scores['rule'] or 'strict'} rule, zero-shot)",
        "",
    ]
    if scores["benchmarks"]:
        lines += ["| benchmark | items | " + " | ".join(labels) + " |", "|---|---:|" + "---:|" * len(labels)]
        for benchmark, by_label in scores["benchmarks"].items():
            items = max(s["items"] for s in by_label.values())
            cells = [
                _percent(by_label[label]["pass@1"], by_label[label]["pass@1_stderr"]) if label in by_label else "–"
                for label in labels
            ]
            lines.append(f"| {benchmark} | {items} | " + " | ".join(cells) + " |")
        lines.append("")
    else:
        lines += ["No eval has finished yet.", ""]
    if scores["families"]:
        lines += ["Per family on the held-out synthetic split (correct / items):", ""]
        lines += ["| family | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
        for family, by_label in sorted(scores["families"].items()):
            cells = [
                f"{by_label[label][0]:g} / {by_label[label][1]}" if label in by_label else "–" for label in labels
            ]
            lines.append(f"| {family} | " + " | ".join(cells) + " |")
        lines.append("")
    if scores["outcomes"]:
        outcome_names = sorted({name for counts in scores["outcomes"].values() for name, n in counts.items() if n})
        lines += ["Outcome of every sample (all benchmarks):", ""]
        lines += ["| model | " + " | ".join(outcome_names) + " |", "|---|" + "---:|" * len(outcome_names)]
        for label in labels:
            if label in scores["outcomes"]:
                counts = scores["outcomes"][label]
                lines.append(f"| {label} | " + " | ".join(str(counts.get(n, 0)) for n in outcome_names) + " |")
        lines.append("")
    if figures.get("scores"):
        lines += [f"![Pass@1 per model]({figures['scores'].relative_to(layout.root)})", ""]
    lines += ["## Training", "", "| stage | steps | first loss | final loss | tokens | tokens/s (median) |",
              "|---|---:|---:|---:|---:|---:|"]
    for stage, entry in training.items():
        records = entry["records"]
        if not records:
            lines.append(f"| {stage} | – | – | – | – | – |")
            continue
        speeds = sorted(r["tokens_per_s"] for r in records)
        tokens = sum(r["tokens"] for r in records)
        lines.append(
            f"| {stage} | {records[-1]['step']} | {records[0]['loss']:.3f} | {records[-1]['loss']:.3f} | "
            f"{tokens:,} | {speeds[len(speeds) // 2]:,.0f} |"
        )
    lines.append("")
    if figures.get("loss"):
        lines += [f"![loss curves]({figures['loss'].relative_to(layout.root)})", ""]
    lines += ["## Stages and artifacts", "",
              "| stage | folder | status | wall seconds | CPU seconds | stage wall time (manifest) |",
              "|---|---|---|---:|---:|---:|"]
    recorded = state.get("stages", {})
    for spec in STAGES:
        folder = layout.folder(spec.name)
        if folder is None:
            lines.append(f"| {spec.name} | `{layout.cpt_init}` | given by [train.cpt] init | – | – | – |")
            continue
        manifest = _read_json(folder / MANIFEST)
        status = "done" if manifest else ("interrupted" if folder.exists() else "not run")
        seconds = recorded.get(spec.name, {}).get("seconds")
        cpu_seconds = recorded.get(spec.name, {}).get("cpu_seconds")
        wall = manifest.get("wall_time_s") if manifest else None
        cells = [f"{value:.1f}" if value is not None else "" for value in (seconds, cpu_seconds, wall)]
        lines.append(f"| {spec.name} | `{folder}` | {status} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "What is where:",
        "",
        f"- verified problems `{layout.synth / 'problems'}`, CPT documents `{layout.synth / 'cpt_docs'}`, SFT samples "
        f"`{layout.synth / 'sft'}`, held-out eval split `{layout.synth / 'eval' / 'test.jsonl'}`, rejects `{layout.synth / 'rejects.jsonl'}`",
        f"- datasets `{layout.data_cpt}` and `{layout.data_sft}` (Arrow shards, `tokenizer/`, `stats.json`, dataset card `README.md`)",
        f"- models (HF layout): start `{layout.model('model-init')}`, after CPT `{layout.model('train-cpt')}`, "
        f"after SFT `{layout.model('train-sft')}`; checkpoints `{layout.train['cpt'] / 'checkpoints'}`, "
        f"`{layout.train['sft'] / 'checkpoints'}`; metrics `metrics.jsonl` and `loss.png` beside them",
        "- evals: " + ", ".join(f"{label} `{layout.folder(stage)}`" for label, stage, _ in MODELS)
        + " (`samples.jsonl` per sample, `results.json`, `report.md`, `pass_at_1.png`)",
        f"- this report `{layout.root / REPORT_FILE}`, its figures `{layout.root / REPORT_FIGURES}`, "
        f"the pipeline's record `{layout.root / STATE_FILE}`",
        "",
    ]
    return "\n".join(lines)


def write_report(layout: RunLayout, state: dict, path: Path) -> Path:
    scores = collect_scores(layout)
    training = collect_training(layout)
    figures_folder = layout.root / REPORT_FIGURES
    figures = {
        "loss": draw_loss_curves(training, figures_folder / "loss_curves.png"),
        "scores": draw_score_chart(scores, figures_folder / "pass_at_1.png"),
    }
    state["report"] = {
        "pass_at_1": {
            benchmark: {label: score["pass@1"] for label, score in by_label.items()}
            for benchmark, by_label in scores["benchmarks"].items()
        },
        "rule": scores["rule"],
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_text_atomic(path, render_report(layout, state, scores, training, figures))
    return path


def print_report(path: Path) -> None:
    from rich.markdown import Markdown

    if not path.is_file():
        err.print(f"{path} does not exist yet")
        return
    out.print(Markdown(path.read_text()))
    out.print(f"report: {path}", highlight=False)
