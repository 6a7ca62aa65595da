"""generate() for the eval backend: greedy equals step-by-step argmax, batching prompts of different
lengths changes nothing, EOS stops a row, sampling respects top_p."""

from __future__ import annotations

import pytest
import torch

import ascend_kernels
from trex_cli.models.deepseek_v4.config import get_flavor
from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM, _grow, _sample


@pytest.fixture(autouse=True, scope="module")
def reference_kernels():
    ascend_kernels.configure("reference")
    yield
    ascend_kernels.configure(None)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return DeepseekV4ForCausalLM(get_flavor("tiny")).float().eval()


def test_greedy_batched_equals_one_by_one(model):
    """The cached decoding path against full forward passes, one prompt at a time. The lengths take
    the short prompt past window 16, past an HCA entry (16 tokens) and past the indexer's top-4."""
    prompts = [[5, 9, 200, 17, 44] * 6, [3, 3, 8]]
    new_tokens = 20
    batched = model.generate(prompts, max_new_tokens=new_tokens, temperature=0.0)
    for prompt, continuation in zip(prompts, batched, strict=True):
        ids = list(prompt)
        for _ in range(new_tokens):
            with torch.no_grad():
                out = model(torch.tensor([ids]), compute_loss=False, return_logits=True)
            ids.append(int(out.logits[0, -1].argmax()))
        assert continuation == ids[len(prompt):]


def test_decode_step_matches_the_full_forward(model):
    prompt = torch.randint(0, 512, (1, 37), generator=torch.Generator().manual_seed(3))
    full, _, _ = model.hidden_states(prompt)
    # prefill the first 30 tokens, then decode 7 one by one
    ctx = model._context(prompt[:, :30], torch.arange(30).unsqueeze(0), training_losses=False)
    ctx.capture = {}
    with torch.no_grad():
        model.hidden_states(prompt[:, :30], torch.arange(30).unsqueeze(0), ctx)
        cache = {module: _grow(state, 40) for module, state in ctx.capture.items()}
        pool_positions = torch.arange(40).unsqueeze(0)
        pool_ctx = model._context(torch.zeros_like(pool_positions), pool_positions, training_losses=False)
        for position in range(30, 37):
            hidden = model._decode_step(prompt[:, position : position + 1], torch.tensor([[position]]), cache, pool_ctx)
            assert (hidden - full[:, position]).abs().max() < 1e-4


def test_eos_stops_a_row(model):
    prompt = [[11, 12, 13]]
    free = model.generate(prompt, max_new_tokens=5)[0]
    stopped = model.generate(prompt, max_new_tokens=5, eos_token_id=free[1])[0]
    assert stopped == free[:2]


def test_sampling_and_top_p():
    logits = torch.tensor([[4.0, 3.9, -10.0, -10.0]])
    generator = torch.Generator().manual_seed(0)
    draws = {int(_sample(logits, 1.0, 0.5, generator)) for _ in range(50)}
    assert draws == {0}  # the top token alone holds half the mass
    draws = {int(_sample(logits, 1.0, 1.0, generator)) for _ in range(200)}
    assert draws == {0, 1}
    with pytest.raises(ValueError, match="at least one token"):
        DeepseekV4ForCausalLM.generate(None, [[]], max_new_tokens=1)


def test_on_step_reports_every_new_token_and_finished_rows(model):
    """The progress hook the hf eval backend prints from: one call per decoding step, in order."""
    calls = []
    new_tokens = model.generate([[5, 9, 200], [3, 3, 8, 8]], max_new_tokens=6, temperature=0.0,
                                on_step=lambda tokens, finished: calls.append((tokens, finished)))
    assert [tokens for tokens, _ in calls] == [1, 2, 3, 4, 5, 6] and calls[-1][1] == 2
    assert [finished for _, finished in calls[:-1]] == [0] * 5 and all(len(row) == 6 for row in new_tokens)
    eos = new_tokens[0][0]  # the first row stops at once when its first token is the EOS
    calls.clear()
    model.generate([[5, 9, 200], [3, 3, 8, 8]], max_new_tokens=6, temperature=0.0, eos_token_id=eos,
                   on_step=lambda tokens, finished: calls.append((tokens, finished)))
    assert calls[0][1] >= 1


def test_hf_generator_progress_lines(capsys, monkeypatch):
    """The hf backend prints where a batch is, at most every `progress_every` seconds."""
    from trex_cli.evaluate import generators

    generator = generators.HFGenerator.__new__(generators.HFGenerator)  # no checkpoint needed for the line
    generator.max_tokens, generator.progress_every = 700, 10.0
    clock = iter([100.0, 105.0, 111.0, 112.0])
    monkeypatch.setattr(generators.time, "monotonic", lambda: next(clock))
    on_step = generator._progress_line(1, 2, 30)
    on_step(50, 0)  # 5 s after the start: quiet
    on_step(120, 3)  # 11 s: a line
    on_step(125, 3)  # 1 s after that line: quiet
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["hf: batch 1/2 (30 prompts): 120/700 tokens, 3 finished, 10.9 tokens/s per prompt"]
    generator.progress_every = 0.0
    assert generator._progress_line(1, 1, 1) is None
