"""The `cpu` backend: implementations that beat the reference on CPU tensors, each held to it by tests.

Measured choices (see benchmarks/bench_kernels.py for the side-by-side numbers):
- elementwise chains (RMSNorm, RoPE, clamped SwiGLU): the reference maths compiled with torch.compile
  (Inductor fuses each chain, forward and backward, into one vectorized loop; RoPE's backward is its
  forward with the sine negated); a process that cannot compile falls back to the eager reference
  once, with a warning. bf16 RoPE works on int32 words, one interleaved channel pair per word, and
  rounds to bf16 itself: the same bits as the reference at 5-8x its compiled speed;
- Sinkhorn: the same maths with the tokens moved to the last, contiguous axis, so the 20 rounds of
  4-wide row and column sums become whole-vector additions instead of tiny strided reductions;
- sparse attention: chunked over queries (half a window per chunk), window keys and compressed
  entries in one product, fused softmax passes, and a hand-written backward that recomputes each
  chunk, so no [B, H, S, S] tensor is ever held;
- linear + cross-entropy: gradients formed during the forward, so the [N, V] logits never exist in
  full: in whole-vocabulary token blocks with one fused (compiled) softmax pass where the vocabulary
  is narrow enough, three products per token and none repeated; in vocabulary slices with an online
  log-sum-exp where it is wide;
- grouped matmul: one product per expert on a bucketed row count, so oneDNN's per-shape kernels are
  compiled once and reused across steps (torch._grouped_mm's CPU path is the same loop, on exact
  row counts, and recompiled kernels at every step).

Measured and dropped: a query-chunked indexer scoring (6x less memory than the reference but 1.5-3x
slower on this CPU).
- MoE permute / unpermute: gathers both ways. Differentiated automatically, each gather's backward
  is a scatter-add (index_put with accumulate, one row at a time); here the inverse permutation turns
  every backward into a gather too, and the weighted sum runs fused.
"""

from __future__ import annotations

import logging
import types

import torch
from torch.utils import _python_dispatch
from torch.utils.checkpoint import _StopRecomputationError

from ascend_kernels import buffers, reference
from ascend_kernels.registry import register

logger = logging.getLogger("ascend_kernels")

# Compile once for every shape: these functions see many sequence lengths and batch sizes.
_COMPILE_OPTIONS = {"dynamic": True, "fullgraph": True}
# Dynamic shapes still specialize a few facts (a dim of size 1, an empty slice, dtypes, the shape of
# a parameter): one model calls RoPE in about ten such variants, past torch's default limit of 8
# graphs per function, after which a fullgraph compile fails and the function would run eager.
_RECOMPILE_LIMIT = 64
# Raised once for the process (a context manager around every call cost about 17 us a call).
torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, _RECOMPILE_LIMIT)


class _CompiledOrEager:
    """A function compiled on first use; if compilation fails (no C compiler, unsupported platform) it
    logs once and runs the eager function from then on."""

    def __init__(self, function, dynamic: bool | None = True):
        self.function = function
        self.dynamic = dynamic
        self.compiled = None
        self.failed = False

    def __call__(self, *args):
        # Code under a Python dispatch mode (memory tracers, FlopCounterMode) cannot be compiled: run
        # eager for that call only.
        if not self.failed and _python_dispatch._get_current_dispatch_mode() is None:
            if self.compiled is None:
                self.compiled = torch.compile(self.function, **{**_COMPILE_OPTIONS, "dynamic": self.dynamic})
            try:
                return self.compiled(*args)
            except _StopRecomputationError:
                # Activation checkpointing ends a recomputation early by raising through the forward
                # it re-runs: that is control flow, not a compile failure.
                raise
            except Exception as error:  # inductor/dynamo raise many types; any other means "run eager"
                self.failed = True
                logger.warning(
                    "ascend_kernels: torch.compile failed for %s (%s: %s); using the eager reference",
                    self.function.__name__,
                    type(error).__name__,
                    str(error).splitlines()[0] if str(error) else "",
                )
        return self.function(*args)


def _function_copy(function, tag: str):
    """A copy of `function` with a code object of its own: Dynamo keeps its compiled graphs per code
    object, so each copy gets a cache (and specializations) of its own."""
    name = f"{function.__name__}_{tag}"
    code = function.__code__.replace(co_name=name)
    copy = types.FunctionType(code, function.__globals__, name, function.__defaults__, function.__closure__)
    copy.__doc__ = function.__doc__
    return copy


def _plain(*tensors: torch.Tensor | None) -> bool:
    # Tensor subclasses (DTensor under tensor parallelism) go to the reference, which composes with them.
    return all(t is None or type(t) in (torch.Tensor, torch.nn.Parameter) for t in tensors)


def _weighted_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return reference.rms_norm(x, weight, eps)


def _unweighted_rms_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    return reference.rms_norm(x, None, eps)


_compiled_weighted_rms_norm = _CompiledOrEager(_weighted_rms_norm)
_compiled_unweighted_rms_norm = _CompiledOrEager(_unweighted_rms_norm)


@register("rms_norm", "cpu")
def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    if not _plain(x, weight) or x.dtype == torch.float64:
        return reference.rms_norm(x, weight, eps)
    # One compiled graph per tensor rank is avoided by folding the leading dims.
    flat = x.reshape(-1, x.shape[-1])
    if weight is None:
        return _compiled_unweighted_rms_norm(flat, eps).view(x.shape)
    return _compiled_weighted_rms_norm(flat, weight, eps).view(x.shape)


