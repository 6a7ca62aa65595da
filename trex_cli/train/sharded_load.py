"""Load a checkpoint into a parallelized model by reading only the slices this rank owns.

The model comes from the meta device (`meta_init.py`), already split by TP, EP, pipeline stages and
FSDP2: every parameter is a DTensor (or a plain tensor this rank holds whole) whose placements say
which block of the full tensor lives here. `load_owned_shards` gives the model storage
(`to_empty`), then fills each local block straight from the safetensors files through
`safe_open(...).get_slice`, which reads only the requested rows and columns of a memory-mapped file. No
rank builds the full model or even a whole tensor it does not own: a routed expert stack is read
expert by expert, only the experts of this rank's slice, and only its rows of them. A checkpoint
without the MTP block gives that block the layout-independent random init (`initialization.py`).

Both checkpoint layouts the adapter reads (`state_dict_adapter.py`) are understood by name:

- official: one tensor per expert (`experts.{e}.w1.weight`); FP8 weights (128 x 128 block scales)
  and FP4 experts (two values per byte, a scale per 32 inputs) are read on whole scale blocks
  around the slice, dequantized (`quantization.py`) and trimmed;
- transformers: renamed tensors, w1 and w3 of all experts packed as `gate_up_proj` [E, 2 inter, hidden]
  (w3's rows follow w1's), w2 as `down_proj`, the MTP block under its official names.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn

from trex_cli.console import warn
from trex_cli.models.deepseek_v4.initialization import (
    Block,
    checkpointed_tensors,
    initialize,
    local_tensor,
    owned_block,
)
from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
from trex_cli.models.deepseek_v4.quantization import FP4_GROUP, FP8_BLOCK, dequantize
from trex_cli.models.deepseek_v4.state_dict_adapter import (
    EXPERT_SINGLE,
    EXPERT_STACKED,
    INDEX_FILE,
    detect_layout,
    official_to_transformers_name,
    safetensors_files,
)


class CheckpointSlices:
    """Reads blocks of a checkpoint folder's tensors, addressed by trex name and the full tensor's
    coordinates, without reading anything else. `bytes_read` counts the stored bytes read for each trex
    name (so a test can hold that no rank ever reads a whole expert stack)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.file_of: dict[str, Path] = {}
        for file in safetensors_files(self.folder):
            with safe_open(str(file), framework="pt") as handle:
                for key in handle.keys():
                    self.file_of[key] = file
        self.layout = detect_layout(self.file_of)
        self._handles: dict[Path, object] = {}
        self.bytes_read: dict[str, int] = {}
        self._reading = ""

    def close(self) -> None:
        self._handles.clear()

    def _slice_of(self, key: str):
        file = self.file_of.get(key)
        if file is None:
            where = INDEX_FILE if (self.folder / INDEX_FILE).is_file() else "its *.safetensors files"
            raise ValueError(f"{self.folder}: {where} hold no tensor {key!r}; is it a checkpoint of this model?")
        if file not in self._handles:
            self._handles[file] = safe_open(str(file), framework="pt")
        return self._handles[file].get_slice(key)

    def _read(self, key: str, block: Block) -> torch.Tensor:
        tensor = self._slice_of(key)[block]
        self.bytes_read[self._reading] = self.bytes_read.get(self._reading, 0) + tensor.numel() * tensor.element_size()
        return tensor

    def unexpected_keys(self, shapes: dict[str, tuple[int, ...]]) -> list[str]:
        """The stored tensors (scales aside) that feed none of the trex tensors `shapes` names (a whole
        model's, with their full shapes): the checkpoint holds another model than its config.json says."""
        inverse = {}
        if self.layout == "transformers":
            inverse = {
                official_to_transformers_name(name): name
                for name in shapes if not name.startswith("mtp.") and not EXPERT_STACKED.match(name)
            }
        unexpected = []
        for key in self.file_of:
            if key.endswith((".scale", ".weight_scale_inv")):
                continue
            if self.layout == "official" or key.startswith("mtp."):
                single = EXPERT_SINGLE.match(key)
                name = f"{single.group(1)}.{single.group(3)}" if single else key
                if single and name in shapes and int(single.group(2)) >= shapes[name][0]:
                    name = None  # an expert index beyond the model's experts
            elif key.endswith((".mlp.experts.gate_up_proj", ".mlp.experts.down_proj")):
                prefix = key[len("model.") :].rsplit(".mlp.experts.", 1)[0]
                name = f"{prefix}.ffn.experts.{'w2' if key.endswith('down_proj') else 'w1'}"
            else:
                name = inverse.get(key)
            if name not in shapes:
                unexpected.append(key)
        return sorted(unexpected)

    def shape(self, key: str) -> list[int]:
        return list(self._slice_of(key).get_shape())

    # ---- one source tensor ---------------------------------------------------------------------------

    def _scale_key(self, key: str) -> str | None:
        if not key.endswith(".weight"):
            return None
        for candidate in (key[: -len(".weight")] + ".scale", key + "_scale_inv"):
            if candidate in self.file_of:
                return candidate
        return None

    def _read_source(self, key: str, block: Block) -> torch.Tensor:
        """A block of one stored tensor, dequantized when the file holds it with a scale."""
        scale_key = self._scale_key(key)
        if scale_key is None:
            return self._read(key, block)
        rows, cols = block
        stored_dtype = self._slice_of(key).get_dtype()
        if stored_dtype.startswith("F8"):
            # 128 x 128 blocks share a scale: read the whole blocks around the slice, then trim
            out_features, in_features = self.shape(key)
            r0, r1 = rows.start // FP8_BLOCK, -(-rows.stop // FP8_BLOCK)
            c0, c1 = cols.start // FP8_BLOCK, -(-cols.stop // FP8_BLOCK)
            values = self._read(key, (slice(r0 * FP8_BLOCK, min(r1 * FP8_BLOCK, out_features)),
                                      slice(c0 * FP8_BLOCK, min(c1 * FP8_BLOCK, in_features))))
            scale = self._read(scale_key, (slice(r0, r1), slice(c0, c1)))
            full = dequantize(values, scale, torch.float32)
            return full[rows.start - r0 * FP8_BLOCK : rows.stop - r0 * FP8_BLOCK,
                        cols.start - c0 * FP8_BLOCK : cols.stop - c0 * FP8_BLOCK]
        # FP4: two values per stored byte along the input dimension, one scale per 32 of them
        g0, g1 = cols.start // FP4_GROUP, -(-cols.stop // FP4_GROUP)
        packed = self._read(key, (rows, slice(g0 * FP4_GROUP // 2, g1 * FP4_GROUP // 2)))
        scale = self._read(scale_key, (rows, slice(g0, g1)))
        full = dequantize(packed, scale, torch.float32)
        return full[:, cols.start - g0 * FP4_GROUP : cols.stop - g0 * FP4_GROUP]

    # ---- by trex name ----------------------------------------------------------------------------------

    def read(self, name: str, block: Block) -> torch.Tensor:
        """The block `block` of the trex tensor `name` (its full coordinates)."""
        self._reading = name
        expert = EXPERT_STACKED.match(name)
        if expert is None:
            key = name
            if self.layout == "transformers" and not name.startswith("mtp."):
                key = official_to_transformers_name(name)
            return self._read_source(key, block)
        prefix, projection = expert.groups()
        experts, rest = block[0], block[1:]
        if self.layout == "official" or name.startswith("mtp."):
            # one stored tensor per expert: read only this rank's experts, only its rows of them
            return torch.stack([
                self._read_source(f"{prefix}.{index}.{projection}.weight", rest)
                for index in range(experts.start, experts.stop)
            ])
        target = "model." + prefix.replace(".ffn.", ".mlp.")
        if projection == "w2":
            return self._read(f"{target}.down_proj", block)
        rows, cols = rest
        if projection == "w3":  # w3's rows follow w1's in gate_up_proj
            inter = self.shape(f"{target}.gate_up_proj")[1] // 2
            rows = slice(rows.start + inter, rows.stop + inter)
        return self._read(f"{target}.gate_up_proj", (experts, rows, cols))


@torch.no_grad()
def load_owned_shards(model: nn.Module, folder: str | Path, device: torch.device, seed: int = 0) -> CheckpointSlices:
    """Give a meta-device, parallelized `model` storage on `device` and fill every parameter and
    checkpointed buffer this rank holds from `folder`, which must hold exactly this model's tensors
    (every rank checks the names of the whole model, not only its part). A checkpoint without the MTP
    block (transformers' own exports drop it) leaves this rank's part of it to the random init of
    `seed` (`initialization.py`: the values any layout would draw), with a warning. Returns the reader
    (its statistics)."""
    model.to_empty(device=device)
    model.init_computed_buffers()
    reader = CheckpointSlices(folder)
    with torch.device("meta"):
        whole = DeepseekV4ForCausalLM(model.config).state_dict()
    unexpected = reader.unexpected_keys({name: tuple(tensor.shape) for name, tensor in whole.items()})
    if unexpected:
        raise ValueError(
            f"{folder}: tensors this model does not have, e.g. {unexpected[:3]}; its config.json does not "
            "describe these weights"
        )
    targets = checkpointed_tensors(model)
    if not any(key.startswith("mtp.") for key in reader.file_of) and any(n.startswith("mtp.") for n, _ in targets):
        warn(f"{folder} has no MTP weights: the MTP block starts from random init")
        initialize(model, seed, include=lambda name: name.startswith("mtp."))
        targets = [(name, tensor) for name, tensor in targets if not name.startswith("mtp.")]
    for name, tensor in targets:
        block = owned_block(tensor)
        values = reader.read(name, block)
        local = local_tensor(tensor)
        if tuple(values.shape) != tuple(local.shape):
            raise ValueError(
                f"{folder}: {name} block {[(s.start, s.stop) for s in block]} reads as {tuple(values.shape)}, the "
                f"model holds {tuple(local.shape)} there; the checkpoint's config.json does not match this model"
            )
        local.copy_(values)
    reader.close()
    return reader
