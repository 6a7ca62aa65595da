"""Parameter counts of a DeepSeek-V4 model, per component, from its config alone.

The planner needs to know, for each layer, how many parameters are split by tensor parallelism
(attention heads, the shared expert), how many by expert parallelism (the routed experts) and how
many every rank of a tensor-parallel group holds whole (norms, the mHC mixers, the router, the
compressors), because that decides per-rank memory. The counts follow the official checkpoint
layout (deepseek_v4.md) and are held exact against the instantiated trex model in tests/plan.

`ModelShape.from_config` reads any object or dict that carries the Hugging Face config.json field
names (trex's `DeepseekV4Config`, a parsed config.json, transformers' config).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

WINDOW, CSA, HCA = "window", "csa", "hca"


def _field(config: Any, names: tuple[str, ...], default: Any = dataclasses.MISSING) -> Any:
    for name in names:
        if isinstance(config, dict):
            if config.get(name) is not None:
                return config[name]
        elif getattr(config, name, None) is not None:
            return getattr(config, name)
    if default is dataclasses.MISSING:
        raise ValueError(f"model config has no '{names[0]}' field; give a complete DeepSeek-V4 config.json")
    return default


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """The sizes of a DeepSeek-V4 model that decide memory, communication and layout rules."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    head_dim: int
    rope_head_dim: int
    q_lora_rank: int
    o_groups: int
    o_lora_rank: int
    num_experts: int
    experts_per_token: int
    num_shared_experts: int
    expert_intermediate: int
    index_heads: int
    index_head_dim: int
    index_topk: int
    sliding_window: int
    layer_ratios: tuple[int, ...]  # compress ratio per layer (0 window, CSA ratio, HCA ratio)
    mtp_ratios: tuple[int, ...]  # compress ratio per MTP layer
    csa_ratio: int
    hca_ratio: int
    num_hash_layers: int
    hc_mult: int
    sinkhorn_iters: int = 20

    @classmethod
    def from_config(cls, config: Any) -> ModelShape:
        layers = int(_field(config, ("num_hidden_layers",)))
        mtp = int(_field(config, ("num_nextn_predict_layers",), 0))
        compress_rates = _field(config, ("compress_rates",), None) or {}
        csa_ratio = int(compress_rates.get("compressed_sparse_attention", _field(config, ("compress_rate_csa",), 4)))
        hca_ratio = int(compress_rates.get("heavily_compressed_attention", _field(config, ("compress_rate_hca",), 128)))
        ratios = _field(config, ("compress_ratios",), None)
        if ratios is None:
            layer_types = _field(config, ("layer_types",), None)
            if layer_types is None:
                raise ValueError("model config has neither 'compress_ratios' nor 'layer_types'")
            by_type = {"sliding_attention": 0, "compressed_sparse_attention": csa_ratio,
                       "heavily_compressed_attention": hca_ratio}
            ratios = [by_type[t] for t in layer_types] + [by_type[layer_types[-1]]] * mtp
        ratios = [int(r) for r in ratios]
        if len(ratios) < layers:
            raise ValueError(f"model config: compress_ratios has {len(ratios)} entries for {layers} layers")
        # Layers past num_hidden_layers belong to MTP; pad with the last layer's ratio when absent.
        mtp_ratios = (ratios[layers:] + [ratios[layers - 1]] * mtp)[:mtp]
        hash_layers = _field(config, ("num_hash_layers",), None)
        if hash_layers is None:
            mlp_types = _field(config, ("mlp_layer_types",), None)
            hash_layers = sum(1 for t in mlp_types if t == "hash_moe") if mlp_types else 0
        heads = int(_field(config, ("num_attention_heads",)))
        head_dim = int(_field(config, ("head_dim",)))
        rope = _field(config, ("qk_rope_head_dim",), None)
        if rope is None:
            rope = round(float(_field(config, ("partial_rotary_factor",), 0.125)) * head_dim)
        return cls(
            vocab_size=int(_field(config, ("vocab_size",))),
            hidden_size=int(_field(config, ("hidden_size", "dim"))),
            num_layers=layers,
            num_heads=heads,
            head_dim=head_dim,
            rope_head_dim=int(rope),
            q_lora_rank=int(_field(config, ("q_lora_rank",))),
            o_groups=int(_field(config, ("o_groups",))),
            o_lora_rank=int(_field(config, ("o_lora_rank",))),
            num_experts=int(_field(config, ("n_routed_experts",))),
            experts_per_token=int(_field(config, ("num_experts_per_tok",))),
            num_shared_experts=int(_field(config, ("n_shared_experts",), 1)),
            expert_intermediate=int(_field(config, ("moe_intermediate_size",))),
            index_heads=int(_field(config, ("index_n_heads",))),
            index_head_dim=int(_field(config, ("index_head_dim",))),
            index_topk=int(_field(config, ("index_topk",))),
            sliding_window=int(_field(config, ("sliding_window",))),
            layer_ratios=tuple(ratios[:layers]),
            mtp_ratios=tuple(mtp_ratios),
            csa_ratio=csa_ratio,
            hca_ratio=hca_ratio,
            num_hash_layers=int(hash_layers),
            hc_mult=int(_field(config, ("hc_mult",), 4)),
            sinkhorn_iters=int(_field(config, ("hc_sinkhorn_iters",), 20)),
        )

    def kind(self, ratio: int) -> str:
        if ratio == 0:
            return WINDOW
        return CSA if ratio == self.csa_ratio else HCA

    @property
    def layer_kinds(self) -> list[str]:
        return [self.kind(r) for r in self.layer_ratios]


