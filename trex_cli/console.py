"""The two consoles every command prints through: results to stdout, problems to stderr."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

out = Console()
err = Console(stderr=True)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {message}")


USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError)


def user_errors(command):
    """Decorate a typer command: a user mistake (ValueError, FileNotFoundError) prints one red line on
    stderr and exits with status 1, with no traceback (TREX_DEBUG=1 shows it). Works the same under
    the console script and typer's CliRunner."""
    import functools
    import os

    import typer

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except USER_ERRORS as error:
            if os.environ.get("TREX_DEBUG"):
                raise
            err.print(f"[red]error:[/red] {escape(str(error))}", highlight=False)
            raise typer.Exit(code=1) from None

    return wrapper
