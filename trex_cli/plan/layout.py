"""A parallel layout and the rules that make it valid.

Megatron-Core (and MindSpeed-LLM on it) folds two grids onto the same ranks ("parallel folding"):
attention and the shared expert use TP x CP x DP x PP = world; the routed experts use
expert-TP x EP x expert-DP x PP = world. Layer slots (real layers plus no-op layers) are split
evenly over pipeline stages; with interleaving (VPP) each stage holds several virtual stages of
`vpp_layers` slots each, assigned round-robin. No-op layers pad the slot count and balance the
stages that also hold the embedding (first) and the output head and MTP (last).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from trex_cli.plan.parameters import ModelShape

Recompute = Literal["none", "selective", "full"]


@dataclasses.dataclass(frozen=True)
class PlannedLayout:
    """A layout the planner evaluates: the Megatron parallel sizes (TP, PP, VPP, EP, expert-TP, CP)
    with the micro-batch and memory switches that decide its memory and step time. The native
    trainer's mesh sizes are `trex_cli.train.distributed.Layout`, a different thing."""

    tp: int = 1
    pp: int = 1
    vpp_layers: int = 0  # slots per virtual pipeline stage; 0 = no interleaving
    ep: int = 1
    etp: int = 1
    cp: int = 1
    micro_batch: int = 1
    recompute: Recompute = "full"
    optimizer_swap: bool = False
    noop_layers: tuple[int, ...] = ()
    sequence_parallel: bool = True
    distributed_optimizer: bool = True

    def describe(self) -> str:
        vpp = f" VPP{self.vpp_layers}" if self.vpp_layers else ""
        swap = " swap" if self.optimizer_swap else ""
        noop = f" noop{','.join(map(str, self.noop_layers))}" if self.noop_layers else ""
        return (f"TP{self.tp} PP{self.pp}{vpp} EP{self.ep} ETP{self.etp} CP{self.cp} mb{self.micro_batch} "
                f"rc-{self.recompute}{swap}{noop}")


@dataclasses.dataclass(frozen=True)
class Job:
    """What is being trained: the model, the world size, the sequence and the global batch."""

    shape: ModelShape
    world: int
    seq_len: int
    global_batch: int


def data_parallel(layout: PlannedLayout, world: int) -> int:
    return world // (layout.tp * layout.pp * layout.cp)


def expert_data_parallel(layout: PlannedLayout, world: int) -> int:
    return world // (layout.etp * layout.ep * layout.pp)


def microbatches(layout: PlannedLayout, job: Job) -> int:
    return job.global_batch // (layout.micro_batch * data_parallel(layout, job.world))


def slot_count(layout: PlannedLayout, shape: ModelShape) -> int:
    return shape.num_layers + len(layout.noop_layers)


def virtual_chunks(layout: PlannedLayout, shape: ModelShape) -> int:
    """Virtual stages per pipeline stage (1 without interleaving)."""
    if not layout.vpp_layers:
        return 1
    return slot_count(layout, shape) // (layout.pp * layout.vpp_layers)


