"""Scores and reports: Pass@1 with its standard error and pass@k per benchmark and rule, per subset
(problem type, wording, difficulty) where the benchmark has those fields, outcome counts, a suite's
mean, `results.json`, the same scores in lm-evaluation-harness's results layout, `report.md`, a PNG
bar chart, and per-item comparison of two evals (of the same benchmark versions)."""

from __future__ import annotations

import json
import math
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

from trex_cli.artifacts import MANIFEST, STAGE_STATE
from trex_cli.evaluate.grading import OUTCOMES, RULES, STRUCTURE_RULE, STRUCTURE_RULE_DESCRIPTION

RULE_ORDER = (*RULES, STRUCTURE_RULE)


def rule_description(rule: str) -> str:
    return STRUCTURE_RULE_DESCRIPTION if rule == STRUCTURE_RULE else RULES[rule].description


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct: 1 - C(n-c, k) / C(n, k)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per item, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_and_standard_error(values: list[float]) -> tuple[float, float]:
    """Mean over items and the standard error of that mean (sample standard deviation / sqrt(N))."""
    count = len(values)
    if count == 0:
        return 0.0, 0.0
    mean = sum(values) / count
    if count == 1:
        return mean, 0.0
    variance = sum((v - mean) ** 2 for v in values) / (count - 1)
    return mean, math.sqrt(variance / count)


def _rule_entry(items: dict[str, list[dict]], rule: str, samples_per_item: int) -> dict:
    per_item_pass1 = []
    correct_total = 0
    counts = []
    for samples in items.values():
        correct = sum(1 for s in samples if s["verdicts"].get(rule))
        correct_total += correct
        counts.append((len(samples), correct))
        per_item_pass1.append(correct / len(samples))
    mean, error = mean_and_standard_error(per_item_pass1)
    entry = {
        "items": len(items),
        "samples": sum(n for n, _ in counts),
        "correct": correct_total,
        "pass@1": mean,
        "pass@1_stderr": error,
    }
    if samples_per_item > 1:
        powers_of_two = {2**i for i in range(1, samples_per_item.bit_length()) if 2**i <= samples_per_item}
        for k in sorted(powers_of_two | {samples_per_item}):
            values = [pass_at_k(n, c, k) for n, c in counts]
            entry[f"pass@{k}"], entry[f"pass@{k}_stderr"] = mean_and_standard_error(values)
    return entry


def score_records(records: list[dict], headline_rule: str = "strict") -> dict:
    """{benchmark: {"rules": {rule: {...}}, "headline_rule", "subsets", "outcomes", "items"}} from
    sample records. A benchmark is scored under the rules its records carry verdicts for (B4O-ORGEval:
    `orgeval` only, which is then its headline)."""
    from trex_cli.benchmark_files import SUBSET_FIELDS

    by_benchmark: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        by_benchmark[record["benchmark"]][record["item_id"]].append(record)
    scores = {}
    for benchmark, items in sorted(by_benchmark.items()):
        samples_per_item = min(len(samples) for samples in items.values())
        present = {rule for samples in items.values() for s in samples for rule in s["verdicts"]}
        rules = {rule: _rule_entry(items, rule, samples_per_item) for rule in RULE_ORDER if rule in present}
        subsets: dict[str, dict] = {}
        for name in SUBSET_FIELDS:
            groups: dict[str, dict[str, list[dict]]] = defaultdict(dict)
            for item_id, samples in items.items():
                metadata = samples[0].get("metadata") or {}
                if name in metadata:
                    groups[str(metadata[name])][item_id] = samples
            if len(groups) > 1:  # a field with one value splits nothing
                subsets[name] = {
                    value: {rule: _rule_entry(group, rule, 1) for rule in rules} for value, group in sorted(groups.items())
                }
        outcomes = Counter(s["outcome"] for samples in items.values() for s in samples)
        scores[benchmark] = {
            "items": len(items),
            "samples_per_item": samples_per_item,
            "headline_rule": STRUCTURE_RULE if STRUCTURE_RULE in rules else headline_rule,
            "rules": rules,
            "subsets": subsets,
            "outcomes": {name: outcomes.get(name, 0) for name in OUTCOMES},
        }
    return scores


