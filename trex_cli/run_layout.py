"""Where everything of a run lies: the one owner of every default folder.

A run lives in `runs/<recipe name>/` (`[run] run_dir` or `--run-dir` moves it). Each stage folder has a
default inside it that a recipe key (`[synth] out`, `[data.cpt] out`, `[data.sft] out`, `[train.cpt] data`,
...) or a command's `--out` replaces. The stage commands and `trex run` ask this class, so a folder that
one of them writes is the folder the other reads:

    runs/<name>/
      synth/                     trex synth
      data/cpt/  data/sft/       trex data cpt, trex data sft (data/sft-program for [data.sft] stage = "program")
      train/init/                the exported starting model of `trex run` (model-init)
      train/cpt/  train/sft/     trex train cpt, trex train sft
      eval/<name>/               trex eval (trex run: eval/start, eval/cpt, eval/sft)
      report.md  report/         trex run's report and its figures
      run.json  .trex-run.lock   trex run's record; the run lock every stage command takes
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trex_cli.recipe import Recipe

RUN_RECORD = "run.json"
LOCK_FILE = ".trex-run.lock"
REPORT_FILE = "report.md"
REPORT_FIGURES = "report"


class RunLayout:
    """The folders of one run, from its recipe (after overrides: a `--set synth.out=...` moves synth)."""

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        run = recipe.section("run")
        self.root = Path(run.run_dir) if run.run_dir else Path("runs") / recipe.name

    @classmethod
    def at(cls, root: Path) -> RunLayout:
        """The default layout of a run folder (no recipe keys moving its stages)."""
        from trex_cli.recipe import Recipe

        return cls(Recipe(path=None, raw={"run": {"run_dir": str(root)}}))

    # -- stage folders -----------------------------------------------------------------------------

    @property
    def synth(self) -> Path:
        out = self.recipe.section("synth").out
        return Path(out) if out else self.root / "synth"

    @property
    def data_cpt(self) -> Path:
        out = self.recipe.section("data").cpt.out
        return Path(out) if out else self.root / "data" / "cpt"

    @property
    def data_sft(self) -> Path:
        sft = self.recipe.section("data").sft
        if sft.out:
            return Path(sft.out)
        # stage one of two-stage SFT gets its own folder, so both stages' data can sit side by side
        return self.root / "data" / ("sft" if sft.stage == "all" else f"sft-{sft.stage}")

    def data(self, stage: str) -> Path:
        """The data folder a training stage reads: `[train.<stage>] data`, else the run's data folder."""
        given = self.recipe.section("train").stage(stage).data
        if given:
            return Path(given)
        return self.data_cpt if stage == "cpt" else self.data_sft

    def train(self, stage: str) -> Path:
        return self.root / "train" / stage

    @property
    def model_init(self) -> Path:
        return self.root / "train" / "init"

    @property
    def cpt_init(self) -> Path | None:
        """The checkpoint `[train.cpt] init` names (CPT starts from it), or None for a random init."""
        init = self.recipe.section("train").cpt.init
        return Path(init) if init else None

    def eval(self, name: str) -> Path:
        return self.root / "eval" / name

    # -- trex run's own files ----------------------------------------------------------------------

    @property
    def report(self) -> Path:
        return self.root / REPORT_FILE

    @property
    def report_figures(self) -> Path:
        return self.root / REPORT_FIGURES

    @property
    def run_record(self) -> Path:
        return self.root / RUN_RECORD

    @property
    def lock(self) -> Path:
        return self.root / LOCK_FILE

    @contextlib.contextmanager
    def stage_command(self) -> Iterator[None]:
        """What every stage command holds while it runs: the run lock, shared. Stage commands so wait for
        no one but `trex run` (which holds it exclusively); each stage's own lock keeps two runs of the
        same stage apart."""
        from trex_cli.artifacts import exclusive_lock

        with exclusive_lock(self.lock, f"run folder {self.root} (held by `trex run`)", shared=True):
            yield
