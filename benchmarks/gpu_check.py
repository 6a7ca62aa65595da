"""The prepared GPU check (issue #22): on a lent CUDA machine, in under 8 minutes, one table of
- the Triton kernel tests (`pytest -m triton tests/kernels`, compiled on the GPU),
- each operator of the `triton` backend against the reference on the same GPU at V4-Flash widths:
  forward + backward time, peak memory, largest error against a float64 reference, and for sparse
  attention also torch's SDPA given the same visibility as a dense [S, S + T] mask (no sink),
- a training step of the `small` flavor and of a 2-layer model at V4-Flash width (fewer experts, so
  the fp32 master weights and AdamW states fit one GPU), with MFU against the device's bf16 peak.
The table is printed and written as Markdown to --output (default benchmarks/gpu_check.md, which
`make bench` copies into BENCHMARKS.md's GPU section).

    python benchmarks/gpu_check.py                 # on the GPU machine
    python benchmarks/gpu_check.py --dry-run       # here: tiny shapes on CPU tensors, Triton interpreted

The dry run exercises every path of the script (kernel cases, timing, the training step on the `tiny`
flavor, the table) on a machine without a GPU; its timings mean nothing and the table says so.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DRY_RUN = "--dry-run" in sys.argv
# The interpreter must be chosen before triton is imported, i.e. before ascend_kernels.triton loads.
if DRY_RUN:
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from ascend_kernels import reference, registry  # noqa: E402

BUDGET_SECONDS = 8 * 60
GPU_TABLE = ROOT / "benchmarks" / "gpu_check.md"
TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 4e-2}


@dataclass
class Row:
    section: str
    case: str
    values: dict[str, str] = field(default_factory=dict)


class Clock:
    """Times a callable with CUDA events on the GPU, with perf_counter on the CPU (median of repeats)."""

    def __init__(self, device: str):
        self.device = device

    def milliseconds(self, step, repeats: int) -> float:
        step()  # compile / warm up
        samples = []
        for _ in range(repeats):
            if self.device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                step()
                end.record()
                torch.cuda.synchronize()
                samples.append(start.elapsed_time(end))
            else:
                started = time.perf_counter()
                step()
                samples.append((time.perf_counter() - started) * 1e3)
        return statistics.median(samples)


def _peak_bytes(device: str, step) -> int | None:
    if device != "cuda":
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


# ---- kernel cases --------------------------------------------------------------------------------


def _kernel_cases(device: str, tiny: bool):
    """(operator, label, make) where make() -> (args, kwargs, differentiable positions). V4-Flash widths
    on the GPU (hidden 4096, 64 heads of 512, window 128, CSA 1/4 with top-512, HCA 1/128, indexer 64
    heads of 128, vocabulary 129280, 256 experts top-6 of width 2048); tiny ones for the dry run."""
    generator = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape, scale=1.0, dtype=torch.bfloat16):
        return (torch.randn(*shape, generator=generator) * scale).to(device, dtype)

    if tiny:
        seq, heads, head_dim, window, hidden, vocab, tokens = 64, 2, 32, 16, 64, 1000, 64
        index_heads, index_dim, topk, experts, top_k, width = 2, 32, 8, 4, 2, 32
    else:
        seq, heads, head_dim, window, hidden, vocab, tokens = 4096, 64, 512, 128, 4096, 129280, 4096
        index_heads, index_dim, topk, experts, top_k, width = 64, 128, 512, 256, 6, 2048
    positions = torch.arange(seq).view(1, -1)

    def attention(mode):
        def make():
            kwargs = {"window": window}
            if mode != "window":
                ratio = 4 if mode == "csa" else 128 if not tiny else 16
                entries = seq // ratio
                kwargs |= {"compressed_kv": randn(1, entries, head_dim), "compress_ratio": ratio}
                if mode == "csa":
                    scores = torch.rand(1, seq, entries, generator=generator)
                    chosen = scores.topk(min(topk, entries), dim=-1).indices
                    visible = ((positions + 1) // ratio).unsqueeze(-1)
                    kwargs["compressed_indices"] = torch.where(chosen < visible, chosen, -1).to(device)
            return [randn(1, seq, heads, head_dim), randn(1, seq, head_dim), randn(heads, dtype=torch.float32)], kwargs, [0, 1, 2]
        return make

    def indexer():
        entries = seq // 4
        return [randn(1, seq, index_heads, index_dim), randn(1, entries, index_dim),
                randn(1, seq, index_heads, scale=index_heads**-0.5)], {}, [0, 1, 2]

    def routed():
        ids = torch.stack([torch.randperm(experts, generator=generator)[:top_k] for _ in range(tokens)]).to(device)
        return [randn(tokens, hidden), ids, experts], {}, [0]

    def grouped():
        counts = torch.bincount(torch.randint(0, experts, (tokens * top_k,), generator=generator), minlength=experts)
        return [randn(tokens * top_k, hidden), randn(experts, width, hidden, scale=hidden**-0.5), counts.to(device)], {}, [0, 1]

    def hc(n=4):
        return [randn(1, seq, n, hidden), randn((2 + n) * n, n * hidden, scale=(n * hidden) ** -0.5, dtype=torch.float32),
                randn((2 + n) * n, scale=0.1, dtype=torch.float32), randn(3, scale=0.1, dtype=torch.float32)], {}, [0, 1, 2, 3]

    return [
        ("rms_norm", f"[{seq},{hidden}] weight", lambda: ([randn(1, seq, hidden), randn(hidden, dtype=torch.float32)], {}, [0, 1])),
        ("swiglu", f"[{tokens * top_k},{width}] limit 10", lambda: ([randn(tokens * top_k, width, scale=8), randn(tokens * top_k, width, scale=8), 10.0], {}, [0, 1])),
        ("sparse_attention", f"window {window}, S {seq}, H {heads}x{head_dim}", attention("window")),
        ("sparse_attention", f"+ CSA top-{topk}", attention("csa")),
        ("sparse_attention", "+ HCA", attention("hca")),
        ("indexer_scores", f"S {seq}, T {seq // 4}, {index_heads}x{index_dim}", indexer),
        ("sinkhorn", f"[{seq},4,4] 20 rounds", lambda: ([randn(seq, 4, 4, dtype=torch.float32), 20, 1e-6], {}, [0])),
        ("hc_pre", f"[{seq},4,{hidden}]", hc),
        ("hc_post", f"[{seq},4,{hidden}]", lambda: ([randn(1, seq, hidden), randn(1, seq, 4, dtype=torch.float32),
                                                      randn(1, seq, 4, 4, dtype=torch.float32), randn(1, seq, 4, hidden)],
                                                     {}, [0, 1, 2, 3])),
        ("linear_cross_entropy", f"N {tokens}, V {vocab}, D {hidden}",
         lambda: ([randn(tokens, hidden), randn(vocab, hidden, scale=hidden**-0.5),
                   torch.randint(0, vocab, (tokens,), generator=generator).to(device)], {}, [0, 1])),
        ("moe_permute", f"N {tokens}, top-{top_k} of {experts}", routed),
        ("grouped_matmul", f"{experts} experts, [{tokens * top_k},{hidden}] x {width}", grouped),
    ]


def _leaves(args, differentiable, wide: bool):
    """Fresh leaves of the arguments; `wide`: floating ones in float64, on the same device (the float64
    reference of a V4-Flash-sized case is minutes on a CPU, seconds on the GPU)."""
    def prepare(index, value):
        if not isinstance(value, torch.Tensor):
            return value
        value = value.detach()
        if wide and value.is_floating_point():
            value = value.double()
        return value.requires_grad_(index in differentiable)
    return [prepare(i, v) for i, v in enumerate(args)]


def _wide_kwargs(kwargs):
    return {k: (v.detach().double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
            for k, v in kwargs.items()}


def _first_output(result):
    return result[0] if isinstance(result, tuple) else result


def _fwd_bwd(function, args, kwargs, differentiable):
    def step():
        leaves = _leaves(args, differentiable, wide=False)
        out = _first_output(function(*leaves, **kwargs))
        if out.requires_grad:
            out.float().square().mean().backward()
    return step


def _error(function, operator, args, kwargs, differentiable, device) -> float:
    """Largest error of output and gradients, relative to the float64 reference's largest magnitude."""
    ours = _leaves(args, differentiable, wide=False)
    theirs = _leaves(args, differentiable, wide=True)
    out = _first_output(function(*ours, **kwargs))
    expected = _first_output(getattr(reference, operator)(*theirs, **_wide_kwargs(kwargs)))
    pairs = [(out, expected)]
    if expected.requires_grad:
        weights = torch.randn(expected.shape, dtype=torch.float64, device=device)
        finite = torch.isfinite(expected.detach())
        (torch.where(finite, out, 0) * weights.to(out.dtype)).sum().backward()
        (torch.where(finite, expected, 0) * weights).sum().backward()
        pairs += [(ours[i].grad, theirs[i].grad) for i in differentiable]
    worst = 0.0
    for got, want in pairs:
        got, want = got.detach().double(), want.detach()
        finite = torch.isfinite(want)
        scale = want[finite].abs().max().clamp_min(1e-6)
        worst = max(worst, ((got[finite] - want[finite]).abs().max() / scale).item())
    return worst