def default_noop_layers(num_layers: int, pp: int, vpp_layers: int) -> tuple[int, ...]:
    """Pad the layer count to a multiple of the pipeline granularity. The last stage also runs the
    output head and MTP, so most padding goes there (the end of the last chunk); when three or more
    slots are padded, a third of them goes to the end of the first chunk, which holds the embedding.
    This reproduces T-Rex's placements: Pro (61 layers, PP8, VPP 4) -> 3, 62, 63; Flash (43, PP4) -> 43."""
    unit = pp * (vpp_layers or 1)
    slots = -(-num_layers // unit) * unit
    extra = slots - num_layers
    first_chunk = vpp_layers or slots // pp
    at_start = extra // 3
    start = [first_chunk - 1 - i for i in range(at_start)][::-1]
    end = list(range(slots - (extra - at_start), slots))
    return tuple(sorted(start + end))


def stage_slots(layout: PlannedLayout, shape: ModelShape) -> list[list[list[int]]]:
    """For each pipeline stage, its virtual chunks in execution order, each a list of slot indices."""
    slots = slot_count(layout, shape)
    chunk = layout.vpp_layers or slots // layout.pp
    chunks = [list(range(start, start + chunk)) for start in range(0, slots, chunk)]
    stages: list[list[list[int]]] = [[] for _ in range(layout.pp)]
    for index, slot_list in enumerate(chunks):
        stages[index % layout.pp].append(slot_list)
    return stages


def real_layer_of_slot(layout: PlannedLayout, shape: ModelShape) -> dict[int, int]:
    """slot index -> real layer index (no-op slots are absent)."""
    noop = set(layout.noop_layers)
    mapping, layer = {}, 0
    for slot in range(slot_count(layout, shape)):
        if slot not in noop:
            mapping[slot] = layer
            layer += 1
    return mapping


def validate(layout: PlannedLayout, job: Job, ranks_per_node: int | None = None) -> list[str]:
    """Every rule the layout breaks, each as a sentence that names the fix (empty when valid)."""
    shape, world = job.shape, job.world
    problems: list[str] = []
    for name in ("tp", "pp", "ep", "etp", "cp", "micro_batch"):
        if getattr(layout, name) < 1:
            problems.append(f"{name} must be at least 1, got {getattr(layout, name)}")
    if problems:
        return problems
    model_grid = layout.tp * layout.pp * layout.cp
    if world % model_grid:
        problems.append(f"world {world} is not divisible by TP x PP x CP = {layout.tp}x{layout.pp}x{layout.cp} "
                        f"= {model_grid}: choose sizes whose product divides {world}")
    expert_grid = layout.etp * layout.ep * layout.pp
    if world % expert_grid:
        problems.append(f"world {world} is not divisible by ETP x EP x PP = {layout.etp}x{layout.ep}x{layout.pp} "
                        f"= {expert_grid}: the expert grid must tile the ranks too")
    if shape.num_experts % layout.ep:
        divisors = [d for d in range(1, shape.num_experts + 1) if shape.num_experts % d == 0 and d <= world]
        problems.append(f"{shape.num_experts} experts cannot be split over EP {layout.ep}: EP must divide the "
                        f"expert count (e.g. {', '.join(map(str, divisors[-6:]))})")
    if shape.num_heads % layout.tp:
        problems.append(f"{shape.num_heads} attention heads are not divisible by TP {layout.tp}")
    if shape.o_groups % layout.tp:
        problems.append(f"o_groups {shape.o_groups} is not divisible by TP {layout.tp} (the grouped output "
                        "projection is split by group)")
    if shape.expert_intermediate % layout.etp:
        problems.append(f"moe_intermediate_size {shape.expert_intermediate} is not divisible by ETP {layout.etp}")
    slots = slot_count(layout, shape)
    bad_noop = [i for i in layout.noop_layers if not 0 <= i < slots]
    if bad_noop or len(set(layout.noop_layers)) != len(layout.noop_layers):
        problems.append(f"no-op layers {list(layout.noop_layers)} must be distinct slots in 0..{slots - 1}")
    if slots % layout.pp:
        problems.append(f"{shape.num_layers} layers + {len(layout.noop_layers)} no-op layers = {slots} slots are "
                        f"not divisible by PP {layout.pp}; add no-op layers, e.g. "
                        f"{list(default_noop_layers(shape.num_layers, layout.pp, layout.vpp_layers))}")
    elif layout.vpp_layers:
        per_stage = slots // layout.pp
        if per_stage % layout.vpp_layers:
            problems.append(f"{per_stage} slots per pipeline stage are not divisible by {layout.vpp_layers} "
                            "layers per virtual stage")
        elif per_stage // layout.vpp_layers < 2:
            problems.append(f"VPP {layout.vpp_layers} layers per virtual stage leaves one virtual stage per "
                            "pipeline stage: use 0 (no interleaving) or fewer layers per virtual stage")
        if layout.pp < 2:
            problems.append("interleaving (VPP) needs PP of at least 2")
    if not problems:
        dp = data_parallel(layout, world)
        if job.global_batch % (layout.micro_batch * dp):
            problems.append(f"global batch {job.global_batch} is not divisible by micro-batch x DP = "
                            f"{layout.micro_batch}x{dp} = {layout.micro_batch * dp}")
        elif layout.vpp_layers and microbatches(layout, job) % layout.pp:
            problems.append(f"the interleaved schedule needs the {microbatches(layout, job)} micro-batches per "
                            f"step to be a multiple of PP {layout.pp}")
    split = layout.cp * (2 if layout.cp > 1 else 1) * (layout.tp if layout.sequence_parallel else 1)
    if job.seq_len % split:
        problems.append(f"sequence {job.seq_len} is not divisible by {split} (2 x CP x TP with sequence parallel)")
    if ranks_per_node and ranks_per_node % layout.tp and layout.tp > 1:
        problems.append(f"TP {layout.tp} does not divide the {ranks_per_node} ranks of a node (TP must stay "
                        "inside a node)")
    return problems


ENGINES = ("mindspeed", "native")


def engine_problems(layout: PlannedLayout, job: Job, engine: str) -> list[str]:
    """What keeps a trex engine from running the layout. MindSpeed-LLM (Ascend) runs every Megatron
    layout. trex's native trainer runs the rules of its `ParallelDims` (trex_cli/train/parallel_dims.py):
    context parallel, and experts folded into the data, context and tensor ranks of a pipeline stage (EP x
    expert-TP must divide those ranks, as in Megatron's expert model parallel; expert-TP is 1 or TP)."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: use one of {', '.join(ENGINES)}")
    if engine == "mindspeed":
        return []
    problems = []
    if layout.etp not in (1, layout.tp):
        problems.append(f"ETP {layout.etp}: trex's native trainer runs expert-TP 1 or TP ({layout.tp})")
    stage_ranks = job.world // layout.pp
    if stage_ranks and stage_ranks % (layout.ep * layout.etp):
        problems.append(f"EP {layout.ep} x ETP {layout.etp} does not divide the {stage_ranks} ranks of a pipeline "
                        "stage that trex's native trainer folds experts into")
    return problems


def check(layout: PlannedLayout, job: Job, ranks_per_node: int | None = None) -> None:
    """Raise ValueError listing every broken rule."""
    problems = validate(layout, job, ranks_per_node)
    if problems:
        raise ValueError(f"layout {layout.describe()} on {job.world} ranks is invalid: " + "; ".join(problems))
