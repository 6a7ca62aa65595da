"""`trex eval`: zero-shot Pass@1 on OR modeling benchmarks, programs run in a sandbox and graded under
every published rule; `trex eval regrade` re-grades recorded predictions; `trex eval compare` lists
per-item wins and losses between two evals."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trex_cli.console import out, user_errors

app = typer.Typer(
    help="Zero-shot Pass@1 on OR modeling benchmarks (run an eval; regrade; compare).",
    invoke_without_command=True,
    no_args_is_help=False,
)

# command-line flag -> [eval] key; a flag given on the command line beats the recipe
FLAG_KEYS = (
    "benchmark_dir", "question_field", "answer_field", "id_field", "limit", "backend", "endpoint", "model",
    "checkpoint", "completions", "prompt", "solver_library", "temperature", "top_p", "max_tokens", "seed",
    "samples", "concurrency", "timeout", "memory_mb", "workers", "isolation", "rule", "suite", "api_key_env",
    "api_mode", "extra_body",
)  # fmt: skip


@app.callback()
@user_errors
def eval_command(
    context: typer.Context,
    benchmark: Annotated[
        list[str] | None,
        typer.Option("--benchmark", "-b", help="Benchmark name (nl4opt, optibench, b4o-feasible, industryor, mamo-easy, "
                     "mamo-complex, optmath, synth, ...) or a JSON / JSONL file; repeat for several."),
    ] = None,
    suite: Annotated[str | None, typer.Option(help="A named suite instead of --benchmark: trex (the paper's NL4OPT, OptiBench, B4O-Feasible, "
                     "B4O-ORGEval with its prompts and rules; results.json gets their mean).")] = None,
    benchmark_dir: Annotated[str | None, typer.Option(help="Folder the benchmark names are resolved in (else $TREX_BENCHMARK_DIR).")] = None,
    backend: Annotated[str | None, typer.Option(help="Where completions come from: openai, hf, file or gold.")] = None,
    endpoint: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1.")] = None,
    model: Annotated[str | None, typer.Option(help="Model name sent to the endpoint (default: the first it lists).")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="Environment variable holding the endpoint's API key (default OPENAI_API_KEY).")] = None,
    api_mode: Annotated[str | None, typer.Option(help="openai backend: chat, or completions (a plain-text prompt, for base models).")] = None,
    extra_body: Annotated[str | None, typer.Option(help='openai backend: JSON object added to every request body, e.g. \'{"top_k": 20}\'.')] = None,
    checkpoint: Annotated[str | None, typer.Option(help="hf backend: a trex HF export folder.")] = None,
    completions: Annotated[str | None, typer.Option(help="file backend: JSONL with id, completion (and sample).")] = None,
    prompt: Annotated[str | None, typer.Option(help="Prompt style: trex, trex-paper, synth (the prompt of the synthetic SFT samples), or a template file with {question}.")] = None,
    solver_library: Annotated[str | None, typer.Option(help="What the prompt asks programs to use: pyomo or gurobipy.")] = None,
    samples: Annotated[int | None, typer.Option(help="Completions per item (pass@k for k up to this).")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (paper: 0.6).")] = None,
    top_p: Annotated[float | None, typer.Option(help="Top-p (paper: 1.0).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Most new tokens per completion (paper: 9600).")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed; sample i uses seed + i.")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Requests in flight (openai backend).")] = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds per program (paper: 360).")] = None,
    memory_mb: Annotated[int | None, typer.Option(help="Address space a program may add, in MiB.")] = None,
    workers: Annotated[int | None, typer.Option(help="Programs run at once (0 = twice the CPU cores).")] = None,
    isolation: Annotated[str | None, typer.Option(help="auto, bwrap (require bubblewrap) or process (limits only).")] = None,
    question_field: Annotated[str | None, typer.Option(help="Field holding the question, for other layouts.")] = None,
    answer_field: Annotated[str | None, typer.Option(help="Field holding the reference answer, for other layouts.")] = None,
    id_field: Annotated[str | None, typer.Option(help="Field holding the item id (default: id, else the position).")] = None,
    limit: Annotated[int | None, typer.Option(help="At most this many items per benchmark (0 = all).")] = None,
    rule: Annotated[str | None, typer.Option(help="Headline rule: strict, trex-paper, orlm, sirl, opt-engine, optibench.")] = None,
    allow_code_execution: Annotated[
        bool, typer.Option("--allow-code-execution", help="Allow running the generated programs (or TREX_ALLOW_CODE_EXECUTION=1).")
    ] = False,
    name: Annotated[str | None, typer.Option(help="Name of this eval: its folder is <run dir>/eval/<name>.")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Output folder (overrides <run dir>/eval/<name>).")] = None,
    synth_dir: Annotated[Path | None, typer.Option(help="A synth folder whose eval split the name 'synth' means.")] = None,
    recipe: Annotated[Path | None, typer.Option(help="Recipe TOML whose [eval] table holds the defaults.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a recipe key, e.g. --set eval.samples=4.")] = None,
    force: Annotated[bool, typer.Option(help="Start again even when the folder holds a finished or other eval.")] = False,
) -> None:
    """Run an eval: generate completions, run each program in the sandbox, grade under every rule,
    and write samples.jsonl, results.json, report.md and a chart to <run dir>/eval/<name>."""
    if context.invoked_subcommand is not None:
        return
    from trex_cli.recipe import flag_overrides, load_recipe
    from trex_cli.run_layout import RunLayout
    from trex_cli.stages.eval import EvalStage

    given = {key: value for key, value in locals().items() if key in FLAG_KEYS}
    flags = flag_overrides({f"--{key.replace('_', '-')}": (f"eval.{key}", value) for key, value in given.items()})
    flags += flag_overrides({
        "--benchmark": ("eval.benchmarks",
                        [part for spec in benchmark for part in spec.split(",") if part] if benchmark else None),
        "--allow-code-execution": ("eval.allow_code_execution", True if allow_code_execution else None),
    })
    if suite:
        from trex_cli.evaluate.config import SUITES

        if suite not in SUITES:
            raise ValueError(f"--suite {suite!r}: use one of {', '.join(SUITES)}")
        if benchmark:
            raise ValueError(f"--suite {suite} names its own benchmarks ({', '.join(SUITES[suite]['benchmarks'])}); "
                             "drop --benchmark")
        # the suite's own prompt and rule, unless --prompt or --rule say otherwise
        flags += flag_overrides({"--suite": ("eval.prompt", None if prompt else SUITES[suite]["prompt"])})
        flags += flag_overrides({"--suite": ("eval.rule", None if rule else "trex-paper")})
    loaded = load_recipe(recipe, set_, flags)
    layout = RunLayout(loaded)
    stage = EvalStage(loaded, layout, name or _default_name(loaded.section("eval")), out=out_dir, synth_dir=synth_dir)
    with layout.stage_command():
        result = stage.run(force=force)
    if not result.ran:
        out.print(result.said())
    _print_summary(result.details, stage.folder)


def _default_name(config) -> str:
    detail = {
        "openai": config.model or "endpoint",
        "hf": Path(config.checkpoint).parent.name if config.checkpoint else "",
        "file": Path(config.completions).stem if config.completions else "",
        "gold": "reference",
    }.get(config.backend, "")
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in detail)
    return f"{config.backend}-{safe}" if safe else config.backend


def _print_summary(results: dict, folder: Path) -> None:
    from rich.table import Table

    headlines = sorted({score.get("headline_rule", results["headline_rule"]) for score in results["scores"].values()})
    table = Table(title=f"Pass@1 (%) by rule; headline: {', '.join(headlines) or results['headline_rule']}")
    table.add_column("benchmark")
    table.add_column("items", justify="right")
    from trex_cli.evaluate.report import RULE_ORDER

    rules = [r for r in RULE_ORDER if any(r in score["rules"] for score in results["scores"].values())]
    for rule in rules:
        table.add_column(rule, justify="right")
    for benchmark, score in results["scores"].items():
        cells = [
            f"{100 * score['rules'][r]['pass@1']:.2f} ± {100 * score['rules'][r]['pass@1_stderr']:.2f}" if r in score["rules"] else "-"
            for r in rules
        ]
        table.add_row(benchmark, str(score["items"]), *cells)
    out.print(table)
    if results.get("suite"):
        suite = results["suite"]
        out.print(f"suite {suite['name']}: mean Pass@1 {100 * suite['mean_pass@1']:.2f}% over {', '.join(suite['benchmarks'])}"
                  + (f" (published {100 * suite['published_mean']:.2f}%)" if suite.get("published_mean") else ""))
    out.print(f"report: {folder / 'report.md'}")


@app.command("regrade")
@user_errors
def regrade(
    file: Annotated[Path, typer.Argument(help="Recorded predictions: a trex samples.jsonl, or any JSON / JSONL file.")],
    rule: Annotated[str, typer.Option(help="Rule to report first (every rule is computed).")] = "strict",
    pred_field: Annotated[str | None, typer.Option(help="Field with the predicted objective (a number or 'No Best Solution'); a.b for nested.")] = None,
    answer_field: Annotated[str | None, typer.Option(help="Field with the reference answer.")] = None,
    output: Annotated[Path | None, typer.Option(help="Write the regraded records here (JSONL).")] = None,
) -> None:
    """Re-grade recorded predictions without running anything. A trex samples.jsonl is regraded from its
    recorded solver status and objectives; other files need --pred-field and --answer-field (a
    predicted number there counts as an optimal solve, since published files record no status)."""
    import json

    from rich.table import Table

    from trex_cli.benchmark_files import read_records
    from trex_cli.evaluate.grading import (
        RULES,
        STRUCTURE_RULE,
        Prediction,
        check_rule_name,
        parse_answer,
        verdicts,
    )
    from trex_cli.evaluate.runner import prediction_from_record

    check_rule_name(rule, structure=True)
    if not file.is_file():
        raise FileNotFoundError(f"{file} not found")
    records = read_records(file)
    if not records:
        raise ValueError(f"{file}: holds no records")
    own_format = pred_field is None and "verdicts" in records[0][1]
    if not own_format and not (pred_field and answer_field):
        raise ValueError(f"{file}: not a trex samples.jsonl; pass --pred-field and --answer-field")
    correct = {name: 0 for name in RULES}
    graded = []
    for line, record in records:
        where = f"{file}:{line}"
        if own_format and STRUCTURE_RULE in record["verdicts"]:
            # B4O-ORGEval: the verdict is about the model the program built; it has no objective to regrade
            correct[STRUCTURE_RULE] = correct.get(STRUCTURE_RULE, 0) + bool(record["verdicts"][STRUCTURE_RULE])
            graded.append(record)
            continue
        if own_format:
            raw_answer, raw_prediction = record.get("answer"), None
        else:
            raw_answer = _field_value(record, answer_field, where, "--answer-field")
            raw_prediction = _field_value(record, pred_field, where, "--pred-field")
        try:
            truth = parse_answer(raw_answer)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        if truth is None:
            raise ValueError(f"{where}: no reference answer")
        prediction = prediction_from_record(record) if own_format else Prediction.from_value(raw_prediction)
        result = verdicts(prediction, truth)
        if own_format and not record.get("program"):
            result = {name: False for name in result}
        for name, ok in result.items():
            correct[name] += ok
        graded.append({**record, "verdicts": result})
    table = Table(title=f"{file}: {len(graded)} records regraded")
    table.add_column("rule")
    table.add_column("correct", justify="right")
    table.add_column("Pass@1 (%)", justify="right")
    correct.setdefault(rule, 0)
    for name in [rule] + [r for r in correct if r != rule]:
        table.add_row(name + (" *" if name == rule else ""), str(correct[name]), f"{100 * correct[name] / len(graded):.2f}")
    out.print(table)
    if output is not None:
        from trex_cli.artifacts import write_text_atomic

        write_text_atomic(output, "".join(json.dumps(r) + "\n" for r in graded))
        out.print(f"regraded records: {output}")


def _field_value(record: dict, dotted: str, where: str, flag: str):
    """`record[a][b]` for "a.b" (published files nest their fields), with an error naming the flag."""
    value = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ValueError(f"{where}: no field {dotted!r} ({flag}); fields: {', '.join(record)}")
        value = value[part]
    return value


@app.command("compare")
@user_errors
def compare_command(
    first: Annotated[Path, typer.Argument(help="Eval folder (or samples.jsonl) A.")],
    second: Annotated[Path, typer.Argument(help="Eval folder (or samples.jsonl) B.")],
    rule: Annotated[str, typer.Option(help="Rule the comparison uses.")] = "strict",
    show: Annotated[int, typer.Option(help="List at most this many wins and losses each.")] = 20,
    allow_different_benchmarks: Annotated[
        bool, typer.Option("--allow-different-benchmarks", help="Compare even when the evals used different benchmark files (SHA-256).")
    ] = False,
) -> None:
    """Per-item wins (A right, B wrong) and losses (A wrong, B right) between two evals."""
    from rich.table import Table

    from trex_cli.evaluate.grading import check_rule_name
    from trex_cli.evaluate.report import compare, load_sample_records

    check_rule_name(rule, structure=True)
    result = compare(load_sample_records(first), load_sample_records(second), rule, allow_different_benchmarks)
    if result["different_benchmark_versions"]:
        out.print(f"warning: different benchmark versions for {', '.join(result['different_benchmark_versions'])}; compared anyway")
    out.print(
        f"rule {rule}: {result['shared_items']} shared items; A {100 * result['pass@1_a']:.2f}% vs "
        f"B {100 * result['pass@1_b']:.2f}%; A wins {len(result['wins'])}, loses {len(result['losses'])}, "
        f"both right {result['both_correct']}, both wrong {result['both_wrong']}"
        + (f"; only in A {result['only_in_a']}, only in B {result['only_in_b']}" if result["only_in_a"] or result["only_in_b"] else "")
    )
    for title, rows in (("wins (A better)", result["wins"]), ("losses (B better)", result["losses"])):
        if not rows:
            continue
        table = Table(title=title)
        for column in ("benchmark", "item", "A", "B"):
            table.add_column(column)
        for row in rows[:show]:
            table.add_row(row["benchmark"], row["item_id"], f"{row['a']:.2f}", f"{row['b']:.2f}")
        out.print(table)
