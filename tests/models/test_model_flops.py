"""Training FLOPs per token (Megatron convention), V4-aware and dense attention."""

from __future__ import annotations

import pytest

from trex_cli.models.deepseek_v4.config import get_flavor
from trex_cli.models.deepseek_v4.flops import flops_breakdown, training_flops_per_token


def test_sliding_only_model_by_hand():
    config = get_flavor("tiny").replace(
        num_hidden_layers=1, compress_ratios=[0], num_nextn_predict_layers=0, num_hash_layers=0
    )
    h, heads, d, q, g, o, inter = 64, 4, 32, 32, 2, 32, 32
    attention = h * q + q * heads * d + h * d + heads * d * o + g * o * h
    moe = 3 * 3 * h * inter  # 2 routed + 1 shared
    hyper = 2 * (2 + 4) * 4 * 4 * h
    logits = h * config.vocab_size
    seq_len = 40  # window 16: keys per query average (1 + ... + 16 + 24 * 16) / 40
    keys = (16 * 17 / 2 + 24 * 16) / 40
    expected = 3 * (2 * (attention + moe + hyper + logits) + 4 * heads * d * keys)
    assert training_flops_per_token(config, seq_len, "v4", include_mtp=False) == pytest.approx(expected)
    dense_keys = (seq_len + 1) / 2
    expected_dense = 3 * (2 * (attention + moe + hyper + logits) + 4 * heads * d * dense_keys)
    assert training_flops_per_token(config, seq_len, "dense", include_mtp=False) == pytest.approx(expected_dense)


def test_flash_figures_are_plausible():
    config = get_flavor("flash")
    short = flops_breakdown(config, 4096)
    long = flops_breakdown(config, 65536)
    # about 6 x 13B active parameters, and V4 attention grows far slower than dense attention
    assert 6 * 12e9 < short["v4"] < 6 * 17e9
    assert long["dense_over_v4"] > 5 * short["dense_over_v4"] / 1.5
    assert long["v4"] < 1.2 * short["v4"]
    with pytest.raises(ValueError, match="attention"):
        training_flops_per_token(config, 10, "sparse")
