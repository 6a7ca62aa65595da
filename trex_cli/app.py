"""The `trex` command: a typer root with one sub-app per command group.

Command modules import only typer and the standard library at module level, so `trex --help`
answers at once; the heavy imports (torch, pyomo, datasets) happen inside the commands.
User mistakes raise ValueError (or FileNotFoundError) with a message that names the fix; they are
printed without a traceback (set TREX_DEBUG=1 to see it) and exit with status 1.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from trex_cli.commands import data, plan, run, synth, train
from trex_cli.commands import eval as eval_command
from trex_cli.console import report_failure

app = typer.Typer(
    name="trex",
    help="Post-train DeepSeek-V4 MoE models for Operations Research: "
    "synth -> data -> train -> eval, and plan SuperPOD layouts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



def _print_version(value: bool) -> None:
    if value:
        from importlib import metadata

        from trex_cli import __version__

        try:
            torch_version = metadata.version("torch")
        except metadata.PackageNotFoundError:
            torch_version = "not installed"
        typer.echo(f"trex {__version__} (torch {torch_version}, Python {sys.version.split()[0]})")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print trex's version and exit.")
    ] = False,
) -> None:
    """Post-train DeepSeek-V4 MoE models for Operations Research: synth -> data -> train -> eval, and plan
    SuperPOD layouts."""


app.command("synth")(synth.synth)
app.add_typer(data.app, name="data")
app.add_typer(train.app, name="train")
app.add_typer(eval_command.app, name="eval")
app.add_typer(plan.app, name="plan")
app.command("run")(run.run)


def main() -> None:
    """Console-script entry point: user errors, disk errors and Ctrl-C outside a command (the commands
    handle their own) become one clear line on stderr."""
    try:
        app()
    except (KeyboardInterrupt, Exception) as error:
        status = None if os.environ.get("TREX_DEBUG") else report_failure(error)
        if status is None:
            raise
        sys.exit(status)


if __name__ == "__main__":
    main()
