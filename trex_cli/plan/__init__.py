"""SuperPOD planning: choose a parallel layout for a DeepSeek-V4 model on a cluster, estimate its
per-rank memory and step time, and launch the production engine (MindSpeed-LLM) with that layout.

Modules: `parameters` (parameter counts per component), `clusters` (device and link profiles),
`layout` (a planned layout and its divisibility rules), `memory`, `timing`, `search`, `mfu`,
`validation` (the timing model against published step times). The launch itself is
`trex_cli.train.engines.mindspeed`.
"""
