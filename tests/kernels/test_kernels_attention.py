"""Sparse attention (sliding window, CSA with selected entries, HCA with all complete entries, packed
documents) and the lightning indexer: every implementation against the float64 reference."""

from __future__ import annotations

import pytest
import torch
from kernels_testing import backend_params, check_against_reference

DTYPES = [torch.float32, torch.bfloat16]


def _selected_indices(generator, batch, seq_len, entries, k, ratio, position_ids):
    """Distinct random entries per query, -1 where an entry is not yet complete (as the indexer returns)."""
    scores = torch.rand(batch, seq_len, entries, generator=generator)
    indices = scores.topk(k, dim=-1).indices
    threshold = ((position_ids + 1) // ratio).unsqueeze(-1)
    return torch.where(indices < threshold, indices, torch.full_like(indices, -1))


CASES = {
    # name: (batch, seq_len, heads, head_dim, window, mode, packed)
    "window-only": (2, 70, 3, 32, 16, None, False),
    "csa": (2, 90, 4, 48, 24, "csa", False),
    "hca": (1, 150, 2, 32, 32, "hca", False),
    "csa-packed-documents": (2, 80, 2, 32, 20, "csa", True),
    "hca-window-longer-than-sequence": (2, 40, 2, 16, 64, "hca", False),
    "hca-no-complete-window-yet": (2, 12, 2, 16, 8, "hca", False),
}


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_sparse_attention(backend, dtype, case):
    batch, seq_len, heads, head_dim, window, mode, packed = CASES[case]
    generator = torch.Generator().manual_seed(seq_len)
    query = torch.randn(batch, seq_len, heads, head_dim, generator=generator)
    kv = torch.randn(batch, seq_len, head_dim, generator=generator)
    sink = torch.randn(heads, generator=generator)
    if packed:
        cut = seq_len // 3
        position_ids = torch.cat([torch.arange(cut), torch.arange(seq_len - cut)]).expand(batch, seq_len).clone()
    else:
        position_ids = torch.arange(seq_len).expand(batch, seq_len).clone()
    kwargs = {"window": window, "position_ids": position_ids}
    inputs = [query, kv, sink]
    differentiable = [0, 1, 2]
    if mode is not None:
        ratio = 4 if mode == "csa" else 16
        entries = seq_len // ratio
        compressed = torch.randn(batch, entries, head_dim, generator=generator)
        kwargs |= {"compressed_kv": compressed, "compress_ratio": ratio}
        if mode == "csa":
            kwargs["compressed_indices"] = _selected_indices(generator, batch, seq_len, entries, 6, ratio, position_ids)
    check_against_reference(
        "sparse_attention", backend, dtype, inputs, kwargs=kwargs, cast=[0, 1], differentiable=differentiable
    )


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sparse_attention_compressed_gradient(backend, dtype):
    """The compressed entries are a keyword input; their gradient (through the compressor) must match."""
    from kernels_testing import implementation, relative_error

    from ascend_kernels import reference

    function = implementation("sparse_attention", backend)
    generator = torch.Generator().manual_seed(3)
    batch, seq_len, heads, head_dim, entries = 2, 64, 2, 32, 16
    tensors = [
        torch.randn(batch, seq_len, heads, head_dim, generator=generator).to(dtype),
        torch.randn(batch, seq_len, head_dim, generator=generator).to(dtype),
        torch.randn(heads, generator=generator),
        torch.randn(batch, entries, head_dim, generator=generator).to(dtype),
    ]
    positions = torch.arange(seq_len).expand(batch, seq_len)
    indices = _selected_indices(generator, batch, seq_len, entries, 5, 4, positions)
    grad_output = torch.randn(batch, seq_len, heads, head_dim, generator=generator, dtype=torch.float64)
    results = []
    for run, wide in ((function, False), (reference.sparse_attention, True)):
        leaves = [t.detach().double().requires_grad_() if wide else t.detach().clone().requires_grad_() for t in tensors]
        for mode_kwargs in ({"compressed_indices": indices}, {"compress_ratio": 4}):
            out = run(*leaves[:3], window=8, compressed_kv=leaves[3], **mode_kwargs)
            (out * grad_output.to(out.dtype)).sum().backward()
        results.append(leaves[3].grad)
    assert relative_error(results[0], results[1]) <= (2e-5 if dtype == torch.float32 else 4e-2)


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 40, 4, 32, 10), (1, 64, 8, 16, 16)], ids=str)
def test_indexer_scores(backend, dtype, shape):
    batch, seq_len, heads, head_dim, entries = shape
    generator = torch.Generator().manual_seed(seq_len)
    query = torch.randn(batch, seq_len, heads, head_dim, generator=generator)
    keys = torch.randn(batch, entries, head_dim, generator=generator)
    weights = torch.randn(batch, seq_len, heads, generator=generator) * heads**-0.5
    check_against_reference(
        "indexer_scores", backend, dtype, [query, keys, weights], cast=[0, 1, 2], differentiable=[0, 1, 2]
    )


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 300, 4, 32, 20), (1, 40, 8, 16, 9)], ids=str)
def test_indexer_kl_target(backend, dtype, shape):
    """The attention over each query's selected entries, head-averaged: rows sum to 1 over the selected
    entries and are all zero where none is selected (the first queries, before any entry is complete)."""
    batch, seq_len, heads, head_dim, entries = shape
    generator = torch.Generator().manual_seed(seq_len + entries)
    query = torch.randn(batch, seq_len, heads, head_dim, generator=generator)
    keys = torch.randn(batch, entries, head_dim, generator=generator)
    selected = torch.rand(batch, seq_len, entries, generator=generator) < 0.4
    selected[:, :3] = False
    check_against_reference("indexer_kl_target", backend, dtype, [query, keys, selected, head_dim**-0.5], cast=[0, 1])
    from kernels_testing import implementation

    target = implementation("indexer_kl_target", backend)(query, keys, selected, head_dim**-0.5)
    assert torch.all(target[:, :3] == 0) and torch.all(target[~selected] == 0)
    has_entries = selected.any(-1)
    torch.testing.assert_close(target.sum(-1)[has_entries], torch.ones(int(has_entries.sum())), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("topk", [4, 100], ids=["topk4", "topk-above-entries"])
def test_indexer_topk(backend, topk):
    batch, seq_len, heads, head_dim, ratio = 2, 48, 4, 16, 4
    generator = torch.Generator().manual_seed(topk)
    query = torch.randn(batch, seq_len, heads, head_dim, generator=generator)
    keys = torch.randn(batch, seq_len // ratio, head_dim, generator=generator)
    weights = torch.randn(batch, seq_len, heads, generator=generator)
    check_against_reference(
        "indexer_topk", backend, torch.float32, [query, keys, weights, topk],
        kwargs={"compress_ratio": ratio}, cast=[0, 1, 2], differentiable=[0, 1, 2],
    )


def test_indexer_topk_marks_incomplete_entries():
    from ascend_kernels import ops

    query = torch.randn(1, 12, 2, 8)
    keys = torch.randn(1, 3, 8)
    scores, indices = ops.indexer_topk(query, keys, torch.ones(1, 12, 2), 2, compress_ratio=4)
    assert indices.shape == (1, 12, 2)
    # Positions 0..2 see no complete window; 3..6 see entry 0 only; 7..10 see entries 0 and 1.
    assert (indices[0, :3] == -1).all()
    assert (indices[0, 3:7, 0] == 0).all() and (indices[0, 3:7, 1] == -1).all()
    assert sorted(indices[0, 8].tolist()) == [0, 1]
    assert torch.isinf(scores[0, 2]).all() and torch.isfinite(scores[0, 11]).all()
