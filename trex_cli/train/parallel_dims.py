"""The parallel layout of a training job: its sizes, the checks that they tile the world, the two device
meshes over the same ranks, and the arithmetic that follows from them (replicas, gradient-norm copies,
optimizer shards).

Two grids fold onto the same ranks, as in Megatron-Core's expert model parallel ("parallel folding"):

- the dense grid `(pp, dp_replicate, dp_shard, cp, tp)`, row-major with tp fastest: attention, the
  shared expert, embeddings and head. Ranks that differ only in `tp` hold the same tokens;
- the expert grid `(pp, edp, ep, etp)`, the same ranks of each pipeline stage (dp x cp x tp of them)
  regrouped with etp fastest: the routed experts are sliced over `ep`, split over `etp`, and sharded or
  replicated over the expert-data-parallel `edp` ranks that hold the same experts.

So EP does not have to divide DP: within a pipeline stage it may take tensor ranks too (the paper's Pro
layout, TP2 PP8 EP64 on 512 ranks, gives each stage 32 DP x 2 TP = 64 ranks, one expert group). Tensor
ranks hold the same tokens, so under EP the MoE layer hands each of them a distinct part of the tokens
before the dispatch and gathers the outputs after it (what sequence parallel would do for the whole
block): then every rank of a stage routes different tokens, whichever expert group it falls in, and the
expert gradients sum over `edp`. `experts_split_tokens_over_tp` says when. Under sequence parallel
(`sequence_parallel`, `parallelize.apply_sequence_parallel`) the tensor ranks already hold different
tokens there, so the split is not made again; the sequence length must then split over tp x cp
(`check_sequence_length`).
"""

from __future__ import annotations

import dataclasses

import torch
from torch.distributed.device_mesh import DeviceMesh

DENSE_DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "tp")
EXPERT_DIMS = ("pp", "edp", "ep", "etp")


