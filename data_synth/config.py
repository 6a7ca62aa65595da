"""The `[synth]` table of a recipe: how many problems to synthesize, from which families, and how."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SynthConfig:
    """Settings of `trex synth` (the recipe's `[synth]` table; CLI flags override them)."""

    n: int = 200  # verified training problems to keep
    eval_n: int = 50  # verified held-out items (a disjoint seed stream)
    seed: int = 0
    families: list[str] = field(default_factory=list)  # empty: every family in data_synth/families
    holdout_families: list[str] = field(default_factory=list)  # kept out of training, still in eval
    difficulty: dict[str, float] = field(default_factory=lambda: {"small": 0.5, "medium": 0.35, "large": 0.15})
    representations: dict[str, float] = field(
        default_factory=lambda: {"text": 0.4, "table": 0.3, "file": 0.3})
    answer_styles: dict[str, float] = field(
        default_factory=lambda: {"model": 0.2, "model_program": 0.4, "program": 0.4})
    # program styles to write answers in, by key ("sets:indexed/builder:module/footer:termination", see
    # data_synth.render.ProgramStyle); empty: every style each family has
    program_styles: list[str] = field(default_factory=list)
    # the libraries programs are written with: "pyomo", "gurobipy" (families that give a gurobipy model,
    # instances within its PyPI licence's 2,000 variables and constraints); empty: Pyomo, and gurobipy
    # where it is installed
    program_libraries: list[str] = field(default_factory=list)
    infeasible_share: float = 0.05  # share of candidates made deliberately infeasible (labelled)
    workers: int = 2
    block_size: int = 64  # candidates per resumable block (one shard each)
    program_timeout: float = 20.0  # seconds for one rendered program in the sandbox
    solver_time_limit: float = 30.0  # seconds for one in-process solve
    program_memory_mb: int = 2048  # address space a sandboxed program may add to the pre-imported solver stack
    teacher_endpoint: str = ""  # OpenAI-compatible base URL (".../v1"); empty: no rewrite
    teacher_model: str = ""
    teacher_timeout: float = 60.0
    # the environment variable holding the teacher's API key (sent as a bearer token; unset: no key, as a
    # local vLLM needs none)
    teacher_api_key_env: str = "OPENAI_API_KEY"
    teacher_retries: int = 3  # further attempts on connection errors, timeouts, HTTP 429 and 5xx
    # the teacher writes a program from its own rewrite; it must reach the verified answer to be kept
    teacher_reverify: bool = True
    out: str = ""  # default: <run_dir>/synth
