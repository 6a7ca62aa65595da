"""The registry: which implementation of each operator serves a call.

Every operator has a `reference` implementation. Faster ones register under a backend name:

- `npu`: torch_npu fused operators (serves tensors on an Ascend NPU; loaded only when torch_npu works),
- `triton`: Triton kernels and torch-native fused operators (serves CUDA tensors; loaded only when
  triton imports and CUDA is present, or under TRITON_INTERPRET=1, where tests call its functions on
  CPU tensors directly: automatic resolution still gives CPU tensors the `cpu` backend),
- `cpu`: fused autograd functions for CPU tensors,
- `reference`: plain PyTorch, any device.

A call resolves from the device of its first tensor: the automatic order is the device's own backend,
then `reference`. The choice can be forced with the environment variable TREX_KERNELS or with
`configure(...)`: a backend name ("reference", "cpu", "triton", "npu" or "auto"), optionally followed by
per-operator choices, e.g. `TREX_KERNELS=cpu,sparse_attention=reference`. A forced backend that lacks an
operator falls back to `reference` for that operator. Each resolved choice is logged once.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable

from ascend_kernels import device as device_info

logger = logging.getLogger("ascend_kernels")

BACKENDS = ("npu", "triton", "cpu", "reference")
ENVIRONMENT_VARIABLE = "TREX_KERNELS"
# The device types each backend's kernels can run on; `reference` is plain torch and runs anywhere.
BACKEND_DEVICES = {"npu": {"npu"}, "triton": {"cuda"}, "cpu": {"cpu"}, "reference": None}
AUTOMATIC_ORDER = {"npu": ("npu", "reference"), "cuda": ("triton", "reference"), "cpu": ("cpu", "reference")}
BACKEND_MODULES = {
    "reference": "ascend_kernels.reference",
    "cpu": "ascend_kernels.cpu",
    "triton": "ascend_kernels.triton",
    "npu": "ascend_kernels.npu",
}

_implementations: dict[str, dict[str, Callable]] = {}
_loaded_backends: dict[str, bool] = {}
_load_errors: dict[str, str] = {}
_forced: tuple[str, dict[str, str]] | None = None
_resolved: dict[tuple[str, str], tuple[str, Callable]] = {}


def register(operator: str, backend: str) -> Callable[[Callable], Callable]:
    """Decorator: register `function` as `backend`'s implementation of `operator`."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown kernel backend {backend!r}: expected one of {BACKENDS}")

    def decorate(function: Callable) -> Callable:
        _implementations.setdefault(operator, {})[backend] = function
        return function

    return decorate


def backend_usable(backend: str) -> bool:
    """Whether `backend` can run in this process (its device and packages work)."""
    if backend == "npu":
        return device_info.npu_available()
    if backend == "triton":
        return device_info.triton_available()
    return backend in ("cpu", "reference")


def _load_backend(backend: str) -> bool:
    """Import a backend's module (which registers its implementations) once, if the backend is usable."""
    if backend not in _loaded_backends:
        loaded = False
        if backend_usable(backend):
            try:
                importlib.import_module(BACKEND_MODULES[backend])
                loaded = True
            except Exception as error:  # a broken optional install must not take the reference down
                _load_errors[backend] = f"{type(error).__name__}: {error}"
                logger.warning("ascend_kernels: the %s backend failed to load (%s)", backend, _load_errors[backend])
        _loaded_backends[backend] = loaded
    return _loaded_backends[backend]


def parse_choice(text: str) -> tuple[str, dict[str, str]]:
    """Parse 'backend[,operator=backend...]' (the TREX_KERNELS syntax) into (default, per-operator)."""
    default = "auto"
    per_operator: dict[str, str] = {}
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        operator, _, backend = part.rpartition("=")
        if backend not in (*BACKENDS, "auto"):
            raise ValueError(
                f"{ENVIRONMENT_VARIABLE}={text!r}: unknown kernel backend {backend!r}; "
                f"use one of auto, {', '.join(BACKENDS)} (optionally operator=backend, comma separated)"
            )
        if operator:
            per_operator[operator] = backend
        else:
            default = backend
    return default, per_operator


