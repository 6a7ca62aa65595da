"""AdamW with its moments swapped to host memory and its step kept on the device (T-Rex's "swap optimizer").

AdamW keeps two fp32 moments per trainable element: 8 of the 12 bytes the optimizer holds per element
(the third 4 are the fp32 master weight, which here stays on the device as FSDP's sharded parameter). The
T-Rex recipe moves them to host memory and streams them back for the step, so the device holds only two
buckets of moments at a time, while the arithmetic still runs on the device at its memory bandwidth.
That is unlike FSDP's `CPUOffloadPolicy` (`offload_optimizer`), which runs the whole step on the host CPU.

One step, with the parameters cut into `buckets` runs of about equal size:

    copy stream:    up 0 | up 1 | down 0 | up 2 | down 1 | up 3 | down 2 ...
    compute stream:      | step 0 |      step 1 |      step 2 |      ...

Two device slots alternate: bucket i+1 is uploaded into one while bucket i steps in the other, and a slot
is reused only after its download (queued behind its step on the copy stream) has been issued. Copies are
non-blocking from pinned host memory; the host copies are read again only after the last download has
finished (`state_dict`), so the downloads of the last buckets overlap whatever the device does next.

The arithmetic is torch's own AdamW (`torch.optim.adamw.adamw`, the fused kernel where the device has
one), applied to each bucket's local shards, so a step gives exactly what `torch.optim.AdamW` gives. The
state keeps AdamW's keys and types (a DTensor parameter's moments are DTensors with host-resident local
shards), so DCP checkpoints and `torch.distributed.checkpoint.state_dict` treat it as any AdamW.

On a CPU the host and the device are the same memory: the swap saves nothing, but the code path is the
same (each bucket is copied into a slot, stepped there and copied back), which is how the tests hold it to
AdamW without an accelerator.
"""

from __future__ import annotations

import contextlib

import torch
from torch.distributed.tensor import DTensor
from torch.optim.adamw import adamw

from trex_cli.models.deepseek_v4.initialization import local_tensor as _local

MOMENTS = ("exp_avg", "exp_avg_sq")
DEFAULT_BUCKETS = 16  # MindSpeed's --swap-optimizer-times default: 16 transfers per step