def suite_summary(suite: str, scores: dict) -> dict:
    """A suite's headline: the mean over its benchmarks of Pass@1, each under the suite's rule for it."""
    from trex_cli.evaluate.config import SUITES

    definition = SUITES[suite]
    per_benchmark = {}
    for name in definition["benchmarks"]:
        rule = definition["rules"][name]
        if name not in scores or rule not in scores[name]["rules"]:
            raise ValueError(f"suite {suite}: benchmark {name} has no score under rule {rule}")
        per_benchmark[name] = {"rule": rule, "pass@1": scores[name]["rules"][rule]["pass@1"]}
    mean = sum(entry["pass@1"] for entry in per_benchmark.values()) / len(per_benchmark)
    return {"name": suite, "benchmarks": per_benchmark, "mean_pass@1": mean, "published_mean": definition.get("published_mean")}


def lm_eval_results(results: dict) -> dict:
    """The scores in lm-evaluation-harness's results.json layout: one task per benchmark, metric
    `pass@1` (and pass@k) with the grading rule as the filter name ("pass@1,strict"), a group for a suite."""
    tasks, higher, samples, configs = {}, {}, {}, {}
    for benchmark, score in results.get("scores", {}).items():
        task = f"trex_{benchmark}"
        entry: dict = {"alias": benchmark}
        for rule, values in score["rules"].items():
            for key, value in values.items():
                if key.startswith("pass@"):
                    metric = key.replace("_stderr", "")
                    entry[f"{metric}_stderr,{rule}" if key.endswith("_stderr") else f"{metric},{rule}"] = value
        tasks[task] = entry
        higher[task] = {"pass@1": True}
        samples[task] = {"original": score["items"], "effective": score["items"]}
        configs[task] = {
            "task": task,
            "dataset_path": results.get("benchmarks", {}).get(benchmark, {}).get("path"),
            "dataset_sha256": results.get("benchmarks", {}).get(benchmark, {}).get("sha256"),
            "num_fewshot": 0,
            "repeats": score["samples_per_item"],
            "metric_list": [{"metric": "pass@1", "aggregation": "mean", "higher_is_better": True}],
        }
    output = {
        "results": tasks,
        "configs": configs,
        "versions": {task: results.get("benchmarks", {}).get(task[len("trex_"):], {}).get("sha256") for task in tasks},
        "n-shot": {task: 0 for task in tasks},
        "higher_is_better": higher,
        "n-samples": samples,
        "config": {
            "model": results.get("config", {}).get("backend"),
            "model_args": results.get("model"),
            "gen_kwargs": {key: results.get("config", {}).get(key) for key in ("temperature", "top_p", "max_tokens", "seed")},
        },
        "git_hash": results.get("git_hash"),
        "date": results.get("finished_at"),
    }
    suite = results.get("suite")
    if suite:
        group = f"trex_suite_{suite['name']}"
        output["groups"] = {group: {"alias": suite["name"], "pass@1,paper": suite["mean_pass@1"]}}
        output["group_subtasks"] = {group: [f"trex_{name}" for name in suite["benchmarks"]]}
    return output


def git_hash(folder: Path | None = None) -> str | None:
    folder = folder or Path(__file__).resolve().parents[2]
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() or None


