"""Where training metrics go besides `metrics.jsonl`: TensorBoard and Weights & Biases (`report_to`).

Each reporter takes the same calls: `log(step, values, split)` with split "train" or "validation"
(the keys become `train/loss`, `validation/lm_loss`, as trl and torchtitan name them) and `close()`.
Only rank 0 makes reporters. The W&B run id is kept in the stage folder, so a resumed stage logs into
the same run; `WANDB_MODE=offline` writes it under `<stage>/wandb/offline-run-*` for `wandb sync`.
"""

from __future__ import annotations

import uuid
from pathlib import Path


class TensorBoardReporter:
    """Scalars in `<stage>/tensorboard` (torch's SummaryWriter; needs the tensorboard package)."""

    def __init__(self, folder: Path):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(Path(folder) / "tensorboard"))

    def log(self, step: int, values: dict[str, float], split: str) -> None:
        for key, value in values.items():
            self.writer.add_scalar(f"{split}/{key}", value, step)
        self.writer.flush()  # a user watching the run sees each point when it is logged

    def close(self) -> None:
        self.writer.close()


class WandbReporter:
    """One W&B run per training stage, its id kept in `<stage>/wandb_run_id` for resumes."""

    def __init__(self, folder: Path, project: str, name: str, config: dict):
        import wandb

        id_file = Path(folder) / "wandb_run_id"
        run_id = id_file.read_text().strip() if id_file.is_file() else uuid.uuid4().hex[:8]
        id_file.write_text(run_id + "\n")
        self.run = wandb.init(
            project=project, name=name, id=run_id, resume="allow", dir=str(folder), config=config,
            settings=wandb.Settings(console="off"),  # the trainer's own console stays as it is
        )

    def log(self, step: int, values: dict[str, float], split: str) -> None:
        self.run.log({f"{split}/{key}": value for key, value in values.items()}, step=step)

    def close(self) -> None:
        self.run.finish()


def make_reporters(names: list[str], folder: Path, project: str, run_name: str, config: dict) -> list:
    """The reporters `names` asks for (their packages were checked before the ranks started)."""
    reporters = []
    for name in names:
        if name == "tensorboard":
            reporters.append(TensorBoardReporter(folder))
        elif name == "wandb":
            reporters.append(WandbReporter(folder, project, run_name, config))
    return reporters
