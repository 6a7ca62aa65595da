"""One module per problem family; each defines `FAMILY`, an instance of a `ProblemFamily` subclass."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from data_synth.family import ProblemFamily


@cache
def all_families() -> dict[str, ProblemFamily]:
    """Every family in this package, by name, in a stable (sorted) order."""
    families: dict[str, ProblemFamily] = {}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        family = getattr(module, "FAMILY", None)
        if family is None:
            continue
        if family.name in families:
            raise RuntimeError(f"two families are named {family.name!r}")
        families[family.name] = family
    return dict(sorted(families.items()))


def get_family(name: str) -> ProblemFamily:
    families = all_families()
    if name not in families:
        raise ValueError(f"unknown family {name!r}; available: {', '.join(families)}")
    return families[name]
