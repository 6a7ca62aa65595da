"""Context parallel on two real gloo ranks (spawned with torch.multiprocessing): each rank computes its
chunk of the rows, and its outputs, its losses (summed over the ranks) and its gradients (summed over the
ranks) must be those of the unsplit computation, which every rank also runs as the reference.

Rows are 64 positions of packed documents, one of which crosses the chunk boundary, so the window keys,
the compressed entries and the indexer's choices of rank 1 reach back into rank 0's chunk."""

from __future__ import annotations

import os

import pytest
import torch
from conftest import assert_close_named, free_port, gloo_rank

SEQ_LEN = 64
WORLD = 2


def _close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert_close_named(actual, expected, what, rtol=1e-4)


def _inputs(vocab: int):
    generator = torch.Generator().manual_seed(7)
    input_ids = torch.randint(3, vocab, (2, SEQ_LEN), generator=generator)
    # row 0: documents of 20, 30 (across the boundary at 32) and 14 positions; row 1: one document
    positions = torch.stack([
        torch.cat([torch.arange(20), torch.arange(30), torch.arange(14)]),
        torch.arange(SEQ_LEN),
    ])
    loss_mask = torch.ones(2, SEQ_LEN)
    loss_mask[1, 40:50] = 0  # a masked-out span (as SFT has), on rank 1's side
    return input_ids, positions, loss_mask


def _summed_gradients(model: torch.nn.Module, group) -> dict[str, torch.Tensor]:
    grads = {}
    for name, parameter in model.named_parameters():
        grad = parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)
        grad = grad.clone()
        torch.distributed.all_reduce(grad, group=group)
        grads[name] = grad
    return grads


def _check_attention(model, shard, group) -> None:
    """Each kind of attention layer alone: window only, CSA (indexer top-k and its KL loss), HCA."""
    from trex_cli.models.deepseek_v4.config import CSA, HCA, SLIDING

    config = model.config
    input_ids, positions, _ = _inputs(config.vocab_size)
    chunk = slice(shard.start, shard.end)
    kinds = {config.layer_type(i): i for i in range(config.num_hidden_layers)}
    assert set(kinds) == {SLIDING, CSA, HCA}
    for kind, index in kinds.items():
        attention = model.layers[index].attn
        generator = torch.Generator().manual_seed(index)
        x = torch.randn(2, SEQ_LEN, config.hidden_size, generator=generator)
        weights = torch.randn(2, SEQ_LEN, config.hidden_size, generator=generator)

        attention.zero_grad(set_to_none=True)
        whole_x = x.clone().requires_grad_(True)
        ctx = model._context(input_ids, positions, training_losses=True)
        whole_out = attention(whole_x, ctx)
        whole_kl = attention.indexer_kl if attention.indexer_kl is not None else whole_out.new_zeros(())
        ((whole_out * weights).sum() + whole_kl).backward()
        expected = {name: p.grad.clone() for name, p in attention.named_parameters() if p.grad is not None}

        attention.zero_grad(set_to_none=True)
        chunk_x = x[:, chunk].clone().requires_grad_(True)
        ctx = model._context(input_ids, positions, training_losses=True, sequence=shard)
        chunk_out = attention(chunk_x, ctx)
        chunk_kl = attention.indexer_kl if attention.indexer_kl is not None else chunk_out.new_zeros(())
        ((chunk_out * weights[:, chunk]).sum() + chunk_kl).backward()
        _close(chunk_out, whole_out[:, chunk].detach(), f"{kind} output")
        if kind == CSA:
            assert float(whole_kl) > 0
            _close(shard.sum_over_ranks(chunk_kl.detach()), whole_kl.detach(), "indexer KL summed over ranks")
        # the input's gradient: the whole rows' gradient, this rank's chunk (what the gather's
        # reduce-scatter hands back)
        _close(chunk_x.grad, whole_x.grad[:, chunk], f"{kind} input gradient")
        summed = _summed_gradients(attention, group)
        assert set(expected) <= set(summed)
        for name, grad in expected.items():
            _close(summed[name], grad, f"{kind} gradient of {name}")


