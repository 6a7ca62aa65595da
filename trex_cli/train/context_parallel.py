"""Context parallel: the ranks of a `cp` group split every row's sequence into contiguous chunks.

Each rank computes the queries, the MoE and the losses of its chunk; what the V4 attention reads on the
key side must cover the causal prefix it reaches, so every attention layer fetches it from the group:

- the window keys (one shared KV head): each query sees up to `sliding_window` keys back, which may
  lie in earlier chunks; only those (the halo) are exchanged, point to point with the ranks that hold
  them, not the whole sequence;
- the compressed entries (CSA, HCA and the indexer's keys): each rank pools the windows that end in its
  chunk (a window's first tokens, and with CSA's overlap the window before, come through the same halo)
  and the entries, a ratio (4 or 128) times fewer than the tokens, are gathered in window order; so every
  rank holds the whole sequence's entries, and the indexer's scores at its queries and their top-k are
  those of the unsplit rows.

The gather is autograd-aware: its backward sums the gradient of the whole sequence over the ranks (each
rank's queries contributed to every earlier key) and keeps this rank's chunk, a reduce-scatter.

Losses: every rank reads the whole micro-batch, so the LM and MTP targets are taken from the whole rows
before the split and a chunk's last positions keep theirs. Each rank's LM and MTP losses are over its
chunk's targets and weighted by its share of the global batch's targets, and its sequence-balance and
indexer-KL losses are its share of the rows' (`model.SequenceShard`): the context-parallel ranks add up
like data-parallel ranks, and their gradients are summed over the data x context ranks of FSDP's mesh.

The chunks are contiguous and equal, so later chunks see more compressed entries than earlier ones;
the sliding window, the MoE and the head, most of the work, cost the same on every rank.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from trex_cli.models.deepseek_v4.model import SequenceShard


class _GatherSequence(torch.autograd.Function):
    """Forward: every rank's chunk [B, chunk, ...] concatenated along dim 1 in rank order. Backward:
    the gradient of the whole sequence summed over the ranks, this rank's chunk of it (reduce-scatter;
    an all-reduce then the chunk on gloo, which has no reduce-scatter)."""

    @staticmethod
    def forward(ctx, chunk: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        size = dist.get_world_size(group)
        leading = chunk.movedim(1, 0).contiguous()  # the collectives concatenate along dim 0
        gathered = leading.new_empty((size * leading.shape[0], *leading.shape[1:]))
        dist.all_gather_into_tensor(gathered, leading, group=group)
        return gathered.movedim(0, 1)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        group = ctx.group
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        # summed in fp32 whatever the compute dtype: a key's gradient adds every rank's queries
        leading = grad.movedim(1, 0).float().contiguous()
        chunk_len = leading.shape[0] // size
        if dist.get_backend(group) == "gloo":
            dist.all_reduce(leading, group=group)
            part = leading[rank * chunk_len : (rank + 1) * chunk_len]
        else:
            part = leading.new_empty((chunk_len, *leading.shape[1:]))
            dist.reduce_scatter_tensor(part, leading, group=group)
        return part.movedim(0, 1).to(grad.dtype), None


def _halo_pieces(rank: int, size: int, chunk_len: int, window: int) -> list[tuple[int, int, int]]:
    """What rank `rank` of a group of `size` chunks of `chunk_len` positions needs of the keys before its
    chunk for a window of `window` positions back: (source rank, first, end) in the source's chunk
    coordinates, earliest first; together they are the last min(window, rank x chunk_len) positions
    before the chunk."""
    need = min(window, rank * chunk_len)
    pieces = []
    for source in range(rank - 1, -1, -1):
        if need <= 0:
            break
        take = min(need, chunk_len)
        pieces.append((source, chunk_len - take, chunk_len))
        need -= take
    return pieces[::-1]


def _exchange(sends: list[tuple[int, torch.Tensor]], receives: list[tuple[int, torch.Tensor]], group) -> None:
    """Point-to-point sends and receives (group ranks), all posted at once so no order can deadlock."""
    operations = [dist.P2POp(dist.isend, tensor, group=group, group_peer=peer) for peer, tensor in sends]
    operations += [dist.P2POp(dist.irecv, tensor, group=group, group_peer=peer) for peer, tensor in receives]
    if operations:
        for request in dist.batch_isend_irecv(operations):
            request.wait()


class _SequenceHalo(torch.autograd.Function):
    """Forward: the `window` positions before this rank's chunk ([B, halo, ...]), received from the ranks
    that hold them (one rank back when the window fits in a chunk); each rank sends only those positions of
    its chunk that later ranks' windows reach. Backward: the halo's gradient goes back to its owners, which
    add it to their chunk's gradient (fp32 sums: a key may be in several ranks' halos)."""

    @staticmethod
    def forward(ctx, chunk: torch.Tensor, group, window: int) -> torch.Tensor:
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        chunk_len = chunk.shape[1]
        leading = chunk.movedim(1, 0)  # [S_chunk, B, ...]: the pieces are contiguous slices
        sends = []
        for receiver in range(rank + 1, size):
            for source, first, end in _halo_pieces(receiver, size, chunk_len, window):
                if source == rank:
                    sends.append((receiver, leading[first:end].contiguous()))
        pieces = _halo_pieces(rank, size, chunk_len, window)
        received = [leading.new_empty((end - first, *leading.shape[1:])) for _, first, end in pieces]
        _exchange(sends, [(source, buffer) for (source, _, _), buffer in zip(pieces, received, strict=True)], group)
        ctx.group, ctx.window, ctx.chunk_shape = group, window, chunk.shape
        if not received:
            return chunk.new_empty((chunk.shape[0], 0, *chunk.shape[2:]))
        return torch.cat(received).movedim(0, 1)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        group, window = ctx.group, ctx.window
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        chunk_len = ctx.chunk_shape[1]
        leading = grad.movedim(1, 0).float()
        sends, offset = [], 0
        for source, first, end in _halo_pieces(rank, size, chunk_len, window):
            sends.append((source, leading[offset : offset + end - first].contiguous()))
            offset += end - first
        receives = []
        for receiver in range(rank + 1, size):
            for source, first, end in _halo_pieces(receiver, size, chunk_len, window):
                if source == rank:
                    receives.append((receiver, first, end, leading.new_empty((end - first, *leading.shape[1:]))))
        _exchange(sends, [(receiver, buffer) for receiver, _, _, buffer in receives], group)
        total = leading.new_zeros((chunk_len, *leading.shape[1:]))
        for _receiver, first, end, buffer in receives:
            total[first:end] += buffer
        return total.movedim(0, 1).to(grad.dtype), None, None


def sequence_halo(chunk: torch.Tensor, group, window: int) -> torch.Tensor:
    """[B, chunk, ...] -> [B, min(window, start), ...]: the positions of the whole sequence just before this
    rank's chunk, fetched from the ranks that hold them, differentiable."""
    return _SequenceHalo.apply(chunk, group, window)


