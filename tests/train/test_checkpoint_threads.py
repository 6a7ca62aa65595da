"""DCP runs with one intra-op thread and the caller's count comes back (trex_cli/train/checkpoint.py's
docstring: with more, DCP's own thread started an OpenMP team that made libgomp stop spinning at its
barriers, and every later CPU step of the demo's SFT took 9.5 s instead of 7.5 s)."""

from __future__ import annotations

import torch
from conftest import free_port, gloo_rank

import trex_cli.train.checkpoint as checkpoint


def test_save_and_load_run_dcp_with_one_intra_op_thread_and_restore_the_count(tmp_path, monkeypatch):
    seen = []
    for name in ("save", "load"):
        real = getattr(checkpoint.dcp, name)

        def spy(*args, real=real, name=name, **kwargs):
            seen.append((name, torch.get_num_threads()))
            return real(*args, **kwargs)

        monkeypatch.setattr(checkpoint.dcp, name, spy)
    before = torch.get_num_threads()
    with gloo_rank(0, 1, free_port()):
        torch.set_num_threads(2)
        model = torch.nn.Linear(8, 8)
        optimizer = torch.optim.AdamW(model.parameters())
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
        saver = checkpoint.Checkpointer(tmp_path, keep_last=1, rank=0)
        path = saver.save(1, model, optimizer, {"step": 1})
        after_save = torch.get_num_threads()
        saver.load(path, model, optimizer)
        after_load = torch.get_num_threads()
    torch.set_num_threads(before)
    assert seen == [("save", 1), ("load", 1)]
    assert (after_save, after_load) == (2, 2)
