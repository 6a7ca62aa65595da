"""The MindSpeed-LLM engine of `trex train cpt|sft --engine mindspeed`: the recipe table (`config`),
the launch files (`launch`), the flag catalogue of the pinned framework (`catalogue`) and the run
itself (`engine.run_mindspeed`)."""

from __future__ import annotations

__all__ = ["run_mindspeed"]


def __getattr__(name: str):
    # imported on first use: loading a recipe (which imports `config`) or running `python -m ...catalogue`
    # should not import torch and the whole engine
    if name == "run_mindspeed":
        from trex_cli.train.engines.mindspeed.engine import run_mindspeed

        return run_mindspeed
    raise AttributeError(name)