class SwappedAdamW(torch.optim.AdamW):
    """`torch.optim.AdamW` whose moments live in (pinned) host memory between steps.

    `buckets` is the number of transfers a step is cut into: the device holds two of them at once (about
    2/buckets of the moments), and more buckets overlap copies and arithmetic more finely."""

    def __init__(self, params, *, buckets: int = DEFAULT_BUCKETS, **adamw_options):
        if buckets < 1:
            raise ValueError(f"[train.parallel] swap_optimizer_buckets = {buckets}: use 1 or more")
        if adamw_options.get("amsgrad") or adamw_options.get("capturable") or adamw_options.get("differentiable"):
            raise ValueError("the swapped AdamW supports neither amsgrad nor capturable nor differentiable steps")
        super().__init__(params, **adamw_options)
        self.buckets = buckets
        self._slots: list[torch.Tensor] = []  # the two device buffers, kept between steps
        self._copy_stream = None
        self._downloads_done = None  # event after the last download of the last step

    # ---- where the moments live ---------------------------------------------------------------------

    @staticmethod
    def _device_module(device: torch.device):
        """torch.cuda / torch.npu (streams and events), or None on a CPU where copies are synchronous."""
        return None if device.type == "cpu" else torch.get_device_module(device)

    @staticmethod
    def _host_zeros_like(local: torch.Tensor) -> torch.Tensor:
        return torch.zeros(local.shape, dtype=local.dtype, device="cpu", pin_memory=local.device.type != "cpu")

    def _host_like(self, value: torch.Tensor) -> torch.Tensor:
        """Zeros shaped as `value` (a DTensor keeps its mesh and placements) with the local data in host memory."""
        host = self._host_zeros_like(_local(value))
        if isinstance(value, DTensor):
            return DTensor.from_local(host, value.device_mesh, value.placements, run_check=False,
                                      shape=value.shape, stride=value.stride())
        return host

    def _to_host(self, value: torch.Tensor) -> torch.Tensor:
        """The same tensor with its local data in host memory."""
        host = self._host_like(value)
        _local(host).copy_(_local(value))
        return host

    def _new_state(self, group: dict, parameter: torch.Tensor) -> dict:
        # where torch's AdamW keeps the step count: on the device for the fused kernel, else on the host
        step_device = _local(parameter).device if group["fused"] else torch.device("cpu")
        state = {"step": torch.zeros((), dtype=torch.float32, device=step_device)}
        for key in MOMENTS:
            state[key] = self._host_like(parameter)
        return state

    def wait_for_downloads(self) -> None:
        """Block until the last step's moments have landed in host memory."""
        if self._downloads_done is not None:
            self._downloads_done.synchronize()
            self._downloads_done = None

    def state_dict(self):
        self.wait_for_downloads()
        return super().state_dict()

    def load_state_dict(self, state_dict) -> None:
        self.wait_for_downloads()
        super().load_state_dict(state_dict)  # torch moves the moments to each parameter's device
        for state in self.state.values():
            for key in MOMENTS:
                if key in state:
                    state[key] = self._to_host(state[key])

    # ---- the step -----------------------------------------------------------------------------------

    def _bucketed(self, entries: list[tuple[dict, torch.Tensor]]) -> list[list[tuple[dict, torch.Tensor]]]:
        """Consecutive runs of parameters of about total / buckets elements each (a parameter is never split)."""
        total = sum(_local(p).numel() for _, p in entries)
        target = max(1, -(-total // self.buckets))
        runs, current, size = [], [], 0
        for entry in entries:
            current.append(entry)
            size += _local(entry[1]).numel()
            if size >= target:
                runs.append(current)
                current, size = [], 0
        if current:
            runs.append(current)
        return runs

    def _slot_views(self, slot: torch.Tensor, run) -> list[tuple[torch.Tensor, torch.Tensor]]:
        views, offset = [], 0
        for _group, parameter in run:
            local = _local(parameter)
            count = local.numel()
            exp_avg = slot[offset : offset + count].view(local.shape)
            exp_avg_sq = slot[offset + count : offset + 2 * count].view(local.shape)
            views.append((exp_avg, exp_avg_sq))
            offset += 2 * count
        return views

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("the swapped AdamW takes no closure")
        entries = []
        for group in self.param_groups:
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                if parameter.grad.is_sparse:
                    raise RuntimeError("AdamW does not support sparse gradients")
                if not self.state[parameter]:
                    self.state[parameter] = self._new_state(group, parameter)
                entries.append((group, parameter))
        if not entries:
            return None
        device = _local(entries[0][1]).device
        runs = self._bucketed(entries)
        need = 2 * max(sum(_local(p).numel() for _, p in run) for run in runs)
        dtype = _local(entries[0][1]).dtype
        if not self._slots or self._slots[0].numel() < need or self._slots[0].device != device:
            self.wait_for_downloads()  # the old slots may still be read by the last step's downloads
            self._slots = [torch.empty(need, dtype=dtype, device=device) for _ in range(2)]
        module = self._device_module(device)
        if module is not None and self._copy_stream is None:
            self._copy_stream = module.Stream(device=device)
        compute = module.current_stream(device) if module is not None else None
        copy_stream = self._copy_stream if module is not None else None

        def on_copy_stream():
            return module.stream(copy_stream) if module is not None else contextlib.nullcontext()

        def record(stream):
            if module is None:
                return None
            event = module.Event()
            event.record(stream)
            return event

        if module is not None:
            copy_stream.wait_stream(compute)  # gradients clipped, slots free: the uploads may start

        def upload(index: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
            views = self._slot_views(self._slots[index % 2], runs[index])
            with on_copy_stream():
                for (_group, parameter), pair in zip(runs[index], views, strict=True):
                    state = self.state[parameter]
                    for key, view in zip(MOMENTS, pair, strict=True):
                        view.copy_(_local(state[key]), non_blocking=True)
                return views, record(copy_stream)

        pending = upload(0)
        for index, run in enumerate(runs):
            views, uploaded = pending
            if index + 1 < len(runs):
                pending = upload(index + 1)  # into the other slot, while this bucket steps
            if uploaded is not None:
                compute.wait_event(uploaded)
            by_group: dict[int, list] = {}
            for (group, parameter), pair in zip(run, views, strict=True):
                by_group.setdefault(id(group), [group, []])[1].append((parameter, pair))
            for group, members in by_group.values():
                beta1, beta2 = group["betas"]
                adamw(
                    [_local(p) for p, _ in members],
                    [_local(p.grad) for p, _ in members],
                    [pair[0] for _, pair in members],
                    [pair[1] for _, pair in members],
                    [],
                    [self.state[p]["step"] for p, _ in members],
                    foreach=group["foreach"],
                    fused=group["fused"],
                    amsgrad=False,
                    beta1=beta1,
                    beta2=beta2,
                    lr=group["lr"],
                    weight_decay=group["weight_decay"],
                    eps=group["eps"],
                    maximize=group["maximize"],
                )
            stepped = record(compute)
            with on_copy_stream():
                if stepped is not None:
                    copy_stream.wait_event(stepped)
                for (_group, parameter), pair in zip(run, views, strict=True):
                    state = self.state[parameter]
                    for key, view in zip(MOMENTS, pair, strict=True):
                        _local(state[key]).copy_(view, non_blocking=True)
        # the next step's uploads follow these downloads on the copy stream, and the slots are kept, so
        # nothing waits for them here: they overlap the next forward pass
        self._downloads_done = record(copy_stream)
        return None
