"""One eval run, start to finish: load benchmarks, generate, execute in the sandbox, grade, report.

`run_eval(config, out_dir)` is what `trex eval` and `trex run` call. The output folder is a stage
folder (manifest written last): a finished folder with the same settings is a no-op; an interrupted
one resumes: completions come back from `generations.jsonl` (the response cache) and samples already
graded in `samples.jsonl` are not run again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trex_cli.artifacts import (
    StageFolder,
    StageState,
    package_versions,
    sha256_file,
    write_json_atomic,
    write_text_atomic,
)
from trex_cli.console import out, warn
from trex_cli.evaluate.benchmarks import Benchmark, BenchmarkItem, load_benchmark
from trex_cli.evaluate.config import SUITES, EvalConfig
from trex_cli.evaluate.generators import Completion, GenerationRequest, ResponseCache, build_generator
from trex_cli.evaluate.grading import (
    RULES,
    STRUCTURE_RULE,
    Prediction,
    Truth,
    check_rule_name,
    classify,
    printed_infeasible,
    printed_objective,
    verdicts,
)
from trex_cli.evaluate.prompts import PromptBuilder, extract_program
from trex_cli.evaluate.report import (
    draw_chart,
    git_hash,
    lm_eval_results,
    render_markdown,
    score_records,
    suite_summary,
)
from trex_sandbox import ExecutionResult, Sandbox, SandboxSettings

EXECUTION_ENV = "TREX_ALLOW_CODE_EXECUTION"
SAMPLES_FILE = "samples.jsonl"
CACHE_FILE = "generations.jsonl"
LM_EVAL_FILE = "results_lm_eval.json"  # the same scores in lm-evaluation-harness's results layout
OPERATIONAL_SETTINGS = (
    "concurrency", "request_timeout", "max_retries", "retry_backoff_s", "workers", "allow_code_execution",
    "isolation", "api_key_env",
)  # fmt: skip


def execution_allowed(config: EvalConfig) -> bool:
    return config.allow_code_execution or os.environ.get(EXECUTION_ENV, "").lower() in ("1", "true", "yes")


def prediction_from_record(record: dict) -> Prediction:
    """Rebuild what the rules see from a stored sample record (for regrading)."""
    return Prediction(
        model_objective=record.get("objective"),
        status=record.get("solver_status") or "unknown",
        printed_objective=record.get("printed_objective"),
        printed_infeasible=bool(record.get("printed_infeasible")),
        exit_ok=record.get("exit_code") == 0 and not record.get("timed_out") and not record.get("harness_error"),
        timed_out=bool(record.get("timed_out")),
        gap=record.get("gap"),
        stdout=record.get("stdout") or "",
    )


def grade_sample(
    item: BenchmarkItem,
    sample: int,
    messages: list[dict],
    completion: Completion,
    program: str | None,
    syntax_error: str | None,
    execution: ExecutionResult | None,
    headline_rule: str,
) -> dict:
    """The sample record: what was asked, answered, run and concluded."""
    execution = execution or ExecutionResult()
    # The solve whose objective the program printed, not simply its last (an auxiliary model may follow).
    choice = execution.chosen_solve()
    solve = choice.solve or {}
    stdout = execution.stdout
    prediction = Prediction(
        model_objective=solve.get("objective"),
        status=solve.get("status", "unknown"),
        printed_objective=printed_objective(stdout),
        printed_infeasible=printed_infeasible(stdout),
        exit_ok=execution.exit_ok,
        timed_out=execution.timed_out,
        gap=solve.get("gap"),
        stdout=stdout,
    )
    truth: Truth = item.truth
    ran = program is not None and syntax_error is None
    structure = None
    if completion.error is not None:
        rule_verdicts = {name: False for name in ([STRUCTURE_RULE] if item.reference_model else RULES)}
        outcome, reason = "api_error", completion.error
    elif item.reference_model:
        structure = _grade_structure(item, execution) if ran else None
        rule_verdicts = {STRUCTURE_RULE: bool(structure and structure["equivalent"])}
        outcome, reason = _classify_structure(program, syntax_error, execution, structure)
    else:
        rule_verdicts = verdicts(prediction, truth) if ran else {name: False for name in RULES}
        outcome, reason = classify(
            has_code=program is not None,
            syntax_ok=syntax_error is None,
            pred=prediction,
            correct_under_default=rule_verdicts[headline_rule],
            truth=truth,
        )
        if syntax_error:
            reason = syntax_error
        elif outcome in ("runtime error", "timeout") and execution.limit:
            reason = f"{execution.limit} limit reached" + (f" ({execution.error})" if execution.error else "")
        elif outcome == "runtime error":
            last_line = next((line for line in reversed(execution.stderr.splitlines()) if line.strip()), "")
            reason = execution.error or last_line or f"exit status {execution.exit_code}, signal {execution.signal}"
    return {
        "benchmark": item.benchmark,
        "item_id": item.id,
        "sample": sample,
        "content_hash": item.content_hash,
        "benchmark_sha256": item.version,
        "answer": item.answer,
        "truth": truth.describe(),
        "prompt": messages,
        "completion": completion.text,
        "reasoning": completion.reasoning,
        "finish_reason": completion.finish_reason,
        "usage": completion.usage,
        "program": program,
        "stdout": stdout,
        "stderr": execution.stderr,
        "stdout_truncated": execution.stdout_truncated,
        "exit_code": execution.exit_code,
        "signal": execution.signal,
        "timed_out": execution.timed_out,
        "limit": execution.limit,
        "harness_error": execution.error,
        "wall_s": execution.wall_s,
        "cpu_s": execution.cpu_s,
        "solver_api": solve.get("api"),
        "solver_status": prediction.status,
        "solve_calls": len(execution.solves),
        "solve_choice": choice.reason,
        "solve_order": solve.get("order"),
        "objective": prediction.model_objective,
        "objective_source": solve.get("objective_source", "model" if solve.get("objective") is not None else None),
        "printed_objective": prediction.printed_objective,
        "printed_infeasible": prediction.printed_infeasible,
        "gap": prediction.gap,
        "model_lp": execution.model_lp,
        "equivalence": structure,
        "metadata": item.metadata,
        "outcome": outcome,
        "reason": reason,
        "verdicts": rule_verdicts,
    }


def _grade_structure(item: BenchmarkItem, execution: ExecutionResult) -> dict | None:
    """B4O-ORGEval: the checker's verdict on the LP the program built, or None when it built none."""
    import tempfile

    from trex_cli.evaluate.equivalence import check_equivalence

    if not execution.model_lp:
        return None
    with tempfile.TemporaryDirectory(prefix="trex-orgeval-") as folder:
        candidate = Path(folder) / "candidate.lp"
        candidate.write_text(execution.model_lp, encoding="utf-8")
        result = check_equivalence(item.reference_model, candidate)
    return {"equivalent": result.equivalent, "reason": result.reason, "checks": result.checks}