@dataclasses.dataclass
class ComponentCounts:
    """Parameters of one block (or of the whole model), by how parallelism splits them.

    tensor_parallel: split over TP ranks (attention heads, output projection, shared expert, the
    vocabulary of embedding and head); replicated: held whole by every TP rank (norms, mHC mixers,
    router, compressors, indexer, low-rank input projections); experts: the routed experts, split
    over EP (and expert-TP); buffers: non-trainable state (router bias, hash table) that is
    stored but has no gradient or optimizer state.
    """

    tensor_parallel: int = 0
    replicated: int = 0
    experts: int = 0
    buffers: int = 0

    @property
    def trainable(self) -> int:
        return self.tensor_parallel + self.replicated + self.experts

    def __add__(self, other: ComponentCounts) -> ComponentCounts:
        return ComponentCounts(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other),
                                                        strict=True)))

    def scaled(self, factor: int) -> ComponentCounts:
        return ComponentCounts(*(factor * a for a in dataclasses.astuple(self)))


def attention_counts(shape: ModelShape, ratio: int) -> dict[str, int]:
    """Parameters of one attention block, by the tensor names of the official layout."""
    hidden, heads, head_dim = shape.hidden_size, shape.num_heads, shape.head_dim
    counts = {
        "attn.wq_a": hidden * shape.q_lora_rank,
        "attn.q_norm": shape.q_lora_rank,
        "attn.wq_b": shape.q_lora_rank * heads * head_dim,
        "attn.wkv": hidden * head_dim,
        "attn.kv_norm": head_dim,
        # grouped projection: each of o_groups groups maps heads*head_dim/o_groups -> o_lora_rank
        "attn.wo_a": heads * head_dim * shape.o_lora_rank,
        "attn.wo_b": shape.o_groups * shape.o_lora_rank * hidden,
        "attn.attn_sink": heads,
    }
    kind = shape.kind(ratio)
    if kind != WINDOW:
        # CSA windows overlap, so its compressor projects to twice the width (kv and gate halves).
        width = 2 * head_dim if kind == CSA else head_dim
        counts |= {
            "attn.compressor.wkv": hidden * width,
            "attn.compressor.wgate": hidden * width,
            "attn.compressor.ape": ratio * width,
            "attn.compressor.norm": head_dim,
        }
    if kind == CSA:
        index_width = 2 * shape.index_head_dim
        counts |= {
            "attn.indexer.wq_b": shape.q_lora_rank * shape.index_heads * shape.index_head_dim,
            "attn.indexer.weights_proj": hidden * shape.index_heads,
            "attn.indexer.compressor.wkv": hidden * index_width,
            "attn.indexer.compressor.wgate": hidden * index_width,
            "attn.indexer.compressor.ape": ratio * index_width,
            "attn.indexer.compressor.norm": shape.index_head_dim,
        }
    return counts


# Which attention tensors tensor parallelism splits (by head); the rest every TP rank holds whole.
TENSOR_PARALLEL_ATTENTION = ("attn.wq_b", "attn.wo_a", "attn.wo_b", "attn.attn_sink")


def hyper_connection_counts(shape: ModelShape) -> int:
    """One mHC mixer: fn [(2+n)*n, n*hidden], base [(2+n)*n], scale [3]."""
    n = shape.hc_mult
    return (2 + n) * n * n * shape.hidden_size + (2 + n) * n + 3


