"""PlannedLayout search: enumerate TP, PP, VPP, EP, expert-TP, CP, micro-batch, recompute and optimizer
swap; drop the layouts that break a divisibility rule or do not fit in memory (keeping the reason);
rank the rest by estimated step time.

For each parallel structure (TP, PP, VPP, EP, ETP, CP, micro-batch) the memory-saving switches are
tried from cheapest to most expensive in time (no recompute, selective, full; then the same with
optimizer swap) and every variant that fits is kept, so the table shows what each switch costs.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Any

from trex_cli.plan.clusters import ClusterProfile
from trex_cli.plan.layout import Job, PlannedLayout, default_noop_layers, engine_problems, validate
from trex_cli.plan.memory import MemoryEstimate, Precision, estimate_memory
from trex_cli.plan.timing import TimeEstimate, estimate_time, hardware_flops_utilization, mfu

GB = 1e9
HOST_MEMORY_USABLE = 0.9
MAX_VIRTUAL_STAGES = 8  # of a node's host memory, for swapped optimizer states


@dataclasses.dataclass
class Evaluation:
    layout: PlannedLayout
    feasible: bool
    reasons: list[str]
    memory: MemoryEstimate | None = None
    time: TimeEstimate | None = None
    mfu: float | None = None
    hfu: float | None = None  # with the recomputed forward counted (T-Rex's MFU figures)

    def as_dict(self) -> dict[str, Any]:
        layout = dataclasses.asdict(self.layout)
        layout["noop_layers"] = list(self.layout.noop_layers)
        return {
            "layout": layout,
            "describe": self.layout.describe(),
            "feasible": self.feasible,
            "reasons": self.reasons,
            # every byte figure in GB (1e9 bytes), as the key says
            "memory_gb": {k: v / GB for k, v in self.memory.as_dict().items()
                          if k not in ("stages_total", "stage", "parameters_on_rank")} if self.memory else None,
            "memory_stages_total_gb": [v / GB for v in self.memory.stages_total] if self.memory else None,
            "memory_stage": self.memory.stage if self.memory else None,
            "parameters_on_rank": self.memory.parameters_on_rank if self.memory else None,
            "time_s": self.time.as_dict() if self.time else None,
            "mfu": self.mfu,
            "hfu": self.hfu,
        }


def evaluate(job: Job, layout: PlannedLayout, cluster: ClusterProfile, flops_per_token: float,
             precision: Precision | None = None) -> Evaluation:
    """Check one layout: rules (the profile's engine's too), memory against the device and host, and its
    step-time estimate."""
    problems = validate(layout, job, cluster.ranks_per_node) + engine_problems(layout, job, cluster.engine)
    if problems:
        return Evaluation(layout, False, problems)
    memory = estimate_memory(job, layout, cluster, precision)
    reasons = []
    if memory.total > cluster.usable_memory_bytes:
        parts = {"weights": memory.weights, "gradients": memory.gradients, "optimizer": memory.optimizer,
                 "activations": memory.activations + memory.recompute_workspace}
        largest = max(parts, key=parts.get)
        reasons.append(f"out of memory: {memory.total / GB:.1f} GB per rank on stage {memory.stage} > "
                       f"{cluster.usable_memory_bytes / GB:.1f} GB usable (largest: {largest} "
                       f"{parts[largest] / GB:.1f} GB)")
    host_limit = cluster.host_memory_gb * GB * HOST_MEMORY_USABLE
    if memory.host_optimizer_per_node > host_limit:
        reasons.append(f"swapped optimizer states need {memory.host_optimizer_per_node / GB:.0f} GB of host memory "
                       f"per node > {host_limit / GB:.0f} GB")
    time = estimate_time(job, layout, cluster, flops_per_token, precision)
    return Evaluation(layout, not reasons, reasons, memory, time, mfu(time, job.world, cluster),
                      hardware_flops_utilization(time, job.world, cluster, layout.recompute))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclasses.dataclass
class SearchResult:
    feasible: list[Evaluation]
    rejected: list[Evaluation]
    examined: int

    def rejection_summary(self, limit: int = 8) -> list[tuple[str, int, str]]:
        """(reason kind, count, one example) for the commonest reasons."""
        kinds: Counter[str] = Counter()
        examples: dict[str, str] = {}
        for evaluation in self.rejected:
            for reason in evaluation.reasons:
                kind = reason.split(":")[0] if reason.startswith(("out of memory", "swapped")) else \
                    re.sub(r"\d+", "N", reason.split(";")[0].split(":")[0])
                kinds[kind] += 1
                examples.setdefault(kind, f"{evaluation.layout.describe()}: {reason}")
        return [(kind, count, examples[kind]) for kind, count in kinds.most_common(limit)]


def candidate_structures(job: Job, cluster: ClusterProfile, micro_batches: tuple[int, ...] = (1, 2),
                         fixed: dict[str, int] | None = None):
    """Parallel structures worth trying (before memory switches). `fixed` pins dimensions."""
    fixed = fixed or {}
    shape, world = job.shape, job.world
    tps = [t for t in _divisors(cluster.ranks_per_node) if t <= 8]
    pps = [p for p in _divisors(world) if p <= min(16, shape.num_layers)]
    cps = [1] if job.seq_len < 32768 else [c for c in (1, 2, 4, 8) if world % c == 0]
    for tp in ([fixed["tp"]] if "tp" in fixed else tps):
        for pp in ([fixed["pp"]] if "pp" in fixed else pps):
            for cp in ([fixed["cp"]] if "cp" in fixed else cps):
                if world % (tp * pp * cp):
                    continue
                etps = [fixed["etp"]] if "etp" in fixed else sorted({1, tp})
                for etp in etps:
                    eps = [fixed["ep"]] if "ep" in fixed else [
                        e for e in _divisors(world // (pp * etp)) if shape.num_experts % e == 0]
                    for ep in eps:
                        per_stage = -(-shape.num_layers // pp)
                        # at most MAX_VIRTUAL_STAGES virtual stages per pipeline stage: beyond that the
                        # per-chunk scheduling and synchronization the model does not count dominate
                        vpps = [fixed["vpp"]] if "vpp" in fixed else [0] + [
                            v for v in range(1, per_stage // 2 + 1)
                            if pp > 1 and v in (1, 2, 3, 4, 6, 8) and -(-per_stage // v) <= MAX_VIRTUAL_STAGES]
                        for vpp in vpps:
                            noop = default_noop_layers(shape.num_layers, pp, vpp)
                            if len(noop) > pp and "vpp" not in fixed:
                                continue  # more padding than one no-op layer per stage wastes compute
                            for micro in micro_batches:
                                yield PlannedLayout(tp=tp, pp=pp, vpp_layers=vpp, ep=ep, etp=etp, cp=cp, micro_batch=micro,
                                             noop_layers=noop)


SWITCHES = [("none", False), ("selective", False), ("full", False), ("none", True), ("selective", True),
            ("full", True)]


def search(job: Job, cluster: ClusterProfile, flops_per_token: float, precision: Precision | None = None,
           micro_batches: tuple[int, ...] = (1, 2), fixed: dict[str, int] | None = None) -> SearchResult:
    feasible: list[Evaluation] = []
    rejected: list[Evaluation] = []
    examined = 0
    for structure in candidate_structures(job, cluster, micro_batches, fixed):
        problems = validate(structure, job, cluster.ranks_per_node) + engine_problems(structure, job, cluster.engine)
        examined += 1
        if problems:
            rejected.append(Evaluation(structure, False, problems))
            continue
        # The most memory-frugal variant first: when even it does not fit, no variant does.
        frugal = evaluate(job, dataclasses.replace(structure, recompute="full", optimizer_swap=True), cluster,
                          flops_per_token, precision)
        examined += 1
        if not frugal.feasible:
            rejected.append(frugal)
            continue
        fitted = []
        last_failure = None
        for recompute, swap in SWITCHES:
            variant = dataclasses.replace(structure, recompute=recompute, optimizer_swap=swap)
            evaluation = evaluate(job, variant, cluster, flops_per_token, precision)
            examined += 1
            if evaluation.feasible:
                fitted.append(evaluation)
            else:
                last_failure = evaluation
        if fitted:
            feasible.extend(fitted)
        elif last_failure is not None:
            rejected.append(last_failure)  # even full recompute with swap does not fit
    feasible.sort(key=lambda e: e.time.step)
    return SearchResult(feasible, rejected, examined)
