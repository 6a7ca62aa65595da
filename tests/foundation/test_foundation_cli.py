"""The `trex` command: help lists every command group, and the root imports no heavy package."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from trex_cli.app import app


def test_help_lists_every_command_group():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("synth", "data", "train", "eval", "plan", "run"):
        assert command in result.output


def test_root_command_imports_no_heavy_package():
    # `trex --help` must answer at once: the command modules defer torch, pyomo, datasets and friends
    code = (
        "import sys, trex_cli.app\n"
        "heavy = [m for m in ('torch', 'pyomo', 'datasets', 'transformers', 'highspy', 'matplotlib') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == ""