def render_markdown(results: dict, records: list[dict] | None = None, examples_per_outcome: int = 3) -> str:
    """report.md: settings, one table per rule, outcome counts, and a few explained failures."""
    headline = results.get("headline_rule", "strict")
    lines = [f"# trex eval: {results.get('name', '')}", ""]
    config = results.get("config", {})
    lines += [
        f"- backend: `{config.get('backend')}`"
        + (f", model `{results.get('model')}`" if results.get("model") else ""),
        f"- prompt: `{config.get('prompt')}`; samples per item: {config.get('samples')}; "
        f"temperature {config.get('temperature')}, top-p {config.get('top_p')}, max tokens {config.get('max_tokens')}, "
        f"seed {config.get('seed')}",
        f"- execution: {results.get('isolation', '')}; time limit {config.get('timeout')} s",
        f"- git: `{results.get('git_hash')}`",
        "",
        "Benchmarks (the file and its SHA-256 are the version a score belongs to):",
        "",
        "| benchmark | file | items | sha256 |",
        "|---|---|---|---|",
    ]
    for name, info in results.get("benchmarks", {}).items():
        lines.append(f"| {name} | `{info.get('path')}` | {info.get('items')} | `{str(info.get('sha256'))[:16]}` |")
    lines.append("")
    scores = results.get("scores", {})
    suite = results.get("suite")
    if suite:
        lines += [f"## Suite `{suite['name']}`: mean Pass@1 {100 * suite['mean_pass@1']:.2f}%"
                  + (f" (published: {100 * suite['published_mean']:.2f}%)" if suite.get("published_mean") else ""), ""]
        lines += ["| benchmark | rule | Pass@1 (%) |", "|---|---|---|"]
        for name, entry in suite["benchmarks"].items():
            lines.append(f"| {name} | `{entry['rule']}` | {100 * entry['pass@1']:.2f} |")
        lines.append("")
    present = [r for r in RULE_ORDER if any(r in s["rules"] for s in scores.values())]
    ordered_rules = [headline] * (headline in present) + [r for r in present if r != headline]
    for rule in ordered_rules:
        marker = " (headline)" if rule == headline else ""
        lines += [f"## Rule `{rule}`{marker}", "", rule_description(rule), ""]
        extra_k = sorted(
            {key for s in scores.values() for key in s["rules"].get(rule, {}) if key.startswith("pass@") and not key.endswith("stderr") and key != "pass@1"}
        )
        header = "| benchmark | items | correct | Pass@1 (%) | ± s.e. |" + "".join(f" {k} (%) |" for k in extra_k)
        lines += [header, "|---|---|---|---|---|" + "---|" * len(extra_k)]
        for benchmark, score in scores.items():
            if rule not in score["rules"]:
                continue
            entry = score["rules"][rule]
            row = (
                f"| {benchmark} | {entry['items']} | {entry['correct']} / {entry['samples']} | "
                f"{100 * entry['pass@1']:.2f} | {100 * entry['pass@1_stderr']:.2f} |"
            )
            row += "".join(f" {100 * entry[k]:.2f} |" if k in entry else " - |" for k in extra_k)
            lines.append(row)
        lines.append("")
    for benchmark, score in scores.items():
        for name, groups in score.get("subsets", {}).items():
            rule = score["headline_rule"]
            lines += [f"## {benchmark} by `{name}` (rule `{rule}`)", "", "| value | items | Pass@1 (%) | ± s.e. |", "|---|---|---|---|"]
            for value, entries in groups.items():
                entry = entries[rule]
                lines.append(f"| {value or '(empty)'} | {entry['items']} | {100 * entry['pass@1']:.2f} | {100 * entry['pass@1_stderr']:.2f} |")
            lines.append("")
    lines += ["## Outcomes (every sample, classified under the benchmark's headline rule)", ""]
    lines += ["| benchmark | " + " | ".join(OUTCOMES) + " |", "|---|" + "---|" * len(OUTCOMES)]
    for benchmark, score in scores.items():
        lines.append(f"| {benchmark} | " + " | ".join(str(score["outcomes"][o]) for o in OUTCOMES) + " |")
    lines.append("")
    if records:
        lines += ["## Examples of each failure (from samples.jsonl)", ""]
        for outcome in OUTCOMES[1:]:
            chosen = [r for r in records if r["outcome"] == outcome][:examples_per_outcome]
            for record in chosen:
                reason = str(record.get("reason", "")).replace("|", "\\|").replace("\n", " ")[:160]
                lines.append(f"- {outcome}: {record['benchmark']} item `{record['item_id']}` sample {record['sample']}: {reason}")
        lines.append("")
    return "\n".join(lines)


