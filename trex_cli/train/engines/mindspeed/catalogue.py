"""The command-line flags of the pinned MindSpeed-LLM stack, read from its sources, and the check of a
launch script against them.

MindSpeed-LLM v26.1.0 runs on MindSpeed 26.1.0_core_r0.12.1 and Megatron core_v0.12.1; together they
define the flags a training, preprocessing or conversion command accepts. `build_catalogue` reads
every `add_argument(...)` call of those sources with Python's `ast` (and MindSpeed's
`add_parser_argument_choices_value`, which widens an existing flag's choices) and records, per
flag, its type, nargs, choices and action, per program (`train`, `preprocess`, `convert`). It also
records the framework's entry points and the names its model spec modules define, and the flags of
T-Rex's own launch scripts, so tests check trex's scripts against the framework and T-Rex offline.

`check_script` reads a launch script the way bash would word-split its argument arrays and reports
every flag the program does not define, every value of the wrong type or arity, every value outside
the declared choices and every unknown spec module.

Regenerate the shipped files from a sources folder laid out like `superpod_sources/` (one folder per
component, VERSIONS.txt, T-Rex's scripts):

    python -m trex_cli.train.engines.mindspeed.catalogue --sources DIR \
        [--trex-script FLAVOR:STAGE:ORIGIN:FILE ...]

which writes `catalogue.json` and `trex_scripts.json` beside this module (or `--out`/`--scripts-out`).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shlex
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CATALOGUE_FILE = HERE / "catalogue.json"
TREX_SCRIPTS_FILE = HERE / "trex_scripts.json"

# Which source files define the flags of each program. Components are the top folders of the sources
# folder, matched by their name's start (the version follows it).
PROGRAMS: dict[str, list[tuple[str, str]]] = {
    "train": [
        ("megatron-core", "megatron/training/arguments.py"),
        ("mindspeed-", "mindspeed/arguments.py"),
        ("mindspeed-", "mindspeed/features_manager/"),
        ("mindspeed_llm-", "mindspeed_llm/features_manager/"),
    ],
    "preprocess": [("mindspeed_llm-", "preprocess_data.py")],
    "convert": [("mindspeed_llm-", "convert_ckpt_v2.py")],
}
SPEC_FOLDER = ("mindspeed_llm-", "mindspeed_llm/tasks/models/spec/")
ENTRY_COMPONENT = "mindspeed_llm-"
# Launcher flags (torchrun / torch.distributed.launch) and the argument arrays that hold them.
LAUNCHER_ARRAYS = {"DISTRIBUTED_ARGS", "torchrun_args"}
SPEC_FLAGS = ("--spec", "--mtp-spec")
NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "count", "help", "version"}


# ---- reading the framework sources ------------------------------------------------------------------


def _literal(node: ast.AST, names: dict[str, Any]) -> Any:
    """A constant expression's value; module-level names resolve through `names`; None if not constant."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _type_name(node: ast.AST | None) -> str:
    if node is None:
        return "str"  # argparse's default
    if isinstance(node, ast.Name):
        return node.id  # int, float, str, or a converter function
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Lambda):
        return "lambda"
    return "callable"


def _module_constants(tree: ast.Module) -> dict[str, Any]:
    constants: dict[str, Any] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and \
                isinstance(statement.targets[0], ast.Name):
            value = _literal(statement.value, constants)
            if value is not None:
                constants[statement.targets[0].id] = value
    return constants


def flags_in_source(text: str, where: str) -> tuple[dict[str, dict], dict[str, list]]:
    """(flag -> definition, flag -> choices added by add_parser_argument_choices_value) of one file."""
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        raise ValueError(f"{where}:{error.lineno}: cannot parse ({error.msg})") from None
    constants = _module_constants(tree)
    flags: dict[str, dict] = {}
    extra_choices: dict[str, list] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "add_parser_argument_choices_value" and len(node.args) >= 3:
            flag, value = _literal(node.args[1], constants), _literal(node.args[2], constants)
            if isinstance(flag, str) and value is not None:
                extra_choices.setdefault(flag, []).append(value)
            continue
        if node.func.attr != "add_argument":
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        long_names = [n for n in names if n.startswith("--")]
        if not long_names:
            continue  # positional or built from an f-string: not a flag a script can name
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        action = _literal(keywords["action"], constants) if "action" in keywords else None
        if "action" in keywords and action is None:
            action = _type_name(keywords["action"])  # a custom Action class
        nargs = _literal(keywords["nargs"], constants) if "nargs" in keywords else None
        choices = None
        if "choices" in keywords:
            value = _literal(keywords["choices"], constants)
            choices = list(value) if isinstance(value, (list, tuple, set)) else "dynamic"
        definition = {
            "type": None if action in NO_VALUE_ACTIONS else _type_name(keywords.get("type")),
            "nargs": nargs,
            "choices": choices,
            "action": action,
            "source": f"{where}:{node.lineno}",
        }
        for name in long_names:
            flags[name] = definition
    return flags, extra_choices


