"""One rank of the sharded-load memory test (run by torchrun from test_train_sharded_load.py): build
this rank's part of the model on the meta device under `[train.parallel] ep = <ep>` (the rest FSDP),
then load the checkpoint's owned slices; write the RSS growth of the load (peak minus before) and the
largest expert block this rank held to <out>/rank<r>.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch


def rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def main(folder: str, out: str, ep: int) -> None:
    from trex_cli.models.deepseek_v4.config import DeepseekV4Config
    from trex_cli.train.config import ParallelSection
    from trex_cli.train.distributed import init_distributed
    from trex_cli.train.meta_init import build_rank_model
    from trex_cli.train.parallelize import apply_fsdp
    from trex_cli.train.sharded_load import load_owned_shards

    parallel = ParallelSection(ep=ep)
    distributed = init_distributed(parallel)
    config = DeepseekV4Config.from_model_dir(Path(folder))
    model = build_rank_model(config, distributed, parallel)
    if distributed.world_size > 1:
        apply_fsdp(model, distributed, torch.float32, offload_optimizer=False, expert_parallel=ep > 1)
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS (VmHWM) to the current RSS
    before = rss_kib("VmRSS")
    load_owned_shards(model, folder, distributed.device)
    peak = rss_kib("VmHWM")
    expert_rows = max(
        (p.to_local() if hasattr(p, "to_local") else p).shape[0]
        for name, p in model.named_parameters() if ".ffn.experts." in name
    )
    result = {"growth_kib": peak - before, "expert_rows": expert_rows, "experts": config.n_routed_experts}
    Path(out, f"rank{distributed.rank}.json").write_text(json.dumps(result))
    distributed.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
