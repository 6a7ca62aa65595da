"""Forward + backward tokens/s of trex's DeepSeek-V4 against transformers' DeepseekV4ForCausalLM.

Both models get the `small` flavor (about 97M parameters), BF16 weights, the same random token
batch, on this machine's CPU, measured alternately in the same run. trex's step computes its whole
training objective (LM loss through the fused linear + cross-entropy, the MTP block and its loss,
the balance loss and the indexer KL loss); transformers' step computes its LM loss (it has no MTP
block and no training-only losses), so the comparison is conservative for trex.
"""

from __future__ import annotations

import time


def _step_rate(step, tokens: int, warmup: int, steps: int, budget_s: float) -> tuple[float, int]:
    """Tokens per second over up to `steps` timed steps after `warmup` untimed ones, stopping early
    once `budget_s` seconds have been spent timing."""
    for _ in range(warmup):
        step()
    spent, done = 0.0, 0
    while done < steps and (done == 0 or spent < budget_s):
        start = time.perf_counter()
        step()
        spent += time.perf_counter() - start
        done += 1
    return tokens * done / spent, done


def run(quick: bool = False) -> list[dict]:
    import torch
    from transformers import DeepseekV4Config as ReferenceConfig
    from transformers import DeepseekV4ForCausalLM as ReferenceModel

    from trex_cli.models.deepseek_v4 import kernels
    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
    from trex_cli.models.deepseek_v4.state_dict_adapter import keep_float32, to_transformers

    torch.manual_seed(0)
    config = get_flavor("small")
    batch, seq_len = (1, 256) if quick else (2, 512)
    steps, budget = (1, 20.0) if quick else (3, 40.0)
    ours = keep_float32(DeepseekV4ForCausalLM(config).to(torch.bfloat16)).train()
    reference_config = ReferenceConfig(**config.to_hf_dict())
    reference_config._attn_implementation = "eager"
    theirs = ReferenceModel(reference_config).to(torch.bfloat16).train()
    state = {k: v for k, v in to_transformers(ours.state_dict()).items() if not k.startswith("mtp.")}
    theirs.load_state_dict({k: v.to(torch.bfloat16) for k, v in state.items()}, strict=False)
    input_ids = torch.randint(0, config.vocab_size, (batch, seq_len), generator=torch.Generator().manual_seed(0))

    def trex_step():
        ours.zero_grad(set_to_none=True)
        ours(input_ids).loss.backward()

    def transformers_step():
        theirs.zero_grad(set_to_none=True)
        theirs(input_ids, labels=input_ids, use_cache=False).loss.backward()

    tokens = batch * seq_len
    trex_rate, trex_steps = _step_rate(trex_step, tokens, 1, steps, budget)
    reference_rate, reference_steps = _step_rate(transformers_step, tokens, 1, steps, budget)
    attention_impl = kernels.source("sparse_attention")
    return [
        {
            "benchmark": "model",
            "figure": f"small fwd+bwd tokens/s (bf16, {batch}x{seq_len}, {trex_steps} vs {reference_steps} steps, kernels: {attention_impl})",
            "value": round(trex_rate, 1),
            "unit": "tokens/s",
            "baseline": "transformers DeepseekV4ForCausalLM",
            "baseline_value": round(reference_rate, 1),
            "ratio": round(trex_rate / reference_rate, 2),
            "target": ">= 3x (with the trainer, issue 5)",
        }
    ]


if __name__ == "__main__":
    import sys

    from rich.console import Console
    from rich.table import Table

    rows = run(quick="--quick" in sys.argv)
    table = Table(title="DeepSeek-V4 model: trex vs transformers")
    for column in ("figure", "value", "unit", "baseline", "baseline_value", "ratio", "target"):
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(row[c]) for c in ("figure", "value", "unit", "baseline", "baseline_value", "ratio", "target")))
    Console().print(table)