def _component(sources: Path, prefix: str) -> Path | None:
    matches = sorted(p for p in sources.iterdir() if p.is_dir() and p.name.startswith(prefix))
    return matches[0] if matches else None


def _files(sources: Path, component_prefix: str, subpath: str) -> list[Path]:
    component = _component(sources, component_prefix)
    if component is None:
        raise ValueError(f"{sources}: no folder starting with {component_prefix!r} (the pinned sources are "
                         "one folder per component, e.g. mindspeed_llm-v26.1.0)")
    target = component / subpath
    if subpath.endswith("/"):
        return sorted(target.rglob("*.py")) if target.is_dir() else []
    return [target] if target.is_file() else []


def _merge(into: dict[str, Any], flag: str, definition: dict) -> None:
    """Several files may define one flag (MindSpeed re-registers Megatron's): keep every distinct
    definition; a value is valid when one of them accepts it."""
    entry = into.setdefault(flag, {"definitions": []})
    key = {k: v for k, v in definition.items() if k != "source"}
    for existing in entry["definitions"]:
        if {k: v for k, v in existing.items() if k != "source"} == key:
            return
    entry["definitions"].append(definition)


def build_catalogue(sources: Path) -> dict[str, Any]:
    sources = Path(sources)
    versions_file = sources / "VERSIONS.txt"
    if not versions_file.is_file():
        raise ValueError(f"{sources}: no VERSIONS.txt; the catalogue must say which sources it was read from")
    programs: dict[str, dict] = {}
    for program, places in PROGRAMS.items():
        flags: dict[str, Any] = {}
        extra: dict[str, list] = {}
        for component_prefix, subpath in places:
            for file in _files(sources, component_prefix, subpath):
                where = file.relative_to(sources).as_posix()
                found, choices = flags_in_source(file.read_text(encoding="utf-8", errors="replace"), where)
                for flag, definition in found.items():
                    _merge(flags, flag, definition)
                for flag, values in choices.items():
                    extra.setdefault(flag, []).extend(values)
        for flag, values in extra.items():
            for definition in flags.get(flag, {}).get("definitions", []):
                if isinstance(definition["choices"], list):
                    definition["choices"] = definition["choices"] + [v for v in values
                                                                     if v not in definition["choices"]]
        programs[program] = dict(sorted(flags.items()))
    component = _component(sources, ENTRY_COMPONENT)
    entry_points = sorted(p.name for p in component.glob("*.py")) if component else []
    specs: dict[str, list[str]] = {}
    spec_root = _component(sources, SPEC_FOLDER[0])
    for file in _files(sources, *SPEC_FOLDER):
        module = ".".join(file.relative_to(spec_root).with_suffix("").parts)
        tree = ast.parse(file.read_text(encoding="utf-8"))
        specs[module] = sorted(t.id for s in tree.body if isinstance(s, ast.Assign)
                               for t in s.targets if isinstance(t, ast.Name))
    return {
        "generated_by": "python -m trex_cli.train.engines.mindspeed.catalogue",
        "versions": [line.strip() for line in versions_file.read_text().splitlines() if line.strip()],
        "entry_points": entry_points,
        "spec_modules": specs,
        "programs": programs,
    }


# ---- reading launch scripts -------------------------------------------------------------------------

_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_ARRAY_START = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)(\+?)=\((.*)$")
_STRING_START = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*_ARGS)="(.*)$')
_DEFAULT = re.compile(r'^"?\$\{([A-Za-z_][A-Za-z0-9_]*):-([^}$]*)\}"?$')
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(\[@\])?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_LAUNCH = re.compile(r"(?:torchrun|torch\.distributed\.launch)\b.*?([A-Za-z0-9_]+\.py)\"?")


