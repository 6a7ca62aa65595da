"""One training stage, resolved: a recipe (flags already applied to its keys) and the run layout ->
`TrainJob`, the same on every rank. Imports no torch, so `trex run` can fingerprint a training stage
without starting one."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trex_cli.train.config import StageSchedule, TrainSection

if TYPE_CHECKING:
    from trex_cli.recipe import Recipe
    from trex_cli.run_layout import RunLayout

# Settings that do not decide the trained weights: the other stage's table, logging, reporting,
# validation and checkpoint cadence, the engine (so a finished CPT stays finished when only SFT settings
# change).
NOT_IN_FINGERPRINT = (
    "cpt", "sft", "log_every", "report_to", "wandb_project", "eval_every", "eval_steps", "save_every", "keep_last",
    "engine",
)


@dataclass
class TrainJob:
    """Everything one training stage needs, resolved by `resolve_job` (the same on every rank)."""

    stage: str  # "cpt" or "sft"
    train: TrainSection
    model_config: dict  # DeepseekV4Config fields (to_dict)
    stage_folder: Path  # runs/<name>/train/<stage>
    data_folder: Path
    init_path: Path | None
    fingerprint_config: dict  # what StageFolder fingerprints
    inputs: list[Path]
    show_progress: bool = True

    @property
    def schedule(self) -> StageSchedule:
        return self.train.stage(self.stage)


def resolve_job(stage: str, recipe: Recipe, layout: RunLayout, *, warn_missing_cpt: bool = True) -> TrainJob:
    """The training job of `stage` ("cpt" or "sft") for a recipe whose flags are applied already."""
    from trex_cli.artifacts import MANIFEST, read_manifest
    from trex_cli.console import warn
    from trex_cli.models.deepseek_v4.config import DeepseekV4Config

    train = recipe.section("train")
    model_section = recipe.section("model")
    schedule = train.stage(stage)
    if schedule.max_steps < 1:
        raise ValueError(f"[train.{stage}] max_steps = {schedule.max_steps}: train at least 1 step")
    if train.save_every < 1:
        raise ValueError(f"[train] save_every = {train.save_every}: must be 1 or more")
    check_reporters(train.report_to)
    data_folder = layout.data(stage)
    read_manifest(data_folder, "data")  # a clear error before any process starts
    meta = json.loads((data_folder / "meta.json").read_text())
    inputs = [data_folder]
    init_path = Path(schedule.init) if schedule.init else None
    if init_path is None and stage == "sft":
        cpt_folder = layout.train("cpt")
        if (cpt_folder / MANIFEST).is_file() and (cpt_folder / "hf").is_dir():
            init_path = cpt_folder / "hf"
            inputs.append(cpt_folder)
        elif warn_missing_cpt:
            warn(f"no finished CPT stage in {cpt_folder} and no --init: SFT starts from random init")
    if init_path is not None:
        if not (init_path / "config.json").is_file():
            raise FileNotFoundError(f"--init {init_path}: no config.json there (give an HF checkpoint folder)")
        if any(flag.key == "model.flavor" for flag in recipe.flags):
            warn(f"--flavor is ignored: the shape comes from {init_path}/config.json")
        config = DeepseekV4Config.from_model_dir(init_path)
    else:
        config = model_section.build_config()
        # A random init takes the data's tokenizer: its vocabulary and special tokens.
        changes = {"vocab_size": max(config.vocab_size, int(meta["vocab_size"]))}
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            if meta.get(key) is not None:
                changes[key] = int(meta[key])
        config = config.replace(**changes)
    if int(meta["seq_len"]) > config.max_position_embeddings:
        # RoPE past the trained positions extrapolates silently: refuse before any process starts
        raise ValueError(
            f"{data_folder / 'meta.json'}: seq_len {meta['seq_len']} is longer than the model's "
            f"max_position_embeddings {config.max_position_embeddings}; rebuild the data with "
            f"--seq-len {config.max_position_embeddings} or less, or use a model with more positions"
        )
    train_settings = recipe.resolved(["train"])["train"]
    for key in NOT_IN_FINGERPRINT:
        train_settings.pop(key, None)
    # the data folder is an input (its manifest's fingerprint is in the lineage), not a setting: the same
    # data reached by its default path or by --data is the same training
    train_settings["schedule"] = {k: v for k, v in dataclasses.asdict(schedule).items() if k != "data"}
    fingerprint_config = {
        "stage": stage,
        "train": train_settings,
        "model": config.to_dict(),
        "init": str(init_path) if init_path else None,
    }
    return TrainJob(
        stage=stage,
        train=train,
        model_config=config.to_dict(),
        stage_folder=layout.train(stage),
        data_folder=data_folder,
        init_path=init_path,
        fingerprint_config=fingerprint_config,
        inputs=inputs,
    )


def check_reporters(names: list[str]) -> None:
    """Each `report_to` reporter's package is installed (checked before any rank starts)."""
    import importlib.util

    from trex_cli.train.config import REPORTERS

    for name in names:
        if importlib.util.find_spec(REPORTERS[name]) is None:
            raise ValueError(
                f"--report-to {name}: the {REPORTERS[name]} package is not installed; pip install 'trex[{name}]'"
            )
