"""Programs and process probes the sandbox tests share (tests/sandbox only; no files of the project)."""

from __future__ import annotations

import os
from pathlib import Path


def processes_with(token: str) -> list[int]:
    """Host processes whose command line holds `token` (seen from outside any PID namespace)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if token in Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry))
            except OSError:
                pass
    return found
