"""`trex data sft` by units, in this process or as tasks on an executor (`trex_cli.data.sft`): 3 local tasks
give the one-process dataset, exclusion file, tokenizer and stats (packed and unpacked, both stages); a build
whose tasks were killed resumes from what they finished; bad input stops a task with the reader's message and
leaves the output folder alone; the Slurm submission of `trex data cpt` and `trex data sft` is rendered by a dry
run and its array jobs, run here as Slurm would run them, finish the same dataset; Ray's local mode builds it
where Ray installs."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.data.data_fixtures import chat_sample, random_document, vocabulary, write_jsonl
from trex_cli.app import app
from trex_cli.data.config import DataConfig, SftSection, SourceSpec
from trex_cli.data.sft import build_sft
from trex_cli.recipe import ExecutorSettings

QUESTION = ("A farmer ships sled dogs across the frozen lake in crates that hold at most twelve dogs, and "
            "each crossing costs forty dollars; how many crossings minimise the cost")
SEQ_LEN = 512


def _corpus(tmp_path: Path, **changes) -> DataConfig:
    """Three sources over five units: exact and near copies across files and sources, a planted benchmark
    question, a malformed line, a record without an assistant turn, an over-length sample, samples of every
    answer style and a prompt/completion table."""
    rng = random.Random(7)
    words = vocabulary(500)
    styles = ["program", "model", "model_program"]
    samples = [chat_sample(rng, words, f"s-{i}", styles[i % 3]) for i in range(72)]
    samples[9]["messages"] = [dict(m) for m in samples[2]["messages"]]  # an exact copy in the same file
    samples[40]["messages"] = [dict(m) for m in samples[5]["messages"]]  # an exact copy in another file
    near = [dict(m) for m in samples[14]["messages"]]
    near[1] = {"role": "user", "content": near[1]["content"] + " Furthermore."}
    samples[55]["messages"] = near  # a near copy in another file
    samples[30]["messages"][1]["content"] += "\n\nExample: " + QUESTION
    samples[61]["messages"][1]["content"] = " ".join(rng.choice(words) for _ in range(700))  # too long
    folder = tmp_path / "chats"
    for part in range(3):
        path = write_jsonl(folder / f"part-{part}.jsonl", samples[part * 24:(part + 1) * 24])
        if part == 1:
            with open(path, "a") as stream:
                stream.write("{not json\n")
                stream.write(json.dumps({"messages": [{"role": "user", "content": "no answer here"}]}) + "\n")
    replay = write_jsonl(tmp_path / "replay.jsonl", [
        {"messages": [{"role": "user", "content": f"Say {n} twice, please."},
                      {"role": "assistant", "content": f"{n} {n}"}]} for n in range(200, 230)
    ])
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = tmp_path / "pairs.parquet"
    prompts = [random_document(rng, words, rng.randint(20, 40)) for _ in range(25)]
    pq.write_table(pa.table({"prompt": prompts, "completion": [f"x = {k}" for k in range(25)]}), table)
    benchmark = write_jsonl(tmp_path / "bench" / "nl4opt.jsonl", [{"en_question": QUESTION, "en_answer": "3"}])
    sft = SftSection(sources=[SourceSpec(str(folder), 0.6), SourceSpec(str(replay), 0.2),
                              SourceSpec(str(table), 0.2)], seq_len=SEQ_LEN, total_tokens=30000, packing=True)
    config = DataConfig(vocab_size=400, skip_bad=True, validation_share=0.1, decontaminate=[str(benchmark)], sft=sft)
    sft_changes = {key: changes.pop(key) for key in list(changes) if key in ("packing", "stage")}
    import dataclasses

    return dataclasses.replace(config, sft=dataclasses.replace(sft, **sft_changes), **changes)


def _same_build(one: Path, other: Path) -> dict:
    import datasets

    for split in ("train", "validation"):
        a, b = datasets.load_from_disk(str(one / split)), datasets.load_from_disk(str(other / split))
        assert a.num_rows > 0 and a.num_rows == b.num_rows
        for column in ("input_ids", "position_ids", "loss_mask", "completion_mask"):
            assert a[column] == b[column], (split, column)
    for name in ("exclusions.jsonl", "tokenizer/tokenizer.json", "meta.json"):
        assert (one / name).read_bytes() == (other / name).read_bytes(), name
    stats = [{k: v for k, v in json.loads((f / "stats.json").read_text()).items() if k not in ("wall_time_s", "out")}
             for f in (one, other)]
    assert stats[0] == stats[1]
    return stats[0]


@pytest.mark.parametrize(("packing", "stage"), [(True, "all"), (False, "program")])
def test_three_local_tasks_build_what_one_process_builds(tmp_path, packing, stage):
    config = _corpus(tmp_path, packing=packing, stage=stage)
    one = build_sft(config, tmp_path / "one" / "sft", tmp_path, show_progress=False)
    three = build_sft(config, tmp_path / "three" / "sft", tmp_path, show_progress=False,
                      executor=ExecutorSettings(tasks=3))
    assert one["samples_kept"] == three["samples_kept"] > 0
    drops = one["drops_by_reason"]
    if stage == "all":
        assert drops == {"bad_input": 2, "benchmark_overlap": 1, "exact_duplicate": 2, "near_duplicate": 1,
                         "too_long": 1}
        assert one["answer_styles"] == {"program": 22, "model": 21, "model_program": 24, "none": 55}
    else:  # the copies and the long sample are of other styles: not selected; replay and table samples stay
        assert drops == {"bad_input": 2, "benchmark_overlap": 1}
        assert one["answer_styles"] == {"program": 23, "none": 55}
        assert one["sources"][0]["not_selected_for_stage"] == 48
    stats = _same_build(tmp_path / "one" / "sft", tmp_path / "three" / "sft")
    assert stats["samples_read"] == 72 + 30 + 25
    assert sorted(p.name for p in (tmp_path / "three").iterdir()) == ["sft"]  # the scratch folder is gone
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["sft"]


def test_a_killed_build_resumes_to_the_same_dataset(tmp_path):
    from trex_cli.data import build
    from trex_cli.data.sft import conversation_items, conversation_units
    from trex_cli.data.sharded import CleanTask, ShardPlan, scratch_folder

    config = _corpus(tmp_path)
    one = tmp_path / "one" / "sft"
    build_sft(config, one, tmp_path, show_progress=False)
    out = tmp_path / "killed" / "sft"
    plan_ = build.plan_build(config, "sft", out, tmp_path)
    units = [unit for source in plan_.sources for unit in conversation_units(source)]
    work = scratch_folder(out, plan_.folder.config)
    plan = ShardPlan(plan_.config, plan_.sources, units, work, out.resolve())
    CleanTask(plan, conversation_items)(None, 0, 3)  # task 0 of 3 finished its units before the kill
    finished = sorted(p.name for p in (work / "units").iterdir())
    assert finished == ["00000", "00003"]
    half = work / "units" / ".00001.999"  # task 1 was killed while writing a unit
    half.mkdir()
    (half / "texts.bin").write_bytes(b"\x05\x00")
    build_sft(config, out, tmp_path, show_progress=False, executor=ExecutorSettings(tasks=3))
    _same_build(one, out)
    assert not work.exists()


def test_an_interrupted_build_reads_and_templates_only_what_it_had_not_finished(tmp_path, monkeypatch):
    from trex_cli.data import sft as sft_module

    config = _corpus(tmp_path)
    one = tmp_path / "one" / "sft"
    build_sft(config, one, tmp_path, show_progress=False)
    original = sft_module.TemplateTask._template_unit

    def killed_at_unit_3(task, tokenizer, number):
        if number == 3:
            raise KeyboardInterrupt
        original(task, tokenizer, number)

    monkeypatch.setattr(sft_module.TemplateTask, "_template_unit", killed_at_unit_3)
    out = tmp_path / "again" / "sft"
    with pytest.raises(KeyboardInterrupt):
        build_sft(config, out, tmp_path, show_progress=False)
    read, templated = [], []
    reader = sft_module.unit_conversations
    monkeypatch.setattr(sft_module, "unit_conversations",
                        lambda spec, unit, bad: (read.append(unit.file), reader(spec, unit, bad))[1])
    monkeypatch.setattr(sft_module.TemplateTask, "_template_unit",
                        lambda task, tokenizer, number: (templated.append(number), original(task, tokenizer, number)))
    build_sft(config, out, tmp_path, show_progress=False)
    assert read == [] and templated == [3, 4]
    _same_build(one, out)


def test_bad_input_in_a_task_stops_the_build_with_its_line_and_leaves_the_output_alone(tmp_path):
    config = _corpus(tmp_path, skip_bad=False)
    out = tmp_path / "built" / "sft"
    with pytest.raises(ValueError) as raised:
        build_sft(config, out, tmp_path, show_progress=False, executor=ExecutorSettings(tasks=3))
    message = str(raised.value)
    assert "part-1.jsonl:25" in message and "--skip-bad" in message
    assert not out.exists()


def _fake_slurm_jobs(tmp_path: Path, logging_dir: Path, tasks: int) -> None:
    """Run each job of a rendered array as Slurm would: `launch_pickled_pipeline executor.pik` with the
    array index; `scontrol show hostnames` (what a job asks Slurm) is a two-line script of the test's own."""
    launcher = shutil.which("launch_pickled_pipeline", path=str(Path(sys.executable).parent))
    assert launcher is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scontrol").write_text('#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && echo "$3"\n')
    (bin_dir / "scontrol").chmod(0o755)
    for index in range(tasks):
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_ARRAY_TASK_ID": str(index),
               "SLURM_ARRAY_JOB_ID": "1", "SLURM_JOB_ID": str(2 + index), "SLURM_NODELIST": "localhost",
               "SLURM_NODEID": "0"}
        job = subprocess.run([launcher, str(logging_dir / "executor.pik")], env=env, capture_output=True, text=True,
                             timeout=600)
        assert job.returncode == 0, job.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["cpt", "sft"])
