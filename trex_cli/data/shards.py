"""Writing token rows as Hugging Face `datasets` Arrow shards (the format `trex train` reads).

Rows are given flat (all tokens of all rows in one array, plus row offsets) and become list columns
`input_ids` (int32), `loss_mask` (int8) and `position_ids` (int32) without a Python loop per row.
A split is written to a temporary folder and renamed, so a reader never sees half a split. The data
folder is also a saved `DatasetDict` (`datasets.load_from_disk(folder)` gives its train and validation
splits), and SFT splits carry the mask again under trl's name, `completion_mask`, so trl's collator
(`completion_only_loss`) trains on exactly the tokens trex does.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

MAX_TOKENS_PER_TABLE = 1 << 30  # Arrow list offsets are int32: cut bigger splits into chunks


def _list_column(offsets: np.ndarray, values: np.ndarray, arrow_type):
    import pyarrow as pa

    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), pa.array(values, type=arrow_type))


def save_rows(
    folder: Path,
    offsets: np.ndarray,
    input_ids: np.ndarray,
    loss_mask: np.ndarray,
    position_ids: np.ndarray,
    mask_alias: str | None = None,
) -> int:
    """Save rows `[offsets[i], offsets[i+1])` of the flat arrays as a dataset; returns the row count.
    `mask_alias` names a second copy of the loss mask (trl's `completion_mask`)."""
    import datasets
    import pyarrow as pa
    from datasets.table import InMemoryTable

    datasets.disable_progress_bars()
    offsets = np.asarray(offsets, dtype=np.int64)
    num_rows = len(offsets) - 1
    # cut into chunks of rows whose tokens fit int32 list offsets
    boundaries = [0]
    while boundaries[-1] < num_rows:
        start = boundaries[-1]
        end = int(np.searchsorted(offsets, offsets[start] + MAX_TOKENS_PER_TABLE, side="right")) - 1
        boundaries.append(min(max(end, start + 1), num_rows))
    if len(boundaries) == 1:
        boundaries.append(0)  # no rows: one empty chunk keeps the schema
    chunks = []
    for start, end in zip(boundaries[:-1], boundaries[1:], strict=True):
        local_offsets = offsets[start : end + 1] - offsets[start]
        tokens = slice(int(offsets[start]), int(offsets[end]))
        columns = {
            "input_ids": _list_column(local_offsets, input_ids[tokens], pa.int32()),
            "loss_mask": _list_column(local_offsets, loss_mask[tokens], pa.int8()),
            "position_ids": _list_column(local_offsets, position_ids[tokens], pa.int32()),
        }
        if mask_alias:
            columns[mask_alias] = columns["loss_mask"]
        chunks.append(pa.table(columns))
    table = pa.concat_tables(chunks)
    folder = Path(folder)
    temporary = folder.with_name(folder.name + ".partial")
    shutil.rmtree(temporary, ignore_errors=True)
    dataset = datasets.Dataset(InMemoryTable(table))
    # an empty split still gets one (empty) shard: datasets cannot load a split saved with none
    dataset.save_to_disk(str(temporary), num_shards=None if table.num_rows else 1)
    shutil.rmtree(folder, ignore_errors=True)
    temporary.rename(folder)
    return table.num_rows


def write_dataset_dict(folder: Path, splits: list[str]) -> None:
    """Make the data folder a saved `DatasetDict` of its split folders (the file `save_to_disk` writes)."""
    from trex_cli.artifacts import write_json_atomic

    write_json_atomic(Path(folder) / "dataset_dict.json", {"splits": list(splits)})
