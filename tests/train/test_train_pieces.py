"""The trainer's pieces on one process: schedule, data order, layouts, gradient norm, the NaN guard,
and SFT's loss mask seen through the gradients."""

from __future__ import annotations

import math

import pytest
import torch

from trex_cli.train.config import ParallelSection, StageSchedule, TrainSection
from trex_cli.train.data import TrainData, check_batch_sizes
from trex_cli.train.optim import warmup_cosine
from trex_cli.train.parallel_dims import ParallelDims


@pytest.fixture(autouse=True)
def reference_kernels(monkeypatch):
    # the reference kernels need no compilation: the tests stay fast and deterministic
    monkeypatch.setenv("TREX_KERNELS", "reference")


def test_warmup_then_cosine_to_min_lr():
    schedule = StageSchedule(lr=1.0, min_lr=0.1, warmup_steps=4, max_steps=14)
    multiplier = warmup_cosine(schedule)
    assert [multiplier(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert multiplier(4) == pytest.approx(1.0)
    assert multiplier(9) == pytest.approx(0.1 + 0.9 * 0.5)  # halfway through the decay
    assert multiplier(14) == pytest.approx(0.1)
    values = [multiplier(s) for s in range(4, 15)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def test_global_batches_are_a_function_of_step_and_split_across_ranks(cpt_data):
    data = TrainData(cpt_data)
    first = data.global_rows(0, 8, seed=3)
    assert first == data.global_rows(0, 8, seed=3)
    assert first != data.global_rows(0, 8, seed=4)
    # two steps of 8 cover the 16 rows of epoch 0 exactly once
    assert sorted(first + data.global_rows(1, 8, seed=3)) == list(range(16))
    whole = data.micro_batches(5, 8, 2, dp_rank=0, dp_size=1, seed=3)
    halves = data.micro_batches(5, 8, 2, 0, 2, 3) + data.micro_batches(5, 8, 2, 1, 2, 3)
    assert len(whole) == 4 and len(halves) == 4
    for a, b in zip(whole, halves, strict=True):
        assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.position_ids, b.position_ids)


def test_short_sft_rows_are_padded_outside_the_loss(sft_data):
    data = TrainData(sft_data)
    lengths = [len(data.dataset[i]["input_ids"]) for i in range(data.num_rows)]
    short = next(i for i, n in enumerate(lengths) if n < data.seq_len)
    batch = data.collate([short])
    n = lengths[short]
    assert batch.input_ids.shape == (1, data.seq_len)
    assert torch.all(batch.input_ids[0, n:] == data.pad_token_id)
    assert torch.all(batch.loss_mask[0, n:] == 0)
    assert batch.loss_mask[0, :n].sum() > 0


def test_interleaved_stages_split_the_slots_round_robin():
    from trex_cli.train.pipeline_parallel import stage_layers

    # 5 layers on 2 ranks x 2 virtual stages: 8 slots, 3 no-op slots appended; rank r holds r and r + 2
    assert stage_layers(5, 4, []) == [[0, 1], [2, 3], [4], []]
    # V4-Pro's 61 layers with the paper's no-op slots 3, 62, 63, cut into 32 stages of 2 slots
    stages = stage_layers(61, 32, [3, 62, 63])
    assert stages[1] == [2] and stages[31] == [] and sum(map(len, stages)) == 61


def test_layout_errors_name_the_fix():
    resolve = ParallelDims.from_section
    assert resolve(ParallelSection(ep=2), 4).dp_shard == 4
    with pytest.raises(ValueError, match="ep x etp = 3 x 1 = 3 must divide the ranks of a pipeline stage"):
        resolve(ParallelSection(ep=3), 4)
    with pytest.raises(ValueError, match="does not divide"):
        resolve(ParallelSection(tp=3), 4)
    with pytest.raises(ValueError, match="interleaved 1F1B needs pp_virtual_stages >= 2"):
        resolve(ParallelSection(pp=2, pp_schedule="Interleaved1F1B"), 2)
    with pytest.raises(ValueError, match="the other schedules take 1"):
        resolve(ParallelSection(pp=2, pp_virtual_stages=2), 2)
    assert resolve(ParallelSection(pp=2, pp_schedule="Interleaved1F1B", pp_virtual_stages=2), 2).pp == 2
    with pytest.raises(ValueError, match="multiple of micro_batch_size"):
        check_batch_sizes(6, 4, 1, "[train.cpt]")
    assert check_batch_sizes(8, 2, 2, "[train.cpt]") == 2


@pytest.fixture
def one_rank():
    from trex_cli.train.distributed import init_distributed

    distributed = init_distributed(ParallelSection())
    yield distributed
    distributed.close()


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's values: the local shard of a DTensor (FSDP2, TP), the tensor itself otherwise."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def _engine(one_rank, **train_changes):
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.train.trainer import Engine, build_model

    train = TrainSection(dtype="fp32", **train_changes)
    schedule = StageSchedule(lr=1e-3, min_lr=1e-4, warmup_steps=1, max_steps=10, global_batch_size=2, micro_batch_size=1)
    model = build_model(get_flavor("tiny"), None, seed=0)
    return Engine(model, train, schedule, one_rank, seq_len=32, micro_batches=2)


def test_gradient_norm_and_clipping_match_torch(one_rank, cpt_data):
    from trex_cli.train.optim import clip_gradients, global_grad_norm

    engine = _engine(one_rank)
    batch = TrainData(cpt_data).collate([0, 1])
    engine.model(batch.input_ids, position_ids=batch.position_ids, loss_mask=batch.loss_mask).loss.backward()
    local = [_local(p.grad).clone() for p in engine.parameters]
    expected = torch.linalg.vector_norm(torch.stack([g.double().norm() for g in local]))
    norm = global_grad_norm(engine.parameters, ranks_per_stage=1)
    assert float(norm) == pytest.approx(float(expected), rel=1e-6)
    clip_gradients(engine.parameters, norm, max_norm=float(norm) / 4)
    clipped = torch.linalg.vector_norm(torch.stack([_local(p.grad).double().norm() for p in engine.parameters]))
    assert float(clipped) == pytest.approx(float(norm) / 4, rel=1e-4)


def test_nan_guard_skips_counts_and_stops(one_rank, cpt_data):
    from trex_cli.train.trainer import TrainingDiverged

    engine = _engine(one_rank, max_bad_steps=2)
    data = TrainData(cpt_data)
    batches = data.micro_batches(0, 2, 1, 0, 1, seed=0)
    first = engine.step(batches)
    assert not first.skipped and math.isfinite(first.loss)
    before = {n: _local(p.detach()).clone() for n, p in engine.model.named_parameters()}
    # a block whose output turns NaN: the loss and every gradient behind it become non-finite
    handle = engine.model.layers[1].register_forward_hook(lambda module, inputs, output: output * float("nan"))
    result = engine.step(batches)
    assert result.skipped and engine.skipped_steps == 1
    after = {n: _local(p.detach()) for n, p in engine.model.named_parameters()}
    assert all(torch.equal(before[n], after[n]) for n in before)  # a skipped step changes nothing
    with pytest.raises(TrainingDiverged, match="2 steps in a row"):
        engine.step(batches)
    handle.remove()


def test_sft_loss_and_gradients_ignore_masked_targets(one_rank, sft_data):
    """The last token of a row whose final turn is the user's is only a target (nothing after it is
    predicted from it) and it is masked: changing it must leave the loss and every gradient as they
    are. The balance and indexer losses are set to zero here because they regularize routing and the
    indexer on every input position by design, masked or not."""
    engine = _engine(one_rank, balance_loss_weight=0.0, indexer_kl_weight=0.0)
    # In float64: a changed token may be routed to other experts, which regroups the rows of the grouped
    # matmuls and so the order of the (zero) contributions' sums; in fp32 that rounding, amplified by
    # cancellation in the small mHC-head gradients, reaches 1e-3 of what a trained target moves.
    engine.model.double()
    data = TrainData(sft_data)
    row = next(i for i in range(data.num_rows) if data.collate([i]).loss_mask[0, -1] == 0)
    batch = data.collate([row])
    assert batch.loss_mask.sum() > 0

    def loss_and_grads(input_ids):
        engine.model.zero_grad(set_to_none=True)
        output = engine.model(input_ids, position_ids=batch.position_ids, loss_mask=batch.loss_mask)
        loss = output.lm_loss + 0.3 * output.mtp_loss
        loss.backward()
        # parameters outside the LM and MTP losses (the indexer's, hash gates') get no gradient at all
        return loss.detach().clone(), {
            n: None if p.grad is None else _local(p.grad).clone() for n, p in engine.model.named_parameters()
        }

    def relative_change(grads, other, names):
        difference = torch.stack([(grads[n] - other[n]).double().norm() for n in names]).norm()
        return float(difference / torch.stack([grads[n].double().norm() for n in names]).norm())

    loss_a, grads_a = loss_and_grads(batch.input_ids)
    changed = batch.input_ids.clone()
    changed[0, -1] = (changed[0, -1] + 7) % 512
    loss_b, grads_b = loss_and_grads(changed)
    trained = int(torch.nonzero(batch.loss_mask[0, 1:]).flatten()[-1]) + 1
    moved = batch.input_ids.clone()
    moved[0, trained] = (moved[0, trained] + 7) % 512
    loss_c, grads_c = loss_and_grads(moved)

    with_grad = [n for n, g in grads_a.items() if g is not None]
    assert len(with_grad) > 0.8 * len(grads_a)
    assert all((grads_b[n] is None) == (grads_a[n] is None) for n in grads_a)
    # unchanged up to float rounding (see above)
    assert torch.allclose(loss_a, loss_b, rtol=1e-7, atol=0)
    assert relative_change(grads_a, grads_b, with_grad) < 1e-5
    for name in with_grad:  # and parameter by parameter, far below what a trained target moves
        masked = float((grads_a[name] - grads_b[name]).norm())
        trained_change = float((grads_a[name] - grads_c[name]).norm())
        assert masked <= 1e-3 * trained_change + 1e-7 * float(grads_a[name].norm()) + 1e-12, name
    # the same change at a trained (assistant) position moves the loss and the gradients
    assert abs(float(loss_c - loss_a)) > 1e-4
    assert relative_change(grads_a, grads_c, with_grad) > 1e-3


def test_bf16_compute_keeps_fp32_master_weights_and_adam_states(one_rank, cpt_data):
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.train.trainer import Engine, build_model

    train = TrainSection(dtype="bf16")
    schedule = StageSchedule(lr=1e-3, min_lr=1e-4, warmup_steps=1, max_steps=10, global_batch_size=2, micro_batch_size=2)
    engine = Engine(build_model(get_flavor("tiny"), None, seed=0), train, schedule, one_rank, seq_len=32, micro_batches=1)
    seen = []
    engine.model.layers[0].register_forward_hook(lambda module, inputs, output: seen.append(output.dtype))
    result = engine.step(TrainData(cpt_data).micro_batches(0, 2, 2, 0, 1, seed=0))
    assert seen == [torch.bfloat16] and math.isfinite(result.loss)
    assert all(p.dtype == torch.float32 for p in engine.model.parameters())
    states = [s for s in engine.optimizer.state.values() if "exp_avg" in s]
    assert states and all(s["exp_avg"].dtype == s["exp_avg_sq"].dtype == torch.float32 for s in states)


def test_gradient_accumulation_equals_one_big_batch(one_rank, cpt_data):
    """Four micro-batches of one row and one micro-batch of four rows: the same step. (The indexer KL
    is off: the model averages it over the query positions of a micro-batch, a count it keeps inside,
    so the trainer averages it per micro-batch.)"""
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.train.trainer import Engine, build_model

    data = TrainData(cpt_data)
    results = []
    for micro in (1, 4):
        schedule = StageSchedule(lr=1e-3, min_lr=1e-4, warmup_steps=1, max_steps=10, global_batch_size=4, micro_batch_size=micro)
        train = TrainSection(dtype="fp32", indexer_kl_weight=0.0)
        engine = Engine(build_model(get_flavor("tiny"), None, seed=0), train, schedule, one_rank, 32, 4 // micro)
        first = engine.step(data.micro_batches(0, 4, micro, 0, 1, seed=0))
        second = engine.step(data.micro_batches(1, 4, micro, 0, 1, seed=0))
        results.append((first, second))
    (a1, a2), (b1, b2) = results
    for x, y in ((a1, b1), (a2, b2)):
        assert x.loss == pytest.approx(y.loss, rel=1e-5)
        assert x.grad_norm == pytest.approx(y.grad_norm, rel=1e-4)


def test_expert_bias_moves_by_the_aux_loss_free_rule(one_rank, cpt_data):
    engine = _engine(one_rank, expert_bias_update_rate=0.01)
    gates = [g for g in engine.model.routed_gates() if not g.hashed]
    assert gates and all(torch.all(g.bias == 0) for g in gates)
    engine.step(TrainData(cpt_data).micro_batches(0, 2, 1, 0, 1, seed=0))
    for gate in gates:
        # every learned gate's bias moved by exactly +-rate (or stayed for experts at the mean load)
        assert torch.all(torch.isclose(gate.bias.abs(), torch.tensor(0.01)) | (gate.bias == 0))
        assert gate.bias.abs().sum() > 0
        assert (gate.bias > 0).any() and (gate.bias < 0).any()  # under-loaded up, over-loaded down


def test_activation_checkpointing_gives_the_same_step(one_rank, cpt_data):
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.train.config import ParallelSection
    from trex_cli.train.trainer import Engine, build_model

    data = TrainData(cpt_data)
    results = []
    for mode in ("none", "full"):
        train = TrainSection(dtype="fp32", parallel=ParallelSection(activation_checkpoint=mode))
        schedule = StageSchedule(lr=1e-3, min_lr=1e-4, warmup_steps=1, max_steps=10, global_batch_size=2, micro_batch_size=2)
        engine = Engine(build_model(get_flavor("tiny"), None, seed=0), train, schedule, one_rank, 32, 1)
        results.append([engine.step(data.micro_batches(s, 2, 2, 0, 1, seed=0)) for s in range(2)])
    for plain, recomputed in zip(*results, strict=True):
        assert plain.loss == pytest.approx(recomputed.loss, rel=1e-6)
        assert plain.grad_norm == pytest.approx(recomputed.grad_norm, rel=1e-5)


def test_one_rank_mixed_precision_matches_fsdp2_on_one_rank(one_rank, cpt_data):
    """A one-rank run skips FSDP2 but must compute what FSDP2's mixed precision would: bf16 compute
    copies of fp32 master weights, gradients accumulated over micro-batches in fp32, and no gradient
    for a parameter that got none."""
    import contextlib

    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.train.parallelize import OneRankMixedPrecision, apply_fsdp
    from trex_cli.train.trainer import build_model

    batches = TrainData(cpt_data).micro_batches(0, 2, 1, 0, 1, seed=0)

    def accumulated_grads(model, context):
        for batch in batches:
            with context():
                # no MTP loss: the MTP block does not run and its parameters get no gradient
                output = model(batch.input_ids, position_ids=batch.position_ids, loss_mask=batch.loss_mask, mtp_loss_weight=0.0)
                output.loss.backward()
        return {n: None if p.grad is None else _local(p.grad).clone() for n, p in model.named_parameters()}

    plain = build_model(get_flavor("tiny"), None, seed=0)
    ours = accumulated_grads(plain, OneRankMixedPrecision(plain, torch.bfloat16).compute)
    sharded = build_model(get_flavor("tiny"), None, seed=0)
    apply_fsdp(sharded, one_rank, torch.bfloat16, offload_optimizer=False, expert_parallel=False)
    theirs = accumulated_grads(sharded, contextlib.nullcontext)
    assert all(p.dtype == torch.float32 for p in plain.parameters())
    assert ours.keys() == theirs.keys()
    assert all(g is None for n, g in ours.items() if n.startswith("mtp."))
    assert sum(g is not None for g in ours.values()) > 0.7 * len(ours)
    for name, grad in ours.items():
        assert (grad is None) == (theirs[name] is None), name
        if grad is not None:
            assert grad.dtype == torch.float32, name
            torch.testing.assert_close(grad, theirs[name], rtol=1e-5, atol=1e-7, msg=name)