def _words(text: str) -> list[str]:
    return shlex.split(text.replace("\\\n", " "), comments=True)


def group_flags(words: list[str], substitute=lambda word: [word]) -> dict[str, list[str]]:
    """Command words as flag -> values (the words up to the next `--flag`), in order of appearance."""
    flags: dict[str, list[str]] = {}
    current: str | None = None
    for word in words:
        if word.startswith("--"):
            current = word
            flags[current] = []
        elif current is not None:
            flags[current].extend(substitute(word))
    return flags


def read_script(text: str) -> dict[str, Any]:
    """The training command of a bash launch script: its entry point and its flags with their values.

    Flags are collected from the argument arrays (`name=( ... )`, `name+=( ... )`) and `*_ARGS="..."`
    strings the launch line expands, and from the words after the entry point on that line. Simple
    assignments (`TP=2`, `SEQ_LEN="${SEQ_LEN:-4096}"`) and arrays of values are substituted so values
    can be type-checked; anything else stays as written (e.g. `$DATA_PATH`)."""
    scalars: dict[str, str] = {}
    arrays: dict[str, list[str]] = {}
    argument_groups: dict[str, list[str]] = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        array = _ARRAY_START.match(line)
        string = _STRING_START.match(line)
        if array or string:
            name = (array or string).group(1)
            body = (array or string).group(3 if array else 2)
            closer = ")" if array else '"'
            closing = re.compile(re.escape(closer) + r"\s*(#[^'\"]*)?$")  # the closer, maybe a comment after it
            collected = [body]
            while not closing.search(collected[-1]) and index + 1 < len(lines):
                index += 1
                collected.append(lines[index])
            collected[-1] = closing.sub("", collected[-1])
            joined = "\n".join(collected).rstrip().removesuffix("\\")  # a continuation before the closer
            try:
                words = _words(joined if array else joined.replace('"', ""))
            except ValueError:
                words = joined.split()
            if array and array.group(2) == "+":
                argument_groups.setdefault(name, []).extend(words)
            elif array and not any(w.startswith("--") for w in words):
                arrays[name] = words
            else:
                argument_groups[name] = words
        else:
            assign = _ASSIGN.match(line)
            if assign and not line.lstrip().startswith("#"):
                value = assign.group(2).strip()
                default = _DEFAULT.match(value)
                if default:
                    scalars[assign.group(1)] = default.group(2)
                elif re.fullmatch(r"[-\w.,:/']+|\"[-\w.,:/ ]*\"", value):
                    scalars[assign.group(1)] = value.strip("\"'")
        index += 1

    launch_words: list[str] = []
    entry_point = None
    joined_text = text.replace("\\\n", " ")
    for line in joined_text.splitlines():
        found = _LAUNCH.search(line)
        if found:
            entry_point = found.group(1)
            tail = line[found.end():]
            tail = tail.split("2>&1")[0].split("|")[0]
            launch_words = _words(tail)
            break
    flag_words: list[str] = []
    for word in launch_words:
        reference = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)(?:\[@\])?\}?", word)
        if reference and reference.group(1) in argument_groups:
            if reference.group(1) not in LAUNCHER_ARRAYS:
                flag_words += argument_groups[reference.group(1)]
        else:
            flag_words.append(word)

    def substitute(word: str) -> list[str]:
        whole = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\[@\]\}", word)
        if whole and whole.group(1) in arrays:
            return list(arrays[whole.group(1)])

        def one(match: re.Match) -> str:
            name = match.group(1) or match.group(3)
            return scalars.get(name, match.group(0))

        return [_REFERENCE.sub(one, word)]

    return {"entry_point": entry_point, "flags": group_flags(flag_words, substitute)}


# T-Rex passes these and trex does not: trex feeds one --data-path with --split (no separate validation
# set), and its logs are the tensorboard timers and throughput, not T-Rex's extra tensorboard series.
NOT_RENDERED = {
    "--train-data-path": "one --data-path with --split 100,0,0",
    "--valid-data-path": "one --data-path with --split 100,0,0",
    "--tensorboard-log-interval": "logging only",
    "--log-memory-to-tensorboard": "logging only",
    "--log-world-size-to-tensorboard": "logging only",
    "--ckpt-step": "checkpoint naming of T-Rex's archive tooling",
}


