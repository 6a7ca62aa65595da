"""Synthesis, the library behind `trex synth`: sample, verify, render, write; deterministic and resumable.

Candidates are numbered per split ("train", "eval"); candidate `i` of a split draws everything (family,
difficulty, scenario, instance, infeasible or not, representation, answer style, statement skeleton) from
its own random generator seeded by (split, seed, i), so any worker, in any order, makes the same
candidate, and the eval split is a disjoint stream. Its statements are held out by wording too: each
split draws skeletons from its own openings, phrasings, distractors and layouts (`data_synth.statements`),
and the summary reports the eval/train 13-gram overlap that is left. Workers verify candidates
(data_synth.verify); the main process takes the results in index order, drops duplicate instances (the
first one wins, whatever the wording), and keeps the first `n`
verified problems.

Candidates are processed in blocks of `block_size`. A finished block's files (problem records, CPT
documents, SFT samples, rejects) are written atomically and then its marker `blocks/<split>-<b>.json`
(also atomic); a re-run skips marked blocks and rewrites the rest, so a killed run resumes to exactly
the records an uninterrupted run writes. At the end the rejects are merged into `rejects.jsonl`, the
eval split becomes `eval/test.jsonl` with its data files. The stage folder around it (fingerprint,
manifest written last, `--force`) is the synth stage's (`trex_cli.stages.synth`); this module writes
only the folder's content.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import math
import os
import random
import shutil
import signal
import sys
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from data_synth.config import SynthConfig
from data_synth.family import (
    ALL_DIFFICULTIES,
    DIFFICULTIES,
    REPRESENTATIONS,
    ProblemFamily,
    Scenario,
    verify_highs_options,
)
from data_synth.files import write_json_atomic, write_text_atomic
from data_synth.render import (
    GUROBIPY_SIZE_LIMIT,
    LIBRARIES,
    ProgramStyle,
    cpt_document,
    eval_item,
    program_data,
    program_styles,
    render_program,
    sft_sample,
)
from data_synth.statements import (
    SPLIT_NAMES,
    Skeleton,
    apply_skeleton,
    draw_skeleton,
    entity_names,
    overlap_report,
)

ANSWER_STYLES = ("model", "model_program", "program")
# ------------------------------------------------------------------------------------- configuration

def check_config(config: SynthConfig, where: str = "[synth]") -> None:
    """Raise ValueError, naming the key and the fix, for settings that cannot work."""
    from data_synth.families import all_families

    available = all_families()
    for key in ("families", "holdout_families"):
        unknown = [name for name in getattr(config, key) if name not in available]
        if unknown:
            raise ValueError(f"{where}.{key}: unknown families {', '.join(unknown)}; available: "
                             f"{', '.join(available)}")
    for key, allowed in (("difficulty", ALL_DIFFICULTIES), ("representations", REPRESENTATIONS),
                         ("answer_styles", ANSWER_STYLES)):
        weights = getattr(config, key)
        unknown = [name for name in weights if name not in allowed]
        if unknown:
            raise ValueError(f"{where}.{key}: unknown keys {', '.join(unknown)}; use {', '.join(allowed)}")
        if any(value < 0 for value in weights.values()) or sum(weights.values()) <= 0:
            raise ValueError(f"{where}.{key}: weights must be >= 0 with a positive sum, got {weights}")
    lacking = [family.name for family in split_families(config, "eval")
               if not any(config.difficulty.get(name, 0) > 0 for name in family_difficulties(family))]
    if lacking:
        scaling = [name for name, family in available.items() if family.industrial]
        raise ValueError(f"{where}.difficulty: {', '.join(lacking)} have no industrial size and no other difficulty "
                         f"is asked for; give small/medium/large a weight too, or choose families that scale: "
                         f"{', '.join(scaling)}")
    unknown = [name for name in config.program_libraries if name not in LIBRARIES]
    if unknown:
        raise ValueError(f"{where}.program_libraries: unknown libraries {', '.join(unknown)}; use "
                         f"{', '.join(LIBRARIES)}")
    if "gurobipy" in config.program_libraries and not gurobipy_installed():
        raise ValueError(f"{where}.program_libraries: gurobipy is not installed; pip install gurobipy "
                         "(or trex[eval]), or leave it out")
    libraries = program_libraries(config)
    all_styles = {style.key for family in available.values() for style in program_styles(family, None, libraries)}
    unknown = [key for key in config.program_styles if key not in all_styles]
    if unknown:
        raise ValueError(f"{where}.program_styles: unknown styles {', '.join(unknown)}; use {', '.join(sorted(all_styles))}")
    for family in split_families(config, "eval"):
        if not family_styles(config, family):
            raise ValueError(f"{where}.program_styles: {family.name} has none of {', '.join(config.program_styles)}; "
                             f"it has {', '.join(style.key for style in program_styles(family, None, libraries))}")
    if config.n < 0 or config.eval_n < 0:
        raise ValueError(f"{where}.n and eval_n must be >= 0")
    if not 0.0 <= config.infeasible_share <= 1.0:
        raise ValueError(f"{where}.infeasible_share must lie in [0, 1], got {config.infeasible_share}")
    if config.block_size < 1:
        raise ValueError(f"{where}.block_size must be >= 1")
    if bool(config.teacher_endpoint) != bool(config.teacher_model):
        raise ValueError(f"{where}: give both teacher_endpoint and teacher_model (--teacher-endpoint URL "
                         "--teacher-model M), or neither")
    if config.teacher_retries < 0:
        raise ValueError(f"{where}.teacher_retries must be >= 0, got {config.teacher_retries}")
    if (config.teacher_endpoint and config.teacher_api_key_env not in ("", "OPENAI_API_KEY")
            and not os.environ.get(config.teacher_api_key_env)):
        raise ValueError(f"{where}.teacher_api_key_env names {config.teacher_api_key_env}, which is not set in "
                         "the environment; export it, or set teacher_api_key_env = \"\" for an endpoint "
                         "without a key")
    if not split_families(config, "train") and config.n:
        raise ValueError(f"{where}: every family is held out; nothing is left for training")


def split_families(config: SynthConfig, split: str) -> list[ProblemFamily]:
    """The families a split draws from: eval uses all selected ones, train leaves the held-out out."""
    from data_synth.families import all_families

    families = all_families()
    names = config.families or list(families)
    if split == "train":
        names = [name for name in names if name not in set(config.holdout_families)]
    return [families[name] for name in sorted(names)]


def family_difficulties(family: ProblemFamily) -> tuple[str, ...]:
    """The difficulties a family samples: the standard three, and "industrial" for those that scale."""
    return ALL_DIFFICULTIES if family.industrial else DIFFICULTIES


def gurobipy_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("gurobipy") is not None


def program_libraries(config: SynthConfig) -> tuple[str, ...]:
    """The libraries programs are written with: the configured ones, else Pyomo and, where it is
    installed, gurobipy."""
    if config.program_libraries:
        return tuple(name for name in LIBRARIES if name in config.program_libraries)
    return ("pyomo", "gurobipy") if gurobipy_installed() else ("pyomo",)


def gurobipy_fits(family: ProblemFamily, data: dict) -> bool:
    """Whether `data`'s model stays within the gurobipy wheel's size-limited licence (its matrix build's
    columns and rows, with a margin for the rows a gurobipy model may split)."""
    from data_synth.verify import build_matrix

    matrix = build_matrix(family, data)
    limit = GUROBIPY_SIZE_LIMIT * 0.9
    return len(matrix.col_cost) <= limit and len(matrix.row_lower) <= limit


def family_styles(config: SynthConfig, family: ProblemFamily, data: dict | None = None) -> list[ProgramStyle]:
    """The program styles a family's answers (for `data`'s variant and size, when given) are written in
    under `config`."""
    styles = program_styles(family, data, program_libraries(config))
    if config.program_styles:
        styles = [style for style in styles if style.key in config.program_styles]
    if data is not None and any(style.library == "gurobipy" for style in styles) and not gurobipy_fits(family, data):
        styles = [style for style in styles if style.library != "gurobipy"]
    return styles


def fingerprint_config(config: SynthConfig) -> dict:
    """The settings that decide the output (workers and the output folder do not)."""
    settings = dataclasses.asdict(config)
    for key in ("workers", "out", "teacher_timeout"):
        settings.pop(key)
    settings["program_libraries"] = list(program_libraries(config))  # "" resolves by what is installed
    return settings


# ---------------------------------------------------------------------------------------- candidates

@dataclass
class Candidate:
    split: str
    index: int
    seed: int
    family: ProblemFamily
    difficulty: str
    scenario: Scenario
    data: dict
    infeasible: bool
    representation: str
    answer_style: str
    skeleton: Skeleton
    distractor_seed: int
    program_style: ProgramStyle

    @property
    def id(self) -> str:
        return f"{self.split}-s{self.seed}-{self.index:06d}"


def _weighted(rng: random.Random, weights: dict[str, float], order: tuple[str, ...]) -> str:
    names = [name for name in order if weights.get(name, 0) > 0]
    return rng.choices(names, weights=[weights[name] for name in names])[0]


def make_candidate(config: SynthConfig, split: str, index: int,
                   families: list[ProblemFamily] | None = None) -> Candidate:
    """Candidate `index` of `split`: every draw comes from a generator seeded by (split, seed, index)."""
    families = families if families is not None else split_families(config, split)
    rng = random.Random(f"trex-synth:{split}:{config.seed}:{index}")
    family = families[rng.randrange(len(families))]
    difficulty = _weighted(rng, config.difficulty, family_difficulties(family))
    scenario = rng.choice(family.scenarios_for(split))
    data = family.sample(rng, difficulty, scenario)
    infeasible = False
    if rng.random() < config.infeasible_share:
        variant = family.make_infeasible(data, rng)
        if variant is not None:
            data, infeasible = variant, True
    representation = _weighted(rng, config.representations, REPRESENTATIONS)
    answer_style = _weighted(rng, config.answer_styles, ANSWER_STYLES)
    skeleton = draw_skeleton(rng, split)
    distractor_seed = rng.getrandbits(32)
    # a variant without the configured styles (no pyo.Set to drop, say) is written in any style it has
    program_style = rng.choice(family_styles(config, family, data) or program_styles(family, data))
    return Candidate(split, index, config.seed, family, difficulty, scenario, data, infeasible,
                     representation, answer_style, skeleton, distractor_seed, program_style)


def candidate_statement(candidate: Candidate) -> str:
    """The family's rendering of the candidate, re-dressed by its statement skeleton."""
    family = candidate.family
    rendered = family.render_statement(candidate.data, candidate.scenario, candidate.representation)
    return apply_skeleton(rendered, candidate.skeleton, candidate.scenario.industry,
                          random.Random(candidate.distractor_seed), family.phrasings,
                          entity_names(candidate.data))


