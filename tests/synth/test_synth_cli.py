"""`trex synth` through typer's CliRunner."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from trex_cli.app import app


def words(output: str) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(output.split())


FLAGS = ["--n", "6", "--eval-n", "2", "--seed", "2", "--workers", "1", "--families",
         "production_mix,transportation", "--difficulty", "small", "--no-progress"]


def test_synth_writes_a_folder_prints_the_summary_and_is_a_no_op_again(tmp_path):
    out = tmp_path / "synth"
    runner = CliRunner()
    result = runner.invoke(app, ["synth", "--out", str(out), *FLAGS])
    assert result.exit_code == 0, result.output
    assert "production_mix" in result.output and "total" in result.output
    assert "Running HiGHS" not in result.output  # the solver banner stays out of the CLI's output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["problems"] == 6 and manifest["config"]["families"] == ["production_mix", "transportation"]
    resolved = (out / "recipe.resolved.toml").read_text()
    assert "n = 6" in resolved and "small = 1.0" in resolved
    records = [json.loads(line) for line in (out / "problems" / "shard-00000.jsonl").read_text().splitlines()]
    assert {r["difficulty"] for r in records} == {"small"}
    again = runner.invoke(app, ["synth", "--out", str(out), *FLAGS])
    assert again.exit_code == 0 and "already done" in words(again.output)


def test_recipe_and_set_override(tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text('[synth]\nn = 50\neval_n = 0\nfamilies = ["production_mix"]\nworkers = 1\n'
                      'difficulty = { small = 1.0 }\n')
    out = tmp_path / "from_recipe"
    result = CliRunner().invoke(app, ["synth", "--recipe", str(recipe), "--set", "synth.n=3", "--out", str(out),
                                      "--no-progress"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "manifest.json").read_text())["counts"]["problems"] == 3


def test_user_mistakes_exit_1_with_one_line(tmp_path):
    runner = CliRunner()
    unknown = runner.invoke(app, ["synth", "--out", str(tmp_path / "a"), "--families", "nope", "--no-progress"])
    assert unknown.exit_code == 1 and "unknown families nope" in words(unknown.output)
    difficulty = runner.invoke(app, ["synth", "--out", str(tmp_path / "b"), "--difficulty", "huge", "--no-progress"])
    assert difficulty.exit_code == 1 and "unknown difficulty 'huge'" in words(difficulty.output)
    bad_key = runner.invoke(app, ["synth", "--out", str(tmp_path / "c"), "--set", "synth.nn=3", "--no-progress"])
    assert bad_key.exit_code == 1 and "unknown key 'nn'" in words(bad_key.output)
    assert "Traceback" not in unknown.output + difficulty.output + bad_key.output
