"""Aux-loss-free balancing without a side channel: each gate counts its routed tokens in a buffer (once per
token, whatever is recomputed), and an optimizer pre-step hook moves the bias once per step on the counts of
all of the step's micro-batches, or, on a step the trainer skips, only drops them."""

from __future__ import annotations

import pytest
import torch

from trex_cli.train.config import ParallelSection, StageSchedule, TrainSection
from trex_cli.train.data import TrainData


@pytest.fixture(autouse=True)
def reference_kernels(monkeypatch):
    monkeypatch.setenv("TREX_KERNELS", "reference")


@pytest.fixture
def one_rank():
    from trex_cli.train.distributed import init_distributed

    distributed = init_distributed(ParallelSection())
    yield distributed
    distributed.close()


def _engine(one_rank, micro_batch_size: int = 1, parallel: ParallelSection | None = None, **train_changes):
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.train.trainer import Engine, build_model

    train = TrainSection(dtype="fp32", parallel=parallel or ParallelSection(), **train_changes)
    schedule = StageSchedule(
        lr=1e-3, min_lr=1e-4, warmup_steps=1, max_steps=10, global_batch_size=2, micro_batch_size=micro_batch_size
    )
    model = build_model(get_flavor("tiny"), None, seed=0)
    return Engine(model, train, schedule, one_rank, seq_len=32, micro_batches=2 // micro_batch_size)


def _gate_calls(model) -> tuple[list, dict]:
    """Forward hooks recording every call of every routed gate: (handles, gate -> list of (topk ids,
    inside a backward pass))."""
    calls: dict = {}
    handles = []
    for gate in model.routed_gates():
        calls[gate] = []

        def record(module, inputs, output, calls=calls[gate]):
            calls.append((output[1].detach().clone(), torch._C._current_graph_task_id() != -1))

        handles.append(gate.register_forward_hook(record))
    return handles, calls


@pytest.mark.parametrize("mode", ["full", ["moe"], ["attention", "moe", "mhc"]])
def test_recomputed_forwards_do_not_count_routed_tokens_again(one_rank, cpt_data, mode):
    batch = TrainData(cpt_data).collate([0, 1])
    counts, recomputed = {}, {}
    for checkpointing in ("none", mode):
        engine = _engine(one_rank, expert_bias_update_rate=0.01, parallel=ParallelSection(activation_checkpoint=checkpointing))
        handles, calls = _gate_calls(engine.model)
        engine.model(batch.input_ids, position_ids=batch.position_ids, loss_mask=batch.loss_mask).loss.backward()
        for handle in handles:
            handle.remove()
        key = str(checkpointing)
        counts[key] = [gate.routed_tokens.clone() for gate in engine.model.routed_gates()]
        recomputed[key] = sum(inside for gate_calls in calls.values() for _, inside in gate_calls)
        tokens = batch.input_ids.numel() * engine.model.config.num_experts_per_tok
        assert all(int(count.sum()) == tokens for count in counts[key])  # every block ran once, counted once
    assert recomputed["none"] == 0
    assert recomputed[str(mode)] > 0  # the gates did run again inside the backward pass
    for plain, checkpointed in zip(counts["none"], counts[str(mode)], strict=True):
        assert torch.equal(plain, checkpointed)


@pytest.mark.parametrize("swap_optimizer", [False, True])
def test_bias_moves_once_per_step_on_all_micro_batches(one_rank, cpt_data, swap_optimizer):
    rate = 0.01
    engine = _engine(one_rank, expert_bias_update_rate=rate, parallel=ParallelSection(swap_optimizer=swap_optimizer))
    micro_batches = TrainData(cpt_data).micro_batches(0, 2, 1, 0, 1, seed=0)
    assert len(micro_batches) == 2  # gradient accumulation over two micro-batches
    gates = engine.model.routed_gates()
    experts = engine.model.config.n_routed_experts
    before = [gate.bias.clone() if not gate.hashed else None for gate in gates]
    handles, calls = _gate_calls(engine.model)
    result = engine.step(micro_batches)
    for handle in handles:
        handle.remove()
    assert not result.skipped and engine.expert_bias.updates == 1
    for gate, old in zip(gates, before, strict=True):
        assert len(calls[gate]) == 2  # one forward per micro-batch
        assert not gate.routed_tokens.any()  # the step used the counts and reset them
        if gate.hashed:
            continue
        load = sum(torch.bincount(ids.reshape(-1), minlength=experts) for ids, _ in calls[gate]).float()
        # exactly one sign-rule move, on the load of both micro-batches together
        assert torch.equal(gate.bias - old, rate * torch.sign(load.mean() - load))
    assert any(not gate.hashed and gate.bias.abs().sum() > 0 for gate in gates)


def test_a_skipped_step_keeps_the_bias_and_drops_the_counts(one_rank, cpt_data):
    engine = _engine(one_rank, expert_bias_update_rate=0.01, max_bad_steps=3)
    batches = TrainData(cpt_data).micro_batches(0, 2, 1, 0, 1, seed=0)
    assert not engine.step(batches).skipped and engine.expert_bias.updates == 1
    gates = engine.model.routed_gates()
    biases = [gate.bias.clone() for gate in gates if not gate.hashed]
    handle = engine.model.layers[1].register_forward_hook(lambda module, inputs, output: output * float("nan"))
    seen = []
    probe = gates[0].register_forward_hook(lambda module, inputs, output: seen.append(int(module.routed_tokens.sum())))
    result = engine.step(batches)
    handle.remove()
    probe.remove()
    assert result.skipped and engine.expert_bias.updates == 1
    assert seen and seen[-1] > 0  # the skipped step's forwards did count
    assert all(torch.equal(gate.bias, old) for gate, old in zip([g for g in gates if not g.hashed], biases, strict=True))
    assert all(not gate.routed_tokens.any() for gate in gates)
