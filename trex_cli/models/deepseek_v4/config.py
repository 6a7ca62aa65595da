"""DeepSeek-V4 configuration: one typed dataclass with the Hugging Face `config.json` field names.

A config can come from a flavor (`tiny` for tests and the CPU demo, `small` for CPU benchmarks, and the
released `flash` and `pro` shapes), from a model folder's `config.json` (the official layout or the one
transformers writes), or from the recipe's `[model]` table (`ModelSection`). `to_hf_dict()` writes a
`config.json` that both the official tooling and transformers' `DeepseekV4Config` read: the per-layer
`compress_ratios` (one entry per layer plus one per MTP layer) together with transformers' own
`layer_types` / `compress_rates` / `mlp_layer_types` / nested `rope_parameters`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

SLIDING = "sliding_attention"
CSA = "compressed_sparse_attention"
HCA = "heavily_compressed_attention"


@dataclasses.dataclass
class DeepseekV4Config:
    """Shape and hyper-parameters of a DeepSeek-V4 model (defaults: V4-Flash)."""

    vocab_size: int = 129280
    hidden_size: int = 4096
    num_hidden_layers: int = 43
    num_attention_heads: int = 64
    num_key_value_heads: int = 1
    head_dim: int = 512
    qk_rope_head_dim: int = 64
    q_lora_rank: int = 1024
    o_groups: int = 8
    o_lora_rank: int = 1024
    moe_intermediate_size: int = 2048
    n_routed_experts: int = 256
    n_shared_experts: int = 1
    num_experts_per_tok: int = 6
    scoring_func: str = "sqrtsoftplus"
    topk_method: str = "noaux_tc"
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.5
    num_hash_layers: int = 3
    # one entry per layer, then one per MTP layer: 0 sliding window only, compress_rate_csa = CSA,
    # compress_rate_hca = HCA. Empty means the transformers default (2 HCA, then HCA/CSA alternating).
    compress_ratios: list[int] = dataclasses.field(default_factory=list)
    compress_rate_csa: int = 4
    compress_rate_hca: int = 128
    sliding_window: int = 128
    rope_theta: float = 10000.0
    compress_rope_theta: float = 160000.0
    # YaRN for the compressed layers; None = plain RoPE there too
    rope_scaling: dict[str, Any] | None = dataclasses.field(
        default_factory=lambda: {
            "type": "yarn",
            "factor": 16.0,
            "original_max_position_embeddings": 65536,
            "beta_fast": 32,
            "beta_slow": 1,
        }
    )
    max_position_embeddings: int = 1048576
    index_n_heads: int = 64
    index_head_dim: int = 128
    index_topk: int = 512
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1e-6
    swiglu_limit: float = 10.0
    num_nextn_predict_layers: int = 1
    rms_norm_eps: float = 1e-6
    initializer_range: float = 0.02
    router_aux_loss_coef: float = 0.001
    tie_word_embeddings: bool = False
    bos_token_id: int | None = 0
    eos_token_id: int | None = 1
    pad_token_id: int | None = None
    torch_dtype: str = "bfloat16"

    def __post_init__(self) -> None:
        if not self.compress_ratios:
            hca, csa = self.compress_rate_hca, self.compress_rate_csa
            ratios = [hca] * min(self.num_hidden_layers, 2)
            ratios += [csa if i % 2 else hca for i in range(max(self.num_hidden_layers - 2, 0))]
            self.compress_ratios = ratios + [0] * self.num_nextn_predict_layers
        if len(self.compress_ratios) == self.num_hidden_layers:
            # official configs without an MTP entry: the MTP block is a sliding-window block
            self.compress_ratios = list(self.compress_ratios) + [0] * self.num_nextn_predict_layers
        self.validate()

    # ---- checks ----------------------------------------------------------------------------------
    def validate(self) -> None:
        total = self.num_hidden_layers + self.num_nextn_predict_layers
        problems = []
        if len(self.compress_ratios) != total:
            problems.append(
                f"compress_ratios has {len(self.compress_ratios)} entries; it needs one per layer plus one "
                f"per MTP layer ({total})"
            )
        allowed = {0, self.compress_rate_csa, self.compress_rate_hca}
        bad = sorted({r for r in self.compress_ratios if r not in allowed})
        if bad:
            problems.append(f"compress_ratios holds {bad}; allowed values are {sorted(allowed)}")
        if self.num_attention_heads % self.o_groups:
            problems.append(f"num_attention_heads {self.num_attention_heads} is not a multiple of o_groups {self.o_groups}")
        if self.qk_rope_head_dim > min(self.head_dim, self.index_head_dim) or self.qk_rope_head_dim % 2:
            problems.append("qk_rope_head_dim must be even and at most head_dim and index_head_dim")
        if self.num_experts_per_tok > self.n_routed_experts:
            problems.append("num_experts_per_tok exceeds n_routed_experts")
        if self.num_hash_layers > self.num_hidden_layers:
            problems.append("num_hash_layers exceeds num_hidden_layers")
        if self.num_key_value_heads != 1:
            problems.append("DeepSeek-V4 uses one shared KV head: set num_key_value_heads = 1")
        if self.scoring_func != "sqrtsoftplus":
            problems.append(f"scoring_func {self.scoring_func!r} is not supported; use 'sqrtsoftplus'")
        if problems:
            raise ValueError("invalid DeepSeek-V4 config: " + "; ".join(problems))

    # ---- derived ---------------------------------------------------------------------------------
    def layer_type(self, layer_index: int) -> str:
        """Attention type of block `layer_index` (MTP blocks follow the main layers)."""
        ratio = self.compress_ratios[layer_index]
        if ratio == 0:
            return SLIDING
        return CSA if ratio == self.compress_rate_csa else HCA

    @property
    def layer_types(self) -> list[str]:
        return [self.layer_type(i) for i in range(self.num_hidden_layers)]

    def is_hash_layer(self, layer_index: int) -> bool:
        return layer_index < self.num_hash_layers

    @property
    def yarn(self) -> dict[str, Any] | None:
        scaling = self.rope_scaling
        if not scaling:
            return None
        kind = scaling.get("type", scaling.get("rope_type", "default"))
        return scaling if kind == "yarn" else None

    # ---- (de)serialisation -----------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "config") -> DeepseekV4Config:
        """Read the official or the transformers form of config.json (unknown keys are ignored: they
        belong to other tools, e.g. `quantization_config`, `architectures`)."""
        data = dict(data)
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        # transformers' form
        rates = data.get("compress_rates") or {}
        if CSA in rates:
            kwargs["compress_rate_csa"] = int(rates[CSA])
        if HCA in rates:
            kwargs["compress_rate_hca"] = int(rates[HCA])
        for legacy, field in (("compress_rate_csa", "compress_rate_csa"), ("compress_rate_hca", "compress_rate_hca")):
            if legacy in data:
                kwargs[field] = int(data[legacy])
        if "partial_rotary_factor" in data and "qk_rope_head_dim" not in data and data["partial_rotary_factor"]:
            kwargs["qk_rope_head_dim"] = int(data.get("head_dim", cls.head_dim) * data["partial_rotary_factor"])
        if "mlp_layer_types" in data and "num_hash_layers" not in data and data["mlp_layer_types"]:
            kwargs["num_hash_layers"] = sum(1 for t in data["mlp_layer_types"] if t == "hash_moe")
        rope = data.get("rope_parameters")
        if isinstance(rope, dict) and isinstance(rope.get("compress"), dict) and "rope_scaling" not in data:
            compress = rope["compress"]
            kwargs["compress_rope_theta"] = compress.get("rope_theta", cls.compress_rope_theta)
            if isinstance(rope.get("main"), dict):
                kwargs["rope_theta"] = rope["main"].get("rope_theta", cls.rope_theta)
            if compress.get("rope_type") == "yarn":
                kwargs["rope_scaling"] = {
                    "type": "yarn",
                    **{k: compress[k] for k in ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow") if k in compress},
                }
            else:
                kwargs["rope_scaling"] = None
        if isinstance(data.get("eos_token_id"), list):
            data["eos_token_id"] = data["eos_token_id"][0]
        if "dtype" in data and "torch_dtype" not in data:
            data["torch_dtype"] = data["dtype"]
        for key, value in data.items():
            if key in names and key not in kwargs:
                kwargs[key] = value
        if "compress_ratios" not in data and data.get("layer_types"):
            csa = kwargs.get("compress_rate_csa", cls.compress_rate_csa)
            hca = kwargs.get("compress_rate_hca", cls.compress_rate_hca)
            to_ratio = {SLIDING: 0, CSA: csa, HCA: hca}
            kwargs["compress_ratios"] = [to_ratio[t] for t in data["layer_types"]]
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: {error}") from None

    @classmethod
    def from_model_dir(cls, path: str | Path) -> DeepseekV4Config:
        config_path = Path(path) / "config.json"
        if not config_path.is_file():
            raise FileNotFoundError(f"{config_path} not found: a model folder needs its config.json")
        return cls.from_dict(json.loads(config_path.read_text()), where=str(config_path))

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(dataclasses.asdict(self))

    def to_hf_dict(self) -> dict[str, Any]:
        """config.json content read by the official tooling and by transformers' DeepseekV4Config."""
        data = self.to_dict()
        data.update(
            architectures=["DeepseekV4ForCausalLM"],
            model_type="deepseek_v4",
            layer_types=self.layer_types,
            mlp_layer_types=["hash_moe" if self.is_hash_layer(i) else "moe" for i in range(self.num_hidden_layers)],
            compress_rates={CSA: self.compress_rate_csa, HCA: self.compress_rate_hca},
            partial_rotary_factor=self.qk_rope_head_dim / self.head_dim,
        )
        main = {"rope_type": "default", "rope_theta": self.rope_theta, "partial_rotary_factor": self.qk_rope_head_dim / self.head_dim}
        compress: dict[str, Any] = {"rope_type": "default", "rope_theta": self.compress_rope_theta,
                                    "partial_rotary_factor": self.qk_rope_head_dim / self.head_dim}
        if self.yarn:
            compress.update({k: v for k, v in self.yarn.items() if k not in ("type", "rope_type")})
            compress.update(rope_type="yarn", attention_factor=1.0)
        data["rope_parameters"] = {"main": main, "compress": compress}
        # transformers reads the nested rope_parameters; the flat rope_scaling stays for the official code
        for key in ("compress_rate_csa", "compress_rate_hca"):
            data.pop(key)
        return data

    def replace(self, **changes: Any) -> DeepseekV4Config:
        data = self.to_dict()
        unknown = sorted(set(changes) - set(data))
        if unknown:
            raise ValueError(f"unknown DeepSeek-V4 config keys {unknown}; see trex_cli/models/deepseek_v4/config.py")
        if "num_hidden_layers" in changes and "compress_ratios" not in changes:
            data["compress_ratios"] = []
        elif "num_nextn_predict_layers" in changes and "compress_ratios" not in changes:
            layers = self.compress_ratios[: self.num_hidden_layers]
            mtp = self.compress_ratios[self.num_hidden_layers :] + [0] * changes["num_nextn_predict_layers"]
            data["compress_ratios"] = layers + mtp[: changes["num_nextn_predict_layers"]]
        data.update(changes)
        return DeepseekV4Config(**data)