def draw_chart(results: dict, path: Path) -> Path:
    """Grouped bars: Pass@1 per benchmark under each rule, with standard-error whiskers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores = results.get("scores", {})
    benchmarks = list(scores)
    rules = [r for r in RULE_ORDER if any(r in s["rules"] for s in scores.values())]
    width = 0.8 / max(1, len(rules))
    figure, axes = plt.subplots(figsize=(max(7.0, 1.8 * len(benchmarks) + 2), 4.6))
    for index, rule in enumerate(rules):
        empty = {"pass@1": 0.0, "pass@1_stderr": 0.0}  # a rule that does not apply to a benchmark: no bar
        values = [100 * scores[b]["rules"].get(rule, empty)["pass@1"] for b in benchmarks]
        errors = [100 * scores[b]["rules"].get(rule, empty)["pass@1_stderr"] for b in benchmarks]
        positions = [i + (index - (len(rules) - 1) / 2) * width for i in range(len(benchmarks))]
        axes.bar(positions, values, width, yerr=errors, capsize=2, label=rule)
    axes.set_xticks(range(len(benchmarks)), benchmarks)
    axes.set_ylabel("Pass@1 (%)")
    axes.set_ylim(0, 105)
    axes.set_title(f"trex eval {results.get('name', '')}: Pass@1 by grading rule")
    axes.legend(fontsize=8, ncol=len(rules), loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def load_sample_records(source: str | Path) -> list[dict]:
    """Sample records from an eval folder (its samples.jsonl) or a samples.jsonl file."""
    path = Path(source)
    if path.is_dir():
        path = path / "samples.jsonl"
    folder = path.parent
    if (folder / STAGE_STATE).is_file() and not (folder / MANIFEST).is_file():
        # its samples.jsonl holds only the samples graded before it stopped: its scores would mean nothing
        raise ValueError(
            f"{folder} is an unfinished eval (no {MANIFEST} yet); run its `trex eval` command again to finish "
            "it (it resumes where it stopped), then compare"
        )
    if not path.is_file():
        raise FileNotFoundError(f"{source}: no samples.jsonl there (give an eval folder or its samples.jsonl)")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not valid JSON ({error})") from None
    return records


def benchmark_versions(records: list[dict]) -> dict[str, set[str]]:
    versions: dict[str, set[str]] = defaultdict(set)
    for record in records:
        versions[record["benchmark"]].add(str(record.get("benchmark_sha256")))
    return versions


def compare(records_a: list[dict], records_b: list[dict], rule: str, allow_different_benchmarks: bool = False) -> dict:
    """Per-item comparison of two evals under `rule`: items only A solves (wins), only B solves
    (losses), both, neither; an item's score is its fraction of correct samples. Two evals of a
    benchmark's different files (SHA-256) are refused unless `allow_different_benchmarks`: the same
    item id can be another question there."""
    versions_a, versions_b = benchmark_versions(records_a), benchmark_versions(records_b)
    differing = sorted(name for name in set(versions_a) & set(versions_b) if versions_a[name] != versions_b[name])
    if differing and not allow_different_benchmarks:
        details = "; ".join(
            f"{name}: A {', '.join(v[:12] for v in sorted(versions_a[name]))} vs B {', '.join(v[:12] for v in sorted(versions_b[name]))}"
            for name in differing
        )
        raise ValueError(
            f"the two evals used different versions (SHA-256) of {', '.join(differing)} ({details}); their items "
            "may not be the same questions. Pass --allow-different-benchmarks to compare them anyway"
        )

    def per_item(records):
        scores: dict[tuple[str, str], list[bool]] = defaultdict(list)
        for record in records:
            scores[(record["benchmark"], record["item_id"])].append(bool(record["verdicts"].get(rule)))
        return {key: sum(v) / len(v) for key, v in scores.items()}

    a, b = per_item(records_a), per_item(records_b)
    shared = sorted(set(a) & set(b))
    wins = [key for key in shared if a[key] > b[key]]
    losses = [key for key in shared if a[key] < b[key]]
    return {
        "rule": rule,
        "different_benchmark_versions": differing,
        "shared_items": len(shared),
        "only_in_a": len(set(a) - set(b)),
        "only_in_b": len(set(b) - set(a)),
        "wins": [{"benchmark": k[0], "item_id": k[1], "a": a[k], "b": b[k]} for k in wins],
        "losses": [{"benchmark": k[0], "item_id": k[1], "a": a[k], "b": b[k]} for k in losses],
        "both_correct": sum(1 for key in shared if a[key] == 1.0 and b[key] == 1.0),
        "both_wrong": sum(1 for key in shared if a[key] == 0.0 and b[key] == 0.0),
        "pass@1_a": sum(a[k] for k in shared) / len(shared) if shared else 0.0,
        "pass@1_b": sum(b[k] for k in shared) / len(shared) if shared else 0.0,
    }