def _current_choice() -> tuple[str, dict[str, str]]:
    if _forced is not None:
        return _forced
    return parse_choice(os.environ.get(ENVIRONMENT_VARIABLE, "auto"))


def configure(backend: str | None = None, device: str | None = None) -> dict[str, str]:
    """Force the kernel choice for this process (None: read TREX_KERNELS, default auto) and log, once,
    which implementation each operator will use on `device` (default: the detected device).

    `backend` takes the TREX_KERNELS syntax. A forced backend that cannot run here raises ValueError.
    Returns {operator: backend}.
    """
    global _forced
    _forced = parse_choice(backend) if backend is not None else None
    _resolved.clear()
    default, per_operator = _current_choice()
    for name in (default, *per_operator.values()):
        if name not in ("auto", "reference") and not backend_usable(name):
            raise ValueError(
                f"kernel backend {name!r} was forced but cannot run here ({_unusable_reason(name)}); "
                f"set {ENVIRONMENT_VARIABLE}=auto, cpu or reference instead"
            )
    device = device or device_info.detect_device()
    plan = {operator: resolve(operator, device, log=False)[0] for operator in operators()}
    logger.info(
        "ascend_kernels on %s (%s=%s): %s",
        device,
        ENVIRONMENT_VARIABLE,
        backend if backend is not None else os.environ.get(ENVIRONMENT_VARIABLE, "auto"),
        ", ".join(f"{operator}={choice}" for operator, choice in plan.items()),
    )
    return plan


def _unusable_reason(backend: str) -> str:
    if backend == "npu":
        return "torch_npu does not import or sees no NPU"
    if backend == "triton":
        return "triton does not import, or there is no CUDA device and TRITON_INTERPRET is not 1"
    return "unknown backend"


def operators() -> list[str]:
    """Names of all operators (those with a reference implementation)."""
    _load_backend("reference")
    return sorted(name for name, impls in _implementations.items() if "reference" in impls)


def implementations(operator: str) -> dict[str, Callable]:
    """{backend: function} for every backend that is usable here and implements `operator`."""
    for backend in BACKENDS:
        _load_backend(backend)
    return dict(_implementations.get(operator, {}))


def resolve(operator: str, device: str, log: bool = True) -> tuple[str, Callable]:
    """(backend, function) serving `operator` for tensors on `device` under the current choice."""
    key = (operator, device)
    if key in _resolved:
        return _resolved[key]
    _load_backend("reference")
    if operator not in _implementations or "reference" not in _implementations[operator]:
        raise ValueError(f"unknown operator {operator!r}; known: {', '.join(operators())}")
    default, per_operator = _current_choice()
    wanted = per_operator.get(operator, default)
    if wanted == "auto":
        candidates = AUTOMATIC_ORDER.get(device, ("reference",))
    else:
        candidates = (wanted, "reference")
    for backend in candidates:
        devices = BACKEND_DEVICES[backend]
        if devices is not None and device not in devices:
            continue
        if _load_backend(backend) and backend in _implementations[operator]:
            _resolved[key] = (backend, _implementations[operator][backend])
            break
    else:  # unreachable while every operator has a reference, kept as an invariant
        raise AssertionError(f"no implementation of {operator} for {device}")
    chosen = _resolved[key][0]
    if log:
        level = logging.INFO if wanted in ("auto", chosen) else logging.WARNING
        logger.log(level, "ascend_kernels: %s on %s uses %s (asked: %s)", operator, device, chosen, wanted)
    return _resolved[key]


def load_errors() -> dict[str, str]:
    """Backends that were usable but whose module failed to import, with the error."""
    return dict(_load_errors)
