"""The teacher rewrite against a real local HTTP server that speaks the OpenAI chat API."""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from data_synth.config import SynthConfig
from data_synth.families import get_family
from data_synth.teacher import check_rewrite, rewrite_statement
from trex_cli.stages.synth import run_synth_stage as run_synth


class TeacherHandler(BaseHTTPRequestHandler):
    """Rewrites by model name: "faithful" keeps the statement, "lossy" drops its numbers after the first
    sentence, "leaky" appends the answer it was told (the X-Answer the test planted)."""

    requests: list[dict] = []
    answer = ""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        TeacherHandler.requests.append({"path": self.path, "body": body})
        statement = body["messages"][-1]["content"]
        model = body["model"]
        if model == "faithful":
            text = "Business case. " + statement
        elif model == "lossy":
            text = statement.split(". ")[0] + ". The rest is confidential."
        else:
            text = statement + f" (Hint: the best profit is {TeacherHandler.answer}.)"
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), TeacherHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def instance():
    family = get_family("production_mix")
    rng = random.Random(4)
    scenario = rng.choice(family.scenarios)
    data = family.sample(rng, "small", scenario)
    return data, family.render_statement(data, scenario, "text")


def test_faithful_rewrite_is_kept(endpoint):
    data, statement = instance()
    rewrite = rewrite_statement(statement, data, 1234.5, endpoint, "faithful")
    assert rewrite.accepted and rewrite.text.startswith("Business case.")
    request = TeacherHandler.requests[-1]
    assert request["path"] == "/v1/chat/completions" and request["body"]["model"] == "faithful"


def test_rewrite_that_loses_numbers_is_refused(endpoint):
    data, statement = instance()
    rewrite = rewrite_statement(statement, data, 1234.5, endpoint, "lossy")
    assert not rewrite.accepted and rewrite.outcome == "missing_numbers" and rewrite.text == statement


def test_rewrite_that_leaks_the_answer_is_refused(endpoint):
    data, statement = instance()
    TeacherHandler.answer = "1,234.50"
    rewrite = rewrite_statement(statement, data, 1234.5, endpoint, "leaky")
    assert not rewrite.accepted and rewrite.outcome == "leaked_answer"


def test_unreachable_teacher_keeps_the_template():
    data, statement = instance()
    rewrite = rewrite_statement(statement, data, 1.0, "http://127.0.0.1:9/v1", "faithful", timeout=2)
    assert not rewrite.accepted and rewrite.outcome == "http_error"


def test_a_number_of_the_template_is_not_a_leak():
    data, statement = instance()
    number = str(data["capacity"][data["resources"][0]])
    assert check_rewrite(statement, statement, data, float(number)) == ("accepted", "")


def test_pipeline_uses_teacher_rewrites(endpoint, tmp_path):
    config = SynthConfig(n=3, eval_n=0, seed=1, families=["production_mix"], workers=1,
                         representations={"text": 1.0}, infeasible_share=0.0,
                         teacher_endpoint=endpoint, teacher_model="faithful")
    run_synth(config, tmp_path / "synth")
    records = [json.loads(line) for line in (tmp_path / "synth" / "problems" / "shard-00000.jsonl").read_text().splitlines()]
    assert len(records) == 3
    assert all(r["statement_source"] == "teacher" and r["statement"].startswith("Business case.") for r in records)
    summary = json.loads((tmp_path / "synth" / "summary.json").read_text())
    assert summary["teacher"] == {"accepted": 3}
