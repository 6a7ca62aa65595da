"""The teacher rewrite against a real local HTTP server that speaks the OpenAI chat API: the checks a rewrite
must pass (numbers kept, answer not leaked, tables kept, the teacher's own program reaches the verified
answer), the API key, retries, and an endpoint that is down."""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from data_synth.config import SynthConfig
from data_synth.families import get_family
from data_synth.render import render_program
from data_synth.synthesis import candidate_statement, make_candidate, split_families
from data_synth.teacher import (
    PROGRAM_PROMPT,
    TeacherEndpoint,
    TeacherUnreachable,
    check_rewrite,
    probe,
    protect_tables,
    rewrite_statement,
)
from data_synth.verify import check_program, solve_pyomo
from trex_cli.stages.synth import run_synth_stage as run_synth
from trex_sandbox import Sandbox, SandboxSettings


class TeacherHandler(BaseHTTPRequestHandler):
    """Answers by model name. Rewrites: "faithful" and "wrong_program" prefix the statement, "lossy" drops its
    numbers after the first sentence, "leaky" appends the planted answer, "drop_table" loses the table
    placeholders, "flaky" answers 503 to its first two requests and then like "faithful". Programs: the one
    planted for the rewritten text (`programs`), with its first capacity halved for "wrong_program"."""

    requests: list[dict] = []
    answer = ""
    programs: dict[str, str] = {}
    flaky_left = 0

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        TeacherHandler.requests.append({"path": self.path, "body": body,
                                        "authorization": self.headers.get("Authorization")})
        model = body["model"]
        if model == "flaky" and TeacherHandler.flaky_left > 0:
            TeacherHandler.flaky_left -= 1
            self._send(503, b'{"error": "overloaded"}')
            return
        content = body["messages"][-1]["content"]
        if body["messages"][0]["content"] == PROGRAM_PROMPT:
            program = TeacherHandler.programs.get(content, "print('Status: unknown')\n")
            if model == "wrong_program":
                program = program.replace('<= data["capacity"][r]', '<= 0.5 * data["capacity"][r]')
            text = f"Here is the program.\n\n```python\n{program}```\n"
        elif model in ("faithful", "wrong_program", "flaky"):
            text = "Business case. " + content
        elif model == "lossy":
            text = content.split(". ")[0] + ". The rest is confidential."
        elif model == "drop_table":
            text = content.replace("[TABLE 1]", "(see the figures)")
        else:
            text = content + f" (Hint: the best profit is {TeacherHandler.answer}.)"
        self._send(200, json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode())

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), TeacherHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxSettings(timeout=20, memory_mb=2048, workers=1)) as running:
        yield running


def endpoint(url: str, model: str, **settings) -> TeacherEndpoint:
    return TeacherEndpoint(url, model, **{"timeout": 5.0, "backoff": 0.01, **settings})


def instance(representation: str = "text"):
    family = get_family("production_mix")
    rng = random.Random(4)
    scenario = rng.choice(family.scenarios)
    data = family.sample(rng, "small", scenario)
    return family, data, family.render_statement(data, scenario, representation)


def reverifier(sandbox, family, data):
    """What synthesis passes: the teacher's program must reach the objective check 1 finds."""
    outcome = solve_pyomo(family, data)

    def reverify(program: str) -> tuple[bool, str]:
        check = check_program(sandbox, program, None, outcome.status, outcome.objective, 20.0, {})
        return check.passed, check.detail

    return outcome.objective, reverify


def plant_program(family, data, rewritten: str) -> None:
    TeacherHandler.programs[rewritten] = render_program(family, data, "text")


def test_faithful_rewrite_whose_program_agrees_is_kept_and_the_key_is_sent(server_url, sandbox):
    family, data, statement = instance()
    objective, reverify = reverifier(sandbox, family, data)
    plant_program(family, data, "Business case. " + statement)
    rewrite = rewrite_statement(statement, data, objective, endpoint(server_url, "faithful", api_key="sk-test"),
                                reverify=reverify)
    assert rewrite.accepted and rewrite.outcome == "accepted" and rewrite.text.startswith("Business case.")
    rewrite_request, program_request = TeacherHandler.requests[-2:]
    assert rewrite_request["path"] == "/v1/chat/completions" and rewrite_request["body"]["model"] == "faithful"
    assert program_request["body"]["messages"][-1]["content"] == rewrite.text
    assert rewrite_request["authorization"] == program_request["authorization"] == "Bearer sk-test"


