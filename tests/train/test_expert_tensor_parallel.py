"""Expert-tensor parallel on four real gloo ranks (spawned with torch.multiprocessing): the layout of
`dp_shard 2 x tp 2` with `ep 2 x etp 2`, whose expert grid puts the two tensor ranks of a data rank in
one etp group and the two data ranks in one ep group. Each rank routes its data rank's tokens through
the routed experts of one MoE layer, each expert split over etp (w1/w3 by rows, w2 by columns); its
outputs, the gradients of its tokens and router weights, the gathered gradients of the expert weights
and the global gradient norm must be those of the unsplit experts, which every rank also runs on both
data ranks' tokens as the reference."""

from __future__ import annotations

import copy

import torch
from conftest import assert_close_named, free_port, gloo_rank

WORLD = 4
TOKENS = 24


def _inputs(data_rank: int, config):
    """A data rank's tokens, router choices (distinct experts per token, some experts left idle),
    router weights and the probe the loss is taken against."""
    generator = torch.Generator().manual_seed(100 + data_rank)
    tokens = torch.randn(TOKENS, config.hidden_size, generator=generator)
    choices = torch.stack([
        torch.randperm(config.n_routed_experts - 1, generator=generator)[: config.num_experts_per_tok]
        for _ in range(TOKENS)
    ])  # the last expert gets no token: its slices must still take part in every collective
    weights = torch.rand(TOKENS, config.num_experts_per_tok, generator=generator)
    probe = torch.randn(TOKENS, config.hidden_size, generator=generator)
    return tokens, choices, weights, probe


def _rank(rank: int, port: int) -> None:
    with gloo_rank(rank, WORLD, port):
        from torch.distributed.tensor import DTensor, Shard

        from trex_cli.models.deepseek_v4.config import get_flavor
        from trex_cli.models.deepseek_v4.model import Experts
        from trex_cli.train.expert_parallel import ExpertParallelExperts
        from trex_cli.train.optim import global_grad_norm
        from trex_cli.train.parallel_dims import ParallelDims

        config = get_flavor("tiny")
        dims = ParallelDims(dp_shard=2, tp=2, ep=2, etp=2)
        assert (dims.edp, dims.expert_coordinates(rank)["etp"]) == (1, dims.dense_coordinates(rank)["tp"])
        _dense, expert_mesh = dims.build_meshes("cpu")
        data_rank = dims.dense_coordinates(rank)["dp_shard"]

        torch.manual_seed(0)
        reference = Experts(config)
        for weight in reference.parameters():
            torch.nn.init.normal_(weight, std=0.1)
        split = ExpertParallelExperts(
            copy.deepcopy(reference), expert_mesh["ep"], ep_etp_mesh=expert_mesh["ep", "etp"]
        )
        local_experts, inter = config.n_routed_experts // 2, config.moe_intermediate_size // 2
        assert split.w1.to_local().shape == (local_experts, inter, config.hidden_size)
        assert split.w2.to_local().shape == (local_experts, config.hidden_size, inter)
        assert split.w2.placements == (Shard(0), Shard(2))
        for name, weight in reference.named_parameters():
            assert_close_named(getattr(split, name).full_tensor(), weight.detach(), f"{name} gathered")

        # the split experts on this data rank's tokens (the same on both of its tensor ranks)
        tokens, choices, weights, probe = _inputs(data_rank, config)
        tokens.requires_grad_(True)
        weights.requires_grad_(True)
        output = split(tokens, choices, weights)
        (output * probe).sum().backward()

        # the reference: the whole experts on both data ranks' tokens, one loss summed over them
        expected = []
        for other in range(2):
            ref_tokens, ref_choices, ref_weights, ref_probe = _inputs(other, config)
            ref_tokens.requires_grad_(True)
            ref_weights.requires_grad_(True)
            ref_output = reference(ref_tokens, ref_choices, ref_weights)
            (ref_output * ref_probe).sum().backward()
            expected.append((ref_output.detach(), ref_tokens, ref_weights))
        ref_output, ref_tokens, ref_weights = expected[data_rank]
        assert_close_named(output.detach(), ref_output, "output")
        assert_close_named(tokens.grad, ref_tokens.grad, "gradient of the tokens")
        assert_close_named(weights.grad, ref_weights.grad, "gradient of the router weights")
        for name, weight in reference.named_parameters():
            grad = getattr(split, name).grad
            assert isinstance(grad, DTensor) and grad.to_local().shape == getattr(split, name).to_local().shape
            assert_close_named(grad.full_tensor(), weight.grad, f"gradient of {name}")
        # each slice lives on one rank of the stage (edp 1): the norm must count it once
        norm = global_grad_norm(list(split.parameters()), dims.ranks_per_stage)
        expected_norm = torch.cat([w.grad.flatten() for w in reference.parameters()]).norm()
        assert_close_named(norm, expected_norm, "global gradient norm")


def test_expert_tensor_parallel_matches_the_unsplit_experts():
    import torch.multiprocessing as multiprocessing

    multiprocessing.spawn(_rank, args=(free_port(),), nprocs=WORLD, join=True)

