"""DeepSeek-V4 as a plain single-device PyTorch module, with its training losses and a generate loop.

Module and parameter names follow the official checkpoint (`embed`, `layers.{i}.attn.wq_a`,
`layers.{i}.ffn.experts`, `mtp.0.e_proj`, ...), so the official layout maps onto this model almost
one to one; routed experts are stacked ([E, inter, hidden] for w1/w3, [E, hidden, inter] for w2) so
they run as grouped matrix multiplications and expert parallelism can swap `experts` out.

Shapes in names: B batch, S sequence, H heads, D head dim, T compressed entries, E experts, N tokens.
Documents: `position_ids` restart at 0 at every packed document; no attention (window, compressed
entries, indexer) and no loss crosses a document boundary.

Context parallel: given a `SequenceShard`, a forward computes the queries, the MoE and the losses of
one contiguous chunk of every row while the key side (window keys, the compressors' per-token
projections) is gathered over the whole sequence, so the compressed entries and the indexer's top-k
are those of the unsplit rows. The collectives are the shard's callables (the trainer binds them to
its process group); without a shard nothing here changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from trex_cli.models.deepseek_v4 import kernels
from trex_cli.models.deepseek_v4.config import CSA, SLIDING, DeepseekV4Config, yarn_inv_freq
from trex_cli.models.deepseek_v4.initialization import local_tensor
from trex_cli.models.deepseek_v4.vocab_parallel import linear_cross_entropy_sum


@dataclasses.dataclass
class DeepseekV4Output:
    """What one forward pass returns. Losses are None when not computed (no targets)."""

    loss: torch.Tensor | None = None  # weighted total that training back-propagates
    lm_loss: torch.Tensor | None = None
    mtp_loss: torch.Tensor | None = None
    balance_loss: torch.Tensor | None = None
    indexer_kl_loss: torch.Tensor | None = None
    expert_load: torch.Tensor | None = None  # [layers + MTP layers, E] routed tokens per expert
    lm_tokens: torch.Tensor | None = None  # how many targets lm_loss averages over
    logits: torch.Tensor | None = None
    mtp_logits: torch.Tensor | None = None
    # a pipeline stage before the last (finish=False): what goes on to the next stage
    streams: torch.Tensor | None = None  # [B, S, n, D] the last block's mHC streams
    next_embeddings: torch.Tensor | None = None  # [B, S, D] embeddings of the next tokens (for the MTP block)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernels.rms_norm(x, self.weight, self.eps)


@dataclasses.dataclass
class SequenceShard:
    """Context parallel: this rank computes positions [start, end) of every row.

    `gather(chunk)`: [B, end - start, ...] -> [B, S, ...], every rank's chunk in sequence order; its
    backward sums the gradient over the ranks and keeps this rank's chunk. `sum_over_ranks(tensor)`:
    the sum over the ranks, without gradient (the counts behind means over the whole sequence).
    `halo(chunk, n)`: [B, end - start, ...] -> [B, min(n, start), ...], the positions just before the
    chunk, from the ranks that hold them; its backward returns their gradient to those ranks.
    `gather_entries(entries, ratio)`: every rank's compressed entries of the windows of `ratio` positions
    that end in its chunk, concatenated in window order (ranks may hold different counts)."""

    start: int
    end: int
    gather: Callable[[torch.Tensor], torch.Tensor]
    sum_over_ranks: Callable[[torch.Tensor], torch.Tensor]
    halo: Callable[[torch.Tensor, int], torch.Tensor]
    gather_entries: Callable[[torch.Tensor, int], torch.Tensor]


@dataclasses.dataclass
class _Context:
    """Per-forward values every block reads."""

    position_ids: torch.Tensor  # [B, S]
    input_ids: torch.Tensor  # [B, S] (hash routing)
    rope: dict[str, tuple[torch.Tensor, torch.Tensor]]  # "main"/"compress" -> cos, sin [B, S, R]
    compress_inv_freq: torch.Tensor  # [R] for the compressed entries' own positions
    docs: torch.Tensor  # [B, S] document number of each token
    single_document: bool  # every row is one document: skip the document masks
    training_losses: bool
    indexer_loss: bool  # compute the indexer KL loss: the only thing the indexer learns from
    balance_loss: bool = False  # learned gates compute their sequence-wise balance loss
    capture: dict | None = None  # generate()'s prefill: module -> the per-token state decoding reuses
    # context parallel: this rank's chunk, and the whole rows' positions and documents (what the key side
    # is pooled and masked over); the fields above then hold the chunk's values
    sequence: SequenceShard | None = None
    whole: _Context | None = None


def _outside_backward() -> bool:
    """True unless activation checkpointing is running a forward again inside the backward pass."""
    return torch._C._current_graph_task_id() == -1


def _keep(module: nn.Module, name: str, value: torch.Tensor | None) -> None:
    """Keep what a forward computed beside its output (an auxiliary loss) on `module` until the model's
    loss assembly takes it (`DeepseekV4ForCausalLM.take_auxiliary`); a forward run again by activation
    checkpointing inside the backward pass keeps nothing (the loss was assembled from the first)."""
    if _outside_backward():
        setattr(module, name, value)


def sequence_balance_loss(scores: torch.Tensor, topk_ids: torch.Tensor, batch: int, seq_len: int, ctx: _Context) -> torch.Tensor:
    """DeepSeek-V3's sequence-wise balance loss of one gate: scores [B * S, E], topk_ids [B * S, k].
    Under context parallel a sequence's expert counts are summed over the ranks and its mean affinity is
    this chunk's part of the whole rows' mean, so the ranks' losses sum to the whole rows' (`seq_len`
    is then the chunk's length)."""
    experts, topk = scores.shape[-1], topk_ids.shape[-1]
    whole_len = seq_len if ctx.whole is None else ctx.whole.position_ids.shape[1]
    scores = scores.view(batch, seq_len, experts)
    share = scores / scores.sum(dim=-1, keepdim=True)  # normalized affinity
    mean_share = share.mean(dim=1) if ctx.sequence is None else share.sum(dim=1) / whole_len  # [B, E]
    counts = torch.zeros(batch, experts, device=scores.device)
    counts.scatter_add_(1, topk_ids.view(batch, -1), torch.ones(batch, seq_len * topk, device=scores.device))
    if ctx.sequence is not None:
        counts = ctx.sequence.sum_over_ranks(counts)
    fraction = counts * experts / (topk * whole_len)
    return (fraction * mean_share).sum(dim=-1).mean()


@dataclasses.dataclass
class Auxiliary:
    """What the blocks computed beside their outputs in one forward (`take_auxiliary`), in block order."""

    balance: list[torch.Tensor]  # the sequence-wise balance loss of each learned gate that computed one
    indexer_kl: list[torch.Tensor]  # the indexer KL loss of each CSA layer that computed one
    expert_load: dict[int, torch.Tensor]  # block row (main layers, then MTP) -> [E] tokens routed per expert


def mean_over(values: list[torch.Tensor], count: int | None = None) -> torch.Tensor:
    """sum(values) / count (default: their number): a pipeline stage holds some of the layers a mean
    runs over, and gives its part of the whole model's mean."""
    return torch.stack(values).sum() / (len(values) if count is None else count)


def total_loss(
    lm: torch.Tensor | None,
    mtp: torch.Tensor | None,
    balance: torch.Tensor | None,
    indexer_kl: torch.Tensor | None,
    *,
    mtp_weight: float,
    balance_weight: float,
    indexer_kl_weight: float,
    shares: tuple[float, float, float] = (1.0, 1.0, 1.0),
) -> torch.Tensor | None:
    """The loss training back-propagates: lm + mtp_weight * mtp + balance_weight * balance +
    indexer_kl_weight * indexer_kl, the terms absent (None) left out. `shares` (LM, MTP, mean) scale the
    terms of one micro-batch (or context-parallel chunk) to its part of the global batch: the LM and
    MTP losses by its share of the targets, the balance and KL losses (means over sequences) by
    1 / micro-batches over all ranks. The model's forward (shares 1), the trainer's accumulation and
    every pipeline stage assemble their losses here."""
    lm_share, mtp_share, mean_share = shares
    total = None if lm is None else lm * lm_share
    for value, weight, share in ((mtp, mtp_weight, mtp_share), (balance, balance_weight, mean_share),
                                 (indexer_kl, indexer_kl_weight, mean_share)):
        if value is not None:
            term = weight * value * share
            total = term if total is None else total + term
    return total


class Compressor(nn.Module):
    """Softmax-gated pooling of each window of `ratio` tokens into one KV entry (CSA and HCA).

    With `overlap` (CSA) each token projects two series: the first half of its features feeds the
    next window's entry and the second half its own, so entry w pools 2*ratio tokens with stride
    ratio. Entries are normalized and get the compressed-layer RoPE at the position of their
    window's first token. In packed sequences an entry pools only the tokens of the document its
    window ends in (the others get zero weight), so no entry mixes documents."""

    def __init__(self, config: DeepseekV4Config, dim: int, ratio: int, overlap: bool):
        super().__init__()
        width = dim * (2 if overlap else 1)
        self.dim, self.ratio, self.overlap = dim, ratio, overlap
        self.wkv = nn.Linear(config.hidden_size, width, bias=False)
        self.wgate = nn.Linear(config.hidden_size, width, bias=False)
        self.ape = nn.Parameter(torch.zeros(ratio, width, dtype=torch.float32))
        self.norm = RMSNorm(dim, config.rms_norm_eps)

    def forward(self, x: torch.Tensor, ctx: _Context) -> torch.Tensor:
        kv, gate = self.wkv(x), self.wgate(x)
        if ctx.capture is not None:
            ctx.capture[self] = (kv, gate)
        if ctx.sequence is not None:
            return self._pool_chunk(kv, gate, ctx)
        return self.pool(kv, gate, ctx)

    def _pool_chunk(self, kv: torch.Tensor, gate: torch.Tensor, ctx: _Context) -> torch.Tensor:
        """Context parallel: this rank pools the windows that end in its chunk, reading the few tokens
        before it (a window's start, and with overlap the window before) from the ranks before through the
        sequence halo; the entries, ratio (or, with overlap, 2 ratio) times fewer than the tokens, are then
        gathered in window order. The whole sequence's entries are the unsplit pooling's."""
        shard, ratio = ctx.sequence, self.ratio
        start, end = shard.start, shard.end
        both = torch.cat([kv, gate], dim=-1)
        reach = ratio * (2 if self.overlap else 1) - 1  # tokens before a window's end that its entry reads
        first_window, end_window = start // ratio, end // ratio  # the windows ending in [start, end)
        lead = 1 if self.overlap and first_window > 0 else 0  # the window before, read by the first entry
        first_token = (first_window - lead) * ratio
        halo = shard.halo(both, reach)
        tokens = torch.cat([halo[:, halo.shape[1] - (start - first_token) :], both], dim=1)
        tokens = tokens[:, : end_window * ratio - first_token]
        if end_window > first_window:
            local_ctx = dataclasses.replace(
                ctx.whole,
                docs=ctx.whole.docs[:, first_token : end_window * ratio],
                position_ids=ctx.whole.position_ids[:, first_token : end_window * ratio],
            )
            kv_tokens, gate_tokens = tokens.split([kv.shape[-1], gate.shape[-1]], dim=-1)
            entries = self.pool(kv_tokens, gate_tokens, local_ctx)[:, lead:]
        else:
            # A chunk shorter than a window may end none. The empty entries stay in the autograd graph, so
            # this rank's backward still takes part in the halo's and the gather's collectives, and the
            # pooling's own parameters get a (zero) gradient, as FSDP's reduce-scatter needs on every rank.
            unused = sum(parameter.sum() for parameter in (self.ape, *self.norm.parameters()))
            entries = tokens[:, :0, : self.dim] + 0 * unused
        return shard.gather_entries(entries, ratio)

    def decode(self, x: torch.Tensor, cache: dict, pool_ctx: _Context, rows, positions) -> torch.Tensor:
        """Entries after writing the projections of one new token per row into the cache."""
        kv_cache, gate_cache = cache[self]
        kv_cache[rows, positions] = self.wkv(x)[:, 0]
        gate_cache[rows, positions] = self.wgate(x)[:, 0]
        return self.pool(kv_cache, gate_cache, pool_ctx)

    def pool(self, kv: torch.Tensor, gate: torch.Tensor, ctx: _Context) -> torch.Tensor:
        """[B, T, dim] entries of every complete window from per-token projections [B, S, width]."""
        batch, seq_len, _ = kv.shape
        windows = seq_len // self.ratio
        if windows == 0:
            return kv.new_zeros(batch, 0, self.dim)
        used = windows * self.ratio
        kv = kv[:, :used].view(batch, windows, self.ratio, -1)
        gate = gate[:, :used].view(batch, windows, self.ratio, -1).float() + self.ape.float()
        window_docs = ctx.docs[:, :used].view(batch, windows, self.ratio)
        entry_doc = window_docs[..., -1:]  # an entry belongs to the document its window ends in
        other_doc = window_docs != entry_doc  # [B, W, ratio]
        if self.overlap:
            d = self.dim
            previous_kv = F.pad(kv[:, :-1, :, :d], (0, 0, 0, 0, 1, 0))
            previous_gate = F.pad(gate[:, :-1, :, :d], (0, 0, 0, 0, 1, 0), value=float("-inf"))
            previous_docs = F.pad(window_docs[:, :-1], (0, 0, 1, 0), value=-1)
            kv = torch.cat([previous_kv, kv[..., d:]], dim=2)
            gate = torch.cat([previous_gate, gate[..., d:]], dim=2)
            other_doc = torch.cat([previous_docs != entry_doc, other_doc], dim=2)
        if ctx.single_document:
            weights = gate.softmax(dim=2).to(kv.dtype)
        else:
            weights = gate.masked_fill(other_doc.unsqueeze(-1), float("-inf")).softmax(dim=2).to(kv.dtype)
        pooled = self.norm((kv * weights).sum(dim=2))
        # position of the window's first token, counted in the entry's document
        last_positions = ctx.position_ids[:, self.ratio - 1 : used : self.ratio]
        angles = (last_positions - (self.ratio - 1)).unsqueeze(-1).float() * ctx.compress_inv_freq.float()
        return kernels.apply_rope(pooled, angles.cos(), angles.sin())


def compressed_visibility(ctx: _Context, num_entries: int, ratio: int) -> torch.Tensor:
    """[B, S, T] bool: entry t is complete at the query (its window ends at or before it) and
    belongs to the query's document. Under context parallel the queries are the chunk's (S of them,
    from `ctx.sequence.start`) and the entries the whole sequence's."""
    seq_len = ctx.position_ids.shape[1]
    device = ctx.position_ids.device
    last_token = (torch.arange(num_entries, device=device) + 1) * ratio - 1
    first = 0 if ctx.sequence is None else ctx.sequence.start
    entry_docs = ctx.docs if ctx.whole is None else ctx.whole.docs
    complete = last_token.view(1, -1) <= torch.arange(first, first + seq_len, device=device).view(-1, 1)  # [S, T]
    if ctx.single_document:
        return complete.unsqueeze(0).expand(ctx.docs.shape[0], -1, -1)
    same_document = entry_docs[:, last_token].unsqueeze(1) == ctx.docs.unsqueeze(-1)  # [B, S, T]
    return complete.unsqueeze(0) & same_document


def top_entries(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k best-scored entries; equal scores (common: relu zeroes whole rows) go to the
    earlier entry, so the choice does not depend on how many future entries the tensor holds."""
    order = torch.sort(scores, dim=-1, descending=True, stable=True).indices
    return order[..., : min(k, scores.shape[-1])]


class Indexer(nn.Module):
    """Lightning indexer: scores compressed entries as sum_h w_h * relu(q_h . k) and keeps the top-k."""

    def __init__(self, config: DeepseekV4Config):
        super().__init__()
        self.heads, self.head_dim, self.topk = config.index_n_heads, config.index_head_dim, config.index_topk
        self.ratio = config.compress_rate_csa
        self.wq_b = nn.Linear(config.q_lora_rank, self.heads * self.head_dim, bias=False)
        self.weights_proj = nn.Linear(config.hidden_size, self.heads, bias=False)
        self.compressor = Compressor(config, self.head_dim, self.ratio, overlap=True)

    def forward(self, x, q_residual, ctx: _Context, visible: torch.Tensor, keys: torch.Tensor | None = None) -> torch.Tensor:
        """[B, S, T] float32 scores, -inf where the entry is not visible."""
        batch, seq_len, _ = x.shape
        cos, sin = ctx.rope["compress"]
        keys = self.compressor(x, ctx) if keys is None else keys
        query = self.wq_b(q_residual).view(batch, seq_len, self.heads, self.head_dim)
        query = kernels.apply_rope(query, cos, sin)
        weights = self.weights_proj(x).float() * self.heads**-0.5
        scores = kernels.indexer_scores(query, keys, weights, self.head_dim**-0.5)
        return scores.masked_fill(~visible, float("-inf"))


class Attention(nn.Module):
    """Shared-KV multi-query attention over a sliding window plus (CSA/HCA) compressed entries, with
    a per-head sink and the grouped low-rank output projection."""

    def __init__(self, config: DeepseekV4Config, layer_index: int):
        super().__init__()
        self.config = config
        self.layer_type = config.layer_type(layer_index)
        self.heads, self.head_dim = config.num_attention_heads, config.head_dim
        self.wq_a = nn.Linear(config.hidden_size, config.q_lora_rank, bias=False)
        self.q_norm = RMSNorm(config.q_lora_rank, config.rms_norm_eps)
        self.wq_b = nn.Linear(config.q_lora_rank, self.heads * self.head_dim, bias=False)
        self.wkv = nn.Linear(config.hidden_size, self.head_dim, bias=False)
        self.kv_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        group_width = self.heads * self.head_dim // config.o_groups
        self.wo_a = nn.Linear(group_width, config.o_groups * config.o_lora_rank, bias=False)
        self.wo_b = nn.Linear(config.o_groups * config.o_lora_rank, config.hidden_size, bias=False)
        self.attn_sink = nn.Parameter(torch.zeros(self.heads, dtype=torch.float32))
        self.ratio = config.compress_ratios[layer_index]
        self.compressor = None
        self.indexer = None
        if self.layer_type != SLIDING:
            self.compressor = Compressor(config, self.head_dim, self.ratio, overlap=self.layer_type == CSA)
        if self.layer_type == CSA:
            self.indexer = Indexer(config)
        self.indexer_kl: torch.Tensor | None = None  # the last forward's indexer KL loss (take_auxiliary)

    def forward(self, x: torch.Tensor, ctx: _Context) -> torch.Tensor:
        """The attention output; a CSA layer computing the indexer loss also keeps it (`indexer_kl`)."""
        batch, seq_len, _ = x.shape
        cos, sin = ctx.rope["main" if self.layer_type == SLIDING else "compress"]
        indexer_kl = None
        q_residual = self.q_norm(self.wq_a(x))
        query = self.wq_b(q_residual).view(batch, seq_len, self.heads, self.head_dim)
        query = kernels.apply_rope(kernels.rms_norm(query, None, self.config.rms_norm_eps), cos, sin)
        kv = kernels.apply_rope(self.kv_norm(self.wkv(x)), cos, sin)
        if ctx.capture is not None:
            ctx.capture[self] = kv
        scale = self.head_dim**-0.5
        compressed_kv = indices = None
        if self.compressor is not None:
            compressed_kv = self.compressor(x, ctx)
            num_entries = compressed_kv.shape[1]
            visible = compressed_visibility(ctx, num_entries, self.ratio)
            if self.indexer is not None and num_entries > 0:
                # The selection is not differentiable and the indexer's inputs are detached: its KL
                # loss is all it learns from, so without that loss its scores need no autograd graph.
                with contextlib.nullcontext() if ctx.indexer_loss else torch.no_grad():
                    scores = self.indexer(x.detach(), q_residual.detach(), ctx, visible)
                picked = top_entries(scores.detach(), self.indexer.topk)
                picked_visible = visible.gather(-1, picked)
                indices = torch.where(picked_visible, picked, torch.full_like(picked, -1))
                if ctx.indexer_loss:
                    indexer_kl = self._indexer_kl(query, compressed_kv, scores, indices, scale, ctx.sequence)
            else:
                if self.indexer is not None and ctx.capture is not None:
                    self.indexer.compressor(x, ctx)  # no entry yet; decoding still needs its projections
                # HCA (or CSA before its first entry): every visible entry, listed explicitly so
                # document limits hold
                entry = torch.arange(num_entries, device=x.device).expand_as(visible)
                indices = torch.where(visible, entry, torch.full_like(entry, -1))
        if ctx.sequence is not None:
            output = self._chunk_attention(query, kv, scale, compressed_kv, indices, ctx)
        else:
            output = kernels.sparse_attention(
                query, kv, self.attn_sink, window=self.config.sliding_window, scale=scale,
                compressed_kv=compressed_kv, compressed_indices=indices, compress_ratio=self.ratio or None,
                position_ids=ctx.position_ids,
            )
        _keep(self, "indexer_kl", indexer_kl)
        return self._project_out(output, cos, sin)

    def _chunk_attention(self, query, kv, scale, compressed_kv, indices, ctx: _Context) -> torch.Tensor:
        """Context parallel: the chunk's queries against the window keys before and in it (the halo,
        from the ranks before) and the whole sequence's compressed entries. The kernel takes queries and
        keys of one length, so the queries are preceded by `halo` zero rows, one per window key before
        the chunk, which select no compressed entry and whose outputs are dropped."""
        shard = ctx.sequence
        halo = min(self.config.sliding_window - 1, shard.start)
        keys = torch.cat([shard.halo(kv, self.config.sliding_window - 1), kv], dim=1)
        positions = ctx.whole.position_ids[:, shard.start - halo : shard.end]
        if halo:
            batch, _, heads, head_dim = query.shape
            query = torch.cat([query.new_zeros(batch, halo, heads, head_dim), query], dim=1)
            if indices is not None:
                indices = torch.cat([indices.new_full((batch, halo, indices.shape[-1]), -1), indices], dim=1)
        output = kernels.sparse_attention(
            query, keys, self.attn_sink, window=self.config.sliding_window, scale=scale,
            compressed_kv=compressed_kv, compressed_indices=indices, compress_ratio=self.ratio or None,
            position_ids=positions,
        )
        return output[:, halo:]

    def _project_out(self, output: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq_len = output.shape[:2]
        # values carried the keys' rotation: undo it at the query position before mixing heads
        output = kernels.apply_rope(output, cos, sin, inverse=True)
        groups = self.config.o_groups
        # one product per group of heads on its slice of the channels (strided views, no copies; a
        # batched product over groups would first move the group axis to the front, twice)
        parts = output.reshape(batch, seq_len, -1).chunk(groups, dim=-1)
        weights = self.wo_a.weight.chunk(groups, dim=0)
        low_rank = torch.cat([F.linear(part, weight) for part, weight in zip(parts, weights, strict=True)], dim=-1)
        return self.wo_b(low_rank)

    def decode(self, x: torch.Tensor, ctx: _Context, cache: dict, pool_ctx: _Context) -> torch.Tensor:
        """One new token per row (x [B, 1, hidden] at ctx.position_ids [B, 1]) against the cached
        keys and compressed entries: the same attention as forward() gives that position."""
        batch = x.shape[0]
        rows = torch.arange(batch, device=x.device)
        positions = ctx.position_ids[:, 0]
        cos, sin = ctx.rope["main" if self.layer_type == SLIDING else "compress"]
        q_residual = self.q_norm(self.wq_a(x))
        query = self.wq_b(q_residual).view(batch, 1, self.heads, self.head_dim)
        query = kernels.apply_rope(kernels.rms_norm(query, None, self.config.rms_norm_eps), cos, sin)
        keys = cache[self]
        keys[rows, positions] = kernels.apply_rope(self.kv_norm(self.wkv(x)), cos, sin)[:, 0]
        key_index = torch.arange(keys.shape[1], device=x.device).view(1, -1)
        visible = (key_index <= positions.view(-1, 1)) & (key_index > positions.view(-1, 1) - self.config.sliding_window)
        values = keys
        if self.compressor is not None:
            entries = self.compressor.decode(x, cache, pool_ctx, rows, positions)
            last_token = (torch.arange(entries.shape[1], device=x.device) + 1) * self.ratio - 1
            entry_visible = last_token.view(1, -1) <= positions.view(-1, 1)  # [B, T]
            if self.indexer is not None and entries.shape[1] > 0:
                index_keys = self.indexer.compressor.decode(x, cache, pool_ctx, rows, positions)
                scores = self.indexer(x, q_residual, ctx, entry_visible.unsqueeze(1), keys=index_keys)[:, 0]
                picked = top_entries(scores, self.indexer.topk)
                chosen = torch.zeros_like(entry_visible).scatter(-1, picked, True)
                entry_visible = entry_visible & chosen
            visible = torch.cat([visible, entry_visible], dim=-1)
            values = torch.cat([keys, entries.to(keys.dtype)], dim=1)
        logits = torch.einsum("bhd,bld->bhl", query[:, 0].float(), values.float()) * self.head_dim**-0.5
        logits = logits.masked_fill(~visible.unsqueeze(1), float("-inf"))
        sink = self.attn_sink.float().view(1, -1, 1).expand(batch, -1, 1)
        probabilities = torch.softmax(torch.cat([logits, sink], dim=-1), dim=-1)[..., :-1]
        output = torch.einsum("bhl,bld->bhd", probabilities, values.float()).unsqueeze(1).to(x.dtype)
        return self._project_out(output, cos, sin)

    @staticmethod
    def _indexer_kl(query, compressed_kv, index_scores, indices, scale, sequence: SequenceShard | None = None) -> torch.Tensor:
        """KL(attention || indexer) over each query's selected entries. The target is the main
        attention restricted to the selected entries, averaged over heads, without gradient. Under
        context parallel (`sequence`) the mean is over every rank's queries: this chunk's share of it."""
        num_entries = compressed_kv.shape[1]
        selected = torch.zeros(*indices.shape[:2], num_entries + 1, dtype=torch.bool, device=indices.device)
        safe = torch.where(indices >= 0, indices, torch.full_like(indices, num_entries))
        selected = selected.scatter(-1, safe, True)[..., :num_entries]
        rows = selected.any(-1)
        if sequence is not None:  # every rank reaches the count's collective, whatever its rows
            total_rows = sequence.sum_over_ranks(rows.sum().float()).clamp_min(1.0)
            target = kernels.indexer_kl_target(query.detach(), compressed_kv.detach(), selected, scale)
            log_indexer = torch.log_softmax(index_scores.masked_fill(~selected, float("-inf")), dim=-1)
            per_entry = torch.where(selected, target * (torch.log(target.clamp_min(1e-20)) - log_indexer), 0.0)
            return per_entry.sum(-1)[rows].sum() / total_rows
        if not bool(rows.any()):
            return index_scores.new_zeros(())
        target = kernels.indexer_kl_target(query.detach(), compressed_kv.detach(), selected, scale)  # [B, S, T]
        log_indexer = torch.log_softmax(index_scores.masked_fill(~selected, float("-inf")), dim=-1)
        per_entry = torch.where(selected, target * (torch.log(target.clamp_min(1e-20)) - log_indexer), 0.0)
        return per_entry.sum(-1)[rows].mean()


class Experts(nn.Module):
    """Routed SwiGLU experts, stacked so that all experts run as grouped matrix multiplications."""

    # the intermediate dim of each stack: expert-tensor parallel splits w1/w3 by rows, w2 by columns
    tensor_parallel_dims = {"w1": 1, "w3": 1, "w2": 2}

    def __init__(self, config: DeepseekV4Config):
        super().__init__()
        experts, inter, hidden = config.n_routed_experts, config.moe_intermediate_size, config.hidden_size
        self.num_experts, self.limit = experts, config.swiglu_limit
        self.w1 = nn.Parameter(torch.empty(experts, inter, hidden))
        self.w3 = nn.Parameter(torch.empty(experts, inter, hidden))
        self.w2 = nn.Parameter(torch.empty(experts, hidden, inter))

    def forward(self, tokens: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        permuted, tokens_per_expert, order = kernels.moe_permute(tokens, topk_ids, self.num_experts)
        gate = kernels.grouped_matmul(permuted, self.w1, tokens_per_expert)
        up = kernels.grouped_matmul(permuted, self.w3, tokens_per_expert)
        hidden = kernels.swiglu(gate, up, self.limit)
        down = kernels.grouped_matmul(hidden, self.w2, tokens_per_expert)
        return kernels.moe_unpermute(down, order, topk_weights)


class SharedExpert(nn.Module):
    def __init__(self, config: DeepseekV4Config):
        super().__init__()
        inter = config.moe_intermediate_size * config.n_shared_experts
        self.limit = config.swiglu_limit
        self.w1 = nn.Linear(config.hidden_size, inter, bias=False)
        self.w2 = nn.Linear(inter, config.hidden_size, bias=False)
        self.w3 = nn.Linear(config.hidden_size, inter, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(kernels.swiglu(self.w1(x), self.w3(x), self.limit))


class Gate(nn.Module):
    """Router: sqrt(softplus) scores; experts chosen on scores + a bias that only the aux-loss-free
    rule changes (learned layers) or by a fixed token -> experts table (hash layers); the weights are
    the chosen scores, normalized and scaled."""

    def __init__(self, config: DeepseekV4Config, hashed: bool):
        super().__init__()
        self.hashed, self.topk = hashed, config.num_experts_per_tok
        self.scaling, self.normalize = config.routed_scaling_factor, config.norm_topk_prob
        self.weight = nn.Parameter(torch.empty(config.n_routed_experts, config.hidden_size))
        if hashed:
            self.register_buffer("tid2eid", torch.zeros(config.vocab_size, self.topk, dtype=torch.long))
        else:
            self.register_buffer("bias", torch.zeros(config.n_routed_experts, dtype=torch.float32))
        # tokens routed to each expert by the training forwards since the last reset (counted by the MoE
        # forward; the optimizer step's bias update reads and resets them: trex_cli/train/expert_bias.py);
        # not in checkpoints
        self.register_buffer("routed_tokens", torch.zeros(config.n_routed_experts, dtype=torch.long), persistent=False)

    def forward(self, x: torch.Tensor, input_ids: torch.Tensor):
        scores = F.softplus(F.linear(x, self.weight).float()).sqrt()  # [N, E]
        if self.hashed:
            topk_ids = self.tid2eid[input_ids.reshape(-1)]
        else:
            topk_ids = torch.topk(scores.detach() + self.bias, self.topk, dim=-1, sorted=False).indices
        weights = scores.gather(1, topk_ids)
        if self.normalize:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        return scores, topk_ids, weights * self.scaling


class MoE(nn.Module):
    def __init__(self, config: DeepseekV4Config, layer_index: int):
        super().__init__()
        self.gate = Gate(config, hashed=config.is_hash_layer(layer_index))
        self.experts = Experts(config)
        self.shared_experts = SharedExpert(config)
        # the last forward's balance loss and routed tokens per expert (take_auxiliary)
        self.balance_loss: torch.Tensor | None = None
        self.expert_load: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, ctx: _Context) -> torch.Tensor:
        """The MoE output; a learned gate also keeps this forward's sequence-wise balance loss
        (`balance_loss`) and every gate the tokens it routed to each expert (`expert_load`)."""
        batch, seq_len, hidden = x.shape
        tokens = x.reshape(-1, hidden)
        scores, topk_ids, topk_weights = self.gate(tokens, ctx.input_ids)
        balance = None
        if ctx.balance_loss and not self.gate.hashed:  # hash layers have no learned choice to balance
            balance = sequence_balance_loss(scores, topk_ids, batch, seq_len, ctx)
        _keep(self, "balance_loss", balance)
        # Counted once per token: not when activation checkpointing runs this forward again inside the
        # backward pass (there the current graph task is the backward's, outside it -1).
        if _outside_backward():
            with torch.no_grad():
                load = torch.bincount(topk_ids.reshape(-1), minlength=scores.shape[-1])
                if self.training:
                    self.gate.routed_tokens += load
                self.expert_load = load.float()
        routed = self.experts(tokens, topk_ids, topk_weights.to(x.dtype))
        return (routed + self.shared_experts(tokens)).view(batch, seq_len, hidden)


class Block(nn.Module):
    """One transformer block: attention and MoE, each wrapped in manifold-constrained hyper-connections."""

    def __init__(self, config: DeepseekV4Config, layer_index: int):
        super().__init__()
        self.config = config
        n, width = config.hc_mult, config.hc_mult * config.hidden_size
        self.attn_norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.ffn_norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.attn = Attention(config, layer_index)
        self.ffn = MoE(config, layer_index)
        for site in ("attn", "ffn"):
            self.register_parameter(f"hc_{site}_fn", nn.Parameter(torch.empty((2 + n) * n, width, dtype=torch.float32)))
            self.register_parameter(f"hc_{site}_base", nn.Parameter(torch.zeros((2 + n) * n, dtype=torch.float32)))
            self.register_parameter(f"hc_{site}_scale", nn.Parameter(torch.ones(3, dtype=torch.float32)))
        # parts recomputed in the backward pass instead of keeping their activations: "block" (the whole
        # block: only its input is kept) or any of "attention" (the attention module), "moe" (the MoE
        # module), "mhc" (the hyper-connection mixing around both); set by the trainer's activation
        # checkpointing (trex_cli/train/parallelize.py)
        self.recompute: frozenset[str] = frozenset()

    def _run(self, part: str, function, *args):
        """`function(*args)`, under activation checkpointing when `part` is recomputed and a backward
        pass will follow; a module is called through `__call__`, so its hooks run again on recompute."""
        if part in self.recompute and torch.is_grad_enabled():
            return checkpoint(function, *args, use_reentrant=False)
        return function(*args)

    def _wrapped(self, streams, site: str, sublayer, norm, ctx) -> torch.Tensor:
        config = self.config
        collapsed, post, comb = self._run(
            "mhc",
            kernels.hc_pre,
            streams,
            getattr(self, f"hc_{site}_fn"),
            getattr(self, f"hc_{site}_base"),
            getattr(self, f"hc_{site}_scale"),
            config.hc_sinkhorn_iters,
            config.hc_eps,
            config.rms_norm_eps,
        )
        out = self._run("attention" if site == "attn" else "moe", sublayer, norm(collapsed), ctx)
        return self._run("mhc", kernels.hc_post, out, post, comb, streams)

    def forward(self, *inputs) -> torch.Tensor:
        """The block's output (`compute`), recomputed in the backward pass when the whole block is
        ("block" in `recompute`): called through the module, so hooks around it (FSDP's) run once."""
        return self._run("block", self.compute, *inputs)

    def compute(self, streams: torch.Tensor, ctx: _Context) -> torch.Tensor:
        streams = self._wrapped(streams, "attn", self.attn, self.attn_norm, ctx)
        return self._wrapped(streams, "ffn", self.ffn, self.ffn_norm, ctx)

    def decode(self, streams: torch.Tensor, ctx: _Context, cache: dict, pool_ctx: _Context) -> torch.Tensor:
        def attention(h, step_ctx):
            return self.attn.decode(h, step_ctx, cache, pool_ctx)

        streams = self._wrapped(streams, "attn", attention, self.attn_norm, ctx)
        return self._wrapped(streams, "ffn", self.ffn, self.ffn_norm, ctx)


class HyperHead:
    """Collapses the mHC streams into one hidden state (sigmoid weights, no Sinkhorn). Its parameters
    live on the owner (`hc_head_fn/base/scale` of the model and of each MTP block), as in the
    official checkpoint."""

    @staticmethod
    def collapse(streams, fn, base, scale, config: DeepseekV4Config) -> torch.Tensor:
        return kernels.hc_head(streams, fn, base, scale, config.hc_eps, config.rms_norm_eps)


def _head_parameters(module: nn.Module, config: DeepseekV4Config) -> None:
    n = config.hc_mult
    module.hc_head_fn = nn.Parameter(torch.empty(n, n * config.hidden_size, dtype=torch.float32))
    module.hc_head_base = nn.Parameter(torch.zeros(n, dtype=torch.float32))
    module.hc_head_scale = nn.Parameter(torch.ones(1, dtype=torch.float32))


class MTPBlock(Block):
    """Multi-token prediction: from the main model's streams at t and the embedding of token t+1,
    a full block predicts token t+2 (sharing the main embedding and output head)."""

    def __init__(self, config: DeepseekV4Config, layer_index: int):
        super().__init__(config, layer_index)
        self.e_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.h_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.enorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.hnorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        _head_parameters(self, config)

    def compute(self, streams: torch.Tensor, next_embeddings: torch.Tensor, ctx: _Context) -> torch.Tensor:
        mixed = self.e_proj(self.enorm(next_embeddings)).unsqueeze(2) + self.h_proj(self.hnorm(streams))
        mixed = super().compute(mixed, ctx)
        return self.norm(HyperHead.collapse(mixed, self.hc_head_fn, self.hc_head_base, self.hc_head_scale, self.config))


class DeepseekV4ForCausalLM(nn.Module):
    """The whole model: embedding, blocks, mHC head, final norm, output head and the MTP blocks."""

    def __init__(self, config: DeepseekV4Config):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(Block(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        _head_parameters(self, config)
        self.mtp = nn.ModuleList(
            MTPBlock(config, config.num_hidden_layers + i) for i in range(config.num_nextn_predict_layers)
        )
        self.register_buffer("inv_freq_main", torch.empty(config.qk_rope_head_dim // 2), persistent=False)
        self.register_buffer("inv_freq_compress", torch.empty(config.qk_rope_head_dim // 2), persistent=False)
        self.reset_parameters()  # the computed buffers too

    @torch.no_grad()
    def init_computed_buffers(self) -> None:
        """Fill the buffers computed from the config (the RoPE frequencies), which no checkpoint holds:
        at construction, and again after a meta-device model is given storage (`to_empty`)."""
        if self.inv_freq_main.device.type == "meta":
            return
        rope_dim, config = self.config.qk_rope_head_dim, self.config
        self.inv_freq_main.copy_(yarn_inv_freq(rope_dim, config.rope_theta, None))
        self.inv_freq_compress.copy_(yarn_inv_freq(rope_dim, config.compress_rope_theta, config.yarn))
        for gate in self.routed_gates():
            gate.routed_tokens.zero_()

    # ---- initialisation --------------------------------------------------------------------------
    def reset_parameters(self, seed: int | None = None) -> None:
        """Random init (`initialization.py`: normal std initializer_range for matrices, ones for norms and
        hc scales, zeros for biases and sinks, a random hash-routing table), each tensor drawn from its
        own generator seeded by (seed, name), so any layout of the model starts from the same weights.
        Without `seed` one is drawn from torch's global generator (`torch.manual_seed` decides the init).
        A model on the meta device is left as it is (it is initialized once it has storage)."""
        from trex_cli.models.deepseek_v4.initialization import initialize

        if any(p.device.type == "meta" for p in self.parameters()):
            return
        if seed is None:
            seed = int(torch.randint(0, 2**63 - 1, (), device="cpu"))
        initialize(self, seed)

    # ---- forward ---------------------------------------------------------------------------------
    def _rope(self, position_ids: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        tables = {}
        for kind in ("main", "compress"):
            angles = position_ids.unsqueeze(-1).float() * getattr(self, f"inv_freq_{kind}").float()
            tables[kind] = (angles.cos(), angles.sin())
        return tables

    def _context(
        self, input_ids, position_ids, training_losses: bool, indexer_loss: bool | None = None,
        sequence: SequenceShard | None = None, balance_loss: bool = False,
    ) -> _Context:
        """The per-forward context; `indexer_loss` (default: `training_losses`) says whether CSA layers
        compute the indexer KL loss, `balance_loss` whether learned gates compute theirs. With `sequence` (context parallel) the inputs are the whole rows
        and the context is the chunk's, with the whole rows' positions and documents in `whole`."""
        docs = kernels.document_ids(position_ids)
        indexer_loss = training_losses if indexer_loss is None else indexer_loss
        if sequence is not None:
            seq_len = input_ids.shape[1]
            if not 0 <= sequence.start < sequence.end <= seq_len:
                raise ValueError(f"context parallel chunk [{sequence.start}, {sequence.end}) is not within {seq_len} positions")
            whole = _Context(
                position_ids=position_ids, input_ids=input_ids, rope={}, compress_inv_freq=self.inv_freq_compress,
                docs=docs, single_document=bool((docs == 1).all()), training_losses=training_losses,
                indexer_loss=indexer_loss, balance_loss=balance_loss,
            )
            chunk = slice(sequence.start, sequence.end)
            return _Context(
                position_ids=position_ids[:, chunk], input_ids=input_ids[:, chunk], rope=self._rope(position_ids[:, chunk]),
                compress_inv_freq=self.inv_freq_compress, docs=docs[:, chunk], single_document=whole.single_document,
                training_losses=training_losses, indexer_loss=indexer_loss, balance_loss=balance_loss,
                sequence=sequence, whole=whole,
            )
        return _Context(
            position_ids=position_ids, input_ids=input_ids, rope=self._rope(position_ids),
            compress_inv_freq=self.inv_freq_compress, docs=docs, single_document=bool((docs == 1).all()),
            training_losses=training_losses, indexer_loss=indexer_loss, balance_loss=balance_loss,
        )

    def hidden_states(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None, ctx: _Context | None = None):
        """(final normed hidden [B, S, D], last block's streams [B, S, n, D], context)."""
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
        ctx = ctx or self._context(input_ids, position_ids, training_losses=False)
        streams = self._run_blocks(self._embed_streams(input_ids), ctx)
        return self._final_hidden(streams), streams, ctx

    def _embed_streams(self, input_ids: torch.Tensor) -> torch.Tensor:
        embeddings = self.embed(input_ids)
        return embeddings.unsqueeze(2).expand(-1, -1, self.config.hc_mult, -1).contiguous()

    def _run_blocks(self, streams: torch.Tensor, ctx: _Context, layers: list[int] | None = None) -> torch.Tensor:
        """The main blocks this module holds, in order (a pipeline stage: those of `layers`)."""
        if layers is None:
            blocks = self.layers.values() if isinstance(self.layers, nn.ModuleDict) else self.layers
        else:
            blocks = [self.layers[str(index)] for index in layers]
        for layer in blocks:
            streams = layer(streams, ctx)
        return streams

    def _final_hidden(self, streams: torch.Tensor) -> torch.Tensor:
        collapsed = HyperHead.collapse(streams, self.hc_head_fn, self.hc_head_base, self.hc_head_scale, self.config)
        return self.norm(collapsed)

    def _next_embeddings(self, input_ids: torch.Tensor, sequence: SequenceShard | None) -> torch.Tensor:
        """Embeddings of token t+1 at each position t (the MTP block's input; zeros' id at the last)."""
        next_ids = F.pad(input_ids[:, 1:], (0, 1))
        if sequence is not None:
            next_ids = next_ids[:, sequence.start : sequence.end]
        return self.embed(next_ids)

    def holds_every_block(self) -> bool:
        """False for a pipeline stage (`prune_to_stages`), which holds some of the model's parts."""
        return len(self.routed_blocks()) == self.config.num_hidden_layers + self.config.num_nextn_predict_layers

    def _auxiliary_means(self, auxiliary: Auxiliary, mtp_runs: bool, seq_len: int) -> tuple:
        """(balance, indexer KL) of this forward: the means over the layers that computed them; a pipeline
        stage's part of the whole model's means (its layers' sum over the whole model's count)."""
        balance_count = kl_count = None
        if not self.holds_every_block():
            config = self.config
            rows = list(range(config.num_hidden_layers))
            if mtp_runs:
                rows += [config.num_hidden_layers + j for j in range(config.num_nextn_predict_layers)]
            balance_count = config.num_hidden_layers - config.num_hash_layers + (config.num_nextn_predict_layers if mtp_runs else 0)
            has_entries = seq_len // config.compress_rate_csa > 0
            kl_count = sum(1 for row in rows if config.layer_type(row) == CSA) if has_entries else 0
        balance = mean_over(auxiliary.balance, balance_count) if auxiliary.balance else None
        kl = mean_over(auxiliary.indexer_kl, kl_count) if auxiliary.indexer_kl else None
        return balance, kl

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor | None = None,
        loss_mask: torch.Tensor | None = None,
        *,
        compute_loss: bool = True,
        return_logits: bool = False,
        return_mtp_logits: bool = False,
        mtp_loss_weight: float = 0.3,
        balance_loss_weight: float | None = None,
        indexer_kl_weight: float = 1.0,
        sequence: SequenceShard | None = None,
        stage_input: tuple[torch.Tensor, torch.Tensor] | None = None,
        layers: list[int] | None = None,
        finish: bool | None = None,
    ) -> DeepseekV4Output:
        """Losses (`loss_mask[b, t]` = 1 where token t is a training target) and, on request, logits.

        lm_loss: mean cross-entropy of token t+1 from position t over targets in the same document;
        mtp_loss: the same for token t+2 from the MTP block; balance_loss: DeepSeek-V3's sequence-wise
        balance loss averaged over learned-routing layers; indexer_kl_loss: KL of each CSA indexer to
        its layer's attention (not computed, and the indexer gets no gradient, when its weight is 0); loss = lm + mtp_loss_weight * mtp + balance_loss_weight (default
        router_aux_loss_coef) * balance + indexer_kl_weight * indexer_kl.

        Context parallel (`sequence`): the inputs are the whole rows; logits, lm_loss, mtp_loss and
        lm_tokens are those of the chunk's positions (their targets taken from the whole rows, so a
        chunk's last positions keep theirs), balance_loss and indexer_kl_loss this chunk's share: their
        sums over the ranks are the whole rows' losses.

        Pipeline stage (this model with parts removed: `prune_to_stages`): the same forward skips what the
        stage lacks. `stage_input` (streams, next_embeddings) from the stage before replaces the embedding;
        `layers` are the blocks to run (one virtual stage of those held; default all); `finish` (default:
        whether the head is held) runs the head, the MTP block (on a stage whenever it is held, whatever
        its weight) and the LM losses, else the output carries `streams` and `next_embeddings` on. The
        balance and indexer KL losses are then the stage's part of the whole model's means."""
        batch, seq_len = input_ids.shape
        if position_ids is None:
            position_ids = torch.arange(seq_len, device=input_ids.device).expand(batch, seq_len)
        if loss_mask is None:
            loss_mask = torch.ones_like(input_ids)
        training_losses = compute_loss and self.training
        # a zero KL weight skips the indexer loss (and with it every gradient of the indexer)
        ctx = self._context(
            input_ids, position_ids, training_losses, indexer_loss=training_losses and indexer_kl_weight > 0,
            sequence=sequence, balance_loss=compute_loss,
        )
        self.take_auxiliary()  # drop anything a block kept from a forward whose losses nobody took
        is_stage = not self.holds_every_block()
        if stage_input is None:
            streams, next_embeddings = self._embed_streams(ctx.input_ids), None
        else:
            streams, next_embeddings = stage_input
        streams = self._run_blocks(streams, ctx, layers)
        finish = "head" in self._modules if finish is None else finish
        out = DeepseekV4Output()
        whole_len = input_ids.shape[1]
        if not finish:  # a pipeline stage before the last
            out.streams = streams
            out.next_embeddings = self._next_embeddings(input_ids, sequence) if next_embeddings is None else next_embeddings
            if compute_loss:
                out.balance_loss, out.indexer_kl_loss = self._auxiliary_means(self.take_auxiliary(), True, whole_len)
                out.loss = total_loss(
                    None, None, out.balance_loss, out.indexer_kl_loss, mtp_weight=mtp_loss_weight,
                    balance_weight=self.config.router_aux_loss_coef if balance_loss_weight is None else balance_loss_weight,
                    indexer_kl_weight=indexer_kl_weight,
                )
            return out
        hidden = self._final_hidden(streams)
        docs = ctx.docs if ctx.whole is None else ctx.whole.docs
        if return_logits:
            out.logits = self.head(hidden)
        mtp_hidden = None
        # a zero MTP weight skips the MTP block (nothing would learn from it), except on a pipeline stage
        mtp_runs = bool(self.mtp) and ((compute_loss and (mtp_loss_weight > 0 or is_stage)) or return_mtp_logits)
        if mtp_runs:
            if next_embeddings is None:
                next_embeddings = self._next_embeddings(input_ids, sequence)
            mtp_hidden = self.mtp[0](streams, next_embeddings, ctx)
            if return_mtp_logits:
                out.mtp_logits = self.head(mtp_hidden)
        auxiliary = self.take_auxiliary()
        # one row per routed block (main layers, then MTP); a block that did not run (the MTP block
        # when its loss weight is 0) keeps a zero row, which the bias update leaves alone
        out.expert_load = torch.zeros(
            self.config.num_hidden_layers + len(self.mtp), self.config.n_routed_experts, device=hidden.device
        )
        for row, load in auxiliary.expert_load.items():
            out.expert_load[row] = load
        if not compute_loss:
            return out
        out.lm_loss, out.lm_tokens = self._shifted_loss(hidden, input_ids, loss_mask, docs, shift=1, sequence=sequence)
        if mtp_hidden is not None and (mtp_loss_weight > 0 or is_stage):
            out.mtp_loss, _ = self._shifted_loss(mtp_hidden, input_ids, loss_mask, docs, shift=2, sequence=sequence)
        out.balance_loss, out.indexer_kl_loss = self._auxiliary_means(auxiliary, mtp_runs, whole_len)
        if out.balance_loss is None and not is_stage:
            out.balance_loss = torch.zeros((), device=hidden.device)  # a plain tensor: under TP the head is a DTensor
        out.loss = total_loss(
            out.lm_loss, out.mtp_loss, out.balance_loss, out.indexer_kl_loss, mtp_weight=mtp_loss_weight,
            balance_weight=self.config.router_aux_loss_coef if balance_loss_weight is None else balance_loss_weight,
            indexer_kl_weight=indexer_kl_weight,
        )
        return out

    def take_auxiliary(self) -> Auxiliary:
        """Take what this module's blocks (a pipeline stage: those it holds) kept from their last forward
        beside their outputs: balance losses, indexer KL losses, routed tokens per expert; each is taken
        once (a block that has not run since keeps nothing)."""
        auxiliary = Auxiliary(balance=[], indexer_kl=[], expert_load={})
        for row, block in self.routed_blocks():
            moe, attention = block.ffn, block.attn
            if moe.balance_loss is not None:
                auxiliary.balance.append(moe.balance_loss)
            if moe.expert_load is not None:
                auxiliary.expert_load[row] = moe.expert_load
            if attention.indexer_kl is not None:
                auxiliary.indexer_kl.append(attention.indexer_kl)
            moe.balance_loss = moe.expert_load = attention.indexer_kl = None
        return auxiliary

    def _shifted_loss(self, hidden, input_ids, loss_mask, docs, shift: int, sequence: SequenceShard | None = None):
        """Mean cross-entropy of token t+shift predicted at position t (fused head + loss). Under context
        parallel `hidden` holds the chunk's positions and the other inputs the whole rows."""
        targets = input_ids[:, shift:]
        keep = (loss_mask[:, shift:] > 0) & (docs[:, shift:] == docs[:, :-shift])
        targets = torch.where(keep, targets, torch.full_like(targets, -100))
        if sequence is None:
            rows = hidden[:, :-shift].reshape(-1, hidden.shape[-1])
        else:  # the whole rows' targets, cut to the chunk's positions (the last `shift` have none)
            keep = F.pad(keep, (0, shift), value=False)[:, sequence.start : sequence.end]
            targets = F.pad(targets, (0, shift), value=-100)[:, sequence.start : sequence.end]
            rows = hidden.reshape(-1, hidden.shape[-1])
        count = keep.sum()
        if int(count) == 0:
            return (rows.sum() * 0.0 + local_tensor(self.head.weight).sum() * 0.0).float(), count
        # the fused kernel, or under tensor parallel the vocab-parallel loss (`vocab_parallel.py`)
        total = linear_cross_entropy_sum(rows, self.head.weight, targets.reshape(-1), ignore_index=-100)
        return total / count, count

    def routed_gates(self) -> list[Gate]:
        """The gate of every block in expert_load's row order (main layers, then MTP)."""
        return [gate for _, gate in self.routed_gate_rows()]

    def routed_gate_rows(self) -> list[tuple[int, Gate]]:
        """(row, gate) of every block this module holds (`routed_blocks`)."""
        return [(row, block.ffn.gate) for row, block in self.routed_blocks()]

    def routed_blocks(self) -> list[tuple[int, Block]]:
        """(row, block) of every block this module holds, the row being the block's in the whole model's
        order (main layers, then MTP): a pipeline stage holds some of them (`layers` keyed by layer index)."""
        layers = getattr(self, "layers", None) or {}
        if isinstance(layers, nn.ModuleDict):
            blocks = [(int(index), block) for index, block in layers.items()]
        else:
            blocks = list(enumerate(layers))
        mtp = getattr(self, "mtp", None) or []
        return blocks + [(self.config.num_hidden_layers + j, block) for j, block in enumerate(mtp)]

    @torch.no_grad()
    def update_expert_bias(self, expert_load: torch.Tensor, rate: float) -> None:
        """Aux-loss-free balancing: raise the routing bias of experts that got fewer tokens than the
        mean and lower it for those that got more, by `rate` (sign rule; hash layers and rows of no
        tokens skipped). `expert_load` [layers + MTP layers, E] is summed over data-parallel ranks by the
        caller; a pipeline stage reads the rows of its own blocks."""
        rows = self.config.num_hidden_layers + self.config.num_nextn_predict_layers
        if expert_load.shape[0] != rows:
            raise ValueError(f"expert_load has {expert_load.shape[0]} rows; this model has {rows} routed layers")
        for row, gate in self.routed_gate_rows():
            load = expert_load[row]
            if gate.hashed or not bool(load.any()):
                continue
            load = load.to(gate.bias.device).float()
            gate.bias += rate * torch.sign(load.mean() - load)

    # ---- generation --------------------------------------------------------------------------------
    @torch.no_grad()
    def generate(
        self,
        input_ids: list[list[int]] | torch.Tensor,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        eos_token_id: int | list[int] | None = None,
        seed: int | None = None,
        on_step: Callable[[int, int], None] | None = None,
    ) -> list[list[int]]:
        """Continue each prompt (batched, prompts may differ in length); greedy when temperature is 0,
        else nucleus sampling. Returns the new tokens of each prompt, up to and including an EOS token.
        `on_step(tokens generated, rows finished)` is called after every new token (progress displays).

        Prompts are right-padded and run once through the model (prefill), which keeps each layer's
        per-token state: window keys and the compressors' projections. Each new token then runs
        through the blocks alone at its row's own position, attending to the cache; padding is
        never visible because every row reads only positions before its own."""
        if isinstance(input_ids, torch.Tensor):
            prompts = [row.tolist() for row in input_ids]
        else:
            prompts = [list(p) for p in input_ids]
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("generate: every prompt needs at least one token")
        stop = set([eos_token_id] if isinstance(eos_token_id, int) else (eos_token_id or []))
        device = self.head.weight.device
        generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
        batch = len(prompts)
        lengths = torch.tensor([len(p) for p in prompts], device=device)
        width = int(lengths.max())
        capacity = width + max_new_tokens
        padded = torch.zeros(batch, width, dtype=torch.long, device=device)
        for row, prompt in enumerate(prompts):
            padded[row, : len(prompt)] = torch.tensor(prompt, device=device)
        new_tokens: list[list[int]] = [[] for _ in prompts]
        finished = [max_new_tokens <= 0] * batch
        was_training = self.training
        self.eval()
        try:
            positions = torch.arange(width, device=device).expand(batch, width)
            ctx = self._context(padded, positions, training_losses=False)
            ctx.capture = {}
            hidden, _, _ = self.hidden_states(padded, positions, ctx)
            cache = {module: _grow(state, capacity) for module, state in ctx.capture.items()}
            pool_positions = torch.arange(capacity, device=device).expand(batch, capacity)
            pool_ctx = self._context(torch.zeros_like(pool_positions), pool_positions, training_losses=False)
            last = hidden[torch.arange(batch, device=device), lengths - 1]
            for _ in range(max_new_tokens):
                chosen = _sample(self.head(last).float(), temperature, top_p, generator)
                for row in range(batch):
                    if not finished[row]:
                        token = int(chosen[row])
                        new_tokens[row].append(token)
                        finished[row] = token in stop or len(new_tokens[row]) >= max_new_tokens
                if on_step is not None:
                    on_step(max(len(tokens) for tokens in new_tokens), sum(finished))
                if all(finished):
                    break
                last = self._decode_step(chosen.view(batch, 1), lengths.view(batch, 1), cache, pool_ctx)
                lengths = lengths + 1
        finally:
            self.train(was_training)
        return new_tokens

    def _decode_step(self, tokens: torch.Tensor, positions: torch.Tensor, cache: dict, pool_ctx: _Context) -> torch.Tensor:
        """Final hidden state [B, D] of one new token per row at `positions` [B, 1]."""
        ctx = self._context(tokens, positions, training_losses=False)
        streams = self.embed(tokens).unsqueeze(2).expand(-1, -1, self.config.hc_mult, -1).contiguous()
        for layer in self.layers:
            streams = layer.decode(streams, ctx, cache, pool_ctx)
        collapsed = HyperHead.collapse(streams, self.hc_head_fn, self.hc_head_base, self.hc_head_scale, self.config)
        return self.norm(collapsed)[:, 0]


def _grow(state, capacity: int):
    """A prefill state [B, S, ...] (or a tuple of them) copied into zeroed [B, capacity, ...] buffers."""
    if isinstance(state, tuple):
        return tuple(_grow(part, capacity) for part in state)
    buffer = state.new_zeros(state.shape[0], capacity, *state.shape[2:])
    buffer[:, : state.shape[1]] = state
    return buffer


def _sample(logits: torch.Tensor, temperature: float, top_p: float, generator) -> torch.Tensor:
    if not bool(torch.isfinite(logits).all()):  # argmax would pick garbage and multinomial raise a bare error
        raise ValueError(
            "generate: the model's logits are NaN or Inf (its weights hold non-finite values, or the compute "
            "dtype overflowed): check the checkpoint, or run it in float32"
        )
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probabilities = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probabilities.sort(dim=-1, descending=True)
        # keep the smallest prefix whose mass reaches top_p (always at least the top token)
        drop = sorted_probs.cumsum(dim=-1) - sorted_probs >= top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probabilities = torch.zeros_like(probabilities).scatter(-1, order, sorted_probs)
    return torch.multinomial(probabilities, 1, generator=generator).squeeze(-1)


def count_parameters(model: nn.Module, config: DeepseekV4Config) -> dict[str, int]:
    """Total parameters, and those one token uses (top-k of the routed experts), main model and MTP.

    `active_matmul_without_mtp` is DeepSeek's published "activated" convention: the main model without
    the MTP block and without the embedding table (a token reads one row of it). It gives V4-Flash
    13.27B ("13B"), V4-Pro 48.85B ("49B"), and reproduces V2 (20.85B, "21B"), V2-Lite (2.45B,
    "2.4B") and V3 (36.63B, "37B") from transformers' models: the published figures are rounded by
    up to about 2% (tests/models/test_model_config.py)."""
    total = sum(p.numel() for p in model.parameters())
    routed = sum(p.numel() for n, p in model.named_parameters() if ".experts.w" in n)
    mtp = sum(p.numel() for n, p in model.named_parameters() if n.startswith("mtp."))
    mtp_routed = sum(p.numel() for n, p in model.named_parameters() if n.startswith("mtp.") and ".experts.w" in n)
    active_share = config.num_experts_per_tok / config.n_routed_experts
    active = total - routed + int(routed * active_share)
    active_without_mtp = active - (mtp - mtp_routed + int(mtp_routed * active_share))
    # a token reads one row of the embedding table: the table is not "used" like a matrix
    embedding_rows = config.vocab_size * config.hidden_size - config.hidden_size
    return {
        "total": total,
        "active": active,
        "total_without_mtp": total - mtp,
        "active_without_mtp": active_without_mtp,
        "active_matmul_without_mtp": active_without_mtp - embedding_rows,
    }


__all__ = ["DeepseekV4ForCausalLM", "DeepseekV4Output", "SequenceShard", "count_parameters"]
