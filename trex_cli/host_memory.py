"""The host allocator policy of a training process: keep freed memory in the process.

glibc's malloc returns every block above its mmap threshold to the kernel as soon as it is freed (the
threshold adapts, up to 32 MiB), and gives the top of its heap back once more than a trim threshold
lies free there. A training step allocates and frees the same large activations and gradients every
step, so every step page-faults them in afresh. On this project's 2-core machines that was about a
sixth of a CPU training step of the `small` flavor (5.2 s instead of 6.3 s, measured side by side).
The policy serves every block from the heap (no mmap, M_MMAP_MAX 0: blocks above 32 MiB, the largest
threshold glibc accepts, were still mapped and unmapped each step) and never trims it: its pages are
faulted in once per process. On the demo's SFT step (2,048-token rows of 4, hidden 128) the 32 MiB
threshold alone left 1.5 million page faults a step (7.4 s a step); with no mmap 5 thousand (5.8 s), for
a peak RSS of 5.0 GB instead of 4.0 GB. A large block freed later in a run is reused, not returned, so
the process keeps its peak. jemalloc or tcmalloc preloaded with LD_PRELOAD do the same job about as
well; then this policy is left alone.

Set TREX_HOST_MALLOC=system to keep glibc's defaults (e.g. to measure the difference).

`start_peak_measurement` / `peak_rss_kib` measure a phase's peak resident memory (Linux): the trainer
reports what building and loading the model cost each rank with them (`TREX_BUILD_MEMORY_DIR`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from pathlib import Path

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_MAX = -4  # 0: no block is ever mmapped, so the (adaptive) mmap threshold no longer matters
_NEVER_TRIM = -1  # mallopt(3): -1 disables trimming completely
_TOP_PAD = 64 << 20  # grow the heap in 64 MiB steps

_state: bool | None = None


def keep_freed_memory() -> bool:
    """Apply the policy once in this process; True when it is in force (Linux with glibc)."""
    global _state
    if _state is not None:
        return _state
    _state = False
    if not sys.platform.startswith("linux") or os.environ.get("TREX_HOST_MALLOC", "") == "system":
        return False
    if any(name in os.environ.get("LD_PRELOAD", "") for name in ("jemalloc", "tcmalloc", "mimalloc")):
        return False  # another allocator serves malloc: glibc's settings would not matter
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # glibc only: musl has no such tuning
        return False
    _state = all(
        libc.mallopt(option, value) == 1
        for option, value in (
            (_M_TRIM_THRESHOLD, _NEVER_TRIM),
            (_M_TOP_PAD, _TOP_PAD),
            (_M_MMAP_MAX, 0),
        )
    )
    return _state


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field} (Linux only)")


def start_peak_measurement() -> int:
    """Reset this process's peak RSS (VmHWM) to its current RSS; returns that RSS in KiB."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_kib("VmRSS")


def peak_rss_kib() -> int:
    """This process's peak RSS since the last `start_peak_measurement` (or its start), in KiB."""
    return _status_kib("VmHWM")
