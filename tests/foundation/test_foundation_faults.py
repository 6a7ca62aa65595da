"""What the console makes of a fault (`trex_cli.console.report_failure`): Ctrl-C, a full or read-only
disk, a path under a regular file, a user mistake: one line naming the path and the fix; a bug keeps
its traceback. And every stage command says how to resume after Ctrl-C, with no traceback."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trex_cli.app import app
from trex_cli.console import INTERRUPTED, err, report_failure

RECIPE = str(Path(__file__).resolve().parents[2] / "recipes" / "tiny-cpu.toml")


def _reported(error: BaseException, capsys) -> tuple[int | None, str]:
    status = report_failure(error)
    return status, " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        (errno.ENOSPC, "the disk is full: free space there (or choose another --run-dir / --out), then run the same "
                       "command again; finished work is kept"),
        (errno.EROFS, "the file system is read-only: choose a writable --run-dir / --out"),
        (errno.EACCES, "permission denied: make it writable for this user, or choose another --run-dir / --out"),
        (errno.ENOTDIR, "a part of that path is a file where a folder is expected: move the file away, or choose "
                        "another --run-dir / --out"),
    ],
)
def test_disk_errors_are_one_line_naming_the_path_and_the_fix(code, fix, capsys, monkeypatch):
    monkeypatch.setattr(err, "width", 400)  # one physical line, whatever the terminal
    status, text = _reported(OSError(code, os.strerror(code), "/runs/demo/synth/problems/shard-00001.jsonl"), capsys)
    assert status == 1
    assert text == f"error: cannot write /runs/demo/synth/problems/shard-00001.jsonl ({os.strerror(code)}): {fix}"


def test_ctrl_c_says_how_to_resume_and_a_bug_keeps_its_traceback(capsys):
    assert _reported(KeyboardInterrupt(), capsys) == (130, INTERRUPTED)
    assert _reported(ValueError("[synth] n = -1: must be 0 or more"), capsys) == (
        1, "error: [synth] n = -1: must be 0 or more")
    # not the disk's fault (a refused connection, a bug): the caller lets the traceback through
    assert _reported(OSError(errno.ECONNREFUSED, "Connection refused"), capsys) == (None, "")
    assert _reported(KeyError("oops"), capsys) == (None, "")


@pytest.mark.parametrize(
    "command",
    [
        ["synth", "--n", "2"],
        ["data", "cpt"],
        ["train", "cpt"],
        ["eval", "--backend", "gold", "--benchmark", "nl4opt", "--name", "gold"],
        ["run", RECIPE],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_every_stage_command_says_how_to_resume_after_ctrl_c(command, tmp_path, monkeypatch):
    import trex_cli.orchestrator
    import trex_cli.stages
    import trex_cli.stages.train

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt  # where Ctrl-C lands: inside the stage's work

    for owner in (trex_cli.stages.Stage, trex_cli.stages.train.TrainStage, trex_cli.orchestrator.RecipeRun):
        monkeypatch.setattr(owner, "run", interrupted)
    # every command takes the run folder as this recipe key (most also as --run-dir)
    result = CliRunner().invoke(app, [*command, "--set", f'run.run_dir="{tmp_path}"'])
    assert result.exit_code == 130, result.output
    assert INTERRUPTED in result.output and "Traceback" not in result.output
