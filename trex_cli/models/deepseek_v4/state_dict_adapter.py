"""Checkpoint conversion for DeepSeek-V4: the official layout and transformers' layout, both ways.

trex's module names are the official ones, except that routed experts are stacked (one [E, ...]
tensor per projection instead of one tensor per expert). So:

- official  <-> trex: unstack / stack the experts; FP8 (128x128 block scales) and FP4 (packed, one
  scale per 32 values) weights are dequantized on load.
- transformers <-> trex: the renames of transformers' `conversion_mapping.py` for deepseek_v4
  (`attn.wq_a` -> `self_attn.q_a_proj`, ...), with w1/w3 of all experts packed as
  `mlp.experts.gate_up_proj` [E, 2*inter, hidden] and w2 as `mlp.experts.down_proj`. transformers
  has no MTP module: a transformers-layout folder written here keeps the MTP weights under their
  official `mtp.` names (transformers ignores them on load).

`export_hf` writes the official layout in BF16 (float32 for the tensors V4 keeps in float32) with
config.json, generation_config.json and the tokenizer: what transformers' AutoModelForCausalLM and
the official tooling both load. `export_hf_by_shard` writes the same folder one file at a time from a
reader of named tensors (a sharded training checkpoint), never holding the whole model.
`dequantize_checkpoint` turns an official FP8/FP4 folder into a BF16 one in the same layout, one shard
at a time (the input of MindSpeed-LLM's HF -> Megatron converter).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from trex_cli.models.deepseek_v4.config import DeepseekV4Config
from trex_cli.models.deepseek_v4.quantization import dequantize, quantize_fp4, quantize_fp8_blockwise

EXPERT_STACKED = re.compile(r"^(.*\.ffn\.experts)\.(w[123])$")
EXPERT_SINGLE = re.compile(r"^(.*\.ffn\.experts)\.(\d+)\.(w[123])\.weight$")
INDEX_FILE = "model.safetensors.index.json"
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
    "tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json",
)


# ---- official <-> trex ---------------------------------------------------------------------------------


def to_official(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """trex names -> official names (experts unstacked into `experts.{e}.w{1,2,3}.weight`)."""
    official = {}
    for name, tensor in state_dict.items():
        match = EXPERT_STACKED.match(name)
        if match:
            prefix, projection = match.groups()
            for expert, matrix in enumerate(tensor.unbind(0)):
                official[f"{prefix}.{expert}.{projection}.weight"] = matrix
        else:
            official[name] = tensor
    return official


def from_official(tensors: dict[str, torch.Tensor], dtype: torch.dtype = torch.bfloat16) -> dict[str, torch.Tensor]:
    """Official names (possibly quantized) -> trex names, dequantized to `dtype`."""
    dense: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        if name.endswith(".scale") or name.endswith(".weight_scale_inv"):
            continue
        stem = name[: -len(".weight")] if name.endswith(".weight") else None
        scale = None
        if stem is not None:
            scale = tensors.get(f"{stem}.scale", tensors.get(f"{name}_scale_inv"))
        if scale is not None:
            tensor = dequantize(tensor, scale, dtype)
        dense[name] = tensor
    stacked: dict[str, dict[int, torch.Tensor]] = {}
    result = {}
    for name, tensor in dense.items():
        match = EXPERT_SINGLE.match(name)
        if match:
            prefix, expert, projection = match.groups()
            stacked.setdefault(f"{prefix}.{projection}", {})[int(expert)] = tensor
        else:
            result[name] = tensor
    for name, experts in stacked.items():
        if sorted(experts) != list(range(len(experts))):
            raise ValueError(f"checkpoint holds experts {sorted(experts)} for {name}; expected 0..{len(experts) - 1}")
        result[name] = torch.stack([experts[e] for e in range(len(experts))])
    return result


# ---- transformers <-> trex -----------------------------------------------------------------------------

# (official pattern, transformers replacement), applied in order to one name
_RENAMES = [
    (r"^embed\.weight$", "model.embed_tokens.weight"),
    (r"^head\.weight$", "lm_head.weight"),
    (r"^norm\.weight$", "model.norm.weight"),
    (r"^hc_head_(fn|base|scale)$", r"model.hc_head.hc_\1"),
    (r"^layers\.(\d+)\.attn_norm\.", r"model.layers.\1.input_layernorm."),
    (r"^layers\.(\d+)\.ffn_norm\.", r"model.layers.\1.post_attention_layernorm."),
    (r"^layers\.(\d+)\.hc_(attn|ffn)_(fn|base|scale)$", r"model.layers.\1.\2_hc.\3"),
    (r"^layers\.(\d+)\.attn\.attn_sink$", r"model.layers.\1.self_attn.sinks"),
    (r"^layers\.(\d+)\.attn\.indexer\.compressor\.", r"model.layers.\1.self_attn.compressor.indexer.@C."),
    (r"^layers\.(\d+)\.attn\.indexer\.wq_b\.", r"model.layers.\1.self_attn.compressor.indexer.q_b_proj."),
    (r"^layers\.(\d+)\.attn\.indexer\.weights_proj\.", r"model.layers.\1.self_attn.compressor.indexer.scorer.weights_proj."),
    (r"^layers\.(\d+)\.attn\.compressor\.", r"model.layers.\1.self_attn.compressor.@C."),
    (r"^layers\.(\d+)\.attn\.wq_a\.", r"model.layers.\1.self_attn.q_a_proj."),
    (r"^layers\.(\d+)\.attn\.q_norm\.", r"model.layers.\1.self_attn.q_a_norm."),
    (r"^layers\.(\d+)\.attn\.wq_b\.", r"model.layers.\1.self_attn.q_b_proj."),
    (r"^layers\.(\d+)\.attn\.wkv\.", r"model.layers.\1.self_attn.kv_proj."),
    (r"^layers\.(\d+)\.attn\.kv_norm\.", r"model.layers.\1.self_attn.kv_norm."),
    (r"^layers\.(\d+)\.attn\.wo_a\.", r"model.layers.\1.self_attn.o_a_proj."),
    (r"^layers\.(\d+)\.attn\.wo_b\.", r"model.layers.\1.self_attn.o_b_proj."),
    (r"^layers\.(\d+)\.ffn\.gate\.weight$", r"model.layers.\1.mlp.gate.weight"),
    (r"^layers\.(\d+)\.ffn\.gate\.bias$", r"model.layers.\1.mlp.gate.e_score_correction_bias"),
    (r"^layers\.(\d+)\.ffn\.gate\.tid2eid$", r"model.layers.\1.mlp.gate.tid2eid"),
    (r"^layers\.(\d+)\.ffn\.shared_experts\.w1\.", r"model.layers.\1.mlp.shared_experts.gate_proj."),
    (r"^layers\.(\d+)\.ffn\.shared_experts\.w2\.", r"model.layers.\1.mlp.shared_experts.down_proj."),
    (r"^layers\.(\d+)\.ffn\.shared_experts\.w3\.", r"model.layers.\1.mlp.shared_experts.up_proj."),
]
# compressor leaves (official -> transformers); "@C." marks where they follow
_COMPRESSOR_LEAVES = {"wkv.weight": "kv_proj.weight", "wgate.weight": "gate_proj.weight", "ape": "position_bias", "norm.weight": "kv_norm.weight"}


def official_to_transformers_name(name: str) -> str | None:
    """The transformers name of one (non-expert) official tensor; None for MTP tensors."""
    if name.startswith("mtp."):
        return None
    for pattern, replacement in _RENAMES:
        renamed, count = re.subn(pattern, replacement, name)
        if count:
            if "@C." in renamed:
                head, leaf = renamed.split("@C.")
                if leaf not in _COMPRESSOR_LEAVES:
                    raise ValueError(f"unexpected compressor tensor {name}")
                renamed = head + _COMPRESSOR_LEAVES[leaf]
            return renamed
    raise ValueError(f"no transformers name for official tensor {name!r}")


def to_transformers(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """trex names -> transformers' DeepseekV4ForCausalLM names (MTP kept under official names)."""
    result = {}
    gate_up: dict[str, dict[str, torch.Tensor]] = {}
    for name, tensor in state_dict.items():
        match = EXPERT_STACKED.match(name)
        if match:
            prefix, projection = match.groups()
            if name.startswith("mtp."):
                result.update(to_official({name: tensor}))
                continue
            target = "model." + prefix.replace(".ffn.", ".mlp.")
            if projection == "w2":
                result[f"{target}.down_proj"] = tensor
            else:
                gate_up.setdefault(target, {})[projection] = tensor
            continue
        renamed = official_to_transformers_name(name)
        result[renamed if renamed is not None else name] = tensor
    for target, parts in gate_up.items():
        result[f"{target}.gate_up_proj"] = torch.cat([parts["w1"], parts["w3"]], dim=1)
    return result


