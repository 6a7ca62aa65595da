"""Vocabulary-parallel embedding, output head and cross-entropy under tensor parallel, on two real gloo
ranks (spawned with torch.multiprocessing, fp32):

- each tensor rank holds vocab / tp rows of the embedding and of the output head, its own rows of the
  one-process model's;
- the tiny model, tensor parallel over both ranks (attention, shared expert, embedding, head), gives the
  one-process model's losses (LM, MTP, total), logits, and gradients: each rank's rows of the embedding
  and head gradients, and the gradients of the replicated parameters the loss flows back through;
- the vocab-parallel cross-entropy alone, over several token blocks with ignored targets on both ranks'
  halves of the vocabulary, gives torch's cross-entropy and its gradients;
- a vocabulary that tp does not divide is refused with the values and the fix;
- under TP 2 x FSDP 2 the gradient norm counts every piece once: FSDP splits the row-split TP weights
  (the embedding, the head, wq_b, ...) once more with its `_StridedShard`, which the count must see;
- through the real command (`trex train cpt --nproc 2`, tp 2): a run resumed from its step-3 checkpoint
  gives the uninterrupted run's losses bitwise, its checkpointed embedding and head (DCP, gathered from
  the shards) are the one-process run's, and the HF export written from that checkpoint holds them.

The loss over ten training steps against the one process (tp 2, pp 2 x tp 2, ...) is
`test_train_parallel.py`'s."""

from __future__ import annotations

import copy
import dataclasses
import shutil

import pytest
import torch
from conftest import (
    TINY_FP32,
    assert_close_named,
    fake_rank,
    free_port,
    gloo_rank,
    losses,
    make_data_folder,
    run_trex,
)

WORLD = 2


