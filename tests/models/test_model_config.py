"""Flavors, config.json in both forms, the recipe's [model] table, and the parameter counts of the
released shapes (instantiated on the meta device)."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import DeepseekV4Config as ReferenceConfig

from trex_cli.models.deepseek_v4.config import CSA, HCA, DeepseekV4Config, ModelSection, get_flavor
from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM, count_parameters


def meta_counts(flavor: str) -> dict[str, int]:
    config = get_flavor(flavor)
    with torch.device("meta"):
        model = DeepseekV4ForCausalLM(config)
    return count_parameters(model, config)


@pytest.mark.parametrize(
    ("flavor", "total", "active_billions"),
    [("flash", 284e9, 13), ("pro", 1.6e12, 49)],
)
def test_released_shapes_have_the_published_parameter_counts(flavor, total, active_billions):
    # DeepSeek's convention: the main model without the MTP block; "active" = what one token uses:
    # top-k of the routed experts, the shared expert and everything else, minus the embedding table
    # (a token reads one row of it). The published active figures are rounded to whole billions:
    # Flash counts 13.27B (2.07% over "13B"), Pro 48.85B. The next test checks this convention
    # on DeepSeek-V3, whose published figures (671B / 37B) come from the same rule.
    counts = meta_counts(flavor)
    assert abs(counts["total_without_mtp"] / total - 1) < 0.02, counts
    assert round(counts["active_matmul_without_mtp"] / 1e9) == active_billions, counts
    assert abs(counts["active_matmul_without_mtp"] / (active_billions * 1e9) - 1) < 0.5 / active_billions, counts


def test_the_active_parameter_convention_gives_deepseek_v3s_published_figures():
    # transformers' DeepseekV3Config defaults are the released V3 shape (published: 671B total, 37B
    # active). Counting the embedding table as active would give 37.55B, which rounds to 38B; without
    # it, 36.63B: the convention the V4 counts above follow.
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    config = DeepseekV3Config()
    with torch.device("meta"):
        model = DeepseekV3ForCausalLM(config)
    named = [(name, p.numel()) for name, p in model.named_parameters()]
    total = sum(n for _, n in named)
    routed = sum(n for name, n in named if ".mlp.experts." in name)
    embedding = sum(n for name, n in named if "embed_tokens" in name)
    active = total - routed + routed * config.num_experts_per_tok // config.n_routed_experts
    assert round(total / 1e9) == 671
    assert round((active - embedding) / 1e9) == 37
    assert round(active / 1e9) == 38  # what counting the embedding table would publish


def test_small_is_the_issue_shape():
    config = get_flavor("small")
    assert (config.vocab_size, config.hidden_size, config.num_hidden_layers) == (8192, 512, 6)
    assert (config.num_attention_heads, config.head_dim, config.q_lora_rank) == (8, 128, 256)
    assert (config.n_routed_experts, config.num_experts_per_tok, config.n_shared_experts) == (16, 2, 1)
    assert (config.moe_intermediate_size, config.o_groups, config.o_lora_rank) == (512, 2, 256)
    assert (config.index_n_heads, config.index_head_dim, config.index_topk) == (4, 64, 64)
    assert (config.sliding_window, config.compress_rate_csa, config.compress_rate_hca) == (128, 4, 32)
    assert (config.num_hash_layers, config.num_nextn_predict_layers, config.hc_mult) == (3, 1, 4)
    # transformers' defaults for the rest: its layer-type schedule, rope, mHC, routing
    reference = ReferenceConfig(**config.to_hf_dict())
    assert reference.layer_types == config.layer_types
    default = ReferenceConfig(num_hidden_layers=6, compress_rates={CSA: 4, HCA: 32})
    assert default.layer_types == config.layer_types
    assert (config.rope_theta, config.compress_rope_theta, config.routed_scaling_factor) == (
        default.rope_theta, default.compress_rope_theta, default.routed_scaling_factor)
    counts = meta_counts("small")
    assert 96e6 < counts["total_without_mtp"] < 98e6, counts


def test_config_json_round_trips_and_reads_the_transformers_form(tmp_path):
    config = get_flavor("tiny")
    (tmp_path / "config.json").write_text(json.dumps(config.to_hf_dict()))
    assert DeepseekV4Config.from_model_dir(tmp_path) == config
    # transformers' own serialization of the same config reads back to the same shape
    saved = ReferenceConfig(**config.to_hf_dict())
    saved.save_pretrained(tmp_path / "tf")
    again = DeepseekV4Config.from_model_dir(tmp_path / "tf")
    assert again.layer_types == config.layer_types and again.num_hash_layers == config.num_hash_layers
    assert again.qk_rope_head_dim == config.qk_rope_head_dim and again.yarn["factor"] == config.yarn["factor"]


def test_model_section_builds_and_reports_mistakes(tmp_path):
    assert ModelSection(flavor="small").build_config() == get_flavor("small")
    changed = ModelSection(flavor="tiny", overrides={"vocab_size": 1000}).build_config()
    assert changed.vocab_size == 1000 and changed.hidden_size == 64
    with pytest.raises(ValueError, match=r"\[model\] flavor"):
        ModelSection(flavor="huge").build_config()
    with pytest.raises(ValueError, match=r"\[model\] overrides.*hidden_sise"):
        ModelSection(overrides={"hidden_sise": 3}).build_config()
    with pytest.raises(FileNotFoundError, match="config.json"):
        ModelSection(config_path=str(tmp_path)).build_config()
    with pytest.raises(ValueError, match="compress_ratios"):
        get_flavor("tiny").replace(compress_ratios=[0, 4, 7, 4, 16, 4])