def _classify_structure(
    program: str | None, syntax_error: str | None, execution: ExecutionResult, structure: dict | None
) -> tuple[str, str]:
    if program is None:
        return "no code", "no program found in the completion"
    if syntax_error:
        return "syntax error", syntax_error
    if execution.timed_out:
        return "timeout", f"{execution.limit or 'time'} limit reached"
    if structure is None:
        if not execution.exit_ok:
            last_line = next((line for line in reversed(execution.stderr.splitlines()) if line.strip()), "")
            return "runtime error", execution.error or last_line or f"exit status {execution.exit_code}"
        return "no model", "the program built no gurobipy or Pyomo model (none solved, no global `model`)"
    return ("correct" if structure["equivalent"] else "not equivalent"), structure["reason"]


def _check_syntax(program: str) -> str | None:
    try:
        compile(program, "program.py", "exec")
    except (SyntaxError, ValueError) as error:
        line = getattr(error, "lineno", None)
        return f"SyntaxError: {getattr(error, 'msg', error)}" + (f" (line {line})" if line else "")
    return None


def load_benchmarks(config: EvalConfig, synth_dir: str | Path | None = None) -> list[Benchmark]:
    benchmarks = []
    specs = SUITES[config.suite]["benchmarks"] if config.suite else config.benchmarks
    for spec in specs:
        if spec.lower() == "synth" and synth_dir is not None:
            spec = str(Path(synth_dir) / "eval" / "test.jsonl")
        benchmark = load_benchmark(
            spec,
            config.benchmark_dir or None,
            question_field=config.question_field,
            answer_field=config.answer_field,
            id_field=config.id_field,
            limit=config.limit,
        )
        if spec.lower().endswith("test.jsonl") and benchmark.layout == "trex-eval-split":
            benchmark.name = "synth"
            for item in benchmark.items:
                item.benchmark = "synth"
        benchmarks.append(benchmark)
    names = [b.name for b in benchmarks]
    if len(set(names)) != len(names):
        raise ValueError(f"benchmarks {names}: two have the same name; give each once")
    return benchmarks


