"""What users of trl and torchtitan expect from a training run: validation loss on the data folder's
validation split, metrics in TensorBoard and Weights & Biases (offline), and a console line with the LM
and MTP losses, the memory, an ETA and a note before a step that compiles kernels."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from conftest import make_data_folder, run_trex

from trex_cli.train.config import ParallelSection, StageSchedule, TrainSection
from trex_cli.train.data import TrainData
from trex_cli.train.metrics import MetricsLogger, format_duration


@pytest.fixture
def one_rank(monkeypatch):
    from trex_cli.train.distributed import init_distributed

    monkeypatch.setenv("TREX_KERNELS", "reference")
    distributed = init_distributed(ParallelSection())
    yield distributed
    distributed.close()


@pytest.mark.slow
def test_validation_loss_is_the_token_weighted_loss_of_every_row_once(one_rank, sft_data):
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.train.trainer import Engine, build_model

    train = TrainSection(dtype="fp32")
    schedule = StageSchedule(global_batch_size=3, micro_batch_size=1)
    engine = Engine(build_model(get_flavor("tiny"), None, seed=0), train, schedule, one_rank, seq_len=32, micro_batches=3)
    validation = TrainData(sft_data, split="validation")
    passes = validation.validation_batches(3, 1, dp_rank=0, dp_size=1, max_batches=0)
    # 4 rows in global batches of 3: the second is row 3 and two fillers that carry no target
    assert [len(p) for p in passes] == [3, 3] and [float(b.loss_mask.sum()) for b in passes[1][1:]] == [0.0, 0.0]
    values = engine.evaluate(passes)
    assert engine.model.training  # back in train mode
    whole = validation.collate([0, 1, 2, 3])
    model = engine.model.eval()
    with torch.no_grad():
        expected = model(whole.input_ids, position_ids=whole.position_ids, loss_mask=whole.loss_mask, mtp_loss_weight=0.3)
    assert values["lm_loss"] == pytest.approx(float(expected.lm_loss), rel=1e-5)
    assert values["mtp_loss"] == pytest.approx(float(expected.mtp_loss), rel=1e-5)
    assert values["loss"] == pytest.approx(values["lm_loss"] + 0.3 * values["mtp_loss"], rel=1e-9)
    assert values["target_tokens"] == int(whole.loss_mask[:, 1:].sum())
    assert len(validation.validation_batches(3, 1, 0, 1, max_batches=1)) == 1


def test_console_line_names_lm_and_mtp_loss_memory_and_eta(tmp_path, capsys):
    logger = MetricsLogger(tmp_path, True, total_steps=100, start_step=0, log_every=50, show_progress=False)
    record = {
        "step": 1, "loss": 2.5, "lm_loss": 2.0, "mtp_loss": 1.5, "grad_norm": 1.0, "lr": 1e-3, "tokens_per_s": 100.0,
        "step_time_s": 90.0, "mfu_v4": 0.01, "peak_memory_bytes": 3 * 2**30, "skipped": False,
    }
    logger.log(record)  # the first step (it compiled): the ETA uses it while it is the only one
    logger.log({**record, "step": 2, "step_time_s": 2.0})  # quiet: not a logging step, and fast
    logger.log({**record, "step": 3, "step_time_s": 4.0})
    logger.last_print -= 31  # 30 s without a line: the next step prints one
    logger.log({**record, "step": 4, "step_time_s": 3.0})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("step   1/100  loss 2.5000 (lm 2.0000, mtp 1.5000)")
    assert "mem 3.0 GiB" in lines[0] and f"eta {format_duration(99 * 90)}" in lines[0]
    assert len(lines) == 2 and lines[1].startswith("step   4/100") and f"eta {format_duration(96 * 3.0)}" in lines[1]
    assert format_duration(4000) == "1h06m" and format_duration(90) == "1m30s"


def _wandb_history(run_folder: Path) -> list[dict]:
    """The history rows of an offline W&B run, read from its `.wandb` file (LevelDB-style log blocks
    of protobuf records, the format `wandb sync` uploads)."""
    from wandb.proto import wandb_internal_pb2

    data = next(run_folder.glob("run-*.wandb")).read_bytes()
    block, position, pending, rows = 32768, 7, b"", []  # 7: the file header
    while position + 7 <= len(data):
        if block - position % block < 7:  # a block's tail too short for a record header is padding
            position += block - position % block
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        if kind == 0:
            break
        pending += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            if record.WhichOneof("record_type") == "history":
                rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item})
    return rows


@pytest.mark.slow
def test_report_to_tensorboard_and_wandb_offline_log_train_and_validation_loss(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="the wandb extra is not installed: pip install 'trex[wandb]'")
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed: pip install 'trex[tensorboard]'")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    root = tmp_path / "run"
    make_data_folder(root / "data" / "cpt", "cpt", rows=8, seq_len=32)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    result = run_trex(
        "train", "cpt", "--run-dir", str(root), "--max-steps", "4", "--eval-every", "2",
        "--report-to", "tensorboard,wandb", "--set", 'train.dtype="fp32"', "--set", "train.cpt.global_batch_size=2",
        "--set", "train.cpt.micro_batch_size=1", "--set", "train.log_every=1",
    )
    stage = root / "train" / "cpt"
    train = [json.loads(line) for line in (stage / "metrics.jsonl").read_text().splitlines()]
    validation = [json.loads(line) for line in (stage / "validation.jsonl").read_text().splitlines()]
    assert [r["step"] for r in validation] == [2, 4] and all(r["loss"] > 0 for r in validation)
    assert "validation at step 2: loss" in result.stdout and "(lm " in result.stdout

    events = EventAccumulator(str(stage / "tensorboard"))
    events.Reload()
    scalars = events.Tags()["scalars"]
    assert {"train/loss", "train/lm_loss", "train/mtp_loss", "validation/loss", "validation/lm_loss"} <= set(scalars)
    assert [e.step for e in events.Scalars("train/loss")] == [1, 2, 3, 4]
    assert [e.value for e in events.Scalars("validation/loss")] == pytest.approx([r["loss"] for r in validation], rel=1e-6)

    runs = list((stage / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    history = _wandb_history(runs[0])
    train_loss = {row["_step"]: row["train/loss"] for row in history if "train/loss" in row}
    assert train_loss == pytest.approx({r["step"]: r["loss"] for r in train})
    validation_loss = {row["_step"]: row["validation/loss"] for row in history if "validation/loss" in row}
    assert validation_loss == pytest.approx({r["step"]: r["loss"] for r in validation})


def test_report_to_names_unknown_reporters_and_missing_packages(tmp_path, monkeypatch):
    import importlib.util

    from trex_cli.train.job import check_reporters

    with pytest.raises(ValueError, match=r"\[train\].report_to: \['mlflow'\] unknown; use any of tensorboard, wandb"):
        TrainSection(report_to=["mlflow"])
    from typer.testing import CliRunner

    from trex_cli.app import app

    result = CliRunner().invoke(app, ["train", "cpt", "--run-dir", str(tmp_path), "--report-to", "wandb,mlflow"])
    assert result.exit_code == 1 and "--report-to ['wandb', 'mlflow']: [train].report_to: ['mlflow'] unknown" in (
        " ".join(result.output.split())
    )
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "wandb" else real_find_spec(name))
    with pytest.raises(ValueError, match=r"--report-to wandb: the wandb package is not installed; pip install 'trex\[wandb\]'"):
        check_reporters(["wandb"])