def _alternating(count: int, first: int, second: int) -> list[int]:
    return [first if i % 2 == 0 else second for i in range(count)]


def _tiny() -> DeepseekV4Config:
    # every feature on at CPU-test size: sliding, CSA and HCA blocks, hash layers, YaRN, mHC, MTP.
    # 8 indexer heads (not 2): with very few heads, whole rows of indexer scores are relu's exact 0
    # and the top-k choice among equal scores would decide the outputs
    return DeepseekV4Config(
        vocab_size=512, hidden_size=64, num_hidden_layers=5, num_attention_heads=4, head_dim=32,
        qk_rope_head_dim=16, q_lora_rank=32, o_groups=2, o_lora_rank=32, moe_intermediate_size=32,
        n_routed_experts=8, num_experts_per_tok=2, num_hash_layers=2, routed_scaling_factor=1.5,
        compress_ratios=[0, 4, 16, 4, 16, 4], compress_rate_csa=4, compress_rate_hca=16, sliding_window=16,
        rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024, "beta_fast": 32, "beta_slow": 1},
        max_position_embeddings=4096, index_n_heads=8, index_head_dim=32, index_topk=4,
    )


def _small() -> DeepseekV4Config:
    # issue 4: exactly this shape, other fields as transformers' DeepseekV4Config defaults
    return DeepseekV4Config(
        vocab_size=8192, hidden_size=512, num_hidden_layers=6, num_attention_heads=8, head_dim=128,
        qk_rope_head_dim=64, q_lora_rank=256, o_groups=2, o_lora_rank=256, moe_intermediate_size=512,
        n_routed_experts=16, num_experts_per_tok=2, n_shared_experts=1, num_hash_layers=3,
        index_n_heads=4, index_head_dim=64, index_topk=64, sliding_window=128,
        compress_rate_csa=4, compress_rate_hca=32, num_nextn_predict_layers=1, hc_mult=4,
    )


