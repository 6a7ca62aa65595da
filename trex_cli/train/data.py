"""Reading a `trex data` folder as global batches of token ids, loss masks and position ids (the train
split in the seeded order below, the validation split in order, each row once per pass).

The order of rows is a pure function of (seed, step): each epoch is a fresh permutation drawn from
`seed + epoch`, and step s takes rows [s * global_batch, (s + 1) * global_batch) of the endless
sequence of epochs. So the data position to resume from is just the step number, and every
data-parallel layout sees the same global batch: rank d takes its contiguous slice, cut into
micro-batches, which is also exactly how a single process walks the batch with gradient accumulation.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from trex_cli.artifacts import read_manifest

REQUIRED_COLUMNS = ("input_ids", "loss_mask", "position_ids")


@dataclasses.dataclass
class MicroBatch:
    input_ids: torch.Tensor  # [rows, seq_len] int64
    position_ids: torch.Tensor  # [rows, seq_len] int64, restarting at 0 at every document start
    loss_mask: torch.Tensor  # [rows, seq_len] float32, 1 where the token is a training target

    @property
    def target_tokens(self) -> int:
        """Targets the LM loss averages over: every masked-in position but the first (nothing predicts it)."""
        return int(self.loss_mask[:, 1:].sum().item())

    def to(self, device: torch.device) -> MicroBatch:
        return MicroBatch(self.input_ids.to(device), self.position_ids.to(device), self.loss_mask.to(device))


class TrainData:
    """The train split of a data folder, served as per-rank micro-batches of a global batch."""

    def __init__(self, folder: Path, split: str = "train"):
        import datasets

        self.folder = Path(folder)
        read_manifest(self.folder, "data")
        meta_path = self.folder / "meta.json"
        if not meta_path.is_file():
            raise FileNotFoundError(f"{meta_path} is missing: rebuild the folder with `trex data`")
        self.meta = json.loads(meta_path.read_text())
        self.seq_len = int(self.meta["seq_len"])
        self.pad_token_id = int(self.meta.get("pad_token_id") or 0)
        split_path = self.folder / split
        if not split_path.is_dir():
            raise FileNotFoundError(f"{split_path} is missing: the data folder has no '{split}' split")
        dataset = datasets.load_from_disk(str(split_path))
        missing = [c for c in REQUIRED_COLUMNS if c not in dataset.column_names]
        if missing:
            raise ValueError(
                f"{split_path}: columns {missing} are missing (has {dataset.column_names}); "
                "rebuild it with `trex data`"
            )
        if len(dataset) == 0:
            raise ValueError(f"{split_path} has no rows; build the data folder with more documents")
        self.dataset = dataset.with_format("numpy", columns=list(REQUIRED_COLUMNS))
        self.num_rows = len(dataset)

    @staticmethod
    def validation_rows(folder: Path) -> int | None:
        """Rows of the folder's validation split as its meta.json counts them (None: not counted)."""
        meta_path = Path(folder) / "meta.json"
        if not meta_path.is_file():
            return None
        rows = json.loads(meta_path.read_text()).get("num_validation_rows")
        return int(rows) if rows is not None else None

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])

    @property
    def tokenizer_dir(self) -> Path:
        return self.folder / "tokenizer"

    def _epoch_order(self, epoch: int, seed: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        return torch.randperm(self.num_rows, generator=generator)

    def global_rows(self, step: int, global_batch_size: int, seed: int) -> list[int]:
        """Row indices of the global batch for optimizer step `step` (0-based)."""
        first = step * global_batch_size
        rows: list[int] = []
        epoch, cached_order = -1, None
        for position in range(first, first + global_batch_size):
            wanted_epoch = position // self.num_rows
            if wanted_epoch != epoch:
                epoch, cached_order = wanted_epoch, self._epoch_order(wanted_epoch, seed)
            rows.append(int(cached_order[position % self.num_rows]))
        return rows

    def collate(self, rows: list[int]) -> MicroBatch:
        """Stack rows, padding short (unpacked SFT) rows to seq_len with pad tokens and loss mask 0."""
        length = self.seq_len
        input_ids = torch.full((len(rows), length), self.pad_token_id, dtype=torch.long)
        loss_mask = torch.zeros((len(rows), length), dtype=torch.float32)
        position_ids = torch.arange(length).repeat(len(rows), 1)
        records = self.dataset[rows]
        for i in range(len(rows)):
            ids = torch.as_tensor(records["input_ids"][i], dtype=torch.long)[:length]
            n = ids.numel()
            input_ids[i, :n] = ids
            loss_mask[i, :n] = torch.as_tensor(records["loss_mask"][i][:n], dtype=torch.float32)
            positions = torch.as_tensor(records["position_ids"][i][:n], dtype=torch.long)
            position_ids[i, :n] = positions
            if n < length:  # padding continues the last document's positions; it is never a target
                start = int(positions[-1]) + 1 if n else 0
                position_ids[i, n:] = torch.arange(start, start + length - n)
        return MicroBatch(input_ids, position_ids, loss_mask)

    def micro_batches(
        self, step: int, global_batch_size: int, micro_batch_size: int, dp_rank: int, dp_size: int, seed: int
    ) -> list[MicroBatch]:
        """This data-parallel rank's micro-batches of the global batch for `step`."""
        rows = self.global_rows(step, global_batch_size, seed)
        per_rank = global_batch_size // dp_size
        mine = rows[dp_rank * per_rank : (dp_rank + 1) * per_rank]
        return [self.collate(mine[i : i + micro_batch_size]) for i in range(0, per_rank, micro_batch_size)]

    def validation_batches(
        self, global_batch_size: int, micro_batch_size: int, dp_rank: int, dp_size: int, max_batches: int
    ) -> list[list[MicroBatch]]:
        """This rank's micro-batches of every global batch of a validation pass: the rows in order, each
        once (the first `max_batches` global batches; 0: all). The last batch is filled up with copies of
        row 0 whose loss mask is zero, so every rank runs the same micro-batches and no row counts twice."""
        count = -(-self.num_rows // global_batch_size)
        count = min(count, max_batches) if max_batches > 0 else count
        per_rank = global_batch_size // dp_size
        passes = []
        for index in range(count):
            rows = list(range(index * global_batch_size, (index + 1) * global_batch_size))
            mine = rows[dp_rank * per_rank : (dp_rank + 1) * per_rank]
            micro = []
            for start in range(0, per_rank, micro_batch_size):
                chunk = mine[start : start + micro_batch_size]
                batch = self.collate([row if row < self.num_rows else 0 for row in chunk])
                for position, row in enumerate(chunk):
                    if row >= self.num_rows:
                        batch.loss_mask[position] = 0.0
                micro.append(batch)
            passes.append(micro)
        return passes


def check_batch_sizes(global_batch_size: int, micro_batch_size: int, dp_size: int, where: str) -> int:
    """Gradient-accumulation steps per optimizer step; a clear error when the sizes do not divide."""
    if micro_batch_size < 1 or global_batch_size < 1:
        raise ValueError(f"{where}: global_batch_size and micro_batch_size must be 1 or more")
    if global_batch_size % (micro_batch_size * dp_size):
        raise ValueError(
            f"{where}: global_batch_size {global_batch_size} must be a multiple of micro_batch_size "
            f"{micro_batch_size} x data-parallel ranks {dp_size}"
        )
    return global_batch_size // (micro_batch_size * dp_size)
