"""The `trex data` summary fits an 80-column terminal and still shows every source path whole."""

from __future__ import annotations

import io
import types

from rich.console import Console

from trex_cli.commands import data as data_command


def test_summary_tables_fit_80_columns_and_fold_long_paths(monkeypatch):
    path = "runs/a-rather-long-run-name/synth-with-a-long-folder-name/and/deeper/still"
    stats = {
        "sources": [{
            "source": path, "read": 123456, "kept": 120000, "tokens_kept": 987654321, "tokens_in_mix": 876543210,
            "share_of_mix": 1.0, "repeats": 3.5, "capped_by_max_upsample": True,
        }],
        "splits": {"train": {"rows": 1234567, "tokens": 987654321}, "validation": {"rows": 65, "tokens": 16640}},
        "drops_by_reason": {"near_duplicate": 12, "bad_input": 1},
        "out": "runs/x/data/cpt", "wall_time_s": 1.5,
    }
    screen = io.StringIO()
    monkeypatch.setattr(data_command, "out", Console(file=screen, width=80, color_system=None))
    data_command._print_summary(types.SimpleNamespace(ran=True, details=stats), "CPT sources")
    lines = screen.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in screen.getvalue()
    source_cells = "".join(line.split("│")[1].strip() for line in lines if line.count("│") > 3)
    assert path in source_cells and "876,543,210" in screen.getvalue() and "3.50 (capped)" in screen.getvalue()