@functools.lru_cache(maxsize=4096)
def layer_counts(shape: ModelShape, ratio: int, hash_routed: bool) -> ComponentCounts:
    """One decoder block: attention, MoE (routed + shared experts, router), norms, two mHC mixers."""
    attention = attention_counts(shape, ratio)
    tensor_parallel = sum(v for k, v in attention.items() if k in TENSOR_PARALLEL_ATTENTION)
    replicated = sum(v for k, v in attention.items() if k not in TENSOR_PARALLEL_ATTENTION)
    hidden, inter = shape.hidden_size, shape.expert_intermediate
    tensor_parallel += shape.num_shared_experts * 3 * hidden * inter  # shared expert w1, w2, w3
    replicated += 2 * hidden  # attn_norm, ffn_norm
    replicated += 2 * hyper_connection_counts(shape)
    replicated += shape.num_experts * hidden  # router weight
    experts = shape.num_experts * 3 * hidden * inter
    # hash layers keep a token -> experts table; learned layers a per-expert bias, neither trained
    buffers = shape.vocab_size * shape.experts_per_token if hash_routed else shape.num_experts
    return ComponentCounts(tensor_parallel, replicated, experts, buffers)


def hyper_head_counts(shape: ModelShape) -> int:
    """The final stream collapse: fn [n, n*hidden], base [n], scale [1]."""
    n = shape.hc_mult
    return n * n * shape.hidden_size + n + 1


def embedding_counts(shape: ModelShape) -> ComponentCounts:
    return ComponentCounts(tensor_parallel=shape.vocab_size * shape.hidden_size)


def head_counts(shape: ModelShape) -> ComponentCounts:
    """Final norm, hc_head and the (untied) output projection."""
    return ComponentCounts(tensor_parallel=shape.vocab_size * shape.hidden_size,
                           replicated=shape.hidden_size + hyper_head_counts(shape))


def mtp_counts(shape: ModelShape) -> ComponentCounts:
    """MTP modules: a full block plus e_proj, h_proj, enorm, hnorm, norm and its own hc_head.
    The embedding and output head are shared with the main model."""
    total = ComponentCounts()
    hidden = shape.hidden_size
    for index, ratio in enumerate(shape.mtp_ratios):
        block = layer_counts(shape, ratio, hash_routed=shape.num_layers + index < shape.num_hash_layers)
        extra = ComponentCounts(replicated=2 * hidden * hidden + 3 * hidden + hyper_head_counts(shape))
        total = total + block + extra
    return total


def per_layer_counts(shape: ModelShape) -> list[ComponentCounts]:
    return [layer_counts(shape, ratio, index < shape.num_hash_layers)
            for index, ratio in enumerate(shape.layer_ratios)]


def model_counts(shape: ModelShape) -> dict[str, ComponentCounts]:
    """Every component of the model: embedding, layers (summed), head, mtp."""
    layers = ComponentCounts()
    for counts in per_layer_counts(shape):
        layers = layers + counts
    return {"embedding": embedding_counts(shape), "layers": layers, "head": head_counts(shape),
            "mtp": mtp_counts(shape)}


def total_parameters(shape: ModelShape) -> int:
    return sum(c.trainable for c in model_counts(shape).values())


def active_parameters(shape: ModelShape) -> int:
    """Parameters a token uses: everything except the routed experts it is not sent to."""
    total = 0
    for counts in model_counts(shape).values():
        total += counts.trainable - counts.experts
    per_expert = 3 * shape.hidden_size * shape.expert_intermediate
    total += (shape.num_layers + len(shape.mtp_ratios)) * shape.experts_per_token * per_expert
    return total


def load_model_shape(flavor: str | None = None, config_path: str | Path | None = None) -> tuple[ModelShape, Any]:
    """The shape (and the trex config object) for a flavor name or a config.json / model folder."""
    from trex_cli.models.deepseek_v4.config import DeepseekV4Config, get_flavor

    if config_path:
        path = Path(config_path)
        if path.is_dir():
            config = DeepseekV4Config.from_model_dir(path)
        elif path.is_file():
            try:
                config = DeepseekV4Config.from_dict(json.loads(path.read_text()))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}: not valid JSON ({error})") from None
        else:
            raise FileNotFoundError(f"model config {path} not found (give a config.json or a model folder)")
    elif flavor:
        config = get_flavor(flavor)
    else:
        raise ValueError("name a model: --flavor tiny|small|flash|pro or --config path/to/config.json")
    return ModelShape.from_config(config), config