def _check_model(model, shard, group) -> None:
    """The whole model: logits, every loss and every parameter's gradient."""
    from trex_cli.train.trainer import MicroBatch, target_count

    config = model.config
    input_ids, positions, loss_mask = _inputs(config.vocab_size)
    chunk = slice(shard.start, shard.end)
    batch = MicroBatch(input_ids, positions, loss_mask)
    weights = {"mtp": 0.3, "balance": 1e-2, "kl": 1.0}

    model.zero_grad(set_to_none=True)
    whole = model(input_ids, positions, loss_mask, return_logits=True, mtp_loss_weight=weights["mtp"],
                  balance_loss_weight=weights["balance"])
    whole.loss.backward()
    expected = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    model.zero_grad(set_to_none=True)
    part = model(input_ids, positions, loss_mask, return_logits=True, mtp_loss_weight=weights["mtp"],
                 balance_loss_weight=weights["balance"], sequence=shard)
    lm_share = target_count(batch, 1, shard) / target_count(batch, 1)
    mtp_share = target_count(batch, 2, shard) / target_count(batch, 2)
    assert int(part.lm_tokens) == target_count(batch, 1, shard)
    # the trainer's assembly: each chunk's LM and MTP loss weighted by its share of the targets
    loss = (part.lm_loss * lm_share + weights["mtp"] * part.mtp_loss * mtp_share
            + weights["balance"] * part.balance_loss + weights["kl"] * part.indexer_kl_loss)
    loss.backward()
    _close(part.logits, whole.logits[:, chunk].detach(), "logits")
    for name, value, expected_value in (
        ("lm_loss", part.lm_loss * lm_share, whole.lm_loss), ("mtp_loss", part.mtp_loss * mtp_share, whole.mtp_loss),
        ("balance_loss", part.balance_loss, whole.balance_loss), ("indexer_kl_loss", part.indexer_kl_loss, whole.indexer_kl_loss),
        ("loss", loss, whole.loss),
    ):
        _close(shard.sum_over_ranks(value.detach()), expected_value.detach(), f"{name} summed over ranks")
    _close(shard.sum_over_ranks(part.expert_load), whole.expert_load, "expert load summed over ranks")
    summed = _summed_gradients(model, group)
    assert len(expected) > 100
    for name, grad in expected.items():
        _close(summed[name], grad, f"gradient of {name}")


