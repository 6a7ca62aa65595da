"""Training engines other than trex's native PyTorch trainer: `mindspeed` launches MindSpeed-LLM
(Megatron-Core) on Ascend SuperPODs."""
