"""Training metrics: per-step records in `metrics.jsonl`, a console line every k steps, a rich progress
bar, optional TensorBoard, and a loss-curve PNG at the end.

MFU is model FLOPs per second over the peak of the device, reported under both FLOP conventions of the
model's `flops.py` (Megatron's count with attention as DeepSeek-V4 really computes it, and the
dense-attention figure beside it). The peak is named in every record: on a CPU it is measured at start
(a matmul calibration in the compute dtype with the threads this process uses), on GPUs and NPUs it
comes from the table below (dense bf16 per rank) and is measured the same way for unknown devices.
"""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

import torch

from trex_cli.console import out, warn

# Dense bf16 peak per rank (one die on Ascend 910C: the unit a training rank runs on), FLOP/s.
DEVICE_PEAKS = {
    "B200": 2.25e15,
    "H200": 989e12,
    "H100": 989e12,
    "H800": 989e12,
    "A100": 312e12,
    "A800": 312e12,
    "Ascend910_93": 390e12,  # 910C, per die (780 TFLOP/s per chip)
    "910C": 390e12,
}


def measure_matmul_peak(device: torch.device, dtype: torch.dtype, size: int = 1536, seconds: float = 0.4) -> float:
    """Best FLOP/s of a square matmul in `dtype` on `device`, over about `seconds` of repetitions."""
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    flops = 2.0 * size**3

    def synchronize():
        if device.type in ("cuda", "npu"):
            getattr(torch, device.type).synchronize()

    torch.matmul(a, b)  # warm-up: first call pays for allocation and kernel selection
    synchronize()
    best = 0.0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        torch.matmul(a, b)
        synchronize()
        best = max(best, flops / max(time.perf_counter() - start, 1e-9))
    return best


def device_peak(device: torch.device, dtype: torch.dtype) -> tuple[float, str]:
    """(peak FLOP/s per rank, how it was found)."""
    dtype_name = str(dtype).replace("torch.", "")
    if device.type in ("cuda", "npu"):
        name = getattr(torch, device.type).get_device_name(device)
        for key, peak in DEVICE_PEAKS.items():
            if key.lower() in name.lower():
                return peak, f"{name} table peak {peak / 1e12:.0f} TFLOP/s (dense bf16)"
        measured = measure_matmul_peak(device, dtype, size=8192, seconds=1.0)
        return measured, f"{name} measured {dtype_name} matmul peak {measured / 1e12:.1f} TFLOP/s"
    measured = measure_matmul_peak(device, dtype)
    threads = torch.get_num_threads()
    return measured, f"CPU measured {dtype_name} matmul peak {measured / 1e9:.0f} GFLOP/s ({threads} threads)"


def flops_per_token(config, seq_len: int) -> dict[str, float | None]:
    """Training FLOPs per token under both conventions (None when the model has no FLOP counter)."""
    try:
        from trex_cli.models.deepseek_v4.flops import training_flops_per_token
    except ImportError:
        warn("trex_cli.models.deepseek_v4.flops is not available: MFU is not reported")
        return {"v4": None, "dense": None}
    return {kind: float(training_flops_per_token(config, seq_len, attention=kind)) for kind in ("v4", "dense")}


def peak_memory_bytes(device: torch.device) -> int:
    if device.type in ("cuda", "npu"):
        return int(getattr(torch, device.type).max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


class MetricsLogger:
    """Rank 0 writes; the other ranks call the same methods, which do nothing for them."""

    def __init__(
        self,
        folder: Path,
        is_main: bool,
        total_steps: int,
        start_step: int,
        log_every: int,
        tensorboard: bool,
        show_progress: bool = True,
    ):
        self.folder = Path(folder)
        self.path = self.folder / "metrics.jsonl"
        self.is_main = is_main
        self.log_every = max(1, log_every)
        self.writer = None
        self.progress = None
        if not is_main:
            return
        self._keep_steps_up_to(start_step)  # a resumed run re-logs the steps after its checkpoint
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(str(self.folder / "tensorboard"))
            except ImportError:
                warn("[train] tensorboard = true, but the tensorboard package is missing: pip install tensorboard")
        if show_progress:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.progress = Progress(
                TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                TimeRemainingColumn(), console=out, transient=True,
            )
            self.task = self.progress.add_task("train", total=total_steps, completed=start_step, info="")
            self.progress.start()

    def _keep_steps_up_to(self, step: int) -> None:
        if not self.path.is_file():
            return
        kept = [line for line in self.path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
        self.path.write_text("".join(line + "\n" for line in kept))

    def log(self, record: dict) -> None:
        if not self.is_main:
            return
        with open(self.path, "a") as stream:
            stream.write(json.dumps(record) + "\n")
        if self.writer is not None:
            for key, value in record.items():
                if isinstance(value, int | float) and key != "step":
                    self.writer.add_scalar(f"train/{key}", value, record["step"])
        step = record["step"]
        summary = f"loss {record['loss']:.4f}  lr {record['lr']:.2e}  {record['tokens_per_s']:.0f} tok/s"
        if self.progress is not None:
            self.progress.update(self.task, completed=step, info=summary)
        if step % self.log_every == 0 or step == 1:
            mfu = record.get("mfu_v4")
            mfu_text = f"  MFU {100 * mfu:.2f}%" if mfu is not None else ""
            skipped = "  [yellow]skipped (non-finite)[/yellow]" if record.get("skipped") else ""
            message = (
                f"step {step:>5}  loss {record['loss']:.4f}  grad-norm {record['grad_norm']:.3f}  "
                f"lr {record['lr']:.2e}  {record['tokens_per_s']:.0f} tok/s{mfu_text}{skipped}"
            )
            if self.progress is not None:
                self.progress.console.print(message, highlight=False)
            else:
                out.print(message, highlight=False)

    def close(self) -> None:
        if not self.is_main:
            return
        if self.progress is not None:
            self.progress.stop()
        if self.writer is not None:
            self.writer.close()
        plot_loss_curve(self.path, self.folder / "loss.png")


def read_metrics(path: Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def plot_loss_curve(metrics_path: Path, png_path: Path) -> Path | None:
    records = [r for r in read_metrics(metrics_path) if not r.get("skipped")]
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in records]
    figure, (loss_axis, lr_axis) = plt.subplots(2, 1, figsize=(7, 5), sharex=True, height_ratios=[3, 1])
    loss_axis.plot(steps, [r["loss"] for r in records], label="total loss")
    loss_axis.plot(steps, [r["lm_loss"] for r in records], label="LM loss", alpha=0.7)
    if any(r.get("mtp_loss") is not None for r in records):
        loss_axis.plot(steps, [r.get("mtp_loss") for r in records], label="MTP loss", alpha=0.7)
    loss_axis.set_ylabel("loss")
    loss_axis.legend()
    loss_axis.grid(alpha=0.3)
    lr_axis.plot(steps, [r["lr"] for r in records], color="tab:gray")
    lr_axis.set_ylabel("LR")
    lr_axis.set_xlabel("step")
    lr_axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(png_path, dpi=110)
    plt.close(figure)
    return png_path
