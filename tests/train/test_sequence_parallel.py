"""Sequence parallel with tensor parallel (`[train.parallel] sequence_parallel`), on two real gloo ranks
(spawned with torch.multiprocessing, fp32), against the one-process model:

- between the tensor-parallel regions each tensor rank holds seq / tp positions: the input of every
  block's norms (and of the mHC mixing before them), of the router and of the final norms has half the
  positions, while attention's projections see all of them (forward hooks record the shapes);
- the losses (LM, MTP, balance, total), the logits, the routed-token counts and every gradient are the
  one-process model's: the embedding's and the head's rows, the tensor-split weights' shards, and the
  replicated parameters once `SequenceParallelGradients` has summed the local positions' parts over
  the tensor ranks (without that sum they are not: the check can fail);
- a sequence length that tp (x cp) does not divide is refused, naming the key, both values and the fix.

Ten training steps of the tiny model through the real command (tp2_sp, tp2_dp2_ep4_sp, pp2_tp2_sp, ...)
are `test_train_parallel.py`'s layouts."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import assert_close_named, free_port, gloo_rank

WORLD = 2


def _batch(vocab: int, seq_len: int = 32):
    generator = torch.Generator().manual_seed(5)
    input_ids = torch.randint(3, vocab, (2, seq_len), generator=generator)
    positions = torch.cat([torch.arange(13), torch.arange(seq_len - 13)]).expand(2, seq_len).contiguous()  # 2 documents
    loss_mask = torch.ones_like(input_ids)
    loss_mask[1, 20:25] = 0  # targets left out, in rank 1's half
    return input_ids, positions, loss_mask


def _record_positions(model, shapes: dict) -> None:
    """Forward hooks keeping the positions (dim 1) each watched module's first input had."""

    def watch(name, module):
        def hook(_, args):
            shapes.setdefault(name, set()).add(args[0].shape[1] if args[0].dim() > 2 else args[0].shape[0])

        module.register_forward_pre_hook(hook)

    for index, block in enumerate(model.layers):
        watch(f"layers.{index}.attn_norm", block.attn_norm)
        watch(f"layers.{index}.ffn_norm", block.ffn_norm)
        watch(f"layers.{index}.attn.wq_a", block.attn.wq_a)
        watch(f"layers.{index}.attn.wkv", block.attn.wkv)
        watch(f"layers.{index}.ffn.gate", block.ffn.gate)  # [N, D]: rows of the flattened batch
    watch("norm", model.norm)
    watch("mtp.0.enorm", model.mtp[0].enorm)
    watch("mtp.0.ffn_norm", model.mtp[0].ffn_norm)


def _parity(rank: int, mesh) -> None:
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
    from trex_cli.train.parallelize import apply_sequence_parallel, apply_tensor_parallel

    config = get_flavor("tiny")
    reference = DeepseekV4ForCausalLM(config)
    reference.reset_parameters(seed=4)
    split = copy.deepcopy(reference)
    apply_tensor_parallel(split, mesh, sequence_parallel=True)
    apply_sequence_parallel(split, mesh)
    reference.train()
    split.train()
    shapes: dict[str, set[int]] = {}
    _record_positions(split, shapes)

    seq_len = 32
    input_ids, positions, loss_mask = _batch(config.vocab_size, seq_len)
    kwargs = {"return_logits": True, "return_mtp_logits": True, "mtp_loss_weight": 0.3, "balance_loss_weight": 0.1}
    expected = reference(input_ids, positions, loss_mask, **kwargs)
    expected.loss.backward()
    out = split(input_ids, positions, loss_mask, **kwargs)
    out.loss.backward()

    # sequence parallel is applied: half the positions between the regions, all of them inside attention
    local = seq_len // WORLD
    for name, seen in shapes.items():
        if name.endswith(".gate"):
            assert seen == {input_ids.shape[0] * local}, f"{name}: routed {seen} tokens, not this rank's part"
        elif ".attn." in name:
            assert seen == {seq_len}, f"{name}: attention saw {seen} positions, not the whole rows"
        else:
            assert seen == {local}, f"{name}: {seen} positions per tensor rank, not seq / tp = {local}"

    for what in ("lm_loss", "mtp_loss", "balance_loss", "indexer_kl_loss", "loss", "logits", "mtp_logits", "expert_load"):
        assert_close_named(getattr(out, what).detach(), getattr(expected, what).detach(), what)
    assert out.lm_tokens == expected.lm_tokens
    # each tensor rank counts the tokens it routed; together every token once
    for (_, gate), (_, reference_gate) in zip(split.routed_gate_rows(), reference.routed_gate_rows(), strict=True):
        counts = gate.routed_tokens.clone()
        torch.distributed.all_reduce(counts)
        assert torch.equal(counts, reference_gate.routed_tokens)

    replicated = split.sequence_parallel_gradients.names
    for name in ("norm.weight", "layers.0.attn_norm.weight", "layers.2.hc_ffn_fn", "layers.3.ffn.gate.weight",
                 "layers.1.ffn.experts.w2", "mtp.0.e_proj.weight", "hc_head_fn"):
        assert name in replicated, name
    assert not any(".attn." in name or "shared_experts" in name for name in replicated), replicated
    # each rank's gradient of a parameter used on its own positions is its part of the whole ...
    before = split.get_parameter("layers.0.attn_norm.weight").grad.clone()
    assert not torch.allclose(before, reference.get_parameter("layers.0.attn_norm.weight").grad, rtol=1e-3)
    # ... and the sum over the tensor ranks is the one process's gradient
    split.sequence_parallel_gradients.sum_over_tensor_ranks(split)
    for name, parameter in split.named_parameters():
        grad, expected_grad = parameter.grad, reference.get_parameter(name).grad
        if expected_grad is None:
            assert grad is None, name
            continue
        if isinstance(grad, torch.distributed.tensor.DTensor):
            grad = grad.full_tensor()
        assert_close_named(grad, expected_grad, f"gradient of {name}")


