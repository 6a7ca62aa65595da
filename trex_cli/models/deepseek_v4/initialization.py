"""The random init of a DeepSeek-V4 model, the same whatever the layout.

Each tensor's values come from a generator of its own, seeded by (seed, the tensor's name in the full
model), and a routed-expert stack [E, ...] is drawn one expert at a time, each expert from (seed, name,
expert index). So the values do not depend on which process holds which block of a tensor, nor on the
order tensors are visited: a one-process model, any multi-rank layout (pipeline stages, TP / EP / ETP
and FSDP shards of a model built on the meta device) and a model of either kind re-initialized later
all start from the same weights, and each rank computes only what it holds. A dense tensor is drawn in
runs of whole rows, each run from (seed, name, run), and a rank draws only the runs its rows fall in; an
expert stack is drawn only for the experts in the rank's block, so no rank ever draws a whole stack.

The rule (`DeepseekV4ForCausalLM`'s init): normal(0, initializer_range) for matrices; ones for norm
weights and the mHC `*_scale`; zeros for `*_base`, `ape`, `attn_sink` and the gates' routing bias; a
hashed gate's `tid2eid` table gives every token `topk` distinct experts drawn uniformly (balanced in
expectation). Buffers computed from the config (the RoPE frequencies) are the model's own
`init_computed_buffers`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import torch
from torch import nn
from torch.distributed.tensor import DTensor
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

from trex_cli.models.deepseek_v4.config import DeepseekV4Config
from trex_cli.models.deepseek_v4.state_dict_adapter import EXPERT_STACKED

Block = tuple[slice, ...]  # one slice per dimension of a full tensor


def owned_block(tensor: torch.Tensor) -> Block:
    """The block of the full tensor this rank holds: a DTensor's local shard, or all of a plain tensor."""
    if isinstance(tensor, DTensor):
        shape, offset = compute_local_shape_and_global_offset(tensor.shape, tensor.device_mesh, tensor.placements)
    else:
        shape, offset = tuple(tensor.shape), (0,) * tensor.dim()
    return tuple(slice(start, start + size) for start, size in zip(offset, shape, strict=True))


def local_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """What this rank stores of `tensor`: a DTensor's local shard, or the tensor itself."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def checkpointed_tensors(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor) of every parameter and persistent buffer: what a checkpoint holds and an init fills;
    the non-persistent buffers are computed (`init_computed_buffers`)."""
    computed = set()
    for prefix, module in model.named_modules():
        for buffer in module._non_persistent_buffers_set:
            computed.add(f"{prefix}.{buffer}" if prefix else buffer)
    buffers = [(name, buffer) for name, buffer in model.named_buffers() if name not in computed]
    return list(model.named_parameters()) + buffers


def tensor_generator(seed: int, name: str, expert: int | None = None) -> torch.Generator:
    """A CPU generator seeded by (seed, name[, expert]) through a hash: stable across processes and runs
    (unlike Python's `hash`), and distinct for every tensor and expert."""
    key = f"{seed}/{name}" if expert is None else f"{seed}/{name}/{expert}"
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little"))


def init_rule(name: str, dims: int) -> str:
    """How the tensor `name` (with `dims` dimensions) starts: "zeros", "ones", "normal" or "hash_table"."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "tid2eid":
        return "hash_table"
    if leaf.endswith("_base") or leaf in ("ape", "attn_sink", "bias"):
        return "zeros"
    if leaf.endswith("_scale") or (leaf == "weight" and dims == 1):
        return "ones"
    return "normal"


def initial_block(config: DeepseekV4Config, name: str, shape: tuple[int, ...], seed: int, block: Block | None = None) -> torch.Tensor:
    """The block `block` (default: all) of the full tensor `name` of shape `shape` at init, on the CPU."""
    block = block if block is not None else tuple(slice(0, size) for size in shape)
    size = tuple(piece.stop - piece.start for piece in block)
    rule = init_rule(name, len(shape))
    if rule == "zeros":
        return torch.zeros(size)
    if rule == "ones":
        return torch.ones(size)
    if 0 in size:
        return torch.empty(size)
    if rule == "hash_table":
        vocab, topk = shape
        draws = torch.rand(vocab, config.n_routed_experts, generator=tensor_generator(seed, name))
        return draws.argsort(dim=-1)[:, :topk][block]
    std = config.initializer_range
    if EXPERT_STACKED.match(name):
        experts, rest = block[0], block[1:]
        values = torch.empty(size)
        for row, expert in enumerate(range(experts.start, experts.stop)):
            drawn = torch.randn(shape[1:], generator=tensor_generator(seed, name, expert)) * std
            values[row] = drawn[rest]
        return values
    return _dense_normal_block(name, shape, seed, block) * std


ELEMENTS_PER_DRAW = 1 << 22  # a dense tensor is drawn in runs of whole rows of about this many values (16 MB)


def _dense_normal_block(name: str, shape: tuple[int, ...], seed: int, block: Block) -> torch.Tensor:
    """Standard normal values of the block `block` of the dense tensor `name`. The tensor is drawn in runs of
    whole rows (first dimension), each run from its own generator (seed, name, run), so a rank draws only the
    runs its rows fall in: at most one run beyond its block, never the whole tensor (V4-Flash's embedding is
    2 GB in fp32)."""
    if len(shape) == 0:
        return torch.randn((), generator=tensor_generator(seed, name))
    rows, row_size = shape[0], max(1, int(torch.Size(shape[1:]).numel()))
    per_run = max(1, ELEMENTS_PER_DRAW // row_size)
    first, stop = block[0].start, block[0].stop
    pieces = []
    for run in range(first // per_run, -(-stop // per_run)):
        run_start = run * per_run
        run_rows = min(per_run, rows - run_start)
        drawn = torch.randn((run_rows, *shape[1:]), generator=tensor_generator(seed, f"{name}#rows{run}"))
        pieces.append(drawn[max(first, run_start) - run_start : min(stop, run_start + run_rows) - run_start])
    return torch.cat(pieces)[(slice(None), *block[1:])]


@torch.no_grad()
def initialize(model: nn.Module, seed: int, include: Callable[[str], bool] | None = None) -> None:
    """Fill, in place, this process's block of every parameter and persistent buffer of `model` (a whole
    model, or one rank's stages and shards of it, with storage) with its init under `seed`, then the
    computed buffers. `include`: only the tensors whose full-model name it accepts."""
    config = model.config
    for name, tensor in checkpointed_tensors(model):
        if include is not None and not include(name):
            continue
        if tensor.device.type == "meta":
            raise ValueError(f"{name} has no storage (meta device): give the model storage first (`to_empty`)")
        local = local_tensor(tensor)
        local.copy_(initial_block(config, name, tuple(tensor.shape), seed, owned_block(tensor)))
    model.init_computed_buffers()
