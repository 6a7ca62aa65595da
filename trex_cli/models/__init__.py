"""Model definitions trex trains: DeepSeek-V4 (`trex_cli.models.deepseek_v4`)."""
