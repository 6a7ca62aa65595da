"""The MindSpeed-LLM engine: the paper's Pro and Flash layouts and switches in the rendered launch,
`bash -n`, the dry run's ordered steps, data export, checkpoint dequantization, and a full run against
a MindSpeed-LLM checkout stand-in (real torchrun, real bash) that records what it was asked to do.
The scripts are checked against the framework's flag catalogue in test_mindspeed_catalogue.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trex_cli.data.mindspeed_jsonl import export_cpt_jsonl, export_sft_jsonl
from trex_cli.models.deepseek_v4.state_dict_adapter import checkpoint_is_quantized, dequantize_checkpoint
from trex_cli.recipe import load_recipe
from trex_cli.train.engines.mindspeed import engine, run_mindspeed
from trex_cli.train.engines.mindspeed.launch import REQUIRED_FILES

ROOT = Path(__file__).resolve().parents[2]
STEP_ORDER = ["export-data", "preprocess-data", "dequantize-checkpoint", "convert-hf-to-megatron", "launch",
              "convert-megatron-to-hf"]


@pytest.fixture(autouse=True)
def no_installed_mindspeed(monkeypatch):
    monkeypatch.delenv("MINDSPEED_LLM_DIR", raising=False)
    monkeypatch.setattr(engine, "_torch_npu_works", lambda: False)


def dry_run(name: str, stage: str, run_dir: Path, overrides: list[str] | None = None) -> dict:
    recipe = load_recipe(ROOT / "recipes" / f"deepseek-v4-{name}-superpod.toml", overrides)
    return run_mindspeed(stage, recipe, run_dir, dry_run=True)


# Every layout value and switch of the paper, as the rendered script must carry it.
COMMON_SWITCHES = [
    "export CPU_AFFINITY_CONF=1", "export TASK_QUEUE_ENABLE=2", "export HCCL_ALGO='alltoall=level0:NA;level1:pipeline'",
    "export HCCL_OP_EXPANSION_MODE=AIV", "export HCCL_BUFFSIZE=256", "export LD_PRELOAD=/usr/lib64/libtcmalloc.so",
    "--use-distributed-optimizer", "--recompute-granularity full", "--recompute-method uniform",
    "--recompute-num-layers 1", "--swap-optimizer", "--moe-token-dispatcher-type alltoall",
    "--moe-alltoall-overlap-comm", "--moe-router-dtype fp32", "--bf16", "--adam-beta1 0.9", "--adam-beta2 0.999",
    "--weight-decay 0.01", "--clip-grad 1", "--mtp-num-layers 1", "--mtp-loss-scaling-factor 0.3",
    "--moe-aux-loss-coeff 0.001", "--seq-aux", "--expert-tensor-parallel-size 1", "--context-parallel-size 1",
    "--micro-batch-size 1", "--moe-grouped-gemm",
]
PAPER = {
    "pro": ["NNODES=32", "NPROC_PER_NODE=16", "--tensor-model-parallel-size 2", "--pipeline-model-parallel-size 8",
            "--num-layers-per-virtual-pipeline-stage 4", "--expert-model-parallel-size 64", "--num-layers 64",
            "--noop-layers 3,62,63", "--sequence-parallel", "--seq-length 4096", "--global-batch-size 256",
            "--lr 1e-06", "--min-lr 1e-07", "--lr-warmup-iters 5", "--train-iters 45", "--num-experts 384",
            "--hidden-size 7168", "--fix-router", "--gemm-gradient-accumulation-fusion"],
    "flash": ["NNODES=8", "NPROC_PER_NODE=16", "--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 4",
              "--expert-model-parallel-size 32", "--num-layers 44", "--noop-layers 43", "--seq-length 4096",
              "--global-batch-size 128", "--lr 3e-06", "--min-lr 3e-07", "--lr-decay-style cosine",
              "--lr-warmup-iters 10", "--train-iters 280", "--num-experts 256", "--hidden-size 4096",
              "--no-gradient-accumulation-fusion", "--sequence-parallel"],
}


@pytest.mark.parametrize("name", ["pro", "flash"])
def test_rendered_cpt_scripts_carry_the_paper(name, tmp_path):
    result = dry_run(name, "cpt", tmp_path)
    folder = Path(result["folder"])
    node0 = (folder / "scripts" / "node-00.sh").read_text()
    for expected in COMMON_SWITCHES + PAPER[name]:
        assert expected in node0, expected
    assert "pretrain_deepseek4.py" in node0 and result["flags"]["problems"] == []
    if name == "flash":
        assert "--num-layers-per-virtual-pipeline-stage" not in node0 and "--fix-router" not in node0
    nodes = sorted((folder / "scripts").glob("node-*.sh"))
    assert len(nodes) == (32 if name == "pro" else 8)
    assert 'NODE_RANK="${NODE_RANK:-${SLURM_NODEID:-5}}"' in nodes[5].read_text()
    assert nodes[5].read_text().replace("SLURM_NODEID:-5", "SLURM_NODEID:-0").replace("node 5", "node 0") == node0
    for script in (folder / "scripts").glob("*.sh"):
        check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert check.returncode == 0, (script, check.stderr)


def test_flash_sft_script_uses_the_sft_schedule_and_instruction_data(tmp_path):
    result = dry_run("flash", "sft", tmp_path)
    node0 = (Path(result["folder"]) / "scripts" / "node-00.sh").read_text()
    for expected in ["posttrain_gpt.py", "--finetune", "--stage sft", "--is-instruction-dataset",
                     "--prompt-type deepseek4", "--seq-length 8192", "--fix-router",
                     "--lr 5e-06", "--min-lr 5e-08", "--lr-warmup-iters 22", "--train-iters 250"]:
        assert expected in node0, expected
    preprocess = (Path(result["folder"]) / "scripts" / "preprocess.sh").read_text()
    assert "SharegptStyleInstructionHandler" in preprocess and '"role_tag":"role"' in preprocess


def test_dry_run_lists_steps_in_order_and_says_what_is_missing(tmp_path):
    result = dry_run("pro", "cpt", tmp_path)
    assert [step["name"] for step in result["steps"]] == STEP_ORDER
    assert all(step["status"] == "would run" for step in result["steps"])
    missing = " ".join(result["missing"])
    assert "MindSpeed-LLM" in missing and "torch_npu" in missing and "hf_checkpoint" in missing
    assert "trex data cpt" in missing
    saved = json.loads((Path(result["folder"]) / "steps.json").read_text())
    assert [s["name"] for s in saved["steps"]] == STEP_ORDER
    assert saved["estimate"]["feasible"]
    reverse = (Path(result["folder"]) / "scripts" / "convert_megatron_to_hf.sh").read_text()
    assert "--save-model-type hf" in reverse and "--target-expert-parallel-size 1" in reverse
    forward = (Path(result["folder"]) / "scripts" / "convert_hf_to_megatron.sh").read_text()
    for expected in ("--noop-layers 3,62,63", "--mtp-num-layers 1", "--moe-grouped-gemm",
                     "--target-expert-parallel-size 64", "--num-layers-per-virtual-pipeline-stage 4"):
        assert expected in forward


def test_bad_mindspeed_layouts_name_the_recipe_keys(tmp_path):
    with pytest.raises(ValueError, match="384 experts cannot be split over EP 100") as error:
        dry_run("pro", "cpt", tmp_path, ["mindspeed.ep=100"])
    assert "[mindspeed]" in str(error.value)
    with pytest.raises(ValueError, match="expert-tensor parallel 1"):
        dry_run("pro", "cpt", tmp_path, ["mindspeed.etp=2", "mindspeed.ep=32"])
    recipe = load_recipe(ROOT / "recipes" / "deepseek-v4-pro-superpod.toml")
    with pytest.raises(ValueError, match="cannot run MindSpeed-LLM here"):
        run_mindspeed("cpt", recipe, tmp_path, dry_run=False)


def write_synth_folder(folder: Path) -> None:
    (folder / "cpt_docs").mkdir(parents=True)
    (folder / "sft").mkdir()
    docs = [{"id": f"d{i}", "family": "knapsack", "text": f"# Problem {i}\nMaximize value with capacity {10 + i}."}
            for i in range(3)]
    (folder / "cpt_docs" / "shard-00000.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    samples = [{"id": f"s{i}", "family": "knapsack", "representation": "text", "answer_style": "program",
                "messages": [{"role": "system", "content": "You model OR problems."},
                             {"role": "user", "content": f"Solve instance {i}."},
                             {"role": "assistant", "content": f"```python\nprint({i})\n```"}]} for i in range(2)]
    (folder / "sft" / "shard-00000.jsonl").write_text("\n".join(json.dumps(s) for s in samples) + "\n")
    (folder / "manifest.json").write_text(json.dumps({"stage": "synth"}))


def test_cpt_export_recovers_documents_from_packed_token_rows(tmp_path):
    import datasets
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    documents = ["minimize cost subject to demand", "maximize profit with two machines",
                 "assign workers to shifts at least cost"]
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(documents, trainers.WordLevelTrainer(special_tokens=["[UNK]", "<bos>"]))
    from tokenizers import decoders

    tokenizer.decoder = decoders.WordPiece(prefix="##")
    bos = tokenizer.token_to_id("<bos>")
    stream, positions = [], []
    for text in documents:
        ids = [bos] + tokenizer.encode(text).ids
        stream += ids
        positions += list(range(len(ids)))
    seq_len = 8  # documents cross row boundaries; positions continue there
    rows = [{"input_ids": stream[i:i + seq_len], "position_ids": positions[i:i + seq_len],
             "loss_mask": [1] * len(stream[i:i + seq_len])} for i in range(0, len(stream), seq_len)]
    data = tmp_path / "data-cpt"
    datasets.Dataset.from_list(rows).save_to_disk(str(data / "train"))
    (data / "tokenizer").mkdir()
    tokenizer.save(str(data / "tokenizer" / "tokenizer.json"))
    target = tmp_path / "out.jsonl"
    assert export_cpt_jsonl(data, target) == 3
    assert [json.loads(line)["text"] for line in target.read_text().splitlines()] == documents


def test_exports_from_a_synth_folder(tmp_path):
    synth = tmp_path / "synth"
    write_synth_folder(synth)
    assert export_cpt_jsonl(synth, tmp_path / "cpt.jsonl") == 3
    assert json.loads((tmp_path / "cpt.jsonl").read_text().splitlines()[0]) == {
        "text": "# Problem 0\nMaximize value with capacity 10."}
    assert export_sft_jsonl(synth, tmp_path / "sft.jsonl") == 2
    first = json.loads((tmp_path / "sft.jsonl").read_text().splitlines()[0])
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl:1: the sample has no assistant message"):
        export_sft_jsonl(bad, tmp_path / "x.jsonl")


def quantized_tiny_checkpoint(folder: Path):
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
    from trex_cli.models.deepseek_v4.state_dict_adapter import export_official_quantized

    config = get_flavor("tiny").replace(hidden_size=128, moe_intermediate_size=128, q_lora_rank=128,
                                        o_lora_rank=128)
    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM(config)
    export_official_quantized(model, folder, max_shard_bytes=200_000)  # several shards
    (folder / "tokenizer_config.json").write_text("{}")
    return config


def test_dequantize_checkpoint_matches_the_adapter(tmp_path):
    from trex_cli.models.deepseek_v4.state_dict_adapter import from_official, read_tensors, to_official

    source, target = tmp_path / "official", tmp_path / "bf16"
    quantized_tiny_checkpoint(source)
    assert checkpoint_is_quantized(source)
    counts = dequantize_checkpoint(source, target)
    assert counts["dequantized"] > 0 and counts["shards"] > 1
    written = read_tensors(target)
    assert not any(name.endswith(".scale") for name in written)
    expected = to_official(from_official(read_tensors(source), torch.bfloat16))
    assert set(written) == set(expected)
    for name, tensor in expected.items():
        assert torch.equal(written[name].to(tensor.dtype), tensor), name
    config = json.loads((target / "config.json").read_text())
    assert "quantization_config" not in config and config["torch_dtype"] == "bfloat16"
    assert (target / "tokenizer_config.json").is_file()
    assert not checkpoint_is_quantized(target)
    # an interrupted run resumes: finished shards are kept, the missing one is written again
    first_shard = sorted(target.glob("*.safetensors"))[0]
    first_shard.unlink()
    again = dequantize_checkpoint(source, target)
    assert again["shards"] == 1 and again["resumed_shards"] == counts["shards"] - 1
    assert set(read_tensors(target)) == set(expected)


FAKE_ENTRY = """import json, os, sys
with open(os.environ["TREX_FAKE_LOG"], "a") as log:
    log.write(json.dumps({"program": os.path.basename(sys.argv[0]), "rank": os.environ.get("RANK"),
                          "world": os.environ.get("WORLD_SIZE"), "args": sys.argv[1:]}) + "\\n")
