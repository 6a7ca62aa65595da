"""The report of a `trex run`: `report.md` in the run folder with Pass@1 per model and benchmark (and per
family on the synthetic split), the outcome of every sample, training loss curves, a score chart (PNG
files in `report/`), and where every artifact lies."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

from trex_cli.artifacts import MANIFEST, write_text_atomic
from trex_cli.console import err, out
from trex_cli.run_layout import RunLayout
from trex_cli.stages import Stage
from trex_cli.stages.eval import REPORT_LABELS, RUN_EVALS

# (label in the report, eval stage)
MODELS = tuple((REPORT_LABELS[label], f"eval-{label}") for label, _ in RUN_EVALS)


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _percent(value: float | None, stderr: float | None = None) -> str:
    if value is None:
        return "–"
    return f"{100 * value:.1f}%" + (f" ± {100 * stderr:.1f}" if stderr is not None else "")


def collect_scores(layout: RunLayout, stages: dict[str, Stage]) -> dict:
    """{"rule", "benchmarks": {benchmark: {label: score}}, "families": {family: {label: (correct, items)}},
    "outcomes": {label: {outcome: count}}} from the finished evals."""
    families_of = {row["id"]: row.get("family", "?") for row in _read_jsonl(layout.synth / "eval" / "test.jsonl")}
    scores: dict = {"rule": None, "benchmarks": defaultdict(dict), "families": defaultdict(dict), "outcomes": {}}
    for label, eval_stage in MODELS:
        folder = stages[eval_stage].folder
        results = _read_json(folder / "results.json") if (folder / MANIFEST).is_file() else None
        if results is None:
            continue
        rule = results["headline_rule"]
        scores["rule"] = rule
        outcomes: dict[str, int] = defaultdict(int)
        for benchmark, score in results["scores"].items():
            # a benchmark graded by another rule (B4O-ORGEval: model equivalence) names its own headline
            scores["benchmarks"][benchmark][label] = score["rules"][score.get("headline_rule", rule)]
            for outcome, count in score["outcomes"].items():
                outcomes[outcome] += count
        scores["outcomes"][label] = dict(outcomes)
        # per family on the synthetic split: the mean over items of the share of correct samples
        per_item: dict[str, list[bool]] = defaultdict(list)
        for record in _read_jsonl(folder / "samples.jsonl"):
            if record["benchmark"] == "synth":
                per_item[record["item_id"]].append(bool(record["verdicts"].get(rule)))
        per_family: dict[str, list[float]] = defaultdict(list)
        for item_id, verdicts in per_item.items():
            per_family[families_of.get(item_id, "?")].append(sum(verdicts) / len(verdicts))
        for family, values in per_family.items():
            scores["families"][family][label] = (sum(values), len(values))
    return scores


def collect_training(stages: dict[str, Stage]) -> dict:
    """{stage: {"records": [...], "summary": {...}}} for the finished or running training stages."""
    from trex_cli.train.metrics import read_metrics

    training = {}
    for stage in ("cpt", "sft"):
        folder = stages[f"train-{stage}"].folder
        records = [r for r in read_metrics(folder / "metrics.jsonl") if not r.get("skipped")]
        manifest = _read_json(folder / MANIFEST) or {}
        training[stage] = {"records": records, "summary": manifest.get("summary", {}), "manifest": manifest}
    return training


def draw_loss_curves(training: dict, path: Path) -> Path | None:
    if not any(entry["records"] for entry in training.values()):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(training), figsize=(5.5 * len(training), 3.8), squeeze=False)
    for axis, (stage, entry) in zip(axes[0], training.items(), strict=True):
        records = entry["records"]
        steps = [r["step"] for r in records]
        axis.plot(steps, [r["loss"] for r in records], label="total loss")
        axis.plot(steps, [r["lm_loss"] for r in records], label="LM loss", alpha=0.8)
        axis.set_title(f"train {stage.upper()}")
        axis.set_xlabel("step")
        axis.set_ylabel("loss")
        axis.grid(alpha=0.3)
        if records:
            axis.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def draw_score_chart(scores: dict, path: Path) -> Path | None:
    """Grouped bars: Pass@1 per benchmark (and per family of the synthetic split) for each model."""
    groups: list[tuple[str, dict[str, float]]] = []
    for benchmark, by_label in scores["benchmarks"].items():
        groups.append((benchmark, {label: s["pass@1"] for label, s in by_label.items()}))
    for family, by_label in sorted(scores["families"].items()):
        groups.append((f"synth/{family}", {label: c / n for label, (c, n) in by_label.items() if n}))
    if not groups:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [label for label, _ in MODELS]
    width = 0.8 / len(labels)
    figure, axis = plt.subplots(figsize=(max(6.0, 0.9 * len(groups) + 2), 4.2))
    for index, label in enumerate(labels):
        positions = [g + (index - (len(labels) - 1) / 2) * width for g in range(len(groups))]
        bars = axis.bar(positions, [100 * values.get(label, 0.0) for _, values in groups], width, label=label)
        axis.bar_label(bars, fmt="%.0f", fontsize=7)  # so a score of 0 is seen, not mistaken for a missing bar
    axis.set_xticks(range(len(groups)), [name for name, _ in groups], rotation=30, ha="right")
    axis.set_ylabel(f"Pass@1 (%), {scores['rule']} rule")
    axis.set_ylim(0, 100)
    axis.legend()
    axis.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def render_report(layout: RunLayout, stages: dict[str, Stage], record: dict, scores: dict, training: dict,
                  figures: dict[str, Path | None]) -> str:
    labels = [label for label, _ in MODELS]
    recipe = record.get("recipe", "?")
    overrides = " ".join(f"--set {o}" for o in record.get("overrides", []))
    lines = [
        f"# trex run: {layout.recipe.name}",
        "",
        f"Recipe `{recipe}`{' with ' + overrides if overrides else ''}; resolved copy `{layout.root / 'recipe.resolved.toml'}`.",
        "",
        f"## Pass@1 ({scores['rule'] or 'strict'} rule, zero-shot)",
        "",
    ]
    if scores["benchmarks"]:
        lines += ["| benchmark | items | " + " | ".join(labels) + " |", "|---|---:|" + "---:|" * len(labels)]
        for benchmark, by_label in scores["benchmarks"].items():
            items = max(s["items"] for s in by_label.values())
            cells = [
                _percent(by_label[label]["pass@1"], by_label[label]["pass@1_stderr"]) if label in by_label else "–"
                for label in labels
            ]
            lines.append(f"| {benchmark} | {items} | " + " | ".join(cells) + " |")
        lines.append("")
    else:
        lines += ["No eval has finished yet.", ""]
    if scores["families"]:
        lines += ["Per family on the held-out synthetic split (correct / items):", ""]
        lines += ["| family | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
        for family, by_label in sorted(scores["families"].items()):
            cells = [
                f"{by_label[label][0]:g} / {by_label[label][1]}" if label in by_label else "–" for label in labels
            ]
            lines.append(f"| {family} | " + " | ".join(cells) + " |")
        lines.append("")
    if scores["outcomes"]:
        outcome_names = sorted({name for counts in scores["outcomes"].values() for name, n in counts.items() if n})
        lines += ["Outcome of every sample (all benchmarks):", ""]
        lines += ["| model | " + " | ".join(outcome_names) + " |", "|---|" + "---:|" * len(outcome_names)]
        for label in labels:
            if label in scores["outcomes"]:
                counts = scores["outcomes"][label]
                lines.append(f"| {label} | " + " | ".join(str(counts.get(n, 0)) for n in outcome_names) + " |")
        lines.append("")
    if figures.get("scores"):
        lines += [f"![Pass@1 per model]({figures['scores'].relative_to(layout.root)})", ""]
    lines += ["## Training", "", "| stage | steps | first loss | final loss | tokens | tokens/s (median) |",
              "|---|---:|---:|---:|---:|---:|"]
    for stage, entry in training.items():
        records = entry["records"]
        if not records:
            lines.append(f"| {stage} | – | – | – | – | – |")
            continue
        speeds = sorted(r["tokens_per_s"] for r in records)
        tokens = sum(r["tokens"] for r in records)
        lines.append(
            f"| {stage} | {records[-1]['step']} | {records[0]['loss']:.3f} | {records[-1]['loss']:.3f} | "
            f"{tokens:,} | {speeds[len(speeds) // 2]:,.0f} |"
        )
    lines.append("")
    if figures.get("loss"):
        lines += [f"![loss curves]({figures['loss'].relative_to(layout.root)})", ""]
    lines += ["## Stages and artifacts", "",
              "| stage | folder | status | wall seconds | CPU seconds | stage wall time (manifest) |",
              "|---|---|---|---:|---:|---:|"]
    recorded = record.get("stages", {})
    for name, stage in stages.items():
        folder = stage.folder
        if name == "model-init" and layout.cpt_init is not None:
            lines.append(f"| {name} | `{layout.cpt_init}` | given by [train.cpt] init | – | – | – |")
            continue
        manifest = _read_json(folder / MANIFEST)
        status = "done" if manifest else ("interrupted" if folder.exists() else "not run")
        seconds = recorded.get(name, {}).get("seconds")
        cpu_seconds = recorded.get(name, {}).get("cpu_seconds")
        wall = manifest.get("wall_time_s") if manifest else None
        cells = [f"{value:.1f}" if value is not None else "" for value in (seconds, cpu_seconds, wall)]
        lines.append(f"| {name} | `{folder}` | {status} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "What is where:",
        "",
        f"- verified problems `{layout.synth / 'problems'}`, CPT documents `{layout.synth / 'cpt_docs'}`, SFT samples "
        f"`{layout.synth / 'sft'}`, held-out eval split `{layout.synth / 'eval' / 'test.jsonl'}`, rejects `{layout.synth / 'rejects.jsonl'}`",
        f"- datasets `{layout.data_cpt}` and `{layout.data_sft}` (Arrow shards, `tokenizer/`, `stats.json`, dataset card `README.md`)",
        f"- models (HF layout): start `{stages['model-init'].model_path}`, after CPT `{stages['train-cpt'].model_path}`, "
        f"after SFT `{stages['train-sft'].model_path}`; checkpoints `{layout.train('cpt') / 'checkpoints'}`, "
        f"`{layout.train('sft') / 'checkpoints'}`; metrics `metrics.jsonl` and `loss.png` beside them",
        "- evals: " + ", ".join(f"{label} `{stages[stage].folder}`" for label, stage in MODELS)
        + " (`samples.jsonl` per sample, `results.json`, `report.md`, `pass_at_1.png`)",
        f"- this report `{layout.report}`, its figures `{layout.report_figures}`, "
        f"the run's record `{layout.run_record}`",
        "",
    ]
    return "\n".join(lines)


def write_report(layout: RunLayout, stages: dict[str, Stage], record: dict) -> Path:
    """Write `report.md` and its figures; `record` (run.json's content) gets the headline figures."""
    scores = collect_scores(layout, stages)
    training = collect_training(stages)
    figures_folder = layout.report_figures
    figures = {
        "loss": draw_loss_curves(training, figures_folder / "loss_curves.png"),
        "scores": draw_score_chart(scores, figures_folder / "pass_at_1.png"),
    }
    record["report"] = {
        "pass_at_1": {
            benchmark: {label: score["pass@1"] for label, score in by_label.items()}
            for benchmark, by_label in scores["benchmarks"].items()
        },
        "rule": scores["rule"],
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_text_atomic(layout.report, render_report(layout, stages, record, scores, training, figures))
    return layout.report


def print_report(path: Path) -> None:
    from rich.markdown import Markdown

    if not path.is_file():
        err.print(f"{path} does not exist yet")
        return
    out.print(Markdown(path.read_text()))
    out.print(f"report: {path}", highlight=False)
