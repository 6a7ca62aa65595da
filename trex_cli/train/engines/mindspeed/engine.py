"""The MindSpeed-LLM engine: run T-Rex's SuperPOD training through MindSpeed-LLM (Megatron-Core).

`run_mindspeed(stage, recipe, run_dir, dry_run)` prepares and runs, in order:

1. data export (`trex_cli.data.mindspeed_jsonl`): CPT documents as `{"text": ...}`, SFT samples as
   `{"messages": [...]}`;
2. `preprocess_data.py`: tokenize them into Megatron's indexed dataset;
3. checkpoint dequantization: the official FP8/FP4 checkpoint to BF16, shard by shard
   (`models.deepseek_v4.state_dict_adapter.dequantize_checkpoint`; T-Rex trains on BF16);
4. `convert_ckpt_v2.py` HF -> Megatron for the layout (no-op layers, MTP, grouped GEMM);
5. the per-node launch scripts (`launch.py`);
6. the reverse conversion Megatron -> HF for export (it needs expert-tensor parallel 1).

Everything is written under `<run_dir>/mindspeed/<stage>/`. Every rendered command is checked
against the flag catalogue of the pinned framework (`catalogue.json`) before anything runs. Where
MindSpeed-LLM is installed (its source checkout in `[mindspeed] mindspeed_llm_dir` or
$MINDSPEED_LLM_DIR, with torch_npu working) the steps run; elsewhere `dry_run` writes every file,
lists the steps in order and says what is missing.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from trex_cli.console import out, warn
from trex_cli.data.mindspeed_jsonl import export_cpt_jsonl, export_sft_jsonl
from trex_cli.models.deepseek_v4.state_dict_adapter import checkpoint_is_quantized, dequantize_checkpoint
from trex_cli.plan.parameters import ModelShape
from trex_cli.train.engines.mindspeed import catalogue
from trex_cli.train.engines.mindspeed.config import MindSpeedSection
from trex_cli.train.engines.mindspeed.launch import (
    REQUIRED_FILES,
    Paths,
    check_section,
    convert_to_hf_arguments,
    convert_to_megatron_arguments,
    layout_of,
    preprocess_arguments,
    render_convert_to_hf,
    render_convert_to_megatron,
    render_node_script,
    render_preprocess,
    resolve_paths,
)


@functools.lru_cache(maxsize=1)
def _torch_npu_works() -> bool:
    """Detect by trying, in a child process: torch_npu can break `import torch` where CANN is missing."""
    try:
        result = subprocess.run([sys.executable, "-c", "import torch, torch_npu; assert torch.npu.is_available()"],
                                capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def missing_requirements(paths: Paths, stage: str, needs_conversion: bool, check_device: bool = True) -> list[str]:
    missing = []
    if paths.mindspeed_llm is None:
        missing.append("MindSpeed-LLM: set [mindspeed] mindspeed_llm_dir or $MINDSPEED_LLM_DIR to its source checkout")
    elif not paths.mindspeed_llm.is_dir():
        missing.append(f"MindSpeed-LLM checkout {paths.mindspeed_llm} does not exist")
    else:
        absent = [name for name in REQUIRED_FILES if not (paths.mindspeed_llm / name).is_file()]
        if absent:
            missing.append(f"{paths.mindspeed_llm} lacks {', '.join(absent)}: not a MindSpeed-LLM v26.1.0 checkout")
    if check_device and not _torch_npu_works():
        missing.append("torch_npu with a working Ascend device (CANN) on this machine")
    if paths.tokenizer is None:
        missing.append("a tokenizer: set [mindspeed] tokenizer or hf_checkpoint")
    if needs_conversion:
        if paths.hf_source is None:
            missing.append("the base checkpoint: set [mindspeed] hf_checkpoint to the official DeepSeek-V4 folder")
        elif not paths.hf_source.is_dir():
            missing.append(f"the base checkpoint folder {paths.hf_source} does not exist")
    if not paths.data_source.exists():
        what = "trex data folder (run `trex data cpt`)" if stage == "cpt" else "synth folder (run `trex synth`)"
        missing.append(f"{stage.upper()} data {paths.data_source}: no such {what}")
    return missing


def flag_problems(section: MindSpeedSection, shape: ModelShape, stage: str, paths: Paths,
                  node_scripts: list[Path]) -> list[str]:
    """Every rendered command against the pinned framework's flag catalogue (empty when all pass)."""
    allowed = catalogue.patched_image_flags() if section.patched_image else None
    problems = []
    for script in node_scripts:
        problems += catalogue.check_script(script.read_text(), "train", allowed=allowed, where=script.name)
    for program, words, name in (
            ("preprocess", preprocess_arguments(section, stage, paths), "preprocess.sh"),
            ("convert", convert_to_megatron_arguments(section, shape, paths), "convert_hf_to_megatron.sh"),
            ("convert", convert_to_hf_arguments(section, shape, paths), "convert_megatron_to_hf.sh")):
        problems += catalogue.check_flags(catalogue.group_flags(words), program, where=name)
    return problems


