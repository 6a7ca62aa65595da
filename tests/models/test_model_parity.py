"""trex's DeepSeek-V4 against transformers' DeepseekV4ForCausalLM: same random weights (mapped through
the state-dict adapter), same logits; and the MTP block against a reference assembled from
transformers' own modules (transformers does not build the MTP layer)."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import DeepseekV4Config as ReferenceConfig
from transformers import DeepseekV4ForCausalLM as ReferenceModel
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as reference_modules

import ascend_kernels
from trex_cli.models.deepseek_v4 import state_dict_adapter
from trex_cli.models.deepseek_v4.config import CSA, HCA, SLIDING, get_flavor
from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM

SEQ_LEN = 96  # window 16, CSA 24 entries (top-4 chosen), HCA 6 entries


@pytest.fixture(autouse=True, scope="module")
def reference_kernels():
    # the plain PyTorch operators: no torch.compile warm-up in a short test (the kernels' own tests
    # hold the fast backends to these references)
    ascend_kernels.configure("reference")
    yield
    ascend_kernels.configure(None)


def randomized_tiny(seed: int = 0) -> DeepseekV4ForCausalLM:
    """The tiny flavor with every parameter random, including those initialized to 0 or 1 (biases,
    sinks, norms, hc scales) and the routing biases, so no term of the maths is left untested."""
    torch.manual_seed(seed)
    model = DeepseekV4ForCausalLM(get_flavor("tiny")).float().eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() == 1 or name.endswith(("_base", ".ape")):
                centre = 1.0 if name.endswith(("weight", "_scale")) else 0.0
                parameter.copy_(centre + 0.2 * torch.randn_like(parameter))
        for gate in model.routed_gates():
            if not gate.hashed:
                gate.bias.copy_(0.2 * torch.randn_like(gate.bias))
    return model


def reference_from(model: DeepseekV4ForCausalLM) -> ReferenceModel:
    config = ReferenceConfig(**model.config.to_hf_dict())
    config._attn_implementation = "eager"
    reference = ReferenceModel(config).float().eval()
    tensors = {k: v for k, v in state_dict_adapter.to_transformers(model.state_dict()).items() if not k.startswith("mtp.")}
    missing, unexpected = reference.load_state_dict(tensors, strict=False)
    assert not unexpected
    # transformers' only state not in the checkpoint: rotary tables
    assert all("inv_freq" in name for name in missing), missing
    return reference


@pytest.fixture(scope="module")
def models():
    model = randomized_tiny()
    return model, reference_from(model)


def test_tiny_flavor_exercises_every_block_kind():
    config = get_flavor("tiny")
    kinds = config.layer_types
    assert kinds.count(CSA) >= 2 and kinds.count(HCA) >= 2 and SLIDING in kinds
    assert config.num_hash_layers >= 1 and config.hc_mult == 4 and config.yarn is not None
    assert SEQ_LEN > 2 * config.sliding_window
    assert SEQ_LEN // config.compress_rate_csa > config.index_topk  # the indexer must choose
    assert SEQ_LEN // config.compress_rate_hca >= 3


def test_logits_match_transformers(models):
    model, reference = models
    input_ids = torch.randint(0, model.config.vocab_size, (2, SEQ_LEN), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = model(input_ids, compute_loss=False, return_logits=True).logits
        theirs = reference(input_ids).logits
    assert ours.shape == theirs.shape == (2, SEQ_LEN, model.config.vocab_size)
    assert (ours - theirs).abs().max().item() < 1e-4
    # and the comparison has teeth: a changed routing bias changes the logits
    changed = copy.deepcopy(model)
    with torch.no_grad():
        changed.layers[-1].ffn.gate.bias.add_(5 * torch.randn_like(changed.layers[-1].ffn.gate.bias))
        assert (changed(input_ids, compute_loss=False, return_logits=True).logits - theirs).abs().max() > 1e-3


def test_mtp_matches_reference_semantics(models):
    """MTP at position t: RMSNorm'd embedding of token t+1 through e_proj plus each RMSNorm'd main
    stream through h_proj, one full block (attention, MoE, mHC), the MTP's own hc head and norm, the
    shared output head. The reference assembles this from transformers' modules."""
    model, reference = models
    config = model.config
    n = config.num_hidden_layers
    extended = copy.deepcopy(reference.config)
    extended.num_hidden_layers = n + 1
    extended.layer_types = list(reference.config.layer_types) + [config.layer_type(n)]
    extended.mlp_layer_types = list(reference.config.mlp_layer_types) + ["moe"]
    block = reference_modules.DeepseekV4DecoderLayer(extended, n).float().eval()
    head = reference_modules.DeepseekV4HyperHead(extended).float()
    norms = {name: reference_modules.DeepseekV4RMSNorm(config.hidden_size, config.rms_norm_eps).float() for name in ("enorm", "hnorm", "norm")}
    e_proj = torch.nn.Linear(config.hidden_size, config.hidden_size, bias=False)
    h_proj = torch.nn.Linear(config.hidden_size, config.hidden_size, bias=False)
    mtp_official = {k[len("mtp.0."):]: v for k, v in state_dict_adapter.to_official(model.state_dict()).items() if k.startswith("mtp.0.")}
    mtp_own = {k[len("mtp.0."):]: v for k, v in model.state_dict().items() if k.startswith("mtp.0.")}
    as_layer = {"layers.0." + k: v for k, v in mtp_own.items() if not k.startswith(("e_proj", "h_proj", "enorm", "hnorm", "norm", "hc_head"))}
    block_state = {k[len("model.layers.0."):]: v for k, v in state_dict_adapter.to_transformers(as_layer).items()}
    block.load_state_dict(block_state, strict=True)
    head.load_state_dict({"hc_fn": mtp_official["hc_head_fn"], "hc_base": mtp_official["hc_head_base"], "hc_scale": mtp_official["hc_head_scale"]})
    for name, norm in norms.items():
        norm.load_state_dict({"weight": mtp_official[f"{name}.weight"]})
    e_proj.load_state_dict({"weight": mtp_official["e_proj.weight"]})
    h_proj.load_state_dict({"weight": mtp_official["h_proj.weight"]})

    captured = {}
    last = reference.model.layers[-1]
    hooks = [
        last.register_forward_pre_hook(lambda module, args, kwargs: captured.update(kwargs=kwargs), with_kwargs=True),
        last.register_forward_hook(lambda module, args, output: captured.update(streams=output)),
    ]
    input_ids = torch.randint(0, config.vocab_size, (2, SEQ_LEN), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        reference(input_ids, use_cache=False)
        for hook in hooks:
            hook.remove()
        next_ids = torch.nn.functional.pad(input_ids[:, 1:], (0, 1))
        mixed = e_proj(norms["enorm"](reference.model.embed_tokens(next_ids))).unsqueeze(2) + h_proj(norms["hnorm"](captured["streams"]))
        kwargs = dict(captured["kwargs"], input_ids=next_ids)
        out = block(mixed, **kwargs)
        expected = reference.lm_head(norms["norm"](head(out)))
        ours = model(input_ids, compute_loss=False, return_mtp_logits=True).mtp_logits
    assert (ours - expected).abs().max().item() < 1e-4
