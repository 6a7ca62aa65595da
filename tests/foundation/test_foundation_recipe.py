"""Recipes: typed validation with errors that name the file, the key and what is allowed; overrides."""

from __future__ import annotations

import dataclasses
from typing import Literal

import pytest

from trex_cli import recipe as recipe_module
from trex_cli.recipe import build_dataclass, dumps_toml, load_recipe, parse_override
from trex_cli.run_layout import RunLayout


@dataclasses.dataclass
class _Inner:
    rate: float = 0.1
    names: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Section:
    n: int = 10
    mode: Literal["fast", "slow"] = "fast"
    shares: dict[str, float] = dataclasses.field(default_factory=dict)
    inner: _Inner = dataclasses.field(default_factory=_Inner)
    path: str | None = None


@pytest.fixture
def with_test_section(monkeypatch):
    monkeypatch.setitem(recipe_module.SECTIONS, "demo", f"{__name__}:_Section")


def write(tmp_path, text):
    path = tmp_path / "r.toml"
    path.write_text(text)
    return path


def test_valid_recipe_fills_defaults_and_converts(tmp_path, with_test_section):
    recipe = load_recipe(write(tmp_path, '[run]\nname = "x"\n[demo]\nn = 3\ninner = { rate = 1 }\n'))
    section = recipe.section("demo")
    assert section.n == 3 and section.mode == "fast"
    assert section.inner.rate == 1.0 and isinstance(section.inner.rate, float)
    assert recipe.name == "x"
    assert str(RunLayout(recipe).root) == "runs/x"


def test_unknown_key_names_file_key_and_allowed(tmp_path, with_test_section):
    path = write(tmp_path, "[demo]\nnn = 3\n")
    with pytest.raises(ValueError) as error:
        load_recipe(path)
    message = str(error.value)
    assert str(path) in message and "'nn'" in message and "allowed keys" in message and "n, " in message


def test_wrong_type_names_the_key(tmp_path, with_test_section):
    with pytest.raises(ValueError, match=r"\[demo\]\.n: expected an integer, got 'three'"):
        load_recipe(write(tmp_path, '[demo]\nn = "three"\n'))
    with pytest.raises(ValueError, match=r"mode: 'medium' is not allowed; use one of 'fast', 'slow'"):
        load_recipe(write(tmp_path, '[demo]\nmode = "medium"\n'))
    with pytest.raises(ValueError, match=r"inner.names\[1\]: expected a string"):
        load_recipe(write(tmp_path, '[demo]\ninner = { names = ["a", 2] }\n'))


def test_unknown_section_and_bad_toml(tmp_path):
    with pytest.raises(ValueError, match=r"unknown section \[trainer\]; allowed sections: run, synth"):
        load_recipe(write(tmp_path, "[trainer]\nx = 1\n"))
    with pytest.raises(ValueError, match="not valid TOML"):
        load_recipe(write(tmp_path, "[run\n"))
    with pytest.raises(FileNotFoundError, match="recipes/tiny-cpu.toml"):
        load_recipe(tmp_path / "missing.toml")


def test_overrides_parse_toml_literals_and_win(tmp_path, with_test_section):
    assert parse_override("demo.n=5") == (["demo", "n"], 5)
    assert parse_override("demo.path=some/where") == (["demo", "path"], "some/where")
    assert parse_override('demo.inner.names=["a","b"]') == (["demo", "inner", "names"], ["a", "b"])
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_override("demo.n")
    recipe = load_recipe(write(tmp_path, "[demo]\nn = 3\n"), ["demo.n=7", "demo.inner.rate=0.5"])
    assert recipe.section("demo").n == 7 and recipe.section("demo").inner.rate == 0.5
    with pytest.raises(ValueError, match="expected an integer"):
        load_recipe(write(tmp_path, "[demo]\n"), ["demo.n=seven"])


def test_resolved_recipe_round_trips_through_toml(tmp_path, with_test_section):
    import tomllib

    recipe = load_recipe(write(tmp_path, '[demo]\nn = 4\nshares = { a = 0.5, "b c" = 0.5 }\n'))
    saved = recipe.save_resolved(tmp_path / "stage", ["demo"])
    reread = tomllib.loads(saved.read_text())
    again = build_dataclass(_Section, reread["demo"], "reread")
    assert again == recipe.section("demo")
    assert "[demo.inner]" in dumps_toml(recipe.resolved(["demo"]))


def test_every_shipped_recipe_validates():
    from pathlib import Path

    recipes = sorted(Path(__file__).resolve().parents[2].glob("recipes/*.toml"))
    assert recipes, "no recipes found"
    for path in recipes:
        recipe = load_recipe(path)
        for name in recipe.raw:
            assert dataclasses.is_dataclass(recipe.section(name))
