"""`trex --version`, and every flag that sets a recipe key shows that key and its built-in default in
`--help`, checked against the schemas (a changed default cannot leave the help behind)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from trex_cli import __version__
from trex_cli.app import app
from trex_cli.recipe import schema_for


def _help(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "250", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


def _builtin(key: str):
    """The schema default of a recipe key such as `train.cpt.max_steps`."""
    section, *path = key.split(".")
    value = schema_for(section)()
    for name in path:
        value = getattr(value, name)
    return value


def test_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith(f"trex {__version__} (torch ")


@pytest.mark.parametrize(
    ("command", "flag", "shown", "keys"),
    [
        (("train", "cpt"), "--max-steps", "train.<stage>.max_steps: {} (cpt), {} (sft)",
         ["train.cpt.max_steps", "train.sft.max_steps"]),
        (("train", "sft"), "--save-every", "train.save_every: {}", ["train.save_every"]),
        (("train", "cpt"), "--flavor", "model.flavor: {}", ["model.flavor"]),
        (("train", "cpt"), "--engine", "train.engine: {}", ["train.engine"]),
        (("train", "cpt"), "--eval-every", "train.eval_every: {}", ["train.eval_every"]),
        (("data", "cpt"), "--seq-len", "data.<kind>.seq_len: {} (cpt), {} (sft)", ["data.cpt.seq_len", "data.sft.seq_len"]),
        (("data", "sft"), "--train-tokenizer", "data.vocab_size: {}", ["data.vocab_size"]),
        (("synth",), "--n", "synth.n: {}", ["synth.n"]),
        (("synth",), "--eval-n", "synth.eval_n: {}", ["synth.eval_n"]),
        (("synth",), "--workers", "synth.workers: {}", ["synth.workers"]),
        (("synth",), "--infeasible-share", "synth.infeasible_share: {}", ["synth.infeasible_share"]),
    ],
)
def test_flag_help_shows_the_recipe_key_and_its_builtin_default(command, flag, shown, keys):
    text = _help(*command)
    line = next(line for line in text.splitlines() if re.search(rf"{flag}\s", line))
    assert f"[default: ({shown.format(*(_builtin(key) for key in keys))})]" in line


def test_report_to_and_difficulty_defaults_match_the_schemas():
    assert _builtin("train.report_to") == [] and "[default: (train.report_to: none)]" in _help("train", "cpt")
    difficulty = ",".join(f"{name}={weight}" for name, weight in _builtin("synth.difficulty").items())
    assert f"[default: (synth.difficulty: {difficulty})]" in _help("synth")
    assert _builtin("data.skip_bad") is False and "[default: (data.skip_bad: false)]" in _help("data", "cpt")
