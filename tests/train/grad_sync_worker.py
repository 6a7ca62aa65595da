"""One rank of the gradient-sync count test (run by torchrun from test_train_grad_sync.py): train the
tiny model (fp32) for two steps of several micro-batches under `[train.parallel]` settings given as
key=value arguments, counting FSDP's real reduce-scatter calls; write per step the calls and the FSDP
units over more than one rank that got a gradient to <out>/rank<r>.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist


def main(data_folder: str, out: str, global_batch: int, *settings: str) -> None:
    from torch.distributed.fsdp import FSDPModule
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.train.config import ParallelSection, StageSchedule, TrainSection
    from trex_cli.train.data import TrainData
    from trex_cli.train.distributed import init_distributed
    from trex_cli.train.trainer import Engine, build_model

    values = dict(setting.split("=", 1) for setting in settings)
    parallel = ParallelSection(**{k: (v if not v.lstrip("-").isdigit() else int(v)) for k, v in values.items()})
    distributed = init_distributed(parallel)
    data = TrainData(Path(data_folder))
    schedule = StageSchedule(lr=1e-3, warmup_steps=1, max_steps=10, global_batch_size=global_batch, micro_batch_size=1)
    train = TrainSection(dtype="fp32", parallel=parallel)
    micro_batches = global_batch // distributed.dims.dp
    engine = Engine(build_model(get_flavor("tiny"), None, seed=0), train, schedule, distributed, data.seq_len, micro_batches)
    units = [m for m in engine.model.modules() if isinstance(m, FSDPModule)]
    # each unit's own parameters: those of no unit nested inside it (one FSDP group, one reduce-scatter)
    owned = []
    for unit in units:
        inner = {id(p) for other in units if other is not unit and other in set(unit.modules()) for p in other.parameters()}
        params = [p for p in unit.parameters() if id(p) not in inner]
        # a unit sharded over one rank (the experts' unit when ep takes every data rank) has nothing to reduce
        group = unit._get_fsdp_state()._fsdp_param_group  # FSDP2 internals: the unit's shard group size
        if params and group is not None and group.mesh_info.shard_mesh_size > 1:
            owned.append(params)

    calls = []
    real_reduce_scatter = dist.reduce_scatter_single

    def counting_reduce_scatter(*args, **kwargs):
        calls.append(1)
        return real_reduce_scatter(*args, **kwargs)

    dist.reduce_scatter_single = counting_reduce_scatter  # what FSDP2's collectives call at run time
    steps = []
    for step in range(2):
        calls.clear()
        batches = data.micro_batches(step, global_batch, 1, distributed.dp_rank, distributed.dims.dp, 0)
        assert len(batches) == micro_batches
        # units with a gradient, read before the optimizer step (the step clears them at its end)
        seen = []
        hook = register_optimizer_step_pre_hook(
            lambda *_, seen=seen: seen.append(sum(any(p.grad is not None for p in params) for params in owned))
        )
        result = engine.step(batches)
        hook.remove()
        steps.append({"reduce_scatters": len(calls), "units_with_grad": seen[0], "micro_batches": micro_batches,
                      "loss": result.loss})
    Path(out, f"rank{distributed.rank}.json").write_text(json.dumps(steps))
    distributed.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:])