def from_transformers(tensors: dict[str, torch.Tensor], config: DeepseekV4Config) -> dict[str, torch.Tensor]:
    """transformers names -> trex names. Built from the inverse of the forward renaming over the
    names this config's model has, so every tensor is accounted for."""
    from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM

    with torch.device("meta"):
        names = list(DeepseekV4ForCausalLM(config).state_dict().keys())
    inverse = {}
    for name in names:
        if EXPERT_STACKED.match(name) or name.startswith("mtp."):
            continue
        inverse[official_to_transformers_name(name)] = name
    result: dict[str, torch.Tensor] = {}
    mtp_official = {}
    for name, tensor in tensors.items():
        if name.startswith("mtp."):
            mtp_official[name] = tensor
        elif name.endswith(".mlp.experts.gate_up_proj"):
            prefix = name[len("model.") : -len(".mlp.experts.gate_up_proj")]
            w1, w3 = tensor.chunk(2, dim=1)
            result[f"{prefix}.ffn.experts.w1"], result[f"{prefix}.ffn.experts.w3"] = w1.contiguous(), w3.contiguous()
        elif name.endswith(".mlp.experts.down_proj"):
            prefix = name[len("model.") : -len(".mlp.experts.down_proj")]
            result[f"{prefix}.ffn.experts.w2"] = tensor
        elif name in inverse:
            result[inverse[name]] = tensor
        else:
            raise ValueError(f"tensor {name!r} in the transformers checkpoint has no place in this config's model")
    result.update(from_official(mtp_official))
    return result


