"""Every row a data build drops, counted by reason and kept in `exclusions.jsonl`.

Nothing is dropped silently: readers record malformed lines (with `--skip-bad`), the cleaning steps
record duplicates and benchmark overlaps, the SFT builder records over-length samples. The file
names each row's source, id, file and line, and the reason's detail (the duplicate it matched, the
benchmark item it overlaps).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path


class ExclusionLog:
    """Collects dropped rows; `write()` saves them as JSON Lines."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.counts: Counter[str] = Counter()

    def add(self, reason: str, **detail) -> None:
        self.counts[reason] += 1
        self.rows.append({"reason": reason, **detail})

    def by_reason(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))

    def write(self, path: Path) -> None:
        from trex_cli.artifacts import write_text_atomic

        lines = [json.dumps(row, ensure_ascii=False, default=str) for row in self.rows]
        write_text_atomic(Path(path), "\n".join(lines) + ("\n" if lines else ""))