def _batch(vocab: int):
    generator = torch.Generator().manual_seed(7)
    input_ids = torch.randint(3, vocab, (2, 24), generator=generator)
    input_ids[0, :4] = torch.tensor([3, vocab // 2 - 1, vocab // 2, vocab - 1])  # both halves, at the border
    positions = torch.cat([torch.arange(10), torch.arange(14)]).expand(2, 24).contiguous()  # two documents
    loss_mask = torch.ones_like(input_ids)
    loss_mask[1, 5:9] = 0  # targets left out of the loss
    return input_ids, positions, loss_mask


def _model_parity(rank: int, mesh) -> None:
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
    from trex_cli.train.parallelize import apply_tensor_parallel

    config = get_flavor("tiny")
    vocab, rows = config.vocab_size, config.vocab_size // WORLD
    torch.manual_seed(0)
    reference = DeepseekV4ForCausalLM(config)
    reference.reset_parameters(seed=3)
    split = copy.deepcopy(reference)
    apply_tensor_parallel(split, mesh)
    own = slice(rank * rows, (rank + 1) * rows)
    for name in ("embed", "head"):
        local = getattr(split, name).weight.to_local()
        assert local.shape == (rows, config.hidden_size), f"{name}: {tuple(local.shape)}"
        assert torch.equal(local, getattr(reference, name).weight.detach()[own]), name

    input_ids, positions, loss_mask = _batch(vocab)
    kwargs = {"return_logits": True, "return_mtp_logits": True, "mtp_loss_weight": 0.3}
    expected = reference(input_ids, positions, loss_mask, **kwargs)
    expected.loss.backward()
    out = split(input_ids, positions, loss_mask, **kwargs)
    out.loss.backward()
    for what in ("lm_loss", "mtp_loss", "balance_loss", "loss", "logits", "mtp_logits"):
        actual = getattr(out, what)
        assert actual is not None and not isinstance(actual, torch.distributed.tensor.DTensor), what
        assert_close_named(actual.detach(), getattr(expected, what).detach(), what)
    for name in ("embed", "head"):
        grad = getattr(split, name).weight.grad
        assert_close_named(grad.to_local(), getattr(reference, name).weight.grad[own], f"{name} gradient (this rank's rows)")
    # replicated parameters the loss reaches only through the hidden rows: the head's hidden gradient
    # must be the sum of both vocabulary halves' parts
    for name in ("norm.weight", "hc_head_fn", "mtp.0.norm.weight", "mtp.0.e_proj.weight", "layers.0.attn.wkv.weight"):
        assert_close_named(split.get_parameter(name).grad, reference.get_parameter(name).grad, f"gradient of {name}")


def _loss_parity(rank: int, mesh) -> None:
    import torch.nn.functional as F
    from torch.distributed.tensor import Shard, distribute_tensor

    from trex_cli.models.deepseek_v4 import vocab_parallel

    generator = torch.Generator().manual_seed(11)
    tokens, width, vocab = 37, 16, 64
    hidden = torch.randn(tokens, width, generator=generator, requires_grad=True)
    weight = torch.randn(vocab, width, generator=generator, requires_grad=True)
    targets = torch.randint(0, vocab, (tokens,), generator=generator)
    targets[::5] = -100  # ignored, on both halves' rows
    expected = F.cross_entropy(hidden @ weight.t(), targets, ignore_index=-100, reduction="sum")
    expected.backward()

    split_hidden = hidden.detach().clone().requires_grad_(True)
    split_weight = torch.nn.Parameter(distribute_tensor(weight.detach(), mesh, [Shard(0)]))
    # a budget of 3 rows of 32 columns: 13 token blocks, the last one short
    original = vocab_parallel._LOGITS_BUDGET_ELEMENTS
    vocab_parallel._LOGITS_BUDGET_ELEMENTS = 3 * vocab // WORLD
    try:
        assert vocab_parallel.block_rows(vocab // WORLD) == 3
        total = vocab_parallel.linear_cross_entropy_sum(split_hidden, split_weight, targets)
    finally:
        vocab_parallel._LOGITS_BUDGET_ELEMENTS = original
    (2.5 * total).backward()
    assert_close_named(total.detach(), expected.detach(), "summed loss")
    assert_close_named(split_hidden.grad, 2.5 * hidden.grad, "hidden gradient")
    rows = vocab // WORLD
    assert_close_named(split_weight.grad.to_local(), 2.5 * weight.grad[rank * rows : (rank + 1) * rows], "weight gradient rows")
    with torch.no_grad():  # evaluation: the same loss, no gradient buffers
        assert_close_named(vocab_parallel.linear_cross_entropy_sum(split_hidden, split_weight, targets), expected.detach(), "no-grad loss")


def _uneven_vocabulary_refused(mesh) -> None:
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
    from trex_cli.train.parallelize import apply_vocabulary_parallel

    config = dataclasses.replace(get_flavor("tiny"), vocab_size=511)
    with torch.device("meta"):
        model = DeepseekV4ForCausalLM(config)
    with pytest.raises(ValueError, match=r"tp = 2 must divide vocab_size \(511\).*pad the vocabulary"):
        apply_vocabulary_parallel(model, mesh)


def _rank(rank: int, port: int) -> None:
    with gloo_rank(rank, WORLD, port):
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("tp",))
        _loss_parity(rank, mesh)
        _model_parity(rank, mesh)
        _uneven_vocabulary_refused(mesh)


def test_vocabulary_parallel_embedding_head_and_loss_match_one_process():
    import torch.multiprocessing as multiprocessing

    multiprocessing.spawn(_rank, args=(free_port(),), nprocs=WORLD, join=True)


def _checkpointed(stage_folder, names: list[str]) -> dict[str, torch.Tensor]:
    """The whole fp32 tensors `names` of the stage's newest DCP checkpoint, read in this one process."""
    import torch.distributed.checkpoint as dcp

    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM

    with torch.device("meta"):
        specs = DeepseekV4ForCausalLM(get_flavor("tiny")).state_dict()
    state = {name: torch.empty_like(specs[name], device="cpu") for name in names}
    newest = max((stage_folder / "checkpoints").iterdir(), key=lambda path: int(path.name.split("-")[1]))
    dcp.load({"model": state}, checkpoint_id=str(newest), no_dist=True)
    return state


@pytest.mark.slow
def test_tp2_resumes_bitwise_and_saves_and_exports_the_one_process_weights(tmp_path):
    from trex_cli.models.deepseek_v4 import state_dict_adapter
    from trex_cli.models.deepseek_v4.config import get_flavor

    data = make_data_folder(tmp_path / "data", "cpt", rows=16, seq_len=32)
    common = ("train", "cpt", "--data", str(data), *TINY_FP32, "--max-steps", "6", "--save-every", "3")
    tp2 = ("--nproc", "2", "--set", "train.parallel.tp=2")
    run_trex(*common, "--run-dir", str(tmp_path / "single"))
    run_trex(*common, *tp2, "--run-dir", str(tmp_path / "straight"))
    single, straight = tmp_path / "single" / "train" / "cpt", tmp_path / "straight" / "train" / "cpt"

    # the straight run's folder as it was right after its step-3 checkpoint, then the same command again
    shutil.copytree(tmp_path / "straight", tmp_path / "resumed")
    stage = tmp_path / "resumed" / "train" / "cpt"
    (stage / "manifest.json").unlink()
    shutil.rmtree(stage / "checkpoints" / "step-6")
    shutil.rmtree(stage / "hf")
    (stage / "validation.jsonl").unlink(missing_ok=True)
    metrics = stage / "metrics.jsonl"
    metrics.write_text("".join(metrics.read_text().splitlines(keepends=True)[:3]))
    result = run_trex(*common, *tp2, "--run-dir", str(tmp_path / "resumed"))
    assert "resuming from" in result.stdout
    assert len(losses(straight)) == 6 and losses(stage) == losses(straight)  # bitwise

    names = ["embed.weight", "head.weight"]
    reference, saved = _checkpointed(single, names), _checkpointed(stage, names)
    config = get_flavor("tiny")
    exported = state_dict_adapter.load_state_dict(stage / "hf", config, torch.bfloat16)
    for name in names:
        assert saved[name].shape == (config.vocab_size, config.hidden_size)
        assert_close_named(saved[name], reference[name], f"checkpointed {name}")
        assert torch.equal(exported[name], saved[name].to(torch.bfloat16)), f"exported {name}"


def test_the_gradient_norm_counts_each_piece_of_a_tp_and_fsdp_split_weight_once():
    """`global_grad_norm` divides each rank's squares by the ranks holding the same piece: a parameter's
    distinct pieces must be its whole size over its local size (here every split is even)."""
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.train.config import ParallelSection
    from trex_cli.train.meta_init import build_rank_model
    from trex_cli.train.optim import _distinct_shards
    from trex_cli.train.parallel_dims import ParallelDims
    from trex_cli.train.parallelize import apply_fsdp

    config = get_flavor("tiny")
    parallel = ParallelSection(tp=2)
    dims = ParallelDims.from_section(parallel, 4)  # dp_shard 2 x tp 2
    with fake_rank(3, dims) as distributed:
        model = build_rank_model(config, distributed, parallel)
        apply_fsdp(model, distributed, torch.float32, offload_optimizer=False, expert_parallel=False)
        pieces = {}
        for name, parameter in model.named_parameters():
            local = parameter.to_local().numel()
            if local and parameter.numel() % local == 0 and parameter.shape[0] % 2 == 0:
                pieces[name] = (_distinct_shards(parameter), parameter.numel() // local)
    for name in ("embed.weight", "head.weight", "layers.0.attn.wq_b.weight", "layers.0.attn.wo_b.weight"):
        assert pieces[name] == (4, 4), f"{name}: counted {pieces[name][0]} pieces, holds 1/{pieces[name][1]}"
    assert pieces["layers.0.attn.wkv.weight"] == (2, 2)  # replicated over TP, split by FSDP alone
    wrong = {name: counts for name, counts in pieces.items() if counts[0] != counts[1]}
    assert not wrong, wrong
