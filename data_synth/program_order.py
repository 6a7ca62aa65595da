"""The order of a model's statements in a rendered program: the instance's optional groups first.

A family builds its model from a core (sets, variables, objective, the constraints every instance has)
and optional groups, each written only when its key is in the instance's data (`max_items`,
`conflicts`, `fixed_cost` ...). The family's source appends those groups at the end, after the
objective and the core constraints, which puts the decision "does this instance have the group?"
150-250 tokens into the program, far from the request's list of the data's keys. A rendered program
instead states the optional groups as early as they can go: right after the sets and variables they
use, before the objective and the core constraints. The model is the same (the statements only move,
and only past statements they neither use nor define); the pipeline runs the reordered program in its
verification, so a move that broke it would reject the instance. With the decision within 128 tokens of
the request's keys, the demo's tiny model (a 128-token sliding window) writes the groups the instance
has: 31.7% -> 86.7% strict Pass@1 on synth seed 2 and 50.0% -> 83.3% on seed 1 (60 held-out items each).

`optional_keys(family, data)` names the instance's optional keys (the data fields the family documents
as present "only when ..."); `optional_groups_first(code, keys)` reorders `code`'s top-level
statements. A statement belongs to the optional groups when it reads `data["key"]` for one of `keys`,
or uses a name such a statement defines; it moves up together with exactly the statements it needs.
Comments and blank lines above a statement move with it. Code that defines a name twice, or that does
not parse, is returned unchanged.
"""

from __future__ import annotations

import ast
import re

from data_synth.family import ProblemFamily

_OPTIONAL_FIELD = re.compile(r"\bonly (?:when|if|for)\b")


def optional_keys(family: ProblemFamily, data: dict) -> set[str]:
    """The keys of `data` the family documents as optional ("... (only when there is such a limit)")."""
    return {key for key, meaning in family.data_fields.items() if key in data and _OPTIONAL_FIELD.search(meaning)}


class _Unmovable(Exception):
    """A statement whose effects `_names` does not follow: the code keeps its order."""


def _names(node: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """(defined, used, data keys read) of one top-level statement. A name is a plain identifier or
    `model.X` (attributes of a plain name); uses inside function bodies and lambdas count (an
    over-approximation, which only keeps statements where they are)."""
    defined: set[str] = set()
    if isinstance(node, ast.FunctionDef):
        defined.add(node.name)
    pending = list(node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign)
                   else [])
    while pending:
        target = pending.pop()
        if isinstance(target, ast.Name):
            defined.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            pending += target.elts
        elif isinstance(target, ast.Starred):
            pending.append(target.value)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            defined.add(f"{target.value.id}.{target.attr}")
        else:  # `x[i] = ...`, `a.b.c = ...`: changes an object in place
            raise _Unmovable
    used: set[str] = set()
    keys: set[str] = set()
    for part in ast.walk(node):
        if isinstance(part, ast.Name) and isinstance(part.ctx, ast.Load):
            used.add(part.id)
        elif isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name):
            used.add(f"{part.value.id}.{part.attr}")
        elif (isinstance(part, ast.Subscript) and isinstance(part.value, ast.Name) and part.value.id == "data"
              and isinstance(part.slice, ast.Constant) and isinstance(part.slice.value, str)):
            keys.add(part.slice.value)
        elif (isinstance(part, ast.Call) and isinstance(part.func, ast.Attribute) and part.func.attr == "get"
              and isinstance(part.func.value, ast.Name) and part.func.value.id == "data" and part.args
              and isinstance(part.args[0], ast.Constant) and isinstance(part.args[0].value, str)):
            keys.add(part.args[0].value)
    return defined, used - defined, keys


def optional_groups_first(code: str, keys: set[str]) -> str:
    """`code` with the statements of its optional groups (those reading `data[key]` for a key of `keys`,
    and those using what they define) moved up to just after the statements they need."""
    if not keys:
        return code
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    lines = code.splitlines(keepends=True)
    statements = tree.body
    # only assignments, function definitions and expression statements (method calls such as
    # `m.addConstrs(...)`, whose order among themselves does not change the model) move; anything else
    # (a loop, an `if`, an augmented assignment, an import) pins the order and nothing moves
    if len(statements) < 2 or not all(isinstance(statement, (ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.Expr))
                                      for statement in statements):
        return code
    # each statement's text: from the end of the previous statement (its comments and blank lines) to its end
    chunks, start = [], 0
    for statement in statements:
        chunks.append("".join(lines[start:statement.end_lineno]))
        start = statement.end_lineno
    tail = "".join(lines[start:])
    try:
        facts = [_names(statement) for statement in statements]
    except _Unmovable:
        return code
    definitions: dict[str, int] = {}
    for index, (defined, _, _) in enumerate(facts):
        for name in defined:
            if name in definitions:
                return code  # a name bound twice: moving statements could change which binding a use sees
            definitions[name] = index
    needs = [{definitions[name] for name in used if name in definitions and definitions[name] < index}
             for index, (_, used, _) in enumerate(facts)]
    if any(name in definitions and definitions[name] > index
           for index, (_, used, _) in enumerate(facts) for name in used):
        return code  # a use before its definition (e.g. in a function body): keep the author's order
    optional: set[int] = set()
    for index, (_, _, read) in enumerate(facts):
        if read & keys or needs[index] & optional:
            optional.add(index)
    if not optional:
        return code
    required: set[int] = set()
    pending = [need for index in optional for need in needs[index] if need not in optional]
    while pending:
        index = pending.pop()
        if index in required:
            continue
        required.add(index)
        pending += [need for need in needs[index] if need not in optional]
    order = sorted(required) + sorted(optional) + [index for index in range(len(statements))
                                                   if index not in required and index not in optional]
    if order == list(range(len(statements))):
        return code
    moved = [chunks[index] for index in order]
    # a blank line before the optional groups and one after them; the first statement starts the code
    for position in (len(required), len(required) + len(optional)):
        if 0 < position < len(moved) and not moved[position].startswith("\n"):
            moved[position] = "\n" + moved[position]
    moved[0] = moved[0].lstrip("\n")
    return "".join(moved) + tail