def test_slurm_dry_run_renders_the_clean_phase_and_its_jobs_finish_the_same_dataset(tmp_path, kind):
    config = _corpus(tmp_path)
    if kind == "cpt":  # two files of documents
        for name, seed in (("a", 0), ("b", 100)):
            write_jsonl(tmp_path / "docs" / f"{name}.jsonl", [
                {"text": random_document(random.Random(seed + k), vocabulary(300), 80)} for k in range(20)])
        flags = ["--source", str(tmp_path / "docs")]
    else:
        flags = [item for source in config.sft.sources for item in ("--source", f"{source.path}={source.share}")]
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        "[data]\nvocab_size = 400\nskip_bad = true\nvalidation_share = 0.1\n"
        f"decontaminate = [{json.dumps(config.decontaminate[0])}]\n"
        f"[data.sft]\nseq_len = {SEQ_LEN}\ntotal_tokens = 30000\n[data.cpt]\nseq_len = 32\n"
    )
    common = ["data", kind, "--recipe", str(recipe), "--run-dir", str(tmp_path), *flags, "--no-progress"]
    reference = CliRunner().invoke(app, [*common, "--out", str(tmp_path / "one")])
    assert reference.exit_code == 0, reference.output
    out = tmp_path / "built"
    result = CliRunner().invoke(app, [*common, "--out", str(out), "--executor", "slurm", "--tasks", "2",
                                      "--dry-run", "--set", "run.executor.partition=cpu",
                                      "--set", "run.executor.venv=/shared/trex/.venv/bin/activate"])
    assert result.exit_code == 0, result.output
    assert "not submitted" in " ".join(result.output.split())
    assert not out.exists()  # nothing ran
    (work,) = tmp_path.glob(".built.shards-*")
    logging_dir = work / "executor" / "clean"
    script = (logging_dir / "launch_script.slurm").read_text()
    for line in ("#SBATCH --array=0-1", "#SBATCH --partition=cpu", "source /shared/trex/.venv/bin/activate",
                 "launch_pickled_pipeline"):
        assert line in script, f"{line!r} not in the sbatch script:\n{script}"
    assert not (work / "units").exists()
    _fake_slurm_jobs(tmp_path, logging_dir, 2)
    assert sorted(p.name for p in (logging_dir / "completions").iterdir()) == ["00000", "00001"]
    assert (work / "units").is_dir()
    # the same build on the local executor finds the array's work done and finishes it
    finish = CliRunner().invoke(app, [*common, "--out", str(out), "--tasks", "2"])
    assert finish.exit_code == 0, finish.output
    if kind == "sft":
        _same_build(tmp_path / "one", out)
    else:
        import datasets

        for split in ("train", "validation"):
            a = datasets.load_from_disk(str(tmp_path / "one" / split))
            b = datasets.load_from_disk(str(out / split))
            np.testing.assert_array_equal(np.array(a["input_ids"]), np.array(b["input_ids"]))
        assert (tmp_path / "one" / "exclusions.jsonl").read_bytes() == (out / "exclusions.jsonl").read_bytes()


def test_dry_run_needs_the_slurm_executor(tmp_path):
    config = _corpus(tmp_path)
    result = CliRunner().invoke(app, ["data", "sft", "--source", config.sft.sources[1].path, "--run-dir",
                                      str(tmp_path), "--out", str(tmp_path / "x"), "--dry-run", "--no-progress"])
    assert result.exit_code == 1 and "use it with --executor slurm" in " ".join(result.output.split())
    assert "Traceback" not in result.output and not (tmp_path / "x").exists()


@pytest.mark.slow
def test_ray_local_mode_builds_what_one_process_builds(tmp_path):
    pytest.importorskip("ray", reason="Ray is an extra (pip install 'trex[ray]')")
    import ray

    config = _corpus(tmp_path)
    build_sft(config, tmp_path / "one" / "sft", tmp_path, show_progress=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        build_sft(config, tmp_path / "ray" / "sft", tmp_path, show_progress=False,
                  executor=ExecutorSettings(kind="ray", tasks=2, cpus_per_task=1))
    finally:
        ray.shutdown()
    _same_build(tmp_path / "one" / "sft", tmp_path / "ray" / "sft")