# ---- folders -------------------------------------------------------------------------------------------


def safetensors_files(folder: Path) -> list[Path]:
    index = folder / INDEX_FILE
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map")
        if not isinstance(weight_map, dict):
            raise ValueError(f"{index}: no 'weight_map' object; re-export the checkpoint")
        files = sorted({folder / shard for shard in weight_map.values()})
    else:
        files = sorted(folder.glob("*.safetensors"))
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"checkpoint shards listed in {index} are missing: {missing}")
    if not files:
        raise FileNotFoundError(f"{folder} holds no *.safetensors files: not a model folder")
    return files


# floating dtypes checked for NaN / Inf; quantized codes (fp8, packed fp4) and their scales are not
_CHECKED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def read_tensors(folder: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of a model folder; a damaged file or a NaN / Inf weight is a clear error naming the
    file (and the tensor), where it would otherwise be a traceback or garbage at sampling time."""
    tensors = {}
    for file in safetensors_files(Path(folder)):
        try:
            with safe_open(str(file), framework="pt") as handle:
                keys = list(handle.keys())
                for key in keys:
                    tensors[key] = handle.get_tensor(key)
        except SafetensorError as error:
            raise ValueError(
                f"{file}: not a readable safetensors file ({error}); it is truncated or damaged: copy or "
                "export the checkpoint again"
            ) from None
        for key in keys:
            tensor = tensors[key]
            if tensor.dtype in _CHECKED_DTYPES and not bool(torch.isfinite(tensor).all()):
                raise ValueError(
                    f"{file}: tensor {key!r} holds NaN or Inf values; the checkpoint is damaged or was saved "
                    "after training diverged: use an earlier checkpoint"
                )
    return tensors


def detect_layout(names) -> str:
    """'transformers' (keys under model. / lm_head.) or 'official'."""
    return "transformers" if any(n.startswith(("model.", "lm_head.")) for n in names) else "official"


_FLOAT32_TENSORS = re.compile(r"(hc_\w+|\.ape|attn_sink|gate\.bias|norm\.weight)$")


def _storage_dtype(name: str, tensor: torch.Tensor, dtype: torch.dtype) -> torch.dtype:
    if not tensor.is_floating_point():
        return tensor.dtype
    return torch.float32 if _FLOAT32_TENSORS.search(name) else dtype


def load_state_dict(folder: str | Path, config: DeepseekV4Config, dtype: torch.dtype = torch.bfloat16) -> dict[str, torch.Tensor]:
    """trex state dict from a checkpoint folder in either layout (quantized weights dequantized)."""
    tensors = read_tensors(folder)
    if detect_layout(tensors) == "transformers":
        state = from_transformers(tensors, config)
    else:
        state = from_official(tensors, dtype)
    return {name: t.to(_storage_dtype(name, t, dtype)) for name, t in state.items()}


def load_model(folder: str | Path, dtype: torch.dtype = torch.bfloat16, device: str | torch.device = "cpu", strict_mtp: bool = False):
    """Build DeepseekV4ForCausalLM from a model folder (config.json + safetensors, either layout).
    A folder without MTP weights (transformers never saves them) keeps a freshly initialized MTP
    block, with a warning, unless strict_mtp."""
    from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM

    folder = Path(folder)
    config = DeepseekV4Config.from_model_dir(folder)
    state = load_state_dict(folder, config, dtype)
    model = DeepseekV4ForCausalLM(config)
    model.to(dtype)
    _keep_float32(model)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    missing_outside_mtp = [n for n in missing if not n.startswith("mtp.")]
    if unexpected:
        raise ValueError(f"{folder}: tensors that this config's model does not have: {unexpected[:5]} ...")
    if missing_outside_mtp or (missing and strict_mtp):
        raise ValueError(f"{folder}: checkpoint lacks {len(missing)} tensors, e.g. {missing[:5]}")
    if missing:
        warnings.warn(f"{folder} has no MTP weights; the MTP block stays randomly initialized", stacklevel=2)
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise ValueError(f"{folder}: {name} has shape {tuple(tensor.shape)}, the config needs {tuple(expected[name].shape)}")
    model.load_state_dict({n: t.to(expected[n].dtype) for n, t in state.items()}, strict=False)
    return model.to(device)


def _keep_float32(model: torch.nn.Module) -> None:
    """V4 keeps the mHC parameters, sinks, compressor position biases, norms and routing biases in
    float32 whatever the dtype of the matrices."""
    for name, parameter in model.named_parameters():
        if _FLOAT32_TENSORS.search(name):
            parameter.data = parameter.data.float()
    for name, buffer in model.named_buffers():
        if _FLOAT32_TENSORS.search(name):
            buffer.data = buffer.data.float()


def keep_float32(model: torch.nn.Module) -> torch.nn.Module:
    _keep_float32(model)
    return model


# ---- writing -------------------------------------------------------------------------------------------


def _group_by_bytes(sizes: dict[str, int], max_shard_bytes: int) -> list[list[str]]:
    """Names in sorted order, cut into runs of at most `max_shard_bytes` (one bigger tensor alone)."""
    groups: list[list[str]] = [[]]
    size = 0
    for name in sorted(sizes):
        if groups[-1] and size + sizes[name] > max_shard_bytes:
            groups.append([])
            size = 0
        groups[-1].append(name)
        size += sizes[name]
    return groups


def _write_grouped(groups: list[list[str]], produce: Callable[[list[str]], dict[str, torch.Tensor]], out_dir: Path) -> None:
    """One safetensors file per group, holding what `produce(group)` returns, then the index; each
    file's tensors are let go before the next group is produced."""
    weight_map, total = {}, 0
    for number, names in enumerate(groups, start=1):
        file_name = f"model-{number:05d}-of-{len(groups):05d}.safetensors"
        shard = {name: tensor.contiguous() for name, tensor in produce(names).items()}
        save_file(shard, str(out_dir / file_name), metadata={"format": "pt"})
        for name, tensor in shard.items():
            weight_map[name] = file_name
            total += tensor.numel() * tensor.element_size()
        del shard
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out_dir / INDEX_FILE).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def _write_shards(tensors: dict[str, torch.Tensor], out_dir: Path, max_shard_bytes: int) -> None:
    sizes = {name: tensor.numel() * tensor.element_size() for name, tensor in tensors.items()}
    _write_grouped(_group_by_bytes(sizes, max_shard_bytes), lambda names: {n: tensors[n] for n in names}, out_dir)


