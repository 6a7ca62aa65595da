"""Recipes: one TOML file per pipeline run, one table per stage, validated against typed schemas.

Each stage owns a dataclass for its section (registered in SECTIONS by import path, so loading a
recipe imports no heavy package). Unknown keys and wrong types are errors that name the file, the key
and what is allowed. The resolved recipe, defaults filled in, is saved in each stage folder.

A command-line value beats the recipe in exactly one way: it becomes an override of a recipe key,
applied to the raw tables before validation, so a flag is checked like the key it sets. `--set a.b=c`
overrides any key (the value is read as a TOML literal, else as a string); a command's own flags
(`trex synth --n 200`) are `FlagOverride`s of their keys (`synth.n`), applied after the `--set`s.
"""

from __future__ import annotations

import dataclasses
import importlib
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

# section name -> "module:Class" of its schema dataclass
SECTIONS: dict[str, str] = {
    "run": "trex_cli.recipe:RunSection",
    "synth": "data_synth.config:SynthConfig",
    "data": "trex_cli.data.config:DataConfig",
    "model": "trex_cli.models.deepseek_v4.config:ModelSection",
    "train": "trex_cli.train.config:TrainSection",
    "eval": "trex_cli.evaluate.config:EvalConfig",
    "plan": "trex_cli.plan.config:PlanSection",
    "mindspeed": "trex_cli.train.engines.mindspeed.config:MindSpeedSection",
}


@dataclasses.dataclass
class ExecutorSettings:
    """The `[run.executor]` table of a recipe: which executor runs a stage's tasks, how many, with what."""

    kind: typing.Literal["local", "slurm", "ray"] = "local"
    tasks: int = 1  # tasks the work is split into (the result does not depend on it)
    workers: int = 0  # tasks running at once; 0: all of them (local: at most this machine's cores)
    # Slurm: one job array of `tasks` jobs
    partition: str = ""
    time: str = "04:00:00"  # each job's time limit
    cpus_per_task: int = 2  # Slurm and Ray: CPUs reserved per task (give synth.workers of them)
    mem_per_cpu_gb: float = 2.0
    job_name: str = "trex"
    qos: str = ""
    sbatch_args: dict[str, str] = dataclasses.field(default_factory=dict)  # more #SBATCH lines: {"account" = "my-account"}
    venv: str = ""  # a venv's activate script to source in each job (e.g. /shared/trex/.venv/bin/activate)
    setup: list[str] = dataclasses.field(default_factory=list)  # shell lines each job runs first (module load, export ...)
    srun: bool = True  # run each job's task under srun
    poll_s: float = 30.0  # how often the submitting process looks for finished Slurm tasks
    # Ray: an existing cluster's address ("auto", "ray://head:10001"); empty: the one this process started
    # or joins (ray.init())
    address: str = ""


@dataclasses.dataclass
class RunSection:
    """The `[run]` table: what names the run and where its stage folders go; `[run.executor]` says where a
    sharded stage's tasks run (`trex_cli.executors`)."""

    name: str = ""  # default: the recipe file's stem
    run_dir: str = ""  # default: runs/<name>
    seed: int = 0
    executor: ExecutorSettings = dataclasses.field(default_factory=ExecutorSettings)