def run_mindspeed(stage: str, recipe, run_dir: Path, dry_run: bool) -> dict:
    """Prepare (and unless `dry_run`, run) stage `cpt` or `sft` through MindSpeed-LLM.

    Returns {"stage", "folder", "dry_run", "steps": [...in order...], "missing": [...], "scripts": [...],
    "estimate": {...}, "flags": {...}}; the same is written to `<folder>/steps.json`."""
    from trex_cli.artifacts import write_json_atomic, write_text_atomic
    from trex_cli.plan.clusters import load_cluster
    from trex_cli.plan.mfu import flops_per_token
    from trex_cli.plan.search import evaluate

    section: MindSpeedSection = recipe.section("mindspeed")
    config = recipe.section("model").build_config()
    shape = ModelShape.from_config(config)
    where = f"{recipe.path or 'recipe'}: [mindspeed]"
    job = check_section(section, shape, stage, where)
    if section.etp != 1:
        raise ValueError(f"{where} etp = {section.etp}: the Megatron -> HF export needs expert-tensor parallel 1 "
                         "(T-Rex folds experts with etp = 1); set etp = 1")
    run_dir = Path(run_dir)
    paths = resolve_paths(stage, section, run_dir)
    paths.folder.mkdir(parents=True, exist_ok=True)
    # Start from the converted base unless the stage is given a Megatron checkpoint (SFT after CPT).
    needs_conversion = paths.megatron_load == run_dir / "mindspeed" / "base-megatron"

    # The planner's estimate for this layout on the cluster this recipe plans for.
    cluster = load_cluster(recipe.section("plan").cluster)
    evaluation = evaluate(job, layout_of(section), cluster, flops_per_token(config, job.seq_len, "v4"))
    if not evaluation.feasible:
        warn(f"the planner estimates this layout does not fit {cluster.name}: " + "; ".join(evaluation.reasons))

    scripts_dir = paths.folder / "scripts"
    written: list[str] = []

    def write_script(name: str, text: str) -> Path:
        target = scripts_dir / name
        write_text_atomic(target, text)
        target.chmod(0o755)
        written.append(str(target))
        return target

    node_scripts = [write_script(f"node-{rank:02d}.sh",
                                 render_node_script(section, stage, rank, job, config, shape, paths))
                    for rank in range(section.nodes)]
    preprocess = write_script("preprocess.sh", render_preprocess(section, stage, paths))
    to_megatron = write_script("convert_hf_to_megatron.sh", render_convert_to_megatron(section, shape, paths))
    to_hf = write_script("convert_megatron_to_hf.sh", render_convert_to_hf(section, shape, paths))
    problems = flag_problems(section, shape, stage, paths, node_scripts[:1])
    versions = catalogue.load_catalogue()["versions"]
    patched = [flag if values is None else f"{flag} {' '.join(values)}"
               for flag, values in catalogue.patched_image_flags().items()]
    flags = {
        "checked_against": versions[:3],
        "image": "T-Rex patched image" if section.patched_image else "stock",
        "patched_image_flags": patched if section.patched_image else [],
        "left_out": [] if section.patched_image else patched,
        "problems": problems,
    }

    missing = missing_requirements(paths, stage, needs_conversion, check_device=True)
    quantized = bool(paths.hf_source and paths.hf_source.is_dir() and checkpoint_is_quantized(paths.hf_source))
    steps: list[dict[str, Any]] = [
        {"name": "export-data", "kind": "python",
         "action": f"export {paths.data_source} -> {paths.data_jsonl}",
         "status": "pending"},
        {"name": "preprocess-data", "kind": "shell", "script": str(preprocess), "status": "pending"},
    ]
    if needs_conversion:
        steps.append({"name": "dequantize-checkpoint", "kind": "python",
                      "action": (f"dequantize {paths.hf_source or '[mindspeed] hf_checkpoint'} (FP8/FP4) -> "
                                 f"{paths.hf_bf16} (BF16)" if quantized or paths.hf_source is None else
                                 f"{paths.hf_source} is BF16 already: link it as {paths.hf_bf16}"),
                      "status": "pending"})
        steps.append({"name": "convert-hf-to-megatron", "kind": "shell", "script": str(to_megatron),
                      "status": "pending"})
    steps.append({"name": "launch", "kind": "shell", "script": str(node_scripts[0]),
                  "scripts": [str(p) for p in node_scripts], "status": "pending"})
    steps.append({"name": "convert-megatron-to-hf", "kind": "shell", "script": str(to_hf), "status": "pending"})

    result = {"stage": stage, "engine": "mindspeed", "folder": str(paths.folder), "dry_run": dry_run,
              "world": job.world, "layout": layout_of(section).describe(), "steps": steps, "missing": missing,
              "scripts": written, "estimate": evaluation.as_dict(), "flags": flags}

    if dry_run:
        # Data export is local and cheap: do it when the data is there, so the folder is complete.
        if paths.data_source.exists():
            count = (export_cpt_jsonl if stage == "cpt" else export_sft_jsonl)(paths.data_source, paths.data_jsonl)
            steps[0]["status"] = f"done ({count} records)"
        for step in steps:
            if step["status"] == "pending":
                step["status"] = "would run"
        write_json_atomic(paths.folder / "steps.json", result)
        _print_summary(result)
        return result

    if problems:
        raise ValueError(f"the rendered launch does not pass the MindSpeed-LLM flag catalogue: {'; '.join(problems)} "
                         "(check [mindspeed] extra_args and patched_image)")
    if missing:
        raise ValueError(f"cannot run MindSpeed-LLM here: missing {'; '.join(missing)}. Run with --dry-run to "
                         f"write the launch files to {paths.folder}")
    node_rank = int(os.environ.get("NODE_RANK", "0"))
    for step in steps:
        name = step["name"]
        if name == "export-data":
            count = (export_cpt_jsonl if stage == "cpt" else export_sft_jsonl)(paths.data_source, paths.data_jsonl)
            step["status"] = f"done ({count} records)"
        elif name == "dequantize-checkpoint":
            if quantized:
                counts = dequantize_checkpoint(paths.hf_source, paths.hf_bf16)
                step["status"] = f"done ({counts['dequantized']} tensors dequantized)"
            else:
                if not paths.hf_bf16.exists():
                    paths.hf_bf16.parent.mkdir(parents=True, exist_ok=True)
                    paths.hf_bf16.symlink_to(paths.hf_source.resolve())
                step["status"] = "done (already BF16)"
        else:
            script = node_scripts[node_rank] if name == "launch" else Path(step["script"])
            out.print(f"[bold]{name}[/bold]: bash {script}")
            status = subprocess.run(["bash", str(script)]).returncode
            step["status"] = "done" if status == 0 else f"failed (exit {status})"
            if status != 0:
                write_json_atomic(paths.folder / "steps.json", result)
                raise ValueError(f"MindSpeed step {name} failed with exit status {status}; see {paths.logs}")
        write_json_atomic(paths.folder / "steps.json", result)
    _print_summary(result)
    return result


