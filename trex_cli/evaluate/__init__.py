"""trex's evaluation: zero-shot Pass@1 on OR modeling benchmarks, with generated programs executed in a
sandbox and graded under every published rule (trex's own, `strict`, by default).

Modules: `config` (the [eval] table, named suites), `benchmarks` (loaders), `prompts` (prompt styles,
the paper's templates in `prompt_templates/`, program extraction), `generators` (openai, hf, file,
gold), `grading` (answers, rules, outcome classes), `equivalence` (B4O-ORGEval's structural LP check),
`report` (scores, subsets, suite mean, report.md, chart, lm-eval results file, comparison), `runner`
(`run_eval`, what `trex eval` and `trex run` call). Programs run in the `trex_sandbox` package (shared
with synth verification).
"""

from trex_cli.evaluate.config import EvalConfig


def run_eval(config: EvalConfig, out_dir, **kwargs) -> dict:
    """Run one eval into `out_dir` and return its results dict; see `trex_cli.evaluate.runner`."""
    from trex_cli.evaluate.runner import run_eval as _run_eval

    return _run_eval(config, out_dir, **kwargs)


__all__ = ["EvalConfig", "run_eval"]