def gather_entries(entries: torch.Tensor, group, chunk_len: int, ratio: int) -> torch.Tensor:
    """[B, n_rank, ...] compressed entries of the windows of `ratio` positions ending in each rank's chunk
    -> [B, sum of n_rank, ...] in window order, differentiable. The counts follow from the chunk bounds, so
    every rank knows them; shorter ones are padded for the collective and the padding dropped."""
    size = dist.get_world_size(group)
    counts = [((rank + 1) * chunk_len) // ratio - (rank * chunk_len) // ratio for rank in range(size)]
    widest = max(counts)
    if entries.shape[1] < widest:
        entries = torch.cat([entries, entries.new_zeros((entries.shape[0], widest - entries.shape[1], *entries.shape[2:]))], dim=1)
    gathered = gather_sequence(entries, group)  # [B, size x widest, ...]
    if all(count == widest for count in counts):
        return gathered
    keep = torch.cat([torch.arange(rank * widest, rank * widest + count) for rank, count in enumerate(counts)])
    return gathered.index_select(1, keep.to(gathered.device))


def gather_sequence(chunk: torch.Tensor, group) -> torch.Tensor:
    """[B, chunk, ...] -> [B, cp x chunk, ...] over the context-parallel `group`, differentiable."""
    return _GatherSequence.apply(chunk, group)


@torch.no_grad()
def sum_over_ranks(tensor: torch.Tensor, group) -> torch.Tensor:
    """The sum of `tensor` over the ranks of `group`, without gradient."""
    total = tensor.detach().clone()
    dist.all_reduce(total, group=group)
    return total


def sequence_shard(seq_len: int, group, where: str = "[train.parallel] cp") -> SequenceShard:
    """This rank's chunk of `seq_len` positions in the context-parallel `group`, with the collectives
    the model calls bound to it."""
    size, rank = dist.get_world_size(group), dist.get_rank(group)
    if seq_len % size:
        raise ValueError(
            f"{where} = {size} must divide the sequence length {seq_len} (the data folder's meta.json seq_len); "
            "choose a cp that divides it, or rebuild the data with such a seq_len"
        )
    chunk = seq_len // size
    return SequenceShard(
        start=rank * chunk,
        end=(rank + 1) * chunk,
        gather=lambda tensor: gather_sequence(tensor, group),
        sum_over_ranks=lambda tensor: sum_over_ranks(tensor, group),
        halo=lambda tensor, window: sequence_halo(tensor, group, window),
        gather_entries=lambda entries, ratio: gather_entries(entries, group, chunk, ratio),
    )


def chunk_target_count(keep: torch.Tensor, shift: int, shard: SequenceShard | None) -> int:
    """Targets among `keep` ([B, S - shift]: whether position t's token t + shift is a target) that
    the chunk's positions predict (all of them without context parallel)."""
    if shard is None:
        return int(keep.sum())
    return int(keep[:, shard.start : min(shard.end, keep.shape[1])].sum())
