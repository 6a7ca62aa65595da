"""DeepSeek-V4 in trex: config and flavors, the model, checkpoint conversion, FLOP counting.

Importing this package imports torch only through `model`, `state_dict_adapter` and `flops` users;
`config` stays light so the recipe loader can validate `[model]` without torch.
"""

from trex_cli.models.deepseek_v4.config import FLAVORS, DeepseekV4Config, ModelSection, get_flavor

__all__ = ["FLAVORS", "DeepseekV4Config", "ModelSection", "get_flavor"]
