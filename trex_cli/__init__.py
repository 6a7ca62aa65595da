"""trex: post-training of DeepSeek-V4 MoE models for Operations Research, as one command."""

__version__ = "0.1.0"