def schema_for(section: str) -> type:
    if section not in SECTIONS:
        raise ValueError(f"unknown recipe section [{section}]; allowed sections: {', '.join(SECTIONS)}")
    module_name, class_name = SECTIONS[section].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """Check `value` (from TOML) against `annotation`; return it converted (ints widen to floats,
    tables become nested dataclasses). Raises ValueError naming `where` on a mismatch."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in args:
            if option is type(None):
                continue
            try:
                return _coerce(value, option, where)
            except ValueError as error:
                errors.append(str(error))
        raise ValueError(f"{where}: expected {_type_name(annotation)}, got {value!r}")
    if origin is typing.Literal:
        if value not in args:
            allowed = ", ".join(repr(a) for a in args)
            raise ValueError(f"{where}: {value!r} is not allowed; use one of {allowed}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            raise ValueError(f"{where}: expected a list ({_type_name(annotation)}), got {value!r}")
        item_type = args[0] if args else Any
        items = [_coerce(v, item_type, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a table ({_type_name(annotation)}), got {value!r}")
        value_type = args[1] if len(args) == 2 else Any
        return {str(k): _coerce(v, value_type, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(annotation):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a table, got {value!r}")
        return build_dataclass(annotation, value, where)
    if annotation is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {value!r}")
        return value
    if isinstance(annotation, type) and not isinstance(value, annotation):
        raise ValueError(f"{where}: expected {_type_name(annotation)}, got {value!r}")
    return value


def build_dataclass(cls: type, table: dict, where: str) -> Any:
    """Build dataclass `cls` from a TOML table; unknown keys and wrong types raise ValueError."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs = {}
    for key, value in table.items():
        if key not in fields:
            allowed = ", ".join(sorted(fields)) or "(none)"
            raise ValueError(f"{where}: unknown key '{key}'; allowed keys: {allowed}")
        kwargs[key] = _coerce(value, hints[key], f"{where}.{key}")
    return cls(**kwargs)


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b=c` -> (['a', 'b'], value); the value is a TOML literal when it parses as one."""
    if "=" not in text:
        raise ValueError(f"--set {text!r}: expected KEY=VALUE, for example --set synth.n=200")
    key, raw = text.split("=", 1)
    path = [part for part in key.strip().split(".") if part]
    if len(path) < 2:
        raise ValueError(f"--set {text!r}: the key needs a section, for example synth.n")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return path, value


@dataclasses.dataclass(frozen=True)
class FlagOverride:
    """A command-line flag that sets one recipe key: `FlagOverride("--n", "synth.n", 200)`. Errors in
    its value name both the flag and the key."""

    flag: str
    key: str
    value: Any

    @property
    def path(self) -> list[str]:
        return self.key.split(".")


def flag_overrides(flags: dict[str, tuple[str, Any]]) -> list[FlagOverride]:
    """{"--n": ("synth.n", 200), "--seed": ("synth.seed", None)} -> overrides of the flags that were given
    (a None value means the flag was not given, so the recipe's value stands)."""
    return [FlagOverride(flag, key, value) for flag, (key, value) in flags.items() if value is not None]


def _set_key(raw: dict, keys: list[str], value: Any, what: str) -> None:
    table = raw
    for key in keys[:-1]:
        table = table.setdefault(key, {})
        if not isinstance(table, dict):
            raise ValueError(f"{what}: {key} is not a table")
    table[keys[-1]] = value


@dataclasses.dataclass
class Recipe:
    """A loaded recipe: the raw tables (after overrides) and their validated sections."""

    path: Path | None
    raw: dict
    sections: dict[str, Any] = dataclasses.field(default_factory=dict)
    flags: list[FlagOverride] = dataclasses.field(default_factory=list)  # the command's flags, applied

    @property
    def name(self) -> str:
        run = self.section("run")
        if run.name:
            return run.name
        return self.path.stem if self.path else "recipe"

    def section(self, name: str) -> Any:
        """The validated dataclass for `[name]`, defaults filled in when the table is absent."""
        if name not in self.sections:
            where = f"{self.path or 'recipe'}: [{name}]"
            self.sections[name] = build_dataclass(schema_for(name), self.raw.get(name, {}), where)
        return self.sections[name]

    def resolved(self, names: list[str] | None = None) -> dict:
        """Plain dict of the validated sections (all present ones by default), defaults filled in."""
        names = names or [n for n in SECTIONS if n in self.raw or n == "run"]
        return {name: dataclasses.asdict(self.section(name)) for name in names}

    def save_resolved(self, folder: Path, names: list[str] | None = None) -> Path:
        """Write the resolved recipe (these sections) as `recipe.resolved.toml` in a stage folder."""
        from trex_cli.artifacts import write_text_atomic

        target = Path(folder) / "recipe.resolved.toml"
        header = f"# resolved from {self.path}\n" if self.path else ""
        write_text_atomic(target, header + dumps_toml(self.resolved(names)))
        return target


def load_recipe(
    path: str | Path | None, overrides: list[str] | None = None, flags: list[FlagOverride] | None = None
) -> Recipe:
    """Read and validate a recipe file (or start from defaults when `path` is None), with the `--set`
    overrides and then the command's flags applied to its keys before validation."""
    raw: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"recipe {path} not found (recipes live in recipes/, e.g. recipes/tiny-cpu.toml)")
        try:
            raw = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"{path}: not valid TOML: {error}") from None
    for text in overrides or []:
        keys, value = parse_override(text)
        _set_key(raw, keys, value, f"--set {text!r}")
    for flag in flags or []:
        _set_key(raw, flag.path, flag.value, flag.flag)
    for name in raw:
        if name not in SECTIONS:
            raise ValueError(
                f"{path or 'recipe'}: unknown section [{name}]; allowed sections: {', '.join(SECTIONS)}"
            )
        if not isinstance(raw[name], dict):
            raise ValueError(f"{path or 'recipe'}: '{name}' must be a table ([{name}])")
    recipe = Recipe(path=path, raw=raw, flags=list(flags or []))
    for name in raw:
        try:
            recipe.section(name)  # validate every present section now, so mistakes surface at once
        except ValueError as error:
            raise ValueError(_name_the_flag(str(error), flags or [])) from None
    return recipe


def _name_the_flag(message: str, flags: list[FlagOverride]) -> str:
    """A validation error about a key a flag set names the flag too (the user typed the flag)."""
    for flag in flags:
        section, *rest = flag.path
        if f"[{section}].{'.'.join(rest)}:" in message:
            return f"{flag.flag} {flag.value!r}: {message}"
    return message


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if value is None:
        return '""'
    raise TypeError(f"cannot write {value!r} as TOML")


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else _toml_value(str(key))


def dumps_toml(tables: dict[str, dict]) -> str:
    """Write {section: {key: value}} as TOML; nested dicts become sub-tables. None is dropped."""
    lines: list[str] = []

    def emit(prefix: str, table: dict) -> None:
        scalars = {k: v for k, v in table.items() if not isinstance(v, dict) and v is not None}
        nested = {k: v for k, v in table.items() if isinstance(v, dict)}
        lines.append(f"[{prefix}]")
        lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars.items())
        lines.append("")
        for key, sub in nested.items():
            emit(f"{prefix}.{_toml_key(key)}", sub)

    for name, table in tables.items():
        emit(name, table)
    return "\n".join(lines)
