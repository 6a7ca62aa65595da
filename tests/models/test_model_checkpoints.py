"""Checkpoint folders built by the tests in every layout the adapter reads and writes: official BF16
(sharded, with index), official FP8/FP4 quantized, transformers' layout; export, reload, and load of
the exported folder by transformers' AutoModelForCausalLM."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from safetensors import safe_open
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM

import ascend_kernels
from trex_cli.models.deepseek_v4 import quantization, state_dict_adapter
from trex_cli.models.deepseek_v4.config import DeepseekV4Config, get_flavor
from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM


@pytest.fixture(autouse=True, scope="module")
def reference_kernels():
    # the plain PyTorch operators: no torch.compile warm-up in a short test (the kernels' own tests
    # hold the fast backends to these references)
    ascend_kernels.configure("reference")
    yield
    ascend_kernels.configure(None)


def bf16_tiny(seed: int = 0) -> DeepseekV4ForCausalLM:
    torch.manual_seed(seed)
    model = DeepseekV4ForCausalLM(get_flavor("tiny"))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() == 1 or name.endswith(("_base", ".ape")):
                parameter.add_(0.1 * torch.randn_like(parameter))
    return state_dict_adapter.keep_float32(model.to(torch.bfloat16))


def same_state(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert torch.equal(a[name], b[name]), name


def write_tokenizer(folder):
    folder.mkdir()
    vocab = {f"w{i}": i for i in range(500)} | {"<unk>": 500, "<s>": 501, "</s>": 502}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}))
    return folder


# ---- formats -------------------------------------------------------------------------------------------


def test_fp4_codes_follow_the_e2m1_format():
    # one group of 32 whose max is 6: scale 1, so the values are their own codes
    values = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0, 0.0] * 2)
    packed, scale = quantization.quantize_fp4(values.view(1, 32))
    assert packed.dtype == torch.int8 and packed.shape == (1, 16)
    assert scale.dtype == torch.float8_e8m0fnu and scale.float().item() == 1.0
    codes = packed.view(torch.uint8)[0]
    assert codes[0].item() == 0x10  # 0 (code 0) low nibble, 0.5 (code 1) high nibble
    assert codes[2].item() == 0x54  # 2.0 = code 4, 3.0 = code 5
    assert codes[3].item() == 0x76  # 4.0 = code 6, 6.0 = code 7
    assert codes[4].item() == 0xA9  # -0.5 = 1001, -1.0 = 1010
    assert torch.equal(quantization.dequantize_fp4(packed, scale, torch.float32)[0], values)


def test_quantizers_round_trip_and_scales_are_powers_of_two():
    weight = torch.randn(200, 320, generator=torch.Generator().manual_seed(0)) * 0.05
    fp8, fp8_scale = quantization.quantize_fp8_blockwise(weight)
    assert fp8.dtype == torch.float8_e4m3fn and fp8_scale.shape == (2, 3)
    scales = fp8_scale.float()
    assert torch.equal(scales, torch.exp2(torch.log2(scales).round()))
    restored = quantization.dequantize_fp8_blockwise(fp8, fp8_scale, torch.float32)
    assert ((restored - weight).abs() <= weight.abs() / 16 + 1e-6).all()  # 3 mantissa bits
    # quantizing what was dequantized loses nothing: the loader reads back precisely the stored values.
    # (The codes may differ: a block whose largest value rounded down to 224 x scale fits the next
    # smaller scale exactly, and is stored with it, every code doubled.)
    for seed in range(40):
        block = torch.randn(200, 320, generator=torch.Generator().manual_seed(seed)) * 0.05
        values = quantization.dequantize_fp8_blockwise(*quantization.quantize_fp8_blockwise(block), torch.float32)
        again = quantization.dequantize_fp8_blockwise(*quantization.quantize_fp8_blockwise(values), torch.float32)
        assert torch.equal(again, values), seed
    fp4, fp4_scale = quantization.quantize_fp4(weight)
    assert fp4_scale.shape == (200, 10)
    restored4 = quantization.dequantize_fp4(fp4, fp4_scale, torch.float32)
    group_max = weight.abs().view(200, 10, 32).amax(-1, keepdim=True)
    # e2m1 steps are at most 2 (between 4 and 6) at scale max/6 <= s < 2 max/6: error <= s
    assert ((restored4 - weight).abs().view(200, 10, 32) <= group_max / 3 + 1e-7).all()


# ---- folders -------------------------------------------------------------------------------------------


def test_official_bf16_export_reload_is_exact_and_transformers_agrees(tmp_path):
    model = bf16_tiny()
    tokenizer_dir = write_tokenizer(tmp_path / "tok")
    out = state_dict_adapter.export_hf(model, tmp_path / "hf", tokenizer_dir=tokenizer_dir, max_shard_bytes=300_000)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1  # really sharded
    assert "layers.0.ffn.experts.7.w2.weight" in index["weight_map"] and "mtp.0.e_proj.weight" in index["weight_map"]
    assert (out / "tokenizer.json").is_file() and (out / "tokenizer_config.json").is_file()
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation["eos_token_id"] == model.config.eos_token_id
    with safe_open(str(out / index["weight_map"]["layers.1.attn.wq_b.weight"]), "pt") as handle:
        assert handle.get_tensor("layers.1.attn.wq_b.weight").dtype == torch.bfloat16

    reloaded = state_dict_adapter.load_model(out, dtype=torch.bfloat16)
    same_state(model.state_dict(), reloaded.state_dict())
    assert DeepseekV4Config.from_model_dir(out) == model.config
    again = state_dict_adapter.export_hf(reloaded, tmp_path / "again")
    same_state(state_dict_adapter.read_tensors(out), state_dict_adapter.read_tensors(again))

    ours = state_dict_adapter.load_model(out, dtype=torch.float32).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    input_ids = torch.randint(0, model.config.vocab_size, (2, 80), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        difference = ours(input_ids, compute_loss=False, return_logits=True).logits - theirs(input_ids, use_cache=False).logits
    assert difference.abs().max().item() < 1e-4


def test_transformers_layout_round_trip(tmp_path):
    model = bf16_tiny(1)
    out = state_dict_adapter.export_transformers_layout(model, tmp_path / "tf")
    names = state_dict_adapter.read_tensors(out).keys()
    assert state_dict_adapter.detect_layout(names) == "transformers"
    assert "model.layers.1.self_attn.compressor.indexer.scorer.weights_proj.weight" in names
    assert "model.layers.0.mlp.experts.gate_up_proj" in names and "model.layers.3.mlp.gate.e_score_correction_bias" in names
    reloaded = state_dict_adapter.load_model(out, dtype=torch.bfloat16)
    same_state(model.state_dict(), reloaded.state_dict())
    # a folder transformers itself saved has no MTP: it loads, the MTP block stays fresh, with a warning
    tensors = {k: v for k, v in state_dict_adapter.read_tensors(out).items() if not k.startswith("mtp.")}
    (tmp_path / "no_mtp").mkdir()
    state_dict_adapter._write_shards(tensors, tmp_path / "no_mtp", 1 << 30)
    (tmp_path / "no_mtp" / "config.json").write_text((out / "config.json").read_text())
    with pytest.warns(UserWarning, match="no MTP weights"):
        partial = state_dict_adapter.load_model(tmp_path / "no_mtp")
    assert torch.equal(partial.layers[3].ffn.experts.w1, model.layers[3].ffn.experts.w1)


def test_official_quantized_checkpoint_is_dequantized_on_load(tmp_path):
    model = bf16_tiny(2)
    out = state_dict_adapter.export_official_quantized(model, tmp_path / "fp8", max_shard_bytes=200_000)
    raw = state_dict_adapter.read_tensors(out)
    assert raw["layers.0.ffn.experts.3.w1.weight"].dtype == torch.int8
    assert raw["layers.0.ffn.experts.3.w1.scale"].dtype == torch.float8_e8m0fnu
    assert raw["layers.0.attn.wq_a.weight"].dtype == torch.float8_e4m3fn
    assert raw["layers.0.attn.wq_a.scale"].shape == (1, 1)
    assert raw["layers.1.attn.compressor.wkv.weight"].dtype == torch.bfloat16  # compressor stays BF16
    assert json.loads((out / "config.json").read_text())["quantization_config"]["weight_block_size"] == [128, 128]
    loaded = state_dict_adapter.load_model(out, dtype=torch.bfloat16)
    state = loaded.state_dict()
    expected_w1 = quantization.dequantize_fp4(raw["layers.0.ffn.experts.3.w1.weight"], raw["layers.0.ffn.experts.3.w1.scale"])
    assert torch.equal(state["layers.0.ffn.experts.w1"][3], expected_w1)
    expected_wq_a = quantization.dequantize_fp8_blockwise(raw["layers.0.attn.wq_a.weight"], raw["layers.0.attn.wq_a.scale"])
    assert torch.equal(state["layers.0.attn.wq_a.weight"], expected_wq_a)
    original = model.state_dict()
    assert torch.equal(state["layers.1.attn.compressor.wkv.weight"], original["layers.1.attn.compressor.wkv.weight"])
    assert torch.equal(state["hc_head_fn"], original["hc_head_fn"])
    relative = (state["layers.0.attn.wq_a.weight"].float() - original["layers.0.attn.wq_a.weight"].float()).norm()
    assert relative / original["layers.0.attn.wq_a.weight"].float().norm() < 0.05
    # the dequantized model re-exports in BF16 and reloads exactly
    again = state_dict_adapter.load_model(state_dict_adapter.export_hf(loaded, tmp_path / "bf16"))
    same_state(state, again.state_dict())


def test_bad_folders_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        state_dict_adapter.load_model(tmp_path)
    model = bf16_tiny()
    out = state_dict_adapter.export_hf(model, tmp_path / "hf")
    config = json.loads((out / "config.json").read_text())
    config["hidden_size"] = 96
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="shape"):
        state_dict_adapter.load_model(out)
