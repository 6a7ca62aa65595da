"""Forward + backward tokens/s of trex's DeepSeek-V4 against transformers' DeepseekV4ForCausalLM.

Both models get the `small` flavor (about 97M parameters), BF16 weights, the same random token
batch, on this machine's CPU, measured alternately in the same run. trex's step computes its whole
training objective (LM loss through the fused linear + cross-entropy, the MTP block and its loss,
the balance loss and the indexer KL loss); transformers' step computes its LM loss (it has no MTP
block and no training-only losses), so the comparison is conservative for trex.
"""

from __future__ import annotations

import time


def _alternating_rates(steps: dict, tokens: int, rounds: int, budget_s: float) -> dict[str, tuple[float, int]]:
    """Tokens per second of each step function, timed in alternation (one untimed warm-up each, then
    rounds of one step of each) so that a change of machine load hits all of them alike. Stops after
    `rounds` rounds or once `budget_s` seconds have been spent timing."""
    for step in steps.values():
        step()
    spent = dict.fromkeys(steps, 0.0)
    done = 0
    while done < rounds and (done == 0 or sum(spent.values()) < budget_s):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            spent[name] += time.perf_counter() - start
        done += 1
    return {name: (tokens * done / spent[name], done) for name in steps}


def run(quick: bool = False) -> list[dict]:
    import torch
    from transformers import DeepseekV4Config as ReferenceConfig
    from transformers import DeepseekV4ForCausalLM as ReferenceModel

    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
    from trex_cli.models.deepseek_v4.state_dict_adapter import keep_float32, to_transformers

    torch.manual_seed(0)
    config = get_flavor("small")
    batch, seq_len = (1, 256) if quick else (1, 1024)
    rounds, budget = (1, 10.0) if quick else (3, 60.0)
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

    def trex_lm_step():
        # the same objective as transformers' step (no MTP block); balance and indexer KL stay on
        ours.zero_grad(set_to_none=True)
        ours(input_ids, mtp_loss_weight=0.0).loss.backward()

    def transformers_step():
        theirs.zero_grad(set_to_none=True)
        theirs(input_ids, labels=input_ids, use_cache=False).loss.backward()

    tokens = batch * seq_len
    rates = _alternating_rates(
        {"transformers": transformers_step, "full objective incl. MTP": trex_step, "without MTP": trex_lm_step},
        tokens, rounds, budget,
    )
    reference_rate, done = rates.pop("transformers")
    rows = []
    for label, (rate, _) in rates.items():
        rows.append(
            {
                "benchmark": "model",
                "figure": f"small fwd+bwd tokens/s, trex {label} (bf16, {batch}x{seq_len}, {done} timed rounds)",
                "value": round(rate, 1),
                "unit": "tokens/s",
                "baseline": "transformers DeepseekV4ForCausalLM (LM loss)",
                "baseline_value": round(reference_rate, 1),
                "ratio": round(rate / reference_rate, 2),
                "target": "> 1 here; >= 3x with the trainer (issue 5)",
            }
        )
    return rows


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
