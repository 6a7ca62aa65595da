"""MoE token permute / unpermute, grouped expert matmul (uneven loads, empty experts) and the chunked
linear + cross-entropy: every implementation against the float64 reference."""

from __future__ import annotations

import pytest
import torch
from kernels_testing import BACKEND_DEVICE, backend_params, check_against_reference, implementation

from ascend_kernels import ops, reference
from ascend_kernels.memory import PeakMemory

DTYPES = [torch.float32, torch.bfloat16]


def _skewed_routing(generator, num_tokens, top_k, num_experts):
    """Distinct experts per token, drawn with very unequal probabilities; experts 1 and the last get none."""
    preference = torch.rand(num_experts, generator=generator) ** 4 + 1e-3
    preference[1] = 0.0
    preference[-1] = 0.0
    ids = torch.multinomial(preference.expand(num_tokens, -1), top_k, replacement=False, generator=generator)
    weights = torch.rand(num_tokens, top_k, generator=generator)
    return ids, weights / weights.sum(-1, keepdim=True)


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(37, 2, 8, 24), (64, 6, 16, 32)], ids=str)
def test_moe_permute_and_unpermute(backend, dtype, shape):
    num_tokens, top_k, num_experts, hidden = shape
    generator = torch.Generator().manual_seed(num_tokens)
    ids, weights = _skewed_routing(generator, num_tokens, top_k, num_experts)
    tokens = torch.randn(num_tokens, hidden, generator=generator)
    check_against_reference(
        "moe_permute", backend, dtype, [tokens, ids, num_experts], cast=[0], differentiable=[0]
    )
    _, _, order = reference.moe_permute(tokens, ids, num_experts)
    expert_rows = torch.randn(num_tokens * top_k, hidden, generator=generator)
    check_against_reference(
        "moe_unpermute", backend, dtype, [expert_rows, order, weights], cast=[0], differentiable=[0, 2]
    )


def test_moe_permute_groups_by_expert_in_token_order():
    ids = torch.tensor([[2, 0], [0, 1], [2, 1]])
    tokens = torch.arange(3, dtype=torch.float32).view(3, 1)
    permuted, counts, order = ops.moe_permute(tokens, ids, 4)
    assert counts.tolist() == [2, 2, 2, 0]
    assert permuted.view(-1).tolist() == [0.0, 1.0, 1.0, 2.0, 0.0, 2.0]
    assert order.tolist() == [1, 2, 3, 5, 0, 4]
    back = ops.moe_unpermute(permuted, order, torch.full((3, 2), 0.5))
    torch.testing.assert_close(back, tokens)


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "counts", [[5, 0, 17, 1, 0, 9], [0, 0, 0, 12], [3, 3, 3]], ids=["uneven", "all-in-last", "balanced"]
)
def test_grouped_matmul(backend, dtype, counts):
    generator = torch.Generator().manual_seed(sum(counts))
    tokens_per_expert = torch.tensor(counts)
    x = torch.randn(sum(counts), 32, generator=generator)
    weight = torch.randn(len(counts), 48, 32, generator=generator) / 6
    check_against_reference(
        "grouped_matmul", backend, dtype, [x, weight, tokens_per_expert], cast=[0, 1], differentiable=[0, 1]
    )


@pytest.mark.parametrize("backend", backend_params())
def test_grouped_matmul_backward_from_a_sum(backend):
    """y.sum() hands back a zero-stride gradient, which torch._grouped_mm's own backward rejects."""
    function = implementation("grouped_matmul", backend)
    device = BACKEND_DEVICE[backend]
    x = torch.randn(10, 8, device=device, requires_grad=True)
    weight = torch.randn(3, 4, 8, device=device, requires_grad=True)
    counts = torch.tensor([4, 0, 6], device=device)
    function(x, weight, counts).sum().backward()
    # d(sum)/dx = sum of the rows of each token's expert weight; an empty expert gets a zero gradient.
    expected_x = torch.cat([weight[0].sum(0).expand(4, 8), weight[2].sum(0).expand(6, 8)]).detach()
    torch.testing.assert_close(x.grad, expected_x, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(weight.grad[1], torch.zeros(4, 8, device=device))
    torch.testing.assert_close(weight.grad[0], x[:4].sum(0).expand(4, 8).detach(), rtol=1e-4, atol=1e-4)


def test_moe_expert_ffn_matches_a_loop_over_experts():
    generator = torch.Generator().manual_seed(0)
    num_tokens, top_k, experts, hidden, width = 20, 3, 5, 16, 24
    ids, weights = _skewed_routing(generator, num_tokens, top_k, experts)
    tokens = torch.randn(num_tokens, hidden, generator=generator, dtype=torch.float64)
    w1, w3 = (torch.randn(experts, width, hidden, generator=generator, dtype=torch.float64) for _ in range(2))
    w2 = torch.randn(experts, hidden, width, generator=generator, dtype=torch.float64)
    out = ops.moe_expert_ffn(tokens, ids, weights.double(), w1, w3, w2, swiglu_limit=1.0)
    expected = torch.zeros_like(tokens)
    for n in range(num_tokens):
        for j in range(top_k):
            e = ids[n, j]
            inner = reference.swiglu(tokens[n] @ w1[e].t(), tokens[n] @ w3[e].t(), 1.0)
            expected[n] += weights[n, j].double() * (inner @ w2[e].t())
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("shape", [(50, 32, 1000), (300, 16, 5003)], ids=str)
def test_linear_cross_entropy(backend, dtype, reduction, shape):
    num_tokens, hidden, vocab = shape
    generator = torch.Generator().manual_seed(vocab)
    states = torch.randn(num_tokens, hidden, generator=generator)
    weight = torch.randn(vocab, hidden, generator=generator) / hidden**0.5
    targets = torch.randint(0, vocab, (num_tokens,), generator=generator)
    targets[::5] = -100
    check_against_reference(
        "linear_cross_entropy", backend, dtype, [states, weight, targets],
        kwargs={"reduction": reduction}, cast=[0, 1], differentiable=[0, 1],
    )


@pytest.mark.parametrize("backend", backend_params())
def test_linear_cross_entropy_all_ignored_is_nan_like_torch(backend):
    function = implementation("linear_cross_entropy", backend)
    loss = function(torch.randn(4, 8), torch.randn(20, 8), torch.full((4,), -100))
    assert torch.isnan(loss)
    assert function(torch.randn(4, 8), torch.randn(20, 8), torch.full((4,), -100), reduction="sum").item() == 0.0


@pytest.mark.parametrize("backend", ["cpu"])
def test_linear_cross_entropy_never_holds_the_logits(backend):
    """The fused version's peak (forward + backward) stays far below one [N, V] float32 logits tensor."""
    function = implementation("linear_cross_entropy", backend)
    num_tokens, hidden, vocab = 512, 16, 100000
    states = torch.randn(num_tokens, hidden, requires_grad=True)
    weight = torch.randn(vocab, hidden, requires_grad=True)
    targets = torch.randint(0, vocab, (num_tokens,))
    with PeakMemory() as fused:
        function(states, weight, targets).backward()
    with PeakMemory() as unfused:
        reference.linear_cross_entropy(states, weight, targets).backward()
    logits_bytes = num_tokens * vocab * 4
    assert unfused.peak_bytes >= logits_bytes
    # The weight gradient ([V, D] float32) is needed by both; everything else must be small.
    assert fused.peak_bytes <= vocab * hidden * 4 + logits_bytes // 4
    assert fused.peak_bytes * 4 <= unfused.peak_bytes
