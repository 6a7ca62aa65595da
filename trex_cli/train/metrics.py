"""Training metrics: per-step records in `metrics.jsonl`, validation passes in `validation.jsonl`, a
console line every k steps, a rich progress bar, the `report_to` reporters (TensorBoard, W&B; see
reporters.py), and a loss-curve PNG at the end.

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


def format_duration(seconds: float) -> str:
    """90 -> '1m30s', 4000 -> '1h06m'."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


def format_bytes(count: int) -> str:
    return f"{count / 2**30:.1f} GiB" if count >= 2**30 else f"{count / 2**20:.0f} MiB"


class MetricsLogger:
    """Rank 0 writes `metrics.jsonl` (train steps), `validation.jsonl`, the console lines and the
    `report_to` reporters; the other ranks call the same methods, which do nothing for them.

    A console line is printed every `log_every` steps, at the first and the last, and whenever 30 s
    passed since the last one (slow steps still show progress), with the LM and MTP losses, the peak
    memory and an ETA from the recent step times (the first step of a process, which may compile kernels,
    is left out of it)."""

    QUIET_SECONDS = 30.0

    def __init__(
        self,
        folder: Path,
        is_main: bool,
        total_steps: int,
        start_step: int,
        log_every: int,
        report_to: list[str] = (),
        wandb_project: str = "trex",
        run_name: str = "trex",
        run_config: dict | None = None,
        show_progress: bool = True,
    ):
        self.folder = Path(folder)
        self.path = self.folder / "metrics.jsonl"
        self.validation_path = self.folder / "validation.jsonl"
        self.is_main = is_main
        self.total_steps = total_steps
        self.log_every = max(1, log_every)
        self.reporters: list = []
        self.progress = None
        self.step_seconds: list[float] = []
        self.last_print = time.monotonic()
        if not is_main:
            return
        for path in (self.path, self.validation_path):  # a resumed run re-logs the steps after its checkpoint
            _keep_steps_up_to(path, start_step)
        from trex_cli.train.reporters import make_reporters

        self.reporters = make_reporters(list(report_to), self.folder, wandb_project, run_name, run_config or {})
        if show_progress:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.progress = Progress(
                TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                TimeRemainingColumn(), console=out, transient=True,
            )
            self.task = self.progress.add_task("train", total=total_steps, completed=start_step, info="")
            self.progress.start()

    def _print(self, message: str) -> None:
        self.last_print = time.monotonic()
        # soft wrap: a narrow terminal folds the line itself, a log file keeps one line per step
        if self.progress is not None:
            self.progress.console.print(message, highlight=False, soft_wrap=True)
        else:
            out.print(message, highlight=False, soft_wrap=True)

    def eta_seconds(self, step: int) -> float | None:
        """Seconds left after `step`, from the mean of the last 20 step times (the process's first step
        only while it is the only one)."""
        times = self.step_seconds[1:] or self.step_seconds
        if not times:
            return None
        recent = times[-20:]
        return (self.total_steps - step) * sum(recent) / len(recent)

    def log(self, record: dict) -> None:
        if not self.is_main:
            return
        with open(self.path, "a") as stream:
            stream.write(json.dumps(record) + "\n")
        step = record["step"]
        self.step_seconds.append(record["step_time_s"])
        for reporter in self.reporters:
            reporter.log(step, _numbers(record), "train")
        summary = f"loss {record['loss']:.4f}  lr {record['lr']:.2e}  {record['tokens_per_s']:.0f} tok/s"
        if self.progress is not None:
            self.progress.update(self.task, completed=step, info=summary)
        quiet_too_long = time.monotonic() - self.last_print >= self.QUIET_SECONDS
        if step % self.log_every == 0 or step == 1 or step == self.total_steps or quiet_too_long:
            self._print(self.console_line(record))

    def console_line(self, record: dict) -> str:
        step = record["step"]
        parts = [f"step {step:>{len(str(self.total_steps))}}/{self.total_steps}", f"loss {record['loss']:.4f}"]
        losses = [f"lm {record['lm_loss']:.4f}"]
        if record.get("mtp_loss") is not None:
            losses.append(f"mtp {record['mtp_loss']:.4f}")
        parts[-1] += f" ({', '.join(losses)})"
        parts += [f"grad-norm {record['grad_norm']:.3f}", f"lr {record['lr']:.2e}", f"{record['tokens_per_s']:.0f} tok/s"]
        if record.get("mfu_v4") is not None:
            parts.append(f"MFU {100 * record['mfu_v4']:.2f}%")
        if record.get("peak_memory_bytes"):
            parts.append(f"mem {format_bytes(record['peak_memory_bytes'])}")
        eta = self.eta_seconds(step)
        if eta is not None and step < self.total_steps:
            parts.append(f"eta {format_duration(eta)}")
        if record.get("skipped"):
            parts.append("[yellow]skipped (non-finite)[/yellow]")
        return "  ".join(parts)

    def log_validation(self, record: dict) -> None:
        """One validation pass: {"step", "loss", "lm_loss", "mtp_loss", "target_tokens", "seconds"}."""
        if not self.is_main:
            return
        with open(self.validation_path, "a") as stream:
            stream.write(json.dumps(record) + "\n")
        for reporter in self.reporters:
            reporter.log(record["step"], _numbers(record), "validation")
        losses = f"lm {record['lm_loss']:.4f}" + (
            f", mtp {record['mtp_loss']:.4f}" if record.get("mtp_loss") is not None else ""
        )
        self._print(
            f"validation at step {record['step']}: loss {record['loss']:.4f} ({losses}) over "
            f"{record['target_tokens']} targets, {format_duration(record['seconds'])}"
        )

    def close(self) -> None:
        if not self.is_main:
            return
        if self.progress is not None:
            self.progress.stop()
        for reporter in self.reporters:
            reporter.close()
        plot_loss_curve(self.path, self.folder / "loss.png", self.validation_path)


def _numbers(record: dict) -> dict[str, float]:
    """The numeric metrics of a record (no step, flags or names), as reporters take them."""
    return {
        key: value for key, value in record.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and key != "step"
    }


def _keep_steps_up_to(path: Path, step: int) -> None:
    if not path.is_file():
        return
    kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
    path.write_text("".join(line + "\n" for line in kept))


def read_metrics(path: Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def plot_loss_curve(metrics_path: Path, png_path: Path, validation_path: Path | None = None) -> Path | None:
    records = [r for r in read_metrics(metrics_path) if not r.get("skipped")]
    validation = read_metrics(validation_path) if validation_path is not None else []
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
    if validation:
        loss_axis.plot([r["step"] for r in validation], [r["loss"] for r in validation], "o-", label="validation loss")
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
