"""The references follow transformers 5.24's DeepSeek-V4 exactly: each is compared with the piece of
`transformers.models.deepseek_v4.modeling_deepseek_v4` it stands for, in float64."""

from __future__ import annotations

import types

import pytest
import torch

from ascend_kernels import reference

v4 = pytest.importorskip("transformers.models.deepseek_v4.modeling_deepseek_v4")
F64 = torch.float64


@pytest.fixture(autouse=True)
def seeded():
    """Random inputs, the same on every run (a failure can be replayed)."""
    torch.manual_seed(0)


def test_rms_norms():
    x = torch.randn(2, 5, 16, dtype=torch.bfloat16)
    norm = v4.DeepseekV4RMSNorm(16)
    norm.weight.data = torch.randn(16)
    assert torch.equal(norm(x), reference.rms_norm(x, norm.weight.data))
    assert torch.equal(v4.DeepseekV4UnweightedRMSNorm()(x), reference.rms_norm(x))


@pytest.mark.parametrize("inverse", [False, True])
def test_partial_interleaved_rope(inverse):
    x = torch.randn(2, 6, 3, 24, dtype=torch.bfloat16)  # [B, S, H, D], rope on the last 8 channels
    angles = torch.randn(2, 6, 4)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    theirs = v4.apply_rotary_pos_emb(x.transpose(1, 2), cos, -sin if inverse else sin).transpose(1, 2)
    assert torch.equal(theirs, reference.apply_rope(x, cos, sin, inverse=inverse))


def test_clamped_swiglu_matches_the_experts_gate():
    config = types.SimpleNamespace(num_local_experts=2, hidden_size=8, intermediate_size=16,
                                   hidden_act="silu", swiglu_limit=10.0)
    experts = v4.DeepseekV4Experts(config)
    gate_up = torch.randn(40, 32, dtype=F64) * 12
    gate, up = gate_up.chunk(2, dim=-1)
    torch.testing.assert_close(experts._apply_gate(gate_up), reference.swiglu(gate, up, 10.0), rtol=0, atol=0)


def test_sinkhorn_matches_the_hyper_connection():
    config = types.SimpleNamespace(hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-6, hidden_size=8)
    connection = v4.DeepseekV4HyperConnection(config).double()
    generator = torch.Generator().manual_seed(0)
    for parameter in connection.parameters():
        torch.nn.init.normal_(parameter, generator=generator)
    streams = torch.randn(2, 3, 4, 8, dtype=F64, generator=generator)
    _, comb, _ = connection(streams)
    mixes = torch.nn.functional.linear(v4.DeepseekV4UnweightedRMSNorm()(streams.view(2, 3, -1)), connection.fn)
    logits = mixes[..., 8:].view(2, 3, 4, 4) * connection.scale[2] + connection.base[8:].view(4, 4)
    # They compute the stream mixes in float32 whatever the parameters' dtype: compare at that precision.
    torch.testing.assert_close(reference.sinkhorn(logits, 20, 1e-6), comb, rtol=1e-5, atol=1e-5)


