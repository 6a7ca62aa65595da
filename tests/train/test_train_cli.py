"""`trex train` end to end on one process: the tiny CPT run falls in loss, writes its run folder
(manifest, checkpoints, metrics, plot, HF export that transformers loads), and a re-run is a no-op;
SFT starts from the CPT export; user mistakes are one clear line."""

from __future__ import annotations

import json

import pytest
from conftest import losses, make_data_folder, run_trex
from typer.testing import CliRunner

from trex_cli.app import app


@pytest.mark.slow
def test_cpt_then_sft_run_folders(tmp_path):
    import torch

    root = tmp_path / "run"
    make_data_folder(root / "data" / "cpt", "cpt", rows=32, seq_len=32, distinct_tokens=24)
    make_data_folder(root / "data" / "sft", "sft", rows=16, seq_len=32, seed=1)
    args = ("--run-dir", str(root), "--save-every", "10", "--set", "train.log_every=5", "--set", "train.cpt.warmup_steps=3")
    result = run_trex("train", "cpt", "--max-steps", "30", "--set", "train.cpt.lr=3e-3", "--set", "train.cpt.global_batch_size=4", *args)
    stage = root / "train" / "cpt"
    curve = losses(stage)
    assert len(curve) == 30
    assert sum(curve[-5:]) / 5 < curve[0] - 0.5, curve  # the loss falls clearly below its start
    manifest = json.loads((stage / "manifest.json").read_text())
    assert manifest["stage"] == "train-cpt" and manifest["counts"]["steps"] == 30
    assert sorted(p.name for p in (stage / "checkpoints").iterdir()) == ["step-20", "step-30"]  # keep_last 2
    assert (stage / "loss.png").stat().st_size > 0 and (stage / "recipe.resolved.toml").is_file()
    record = json.loads((stage / "metrics.jsonl").read_text().splitlines()[-1])
    assert record["mfu_v4"] > 0 and record["peak"].startswith("CPU measured") and record["peak_memory_bytes"] > 0
    assert "step  5/30" in result.stdout and "mem " in result.stdout and "eta " in result.stdout

    # the export loads in transformers and gives the trained model's numbers
    import transformers

    from trex_cli.models.deepseek_v4.state_dict_adapter import load_model

    hf = stage / "hf"
    ours = load_model(hf, dtype=torch.float32).eval()
    theirs = transformers.AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()
    tokens = torch.randint(3, 512, (1, 24))
    with torch.no_grad():
        ours_logits = ours(tokens, return_logits=True, compute_loss=False).logits
        their_logits = theirs(tokens).logits
    assert torch.allclose(ours_logits, their_logits, atol=1e-3)

    again = run_trex("train", "cpt", "--max-steps", "30", "--set", "train.cpt.lr=3e-3", "--set", "train.cpt.global_batch_size=4", *args)
    assert "already done" in again.stdout

    sft = run_trex("train", "sft", "--max-steps", "4", "--set", "train.sft.global_batch_size=4", *args)
    sft_manifest = json.loads((root / "train" / "sft" / "manifest.json").read_text())
    assert sft_manifest["config"]["init"] == str(stage / "hf")
    assert [entry["stage"] for entry in sft_manifest["inputs"]] == ["data-sft", "train-cpt"]
    assert "4 steps" in sft.stdout


def test_missing_data_folder_is_one_clear_line(tmp_path):
    result = CliRunner().invoke(app, ["train", "cpt", "--run-dir", str(tmp_path / "nothing")])
    assert result.exit_code == 1
    assert "does not exist" in result.output and "trex data" in result.output


def test_unknown_train_key_names_the_key(tmp_path):
    make_data_folder(tmp_path / "data" / "cpt", "cpt", rows=4, seq_len=16)
    result = CliRunner().invoke(app, ["train", "cpt", "--run-dir", str(tmp_path), "--set", "train.learning_rate=1"])
    assert result.exit_code == 1
    assert "unknown key 'learning_rate'" in result.output
