"""Prompts for the model under test and extraction of the program from its answer.

Four prompt styles: trex's default (reason, write the mathematical model, then one Python program in a
```python block), `trex-paper` (the T-Rex paper's own templates, one per benchmark, kept unchanged in
`prompt_templates/`: the tagged <think>/<model>/<python> prompt for NL4OPT and OptiBench, the data.json
prompt for B4O-Feasible, the write-the-LP prompt for B4O-ORGEval), `synth` (exactly the system and user
messages of `trex synth`'s program-only SFT samples, with a data file shown inline as they show it: the
prompt a model trained on them has learned), and a user template file in which `{question}` (and
optionally `{data_note}`) is replaced.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from trex_cli.benchmark_files import DATA_FILE_NAME
from trex_cli.evaluate.benchmarks import BenchmarkItem

SYSTEM_PROMPT = (
    "You are an expert in operations research and optimization modeling. You turn a business problem "
    "into a correct mathematical model and a Python program that solves it."
)

SOLVER_INSTRUCTIONS = {
    "pyomo": (
        "Use Pyomo (`import pyomo.environ as pyo`) with the HiGHS solver: `pyo.SolverFactory('highs')`."
    ),
    "gurobipy": "Use gurobipy (`import gurobipy as gp`) and call `model.optimize()`.",
}

TREX_TEMPLATE = """{question}
{data_note}
Solve this problem step by step:
1. Reason about the decisions, the objective and the constraints.
2. Write the mathematical model (sets, parameters, decision variables, objective, constraints).
3. Write one complete Python program in a single ```python code block. {solver_instruction} The program \
must solve the model and print the optimal objective value on its own line as `Objective: <value>`; if \
the problem has no feasible solution, print `No Best Solution`.
"""

BUILTIN_TEMPLATES = {"trex": TREX_TEMPLATE}
SYNTH_STYLE = "synth"  # the synthetic SFT samples' own messages (data_synth.render.request_messages)
PAPER_STYLE = "trex-paper"
STYLES = (*BUILTIN_TEMPLATES, PAPER_STYLE, SYNTH_STYLE)
PAPER_TEMPLATE_DIR = Path(__file__).parent / "prompt_templates"
WORKING_DIRECTORY_TEXT = "the program's current working directory"
QUESTION_PLACEHOLDERS = ("{{Question}}", "{{Problem}}", "[Problem Description]")


def paper_template_name(item: BenchmarkItem) -> str:
    """Which of the paper's templates an item gets: by what the item is, then by benchmark name."""
    if item.reference_model:
        return "trex_paper_b4o_orgeval.txt"
    if DATA_FILE_NAME in item.data_files:
        return "trex_paper_b4o_feasible.txt"
    if item.benchmark.startswith("optibench"):
        return "trex_paper_optibench.txt"
    return "trex_paper_nl4opt.txt"


def paper_messages(item: BenchmarkItem) -> list[dict[str, str]]:
    """The paper's template for this item, filled in, split at its SYSTEM: / USER: markers."""
    text = (PAPER_TEMPLATE_DIR / paper_template_name(item)).read_text(encoding="utf-8")
    for placeholder in QUESTION_PLACEHOLDERS:
        text = text.replace(placeholder, item.question.strip())
    text = text.replace("{{DataPath}}", str(item.metadata.get("data_path", DATA_FILE_NAME)))
    text = text.replace("{{WorkingDirectory}}", WORKING_DIRECTORY_TEXT)
    if not text.startswith("SYSTEM:"):
        return [{"role": "user", "content": text.strip()}]
    system, _, user = text[len("SYSTEM:"):].partition("\nUSER:")
    return [{"role": "system", "content": system.strip()}, {"role": "user", "content": user.strip()}]


def data_note(item: BenchmarkItem) -> str:
    if DATA_FILE_NAME in item.data_files:
        return (
            f"\nThe data of this problem is in the file `{DATA_FILE_NAME}` in the program's working folder; "
            "the program must read it from there.\n"
        )
    return ""


@dataclass
class PromptBuilder:
    """Builds the chat messages for one item."""

    style: str = "trex"
    solver_library: str = "pyomo"

    def __post_init__(self) -> None:
        if self.style in (SYNTH_STYLE, PAPER_STYLE):
            self.template = ""
        elif self.style in BUILTIN_TEMPLATES:
            self.template = BUILTIN_TEMPLATES[self.style]
        else:
            path = Path(self.style)
            if not path.is_file():
                raise FileNotFoundError(
                    f"prompt {self.style!r} is neither a built-in style ({', '.join(STYLES)}) "
                    "nor an existing template file"
                )
            self.template = path.read_text(encoding="utf-8")
            if "{question}" not in self.template:
                raise ValueError(f"prompt template {path} has no {{question}} placeholder; add one")
        if self.solver_library not in SOLVER_INSTRUCTIONS:
            raise ValueError(
                f"solver_library {self.solver_library!r}: use one of {', '.join(SOLVER_INSTRUCTIONS)}"
            )

    def messages(self, item: BenchmarkItem) -> list[dict[str, str]]:
        if self.style == SYNTH_STYLE:
            return synth_messages(item)
        if self.style == PAPER_STYLE:
            return paper_messages(item)
        # Plain replacement, not str.format: questions and templates hold JSON braces.
        text = (
            self.template.replace("{question}", item.question.strip())
            .replace("{data_note}", data_note(item))
            .replace("{solver_instruction}", SOLVER_INSTRUCTIONS[self.solver_library])
        )
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text}]


def synth_messages(item: BenchmarkItem) -> list[dict[str, str]]:
    """The messages `trex synth` gives its program-only SFT samples, for this item."""
    from data_synth.render import request_messages

    file_data = None
    if DATA_FILE_NAME in item.data_files:
        path = Path(item.data_files[DATA_FILE_NAME])
        try:
            file_data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            raise ValueError(f"{path}: the data file of item {item.id} is not valid JSON ({error}); the synth prompt "
                             "shows it inline, so fix the file or use another prompt style") from error
    return request_messages(item.question, file_data, "program")


THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
PYTHON_TAG = re.compile(r"<python>(.*?)(?:</python>|$)", re.DOTALL)
FENCED = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|$)", re.DOTALL)


def extract_program(completion: str) -> str | None:
    """The program in a model's answer: the last <python> block, else the last ```python fenced
    block, else the last fenced block of any language. Reasoning inside <think> is skipped, so drafts
    there do not count. None when there is no program."""
    text = THINK_BLOCK.sub("", completion)
    tagged = [block for block in PYTHON_TAG.findall(text) if block.strip()]
    if tagged:
        return _strip_inner_fence(tagged[-1])
    blocks = FENCED.findall(text)
    python_blocks = [body for language, body in blocks if language.lower() in ("python", "py", "python3")]
    chosen = python_blocks or [body for _, body in blocks]
    chosen = [body for body in chosen if body.strip()]
    if not chosen:
        return None
    return chosen[-1].strip("\n") + "\n"


def _strip_inner_fence(block: str) -> str:
    inner = FENCED.findall(block)
    if inner:
        return inner[-1][1].strip("\n") + "\n"
    return block.strip("\n") + "\n"