# ---- checking ----------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def load_catalogue() -> dict[str, Any]:
    return json.loads(CATALOGUE_FILE.read_text())


@lru_cache(maxsize=1)
def load_trex_scripts() -> dict[str, Any]:
    return json.loads(TREX_SCRIPTS_FILE.read_text())


def _value_ok(value: str, definition: dict) -> bool:
    if "$" in value:
        return True  # a path or variable the launch environment fills in
    kind = definition["type"]
    try:
        converted: Any = {"int": int, "float": float}.get(kind, str)(value)
    except ValueError:
        return False
    choices = definition["choices"]
    if isinstance(choices, list):
        return converted in choices or value in [str(c) for c in choices]
    return True


def _arity_ok(count: int, definition: dict) -> bool:
    if definition["action"] in NO_VALUE_ACTIONS:
        return count == 0
    nargs = definition["nargs"]
    if nargs is None:
        return count == 1
    if nargs == "?":
        return count <= 1
    if nargs == "*":
        return True
    if nargs == "+":
        return count >= 1
    return count == int(nargs)


def _describe(definition: dict) -> str:
    if definition["action"] in NO_VALUE_ACTIONS:
        return f"a switch ({definition['action']}) that takes no value"
    parts = [f"type {definition['type']}"]
    if definition["nargs"] is not None:
        parts.append(f"nargs {definition['nargs']!r}")
    if isinstance(definition["choices"], list):
        parts.append(f"choices {definition['choices']}")
    return ", ".join(parts)


def check_flags(flags: dict[str, list[str]], program: str = "train", catalogue: dict | None = None,
                allowed: dict[str, list[str] | None] | None = None, where: str = "script") -> list[str]:
    """Every problem of `flags` (flag -> values) for `program`: undefined flags, values of the wrong
    arity or type, values outside the choices, spec modules the framework does not have. `allowed`
    names flags (and, for a flag, extra values) accepted beyond the catalogue: a patched image's."""
    catalogue = catalogue or load_catalogue()
    defined = catalogue["programs"][program]
    allowed = allowed or {}
    problems = []
    for flag, values in flags.items():
        if flag not in defined:
            if flag not in allowed:
                problems.append(f"{where}: {flag} is not defined by {program} in "
                                f"{'; '.join(catalogue['versions'][:3])}")
            continue
        extra_values = allowed.get(flag) or []
        definitions = defined[flag]["definitions"]
        if not any(_arity_ok(len(values), d) for d in definitions):
            problems.append(f"{where}: {flag} got {len(values)} value(s) {values}: it is "
                            + " or ".join(_describe(d) for d in definitions))
            continue
        for value in values:
            if value in extra_values:
                continue
            if not any(_value_ok(value, d) for d in definitions):
                problems.append(f"{where}: {flag} {value!r} is not valid: it is "
                                + " or ".join(_describe(d) for d in definitions))
        if flag in SPEC_FLAGS and len(values) == 2:
            module, name = values
            names = catalogue["spec_modules"].get(module)
            if names is None:
                problems.append(f"{where}: {flag} {module}: no such spec module (the framework has "
                                f"{', '.join(sorted(catalogue['spec_modules']))})")
            elif name not in names:
                problems.append(f"{where}: {flag} {module} {name}: the module defines {', '.join(names)}")
    return problems


def check_script(text: str, program: str = "train", allowed: dict[str, list[str] | None] | None = None,
                 where: str = "script") -> list[str]:
    """Problems of a rendered launch script (see `check_flags`); its entry point must be the framework's."""
    script = read_script(text)
    problems = check_flags(script["flags"], program, allowed=allowed, where=where)
    entry = script["entry_point"]
    known = set(load_catalogue()["entry_points"]) | {s["entry_point"] for s in load_trex_scripts()["scripts"]}
    if program == "train" and entry not in known:
        problems.append(f"{where}: entry point {entry!r} is not one of the framework's ({', '.join(sorted(known))})")
    return problems