def test_hc_pre_and_post_match_the_decoder_layer():
    config = types.SimpleNamespace(hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-6, hidden_size=8)
    connection = v4.DeepseekV4HyperConnection(config).double()
    generator = torch.Generator().manual_seed(1)
    for parameter in connection.parameters():
        torch.nn.init.normal_(parameter, std=0.3, generator=generator)
    streams = torch.randn(2, 3, 4, 8, dtype=F64, generator=generator)
    sublayer_out = torch.randn(2, 3, 8, dtype=F64, generator=generator)
    post, comb, collapsed = connection(streams)
    # The decoder layer's update after a sublayer (DeepseekV4DecoderLayer.forward), in float64.
    theirs = post.unsqueeze(-1) * sublayer_out.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), streams)
    ours_collapsed, ours_post, ours_comb = reference.hc_pre(streams, connection.fn, connection.base, connection.scale, 20, 1e-6, 1e-6)
    # They run the stream mixes in float32 whatever the parameters' dtype: compare at that precision.
    for ours, want in ((ours_collapsed, collapsed), (ours_post, post), (ours_comb, comb)):
        torch.testing.assert_close(ours.to(want.dtype), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(reference.hc_post(sublayer_out, post, comb, streams), theirs, rtol=1e-12, atol=1e-12)


def _their_attention(query, kv, compressed, sink, window, extra_bias):
    batch, seq_len, heads, head_dim = query.shape
    module = types.SimpleNamespace(sinks=sink, num_key_value_groups=heads, training=False)
    index = torch.arange(seq_len)
    distance = index.view(-1, 1) - index.view(1, -1)
    window_bias = torch.zeros(seq_len, seq_len, dtype=F64).masked_fill(~((distance >= 0) & (distance < window)),
                                                                       float("-inf"))
    mask = torch.cat([window_bias.expand(batch, 1, seq_len, seq_len), extra_bias], dim=-1)
    keys = torch.cat([kv, compressed], dim=1).unsqueeze(1)
    out, _ = v4.eager_attention_forward(module, query.transpose(1, 2), keys, keys, mask, scaling=head_dim**-0.5)
    return out


def test_attention_with_sink_window_and_compressed_entries():
    batch, seq_len, heads, head_dim, entries, window, ratio = 2, 40, 3, 8, 10, 7, 4
    query = torch.randn(batch, seq_len, heads, head_dim, dtype=F64)
    kv = torch.randn(batch, seq_len, head_dim, dtype=F64)
    compressed = torch.randn(batch, entries, head_dim, dtype=F64)
    sink = torch.randn(heads, dtype=F64)
    positions = torch.arange(seq_len).expand(batch, seq_len)
    threshold = (positions + 1) // ratio
    # HCA: every complete entry.
    hca_bias = torch.zeros(batch, 1, seq_len, entries, dtype=F64).masked_fill(
        torch.arange(entries).view(1, 1, 1, -1) >= threshold[:, None, :, None], float("-inf"))
    theirs = _their_attention(query, kv, compressed, sink, window, hca_bias)
    ours = reference.sparse_attention(query, kv, sink, window=window, compressed_kv=compressed, compress_ratio=ratio)
    torch.testing.assert_close(ours, theirs)
    # CSA: listed entries, -1 = none (their block bias built the way their CSA compressor builds it).
    indices = torch.stack([torch.randperm(entries)[:3] for _ in range(batch * seq_len)]).view(batch, seq_len, 3)
    indices = torch.where(indices < threshold.unsqueeze(-1), indices, -1)
    safe = torch.where(indices >= 0, indices, entries)
    csa_bias = torch.full((batch, 1, seq_len, entries + 1), float("-inf"), dtype=F64)
    csa_bias.scatter_(-1, safe.unsqueeze(1), 0.0)
    theirs = _their_attention(query, kv, compressed, sink, window, csa_bias[..., :entries])
    ours = reference.sparse_attention(query, kv, sink, window=window, compressed_kv=compressed,
                                      compressed_indices=indices)
    torch.testing.assert_close(ours, theirs)


def test_indexer_scores_and_topk():
    config = types.SimpleNamespace(index_head_dim=16, index_n_heads=4, hidden_size=12)
    scorer = v4.DeepseekV4IndexerScorer(config).double()
    batch, seq_len, entries, ratio = 2, 24, 6, 4
    query = torch.randn(batch, seq_len, 4, 16, dtype=F64)
    keys = torch.randn(batch, entries, 16, dtype=F64)
    hidden = torch.randn(batch, seq_len, 12, dtype=F64)
    theirs = scorer(query, keys, hidden).double()  # they score in float32 whatever the input dtype
    weights = scorer.weights_proj(hidden) * scorer.weights_scaling
    torch.testing.assert_close(reference.indexer_scores(query, keys, weights), theirs, rtol=1e-5, atol=1e-5)
    positions = torch.arange(seq_len).expand(batch, seq_len)
    threshold = (positions + 1) // ratio
    masked = theirs.masked_fill(torch.arange(entries).view(1, 1, -1) >= threshold.unsqueeze(-1), float("-inf"))
    their_indices = masked.topk(3, dim=-1).indices
    their_indices = torch.where(their_indices >= threshold.unsqueeze(-1), -1, their_indices)
    scores, indices = reference.indexer_topk(query, keys, weights, 3, compress_ratio=ratio)
    assert torch.equal(indices, their_indices)
    torch.testing.assert_close(scores, masked, rtol=1e-5, atol=1e-5)
