"""Selective recompute (`[train.parallel] activation_checkpoint = ["attention", "moe", "mhc"]`, any
subset): each choice gives the plain run's loss and gradients (fp32, tiny model), and exactly the chosen
parts run their forward a second time in the backward pass."""

from __future__ import annotations

import pytest
import torch

from trex_cli.train.config import ParallelSection, TrainSection

CHOICES = [["attention"], ["moe"], ["mhc"], ["attention", "mhc"], ["attention", "moe", "mhc"], "full"]


@pytest.fixture(autouse=True)
def reference_kernels(monkeypatch):
    monkeypatch.setenv("TREX_KERNELS", "reference")


def _model(mode):
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.train.parallelize import apply_activation_checkpointing
    from trex_cli.train.trainer import build_model

    model = build_model(get_flavor("tiny"), None, seed=0)
    apply_activation_checkpointing(model, ParallelSection(activation_checkpoint=mode).activation_checkpoint, 2)
    return model


def _step(model, batch):
    """One forward and backward with every training loss on; (loss, gradients by name)."""
    output = model(
        batch.input_ids, position_ids=batch.position_ids, loss_mask=batch.loss_mask,
        mtp_loss_weight=0.3, balance_loss_weight=1e-3, indexer_kl_weight=1.0,
    )
    output.loss.backward()
    return output.loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    from conftest import make_data_folder

    from trex_cli.train.data import TrainData

    folder = make_data_folder(tmp_path_factory.mktemp("recompute") / "data", "cpt")
    return TrainData(folder).micro_batches(0, 2, 2, 0, 1, seed=0)[0]


@pytest.fixture(scope="module")
def plain(batch):
    return _step(_model("none"), batch)


@pytest.mark.parametrize("mode", CHOICES, ids=str)
def test_recompute_gives_the_plain_loss_and_gradients(mode, batch, plain):
    loss, grads = _step(_model(mode), batch)
    reference_loss, reference_grads = plain
    assert torch.allclose(loss, reference_loss, rtol=1e-6, atol=0)
    assert grads.keys() == reference_grads.keys()
    for name, grad in grads.items():
        assert torch.allclose(grad, reference_grads[name], rtol=1e-6, atol=1e-6), name


@pytest.mark.parametrize("parts", [c for c in CHOICES if isinstance(c, list)], ids=str)
def test_only_the_chosen_parts_run_twice(parts, batch, monkeypatch):
    from trex_cli.models.deepseek_v4 import kernels
    from trex_cli.train.expert_parallel import blocks_of

    model = _model(parts)
    blocks = blocks_of(model)
    calls = {"attention": 0, "moe": 0, "mhc": 0}

    def count(part):
        def hook(*_):
            calls[part] += 1
        return hook

    for block in blocks:
        block.attn.register_forward_pre_hook(count("attention"))
        block.ffn.register_forward_pre_hook(count("moe"))
    # pre-hooks: a recompute may stop once it has rebuilt what the backward needs, before the module
    # returns. The mHC mixing holds no module of its own (its parameters are the block's): count its two kernels
    for name in ("hc_pre", "hc_post"):
        kernel = getattr(kernels, name)

        def counted(*args, _kernel=kernel, **kwargs):
            calls["mhc"] += 1
            return _kernel(*args, **kwargs)

        monkeypatch.setattr(kernels, name, counted)
    _step(model, batch)
    once = {"attention": len(blocks), "moe": len(blocks), "mhc": 4 * len(blocks)}  # pre and post, 2 sites
    assert calls == {part: once[part] * (2 if part in parts else 1) for part in once}


def test_a_bad_choice_names_the_field_and_the_fix():
    with pytest.raises(ValueError, match=r"activation_checkpoint = \['attention', 'mlp'\].*'attention', 'moe', 'mhc'"):
        ParallelSection(activation_checkpoint=["attention", "mlp"])
    with pytest.raises(ValueError, match="use one of 'none', 'full', 'selective'"):
        ParallelSection(activation_checkpoint="blocks")


def test_the_recipe_takes_a_list_or_the_old_values():
    from trex_cli.recipe import build_dataclass

    for value, expected in (("full", "full"), ("selective", "selective"), (["mhc", "attention"], ["attention", "mhc"])):
        train = build_dataclass(TrainSection, {"parallel": {"activation_checkpoint": value}}, "[train]")
        assert train.parallel.activation_checkpoint == expected
