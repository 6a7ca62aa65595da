"""The Triton backend as a whole: CUDA tensors get a Triton or torch-native implementation of every
operator, its sparse attention never allocates an [S, S] tensor, its linear + cross-entropy never an
[N, V] one, and ascend_kernels stays free of trex. Without a GPU these run in Triton's interpreter on
CPU tensors (conftest.py); with one, on the GPU."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from kernels_testing import BACKEND_DEVICE, SKIP_REASON, check_against_reference, relative_error

from ascend_kernels import reference, registry
from ascend_kernels.memory import PeakMemory


def needs_triton(test):
    """Mark a test as a Triton kernel test, skipped (with the reason) where Triton cannot run."""
    skip = pytest.mark.skipif(not registry.backend_usable("triton"), reason=SKIP_REASON["triton"])
    return pytest.mark.triton(skip(test))
DEVICE = BACKEND_DEVICE["triton"]


@pytest.fixture
def automatic_choice(monkeypatch):
    monkeypatch.delenv(registry.ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setattr(registry, "_forced", None)
    registry._resolved.clear()
    yield
    registry._resolved.clear()


@needs_triton
def test_cuda_tensors_get_a_triton_or_torch_native_implementation_of_every_operator(automatic_choice):
    operators = registry.operators()
    assert len(operators) >= 15
    for operator in operators:
        backend, function = registry.resolve(operator, "cuda", log=False)
        assert backend == "triton", f"{operator} on cuda resolves to {backend}"
        assert function.__module__.startswith("ascend_kernels.triton."), (operator, function.__module__)
    # CPU tensors keep their own backend even where the interpreter makes Triton usable.
    assert registry.resolve("rms_norm", "cpu", log=False)[0] == "cpu"


def _attention_inputs(mode: str, seq_len: int = 256, window: int = 32):
    generator = torch.Generator().manual_seed(7)
    batch, heads, head_dim, ratio = 1, 2, 16, 4
    inputs = [
        torch.randn(batch, seq_len, heads, head_dim, generator=generator, requires_grad=True),
        torch.randn(batch, seq_len, head_dim, generator=generator, requires_grad=True),
        torch.randn(heads, generator=generator, requires_grad=True),
    ]
    kwargs = {"window": window}
    if mode != "window":
        entries = seq_len // ratio
        kwargs["compressed_kv"] = torch.randn(batch, entries, head_dim, generator=generator, requires_grad=True)
        kwargs["compress_ratio"] = ratio
        if mode == "csa":
            scores = torch.rand(batch, seq_len, entries, generator=generator)
            indices = scores.topk(8, dim=-1).indices
            visible = ((torch.arange(seq_len) + 1) // ratio).view(1, -1, 1)
            kwargs["compressed_indices"] = torch.where(indices < visible, indices, -1)
    return inputs, kwargs


def _largest_tensor_of(function, inputs, kwargs) -> int:
    inputs = [t.detach().to(DEVICE).requires_grad_() for t in inputs]
    kwargs = {k: (v.detach().to(DEVICE).requires_grad_(v.requires_grad) if isinstance(v, torch.Tensor) else v)
              for k, v in kwargs.items()}
    with PeakMemory() as memory:
        function(*inputs, **kwargs).square().sum().backward()
    return memory.largest_elements


@pytest.mark.parametrize("mode", ["window", "csa", "hca"])
@needs_triton
def test_sparse_attention_never_allocates_a_sequence_by_sequence_tensor(mode):
    """Forward and backward, every tensor torch creates is watched: none has S * S elements (one head's
    score matrix), while the reference, watched the same way, does (so the watch can fail)."""
    seq_len = 256
    inputs, kwargs = _attention_inputs(mode, seq_len)
    triton_attention = registry.implementations("sparse_attention")["triton"]
    assert _largest_tensor_of(triton_attention, inputs, kwargs) < seq_len * seq_len
    assert _largest_tensor_of(reference.sparse_attention, inputs, kwargs) >= seq_len * seq_len


@pytest.mark.parametrize("mode", ["window", "csa", "hca"])
@needs_triton
def test_sparse_attention_on_a_long_sequence_with_a_short_window(mode):
    """Many query blocks, keys walked from the middle of the sequence: matches the float64 reference
    forward and backward (float32, tolerance 2e-5 of the largest reference value)."""
    inputs, kwargs = _attention_inputs(mode, seq_len=256, window=24)
    inputs = [t.detach() for t in inputs]
    compressed = kwargs.pop("compressed_kv", None)
    if compressed is not None:
        kwargs["compressed_kv"] = compressed.detach()
    check_against_reference("sparse_attention", "triton", torch.float32, inputs, kwargs=kwargs,
                            differentiable=[0, 1, 2])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@needs_triton
def test_linear_cross_entropy_in_many_chunks_never_holds_the_logits(dtype, monkeypatch):
    """With chunks of 7 tokens (a last, shorter one included), loss and gradients match the float64
    reference (2e-5 float32, 4e-2 bf16), and no tensor as large as the [N, V] logits is created."""
    from ascend_kernels.triton import loss

    num_tokens, hidden, vocab = 40, 16, 3001
    monkeypatch.setattr(loss, "_LOGITS_PER_CHUNK", 7 * vocab)
    generator = torch.Generator().manual_seed(1)
    states = torch.randn(num_tokens, hidden, generator=generator)
    weight = torch.randn(vocab, hidden, generator=generator) / hidden**0.5
    targets = torch.randint(0, vocab, (num_tokens,), generator=generator)
    targets[::3] = -100
    check_against_reference("linear_cross_entropy", "triton", dtype, [states, weight, targets], cast=[0, 1],
                            differentiable=[0, 1])
    leaves = [states.to(DEVICE, dtype).requires_grad_(), weight.to(DEVICE, dtype).requires_grad_()]
    with PeakMemory() as memory:
        loss.linear_cross_entropy(*leaves, targets.to(DEVICE)).backward()
    assert memory.largest_elements < num_tokens * vocab
    assert memory.largest_elements <= vocab * hidden  # the weight gradient is the largest


@pytest.mark.parametrize("iters", [1, 20])
@needs_triton
def test_sinkhorn_with_padded_matrices(iters):
    """n = 3 streams (tiles padded to 4) and more tokens than one program holds: float32, forward and
    backward within 2e-5 of the float64 reference."""
    logits = torch.randn(2, 50, 3, 3, generator=torch.Generator().manual_seed(iters)) * 3
    check_against_reference("sinkhorn", "triton", torch.float32, [logits, iters, 1e-6], cast=[0], differentiable=[0])


@needs_triton
def test_moe_expert_ffn_through_the_triton_operators():
    """The whole routed-expert composite on the Triton operators against a float64 loop over experts
    (bf16 end to end: tolerance 4e-2 of the largest output)."""
    implementations = {name: registry.implementations(name)["triton"]
                       for name in ("moe_permute", "grouped_matmul", "swiglu", "moe_unpermute")}
    generator = torch.Generator().manual_seed(0)
    num_tokens, top_k, experts, hidden, width = 24, 2, 6, 32, 48
    ids = torch.stack([torch.randperm(experts, generator=generator)[:top_k] for _ in range(num_tokens)])
    weights = torch.rand(num_tokens, top_k, generator=generator)
    tokens = torch.randn(num_tokens, hidden, generator=generator)
    w1, w3 = (torch.randn(experts, width, hidden, generator=generator) / 6 for _ in range(2))
    w2 = torch.randn(experts, hidden, width, generator=generator) / 7

    def run(permute, grouped, swiglu, unpermute, dtype, device):
        cast = [t.to(device, dtype) for t in (tokens, w1, w3, w2)]
        permuted, counts, order = permute(cast[0], ids.to(device), experts)
        inner = swiglu(grouped(permuted, cast[1], counts), grouped(permuted, cast[2], counts), 7.0)
        return unpermute(grouped(inner, cast[3], counts), order, weights.to(device, dtype))

    ours = run(*implementations.values(), torch.bfloat16, DEVICE)
    expected = run(reference.moe_permute, reference.grouped_matmul, reference.swiglu, reference.moe_unpermute,
                   torch.float64, "cpu")
    assert relative_error(ours, expected) <= 4e-2


def test_ascend_kernels_imports_nothing_of_trex():
    code = (
        "import sys, ascend_kernels, ascend_kernels.reference, ascend_kernels.cpu, ascend_kernels.memory\n"
        "import ascend_kernels.registry as r\n"
        "r.implementations('rms_norm')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('trex_cli', 'data_synth'))\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@needs_triton
@pytest.mark.slow
def test_tiny_model_step_is_the_same_on_the_triton_operators(monkeypatch):
    """A 3-block `tiny` DeepSeek-V4 (sliding, CSA and HCA blocks, indexer, mHC, MoE, MTP) with every operator
    on the Triton backend (on the GPU, or interpreted on CPU tensors) gives the reference
    kernels' training loss within 1e-5 and every parameter gradient within 1e-3 of the largest (float32;
    four blocks of different summation orders)."""
    import ascend_kernels
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM

    if DEVICE == "cpu":  # interpreted: CPU tensors take the Triton backend as CUDA tensors would
        monkeypatch.setitem(registry.BACKEND_DEVICES, "triton", {"cuda", "cpu"})
    torch.manual_seed(0)
    # Three blocks (sliding, CSA, HCA) and the MTP block: the interpreter runs each program in Python.
    config = get_flavor("tiny").replace(num_hidden_layers=3, compress_ratios=[0, 4, 16, 0], num_hash_layers=1)
    model = DeepseekV4ForCausalLM(config).float().train().to(DEVICE)
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(0, 512, (1, 40), generator=generator).to(DEVICE)
    positions = torch.cat([torch.arange(24), torch.arange(16)]).unsqueeze(0).to(DEVICE)

    def step(backend):
        plan = ascend_kernels.configure(backend, device=DEVICE)
        assert set(plan.values()) == {backend}
        model.zero_grad()
        loss = model(input_ids, positions).loss
        loss.backward()
        return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    try:
        expected_loss, expected_grads = step("reference")
        loss, grads = step("triton")
    finally:
        ascend_kernels.configure(None)
    assert abs(loss.item() - expected_loss.item()) <= 1e-5 * abs(expected_loss.item())
    assert grads.keys() == expected_grads.keys()
    for name, want in expected_grads.items():
        assert relative_error(grads[name], want) <= 1e-3, name