def _rank(rank: int, port: int) -> None:
    with gloo_rank(rank, WORLD, port):
        from torch.distributed.device_mesh import init_device_mesh

        _parity(rank, init_device_mesh("cpu", (WORLD,), mesh_dim_names=("tp",)))


def test_sequence_parallel_splits_positions_and_matches_one_process():
    import torch.multiprocessing as multiprocessing

    multiprocessing.spawn(_rank, args=(free_port(),), nprocs=WORLD, join=True)


def test_sequence_length_tp_does_not_divide_is_refused():
    from trex_cli.train.parallel_dims import ParallelDims

    with pytest.raises(ValueError, match=r"sequence_parallel = true .* 30 positions .* tp = 4 ranks.*multiple of 4.*sequence_parallel = false"):
        ParallelDims(tp=4, sequence_parallel=True).check_sequence_length(30)
    with pytest.raises(ValueError, match=r"tp x cp = 2 x 2 = 4 ranks, which does not divide 34"):
        ParallelDims(tp=2, cp=2, sequence_parallel=True).check_sequence_length(34)
    ParallelDims(tp=2, cp=2, sequence_parallel=True).check_sequence_length(32)
    ParallelDims(tp=4, sequence_parallel=False).check_sequence_length(30)  # off: nothing to split
    ParallelDims(tp=1, sequence_parallel=True).check_sequence_length(31)  # tp 1: sequence parallel does nothing
    assert not ParallelDims(tp=1, sequence_parallel=True).sequence_parallel_on


def test_sequence_parallel_is_on_by_default_and_reaches_the_layout():
    from trex_cli.train.config import ParallelSection
    from trex_cli.train.parallel_dims import ParallelDims

    assert ParallelSection().sequence_parallel is True  # as the planner's memory model assumes
    assert ParallelDims.from_section(ParallelSection(tp=2), 2).sequence_parallel_on
    assert not ParallelDims.from_section(ParallelSection(tp=2, sequence_parallel=False), 2).sequence_parallel_on
    assert not ParallelDims.from_section(ParallelSection(), 2).sequence_parallel_on  # tp 1


def test_sequence_parallel_replaces_the_expert_token_split():
    from trex_cli.train.parallel_dims import ParallelDims

    assert ParallelDims(dp_shard=2, tp=2, ep=4).experts_split_tokens_over_tp
    assert not ParallelDims(dp_shard=2, tp=2, ep=4, sequence_parallel=True).experts_split_tokens_over_tp
    assert ParallelDims(dp_shard=2, tp=2, ep=4).routing_replicas == 2
    assert ParallelDims(dp_shard=2, tp=2, ep=4, sequence_parallel=True).routing_replicas == 1


def test_a_sequence_tp_does_not_divide_is_one_line_before_any_rank_starts(tmp_path):
    import subprocess

    from conftest import TINY_FP32, make_data_folder, trex_command, trex_environment

    data = make_data_folder(tmp_path / "data", "cpt", rows=8, seq_len=31)
    command = trex_command("train", "cpt", "--data", str(data), "--run-dir", str(tmp_path / "run"), *TINY_FP32,
                           "--nproc", "2", "--set", "train.parallel.tp=2")
    wrong = subprocess.run(command, env=trex_environment(), capture_output=True, text=True, timeout=600)
    assert wrong.returncode == 1, wrong.stderr
    squeezed = "".join(wrong.stderr.split())
    expected = ("error: [train.parallel] sequence_parallel = true splits each row's 31 positions (the data's seq_len) "
                "over tp = 2 ranks, which does not divide 31; rebuild the data with a seq_len that is a multiple of 2, "
                "or set [train.parallel] sequence_parallel = false")
    assert "".join(expected.split()) in squeezed, wrong.stderr
    assert wrong.stderr.count("error:") == 1 and "Traceback" not in wrong.stderr
    assert not (tmp_path / "run" / "train" / "cpt").exists()
