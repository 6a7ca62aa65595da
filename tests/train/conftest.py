"""Fixtures for the trainer tests: small data folders in the `trex data` format, built here.

Rows are random token ids (the trainer does not care what they spell); CPT rows pack several
documents (position ids restart at each one), SFT rows alternate user and assistant spans with the
loss mask on assistant tokens only and padding to different lengths.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path

import pytest
import torch

from trex_cli.artifacts import StageFolder

VOCAB = 512  # the tiny flavor's vocabulary


def make_data_folder(
    folder: Path, kind: str = "cpt", rows: int = 16, seq_len: int = 32, seed: int = 0, distinct_tokens: int = VOCAB - 3
) -> Path:
    """A finished data folder; tokens are drawn from ids 3 .. 3 + distinct_tokens (fewer distinct
    tokens: a distribution a model learns within a few steps)."""
    import datasets
    import torch

    generator = torch.Generator().manual_seed(seed)
    records = {"input_ids": [], "loss_mask": [], "position_ids": []}
    for _ in range(rows):
        if kind == "cpt":
            length = seq_len
            ids = torch.randint(3, 3 + distinct_tokens, (length,), generator=generator)
            mask = torch.ones(length, dtype=torch.int8)
            positions, start = [], 0
            while start < length:  # documents of 5 to 20 tokens packed back to back
                size = int(torch.randint(5, 21, (1,), generator=generator))
                positions += list(range(min(size, length - start)))
                start += size
            positions = torch.tensor(positions)
        else:
            length = int(torch.randint(seq_len // 2, seq_len + 1, (1,), generator=generator))
            ids = torch.randint(3, 3 + distinct_tokens, (length,), generator=generator)
            mask = torch.zeros(length, dtype=torch.int8)
            cursor, assistant = 0, False
            while cursor < length:  # user and assistant turns of 3 to 8 tokens
                size = int(torch.randint(3, 9, (1,), generator=generator))
                if assistant:
                    mask[cursor : cursor + size] = 1
                cursor += size
                assistant = not assistant
            positions = torch.arange(length)
        records["input_ids"].append(ids.to(torch.int32).tolist())
        records["loss_mask"].append(mask.tolist())
        records["position_ids"].append(positions.to(torch.int32).tolist())
    stage = StageFolder(folder, f"data-{kind}", {"kind": kind, "rows": rows, "seq_len": seq_len, "seed": seed})
    stage.prepare()
    dataset = datasets.Dataset.from_dict(records)
    dataset.save_to_disk(str(folder / "train"))
    dataset.select(range(min(4, rows))).save_to_disk(str(folder / "validation"))
    meta = {
        "seq_len": seq_len, "vocab_size": VOCAB, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2,
        "num_train_rows": rows, "num_validation_rows": min(4, rows), "kind": kind,
    }
    (folder / "meta.json").write_text(json.dumps(meta))
    stage.finish(counts={"rows": rows})
    return folder


@pytest.fixture
def cpt_data(tmp_path) -> Path:
    return make_data_folder(tmp_path / "data" / "cpt", "cpt")


@pytest.fixture
def sft_data(tmp_path) -> Path:
    return make_data_folder(tmp_path / "data" / "sft", "sft")


def trex_command(*args: str) -> list[str]:
    import sys

    return [sys.executable, "-W", "ignore", "-m", "trex_cli.app", *args]


def trex_environment() -> dict:
    import os

    env = dict(os.environ)
    env["TREX_KERNELS"] = "reference"  # no compilation in tests: fast and deterministic
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_trex(*args: str, timeout: int = 600, env: dict | None = None):
    """Run `trex ...` in a fresh interpreter (as a user would), with `env` added to its environment;
    fail the test with its output."""
    import subprocess

    environment = {**trex_environment(), **(env or {})}
    result = subprocess.run(trex_command(*args), env=environment, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(f"trex {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


def losses(stage_folder: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (stage_folder / "metrics.jsonl").read_text().splitlines() if line]


# A tiny, fast, fp32 training job: every test that compares runs uses exactly these settings.
TINY_FP32 = (
    "--max-steps", "10", "--save-every", "100",
    "--set", 'train.dtype="fp32"', "--set", "train.cpt.global_batch_size=4", "--set", "train.cpt.micro_batch_size=1",
    "--set", "train.cpt.warmup_steps=2", "--set", "train.cpt.lr=1e-4", "--set", "train.log_every=100",
)


@contextlib.contextmanager
def fake_rank(rank: int, dims):
    """One rank of a `dims.world`-rank layout in this process: its meshes stand over torch's fake process
    group (collectives do nothing), so a test can build and shard that rank's model, on the meta device
    or not, without starting the other ranks. Yields the rank's `Distributed`."""
    import torch
    import torch.distributed as dist

    from trex_cli.train.distributed import Distributed

    fake_pg = pytest.importorskip("torch.testing._internal.distributed.fake_pg")
    dist.init_process_group("fake", store=fake_pg.FakeStore(), rank=rank, world_size=dims.world)
    try:
        dense, expert = dims.build_meshes("cpu")
        yield Distributed(rank, dims.world, 0, torch.device("cpu"), "fake", dims, dense, expert)
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    """A TCP port free on this host now, for a test's own process group rendezvous."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def assert_close_named(actual: torch.Tensor, expected: torch.Tensor, what: str, rtol: float = 1e-5) -> None:
    """`torch.testing.assert_close` (atol 1e-6) whose message starts with `what`."""
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=1e-6, msg=lambda message: f"{what}: {message}")


@contextlib.contextmanager
def gloo_rank(rank: int, world: int, port: int):
    """One rank of a test's own gloo group on this host, with one thread and the reference kernels; the
    group is destroyed afterwards, whatever the body does."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        import ascend_kernels

        torch.set_num_threads(1)
        ascend_kernels.configure("reference")
        yield
    finally:
        torch.distributed.destroy_process_group()