def _write_configs(config: DeepseekV4Config, out_dir: Path, dtype: torch.dtype, quantized: bool = False) -> None:
    data = config.to_hf_dict()
    data["torch_dtype"] = str(dtype).removeprefix("torch.")
    if quantized:
        data["quantization_config"] = {
            "quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0", "weight_block_size": [128, 128],
            "activation_scheme": "dynamic", "expert_dtype": "fp4",
        }
    (out_dir / "config.json").write_text(json.dumps(data, indent=2) + "\n")
    generation = {"bos_token_id": config.bos_token_id, "eos_token_id": config.eos_token_id, "do_sample": False}
    if config.pad_token_id is not None:
        generation["pad_token_id"] = config.pad_token_id
    (out_dir / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")


def _copy_tokenizer(tokenizer_dir: str | Path | None, out_dir: Path) -> list[str]:
    if tokenizer_dir is None:
        return []
    source = Path(tokenizer_dir)
    copied = [name for name in TOKENIZER_FILES if (source / name).is_file()]
    if not copied:
        raise FileNotFoundError(f"{source} holds no tokenizer files (looked for {', '.join(TOKENIZER_FILES)})")
    for name in copied:
        shutil.copyfile(source / name, out_dir / name)
    return copied


def export_hf(
    model,
    out_dir: str | Path,
    tokenizer_dir: str | Path | None = None,
    dtype: torch.dtype = torch.bfloat16,
    max_shard_bytes: int = 4 << 30,
) -> Path:
    """Write `model` as an official-layout folder: sharded safetensors + index, config.json,
    generation_config.json and the tokenizer files of `tokenizer_dir`."""
    state = model.state_dict()
    return export_hf_by_shard(
        model.config, state, lambda names: {n: state[n].detach().cpu() for n in names}, out_dir,
        tokenizer_dir=tokenizer_dir, dtype=dtype, max_shard_bytes=max_shard_bytes,
    )


def export_hf_by_shard(
    config: DeepseekV4Config,
    specs: dict[str, torch.Tensor],
    read: Callable[[list[str]], dict[str, torch.Tensor]],
    out_dir: str | Path,
    tokenizer_dir: str | Path | None = None,
    dtype: torch.dtype = torch.bfloat16,
    max_shard_bytes: int = 4 << 30,
) -> Path:
    """`export_hf` one output file at a time, for models no process can hold whole: `specs` gives every
    trex tensor's shape and dtype (meta tensors will do), `read(names)` returns just those tensors,
    and each file is converted, written and let go before the next is read. A stacked expert tensor
    stays in one file (unstacked there into its per-expert tensors)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = {
        name: spec.numel() * torch.empty((), dtype=_storage_dtype(name, spec, dtype)).element_size()
        for name, spec in specs.items()
    }

    def convert(names: list[str]) -> dict[str, torch.Tensor]:
        return {n: t.to(_storage_dtype(n, t, dtype)) for n, t in to_official(read(names)).items()}

    _write_grouped(_group_by_bytes(sizes, max_shard_bytes), convert, out_dir)
    _write_configs(config, out_dir, dtype)
    _copy_tokenizer(tokenizer_dir, out_dir)
    return out_dir


def export_transformers_layout(model, out_dir: str | Path, dtype: torch.dtype = torch.bfloat16, max_shard_bytes: int = 4 << 30) -> Path:
    """Write `model` in transformers' DeepseekV4ForCausalLM layout (MTP under official names)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {n: t.detach().cpu().to(_storage_dtype(n, t, dtype)) for n, t in model.state_dict().items()}
    tensors = to_transformers(state)
    _write_shards(tensors, out_dir, max_shard_bytes)
    _write_configs(model.config, out_dir, dtype)
    return out_dir


_FP8_LINEARS = re.compile(
    r"(attn\.(wq_a|wq_b|wkv|wo_a|wo_b)|attn\.indexer\.wq_b|shared_experts\.w[123]|e_proj|h_proj)\.weight$"
)


def export_official_quantized(model, out_dir: str | Path, max_shard_bytes: int = 4 << 30) -> Path:
    """Write `model` as the released checkpoints are stored: routed experts FP4 (packed, one ue8m0
    scale per 32 values), the attention / shared-expert / MTP projections FP8 e4m3 with 128x128 ue8m0
    block scales (`<name>.scale`), everything else BF16 or float32."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {n: t.detach().cpu() for n, t in model.state_dict().items()}
    tensors = {}
    for name, tensor in to_official(state).items():
        stem = name[: -len(".weight")]
        if EXPERT_SINGLE.match(name):
            tensors[name], tensors[f"{stem}.scale"] = quantize_fp4(tensor)
        elif _FP8_LINEARS.search(name):
            tensors[name], tensors[f"{stem}.scale"] = quantize_fp8_blockwise(tensor)
        else:
            tensors[name] = tensor.to(_storage_dtype(name, tensor, torch.bfloat16))
    _write_shards(tensors, out_dir, max_shard_bytes)
    _write_configs(model.config, out_dir, torch.bfloat16, quantized=True)
    return out_dir


# ---- official FP8/FP4 -> BF16, shard by shard ---------------------------------------------------


def checkpoint_is_quantized(folder: Path) -> bool:
    """Whether an official checkpoint folder still holds FP8/FP4 weights (a quantization_config or scale tensors)."""
    config = folder / "config.json"
    if config.is_file() and json.loads(config.read_text()).get("quantization_config"):
        return True
    for file in sorted(folder.glob("*.safetensors"))[:1]:
        with safe_open(str(file), framework="pt") as handle:
            return any(key.endswith(".scale") or key.endswith("_scale_inv") for key in handle.keys())
    return False


def dequantize_checkpoint(source: Path, target: Path) -> dict[str, int]:
    """Official FP8/FP4 checkpoint -> BF16, one shard at a time (memory bounded by a shard), with the
    model package's dequantizer. Names stay official; scales are dropped; tensors V4 keeps in fp32
    stay fp32; config.json loses its quantization_config; tokenizer files are copied."""
    from trex_cli.artifacts import write_json_atomic

    source, target = Path(source), Path(target)
    index_path = source / "model.safetensors.index.json"
    if index_path.is_file():
        weight_map = json.loads(index_path.read_text())["weight_map"]
    else:
        weight_map = {}
        for file in sorted(source.glob("*.safetensors")):
            with safe_open(str(file), framework="pt") as handle:
                weight_map.update({key: file.name for key in handle.keys()})
    if not weight_map:
        raise FileNotFoundError(f"{source} holds no safetensors shards: not a checkpoint folder")
    target.mkdir(parents=True, exist_ok=True)
    handles: dict[str, Any] = {}

    def tensor(name: str):
        file = weight_map[name]
        if file not in handles:
            handles[file] = safe_open(str(source / file), framework="pt")
        return handles[file].get_tensor(name)

    new_map: dict[str, str] = {}
    counts = {"tensors": 0, "dequantized": 0, "shards": 0, "resumed_shards": 0}
    by_file: dict[str, list[str]] = {}
    for name, file in weight_map.items():
        by_file.setdefault(file, []).append(name)
    for file in sorted(by_file):
        if (target / file).is_file():
            # written by an interrupted earlier run (shards land by atomic rename): keep it
            with safe_open(str(target / file), framework="pt") as handle:
                new_map.update({key: file for key in handle.keys()})
            counts["resumed_shards"] += 1
            continue
        shard = {}
        for name in sorted(by_file[file]):
            if name.endswith(".scale") or name.endswith("_scale_inv"):
                continue
            value = tensor(name)
            stem = name[: -len(".weight")] if name.endswith(".weight") else None
            scale_name = next((s for s in (f"{stem}.scale", f"{name}_scale_inv") if stem and s in weight_map), None)
            if scale_name:
                value = dequantize(value, tensor(scale_name), torch.bfloat16)
                counts["dequantized"] += 1
            else:
                # norms, hc mixers, sinks, ape and the router bias stay fp32, as the model keeps them
                value = value.to(_storage_dtype(name, value, torch.bfloat16))
            shard[name] = value.contiguous()
            new_map[name] = file
            counts["tensors"] += 1
        partial = target / f".{file}.tmp"
        save_file(shard, str(partial), metadata={"format": "pt"})
        os.replace(partial, target / file)
        counts["shards"] += 1
        handles.pop(file, None)  # keep at most the scale shards open
    write_json_atomic(target / "model.safetensors.index.json",
                      {"metadata": {"dequantized_from": str(source), "tensors": len(new_map)},
                       "weight_map": new_map})
    config_path = source / "config.json"
    if config_path.is_file():
        config = json.loads(config_path.read_text())
        config.pop("quantization_config", None)
        config["torch_dtype"] = "bfloat16"
        write_json_atomic(target / "config.json", config)
    for extra in source.iterdir():
        if extra.is_file() and extra.suffix in (".json", ".model", ".txt", ".jinja") and not (target / extra.name).exists():
            shutil.copyfile(extra, target / extra.name)
    return counts