def _read_done(path: Path) -> dict[tuple[str, str, int], dict]:
    done = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line from an interruption
            if record.get("outcome") == "api_error":
                continue  # asked again on the next run: the endpoint or its limits may have changed
            done[(record["benchmark"], record["item_id"], record["sample"])] = record
    return done


def eval_stage_folder(
    config: EvalConfig, out_dir: Path, benchmarks: list[Benchmark], generator, synth_dir: str | Path | None,
    force: bool = False,
) -> StageFolder:
    """The eval's stage folder: what decides its samples (settings, benchmark versions, completions
    file, weights) and the stage folders it reads (synth split, the model's training stage)."""
    # Settings that change how fast, not what comes out, stay out of the fingerprint: an eval
    # interrupted by rate limits can resume with fewer requests in flight.
    outcome_settings = {k: v for k, v in dataclasses.asdict(config).items() if k not in OPERATIONAL_SETTINGS}
    stage_config = {
        "eval": outcome_settings,
        "benchmarks": {b.name: b.version for b in benchmarks},
        "completions_sha256": sha256_file(Path(config.completions)) if config.backend == "file" else None,
    }
    inputs = [Path(synth_dir)] if synth_dir is not None and (Path(synth_dir) / "manifest.json").is_file() else []
    if config.backend == "hf":
        # A retrained export in the same place must not look "already done": follow the train stage's
        # manifest (the export lives in train/<stage>/hf) and the weights' sizes and times.
        checkpoint = Path(config.checkpoint)
        inputs += [folder for folder in (checkpoint, checkpoint.parent) if (folder / "manifest.json").is_file()][:1]
        stage_config["weights"] = generator.identity()["weights"]
    return StageFolder(Path(out_dir), "eval", stage_config, inputs=inputs, force=force)


