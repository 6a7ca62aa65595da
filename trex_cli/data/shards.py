"""Writing token rows as Hugging Face `datasets` Arrow shards (the format `trex train` reads).

Rows are given flat (all tokens of all rows in one array, plus row offsets) and become list columns
`input_ids` (int32), `loss_mask` (int8) and `position_ids` (int32) without a Python loop per row.
A split is written to a temporary folder and renamed, so a reader never sees half a split. The data
folder is also a saved `DatasetDict` (`datasets.load_from_disk(folder)` gives its train and validation
splits), and SFT splits carry the mask again under trl's name, `completion_mask`, so trl's collator
(`completion_only_loss`) trains on exactly the tokens trex does.
"""

from __future__ import annotations

import json
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


SHARD_BYTES = 500 << 20  # a new Arrow file after this many bytes of rows (what `save_to_disk` cuts at)


class RowWriter:
    """Rows appended chunk by chunk into a split folder in `save_to_disk`'s layout (Arrow stream files
    `data-XXXXX-of-NNNNN.arrow`, `dataset_info.json`, `state.json`), so a split never needs to fit
    in memory; `datasets.load_from_disk` reads it as it reads `save_rows`' folders. Written to a
    temporary folder and renamed by `close()`, like `save_rows`."""

    def __init__(self, folder: Path, mask_alias: str | None = None, shard_bytes: int = SHARD_BYTES) -> None:
        import pyarrow as pa

        self.folder = Path(folder)
        self.mask_alias = mask_alias
        self.shard_bytes = shard_bytes
        self.rows = 0
        self._temporary = self.folder.with_name(self.folder.name + ".partial")
        shutil.rmtree(self._temporary, ignore_errors=True)
        self._temporary.mkdir(parents=True)
        names = [("input_ids", "int32"), ("loss_mask", "int8"), ("position_ids", "int32")]
        if mask_alias:
            names.append((mask_alias, "int8"))
        self._features = {
            name: {"feature": {"dtype": dtype, "_type": "Value"}, "_type": "List"} for name, dtype in names
        }
        metadata = {"huggingface": json.dumps({"info": {"features": self._features}})}
        self._schema = pa.schema(
            [pa.field(name, pa.list_(getattr(pa, dtype)())) for name, dtype in names], metadata=metadata
        )
        self._files: list[Path] = []
        self._writer = None
        self._written = 0

    def append(self, input_ids: np.ndarray, loss_mask: np.ndarray, position_ids: np.ndarray) -> None:
        """Append rows given as (rows, seq_len) arrays."""
        rows, seq_len = input_ids.shape
        offsets = np.arange(rows + 1, dtype=np.int64) * seq_len
        self.append_flat(offsets, input_ids.reshape(-1), loss_mask.reshape(-1), position_ids.reshape(-1))

    def append_flat(self, offsets: np.ndarray, input_ids: np.ndarray, loss_mask: np.ndarray,
                    position_ids: np.ndarray) -> None:
        """Append rows of any lengths, given flat (row i is `[offsets[i], offsets[i+1])` of the arrays, as
        `save_rows` takes them); a chunk must fit int32 list offsets."""
        import pyarrow as pa

        rows = len(offsets) - 1
        if rows <= 0:
            return
        offsets = np.asarray(offsets, dtype=np.int64) - int(offsets[0])
        columns = [
            _list_column(offsets, np.asarray(input_ids, dtype=np.int32), pa.int32()),
            _list_column(offsets, np.asarray(loss_mask, dtype=np.int8), pa.int8()),
            _list_column(offsets, np.asarray(position_ids, dtype=np.int32), pa.int32()),
        ]
        if self.mask_alias:
            columns.append(columns[1])
        batch = pa.record_batch(columns, schema=self._schema)
        if self._writer is None or self._written >= self.shard_bytes:
            self._next_file()
        self._writer.write_batch(batch)
        self._written += batch.nbytes
        self.rows += rows

    def _next_file(self) -> None:
        import pyarrow as pa

        if self._writer is not None:
            self._writer.close()
        path = self._temporary / f"data-{len(self._files):05d}.arrow"
        self._files.append(path)
        self._writer = pa.ipc.new_stream(str(path), self._schema)
        self._written = 0

    def close(self) -> int:
        """Finish the split; returns its row count."""
        import hashlib

        from trex_cli.artifacts import write_json_atomic

        if self._writer is None:
            self._next_file()  # an empty split still gets one (empty) shard, as `save_rows` gives it
        self._writer.close()
        names = []
        for index, path in enumerate(self._files):
            name = f"data-{index:05d}-of-{len(self._files):05d}.arrow"
            path.rename(self._temporary / name)
            names.append(name)
        fingerprint = hashlib.blake2b(f"{self.folder.name}:{self.rows}:{names}".encode(), digest_size=8).hexdigest()
        write_json_atomic(self._temporary / "state.json", {
            "_data_files": [{"filename": name} for name in names],
            "_fingerprint": fingerprint,
            "_format_columns": None,
            "_format_kwargs": {},
            "_format_type": None,
            "_output_all_columns": False,
            "_split": None,
        })
        write_json_atomic(self._temporary / "dataset_info.json", {
            "citation": "", "description": "", "features": self._features, "homepage": "", "license": "",
        })
        shutil.rmtree(self.folder, ignore_errors=True)
        self._temporary.rename(self.folder)
        return self.rows
