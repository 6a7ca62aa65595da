"""The training losses: LM loss with loss masks and document boundaries (no attention crosses a
document), MTP loss, sequence balance loss, indexer KL loss, and the aux-loss-free bias update."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import ascend_kernels
from trex_cli.models.deepseek_v4.config import get_flavor
from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM


@pytest.fixture(autouse=True, scope="module")
def reference_kernels():
    # plain PyTorch operators: no torch.compile warm-up in short tests
    ascend_kernels.configure("reference")
    yield
    ascend_kernels.configure(None)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return DeepseekV4ForCausalLM(get_flavor("tiny")).float()


def tokens(batch, length, seed):
    return torch.randint(0, 512, (batch, length), generator=torch.Generator().manual_seed(seed))


def logits(model, input_ids, position_ids=None):
    with torch.no_grad():
        return model.eval()(input_ids, position_ids, compute_loss=False, return_logits=True, return_mtp_logits=True)


def test_packed_documents_do_not_see_each_other(model):
    first, second = tokens(1, 48, 1), tokens(1, 48, 2)
    packed = torch.cat([first, second], dim=1)
    positions = torch.cat([torch.arange(48), torch.arange(48)]).unsqueeze(0)
    together = logits(model, packed, positions)
    alone = logits(model, second)
    # 48 is a multiple of every compression ratio: the second document's windows are its own
    assert (together.logits[:, 48:] - alone.logits).abs().max() < 1e-4
    # at a boundary that is not window-aligned, the first document still cannot leak into the second
    positions = torch.cat([torch.arange(37), torch.arange(59)]).unsqueeze(0)
    changed = packed.clone()
    changed[:, :37] = tokens(1, 37, 3)
    a, b = logits(model, packed, positions), logits(model, changed, positions)
    assert (a.logits[:, 37:] - b.logits[:, 37:]).abs().max() < 1e-5
    assert (a.mtp_logits[:, 37:] - b.mtp_logits[:, 37:]).abs().max() < 1e-5
    assert (a.logits[:, :37] - b.logits[:, :37]).abs().max() > 1e-3  # and the first one did change


def test_lm_and_mtp_losses_follow_masks_and_documents(model):
    input_ids = tokens(2, 64, 4)
    positions = torch.cat([torch.arange(40), torch.arange(24)]).expand(2, 64)
    loss_mask = (torch.rand(2, 64, generator=torch.Generator().manual_seed(5)) > 0.3).long()
    out = model.eval()(input_ids, positions, loss_mask, return_logits=True, return_mtp_logits=True)

    def expected(all_logits, shift):
        targets = input_ids[:, shift:]
        keep = loss_mask[:, shift:].bool().clone()
        keep[:, 40 - shift : 40] = False  # targets in the next document
        per_token = F.cross_entropy(all_logits[:, :-shift].reshape(-1, 512), targets.reshape(-1), reduction="none")
        return (per_token * keep.reshape(-1)).sum() / keep.sum(), keep.sum()

    lm, count = expected(out.logits, 1)
    assert torch.allclose(out.lm_loss, lm, atol=1e-5) and int(out.lm_tokens) == int(count)
    mtp, _ = expected(out.mtp_logits, 2)
    assert torch.allclose(out.mtp_loss, mtp, atol=1e-5)
    total = out.lm_loss + 0.3 * out.mtp_loss + model.config.router_aux_loss_coef * out.balance_loss
    assert torch.allclose(out.loss, total, atol=1e-6)  # eval: no indexer KL


def test_training_losses_and_gradients(model):
    model.train()
    model.zero_grad()
    input_ids = tokens(2, 64, 6)
    out = model(input_ids)
    assert out.logits is None  # training never builds [tokens, vocab] logits unless asked
    assert out.indexer_kl_loss is not None and out.indexer_kl_loss.item() >= 0
    out.loss.backward()
    gradless = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert gradless == []
    # balance loss by its definition (DeepSeek-V3 sequence-wise): E/(k S) * count_i times mean share_i
    gate = model.layers[-1].ffn.gate
    with torch.no_grad():
        model.eval()
        out_eval = model(input_ids)
    config = model.config
    assert 0.5 < out_eval.balance_loss.item() < 3.0
    load = out_eval.expert_load
    assert load.shape == (config.num_hidden_layers + 1, config.n_routed_experts)
    assert torch.all(load.sum(-1) == 2 * 64 * config.num_experts_per_tok)
    assert gate.bias.requires_grad is False


def test_balance_loss_formula():
    torch.manual_seed(1)
    config = get_flavor("tiny").replace(num_hash_layers=0, num_hidden_layers=1, num_nextn_predict_layers=0)
    model = DeepseekV4ForCausalLM(config).float().eval()
    input_ids = tokens(2, 32, 7)
    captured = {}
    gate = model.layers[0].ffn.gate
    hook = gate.register_forward_hook(lambda m, args, output: captured.update(out=output))
    out = model(input_ids)
    hook.remove()
    scores, topk_ids, _ = captured["out"]
    scores = scores.view(2, 32, -1)
    share = (scores / scores.sum(-1, keepdim=True)).mean(1)
    counts = torch.stack([torch.bincount(topk_ids.view(2, -1)[b], minlength=8) for b in range(2)]).float()
    expected = (counts * 8 / (2 * 32) * share).sum(-1).mean()
    assert torch.allclose(out.balance_loss, expected, atol=1e-6)


def test_indexer_kl_trains_only_the_indexer(model):
    model.train()
    model.zero_grad()
    out = model(tokens(1, 64, 8))
    out.indexer_kl_loss.backward()
    indexer = model.layers[1].attn.indexer
    assert indexer.wq_b.weight.grad.abs().sum() > 0 and indexer.compressor.wkv.weight.grad.abs().sum() > 0
    assert model.layers[1].attn.wq_a.weight.grad is None and model.embed.weight.grad is None


def test_zero_indexer_kl_weight_keeps_the_indexer_out_of_autograd(model):
    """The indexer learns from its KL loss alone (its inputs are detached, its top-k is not
    differentiable): with that loss weighted 0 it is not computed, the indexer gets no gradient and the
    LM loss is the same as with the loss on."""
    model.train()
    model.zero_grad()
    input_ids = tokens(1, 64, 9)
    out = model(input_ids, indexer_kl_weight=0.0)
    assert out.indexer_kl_loss is None
    out.loss.backward()
    indexers = [layer.attn.indexer for layer in model.layers if layer.attn.indexer is not None]
    assert indexers and all(p.grad is None for indexer in indexers for p in indexer.parameters())
    assert model.layers[1].attn.wq_a.weight.grad.abs().sum() > 0
    with_loss = model(input_ids)
    assert with_loss.indexer_kl_loss is not None
    assert torch.equal(with_loss.lm_loss, out.lm_loss)


def test_aux_loss_free_bias_update(model):
    load = torch.zeros(model.config.num_hidden_layers + 1, model.config.n_routed_experts)
    load[:, 0] = 10.0  # expert 0 overloaded, the rest idle
    before = [g.bias.clone() if not g.hashed else None for g in model.routed_gates()]
    model.update_expert_bias(load, rate=0.01)
    for gate, old in zip(model.routed_gates(), before, strict=True):
        if gate.hashed:
            continue
        change = gate.bias - old
        assert torch.isclose(change[0], torch.tensor(-0.01)) and torch.allclose(change[1:], torch.tensor(0.01))
    with pytest.raises(ValueError, match="routed layers"):
        model.update_expert_bias(load[:2], rate=0.01)


def test_expert_load_keeps_a_row_for_a_skipped_mtp_block(model):
    model.eval()
    with torch.no_grad():
        out = model(tokens(1, 32, 9), mtp_loss_weight=0.0)
    assert out.mtp_loss is None and out.expert_load.shape[0] == model.config.num_hidden_layers + 1
    assert not out.expert_load[-1].any()
    mtp_bias = model.mtp[0].ffn.gate.bias.clone()
    model.update_expert_bias(out.expert_load, rate=0.5)
    assert torch.equal(model.mtp[0].ffn.gate.bias, mtp_bias)
