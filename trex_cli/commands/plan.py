"""`trex plan`: being written (see the open issue for this command group)."""

import typer

app = typer.Typer(help="(being written)", no_args_is_help=True)
