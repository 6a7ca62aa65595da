"""The README's quick start runs as written: every ```bash block after a `<!-- test -->` marker is run,
line by line, in a copy of the checkout (`trex` is this checkout's CLI), and the OpenAI-compatible one
against a real local HTTP server that answers with the items' reference programs."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README_ENDPOINT = "http://127.0.0.1:8000/v1"  # what the README tells a user to run a server on


def marked_commands(readme: str) -> list[str]:
    """The commands of the blocks marked `<!-- test -->`: one per line, `\\` continuations joined,
    comments and blank lines dropped."""
    commands = []
    for block in re.findall(r"<!-- test -->\s*\n```bash\n(.*?)```", readme, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def checkout_copy(target: Path) -> Path:
    """The files a clone has (no run folders, environments or caches)."""
    shutil.copytree(REPO, target, ignore=shutil.ignore_patterns(
        ".git", ".venv", "runs", "__pycache__", ".pytest_cache", ".ruff_cache", "*.egg-info", "wandb",
    ))
    return target


class ReferenceServer(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat server whose "model" answers each eval question with its reference program."""

    eval_split: Path

    def log_message(self, *args) -> None:  # keep the test output clean
        pass

    def _reply(self, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply({"object": "list", "data": [{"id": "reference-programs", "object": "model"}]})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = "\n".join(message["content"] for message in request["messages"])
        items = [json.loads(line) for line in self.eval_split.read_text().splitlines() if line]
        program = next(item["reference_program"] for item in items if item["en_question"] in prompt)
        self._reply({
            "id": "chat-1", "object": "chat.completion", "model": request.get("model", "reference-programs"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": f"```python\n{program}\n```"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        })


def test_marked_blocks_are_found():
    commands = marked_commands((REPO / "README.md").read_text())
    assert commands[0] == "trex --version" and any("--backend openai" in c for c in commands)
    assert all(command.startswith("trex ") for command in commands)


@pytest.mark.slow
def test_readme_quick_start_runs_as_written(tmp_path):
    clone = checkout_copy(tmp_path / "trex")
    commands = marked_commands((clone / "README.md").read_text())
    ReferenceServer.eval_split = clone / "runs" / "quickstart" / "synth" / "eval" / "test.jsonl"
    server = ThreadingHTTPServer(("127.0.0.1", 0), ReferenceServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1"
    env = {**os.environ, "PYTHONPATH": str(clone), "TREX_KERNELS": "reference"}
    try:
        for command in commands:
            argv = shlex.split(command.replace(README_ENDPOINT, endpoint))
            assert argv[0] == "trex"
            result = subprocess.run(
                [sys.executable, "-m", "trex_cli.app", *argv[1:]], cwd=clone, env=env, capture_output=True,
                text=True, timeout=600,
            )
            assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    finally:
        server.shutdown()
    # the reference programs, run in the sandbox, are graded correct on every item by both routes
    for name in ("eval-gold", "eval-openai"):
        strict = json.loads((clone / "runs" / "quickstart" / name / "results.json").read_text())["scores"]["synth"]
        assert strict["rules"]["strict"]["items"] == 20 and strict["rules"]["strict"]["pass@1"] == 1.0, (name, strict)