"""


def test_run_executes_every_step_in_order_where_mindspeed_is_installed(tmp_path, monkeypatch):
    """A MindSpeed-LLM checkout stand-in whose entry points record their arguments: the engine runs
    export, preprocess, dequantization, conversion, a real torchrun launch (2 ranks) and the export."""
    checkout = tmp_path / "MindSpeed-LLM"
    checkout.mkdir()
    for name in REQUIRED_FILES:
        (checkout / name).write_text(FAKE_ENTRY)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("TREX_FAKE_LOG", str(log))
    monkeypatch.setattr(engine, "_torch_npu_works", lambda: True)
    bin_dir = Path(sys.executable).parent
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    run_dir = tmp_path / "run"
    write_synth_folder(run_dir / "synth")
    hf = tmp_path / "official"
    quantized_tiny_checkpoint(hf)
    recipe_path = tmp_path / "tiny-superpod.toml"
    recipe_path.write_text(f"""
[model]
flavor = "tiny"
overrides = {{ hidden_size = 128, moe_intermediate_size = 128, q_lora_rank = 128, o_lora_rank = 128 }}
[plan]
cluster = "cpu"
[mindspeed]
mindspeed_llm_dir = "{checkout}"
python = "{sys.executable}"
nodes = 1
ranks_per_node = 2
master_port = 29671
ep = 2
global_batch = 4
seq_len = 128
tcmalloc_path = ""
hf_checkpoint = "{hf}"
[mindspeed.cpt]
data = "{run_dir / 'synth'}"
train_iters = 3
""")
    result = run_mindspeed("cpt", load_recipe(recipe_path), run_dir, dry_run=False)
    assert [step["name"] for step in result["steps"]] == STEP_ORDER
    assert all(step["status"].startswith("done") for step in result["steps"]), result["steps"]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    programs = [call["program"] for call in calls]
    assert programs == ["preprocess_data.py", "convert_ckpt_v2.py", "pretrain_deepseek4.py",
                        "pretrain_deepseek4.py", "convert_ckpt_v2.py"]
    launch = [call for call in calls if call["program"] == "pretrain_deepseek4.py"]
    assert sorted(call["rank"] for call in launch) == ["0", "1"] and launch[0]["world"] == "2"
    assert "--expert-model-parallel-size" in launch[0]["args"]
    assert calls[0]["args"][calls[0]["args"].index("--input") + 1].endswith("cpt.jsonl")
    assert (run_dir / "mindspeed" / "base-bf16" / "model.safetensors.index.json").is_file()


def test_train_command_dry_run_through_the_mindspeed_engine(tmp_path):
    from typer.testing import CliRunner

    from trex_cli.app import app

    result = CliRunner().invoke(app, ["train", "sft", "--engine", "mindspeed", "--dry-run", "--recipe",
                                      str(ROOT / "recipes" / "deepseek-v4-flash-superpod.toml"), "--run-dir",
                                      str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    steps = json.loads((tmp_path / "mindspeed" / "sft" / "steps.json").read_text())["steps"]
    assert [step["name"] for step in steps] == STEP_ORDER
    assert "launch" in result.output and "missing" in result.output


def test_sft_after_cpt_starts_from_the_cpt_checkpoints(tmp_path):
    (tmp_path / "mindspeed" / "cpt" / "checkpoints").mkdir(parents=True)
    result = dry_run("pro", "sft", tmp_path)
    assert [step["name"] for step in result["steps"]] == ["export-data", "preprocess-data", "launch",
                                                          "convert-megatron-to-hf"]
    node0 = (Path(result["folder"]) / "scripts" / "node-00.sh").read_text()
    assert f"CKPT_LOAD_DIR={tmp_path}/mindspeed/cpt/checkpoints" in node0
    assert "--global-batch-size 1024" in node0 and "--lr-warmup-iters 500" in node0 and "--lr 1e-05" in node0
    assert "--train-iters 2000" in node0 and "--save-interval 500" in node0 and "--min-lr 1e-07" in node0


def test_cluster_placeholders_come_from_the_scheduler_and_a_missing_one_stops_the_script(tmp_path):
    """No localhost or /path/to in a dry run: node 0's address comes from $MASTER_ADDR or the Slurm
    allocation's first host, the node rank from $SLURM_NODEID, and an unset path stops the script naming it."""
    import os
    import subprocess

    result = dry_run("flash", "cpt", tmp_path)
    scripts = [Path(script) for script in result["scripts"]]
    node_script = next(script for script in scripts if "node-01" in script.name)
    for script in scripts:
        text = script.read_text()
        assert "/path/to" not in text and "localhost" not in text, script
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0, script
    # run the node script's variable header only, with a stand-in `scontrol` that names the allocation's hosts
    header = node_script.read_text().split("\n# host-side switches")[0] + '\necho "$MASTER_ADDR $NODE_RANK"\n'
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text('#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && printf "node-a\\nnode-b\\n"\n')
    (bin_dir / "scontrol").chmod(0o755)
    slurm = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "node-[a-b]", "SLURM_NODEID": "1",
             "MINDSPEED_LLM_DIR": str(tmp_path), "TOKENIZER_PATH": str(tmp_path)}
    ran = subprocess.run(["bash", "-c", header], capture_output=True, text=True, env=slurm)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["node-a", "1"]
    missing = subprocess.run(["bash", "-c", header], capture_output=True, text=True,
                             env={**slurm, "MINDSPEED_LLM_DIR": ""})
    assert missing.returncode != 0 and "set MINDSPEED_LLM_DIR to the MindSpeed-LLM checkout" in missing.stderr