def instance_hash(family: str, parameters: dict) -> str:
    """Hash of the problem itself (the duplicate check): the family and its instance, whatever the
    wording. Two statements of one instance are one problem; two instances of one skeleton are two."""
    canonical = json.dumps({"family": family, "parameters": parameters}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _index_key(index) -> str:
    if index is None:
        return ""
    if isinstance(index, tuple):
        return ",".join(str(part) for part in index)
    return str(index)


# ------------------------------------------------------------------------------------- worker side

class _WorkerState:
    config: SynthConfig | None = None
    sandbox = None
    families: dict[str, list[ProblemFamily]] = {}
    terminating = False  # set by the SIGTERM handler (see _quiet_while_terminating)


def init_worker(config: SynthConfig, silence_stdout: bool = True) -> None:
    """Per-process setup: the program sandbox, quiet Pyomo logs, HiGHS's banner kept off stdout."""
    import sys

    import highspy

    from trex_sandbox import Sandbox, SandboxSettings, die_with_parent

    if silence_stdout:  # a pool worker: go down with the main process, however it ends
        die_with_parent()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle (see _Executor)
        # the pool's terminate() sends SIGTERM: exit through Python so the exit finalizers run (they close
        # the sandbox server and release the semaphore Pyomo makes at import, which the tracker would
        # otherwise report as leaked)
        signal.signal(signal.SIGTERM, _exit_on_terminate)
        threading.excepthook = _quiet_while_terminating
    logging.getLogger("pyomo").setLevel(logging.CRITICAL)  # failures are recorded as reject details
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    try:
        highspy.Highs()  # the one-time banner goes to /dev/null
    finally:
        if not silence_stdout:  # in-process use: give stdout back to the console
            os.dup2(saved, 1)
        os.close(saved)
    _WorkerState.config = config
    # One program at a time per worker process: the pool is the parallelism.
    # The reference programs' HiGHS runs with the verification solves' options (verify_highs_options: the
    # same optimum, a third less HiGHS time); the programs themselves, as the SFT samples show them, set none.
    _WorkerState.sandbox = Sandbox(SandboxSettings(timeout=config.program_timeout, memory_mb=config.program_memory_mb,
                                                   output_limit_kb=1024, workers=1,
                                                   highs_defaults=verify_highs_options()))
    _WorkerState.sandbox.start()
    if silence_stdout:  # a pool worker: close the sandbox (and reap its server) when the worker exits
        from multiprocessing.util import Finalize

        Finalize(_WorkerState, close_worker, exitpriority=10)
    _WorkerState.families = {split: split_families(config, split) for split in SPLIT_NAMES}


def _exit_on_terminate(*_) -> None:
    """A pool worker's SIGTERM: exit through Python so the finalizers run, but never hang the pool's join:
    the signal may land while the worker holds a lock a finalizer needs, so a watchdog ends the process
    after a few seconds whatever the finalizers do."""
    _WorkerState.terminating = True
    watchdog = threading.Timer(10.0, os._exit, args=(1,))
    watchdog.daemon = True
    watchdog.start()
    sys.exit(1)


def _quiet_while_terminating(args) -> None:
    """A pool worker's thread exceptions, except while it is being terminated: then a helper thread of the
    solve it was in (Pyomo's output tee reads a pipe the exit closes) may fail with a closed descriptor,
    which is not an error of the run and must not reach the user's console."""
    if getattr(_WorkerState, "terminating", False):
        return
    threading.__excepthook__(args)


def close_worker() -> None:
    if _WorkerState.sandbox is not None:
        _WorkerState.sandbox.close()
        _WorkerState.sandbox = None


def process_candidate(task: tuple[str, int]) -> dict:
    """Make and verify one candidate; return {"index", "record", "cpt", "sft"} or {"index", "reject"}, with
    "seconds": where the time went, and in "sandbox_cpu" the CPU time its programs (and the sandbox server
    running them) used, which the worker's own resource accounting does not see under bubblewrap."""
    sandbox = _WorkerState.sandbox
    before = sandbox.cpu_s if sandbox is not None else 0.0
    result = _process_candidate(task)
    if sandbox is not None:
        result["seconds"]["sandbox_cpu"] = sandbox.cpu_s - before
    return result


def _process_candidate(task: tuple[str, int]) -> dict:
    from data_synth.verify import verify_instance

    split, index = task
    config = _WorkerState.config
    started = time.perf_counter()
    try:
        candidate = make_candidate(config, split, index, _WorkerState.families[split])
    except Exception as error:
        return {"index": index, "seconds": {"total": time.perf_counter() - started},
                "reject": {"id": f"{split}-s{config.seed}-{index:06d}", "family": None, "difficulty": None,
                           "reason": "sample_error", "detail": f"{type(error).__name__}: {error}"}}
    family, data = candidate.family, candidate.data
    reject_base = {"id": candidate.id, "family": family.name, "difficulty": candidate.difficulty}
    try:
        statement = candidate_statement(candidate)
        formulation = family.formulation(data)
        program = render_program(family, data, candidate.representation, candidate.program_style)
    except Exception as error:
        return {"index": index, "seconds": {"total": time.perf_counter() - started},
                "reject": {**reject_base, "reason": "render_error", "detail": f"{type(error).__name__}: {error}"}}
    try:
        verification = verify_instance(
            family, data, program, program_data(data, candidate.representation), _WorkerState.sandbox,
            expect_infeasible=candidate.infeasible, program_timeout=config.program_timeout,
            solver_time_limit=config.solver_time_limit, statement=statement,
            representation=candidate.representation)
    except Exception as error:  # e.g. the sandbox server died twice: count it, keep going
        return {"index": index, "seconds": {"total": time.perf_counter() - started},
                "reject": {**reject_base, "reason": "verify_error", "detail": f"{type(error).__name__}: {error}"}}
    seconds = dict(verification.seconds)
    if not verification.passed:
        seconds["total"] = time.perf_counter() - started
        return {"index": index, "seconds": seconds,
                "reject": {**reject_base, "reason": verification.reject_reason,
                           "detail": verification.reject_detail}}
    statement_source = "template"
    teacher_outcome = None
    if config.teacher_endpoint and candidate.representation in ("text", "table"):
        statement, teacher_outcome = _teacher_rewrite(config, statement, data, verification)
        if teacher_outcome == "accepted":
            statement_source = "teacher"
    solution_values = {name: {_index_key(i): v for i, v in values.items() if v is not None and abs(v) > 1e-9}
                       for name, values in verification.x.items()}
    record = {
        "id": candidate.id,
        "split": split,
        "family": family.name,
        "problem_type": family.problem_type_for(data),
        "sense": family.sense,
        "variant": family.variant_of(data),
        "difficulty": candidate.difficulty,
        "scenario": candidate.scenario.key,
        "skeleton": candidate.skeleton.key,
        "program_style": candidate.program_style.key,
        "industry": candidate.scenario.industry,
        "representation": candidate.representation,
        "answer_style": candidate.answer_style,
        "seed": config.seed,
        "index": index,
        "instance": instance_hash(family.name, data),
        "parameters": data,
        "statement": statement,
        "statement_source": statement_source,
        "formulation": formulation,
        "program": program,
        "data": program_data(data, candidate.representation),
        "status": verification.status,
        "objective": verification.objective,
        "solution": {"status": verification.status, "objective": verification.objective,
                     "variables": solution_values},
        "verification": [check.as_dict() for check in verification.checks],
        "difficulty_measures": {
            "variables": sum(len(values) for values in verification.x.values()),
            "constraints": sum(1 for _ in family.constraint_rows(data, verification.x)) if verification.x else None,
        },
    }
    matrix = verification.matrix
    cpt = {"id": candidate.id, "source_id": candidate.id, "instance": record["instance"], "family": family.name,
           "text": cpt_document(record, family, candidate.scenario, verification.x,
                                matrix.row_duals if matrix else {}, matrix.reduced_costs if matrix else {})}
    sft = sft_sample(record, candidate.answer_style)
    seconds["total"] = time.perf_counter() - started
    return {"index": index, "seconds": seconds, "record": record, "cpt": cpt, "sft": sft,
            "teacher": teacher_outcome}


def teacher_endpoint(config: SynthConfig):
    """The `[synth]` teacher settings as a `data_synth.teacher.TeacherEndpoint`."""
    from data_synth.teacher import TeacherEndpoint

    return TeacherEndpoint(config.teacher_endpoint, config.teacher_model,
                           api_key=os.environ.get(config.teacher_api_key_env, "") if config.teacher_api_key_env else "",
                           timeout=config.teacher_timeout, retries=config.teacher_retries)


def _teacher_rewrite(config: SynthConfig, statement: str, data: dict, verification) -> tuple[str, str]:
    """(statement to keep, teacher outcome): the teacher's rewrite when every check accepts it, re-verified by
    running the program the teacher writes from it (check 3's rules: its solve must reach the objective)."""
    from data_synth.teacher import rewrite_statement
    from data_synth.verify import check_program

    def reverify(program: str) -> tuple[bool, str]:
        check = check_program(_WorkerState.sandbox, program, None, verification.status, verification.objective,
                              config.program_timeout, {})
        return check.passed, check.detail

    rewrite = rewrite_statement(statement, data, verification.objective, teacher_endpoint(config),
                                reverify=reverify if config.teacher_reverify else None)
    return (rewrite.text if rewrite.accepted else statement), rewrite.outcome


# ---------------------------------------------------------------------------------------- main side

@dataclass
class Progress:
    split: str
    kept: int
    target: int
    rejected: int
    candidates: int


@dataclass
class SynthResult:
    out: Path
    counts: dict = field(default_factory=dict)
    per_family: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class _Executor:
    """Runs `process_candidate` over tasks in a process pool (or in this process for one worker),
    yielding results in task order. At most `window` tasks are in flight, so stopping early wastes
    little and the pool can be closed gracefully (each worker then closes its sandbox)."""

    def __init__(self, config: SynthConfig) -> None:
        self.config = config
        self.pool = None
        # in flight per worker: results are taken in index order, so one slow candidate (a hard MILP)
        # must not leave the other workers idle while it runs
        self.window = 12 * max(1, config.workers)
        if config.workers > 1:
            import multiprocessing

            # spawn: the parent may run rich's refresh thread; a fork would copy its locks
            context = multiprocessing.get_context("spawn")
            # Ctrl-C reaches every process of the terminal's group: workers started with SIGINT ignored
            # (Python keeps an inherited SIG_IGN) never print a traceback of their own, even while they
            # import; the main process stops the pool and says how to resume
            in_main_thread = threading.current_thread() is threading.main_thread()  # signal.signal needs it
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main_thread else None
            try:
                self.pool = context.Pool(config.workers, initializer=init_worker, initargs=(config,))
            finally:
                if in_main_thread:
                    signal.signal(signal.SIGINT, previous)
        else:
            init_worker(config, silence_stdout=False)

    def map(self, tasks: list[tuple[str, int]]):
        if self.pool is None:
            yield from map(process_candidate, tasks)
            return
        pending: deque = deque()
        remaining = iter(tasks)
        for task in itertools.islice(remaining, self.window):
            pending.append(self.pool.apply_async(process_candidate, (task,)))
        while pending:
            result = pending.popleft().get()
            task = next(remaining, None)
            if task is not None:
                pending.append(self.pool.apply_async(process_candidate, (task,)))
            yield result

    def close(self, graceful: bool = True) -> None:
        if self.pool is not None:
            if graceful:
                self.pool.close()  # lets the few in-flight tasks finish, then workers exit cleanly
            else:
                self.pool.terminate()  # their sandbox servers die with them (die_with_parent, stdin closed)
            self.pool.join()
            # drop it now: its queues' semaphores are released when it is collected, not at exit (where
            # an interrupted run would still hold it through the traceback and the tracker would warn)
            self.pool = None
        else:
            close_worker()

    def stream(self, split: str, start: int) -> _Stream:
        """The candidates (split, start), (split, start + 1), ... in order, across block boundaries: the
        workers go on with the next block's candidates while this process writes a finished block."""
        return _Stream(self, split, start)


class _Stream:
    """One split's candidates from `start` on, as `_Executor.stream` hands them out: `take(ahead)` returns
    the next candidate's result and keeps up to `ahead` later candidates in flight (the caller bounds it
    by what the split still needs, so the tasks left running when the split completes are few)."""

    def __init__(self, executor: _Executor, split: str, start: int) -> None:
        self.executor, self.split = executor, split
        self.position = start  # the index whose result `take` returns next
        self.submitted = start
        self.pending: deque = deque()

    def take(self, ahead: int) -> dict:
        pool = self.executor.pool
        if pool is None:
            self.position += 1
            return process_candidate((self.split, self.position - 1))
        ahead = max(0, min(ahead, self.executor.window))
        while self.submitted <= self.position + ahead:
            self.pending.append(pool.apply_async(process_candidate, ((self.split, self.submitted),)))
            self.submitted += 1
        self.position += 1
        return self.pending.popleft().get()



def _block_results(stream: _Stream, config: SynthConfig, needed: int, seen: int, kept: int):
    """One block's results from its split's stream, in index order. `needed` problems were still wanted
    when the block began: while the split's keep rate so far says fewer candidates than the window will
    complete it, only those (and one per worker to spare) are kept in flight."""
    rate = max(kept / seen, 0.05) if seen >= 32 else PRIOR_KEEP_RATE
    got = 0
    for _ in range(config.block_size):
        wanted = math.ceil(max(needed - got, 0) / rate)  # candidates still needed, this one included
        result = stream.take(wanted - 1 + max(1, config.workers))
        got += "reject" not in result
        yield result


def _block_paths(out: Path, split: str, block: int) -> dict[str, Path]:
    name = f"shard-{block:05d}.jsonl"
    if split == "train":
        paths = {"problems": out / "problems" / name, "cpt": out / "cpt_docs" / name, "sft": out / "sft" / name}
    else:
        paths = {"problems": out / "eval" / "problems" / name}
    paths["rejects"] = out / "blocks" / f"{split}-{block:05d}.rejects.jsonl"
    paths["marker"] = out / "blocks" / f"{split}-{block:05d}.json"
    return paths


# ------------------------------------------------------------------------------------ sharded tasks

def round_folder(out: Path, split: str, block: int, blocks: list[tuple[str, int]]) -> Path:
    """Where the executor of the round that starts at (split, block) logs and keeps its completion markers;
    the name carries a digest of the round's blocks, so a different plan never reuses another's markers."""
    digest = hashlib.sha256(json.dumps(blocks).encode()).hexdigest()[:10]
    return Path(out) / "blocks" / "executor" / f"{split}-{block:05d}-{digest}"


def _raw_path(out: Path, split: str, block: int) -> Path:
    """A block's task results as verified, before duplicates are dropped and before the cut at `n`."""
    return Path(out) / "blocks" / "raw" / f"{split}-{block:05d}.jsonl"


class BlockTask:
    """One round of sharded synthesis as an executor's pipeline step (a callable `(data, rank, world_size)`,
    as datatrove's executors run them). Task `rank` of `world_size` verifies the blocks `blocks[rank::world_size]`
    of the round, each whole, and writes each block's results to `blocks/raw/<split>-<b>.jsonl` atomically; a
    block whose file exists is skipped, so a task killed halfway redoes only its unfinished blocks. The
    results are what `process_candidate` returns, which depends only on (split, seed, index): whichever task
    verifies a block, the main process merges the same results in index order (`synthesize`)."""

    def __init__(self, config: SynthConfig, out: Path, blocks: list[tuple[str, int]], workers: int = 1) -> None:
        self.config = dataclasses.replace(config, workers=max(1, workers))
        self.out = Path(out).resolve()
        self.blocks = list(blocks)

    def mine(self, rank: int, world_size: int) -> list[tuple[str, int]]:
        return self.blocks[rank::world_size]

    def __call__(self, data=None, rank: int = 0, world_size: int = 1):
        todo = [(split, block) for split, block in self.mine(rank, world_size)
                if not _raw_path(self.out, split, block).is_file()]
        if not todo:
            return data
        size = self.config.block_size
        if self.config.workers > 1:
            executor = _Executor(self.config)
        else:  # the task's process is the worker: the executor's tasks are the parallelism
            executor = None
            init_worker(self.config, silence_stdout=True)
        finished = False
        try:
            for split, block in todo:
                tasks = [(split, i) for i in range(block * size, (block + 1) * size)]
                verify = executor.map(tasks) if executor is not None else map(process_candidate, tasks)
                write_text_atomic(_raw_path(self.out, split, block), _jsonl(list(verify)))
            finished = True
        finally:
            if executor is not None:
                executor.close(graceful=finished)
            else:
                close_worker()
        return data


@dataclass
class Sharding:
    """How `synthesize` runs its candidates as sharded tasks: `run(pipeline, logging_dir)` runs the pipeline
    (one `BlockTask`) as `tasks` tasks on an executor and returns when all have finished (trex_cli's synth
    stage passes datatrove's local, Slurm or Ray executor); `workers` is each task's own worker count."""

    tasks: int
    run: Callable[[list, Path], object]
    workers: int = 1


PRIOR_KEEP_RATE = 0.75  # the share of candidates kept, before a split has shown its own


def plan_round(config: SynthConfig, out: Path, split: str, block: int, remaining: int, keep_rate: float | None,
               tasks: int) -> list[tuple[str, int]]:
    """The blocks one round verifies: from `block` on, enough for `remaining` more problems at the split's
    keep rate so far (a prior when it has none) with a tenth to spare, and at least one per task; the first
    train round (from block 0) also takes the eval split's first blocks, so one round usually covers both
    splits. The plan depends only on what was merged before it (blocks a killed round finished are in it
    and skipped by their task), so a rerun plans the same round and finds its completion markers."""
    def wanted(split_: str, first: int, left: int, rate: float | None) -> list[tuple[str, int]]:
        per_block = max(rate if rate is not None else PRIOR_KEEP_RATE, 0.02) * config.block_size
        count = max(1, -(-int(left * 1.1) // max(1, int(per_block))))
        limit = (1000 * max(left, 1) + 10_000) // config.block_size + 1  # synthesize's give-up bound
        return [(split_, b) for b in range(first, first + min(count, limit))
                if not _block_paths(out, split_, b)["marker"].is_file()]

    blocks = wanted(split, block, remaining, keep_rate)
    if split == "train" and block == 0 and config.eval_n > 0:
        blocks += wanted("eval", 0, config.eval_n, keep_rate)
    while len(blocks) < tasks:  # every task gets a block: spare blocks are used if the split falls short
        last_split, last = blocks[-1] if blocks else (split, block - 1)
        blocks.append((last_split, last + 1))
    return blocks


class _ShardedResults:
    """The main process's side of sharded synthesis: a block's results are read from the file its task
    wrote; a missing one starts a round of tasks (`plan_round`) and waits for it."""

    def __init__(self, config: SynthConfig, out: Path, sharding: Sharding,
                 on_progress: Callable[[Progress], None] | None) -> None:
        self.config, self.out, self.sharding, self.on_progress = config, Path(out), sharding, on_progress
        self.rounds = 0

    def block(self, split: str, block: int, kept: int, seen: int, target: int, rejected: int) -> list[dict]:
        path = _raw_path(self.out, split, block)
        if not path.is_file():
            rate = kept / seen if seen >= 32 else None
            blocks = plan_round(self.config, self.out, split, block, target - kept, rate, self.sharding.tasks)
            self.rounds += 1
            task = BlockTask(self.config, self.out, blocks, self.sharding.workers)
            logging_dir = round_folder(self.out, split, block, blocks)
            with _RoundProgress(self.out, blocks, split, kept, target, rejected, seen, self.on_progress):
                self.sharding.run([task], logging_dir)
            if not path.is_file():
                raise RuntimeError(f"the tasks finished but {path} is missing; see the task logs in {logging_dir}/logs "
                                   "and run the same command again")
        return _read_jsonl(path)

    def done(self, split: str, block: int) -> None:
        _raw_path(self.out, split, block).unlink(missing_ok=True)


class _RoundProgress:
    """While a round runs, read the block files its tasks finish and report the split's progress (kept
    before duplicates are dropped: the merge after the round gives the exact count)."""

    def __init__(self, out: Path, blocks, split: str, kept: int, target: int, rejected: int, seen: int,
                 on_progress) -> None:
        self.paths = [_raw_path(out, s, b) for s, b in blocks if s == split]
        self.split, self.kept, self.target, self.rejected, self.seen = split, kept, target, rejected, seen
        self.on_progress = on_progress
        self.stop = threading.Event()
        self.thread = None

    def _watch(self) -> None:
        counted: set[Path] = set()
        kept, rejected, seen = self.kept, self.rejected, self.seen
        while not self.stop.wait(0.5):
            for path in self.paths:
                if path in counted or not path.is_file():
                    continue
                counted.add(path)
                try:
                    rows = _read_jsonl(path)
                except (OSError, json.JSONDecodeError):
                    continue
                seen += len(rows)
                rejects = sum("reject" in row for row in rows)
                rejected += rejects
                kept += len(rows) - rejects
                self.on_progress(Progress(self.split, min(kept, self.target), self.target, rejected, seen))

    def __enter__(self):
        if self.on_progress is not None:
            self.thread = threading.Thread(target=self._watch, name="trex-synth-round-progress", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *_):
        self.stop.set()
        if self.thread is not None:
            self.thread.join()


def synthesize(config: SynthConfig, out: Path, on_progress: Callable[[Progress], None] | None = None,
               sharding: Sharding | None = None) -> SynthResult:
    """Synthesize into the folder `out`, resuming from its finished blocks; see the module docstring.
    With `sharding`, the candidates are verified by sharded tasks on an executor (`BlockTask`) and this
    process merges their block files; the records are the same. Returns the counts and summary the stage's
    manifest records."""
    check_config(config)
    if config.teacher_endpoint:
        from data_synth.teacher import probe

        probe(teacher_endpoint(config))  # an endpoint that is down is an error before any work
    out = Path(out)
    seen_hashes: set[str] = set()
    timing = Counter()
    teacher = Counter()
    per_family: dict[str, Counter] = defaultdict(Counter)
    executor: _Executor | None = None
    stream: _Stream | None = None
    sharded = _ShardedResults(config, out, sharding, on_progress) if sharding is not None else None
    wall_started = time.perf_counter()
    verified_new = 0
    try:
        for split in SPLIT_NAMES:
            target = config.n if split == "train" else config.eval_n
            kept = rejected = candidates = 0
            seen = 0  # candidates of this split merged so far, finished blocks included (the keep rate)
            block = 0
            if on_progress and target:
                on_progress(Progress(split, 0, target, 0, 0))
            while kept < target:
                paths = _block_paths(out, split, block)
                first = block * config.block_size
                if paths["marker"].is_file():  # finished earlier: take its statements and counts
                    marker = json.loads(paths["marker"].read_text())
                    records = _read_jsonl(paths["problems"])
                    rejects = _read_jsonl(paths["rejects"])
                    if len(records) != marker["kept"]:
                        raise ValueError(f"{paths['problems']} does not match its marker; rerun with --force")
                    seen_hashes.update(r["instance"] for r in records)
                    if sharded is not None:
                        sharded.done(split, block)
                else:
                    if sharded is not None:
                        results = iter(sharded.block(split, block, kept, seen, target, rejected))
                    else:
                        if executor is None:
                            executor = _Executor(config)
                        if stream is None or stream.split != split or stream.position != first:
                            stream = executor.stream(split, first)
                        results = _block_results(stream, config, target - kept, seen, kept)
                    records, cpts, sfts, rejects = [], [], [], []
                    for result in results:
                        candidates += 1
                        for key, value in result["seconds"].items():
                            timing[key] += value
                        if result.get("teacher"):
                            teacher[result["teacher"]] += 1
                        if "reject" in result:
                            rejects.append(result["reject"])
                        else:
                            record = result["record"]
                            digest = record["instance"]
                            if digest in seen_hashes:
                                rejects.append({"id": record["id"], "family": record["family"],
                                                "difficulty": record["difficulty"], "reason": "duplicate_instance",
                                                "detail": "the same instance of the family was kept before"})
                            else:
                                seen_hashes.add(digest)
                                for check in record["verification"]:
                                    if check["name"] == "quality":
                                        check["detail"] += "; instance unique"
                                records.append(record)
                                cpts.append(result["cpt"])
                                sfts.append(result["sft"])
                        if kept + len(records) >= target:
                            break  # the block ends at the candidate that completes the split
                        if on_progress:
                            on_progress(Progress(split, kept + len(records), target,
                                                 rejected + len(rejects), candidates))
                    verified_new += len(records)
                    write_text_atomic(paths["problems"], _jsonl(records))
                    if split == "train":
                        write_text_atomic(paths["cpt"], _jsonl(cpts))
                        write_text_atomic(paths["sft"], _jsonl(sfts))
                    write_text_atomic(paths["rejects"], _jsonl(rejects))
                    write_json_atomic(paths["marker"], {"split": split, "block": block, "kept": len(records),
                                                        "rejected": len(rejects)})
                    if sharded is not None:
                        sharded.done(split, block)
                for record in records:
                    counter = per_family[record["family"]]
                    counter[f"{split}_kept"] += 1
                    counter["infeasible"] += record["status"] == "infeasible"
                for reject in rejects:
                    per_family[reject["family"] or "?"][f"reject:{reject['reason']}"] += 1
                kept += len(records)
                rejected += len(rejects)
                seen += len(records) + len(rejects)
                if on_progress:
                    on_progress(Progress(split, kept, target, rejected, candidates))
                block += 1
                if block * config.block_size > 1000 * max(target, 1) + 10_000:
                    raise RuntimeError(f"{split}: almost every candidate is rejected; see {out}/blocks/*.rejects.jsonl")
    except BaseException:
        if executor is not None:  # interrupted: stop the workers now; finished blocks are kept
            executor.close(graceful=False)
            executor = None
        raise
    finally:
        if executor is not None:
            executor.close()
    if sharded is not None:  # the blocks verified past the cut at n
        shutil.rmtree(out / "blocks" / "raw", ignore_errors=True)
    wall = time.perf_counter() - wall_started
    return _finish(out, per_family, timing, teacher, wall, verified_new)


def _finish(out: Path, per_family: dict, timing: Counter, teacher: Counter, wall: float,
            verified_new: int) -> SynthResult:
    rejects_rows: list[dict] = []
    for split in SPLIT_NAMES:
        for path in sorted((out / "blocks").glob(f"{split}-*.rejects.jsonl")):
            rejects_rows.extend(_read_jsonl(path))
    write_text_atomic(out / "rejects.jsonl", _jsonl(rejects_rows))

    eval_records = [r for path in sorted((out / "eval" / "problems").glob("shard-*.jsonl")) for r in _read_jsonl(path)]
    for record in eval_records:
        if record["representation"] == "file":
            write_json_atomic(out / "eval" / "data" / f"{record['id']}.json", record["data"])
    write_text_atomic(out / "eval" / "test.jsonl", _jsonl([eval_item(r) for r in eval_records]))

    train_count = sum(len(_read_jsonl(p)) for p in sorted((out / "problems").glob("shard-*.jsonl")))
    overlap = split_overlap(out, eval_records)
    reasons = Counter(row["reason"] for row in rejects_rows)
    families_table = {name: dict(sorted(counter.items())) for name, counter in sorted(per_family.items())}
    counts = {
        "problems": train_count,
        "eval_items": len(eval_records),
        "cpt_docs": train_count,
        "sft_samples": train_count,
        "rejects": len(rejects_rows),
        "families": len({name for name, c in per_family.items() if c.get("train_kept") or c.get("eval_kept")}),
        "infeasible": sum(c.get("infeasible", 0) for c in per_family.values()),
    }
    summary = {
        "counts": counts,
        "reject_reasons": dict(reasons.most_common()),
        "per_family": families_table,
        "this_run": {"wall_s": round(wall, 3), "verified": verified_new,
                     "verified_per_s": round(verified_new / wall, 3) if wall > 0 else None,
                     "worker_seconds": {k: round(v, 3) for k, v in sorted(timing.items())}},
        "teacher": dict(teacher),
        "overlap": overlap,
    }
    write_json_atomic(out / "summary.json", summary)
    return SynthResult(out, counts, families_table, summary)


def split_overlap(out: Path, eval_records: list[dict]) -> dict:
    """The eval/train 13-gram overlap (`data_synth.statements.overlap_report`): every message of the
    training SFT samples against the eval questions (`en_question`, what decontamination reads)."""
    train_texts = (" ".join(message["content"] for message in sample["messages"])
                   for path in sorted((out / "sft").glob("shard-*.jsonl")) for sample in _read_jsonl(path))
    return overlap_report(train_texts, [record["statement"] for record in eval_records])
