"""Stage folders: manifest written last, lineage, refusal of unfinished inputs, no-op re-runs, resume."""

from __future__ import annotations

import json

import pytest

from trex_cli.artifacts import MANIFEST, StageConflict, StageFolder, StageState, read_manifest, write_json_atomic


def test_fresh_then_done_then_force(tmp_path):
    folder = tmp_path / "synth"
    stage = StageFolder(folder, "synth", {"n": 3})
    assert stage.prepare() is StageState.FRESH
    assert not (folder / MANIFEST).exists()
    manifest = stage.finish({"problems": 3})
    assert manifest["counts"] == {"problems": 3} and manifest["config"] == {"n": 3}
    assert "versions" in manifest and manifest["versions"]["python"]
    assert StageFolder(folder, "synth", {"n": 3}).prepare() is StageState.DONE
    (folder / "extra.txt").write_text("x")
    assert StageFolder(folder, "synth", {"n": 3}, force=True).prepare() is StageState.FRESH
    assert not (folder / "extra.txt").exists()


def test_other_settings_on_a_finished_folder_need_force(tmp_path):
    folder = tmp_path / "synth"
    stage = StageFolder(folder, "synth", {"n": 3})
    stage.prepare()
    stage.finish()
    with pytest.raises(ValueError, match="other settings.*--force"):
        StageFolder(folder, "synth", {"n": 4}).prepare()


def test_interrupted_stage_resumes_only_with_same_settings(tmp_path):
    folder = tmp_path / "data"
    assert StageFolder(folder, "data", {"seq": 8}).prepare() is StageState.FRESH
    # killed before finish(): no manifest, the stage's own state file remains
    assert StageFolder(folder, "data", {"seq": 8}).prepare() is StageState.RESUME
    (folder / "shard-00000.arrow").write_bytes(b"work done")
    with pytest.raises(StageConflict, match="unfinished data .* discard its work \\(shard-00000.arrow\\)"):
        StageFolder(folder, "data", {"seq": 16}).prepare()
    assert (folder / "shard-00000.arrow").is_file()  # refused: nothing lost


def test_a_stage_stopped_before_any_work_restarts_with_new_settings(tmp_path):
    folder = tmp_path / "data"
    assert StageFolder(folder, "data", {"seq": 8}).prepare() is StageState.FRESH
    (folder / "recipe.resolved.toml").write_text("[data]\n")  # bookkeeping only: no work to lose
    assert StageFolder(folder, "data", {"seq": 16}).prepare() is StageState.FRESH
    assert StageFolder(folder, "data", {"seq": 16}).prepare() is StageState.RESUME


def test_inputs_without_manifest_are_refused_and_lineage_recorded(tmp_path):
    upstream = tmp_path / "synth"
    upstream.mkdir()
    with pytest.raises(ValueError, match="no manifest.json"):
        StageFolder(tmp_path / "data", "data", {}, inputs=[upstream]).prepare()
    with pytest.raises(FileNotFoundError):
        read_manifest(tmp_path / "nowhere", "synth")
    first = StageFolder(upstream, "synth", {"n": 1})
    first.prepare()
    first.finish()
    downstream = StageFolder(tmp_path / "data", "data", {}, inputs=[upstream])
    downstream.prepare()
    manifest = downstream.finish()
    assert manifest["inputs"][0]["stage"] == "synth"
    assert len(manifest["inputs"][0]["manifest_sha256"]) == 64
    # a rebuilt input changes the fingerprint, so the downstream stage is no longer "done"
    StageFolder(upstream, "synth", {"n": 2}, force=True).prepare()
    StageFolder(upstream, "synth", {"n": 2}).finish()
    with pytest.raises(ValueError, match="other settings or inputs"):
        StageFolder(tmp_path / "data", "data", {}, inputs=[upstream]).prepare()


def test_non_trex_folder_is_not_overwritten(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep")
    with pytest.raises(ValueError, match="not empty"):
        StageFolder(folder, "synth", {}).prepare()
    assert (folder / "precious.txt").read_text() == "keep"


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    target = tmp_path / "a" / "b.json"
    write_json_atomic(target, {"x": 1})
    assert json.loads(target.read_text()) == {"x": 1}
    assert [p.name for p in target.parent.iterdir()] == ["b.json"]
