"""The `[eval]` recipe table: which benchmarks, which model backend, how programs run and are graded.

Defaults follow the T-Rex paper's protocol (temperature 0.6, top-p 1.0, 9,600 new tokens, seed 42,
16 concurrent requests, a 360 s limit per program) and trex's strict grading rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# Named benchmark suites: the T-Rex paper's headline is the mean Pass@1 over its four benchmarks,
# each under the paper's rule for it (the objective within 1e-6; structural equivalence for ORGEval).
SUITES: dict[str, dict] = {
    "trex": {
        "benchmarks": ("nl4opt", "optibench", "b4o-feasible", "b4o-orgeval"),
        "rules": {"nl4opt": "trex-paper", "optibench": "trex-paper", "b4o-feasible": "trex-paper", "b4o-orgeval": "orgeval"},
        "prompt": "trex-paper",
        "published_mean": 0.7181,  # T-Rex's reported average over the four
    },
}


@dataclass
class EvalConfig:
    """Settings of one `trex eval` run (the recipe's `[eval]` table; command-line flags override)."""

    # Benchmarks: names (nl4opt, optibench, b4o-feasible, industryor, mamo-easy, mamo-complex, optmath,
    # synth, ...) resolved under benchmark_dir (or $TREX_BENCHMARK_DIR), or paths to JSON / JSONL files.
    benchmarks: list[str] = field(default_factory=lambda: ["nl4opt"])
    suite: str = ""  # a named suite (trex) replaces `benchmarks` and adds its mean to results.json
    benchmark_dir: str = ""
    # Generic mapping for files in other layouts ("" = detect the layout from the fields present).
    question_field: str = ""
    answer_field: str = ""
    id_field: str = ""
    limit: int = 0  # at most this many items per benchmark (0 = all)

    # Generation
    backend: Literal["openai", "hf", "file", "gold"] = "openai"
    endpoint: str = "http://127.0.0.1:8000/v1"  # OpenAI-compatible base URL (…/v1)
    model: str = ""  # the served model name sent with each request ("" = ask the endpoint's /models)
    api_key_env: str = "OPENAI_API_KEY"  # environment variable holding the key, if the endpoint wants one
    api_mode: Literal["chat", "completions"] = "chat"  # completions: a plain-text prompt, for base models
    extra_body: str = ""  # JSON object merged into every request body (e.g. {"top_k": 20}), for the openai backend
    checkpoint: str = ""  # hf backend: a trex HF export folder
    completions: str = ""  # file backend: JSONL with id, completion (and sample)
    # "trex", "trex-paper" (the paper's own templates, chosen per benchmark), "synth" (the synthetic
    # SFT prompt), or a template file with {question}
    prompt: str = "trex"
    solver_library: Literal["pyomo", "gurobipy"] = "pyomo"  # what the prompt asks the program to use
    temperature: float = 0.6
    top_p: float = 1.0
    max_tokens: int = 9600
    seed: int = 42
    samples: int = 1  # completions per item; pass@k is reported for k = 1 and k = samples
    concurrency: int = 16
    request_timeout: float = 600.0
    max_retries: int = 5
    retry_backoff_s: float = 1.0  # first retry waits about this long, doubling after each failure
    hf_batch_size: int = 4
    hf_device: str = "auto"

    # Execution
    allow_code_execution: bool = False  # also TREX_ALLOW_CODE_EXECUTION=1
    timeout: float = 360.0  # seconds of wall time per program
    memory_mb: int = 4096  # address space a program may add on top of the pre-imported solver stack
    output_limit_kb: int = 256  # stdout / stderr kept per program (the rest is cut, and said so)
    workers: int = 0  # programs run at once (0 = number of CPU cores)
    isolation: Literal["auto", "bwrap", "process"] = "auto"

    # Grading
    rule: Literal["strict", "trex-paper", "orlm", "sirl", "opt-engine", "optibench"] = "strict"  # headline; all are computed
