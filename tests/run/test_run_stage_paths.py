"""`trex run` and the stage commands share one code path per stage: a folder one of them built is the
folder the other would build (same fingerprint, so the other takes it as finished), and rebuilt by the
other it has the same manifest."""

from __future__ import annotations

import json

from test_run_recipe import flat, write_micro_recipe
from typer.testing import CliRunner

from trex_cli.app import app

VOLATILE = ("created", "wall_time_s", "first_started")


def stable_manifest(folder) -> dict:
    manifest = json.loads((folder / "manifest.json").read_text())
    for key in VOLATILE:
        manifest.pop(key)
    for entry in manifest["inputs"]:  # an input's manifest has its own timestamps; its fingerprint stays
        entry.pop("manifest_sha256")
    return manifest


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return flat(result.output)


def test_stage_commands_and_trex_run_build_the_same_synth_and_data_folders(tmp_path):
    recipe, run_dir = write_micro_recipe(tmp_path)
    invoke("synth", "--recipe", str(recipe), "--no-progress")
    invoke("data", "cpt", "--recipe", str(recipe), "--no-progress")
    invoke("data", "sft", "--recipe", str(recipe), "--no-progress")
    folders = {"synth": run_dir / "synth", "data-cpt": run_dir / "data" / "cpt", "data-sft": run_dir / "data" / "sft"}
    by_commands = {name: stable_manifest(folder) for name, folder in folders.items()}

    # trex run takes the commands' folders as finished: its fingerprint of each stage is theirs
    again = invoke("run", str(recipe), "--only", "synth,data", "--no-progress")
    for name, folder in folders.items():
        assert f"{name}: already done ({folder})" in again
    assert {name: stable_manifest(folder) for name, folder in folders.items()} == by_commands

    # rebuilt by trex run, each folder records the same stage: settings, inputs, counts
    invoke("run", str(recipe), "--only", "synth,data", "--force", "--no-progress")
    assert {name: stable_manifest(folder) for name, folder in folders.items()} == by_commands

    # and the stage commands take trex run's folders as finished
    assert "synth: already done" in invoke("synth", "--recipe", str(recipe), "--no-progress")
    assert "data-sft: already done" in invoke("data", "sft", "--recipe", str(recipe), "--no-progress")


def test_a_flag_is_validated_like_the_recipe_key_it_sets(tmp_path):
    recipe, _ = write_micro_recipe(tmp_path)
    result = CliRunner().invoke(app, ["data", "sft", "--recipe", str(recipe), "--stage", "programs"])
    assert result.exit_code == 1
    assert "--stage 'programs'" in flat(result.output) and "[data].sft.stage" in flat(result.output)
    assert "'program'" in flat(result.output)