@dataclasses.dataclass(frozen=True)
class ParallelDims:
    """Sizes of every parallel dimension; `resolve` checks them against the world size."""

    pp: int = 1
    dp_replicate: int = 1
    dp_shard: int = 1
    cp: int = 1
    tp: int = 1
    ep: int = 1
    etp: int = 1
    # Megatron's sequence parallel as asked ([train.parallel] sequence_parallel); `sequence_parallel_on`
    # says whether it applies (tp > 1)
    sequence_parallel: bool = False

    # ---- sizes that follow ----------------------------------------------------------------------

    @property
    def dp(self) -> int:
        """Data-parallel ranks: ranks that read different rows of the global batch."""
        return self.dp_replicate * self.dp_shard

    @property
    def world(self) -> int:
        return self.pp * self.dp * self.cp * self.tp

    @property
    def ranks_per_stage(self) -> int:
        """Ranks of one pipeline stage (every dense and expert piece of the stage lies on them; the
        gradient norm divides each piece's square by the ranks of a stage holding it, then sums over
        the world)."""
        return self.dp * self.cp * self.tp

    @property
    def edp(self) -> int:
        """Expert-data-parallel ranks: ranks of one stage that hold the same expert slice."""
        return self.ranks_per_stage // (self.ep * self.etp)

    @property
    def dense_shard_group(self) -> int:
        """Ranks a dense parameter's optimizer state is sharded over (DP x CP: the ranks that hold the
        same TP shard of it)."""
        return self.dp * self.cp

    @property
    def expert_shard_group(self) -> int:
        """Ranks a routed expert's optimizer state is sharded over (the expert-data-parallel ranks)."""
        return self.edp

    @property
    def data_replicas(self) -> int:
        """Ranks that read the same rows of the same micro-batches: the tensor ranks of a data-parallel
        rank and its pipeline stages (context-parallel ranks read different tokens of them)."""
        return self.tp * self.pp

    @property
    def sequence_parallel_on(self) -> bool:
        """True when sequence parallel is asked for and there are tensor ranks to split the tokens over."""
        return self.sequence_parallel and self.tp > 1

    @property
    def experts_split_tokens_over_tp(self) -> bool:
        """True under EP with TP and expert-TP 1 without sequence parallel: the tensor ranks hold the same
        tokens, so the MoE layer splits them over tp before dispatch (each token routed once) and gathers
        them after it. Under sequence parallel each tensor rank already holds its own tokens there."""
        return self.ep > 1 and self.tp > 1 and self.etp == 1 and not self.sequence_parallel_on

    @property
    def routing_replicas(self) -> int:
        """Ranks of a pipeline stage that route the same tokens: the tensor ranks, unless sequence
        parallel gives each its own tokens (`ExpertBiasUpdate` divides the summed counts by this)."""
        return 1 if self.sequence_parallel_on else self.tp

    def check_sequence_length(self, seq_len: int, where: str = "[train.parallel]") -> None:
        """Sequence parallel splits every row's tokens (under context parallel: every chunk's) evenly
        over the tensor ranks: the sequence length must be a multiple of tp x cp."""
        if not self.sequence_parallel_on:
            return
        parts = self.tp * self.cp
        if seq_len % parts:
            split = f"tp x cp = {self.tp} x {self.cp} = {parts}" if self.cp > 1 else f"tp = {self.tp}"
            raise ValueError(
                f"{where} sequence_parallel = true splits each row's {seq_len} positions (the data's seq_len) over "
                f"{split} ranks, which does not divide {seq_len}; rebuild the data with a seq_len that is a "
                f"multiple of {parts}, or set {where} sequence_parallel = false"
            )

    # ---- checks ---------------------------------------------------------------------------------

    @classmethod
    def resolve(cls, world_size: int, *, pp: int = 1, dp_replicate: int = 1, dp_shard: int = -1, cp: int = 1,
                tp: int = 1, ep: int = 1, etp: int = 1, sequence_parallel: bool = False,
                where: str = "[train.parallel]") -> ParallelDims:
        """The layout for `world_size` ranks; `dp_shard = -1` takes every rank the other sizes leave.
        Every error names the fields and the fix."""
        sizes = {"pp": pp, "dp_replicate": dp_replicate, "cp": cp, "tp": tp, "ep": ep, "etp": etp}
        for key, value in sizes.items():
            if value < 1:
                raise ValueError(f"{where} {key} = {value}: must be 1 or more")
        if dp_shard != -1 and dp_shard < 1:
            raise ValueError(f"{where} dp_shard = {dp_shard}: must be 1 or more, or -1 for every rank left over")
        fixed = pp * dp_replicate * cp * tp
        if world_size % fixed:
            raise ValueError(
                f"{where} pp x dp_replicate x cp x tp = {pp} x {dp_replicate} x {cp} x {tp} = {fixed} does not "
                f"divide the {world_size} ranks; change the layout or --nproc"
            )
        dims = cls(
            pp, dp_replicate, world_size // fixed if dp_shard == -1 else dp_shard, cp, tp, ep, etp, bool(sequence_parallel)
        )
        if dims.world != world_size:
            raise ValueError(
                f"{where} pp {pp} x dp_replicate {dp_replicate} x dp_shard {dims.dp_shard} x cp {cp} x tp {tp} = "
                f"{dims.world} ranks, but {world_size} are running; set dp_shard = -1 to use the rest, or change "
                "--nproc"
            )
        if etp != 1 and etp != tp:
            raise ValueError(f"{where} etp = {etp}: expert-tensor parallel is 1 or the tensor-parallel size ({tp})")
        if dims.ranks_per_stage % (ep * etp):
            raise ValueError(
                f"{where} ep x etp = {ep} x {etp} = {ep * etp} must divide the ranks of a pipeline stage, "
                f"dp_replicate x dp_shard x cp x tp = {dims.ranks_per_stage} (experts fold into the data, context "
                "and tensor ranks); change ep"
            )
        return dims

    @classmethod
    def from_section(cls, parallel, world_size: int) -> ParallelDims:
        """The layout a `[train.parallel]` table (`ParallelSection`) asks for on `world_size` ranks."""
        interleaved = parallel.pp_schedule == "Interleaved1F1B"
        if parallel.pp_virtual_stages < 1 or (parallel.pp_virtual_stages > 1) != interleaved:
            raise ValueError(
                f"[train.parallel] pp_virtual_stages = {parallel.pp_virtual_stages} with pp_schedule = "
                f"{parallel.pp_schedule!r}: interleaved 1F1B needs pp_virtual_stages >= 2, the other schedules "
                "take 1; set both (e.g. pp_schedule = \"Interleaved1F1B\", pp_virtual_stages = 2)"
            )
        return cls.resolve(
            world_size, pp=parallel.pp, dp_replicate=parallel.dp_replicate, dp_shard=parallel.dp_shard,
            cp=parallel.cp, tp=parallel.tp, ep=parallel.ep, etp=parallel.etp,
            sequence_parallel=getattr(parallel, "sequence_parallel", False),
        )

    def check_engine_supports(self) -> None:
        """The native engine runs every layout `resolve` accepts (expert-tensor parallel included, issue
        #21); this stays the one place a dimension it cannot run would be refused before launch."""
        return None

    # ---- ranks and meshes -------------------------------------------------------------------------

    def dense_coordinates(self, rank: int) -> dict[str, int]:
        """This rank's index along each dense dimension."""
        return dict(zip(DENSE_DIMS, _unravel(rank, [getattr(self, d) for d in DENSE_DIMS]), strict=True))

    def expert_coordinates(self, rank: int) -> dict[str, int]:
        """This rank's index along each expert dimension."""
        return dict(zip(EXPERT_DIMS, _unravel(rank, [getattr(self, d) for d in EXPERT_DIMS]), strict=True))

    def build_meshes(self, device_type: str) -> tuple[DeviceMesh, DeviceMesh]:
        """(dense mesh, expert mesh) over the running world; both number the ranks row-major."""
        ranks = torch.arange(self.world)
        dense = DeviceMesh(device_type, ranks.reshape([getattr(self, d) for d in DENSE_DIMS]), mesh_dim_names=DENSE_DIMS)
        expert = DeviceMesh(
            device_type, ranks.reshape([getattr(self, d) for d in EXPERT_DIMS]), mesh_dim_names=EXPERT_DIMS
        )
        return dense, expert


def _unravel(index: int, sizes: list[int]) -> list[int]:
    coordinates = []
    for size in reversed(sizes):
        coordinates.append(index % size)
        index //= size
    return coordinates[::-1]
