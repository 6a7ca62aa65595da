"""`trex data cpt` as sharded tasks (`trex_cli.data.sharded`): 3 local tasks give the one-process
dataset, exclusion file, tokenizer and stats; a build whose tasks were killed resumes from the units they
finished; bad input stops a task with the reader's message and leaves the output folder alone; Ray's local
mode runs the same build where Ray installs."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from tests.data.data_fixtures import random_document, vocabulary, write_jsonl
from trex_cli.data.config import CptSection, DataConfig, SourceSpec
from trex_cli.data.cpt import build_cpt
from trex_cli.recipe import ExecutorSettings

QUESTION = ("A farmer ships sled dogs across the frozen lake in crates that hold at most twelve dogs, and "
            "each crossing costs forty dollars; how many crossings minimise the cost")


def _corpus(tmp_path):
    """Four sources over seven files: near and exact copies across files and sources, a benchmark
    question planted in one document, an empty document and a malformed line."""
    rng = random.Random(5)
    words = vocabulary(600)
    texts = [random_document(rng, words, rng.randint(60, 160)) for _ in range(90)]
    texts[10] = texts[3]  # an exact copy in the same file
    texts[47] = texts[12] + " Furthermore zebra crossings."  # a near copy in another file
    texts[80] = texts[20]  # an exact copy in another source
    texts[33] = texts[33] + "\n\nExample: " + QUESTION + "\n"
    folder = tmp_path / "corpus"
    for part in range(4):
        rows = [{"id": f"f{part}-{k}", "text": text} for k, text in enumerate(texts[part * 15 : part * 15 + 15])]
        if part == 2:
            rows.append({"id": "empty", "text": "   \n"})
        path = write_jsonl(folder / f"part-{part}.jsonl", rows)
        if part == 1:
            with open(path, "a") as stream:
                stream.write("{not json\n")
    (folder / "notes.md").write_text(texts[60])
    write_jsonl(tmp_path / "extra.jsonl", [{"text": text} for text in texts[61:80]])
    write_jsonl(tmp_path / "more.jsonl", [{"text": text} for text in texts[80:]])
    benchmark = write_jsonl(tmp_path / "bench" / "nl4opt.jsonl", [{"en_question": QUESTION, "en_answer": "3"}])
    return DataConfig(
        vocab_size=400, skip_bad=True, validation_share=0.1, decontaminate=[str(benchmark)],
        cpt=CptSection(sources=[SourceSpec(str(folder), 0.5), SourceSpec(str(tmp_path / "extra.jsonl"), 0.3),
                                SourceSpec(str(tmp_path / "more.jsonl"), 0.2)], seq_len=32, total_tokens=9000),
    )


def _same_build(one, sharded):
    import datasets

    for split in ("train", "validation"):
        a, b = datasets.load_from_disk(str(one / split)), datasets.load_from_disk(str(sharded / split))
        assert a.num_rows > 0 and a.num_rows == b.num_rows
        for column in ("input_ids", "position_ids", "loss_mask"):
            np.testing.assert_array_equal(np.array(a[column]), np.array(b[column]))
    for name in ("exclusions.jsonl", "tokenizer/tokenizer.json", "meta.json"):
        assert (one / name).read_bytes() == (sharded / name).read_bytes(), name
    timing = ("wall_time_s", "phase_seconds", "tokens_per_second", "out")
    stats = [{k: v for k, v in json.loads((f / "stats.json").read_text()).items() if k not in timing}
             for f in (one, sharded)]
    assert stats[0] == stats[1]
    return stats[0]


def test_three_local_tasks_build_what_one_process_builds(tmp_path):
    config = _corpus(tmp_path)
    one = build_cpt(config, tmp_path / "one" / "cpt", tmp_path, show_progress=False)
    sharded = build_cpt(config, tmp_path / "three" / "cpt", tmp_path, show_progress=False,
                        executor=ExecutorSettings(tasks=3))
    assert one["drops_by_reason"] == {"bad_input": 1, "benchmark_overlap": 1, "empty": 1,
                                      "exact_duplicate": 2, "near_duplicate": 1}
    stats = _same_build(tmp_path / "one" / "cpt", tmp_path / "three" / "cpt")
    assert stats["documents_read"] == sharded["documents_read"] == 90 + 1  # the empty one counts as read
    # the scratch folder is gone once the build has finished
    assert sorted(p.name for p in (tmp_path / "three").iterdir()) == ["cpt"]


def test_a_build_whose_tasks_were_killed_resumes_from_their_finished_units(tmp_path):
    from trex_cli.data import build, sharded
    from trex_cli.data.readers import document_units

    config = _corpus(tmp_path)
    out = tmp_path / "resumed" / "cpt"
    plan = build.plan_build(config, "cpt", out, tmp_path)
    units = [unit for source in plan.sources for unit in document_units(source)]
    work = sharded.scratch_folder(out, plan.folder.config)
    shard_plan = sharded.ShardPlan(plan.config, plan.sources, units, work, out.resolve())
    sharded.CleanTask(shard_plan)(None, 0, 3)  # task 0 of 3 finished its units; 1 and 2 were killed
    staging = shard_plan.unit_folder(1).with_name(".00001.99999")  # a unit killed halfway
    staging.mkdir()
    (staging / "documents.jsonl").write_text("[\"half\"")
    assert not out.exists()  # the clean phase never touches the output folder

    build_cpt(config, out, tmp_path, show_progress=False, executor=ExecutorSettings(tasks=3))
    build_cpt(config, tmp_path / "one" / "cpt", tmp_path, show_progress=False)
    _same_build(tmp_path / "one" / "cpt", out)
    assert not work.exists()


def test_resumed_units_are_not_read_again(tmp_path, monkeypatch):
    """The units a killed run finished are skipped: the rerun reads only the others."""
    from trex_cli.data import build, readers, sharded

    config = _corpus(tmp_path)
    out = tmp_path / "resumed" / "cpt"
    plan = build.plan_build(config, "cpt", out, tmp_path)
    units = [unit for source in plan.sources for unit in readers.document_units(source)]
    shard_plan = sharded.ShardPlan(plan.config, plan.sources, units,
                                   sharded.scratch_folder(out, plan.folder.config), out.resolve())
    sharded.CleanTask(shard_plan)(None, 0, 2)
    read = []
    original = sharded.unit_documents
    monkeypatch.setattr(sharded, "unit_documents", lambda spec, unit, bad: read.append(unit) or original(spec, unit, bad))
    task = sharded.CleanTask(shard_plan)
    task(None, 0, 2)
    task(None, 1, 2)
    assert read == units[1::2]


def test_bad_input_in_a_task_is_the_readers_error_and_the_output_is_untouched(tmp_path):
    config = _corpus(tmp_path)
    config.skip_bad = False
    out = tmp_path / "data" / "cpt"
    with pytest.raises(ValueError, match=r"part-1\.jsonl:16: .*--skip-bad"):
        build_cpt(config, out, tmp_path, show_progress=False, executor=ExecutorSettings(tasks=2))
    assert not out.exists()


def test_the_cli_takes_executor_and_tasks(tmp_path):
    from typer.testing import CliRunner

    from trex_cli.app import app

    config = _corpus(tmp_path)
    sources = []
    for source in config.cpt.sources:
        sources += ["--source", f"{source.path}={source.share}"]
    common = ["data", "cpt", *sources, "--decontaminate", config.decontaminate[0], "--skip-bad", "--seq-len", "32",
              "--train-tokenizer", "400", "--no-progress", "--set", "data.cpt.total_tokens=9000",
              "--set", "data.validation_share=0.1", "--run-dir", str(tmp_path / "run")]
    runner = CliRunner()
    one = runner.invoke(app, [*common, "--out", str(tmp_path / "one")])
    assert one.exit_code == 0, one.output
    three = runner.invoke(app, [*common, "--out", str(tmp_path / "three"), "--executor", "local", "--tasks", "3"])
    assert three.exit_code == 0, three.output
    _same_build(tmp_path / "one", tmp_path / "three")
    bad = runner.invoke(app, [*common, "--out", str(tmp_path / "bad"), "--tasks", "0"])
    assert bad.exit_code != 0 and "tasks must be >= 1" in bad.output


@pytest.mark.slow
def test_ray_local_mode_builds_what_one_process_builds(tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'trex[ray]')")
    import ray

    config = _corpus(tmp_path)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        build_cpt(config, tmp_path / "ray" / "cpt", tmp_path, show_progress=False,
                  executor=ExecutorSettings(kind="ray", tasks=2, cpus_per_task=1))
    finally:
        ray.shutdown()
    build_cpt(config, tmp_path / "one" / "cpt", tmp_path, show_progress=False)
    _same_build(tmp_path / "one" / "cpt", tmp_path / "ray" / "cpt")
