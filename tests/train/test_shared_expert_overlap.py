"""The shared expert runs while the expert-parallel dispatch is in flight, under sequence parallel too: the
early call goes through the module, so its own hooks (sequence parallel's gather of the tensor ranks'
tokens) run there, once, and the model's later call on the same tokens returns that result without
running anything again. One gloo rank, the styles of a tensor-parallel region of size 1 (their hooks run
all the same); the numbers of the split layouts are the layout tests' (`tp2_dp2_ep4_sp`)."""

from __future__ import annotations

import torch
from conftest import free_port, gloo_rank
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    parallelize_module,
)

from trex_cli.models.deepseek_v4.config import get_flavor
from trex_cli.models.deepseek_v4.model import Experts, SharedExpert
from trex_cli.train.expert_parallel import ExpertParallelExperts, SharedExpertOverlap


def test_the_shared_expert_runs_once_during_the_dispatch_with_its_hooks():
    with gloo_rank(0, 1, free_port()):
        config = get_flavor("tiny")
        mesh = init_device_mesh("cpu", (1, 1), mesh_dim_names=("ep", "tp"))
        torch.manual_seed(0)
        shared = SharedExpert(config)
        reference = SharedExpert(config)
        reference.load_state_dict(shared.state_dict())
        parallelize_module(shared, mesh["tp"], PrepareModuleInput(
            input_layouts=(Shard(0),), desired_input_layouts=(Replicate(),), use_local_output=True,
        ))
        parallelize_module(shared, mesh["tp"], {"w1": ColwiseParallel(), "w3": ColwiseParallel(),
                                                "w2": RowwiseParallel(output_layouts=Shard(0))})
        events: list[str] = []
        shared.register_forward_pre_hook(lambda module, args: events.append("shared"))
        overlap = SharedExpertOverlap(shared)
        experts = ExpertParallelExperts(Experts(config), mesh["ep"], overlap, sequence_parallel=True)
        experts.__dict__["_compute"].register_forward_pre_hook(lambda module, args: events.append("experts"))

        tokens = torch.randn(12, config.hidden_size)
        choices = torch.stack([torch.randperm(config.n_routed_experts)[: config.num_experts_per_tok] for _ in range(12)])
        experts(tokens, choices, torch.rand(12, config.num_experts_per_tok))
        assert events == ["shared", "experts"]  # computed (hooks included) before the experts, during the dispatch
        early = shared.early_result[1]

        assert shared(tokens) is early and events == ["shared", "experts"]  # the model's call: nothing runs again
        torch.testing.assert_close(early, reference(tokens))
        assert shared(tokens) is not early and events[-1] == "shared"  # once only: a second call runs as usual
        assert type(shared).__name__ == "TakesEarlyResultSharedExpert"
        assert set(shared.state_dict()) == set(reference.state_dict())  # names unchanged