def _print_summary(result: dict) -> None:
    from rich.markup import escape

    mode = "dry run" if result["dry_run"] else "run"
    out.print(f"[bold]MindSpeed-LLM {result['stage'].upper()} ({mode})[/bold]: {result['layout']} on "
              f"{result['world']} ranks; files in {result['folder']}")
    flags = result["flags"]
    out.print(f"  flags checked against {escape('; '.join(flags['checked_against']))} "
              f"({flags['image']} image): "
              + ("all defined, all values of the declared type" if not flags["problems"] else
                 f"[red]{len(flags['problems'])} problem(s)[/red]"), highlight=False)
    if flags["patched_image_flags"]:
        out.print(f"  T-Rex patched-image flags rendered: {' '.join(flags['patched_image_flags'])}", highlight=False)
    elif flags["left_out"]:
        out.print(f"  left out (only T-Rex's patched image defines them; set [mindspeed] patched_image = true "
                  f"there): {' '.join(flags['left_out'])}", highlight=False)
    for problem in flags["problems"]:
        out.print(f"  [red]flag problem:[/red] {escape(problem)}", highlight=False)
    for number, step in enumerate(result["steps"], 1):
        target = step.get("script") or step.get("action")
        out.print(f"  {number}. {step['name']}: {step['status']}  {escape(str(target))}", highlight=False)
    for item in result["missing"]:
        out.print(f"  [yellow]missing:[/yellow] {escape(item)}", highlight=False)