def _rope_bshd(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return reference.apply_rope(x, cos, sin)


_compiled_rope = _CompiledOrEager(_rope_bshd)


def _rotate_bf16_words(words: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on bf16 data seen as int32 words, one interleaved (even, odd) channel pair per word.

    words [M, H, W] (the channels of x, two per word: the even channel in the low half), cos/sin
    [M, R] float32 for the last R words. A bf16 value is the top half of a float32, so each half
    becomes a float32 by a shift or a mask; the rotated pair is rounded back to bf16 (round to nearest
    even, as `.to(torch.bfloat16)` does; NaN stays NaN) and packed into one word again. Compiled, this
    is one vectorized pass over whole words: the interleaved [..., R, 2] layout the reference works on
    made Inductor emit scalar code 5-10x slower."""
    rope_words = cos.shape[-1]
    tail = words[..., -rope_words:]
    even = (tail << 16).view(torch.float32)
    odd = (tail & -65536).view(torch.float32)
    c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)
    new_even = even * c - odd * s
    new_odd = odd * c + even * s
    even_bits, odd_bits = new_even.view(torch.int32), new_odd.view(torch.int32)
    low = torch.where(new_even != new_even, 0x7FC0, (even_bits + 0x7FFF + ((even_bits >> 16) & 1)) >> 16) & 0xFFFF
    high = torch.where(new_odd != new_odd, 0x7FC0, (odd_bits + 0x7FFF + ((odd_bits >> 16) & 1)) >> 16) << 16
    return torch.cat([words[..., :-rope_words], high | low], dim=-1)


# One compiled copy of the word kernel per (words per row, rope words): those sizes stay static, so the
# inner loop vectorizes, while rows and heads are dynamic (one graph serves every batch and sequence).
_rope_word_kernels: dict[tuple[int, int], _CompiledOrEager] = {}


def _rope_word_kernel(width: int, rope_words: int) -> _CompiledOrEager:
    key = (width, rope_words)
    if key not in _rope_word_kernels:
        _rope_word_kernels[key] = _CompiledOrEager(_function_copy(_rotate_bf16_words, f"w{width}_r{rope_words}"), dynamic=None)
    return _rope_word_kernels[key]


def _rope_kernel(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, S, H, D] contiguous, cos/sin [B, S, R] -> the rotated x."""
    batch, seq_len, heads, dim = x.shape
    if x.dtype != torch.bfloat16 or dim % 2:
        return _compiled_rope(x, cos, sin)
    if x.storage_offset() % 2:  # an int32 view must start on a word boundary
        x = x.clone()
    # through 1-D: a contiguous tensor may still carry odd strides on its size-1 dims
    words = x.reshape(-1).view(torch.int32).view(batch * seq_len, heads, dim // 2)
    rows_cos = cos.reshape(batch * seq_len, -1).float()
    rows_sin = sin.reshape(batch * seq_len, -1).float()
    for tensor, dims in ((words, (0, 1)), (rows_cos, (0,)), (rows_sin, (0,))):
        for d in dims:
            torch._dynamo.maybe_mark_dynamic(tensor, d)
    kernel = _rope_word_kernel(dim // 2, cos.shape[-1])
    return kernel(words, rows_cos, rows_sin).view(torch.bfloat16).view(x.shape)


class _Rope(torch.autograd.Function):
    """The rotation is orthogonal, so its backward is the same kernel with the sine negated.
    (Letting Inductor differentiate the strided pair layout itself produced wrong gradients in torch
    2.13; the tests caught it.)"""

    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return _rope_kernel(x.contiguous(), cos, sin)

    @staticmethod
    def backward(ctx, grad_output):
        cos, sin = ctx.saved_tensors
        return _rope_kernel(grad_output.contiguous(), cos, -sin), None, None


@register("apply_rope", "cpu")
def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    if not _plain(x, cos, sin) or x.dtype == torch.float64:
        return reference.apply_rope(x, cos, sin, inverse)
    # Bring every call to x [B, S, H, D] and cos/sin [B or 1, S, R] so one graph serves them all; the
    # inverse rotation is the forward one with the sine negated (cheap: sin has no head axis).
    x4 = x if x.dim() == 4 else x.unsqueeze(2)
    if cos.dim() == 2:
        cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)
    if inverse:
        sin = -sin
    out = _Rope.apply(x4, cos.expand(x4.shape[0], -1, -1), sin.expand(x4.shape[0], -1, -1))
    return out if x.dim() == 4 else out.squeeze(2)


def _clamped_swiglu(gate: torch.Tensor, up: torch.Tensor, limit: float) -> torch.Tensor:
    return reference.swiglu(gate, up, limit)


def _plain_swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return reference.swiglu(gate, up, None)


# Two graphs rather than a limit of +inf: Inductor 2.13 miscompiled the clamp at an infinite bound.
_compiled_clamped_swiglu = _CompiledOrEager(_clamped_swiglu)
_compiled_plain_swiglu = _CompiledOrEager(_plain_swiglu)


@register("swiglu", "cpu")
def swiglu(gate: torch.Tensor, up: torch.Tensor, limit: float | None = None) -> torch.Tensor:
    if not _plain(gate, up) or gate.dtype == torch.float64:
        return reference.swiglu(gate, up, limit)
    flat_gate, flat_up = gate.reshape(-1, gate.shape[-1]), up.reshape(-1, up.shape[-1])
    if limit:
        return _compiled_clamped_swiglu(flat_gate, flat_up, float(limit)).view(gate.shape)
    return _compiled_plain_swiglu(flat_gate, flat_up).view(gate.shape)


def _sinkhorn_rounds(comb: torch.Tensor, iters: int, eps: float) -> torch.Tensor:
    # comb [n, n, T] float32 logits, tokens last and contiguous: each row or column sum adds n token
    # vectors. Compiled, the 2 * iters normalizations become one loop (its backward another).
    comb = torch.softmax(comb, dim=1) + eps
    comb = comb / (comb.sum(dim=0, keepdim=True) + eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(dim=1, keepdim=True) + eps)
        comb = comb / (comb.sum(dim=0, keepdim=True) + eps)
    return comb


_compiled_sinkhorn_rounds = _CompiledOrEager(_sinkhorn_rounds)


@register("sinkhorn", "cpu")
def sinkhorn(logits: torch.Tensor, iters: int = 20, eps: float = 1e-6) -> torch.Tensor:
    shape, n = logits.shape, logits.shape[-1]
    if logits.dtype == torch.float64:
        return reference.sinkhorn(logits, iters, eps)
    comb = logits.float().reshape(-1, n, n).permute(1, 2, 0).contiguous()
    # back to tokens-first and contiguous: kernels that read comb later follow its strides
    return _compiled_sinkhorn_rounds(comb, int(iters), float(eps)).permute(2, 0, 1).contiguous().view(shape)


# ----------------------------------------------------------------------------------------------------
# Manifold-constrained hyper-connections: each block site reads and writes four [B, S, D] streams.
#
# Both ops have hand-written backward passes: differentiated automatically, the broadcast products
# over the [N, n, n, D] (stream, stream, channel) space made Inductor write that space out (8x the
# streams) in the backward. Products with the mix weights run in float32 forward, as V4 does; the
# gradients that flow back into the streams are formed in the streams' dtype, which is where they end.

_HC_TOKENS_PER_BLOCK = 1024  # float32 copies of one block of flattened streams stay small


class _StreamMixes(torch.autograd.Function):
    """mixes = rms(flat) * (flat @ fn.T): the RMS scale is applied to the [N, M] mixes, not to the
    [N, n*D] inputs (the same product without a normalized float32 copy of the streams)."""

    @staticmethod
    def forward(ctx, flat, fn, norm_eps: float):
        # flat [N, n*D] (streams' dtype), fn [M, n*D] -> float32 [N, M]
        wide_fn = fn.float()
        raw = torch.empty(flat.shape[0], fn.shape[0], dtype=torch.float32, device=flat.device)
        inverse_rms = torch.empty(flat.shape[0], dtype=torch.float32, device=flat.device)
        for start in range(0, flat.shape[0], _HC_TOKENS_PER_BLOCK):
            block = flat[start : start + _HC_TOKENS_PER_BLOCK].float()
            inverse_rms[start : start + block.shape[0]] = torch.rsqrt(block.square().mean(-1) + norm_eps)
            torch.mm(block, wide_fn.t(), out=raw[start : start + block.shape[0]])
        ctx.save_for_backward(flat, fn, raw, inverse_rms)
        return raw * inverse_rms.unsqueeze(-1)

    @staticmethod
    def backward(ctx, grad_mixes):
        flat, fn, raw, inverse_rms = ctx.saved_tensors
        grad_mixes = grad_mixes.float()
        grad_raw = grad_mixes * inverse_rms.unsqueeze(-1)
        # d inverse_rms / d flat = -inverse_rms^3 * flat / (n*D)
        coefficient = -(grad_mixes * raw).sum(-1) * inverse_rms.pow(3) / flat.shape[-1]
        low = grad_raw.to(flat.dtype)
        grad_flat = _compiled_add_scaled_rows(low @ fn.to(flat.dtype), coefficient, flat)
        grad_fn = (low.t() @ flat).to(fn.dtype) if ctx.needs_input_grad[1] else None
        return grad_flat, grad_fn, None


def _add_scaled_rows(product, coefficient, flat):
    # product [N, K] + coefficient [N] * flat [N, K], in flat's dtype
    return (product.float() + coefficient.unsqueeze(-1) * flat.float()).to(flat.dtype)


# Sums over the n (hc_mult, 4) streams are written out term by term: as a reduction, Inductor kept the
# float32 sum in a buffer of its own (twice the size of the bf16 result, and above glibc's mmap
# threshold for the [N, n, D] ones, so page-faulted in afresh at every call) before casting it.


def _hc_collapse(pre, streams):
    # pre [N, n] float32, streams [N, n, D] -> sum_j pre_j * stream_j [N, D] in streams' dtype
    total = pre[:, 0:1] * streams[:, 0].float()
    for j in range(1, streams.shape[1]):
        total = total + pre[:, j : j + 1] * streams[:, j].float()
    return total.to(streams.dtype)


def _hc_post_forward(out, post, comb, streams):
    # new_k = post_k * out + sum_j comb[j, k] * stream_j for out [..., D], post [..., n], comb [..., n, n],
    # streams [..., n, D] -> [..., n, D] in streams' dtype
    total = post.unsqueeze(-1) * out.float().unsqueeze(-2)
    for j in range(streams.shape[-2]):
        total = total + comb[..., j, :].unsqueeze(-1) * streams[..., j : j + 1, :].float()
    return total.to(streams.dtype)


# The backward of new_k from its gradient g_k [N, n, D], in three graphs (one graph for all four
# came out half as fast):
def _hc_post_grad_out_and_post(grad, out, post):
    # out: sum_k post_k g_k [N, D]; post_k: g_k . out [N, n]
    grad_out = post[:, 0:1] * grad[:, 0].float()
    for k in range(1, grad.shape[1]):
        grad_out = grad_out + post[:, k : k + 1] * grad[:, k].float()
    return grad_out.to(out.dtype), (grad.float() * out.float().unsqueeze(1)).sum(dim=-1)


def _hc_post_grad_comb(grad, streams):
    # comb[j, k]: stream_j . g_k [N, n, n]
    return (streams.float().unsqueeze(-2) * grad.float().unsqueeze(-3)).sum(dim=-1)


def _hc_post_grad_streams(grad, comb):
    # stream_j: sum_k comb[j, k] g_k [N, n, D] in grad's dtype
    total = comb[:, :, 0:1] * grad[:, 0:1].float()
    for k in range(1, grad.shape[1]):
        total = total + comb[:, :, k : k + 1] * grad[:, k : k + 1].float()
    return total.to(grad.dtype)


_compiled_add_scaled_rows = _CompiledOrEager(_add_scaled_rows)
_compiled_hc_collapse = _CompiledOrEager(_hc_collapse)
_compiled_hc_post_forward = _CompiledOrEager(_hc_post_forward)
_compiled_hc_post_grad_out_and_post = _CompiledOrEager(_hc_post_grad_out_and_post)
_compiled_hc_post_grad_comb = _CompiledOrEager(_hc_post_grad_comb)
_compiled_hc_post_grad_streams = _CompiledOrEager(_hc_post_grad_streams)


class _HcPost(torch.autograd.Function):
    """Runs on contiguous [N, ...] token-flattened operands: with a strided comb (Sinkhorn's
    token-last layout) Inductor ordered the loops by its strides and ran the backward 5-10x slower."""

    @staticmethod
    def forward(ctx, out, post, comb, streams):
        n, width = streams.shape[-2:]
        # contiguous operands: Inductor orders its loops by the inputs' strides. The forward keeps the
        # leading dimensions, so its result is a tensor of its own, not a view (FSDP2 warns when a
        # block returns a view); the backward takes them flattened to [N, ...].
        out, post, comb, streams = out.contiguous(), post.contiguous(), comb.contiguous(), streams.contiguous()
        ctx.save_for_backward(out.view(-1, width), post.view(-1, n), comb.view(-1, n, n), streams.view(-1, n, width))
        return _compiled_hc_post_forward(out, post, comb, streams)

    @staticmethod
    def backward(ctx, grad):
        out, post, comb, streams = ctx.saved_tensors
        shape = grad.shape
        grad = grad.reshape(streams.shape).contiguous()
        grad_out, grad_post = _compiled_hc_post_grad_out_and_post(grad, out, post)
        grad_comb = _compiled_hc_post_grad_comb(grad, streams)
        grad_streams = _compiled_hc_post_grad_streams(grad, comb)
        return (
            grad_out.view(*shape[:-2], shape[-1]),
            grad_post.to(post.dtype).view(shape[:-1]),
            grad_comb.to(comb.dtype).view(*shape[:-1], shape[-2]),
            grad_streams.to(streams.dtype).view(shape),
        )


@register("hc_pre", "cpu")
def hc_pre(streams, fn, base, scale, iters: int = 20, eps: float = 1e-6, norm_eps: float = 1e-6):
    if not _plain(streams, fn, base, scale) or streams.dtype == torch.float64:
        return reference.hc_pre(streams, fn, base, scale, iters, eps, norm_eps)
    n = streams.shape[-2]
    mixes = _StreamMixes.apply(streams.reshape(-1, n * streams.shape[-1]), fn, float(norm_eps))
    # the [N, (2 + n) * n] weights cost little eagerly; the Sinkhorn rounds are compiled on their own
    pre, post, comb = reference.hc_site_weights(mixes.view(*streams.shape[:-2], -1), n, base, scale, iters, eps, sinkhorn)
    n, width = streams.shape[-2:]
    collapsed = _compiled_hc_collapse(pre.reshape(-1, n), streams.reshape(-1, n, width))
    return collapsed.view(*streams.shape[:-2], width), post, comb


@register("hc_head", "cpu")
def hc_head(streams, fn, base, scale, eps: float = 1e-6, norm_eps: float = 1e-6):
    if not _plain(streams, fn, base, scale) or streams.dtype == torch.float64:
        return reference.hc_head(streams, fn, base, scale, eps, norm_eps)
    n, width = streams.shape[-2:]
    mixes = _StreamMixes.apply(streams.reshape(-1, n * width), fn, float(norm_eps))
    pre = torch.sigmoid(mixes * scale.float() + base.float()) + eps
    collapsed = _compiled_hc_collapse(pre, streams.reshape(-1, n, width))
    return collapsed.view(*streams.shape[:-2], width)


@register("hc_post", "cpu")
def hc_post(out, post, comb, streams):
    if not _plain(out, post, comb, streams) or streams.dtype == torch.float64:
        return reference.hc_post(out, post, comb, streams)
    # A fresh tensor, not a view: it leaves the block, and FSDP's backward hooks must see it whole.
    return _HcPost.apply(out, post, comb, streams)


# ----------------------------------------------------------------------------------------------------
# Sparse attention, chunked over queries.


def _query_chunk_size(window: int, seq_len: int) -> int:
    """Queries per chunk: half a window. A chunk's keys span chunk + window - 1 positions, so the
    share of its [chunk, keys] logits that lie inside the window is about 2/3 (1/2 with a whole
    window per chunk), while its products stay large enough to run near the matmul peak."""
    return max(16, min(256, window // 2, seq_len))


def _softmax_with_sink(logits, visible, sink, scale: float):
    """logits [B, c, H, K] (the matmul dtype), visible [B, c, 1, K] bool, sink [H] float32 ->
    probabilities [B, c, H, K] in logits' dtype and the float32 log-normalizer [B, c, H] (the sink joins
    every softmax with a zero value)."""
    scaled = torch.where(visible, logits.float() * scale, float("-inf"))
    sink_logits = sink.view(1, 1, -1)
    maximum = torch.maximum(scaled.amax(dim=-1), sink_logits)
    exponentials = torch.exp(scaled - maximum.unsqueeze(-1))
    total = exponentials.sum(dim=-1) + torch.exp(sink_logits - maximum)
    return (exponentials / total.unsqueeze(-1)).to(logits.dtype), maximum + torch.log(total)


def _softmax_backward(logits, visible, log_normalizer, grad_probabilities, delta, scale: float):
    """From the chunk's recomputed logits: the probabilities (in logits' dtype, for the value
    gradient) and d(loss)/d(logits) = p * (dP - delta) * scale (in logits' dtype)."""
    probabilities = torch.where(
        visible, torch.exp(logits.float() * scale - log_normalizer.unsqueeze(-1)), 0.0
    )
    grad_logits = probabilities * (grad_probabilities.float() - delta.unsqueeze(-1)) * scale
    return probabilities.to(logits.dtype), grad_logits.to(logits.dtype)


def _rowwise_dot(a, b):
    # sum over the last axis of a * b, in float32
    return (a.float() * b.float()).sum(-1)


_compiled_softmax_with_sink = _CompiledOrEager(_softmax_with_sink)
_compiled_rowwise_dot = _CompiledOrEager(_rowwise_dot)
_compiled_softmax_backward = _CompiledOrEager(_softmax_backward)


class _ChunkedAttentionPlan:
    """What forward and backward share: the chunks, and per chunk its keys (window positions then the
    compressed entries, one matrix so each product is one matmul) and which of them each query sees."""

    def __init__(self, kv, compressed_kv, compressed_indices, thresholds, documents, window, dtype):
        batch, seq_len, _ = kv.shape
        self.window, self.kv = window, kv.to(dtype)
        self.compressed_kv = compressed_kv.to(dtype) if compressed_kv is not None else None
        self.documents = documents
        self.single_document = bool((documents == documents[:, :1]).all())
        self.chunk = _query_chunk_size(window, seq_len)
        self.compressed_visible = None
        if compressed_kv is not None:
            entries = compressed_kv.shape[1]
            if compressed_indices is not None:
                listed = torch.zeros(batch, seq_len, entries + 1, dtype=torch.bool, device=kv.device)
                listed.scatter_(-1, torch.where(compressed_indices >= 0, compressed_indices, entries).long(), True)
                self.compressed_visible = listed[..., :entries]  # [B, S, T]
            else:
                positions = torch.arange(entries, device=kv.device)
                self.compressed_visible = positions.view(1, 1, -1) < thresholds.unsqueeze(-1)
            # Entries are causal: a chunk needs only those up to the last one any of its queries sees
            # (on average half of them), so its products stop there.
            index = torch.arange(entries, device=kv.device)
            last_seen = torch.where(self.compressed_visible.any(dim=0), index, -1).amax(dim=-1).tolist()  # [S]
            self.entries_used = {start: max(last_seen[start:end]) + 1 for start, end in self.chunks()}

    def chunks(self):
        seq_len = self.kv.shape[1]
        for start in range(0, seq_len, self.chunk):
            yield start, min(seq_len, start + self.chunk)

    def used(self, start: int) -> int:
        """How many compressed entries (from the first) the chunk starting at `start` attends to."""
        return self.entries_used[start] if self.compressed_kv is not None else 0

    def keys(self, start: int, end: int) -> tuple[int, torch.Tensor]:
        """(first window position, keys [B, L + T_used, D])."""
        low = max(0, start - self.window + 1)
        window_keys = self.kv[:, low:end]
        used = self.used(start)
        if not used:
            return low, window_keys
        return low, torch.cat([window_keys, self.compressed_kv[:, :used]], dim=1)

    def visible(self, start: int, end: int, low: int) -> torch.Tensor:
        """[B, c, 1, L + T_used] bool."""
        device = self.kv.device
        distance = torch.arange(start, end, device=device).view(-1, 1) - torch.arange(low, end, device=device).view(1, -1)
        mask = ((distance >= 0) & (distance < self.window)).unsqueeze(0)  # [1, c, L]
        if not self.single_document:
            mask = mask & (self.documents[:, start:end].unsqueeze(-1) == self.documents[:, low:end].unsqueeze(1))
        mask = mask.expand(self.kv.shape[0], -1, -1)
        used = self.used(start)
        if used:
            mask = torch.cat([mask, self.compressed_visible[:, start:end, :used]], dim=-1)
        return mask.unsqueeze(2)


class _ChunkedSparseAttention(torch.autograd.Function):
    """Flash-style attention on the CPU: query chunks of half a window, the products in the inputs'
    dtype (bf16 products accumulate in float32 and round their result, as every bf16 matmul of the
    model does), the softmax and its backward in float32 as fused (compiled) passes, and a backward
    that recomputes each chunk's logits from the saved log-normalizer instead of holding them."""

    @staticmethod
    def forward(ctx, query, kv, sink, compressed_kv, compressed_indices, thresholds, documents, window, scale):
        batch, seq_len, heads, head_dim = query.shape
        plan = _ChunkedAttentionPlan(kv, compressed_kv, compressed_indices, thresholds, documents, window, query.dtype)
        output = buffers.empty(query.shape, dtype=query.dtype, device=query.device)
        log_normalizer = buffers.empty((batch, seq_len, heads), dtype=torch.float32, device=query.device)
        sink_logits = sink.float()
        for start, end in plan.chunks():
            low, keys = plan.keys(start, end)
            q_rows = query[:, start:end].reshape(batch, -1, head_dim)  # [B, c*H, D]
            logits = torch.matmul(q_rows, keys.transpose(1, 2)).view(batch, end - start, heads, -1)
            probabilities, normalizer = _compiled_softmax_with_sink(logits, plan.visible(start, end, low), sink_logits, scale)
            values = torch.matmul(probabilities.view(batch, -1, keys.shape[1]), keys)
            output[:, start:end] = values.view(batch, end - start, heads, head_dim)
            log_normalizer[:, start:end] = normalizer
        ctx.save_for_backward(query, kv, sink, compressed_kv, compressed_indices, thresholds, documents,
                              output, log_normalizer)
        ctx.window, ctx.scale = window, scale
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (query, kv, sink, compressed_kv, compressed_indices, thresholds, documents,
         output, log_normalizer) = ctx.saved_tensors
        scale = ctx.scale
        batch, seq_len, heads, head_dim = query.shape
        plan = _ChunkedAttentionPlan(kv, compressed_kv, compressed_indices, thresholds, documents, ctx.window, query.dtype)
        grad_output = grad_output.to(query.dtype)
        grad_query = buffers.empty(query.shape, dtype=query.dtype, device=query.device)
        grad_kv = torch.zeros(kv.shape, dtype=torch.float32, device=kv.device)
        entries = compressed_kv.shape[1] if compressed_kv is not None else 0
        grad_compressed = torch.zeros(compressed_kv.shape, dtype=torch.float32, device=kv.device) if entries else None
        grad_sink = torch.zeros(heads, dtype=torch.float32, device=query.device)
        for start, end in plan.chunks():
            low, keys = plan.keys(start, end)
            q_rows = query[:, start:end].reshape(batch, -1, head_dim)
            grad_rows = grad_output[:, start:end].reshape(batch, -1, head_dim)
            normalizer = log_normalizer[:, start:end]
            # delta = sum_j p_j (dO . v_j) = dO . O per (query, head): the softmax-backward correction
            delta = _compiled_rowwise_dot(grad_output[:, start:end], output[:, start:end])  # [B, c, H]
            # d(loss)/d(sink_h) = -sum over queries of p_sink * delta
            grad_sink -= (torch.exp(sink.float().view(1, 1, -1) - normalizer) * delta).sum(dim=(0, 1))
            logits = torch.matmul(q_rows, keys.transpose(1, 2)).view(batch, end - start, heads, -1)
            grad_probabilities = torch.matmul(grad_rows, keys.transpose(1, 2)).view_as(logits)
            probabilities, grad_logits = _compiled_softmax_backward(
                logits, plan.visible(start, end, low), normalizer, grad_probabilities, delta, scale,
            )
            flat_grad_logits = grad_logits.view(batch, -1, keys.shape[1])
            grad_query[:, start:end] = torch.matmul(flat_grad_logits, keys).view(batch, end - start, heads, head_dim)
            # K = V: each key gets its key gradient (through the logits) and its value gradient.
            grad_keys = torch.matmul(flat_grad_logits.transpose(1, 2), q_rows)
            grad_keys = torch.baddbmm(grad_keys, probabilities.view(batch, -1, keys.shape[1]).transpose(1, 2), grad_rows)
            window_width = end - low
            grad_kv[:, low:end] += grad_keys[:, :window_width]
            used = plan.used(start)
            if used:
                grad_compressed[:, :used] += grad_keys[:, window_width:]
        return (
            grad_query,
            grad_kv.to(kv.dtype),
            grad_sink.to(sink.dtype),
            grad_compressed.to(compressed_kv.dtype) if grad_compressed is not None else None,
            None, None, None, None, None,
        )


@register("sparse_attention", "cpu")
def sparse_attention(
    query: torch.Tensor,
    kv: torch.Tensor,
    sink: torch.Tensor,
    *,
    window: int,
    scale: float | None = None,
    compressed_kv: torch.Tensor | None = None,
    compressed_indices: torch.Tensor | None = None,
    compress_ratio: int | None = None,
    position_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    if not _plain(query, kv, sink, compressed_kv):
        return reference.sparse_attention(
            query, kv, sink, window=window, scale=scale, compressed_kv=compressed_kv,
            compressed_indices=compressed_indices, compress_ratio=compress_ratio, position_ids=position_ids,
        )
    batch, seq_len, _, head_dim = query.shape
    scale = head_dim**-0.5 if scale is None else scale
    if position_ids is None:
        position_ids = torch.arange(seq_len, device=query.device).expand(batch, seq_len)
    if compressed_kv is not None and compressed_kv.shape[1] == 0:
        compressed_kv = compressed_indices = None  # shorter than one compression window: nothing to add
    thresholds = None
    if compressed_kv is not None and compressed_indices is None:
        if compress_ratio is None:
            raise ValueError("sparse_attention: dense compressed attention needs compress_ratio (e.g. 128 for HCA)")
        thresholds = (position_ids + 1) // compress_ratio
    documents = reference.document_ids(position_ids)
    return _ChunkedSparseAttention.apply(
        query, kv, sink, compressed_kv, compressed_indices, thresholds, documents, window, scale
    )


# ----------------------------------------------------------------------------------------------------
# The indexer KL loss's target, chunked over queries.

_KL_TARGET_QUERIES_PER_CHUNK = 256


def _selected_softmax_mean(logits, selected, scale: float):
    # logits [B, c, H, T] (the product's dtype), selected [B, c, 1, T] -> mean over heads of the softmax
    # over the selected entries, float32 [B, c, T] (zeros where none is selected)
    scaled = torch.where(selected, logits.float() * scale, float("-inf"))
    maximum = scaled.amax(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float32).min)
    exponentials = torch.exp(scaled - maximum)
    total = exponentials.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, exponentials / total, 0.0).mean(dim=2)


_compiled_selected_softmax_mean = _CompiledOrEager(_selected_softmax_mean)


@register("indexer_kl_target", "cpu")
def indexer_kl_target(query, compressed_kv, selected, scale: float):
    if not _plain(query, compressed_kv) or query.dtype == torch.float64:
        return reference.indexer_kl_target(query, compressed_kv, selected, scale)
    batch, seq_len, heads, head_dim = query.shape
    with torch.no_grad():
        keys = compressed_kv.to(query.dtype).transpose(1, 2)  # [B, D, T]
        target = torch.empty(batch, seq_len, compressed_kv.shape[1], dtype=torch.float32, device=query.device)
        for start in range(0, seq_len, _KL_TARGET_QUERIES_PER_CHUNK):
            end = min(seq_len, start + _KL_TARGET_QUERIES_PER_CHUNK)
            rows = query[:, start:end].reshape(batch, -1, head_dim)
            logits = torch.matmul(rows, keys).view(batch, end - start, heads, -1)
            target[:, start:end] = _compiled_selected_softmax_mean(logits, selected[:, start:end].unsqueeze(2), float(scale))
    return target


# ----------------------------------------------------------------------------------------------------
# Linear + cross-entropy, chunked over tokens.


_LOGITS_BUDGET_ELEMENTS = 1 << 23  # one block of float32 logits: 32 MiB
_MAX_TOKENS_PER_BLOCK = 8192
# Whole-vocabulary token blocks: [rows, V] logits in the weight's dtype up to 24 MiB (below glibc's
# 32 MiB mmap threshold, so the block's buffers are reused from the heap instead of page-faulted in
# afresh), and only when such a block still holds a useful number of rows.
_FULL_VOCABULARY_BLOCK_BYTES = 24 << 20
_MIN_FULL_VOCABULARY_ROWS = 512


def _vocabulary_slice(num_tokens: int, vocab: int) -> int:
    """Vocabulary columns per slice so that [tokens, slice] float32 logits stay near the budget."""
    return max(256, min(vocab, _LOGITS_BUDGET_ELEMENTS // max(1, num_tokens)))


def _full_vocabulary_rows(num_tokens: int, vocab: int, element_size: int) -> int:
    """Rows per whole-vocabulary token block, or 0 when the vocabulary is too wide for one."""
    rows = _FULL_VOCABULARY_BLOCK_BYTES // max(1, vocab * element_size)
    if rows < min(num_tokens, _MIN_FULL_VOCABULARY_ROWS):
        return 0
    return min(rows, _MAX_TOKENS_PER_BLOCK)


def _cross_entropy_rows(logits: torch.Tensor, targets: torch.Tensor, valid: torch.Tensor):
    """For logits [r, V] (any float dtype), targets [r] (in range) and valid [r] bool: each row's loss
    (float32, 0 where not valid) and the gradient of their sum, softmax - one_hot (0 where not valid),
    in logits' dtype. Compiled, the float32 work is two fused passes over the block."""
    wide = logits.float()
    maximum = wide.amax(dim=1, keepdim=True)
    exponentials = (wide - maximum).exp()
    total = exponentials.sum(dim=1, keepdim=True)
    keep = valid.unsqueeze(1)
    row_loss = torch.where(keep, maximum + total.log() - wide.gather(1, targets.unsqueeze(1)), 0.0).squeeze(1)
    one_hot = torch.arange(wide.shape[1], device=wide.device).unsqueeze(0) == targets.unsqueeze(1)
    grad = torch.where(keep, exponentials / total - one_hot.float(), 0.0)
    return row_loss, grad.to(logits.dtype)


_compiled_cross_entropy_rows = _CompiledOrEager(_cross_entropy_rows)


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    """Cross-entropy of hidden @ weight.T, never holding the [N, V] logits whole.

    Two layouts, by vocabulary width:
    - whole-vocabulary token blocks (vocabularies up to tens of thousands): each block of rows gets
      its logits from one product, its loss and softmax-minus-one-hot gradient from one fused pass,
      and its hidden and weight gradients from two more products, all during the forward: three
      products per token, none repeated;
    - vocabulary slices (wider vocabularies, e.g. DeepSeek's 129,280): pass 1 runs over the slices with
      an online log-sum-exp and picks each target's logit; pass 2 recomputes each slice's logits, turns
      them into softmax minus one-hot, and forms that slice's weight gradient rows (written once, in the
      weight's dtype) and its share of the hidden gradient. Tokens go in blocks of at most 8192.
    With several token blocks the weight gradient is accumulated in float32.
    """

    @staticmethod
    def forward(ctx, hidden, weight, targets, ignore_index, reduction):
        num_tokens, vocab = hidden.shape[0], weight.shape[0]
        valid = targets != ignore_index
        count = int(valid.sum())
        want_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        full_rows = _full_vocabulary_rows(num_tokens, vocab, weight.element_size())
        block_rows = full_rows or _MAX_TOKENS_PER_BLOCK
        blocks = [(start, min(num_tokens, start + block_rows)) for start in range(0, num_tokens, block_rows)]
        grad_hidden = torch.zeros(hidden.shape, dtype=torch.float32, device=hidden.device) if want_grad else None
        grad_weight = None
        if want_grad:
            accumulate = len(blocks) > 1
            grad_weight = (torch.zeros if accumulate else buffers.empty)(
                weight.shape, dtype=torch.float32 if accumulate else weight.dtype, device=weight.device
            )
        loss_sum = torch.zeros((), dtype=torch.float64, device=hidden.device)
        run_block = _full_vocabulary_block if full_rows else _vocabulary_sliced_block
        for block_start, block_end in blocks:
            block_valid = valid[block_start:block_end]
            loss_sum += run_block(
                hidden[block_start:block_end].to(weight.dtype),
                weight,
                torch.where(block_valid, targets[block_start:block_end], 0).long(),
                block_valid,
                grad_hidden[block_start:block_end] if want_grad else None,
                grad_weight,
                len(blocks) > 1,
            )
        if count == 0 and reduction == "mean":
            loss = torch.full((), float("nan"), dtype=torch.float64, device=hidden.device)  # as torch does
        else:
            loss = loss_sum / (count if reduction == "mean" else 1)
        ctx.divisor = count if reduction == "mean" else 1
        ctx.dtypes = (hidden.dtype, weight.dtype)
        ctx.save_for_backward(grad_hidden, grad_weight)
        return loss.float()

    @staticmethod
    def backward(ctx, grad_loss):
        grad_hidden, grad_weight = ctx.saved_tensors
        factor = grad_loss.float() / max(ctx.divisor, 1)
        hidden_dtype, weight_dtype = ctx.dtypes
        hidden_grad = (grad_hidden * factor).to(hidden_dtype) if ctx.needs_input_grad[0] else None
        weight_grad = (grad_weight * factor.to(grad_weight.dtype)).to(weight_dtype) if ctx.needs_input_grad[1] else None
        return hidden_grad, weight_grad, None, None, None


def _add_weight_gradient(grad_weight, grad_logits, block_hidden, accumulate: bool, low: int, high: int) -> None:
    if accumulate:
        grad_weight[low:high] += (grad_logits.t() @ block_hidden).float()
    else:  # written in place: rows low..high of the gradient are a contiguous block
        torch.mm(grad_logits.t(), block_hidden, out=grad_weight[low:high])


def _full_vocabulary_block(block_hidden, weight, block_targets, block_valid, grad_hidden, grad_weight, accumulate):
    """One token block against the whole vocabulary; returns the block's summed loss (float64) and
    writes its gradients when `grad_hidden` is given."""
    logits = block_hidden @ weight.t()
    row_loss, grad_logits = _compiled_cross_entropy_rows(logits, block_targets, block_valid)
    del logits
    if grad_hidden is not None:
        grad_hidden += (grad_logits @ weight).float()
        _add_weight_gradient(grad_weight, grad_logits, block_hidden, accumulate, 0, weight.shape[0])
    return row_loss.sum(dtype=torch.float64)


def _vocabulary_sliced_block(block_hidden, weight, block_targets, block_valid, grad_hidden, grad_weight, accumulate):
    """One token block in vocabulary slices (online log-sum-exp, then the gradient pass)."""
    rows, vocab = block_hidden.shape[0], weight.shape[0]
    device = block_hidden.device
    columns = _vocabulary_slice(rows, vocab)
    slices = [(v, min(vocab, v + columns)) for v in range(0, vocab, columns)]
    running_max = torch.full((rows,), float("-inf"), device=device)
    running_sum = torch.zeros(rows, device=device)
    target_logits = torch.zeros(rows, device=device)
    for low, high in slices:
        logits = (block_hidden @ weight[low:high].t()).float()
        inside = (block_targets >= low) & (block_targets < high)
        local = (block_targets - low).clamp(0, high - low - 1)
        target_logits += torch.where(inside, logits.gather(1, local.unsqueeze(1)).squeeze(1), 0.0)
        slice_max = torch.maximum(running_max, logits.amax(dim=1))
        # In place: the slice's logits are not needed after their exponentials are summed.
        slice_sum = logits.sub_(slice_max.unsqueeze(1)).exp_().sum(dim=1)
        running_sum = running_sum * torch.exp(running_max - slice_max) + slice_sum
        running_max = slice_max
        del logits  # before the next slice's product is allocated
    normalizer = running_max + torch.log(running_sum)
    loss = ((normalizer - target_logits) * block_valid).sum(dtype=torch.float64)
    if grad_hidden is None:
        return loss
    for low, high in slices:
        logits = (block_hidden @ weight[low:high].t()).float()
        probabilities = logits.sub_(normalizer.unsqueeze(1)).exp_()
        inside = (block_targets >= low) & (block_targets < high)
        local = (block_targets - low).clamp(0, high - low - 1)
        probabilities.scatter_add_(1, local.unsqueeze(1), -inside.float().unsqueeze(1))
        probabilities *= block_valid.unsqueeze(1)
        grad_logits = probabilities.to(weight.dtype)
        grad_hidden += (grad_logits @ weight[low:high]).float()
        _add_weight_gradient(grad_weight, grad_logits, block_hidden, accumulate, low, high)
        del logits, probabilities, grad_logits
    return loss


@register("linear_cross_entropy", "cpu")
def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> torch.Tensor:
    if reduction not in ("mean", "sum"):
        raise ValueError(f"linear_cross_entropy: reduction must be 'mean' or 'sum', got {reduction!r}")
    if not _plain(hidden, weight):
        return reference.linear_cross_entropy(hidden, weight, targets, ignore_index=ignore_index, reduction=reduction)
    return _ChunkedLinearCrossEntropy.apply(hidden, weight, targets, ignore_index, reduction)


# ----------------------------------------------------------------------------------------------------
# MoE token permutation.


class _GatherRows(torch.autograd.Function):
    """permuted[r] = tokens[sorted_order[r] // k]; the backward sums each token's k rows, found
    through the inverse permutation (a gather, not a scatter-add)."""

    @staticmethod
    def forward(ctx, tokens, sorted_order, inverse_order, top_k: int):
        ctx.save_for_backward(inverse_order)
        ctx.top_k = top_k
        return tokens.index_select(0, sorted_order // top_k)

    @staticmethod
    def backward(ctx, grad_permuted):
        (inverse_order,) = ctx.saved_tensors
        rows = grad_permuted.index_select(0, inverse_order).view(-1, ctx.top_k, grad_permuted.shape[-1])
        return _compiled_sum_slots(rows), None, None, None


def _sum_slots(rows):
    # rows [N, k, D] -> sum over k [N, D] (float32 sum, rows' dtype out)
    total = rows[:, 0].float()
    for slot in range(1, rows.shape[1]):
        total = total + rows[:, slot].float()
    return total.to(rows.dtype)


def _weighted_slots(rows, weights):
    # rows [N, k, D], weights [N, k] -> sum_j weights[:, j] * rows[:, j] [N, D] in rows' dtype
    total = weights[:, 0:1].float() * rows[:, 0].float()
    for slot in range(1, rows.shape[1]):
        total = total + weights[:, slot : slot + 1].float() * rows[:, slot].float()
    return total.to(rows.dtype)


def _slot_dots(rows, grad):
    # rows [N, k, D], grad [N, D] -> rows[:, j] . grad [N, k] in float32
    return (rows.float() * grad.float().unsqueeze(1)).sum(-1)


def _scaled_rows(grad, weights):
    # grad [M, D] * weights [M] in grad's dtype
    return (grad.float() * weights.float().unsqueeze(-1)).to(grad.dtype)


_compiled_sum_slots = _CompiledOrEager(_sum_slots)
_compiled_weighted_slots = _CompiledOrEager(_weighted_slots)
_compiled_slot_dots = _CompiledOrEager(_slot_dots)
_compiled_scaled_rows = _CompiledOrEager(_scaled_rows)


class _ScatterRows(torch.autograd.Function):
    """out[n] = sum_j topk_weights[n, j] * expert_output[row of (n, j)], by gathering each token's rows
    in slot order; the backward gathers as well."""

    @staticmethod
    def forward(ctx, expert_output, sorted_order, inverse_order, topk_weights):
        num_tokens, top_k = topk_weights.shape
        rows = expert_output.index_select(0, inverse_order).view(num_tokens, top_k, -1)
        ctx.save_for_backward(rows, sorted_order, topk_weights)
        return _compiled_weighted_slots(rows, topk_weights)

    @staticmethod
    def backward(ctx, grad_out):
        rows, sorted_order, topk_weights = ctx.saved_tensors
        top_k = topk_weights.shape[1]
        grad_out = grad_out.contiguous()
        grad_expert = None
        if ctx.needs_input_grad[0]:
            source = grad_out.index_select(0, sorted_order // top_k)
            grad_expert = _compiled_scaled_rows(source, topk_weights.reshape(-1).index_select(0, sorted_order))
        grad_weights = _compiled_slot_dots(rows, grad_out).to(topk_weights.dtype) if ctx.needs_input_grad[3] else None
        return grad_expert, None, None, grad_weights


def _inverse_order(sorted_order: torch.Tensor) -> torch.Tensor:
    inverse = torch.empty_like(sorted_order)
    inverse[sorted_order] = torch.arange(sorted_order.numel(), device=sorted_order.device)
    return inverse


@register("moe_permute", "cpu")
def moe_permute(tokens: torch.Tensor, topk_ids: torch.Tensor, num_experts: int):
    if not _plain(tokens, topk_ids) or tokens.dtype == torch.float64:
        return reference.moe_permute(tokens, topk_ids, num_experts)
    flat_ids = topk_ids.reshape(-1)
    sorted_order = torch.argsort(flat_ids, stable=True)
    tokens_per_expert = torch.bincount(flat_ids, minlength=num_experts)
    permuted = _GatherRows.apply(tokens, sorted_order, _inverse_order(sorted_order), topk_ids.shape[1])
    return permuted, tokens_per_expert, sorted_order


@register("moe_unpermute", "cpu")
def moe_unpermute(expert_output: torch.Tensor, sorted_order: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
    if not _plain(expert_output, topk_weights) or expert_output.dtype == torch.float64:
        return reference.moe_unpermute(expert_output, sorted_order, topk_weights)
    return _ScatterRows.apply(expert_output, sorted_order, _inverse_order(sorted_order), topk_weights)


# ----------------------------------------------------------------------------------------------------
# Grouped matmul.


# oneDNN generates (JIT-compiles) a kernel for every new matmul shape and caches it by shape. The
# rows each expert gets change at every step, so an exact per-expert product would compile about a
# thousand kernels per training step of the `small` flavor (a third of the grouped products' time).
# Each expert's product therefore runs on a row count rounded up to a multiple of this bucket, so the
# shapes recur and the cached kernels serve them.
_EXPERT_ROWS_BUCKET = 64


def _bucketed(rows: int, total: int) -> int:
    return min(total, -(-rows // _EXPERT_ROWS_BUCKET) * _EXPERT_ROWS_BUCKET)


def _per_expert_rows_product(a: torch.Tensor, matrices, counts: list[int], out_features: int) -> torch.Tensor:
    """out[rows of e] = a[rows of e] @ matrices(e) for the consecutive row groups of `counts`.

    Each product covers the bucketed number of rows from the group's first row; the extra rows
    belong to later groups, whose own products (run after, in order) overwrite them. A group too
    close to the end takes its window ending at the last row and copies out its own rows."""
    total = a.shape[0]
    out = buffers.empty((total, out_features), dtype=a.dtype, device=a.device)
    first = 0
    for expert, count in enumerate(counts):
        if count:
            rows = _bucketed(count, total)
            if first + rows <= total:
                torch.mm(a[first : first + rows], matrices(expert), out=out[first : first + rows])
            else:
                start = total - rows
                window = torch.mm(a[start:], matrices(expert))
                out[first : first + count] = window[first - start : first - start + count]
        first += count
    return out


class _BucketedGroupedMatmul(torch.autograd.Function):
    """y[rows of e] = x[rows of e] @ weight[e].T with every product on a bucketed row count."""

    @staticmethod
    def forward(ctx, x, weight, counts: list[int]):
        ctx.save_for_backward(x, weight)
        ctx.counts = counts
        return _per_expert_rows_product(x, lambda e: weight[e].t(), counts, weight.shape[1])

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        counts = ctx.counts
        grad = grad.contiguous()
        grad_x = _per_expert_rows_product(grad, lambda e: weight[e], counts, weight.shape[2]) if ctx.needs_input_grad[0] else None
        grad_weight = None
        if ctx.needs_input_grad[1]:
            # The weight gradient sums over the group's rows: its bucketed form pads with zero rows.
            grad_weight = torch.zeros_like(weight)
            first = 0
            for expert, count in enumerate(counts):
                if count:
                    rows = -(-count // _EXPERT_ROWS_BUCKET) * _EXPERT_ROWS_BUCKET
                    padded_grad = grad.new_zeros(rows, grad.shape[1])
                    padded_x = x.new_zeros(rows, x.shape[1])
                    padded_grad[:count] = grad[first : first + count]
                    padded_x[:count] = x[first : first + count]
                    torch.mm(padded_grad.t(), padded_x, out=grad_weight[expert])
                first += count
        return grad_x, grad_weight, None


@register("grouped_matmul", "cpu")
def grouped_matmul(x: torch.Tensor, weight: torch.Tensor, tokens_per_expert: torch.Tensor) -> torch.Tensor:
    if (
        not _plain(x, weight)
        or x.dtype not in (torch.float32, torch.bfloat16)
        or weight.dtype != x.dtype
        or x.shape[0] == 0
    ):
        return reference.grouped_matmul(x, weight, tokens_per_expert)
    counts = [int(c) for c in tokens_per_expert.tolist()]
    if sum(counts) != x.shape[0]:
        raise ValueError(f"grouped_matmul: tokens_per_expert sums to {sum(counts)} but x has {x.shape[0]} rows")
    return _BucketedGroupedMatmul.apply(x, weight, counts)