def _sdpa_step(args, kwargs):
    """torch's SDPA on the same visibility: the shared KV head broadcast to every head, the window and
    compressed entries as one dense boolean [S, S + T] mask, no sink."""
    import torch.nn.functional as F

    query, kv, _ = args
    seq = query.shape[1]
    positions = torch.arange(seq, device=query.device).view(1, -1)
    visible = reference.window_mask(positions, kwargs["window"])
    keys = kv
    if "compressed_kv" in kwargs:
        entries = kwargs["compressed_kv"]
        visible = torch.cat([visible, reference.compressed_mask(
            positions, entries.shape[1], kwargs["compress_ratio"], kwargs.get("compressed_indices"))], dim=-1)
        keys = torch.cat([kv, entries], dim=1)
    mask = visible.unsqueeze(1)

    def step():
        q = query.detach().transpose(1, 2).requires_grad_()
        k = keys.detach().unsqueeze(1).expand(-1, q.shape[1], -1, -1).requires_grad_()
        out = F.scaled_dot_product_attention(q, k, k, attn_mask=mask)
        out.float().square().mean().backward()
    return step


def kernel_rows(device: str, tiny: bool, repeats: int, deadline: float) -> list[Row]:
    clock = Clock(device)
    rows = []
    for operator, label, make in _kernel_cases(device, tiny):
        if time.monotonic() > deadline:
            rows.append(Row("kernels", f"{operator} {label}", {"note": "skipped: time budget"}))
            continue
        function = registry.implementations(operator)["triton"]
        args, kwargs, differentiable = make()
        values = {}
        # One failing case is reported in its row; the others still run (device time is scarce).
        try:
            values["max rel. error"] = f"{_error(function, operator, args, kwargs, differentiable, device):.1e}"
            ours = _fwd_bwd(function, args, kwargs, differentiable)
            values["triton ms"] = f"{clock.milliseconds(ours, repeats):.2f}"
            peak = _peak_bytes(device, ours)
            if peak is not None:
                values["triton peak MiB"] = f"{peak / 2**20:.0f}"
            _release(device)
            theirs = _fwd_bwd(getattr(reference, operator), args, kwargs, differentiable)
            values["reference ms"] = _timed(clock, theirs, repeats)
            peak = _peak_bytes(device, theirs)
            if peak is not None:
                values["reference peak MiB"] = f"{peak / 2**20:.0f}"
            if values["reference ms"][0].isdigit():
                values["speedup"] = f"{float(values['reference ms']) / float(values['triton ms']):.2f}x"
            if operator == "sparse_attention":
                _release(device)
                values["SDPA ms"] = _timed(clock, _sdpa_step(args, kwargs), repeats)
        except Exception as error:  # noqa: BLE001 - reported in the table, and the exit status is 1
            values["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}"
        rows.append(Row("kernels", f"{operator} {label}", values))
        del args, kwargs
        _release(device)
    return rows


def _timed(clock: Clock, step, repeats: int) -> str:
    try:
        return f"{clock.milliseconds(step, repeats):.2f}"
    except torch.OutOfMemoryError:
        _release("cuda")
        return "out of memory"


def _release(device: str) -> None:
    if device == "cuda":
        torch.cuda.empty_cache()


# ---- the Triton tests ----------------------------------------------------------------------------


def test_rows(timeout: float) -> list[Row]:
    command = [sys.executable, "-m", "pytest", "-q", "-m", "triton", "-p", "no:cacheprovider", "tests/kernels"]
    try:
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr[-300:]
    except subprocess.TimeoutExpired:
        summary = f"timed out after {timeout:.0f} s"
    counts = dict((name, int(count)) for count, name in re.findall(r"(\d+) (passed|failed|skipped|error)", summary))
    return [Row("tests", "pytest -m triton tests/kernels", {"passed": str(counts.get("passed", 0)),
                                                           "failed": str(counts.get("failed", 0) + counts.get("error", 0)),
                                                           "skipped": str(counts.get("skipped", 0)), "note": summary})]


# ---- training steps ------------------------------------------------------------------------------


def _train_configs(tiny: bool):
    from trex_cli.models.deepseek_v4.config import get_flavor

    if tiny:
        return [("tiny flavor", get_flavor("tiny"), 2, 64)]
    flash = get_flavor("flash")
    # V4-Flash width (hidden 4096, 64 heads of 512, indexer, mHC, vocabulary 129280); 2 layers (one CSA,
    # one HCA) + MTP, 32 experts instead of 256 so master weights and AdamW states fit one GPU.
    two_layers = flash.replace(num_hidden_layers=2, compress_ratios=[4, 128, 0], n_routed_experts=32, num_hash_layers=1)
    return [("small flavor", get_flavor("small"), 8, 4096), ("flash width, 2 layers, 32 experts", two_layers, 1, 4096)]


def train_rows(tiny: bool, steps: int, deadline: float) -> list[Row]:
    from trex_cli.models.deepseek_v4.flops import training_flops_per_token
    from trex_cli.train.config import ParallelSection, StageSchedule, TrainSection
    from trex_cli.train.data import MicroBatch
    from trex_cli.train.distributed import init_distributed
    from trex_cli.train.metrics import device_peak
    from trex_cli.train.trainer import Engine, build_model

    distributed = init_distributed(ParallelSection())
    rows = []
    try:
        for label, config, batch, seq_len in _train_configs(tiny):
            if time.monotonic() > deadline:
                rows.append(Row("train", label, {"note": "skipped: time budget"}))
                continue
            generator = torch.Generator().manual_seed(0)
            ids = torch.randint(3, config.vocab_size, (batch, seq_len), generator=generator)
            micro = MicroBatch(ids, torch.arange(seq_len).repeat(batch, 1), torch.ones(batch, seq_len))
            schedule = StageSchedule(lr=1e-4, min_lr=1e-5, warmup_steps=1, max_steps=100, global_batch_size=batch,
                                     micro_batch_size=batch)
            try:
                engine = Engine(build_model(config, None, seed=0), TrainSection(dtype="bf16"), schedule, distributed,
                                seq_len, 1)
                times = []
                for index in range(1 + steps):
                    _synchronize(distributed.device)
                    started = time.perf_counter()
                    result = engine.step([micro])
                    _synchronize(distributed.device)
                    if index:  # the first step compiles and warms up
                        times.append(time.perf_counter() - started)
            except Exception as error:  # noqa: BLE001 - reported in the table, and the exit status is 1
                rows.append(Row("train", label, {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"}))
                engine = None
                _release(distributed.device.type)
                continue
            seconds = min(times)
            peak, how = device_peak(distributed.device, torch.bfloat16)
            flops = training_flops_per_token(config, seq_len) * batch * seq_len
            values = {"tokens/s": f"{batch * seq_len / seconds:,.0f}", "step s": f"{seconds:.3f}",
                      "MFU": f"{flops / seconds / peak:.1%}", "loss": f"{result.loss:.3f}", "note": f"{batch}x{seq_len}; {how}"}
            if distributed.device.type == "cuda":
                values["peak GiB"] = f"{torch.cuda.max_memory_allocated() / 2**30:.1f}"
            rows.append(Row("train", label, values))
            del engine
            if distributed.device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
    finally:
        distributed.close()
    return rows


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


# ---- the table -----------------------------------------------------------------------------------


def markdown(rows: list[Row], title: str) -> str:
    lines = [f"## {title}", ""]
    for section in dict.fromkeys(row.section for row in rows):
        chosen = [row for row in rows if row.section == section]
        columns = list(dict.fromkeys(key for row in chosen for key in row.values))
        lines += [f"| {section} | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
        lines += ["| " + row.case + " | " + " | ".join(row.values.get(c, "") for c in columns) + " |" for row in chosen]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on CPU tensors, Triton interpreted")
    parser.add_argument("--output", type=Path, default=None,
                        help=f"default {GPU_TABLE.relative_to(ROOT)} (which `make bench` copies into BENCHMARKS.md); "
                             "a dry run writes to the temporary folder instead")
    parser.add_argument("--skip-tests", action="store_true", help="do not run pytest -m triton (the dry run skips it)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per kernel (default 10, dry run 1)")
    parser.add_argument("--train-steps", type=int, default=None, help="timed training steps (default 3, dry run 1)")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    deadline = started + BUDGET_SECONDS - 60  # a minute kept for the last case and the table
    if not arguments.dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; use --dry-run to exercise the script on the CPU", file=sys.stderr)
        return 2
    if not registry.backend_usable("triton"):
        print(f"gpu_check: the triton backend cannot run ({registry.load_errors() or 'triton does not import'})",
              file=sys.stderr)
        return 2
    device = "cpu" if arguments.dry_run else "cuda"
    output = arguments.output or (Path(tempfile.gettempdir()) / "gpu_check_dry_run.md" if arguments.dry_run else GPU_TABLE)
    torch.manual_seed(0)
    rows = []
    if not (arguments.skip_tests or arguments.dry_run):
        rows += test_rows(timeout=200)
    repeats = arguments.repeats or (1 if arguments.dry_run else 10)
    rows += kernel_rows(device, arguments.dry_run, repeats, deadline - 120)
    rows += train_rows(arguments.dry_run, arguments.train_steps or (1 if arguments.dry_run else 3), deadline)
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU, Triton interpreted (dry run: timings mean nothing)"
    title = f"gpu_check on {name}, torch {torch.__version__}, {time.monotonic() - started:.0f} s"
    table = markdown(rows, title)
    print(table)
    output.write_text(table + "\n")
    print(f"written to {output}")
    failed = any(row.values.get("failed", "0") != "0" or "error" in row.values for row in rows)
    failed |= any(float(row.values["max rel. error"]) > 4e-2 for row in rows if "max rel. error" in row.values)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