def run_eval(
    config: EvalConfig,
    out_dir: str | Path,
    *,
    name: str | None = None,
    synth_dir: str | Path | None = None,
    force: bool = False,
    show_progress: bool = True,
    sandbox_settings: SandboxSettings | None = None,
) -> dict:
    """Run one eval into `out_dir`; returns the results dict (also written as results.json)."""
    out_dir = Path(out_dir)
    headline_rule = check_rule_name(config.rule, "[eval] rule")
    if config.suite and config.suite not in SUITES:
        raise ValueError(f"[eval] suite {config.suite!r}: use one of {', '.join(SUITES)} (or leave it empty)")
    if config.samples < 1:
        raise ValueError(f"[eval] samples = {config.samples}: must be at least 1")
    if not execution_allowed(config):
        raise ValueError(
            "trex eval runs the programs the model writes: pass --allow-code-execution (or set "
            f"{EXECUTION_ENV}=1, or [eval] allow_code_execution = true) to allow it"
        )
    benchmarks = load_benchmarks(config, synth_dir)
    generator = build_generator(config)
    prompt_builder = PromptBuilder(config.prompt, config.solver_library)
    stage = eval_stage_folder(config, out_dir, benchmarks, generator, synth_dir, force)
    state = stage.prepare()
    if state is StageState.DONE:
        return json.loads((out_dir / "results.json").read_text())

    samples_path = out_dir / SAMPLES_FILE
    done = _read_done(samples_path)
    cache = ResponseCache(out_dir / CACHE_FILE)
    settings = sandbox_settings or SandboxSettings(
        timeout=config.timeout,
        memory_mb=config.memory_mb,
        output_limit_kb=config.output_limit_kb,
        workers=config.workers or 2 * (os.cpu_count() or 1),
        isolation=config.isolation,
    )
    requests: list[GenerationRequest] = []
    for benchmark in benchmarks:
        for item in benchmark.items:
            messages = prompt_builder.messages(item)
            for sample in range(config.samples):
                if (item.benchmark, item.id, sample) not in done:
                    requests.append(GenerationRequest(item=item, sample=sample, messages=messages))
    total = sum(len(b.items) for b in benchmarks) * config.samples
    started = time.time()
    write_lock = threading.Lock()
    isolation = ""
    if requests:
        with Sandbox(settings, on_warning=warn) as sandbox:
            isolation = sandbox.isolation
            if show_progress:
                out.print(f"{len(requests)} samples to generate and run; programs run in {isolation}, {sandbox.workers} at once")
            progress = _Progress(total, len(done), show_progress)
            with ThreadPoolExecutor(max_workers=sandbox.workers) as pool, open(samples_path, "a", encoding="utf-8") as sink:
                futures = []

                def execute_and_grade(request: GenerationRequest, completion: Completion) -> None:
                    program = extract_program(completion.text) if completion.error is None else None
                    syntax_error = _check_syntax(program) if program else None
                    execution = None
                    if program and not syntax_error and completion.error is None:
                        capture = request.item.reference_model is not None
                        execution = sandbox.run(program, request.item.data_files, capture_model=capture)
                    record = grade_sample(
                        request.item, request.sample, request.messages, completion, program, syntax_error, execution, headline_rule
                    )
                    with write_lock:
                        sink.write(json.dumps(record) + "\n")
                        sink.flush()
                        done[(record["benchmark"], record["item_id"], record["sample"])] = record
                    progress.advance(record["outcome"])

                def on_done(request: GenerationRequest, completion: Completion) -> None:
                    futures.append(pool.submit(execute_and_grade, request, completion))

                try:
                    generator.generate(requests, on_done, cache)
                finally:
                    for future in futures:
                        future.result()
                    progress.close()
    records = sorted(done.values(), key=lambda r: (r["benchmark"], _natural(r["item_id"]), r["sample"]))
    write_text_atomic(samples_path, "".join(json.dumps(r) + "\n" for r in records))
    results = {
        "name": name or out_dir.name,
        "headline_rule": headline_rule,
        "config": dataclasses.asdict(config),
        "model": getattr(generator, "model", None) or (config.checkpoint or config.completions or None),
        "versions": package_versions(),
        "git_hash": git_hash(),
        "seeds": {"seed": config.seed, "per_sample": "seed + sample index"},
        "isolation": isolation or "(nothing executed in this invocation)",
        "benchmarks": {
            b.name: {"path": str(b.path), "sha256": b.version, "layout": b.layout, "items": len(b.items)} for b in benchmarks
        },
        "scores": score_records(records, headline_rule),
        "wall_time_s": round(time.time() - started, 2),
        "finished_at": time.time(),
    }
    if config.suite:
        results["suite"] = suite_summary(config.suite, results["scores"])
    write_json_atomic(out_dir / "results.json", results)
    write_json_atomic(out_dir / LM_EVAL_FILE, lm_eval_results(results))
    write_text_atomic(out_dir / "report.md", render_markdown(results, records))
    draw_chart(results, out_dir / "pass_at_1.png")
    counts = {"samples": len(records), **{b: s["rules"][s["headline_rule"]]["correct"] for b, s in results["scores"].items()}}
    stage.finish(counts=counts, extra={"headline_rule": headline_rule})
    return results


def _natural(item_id: str):
    return (0, int(item_id), "") if item_id.isdigit() else (1, 0, item_id)


class _Progress:
    """A rich progress bar over samples (quiet when show is False)."""

    def __init__(self, total: int, already: int, show: bool) -> None:
        self._progress = None
        if show:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[last]}"),
                TimeRemainingColumn(), console=out, transient=False,
            )  # fmt: skip
            self._progress.start()
            self._task = self._progress.add_task("eval", total=total, completed=already, last="")
        self._lock = threading.Lock()

    def advance(self, outcome: str) -> None:
        if self._progress is not None:
            with self._lock:
                self._progress.update(self._task, advance=1, last=outcome)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