def patched_image_flags() -> dict[str, list[str] | None]:
    """What T-Rex's scripts pass that the stock framework does not define or accept: flag -> None for a
    flag the stock parser lacks, flag -> [values] for values outside its declared choices."""
    return load_trex_scripts()["patched_image"]


def trex_script(flavor: str, stage: str) -> dict[str, Any]:
    for script in load_trex_scripts()["scripts"]:
        if (script["flavor"], script["stage"]) == (flavor, stage):
            return script
    raise ValueError(f"no T-Rex script for {flavor} {stage} in {TREX_SCRIPTS_FILE}")


def trex_coverage(flags: dict[str, list[str]], flavor: str, stage: str) -> tuple[float, list[str]]:
    """(share of the stock-defined flags of T-Rex's script for this flavor and stage that `flags`
    carries, those it lacks beyond NOT_RENDERED)."""
    defined = load_catalogue()["programs"]["train"]
    stock = [flag for flag in trex_script(flavor, stage)["flags"] if flag in defined]
    carried = [flag for flag in stock if flag in flags]
    missing = [flag for flag in stock if flag not in flags and flag not in NOT_RENDERED]
    return len(carried) / len(stock), missing


def _patched(scripts: list[dict], catalogue: dict) -> dict[str, list[str] | None]:
    defined = catalogue["programs"]["train"]
    patched: dict[str, list[str] | None] = {}
    for script in scripts:
        for flag, values in script["flags"].items():
            if flag not in defined:
                patched[flag] = None
                continue
            bad = [v for v in values if not any(_value_ok(v, d) for d in defined[flag]["definitions"])]
            if bad and patched.get(flag, []) is not None:
                patched[flag] = sorted(set(patched.get(flag) or []) | set(bad))
    return dict(sorted(patched.items()))


def build_trex_scripts(sources: Path, extra: list[tuple[str, str, str, Path]],
                       catalogue: dict) -> dict[str, Any]:
    """T-Rex's launch scripts in the sources folder (Flash) plus `extra` (flavor, stage, origin, file)."""
    component = _component(Path(sources), "slai-t-rex")
    found: list[tuple[str, str, str, Path]] = []
    if component is not None:
        for file in sorted(component.rglob("train_*_deepseek4_*.sh")):
            stage = "cpt" if "_cpt_" in file.name else "sft"
            flavor = "pro" if "_pro_" in file.name else "flash"
            found.append((flavor, stage, f"{component.name}/{file.relative_to(component).as_posix()}", file))
    scripts = []
    for flavor, stage, origin, file in found + list(extra):
        parsed = read_script(Path(file).read_text())
        scripts.append({"flavor": flavor, "stage": stage, "origin": origin, **parsed})
    scripts.sort(key=lambda s: (s["flavor"], s["stage"]))
    return {
        "generated_by": "python -m trex_cli.train.engines.mindspeed.catalogue",
        "scripts": scripts,
        "patched_image": _patched(scripts, catalogue),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=Path, required=True, help="folder of the pinned sources")
    parser.add_argument("--out", type=Path, default=CATALOGUE_FILE)
    parser.add_argument("--scripts-out", type=Path, default=TREX_SCRIPTS_FILE)
    parser.add_argument("--trex-script", action="append", default=[],
                        help="FLAVOR:STAGE:ORIGIN:FILE, a T-Rex script kept outside the sources folder")
    args = parser.parse_args(argv)
    extra = []
    for item in args.trex_script:
        parts = item.split(":", 3)
        if len(parts) != 4 or parts[0] not in ("flash", "pro") or parts[1] not in ("cpt", "sft"):
            parser.error(f"--trex-script {item!r}: expected FLAVOR:STAGE:ORIGIN:FILE with flash/pro and cpt/sft")
        extra.append((parts[0], parts[1], parts[2], Path(parts[3])))
    catalogue = build_catalogue(args.sources)
    args.out.write_text(json.dumps(catalogue, indent=1, sort_keys=False) + "\n")
    scripts = build_trex_scripts(args.sources, extra, catalogue)
    args.scripts_out.write_text(json.dumps(scripts, indent=1) + "\n")
    counts = ", ".join(f"{program} {len(flags)}" for program, flags in catalogue["programs"].items())
    print(f"wrote {args.out} (flags: {counts}) and {args.scripts_out} ({len(scripts['scripts'])} T-Rex scripts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
