"""The two consoles every command prints through: results to stdout, problems to stderr; and the one
place a user mistake, a full or read-only disk, or Ctrl-C becomes a single line instead of a traceback."""

from __future__ import annotations

import errno

from rich.console import Console
from rich.markup import escape

out = Console()
err = Console(stderr=True)

INTERRUPTED = "interrupted: run the same command again to resume"


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {message}")


USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError)

# what the environment refuses, with the fix; every stage writes its outputs so that finished work survives
# (atomic renames, finished blocks and checkpoints), so "run the same command again" loses nothing
DISK_ERRORS = {
    errno.ENOSPC: "the disk is full: free space there (or choose another --run-dir / --out), then run the same "
                  "command again; finished work is kept",
    errno.EDQUOT: "the disk quota is used up: free space there (or choose another --run-dir / --out), then run "
                  "the same command again; finished work is kept",
    errno.EROFS: "the file system is read-only: choose a writable --run-dir / --out",
    errno.EACCES: "permission denied: make it writable for this user, or choose another --run-dir / --out",
    errno.EPERM: "operation not permitted: make it writable for this user, or choose another --run-dir / --out",
    errno.ENOTDIR: "a part of that path is a file where a folder is expected: move the file away, or choose "
                   "another --run-dir / --out",
    errno.EISDIR: "that path is a folder where a file is expected: move it away, or choose another --run-dir / --out",
}


def disk_error_message(error: OSError) -> str | None:
    """One line for an OSError the environment caused (full disk, read-only folder...), naming the path
    and the fix; None for any other OSError."""
    fix = DISK_ERRORS.get(error.errno)
    if fix is None:
        return None
    path = error.filename if error.filename is not None else "an output file"
    return f"cannot write {path} ({error.strerror or errno.errorcode.get(error.errno, error.errno)}): {fix}"


def report_failure(error: BaseException) -> int | None:
    """Print the one line for `error` on stderr and return the exit status, or None when it is a bug
    (the caller lets its traceback through)."""
    if isinstance(error, KeyboardInterrupt):
        err.print(f"[yellow]{INTERRUPTED}[/yellow]", highlight=False)
        return 130  # the shell's status for SIGINT
    if isinstance(error, USER_ERRORS):
        message = str(error)
    elif isinstance(error, OSError):
        message = disk_error_message(error)
        if message is None:
            return None
    else:
        return None
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return 1


def user_errors(command):
    """Decorate a typer command: a user mistake (ValueError, FileNotFoundError), a full or read-only disk
    and Ctrl-C print one line on stderr and exit with status 1 (130 for Ctrl-C), with no traceback
    (TREX_DEBUG=1 shows it). Works the same under the console script and typer's CliRunner."""
    import functools
    import os

    import typer

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (KeyboardInterrupt, Exception) as error:
            if os.environ.get("TREX_DEBUG"):
                raise
            status = report_failure(error)
            if status is None:
                raise
            raise typer.Exit(code=status) from None

    return wrapper
