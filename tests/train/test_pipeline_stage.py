"""A pipeline stage is the model with parts removed, run by the model's own forward (no method swapped),
and two stages chained give the whole model's losses and gradients."""

from __future__ import annotations

import copy

import pytest
import torch

from trex_cli.models.deepseek_v4.config import get_flavor
from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM, total_loss
from trex_cli.train.pipeline_parallel import prune_to_stages, stage_layers

WEIGHTS = {"mtp_loss_weight": 0.3, "balance_loss_weight": 0.01, "indexer_kl_weight": 1.0}


@pytest.fixture(autouse=True)
def reference_kernels(monkeypatch):
    monkeypatch.setenv("TREX_KERNELS", "reference")


def _inputs(vocab_size: int, seq_len: int = 64):
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(0, vocab_size, (2, seq_len), generator=generator)
    # two documents in the first row
    positions = torch.cat([torch.arange(40), torch.arange(seq_len - 40)]).unsqueeze(0)
    positions = torch.cat([positions, torch.arange(seq_len).unsqueeze(0)])
    loss_mask = torch.ones_like(input_ids)
    loss_mask[1, :10] = 0
    return input_ids, positions, loss_mask


def test_two_stages_are_the_model_with_parts_removed_and_give_its_losses():
    torch.manual_seed(0)
    config = get_flavor("tiny")
    model = DeepseekV4ForCausalLM(config).float().train()
    first, last = copy.deepcopy(model), copy.deepcopy(model)
    layers = stage_layers(config.num_hidden_layers, 2, [])
    prune_to_stages(first, layers[0], is_first=True, is_last=False)
    prune_to_stages(last, layers[1], is_first=False, is_last=True)
    for stage in (first, last):
        assert type(stage) is DeepseekV4ForCausalLM and "forward" not in vars(stage)
        assert type(stage).forward is DeepseekV4ForCausalLM.forward
        assert not stage.holds_every_block()
    assert not hasattr(first, "head") and not hasattr(first, "mtp") and not hasattr(last, "embed")

    input_ids, positions, loss_mask = _inputs(config.vocab_size)
    whole = model(input_ids, positions, loss_mask, **WEIGHTS)
    whole.loss.backward()
    front = first(input_ids, positions, loss_mask, **WEIGHTS)  # no head: it hands its streams on
    assert front.lm_loss is None and front.streams is not None and front.next_embeddings is not None
    back = last(input_ids, positions, loss_mask, **WEIGHTS, stage_input=(front.streams, front.next_embeddings))
    # the stages' parts of the mean balance and indexer KL losses add up to the whole model's
    torch.testing.assert_close(front.balance_loss + back.balance_loss, whole.balance_loss, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(front.indexer_kl_loss + back.indexer_kl_loss, whole.indexer_kl_loss, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(back.lm_loss, whole.lm_loss)
    torch.testing.assert_close(back.mtp_loss, whole.mtp_loss)
    held = (torch.arange(len(whole.expert_load)) >= layers[1][0]).unsqueeze(1)  # the last stage's blocks and MTP
    torch.testing.assert_close(back.expert_load, whole.expert_load * held)
    torch.testing.assert_close(front.loss + back.loss, whole.loss, rtol=1e-5, atol=1e-7)
    # the one loss assembly: a stage's loss is total_loss of its parts
    assert torch.equal(back.loss, total_loss(
        back.lm_loss, back.mtp_loss, back.balance_loss, back.indexer_kl_loss, mtp_weight=0.3, balance_weight=0.01,
        indexer_kl_weight=1.0,
    ))
    (front.loss + back.loss).backward()
    stages = dict(first.named_parameters()) | dict(last.named_parameters())
    assert set(stages) == {name for name, _ in model.named_parameters()}  # full names, every parameter once
    for name, parameter in model.named_parameters():
        expected, actual = parameter.grad, stages[name].grad
        if expected is None:
            assert actual is None or not actual.any(), name
            continue
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-6, msg=lambda message, name=name: f"{name}: {message}")
