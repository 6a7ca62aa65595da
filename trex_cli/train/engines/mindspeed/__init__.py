"""The MindSpeed-LLM engine of `trex train cpt|sft --engine mindspeed`: the recipe table (`config`),
the launch files (`launch`), the flag catalogue of the pinned framework (`catalogue`) and the run
itself (`engine.run_mindspeed`)."""

from trex_cli.train.engines.mindspeed.engine import run_mindspeed

__all__ = ["run_mindspeed"]
