"""Writing files so that a reader never sees half of one: a temporary file in the same folder, fsync,
then an atomic rename. data_synth is the lowest package of trex (it imports nothing of the rest), so
these writers live here and the stage folders of `trex_cli.artifacts` use the same ones."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)  # the old file at `path`, if any, is untouched
        if error.filename is None:  # a failed write (a full disk) names no file: name the one it was for
            raise OSError(error.errno, error.strerror, str(path)) from error
        raise
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