def _flash() -> DeepseekV4Config:
    # the released config.json lists 44 ratios: [0, 0], then 4, 128 alternating up to layer 42 (a 4),
    # then 0 for the MTP layer (sliding window only). Pro's MTP entry follows the same rule.
    return DeepseekV4Config(compress_ratios=[0, 0] + _alternating(41, 4, 128) + [0])


def _pro() -> DeepseekV4Config:
    return DeepseekV4Config(
        hidden_size=7168, num_hidden_layers=61, num_attention_heads=128, q_lora_rank=1536, o_groups=16,
        moe_intermediate_size=3072, n_routed_experts=384, index_topk=1024, routed_scaling_factor=2.5,
        compress_ratios=[128, 128] + _alternating(59, 4, 128) + [0],
    )


FLAVORS = {"tiny": _tiny, "small": _small, "flash": _flash, "pro": _pro}


def get_flavor(name: str) -> DeepseekV4Config:
    if name not in FLAVORS:
        raise ValueError(f"unknown model flavor {name!r}; use one of {', '.join(FLAVORS)}")
    return FLAVORS[name]()


@dataclasses.dataclass
class ModelSection:
    """The recipe's `[model]` table: which DeepSeek-V4 shape to build or load."""

    flavor: str = "tiny"  # tiny | small | flash | pro (ignored when config_path is set)
    config_path: str = ""  # a model folder (or its config.json) to read the shape from instead
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)  # config.json keys to change

    def build_config(self) -> DeepseekV4Config:
        """The resolved config; errors name the [model] key to fix."""
        if self.config_path:
            path = Path(self.config_path)
            folder = path.parent if path.name == "config.json" else path
            base = DeepseekV4Config.from_model_dir(folder)
        else:
            if self.flavor not in FLAVORS:
                raise ValueError(f"[model] flavor = {self.flavor!r} is unknown; use one of {', '.join(FLAVORS)}")
            base = get_flavor(self.flavor)
        if not self.overrides:
            return base
        try:
            return base.replace(**self.overrides)
        except (TypeError, ValueError) as error:
            raise ValueError(f"[model] overrides: {error}") from None


def yarn_inv_freq(dim: int, base: float, yarn: dict[str, Any] | None):
    """Inverse RoPE frequencies (one per interleaved pair) with optional YaRN interpolation.

    YaRN keeps the high-frequency pairs (many rotations within the original context) as they are,
    divides the low-frequency ones by `factor`, and ramps linearly between the two in the band set
    by beta_fast / beta_slow; the attention magnitude factor stays 1 as in the released model."""
    import torch

    exponents = torch.arange(0, dim, 2, dtype=torch.float32) / dim
    extrapolated = 1.0 / (base**exponents)
    if not yarn:
        return extrapolated
    factor = float(yarn["factor"])
    original = float(yarn["original_max_position_embeddings"])
    beta_fast = float(yarn.get("beta_fast") or 32)
    beta_slow = float(yarn.get("beta_slow") or 1)

    def pair_index_for(rotations: float) -> float:
        # the pair index whose wavelength fits `rotations` times into the original context
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(pair_index_for(beta_fast)), 0)
    high = min(math.ceil(pair_index_for(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    keep_original = 1 - ramp
    return (extrapolated / factor) * (1 - keep_original) + extrapolated * keep_original
