"""Damaged model folders and non-finite weights: a truncated safetensors file and a NaN weight are each
one clear error naming the file (and tensor) with the fix, at load time, from the library and from
`trex eval --backend hf`; sampling from a model whose logits are not finite says so instead of failing
inside torch.multinomial. The repaired folder loads to the clean weights."""

from __future__ import annotations

import math
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

import ascend_kernels
from trex_cli.models.deepseek_v4 import state_dict_adapter
from trex_cli.models.deepseek_v4.config import get_flavor
from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM


@pytest.fixture(autouse=True, scope="module")
def reference_kernels():
    ascend_kernels.configure("reference")
    yield
    ascend_kernels.configure(None)


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM(get_flavor("tiny"))
    return state_dict_adapter.export_hf(model, tmp_path_factory.mktemp("model") / "hf", max_shard_bytes=2_000_000)


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _largest_shard(folder):
    return max(folder.glob("*.safetensors"), key=lambda p: p.stat().st_size)


def test_a_truncated_shard_names_the_file_and_the_copied_again_folder_loads_the_clean_weights(export, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(export, copy)
    shard = _largest_shard(copy)
    whole = shard.read_bytes()
    shard.write_bytes(whole[: len(whole) // 2])  # a download or copy that stopped halfway
    with pytest.raises(ValueError) as caught:
        state_dict_adapter.load_model(copy, dtype=torch.float32)
    assert str(caught.value).startswith(f"{shard}: not a readable safetensors file")
    assert "truncated or damaged" in str(caught.value) and "again" in str(caught.value)

    shard.write_bytes(whole)  # the fix: copy it again
    repaired = state_dict_adapter.load_model(copy, dtype=torch.float32).state_dict()
    clean = state_dict_adapter.load_model(export, dtype=torch.float32).state_dict()
    assert repaired.keys() == clean.keys() and all(torch.equal(repaired[k], clean[k]) for k in clean)


def test_a_nan_weight_is_named_at_load_time(export, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(export, copy)
    shard = _largest_shard(copy)
    tensors = load_file(str(shard))
    name = next(key for key, value in tensors.items() if value.is_floating_point() and value.numel() > 1)
    tensors[name][0] = math.nan  # what a diverged run's export holds
    save_file(tensors, str(shard), metadata={"format": "pt"})
    with pytest.raises(ValueError, match="NaN or Inf") as caught:
        state_dict_adapter.load_model(copy, dtype=torch.float32)
    assert str(caught.value).startswith(f"{shard}: tensor {name!r} holds NaN or Inf values")
    assert "use an earlier checkpoint" in str(caught.value)


def test_eval_with_a_damaged_checkpoint_is_one_line(export, tmp_path):
    from trex_cli.app import app

    copy = tmp_path / "copy"
    shutil.copytree(export, copy)
    shard = _largest_shard(copy)
    shard.write_bytes(shard.read_bytes()[:100])
    benchmark = tmp_path / "mini.jsonl"
    benchmark.write_text('{"en_question": "Maximize x with x <= 4.", "en_answer": "4"}\n')
    result = CliRunner().invoke(app, ["eval", "--benchmark", str(benchmark), "--backend", "hf", "--checkpoint",
                                      str(copy), "--allow-code-execution", "--out", str(tmp_path / "eval")])
    assert result.exit_code == 1
    assert _squeezed(f"{shard}: not a readable safetensors file") in _squeezed(result.output), result.output
    assert "Traceback" not in result.output


def test_sampling_from_non_finite_logits_says_so(export):
    model = state_dict_adapter.load_model(export, dtype=torch.float32).eval()
    with torch.no_grad():
        model.head.weight[3, 0] = math.inf  # an overflowed or damaged weight reaching the logits
    for temperature in (0.0, 0.8):
        with pytest.raises(ValueError, match="logits are NaN or Inf"):
            model.generate([[5, 9, 11]], max_new_tokens=2, temperature=temperature, seed=0)
