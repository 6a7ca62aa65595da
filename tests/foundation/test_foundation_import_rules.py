"""The import rules between trex's parts, read from the source (every import statement, module level or
inside a function, since a late import is still a dependency). docs/architecture.md draws them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = ("trex_cli.app", "trex_cli.commands", "trex_cli.stages", "trex_cli.orchestrator", "trex_cli.run_report")

# package (a dotted prefix) -> the modules it must not import (dotted prefixes)
RULES = {
    "data_synth": ("torch", "trex_cli", "ascend_kernels"),
    "trex_sandbox": ("trex_cli", "data_synth", "ascend_kernels", "torch"),
    "ascend_kernels": ("trex_cli", "data_synth", "trex_sandbox"),
    "trex_cli.models": ("trex_cli.train", "trex_cli.evaluate", "trex_cli.data", "trex_cli.plan", *CLI),
    "trex_cli.train": ("trex_cli.evaluate", *CLI),
    "trex_cli.evaluate": ("trex_cli.train", "trex_cli.data", *CLI),
    "trex_cli.data": ("trex_cli.evaluate", "trex_cli.train", *CLI),
    "trex_cli.plan": ("trex_cli.evaluate", "trex_cli.data", *CLI),
    "trex_cli.stages": ("trex_cli.app", "trex_cli.commands", "trex_cli.orchestrator"),
    "trex_cli.artifacts": ("trex_cli",),  # the foundation: imports no other part of trex_cli
    "trex_cli.recipe": ("trex_cli",),
    "trex_cli.run_layout": ("trex_cli",),
    "trex_cli.benchmark_files": ("trex_cli",),  # benchmark files as files: read by eval and by data
}
# what the foundation modules may import of trex_cli after all
FOUNDATION_ALLOWED = ("trex_cli.artifacts", "trex_cli.recipe", "trex_cli.console")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return imports_in(path.read_text(), package, str(path))


def imports_in(source: str, package: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, imported module) of every import statement, relative ones resolved against `package`."""
    tree = ast.parse(source, filename=filename)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


def violations() -> list[str]:
    problems = []
    for top in ("data_synth", "trex_sandbox", "ascend_kernels", "trex_cli"):
        for path in sorted((ROOT / top).rglob("*.py")):
            module = module_name(path)
            for prefix, forbidden in RULES.items():
                if not (module == prefix or module.startswith(prefix + ".")):
                    continue
                for line, name in imports_of(path):
                    for banned in forbidden:
                        if not (name == banned or name.startswith(banned + ".")):
                            continue
                        if prefix in ("trex_cli.artifacts", "trex_cli.recipe", "trex_cli.run_layout",
                                      "trex_cli.benchmark_files") and (
                            name.startswith(FOUNDATION_ALLOWED) or name == prefix
                        ):
                            continue
                        problems.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {name} ({prefix} must not)")
    return problems


def test_every_part_imports_only_what_the_rules_allow():
    assert violations() == []


def test_the_rule_reader_sees_late_and_relative_imports():
    """The reader must catch an import inside a function and a relative one, or the rules could not fail."""
    source = "import os\n\ndef f():\n    from trex_cli.train import trainer\n    from ..evaluate import grading\n"
    names = [name for _, name in imports_in(source, "trex_cli.data")]
    assert names == ["os", "trex_cli.train", "trex_cli.evaluate"]