def _rank(rank: int, port: int, case: str) -> None:
    with gloo_rank(rank, WORLD, port):
        from trex_cli.models.deepseek_v4.config import get_flavor
        from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
        from trex_cli.train.context_parallel import sequence_shard

        torch.manual_seed(0)
        model = DeepseekV4ForCausalLM(get_flavor("tiny")).train()
        group = torch.distributed.group.WORLD
        shard = sequence_shard(SEQ_LEN, group)
        assert (shard.start, shard.end) == (rank * SEQ_LEN // WORLD, (rank + 1) * SEQ_LEN // WORLD)
        with pytest.raises(ValueError, match=r"cp = 2 must divide the sequence length 63 \(the data folder's meta.json"):
            sequence_shard(SEQ_LEN - 1, group)
        {"attention": _check_attention, "model": _check_model}[case](model, shard, group)


@pytest.mark.parametrize("case", ["attention", "model"])
def test_context_parallel_matches_the_unsplit_computation(case):
    import torch.multiprocessing as multiprocessing

    multiprocessing.spawn(_rank, args=(free_port(), case), nprocs=WORLD, join=True)


def _halo_rank(rank: int, port: int, world: int) -> None:
    """Every (chunk, window) case: the halo equals the gathered sequence's positions before the chunk, and
    its backward gives each rank the gradient that gathering would (the sum over the ranks' halos)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from trex_cli.train.context_parallel import gather_sequence, sequence_halo

        group = torch.distributed.group.WORLD
        for chunk_len, window in [(4, 3), (4, 4), (4, 10), (4, 15), (3, 1)]:
            generator = torch.Generator().manual_seed(chunk_len * 100 + window)
            whole = torch.randn(2, world * chunk_len, 3, generator=generator)
            weights = torch.randn(2, world * chunk_len, 3, generator=generator)
            start = rank * chunk_len
            halo_len = min(window, start)

            mine = whole[:, start : start + chunk_len].clone().requires_grad_(True)
            halo = sequence_halo(mine, group, window)
            assert halo.shape == (2, halo_len, 3), (chunk_len, window, halo.shape)
            torch.testing.assert_close(halo, whole[:, start - halo_len : start], rtol=0, atol=0)
            (halo * weights[:, start - halo_len : start]).sum().backward()

            reference = whole[:, start : start + chunk_len].clone().requires_grad_(True)
            gathered = gather_sequence(reference, group)[:, start - halo_len : start]
            (gathered * weights[:, start - halo_len : start]).sum().backward()
            torch.testing.assert_close(mine.grad, reference.grad, rtol=1e-6, atol=1e-6)
            assert rank == world - 1 or mine.grad.abs().sum() > 0  # every chunk but the last lends keys
    finally:
        torch.distributed.destroy_process_group()


def test_the_window_halo_is_what_gathering_the_sequence_gives_on_four_ranks():
    """Windows shorter than a chunk (one rank back), as long as one, and reaching over several chunks."""
    import torch.multiprocessing as multiprocessing

    multiprocessing.spawn(_halo_rank, args=(free_port(), 4), nprocs=4, join=True)


def _compressor_rank(rank: int, port: int, world: int) -> None:
    """Chunks of 6 positions on 4 ranks against windows of 4 (CSA, overlapping) and 16 (HCA): windows
    straddle the chunks, some ranks end no window, and a document boundary cuts a window. The entries each
    rank pools and gathers must be the unsplit pooling's, and so must the gradients (summed over ranks)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from trex_cli.models.deepseek_v4.config import CSA, HCA, get_flavor
        from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
        from trex_cli.train.context_parallel import sequence_shard

        torch.manual_seed(0)
        model = DeepseekV4ForCausalLM(get_flavor("tiny"))
        config, seq_len, group = model.config, 6 * world, torch.distributed.group.WORLD
        shard = sequence_shard(seq_len, group)
        input_ids = torch.randint(3, config.vocab_size, (2, seq_len), generator=torch.Generator().manual_seed(1))
        positions = torch.stack([torch.cat([torch.arange(10), torch.arange(seq_len - 10)]), torch.arange(seq_len)])
        kinds = {config.layer_type(i): i for i in range(config.num_hidden_layers)}
        for kind in (CSA, HCA):
            compressor = model.layers[kinds[kind]].attn.compressor
            generator = torch.Generator().manual_seed(kinds[kind])
            x = torch.randn(2, seq_len, config.hidden_size, generator=generator)

            compressor.zero_grad(set_to_none=True)
            whole_x = x.clone().requires_grad_(True)
            whole = compressor(whole_x, model._context(input_ids, positions, training_losses=False))
            weights = torch.randn(whole.shape, generator=generator)
            (whole * weights).sum().backward()
            expected = {name: p.grad.clone() for name, p in compressor.named_parameters()}

            compressor.zero_grad(set_to_none=True)
            chunk_x = x[:, shard.start : shard.end].clone().requires_grad_(True)
            entries = compressor(chunk_x, model._context(input_ids, positions, training_losses=False, sequence=shard))
            torch.testing.assert_close(entries, whole, rtol=1e-5, atol=1e-6)
            # every rank holds all entries: the ranks' losses add up to the unsplit one at a world-th each
            (entries * weights / world).sum().backward()
            torch.testing.assert_close(chunk_x.grad, whole_x.grad[:, shard.start : shard.end], rtol=1e-4, atol=1e-6)
            for name, parameter in compressor.named_parameters():
                summed = parameter.grad.clone()
                torch.distributed.all_reduce(summed, group=group)
                # sums over many tokens in another order: fp32 rounding of about 1e-6
                torch.testing.assert_close(summed, expected[name], rtol=1e-4, atol=1e-5, msg=lambda m, what=f"{kind} {name}": f"{what}: {m}")
    finally:
        torch.distributed.destroy_process_group()


def test_each_rank_pools_the_windows_ending_in_its_chunk_on_four_ranks():
    import torch.multiprocessing as multiprocessing

    multiprocessing.spawn(_compressor_rank, args=(free_port(), 4), nprocs=4, join=True)