def test_rewrite_whose_program_disagrees_is_refused(server_url, sandbox):
    family, data, statement = instance()
    objective, reverify = reverifier(sandbox, family, data)
    plant_program(family, data, "Business case. " + statement)
    rewrite = rewrite_statement(statement, data, objective, endpoint(server_url, "wrong_program"), reverify=reverify)
    assert not rewrite.accepted and rewrite.outcome == "reverify_failed" and rewrite.text == statement
    assert "objective" in rewrite.detail


def test_rewrite_that_loses_numbers_is_refused(server_url):
    _, data, statement = instance()
    rewrite = rewrite_statement(statement, data, 1234.5, endpoint(server_url, "lossy"))
    assert not rewrite.accepted and rewrite.outcome == "missing_numbers" and rewrite.text == statement


def test_rewrite_that_leaks_the_answer_is_refused(server_url):
    _, data, statement = instance()
    TeacherHandler.answer = "1,234.50"
    rewrite = rewrite_statement(statement, data, 1234.5, endpoint(server_url, "leaky"))
    assert not rewrite.accepted and rewrite.outcome == "leaked_answer"


def test_table_statements_are_rewritten_around_their_tables(server_url):
    _, data, statement = instance("table")
    protected, tables = protect_tables(statement)
    assert tables and "[TABLE 1]" in protected and "|" not in protected
    rewrite = rewrite_statement(statement, data, 1234.5, endpoint(server_url, "faithful"))
    assert rewrite.accepted and rewrite.text.startswith("Business case.")
    assert all(table in rewrite.text for table in tables)
    assert TeacherHandler.requests[-1]["body"]["messages"][-1]["content"] == protected  # the teacher saw no table
    lost = rewrite_statement(statement, data, 1234.5, endpoint(server_url, "drop_table"))
    assert not lost.accepted and lost.outcome == "lost_table" and lost.text == statement


def test_transient_errors_are_retried(server_url):
    _, data, statement = instance()
    TeacherHandler.flaky_left = 2
    before = len(TeacherHandler.requests)
    rewrite = rewrite_statement(statement, data, 1234.5, endpoint(server_url, "flaky", retries=3))
    assert rewrite.accepted and len(TeacherHandler.requests) - before == 3
    TeacherHandler.flaky_left = 2
    with pytest.raises(TeacherUnreachable, match="HTTP 503"):
        rewrite_statement(statement, data, 1234.5, endpoint(server_url, "flaky", retries=1))


def test_an_unreachable_teacher_fails_loudly_before_any_work(tmp_path):
    down = endpoint("http://127.0.0.1:9/v1", "faithful", timeout=2.0, retries=1)
    with pytest.raises(TeacherUnreachable, match=r"127\.0\.0\.1:9/v1.*did not answer after 2 attempts"):
        probe(down)
    config = SynthConfig(n=3, eval_n=0, seed=1, families=["production_mix"], workers=1,
                         representations={"text": 1.0}, infeasible_share=0.0, teacher_retries=0,
                         teacher_endpoint="http://127.0.0.1:9/v1", teacher_model="faithful", teacher_timeout=2.0)
    with pytest.raises(TeacherUnreachable):
        run_synth(config, tmp_path / "synth")
    assert not list((tmp_path / "synth").glob("problems/*.jsonl"))


def test_a_number_of_the_template_is_not_a_leak():
    _, data, statement = instance()
    number = str(data["capacity"][data["resources"][0]])
    assert check_rewrite(statement, statement, data, float(number)) == ("accepted", "")


def test_pipeline_keeps_rewrites_whose_programs_agree(server_url, tmp_path):
    config = SynthConfig(n=3, eval_n=0, seed=1, families=["production_mix"], workers=1,
                         representations={"text": 1.0}, infeasible_share=0.0,
                         teacher_endpoint=server_url, teacher_model="faithful")
    for index in range(12):  # the first candidates of the train split, and the programs that solve them
        candidate = make_candidate(config, "train", index, split_families(config, "train"))
        plant_program(candidate.family, candidate.data, "Business case. " + candidate_statement(candidate))
    run_synth(config, tmp_path / "synth")
    records = [json.loads(line) for line in (tmp_path / "synth" / "problems" / "shard-00000.jsonl").read_text().splitlines()]
    assert len(records) == 3
    assert all(r["statement_source"] == "teacher" and r["statement"].startswith("Business case.") for r in records)
    summary = json.loads((tmp_path / "synth" / "summary.json").read_text())
    assert summary["teacher"] == {"accepted": 3}
