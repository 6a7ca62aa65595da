"""The openai backend (the `openai` package) against a real local HTTP server started by the test:
request fields, retries with backoff, an interrupted eval that resumes from its response cache, an
item the server always refuses (HTTP 400) ending as api_error while the others are graded, the
completions mode for base models, and extra_body."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from eval_fixtures import en_question_rows, write_jsonl
from shared_programs import simple_program

from trex_cli.evaluate import EvalConfig, run_eval
from trex_cli.evaluate.generators import GenerationError

ANSWERS = {
    0: "The model.\n```python\n" + simple_program("model.x + 2 * model.y", integer=True) + "```",
    1: "<think>easy</think>\n```python\n" + simple_program("3 * model.x + 2 * model.y") + "```",
    2: "```python\n" + simple_program("model.x", sense="minimize", extra="model.impossible = pyo.Constraint(expr=model.x >= 11)") + "```",
    3: "I cannot write a program for this.",
}


class FakeEndpoint:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 that answers from ANSWERS by question."""

    def __init__(self) -> None:
        self.payloads: list[dict] = []
        self.served = 0  # completions answered with 200
        self.fail_after: int | None = None  # answer 500 once this many completions were served
        self.transient_failures = 0  # answer 503 to this many requests first
        self.refused_questions: set[int] = set()  # always answer 400 (a prompt too long) for these
        self.refusals = 0
        self.authorizations: set[str] = set()
        self.lock = threading.Lock()
        questions = {row["en_question"]: index for index, row in enumerate(en_question_rows())}
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output quiet
                pass

            def reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/v1/models":
                    self.reply(200, {"object": "list", "data": [{"id": "tiny-or", "object": "model"}]})
                else:
                    self.reply(404, {"error": "not found"})

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                completions_mode = self.path == "/v1/completions"
                prompt = payload["prompt"] if completions_mode else payload["messages"][-1]["content"]
                index = next(i for question, i in questions.items() if question in prompt)
                with endpoint.lock:
                    if index in endpoint.refused_questions:
                        endpoint.refusals += 1
                        self.reply(400, {"error": {"message": "prompt is longer than the maximum context length"}})
                        return
                    endpoint.authorizations.add(self.headers.get("Authorization", ""))
                    if endpoint.transient_failures > 0:
                        endpoint.transient_failures -= 1
                        self.reply(503, {"error": "warming up"})
                        return
                    if endpoint.fail_after is not None and endpoint.served >= endpoint.fail_after:
                        self.reply(500, {"error": "engine died"})
                        return
                    endpoint.served += 1
                    endpoint.payloads.append(payload)
                text = ANSWERS[index]
                if completions_mode:
                    self.reply(200, {
                        "id": "cmpl-1", "object": "text_completion", "model": payload["model"], "created": 0,
                        "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
                        "usage": {"prompt_tokens": 50, "completion_tokens": 80, "total_tokens": 130},
                    })  # fmt: skip
                    return
                self.reply(200, {
                    "id": "chatcmpl-1", "object": "chat.completion", "model": payload["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 50, "completion_tokens": 80, "total_tokens": 130},
                })  # fmt: skip

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def config_for(endpoint: FakeEndpoint, benchmark, **changes) -> EvalConfig:
    settings = dict(
        benchmarks=[str(benchmark)], backend="openai", endpoint=endpoint.url, model="", api_key_env="TREX_TEST_KEY",
        samples=2, concurrency=3, max_retries=2, retry_backoff_s=0.01, allow_code_execution=True, timeout=20,
        workers=2, temperature=0.6, top_p=1.0, max_tokens=512, seed=42,
    )  # fmt: skip
    settings.update(changes)
    return EvalConfig(**settings)


@pytest.fixture
def benchmark(tmp_path):
    return write_jsonl(tmp_path / "bench" / "mini.jsonl", en_question_rows())


def test_an_interrupted_eval_resumes_from_its_cache(tmp_path, benchmark, monkeypatch):
    monkeypatch.setenv("TREX_TEST_KEY", "key-123")
    out = tmp_path / "eval" / "openai"
    with FakeEndpoint() as endpoint:
        endpoint.fail_after = 5  # the engine dies after 5 of the 8 completions
        with pytest.raises(GenerationError, match="run the same command again"):
            run_eval(config_for(endpoint, benchmark), out, show_progress=False)
        assert endpoint.served == 5
        assert len((out / "generations.jsonl").read_text().splitlines()) == 5
        assert len((out / "samples.jsonl").read_text().splitlines()) == 5
        assert not (out / "manifest.json").exists()

        endpoint.fail_after = None
        results = run_eval(config_for(endpoint, benchmark), out, show_progress=False)
        assert endpoint.served == 8  # only the 3 missing completions were asked for again
        payload = endpoint.payloads[0]
        assert payload["model"] == "tiny-or" and payload["temperature"] == 0.6 and payload["top_p"] == 1.0
        assert payload["max_tokens"] == 512 and payload["messages"][0]["role"] == "system"
        assert sorted(p["seed"] for p in endpoint.payloads) == [42] * 4 + [43] * 4  # seed + sample index
        assert endpoint.authorizations == {"Bearer key-123"}

    strict = results["scores"]["mini"]["rules"]["strict"]
    # items 0, 1 and 2 (infeasible, found infeasible) are right in both samples; item 3 has no code
    assert strict["correct"] == 6 and strict["samples"] == 8 and strict["pass@1"] == pytest.approx(0.75)
    assert strict["pass@2"] == pytest.approx(0.75)
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(records) == 8 and {r["outcome"] for r in records} == {"correct", "no code"}
    assert results["scores"]["mini"]["outcomes"]["no code"] == 2
    assert (out / "manifest.json").is_file()


def test_transient_errors_are_retried_with_backoff(tmp_path, benchmark):
    with FakeEndpoint() as endpoint:
        endpoint.transient_failures = 2
        results = run_eval(config_for(endpoint, benchmark, samples=1, model="tiny-or", limit=2), tmp_path / "e", show_progress=False)
        assert endpoint.served == 2 and endpoint.transient_failures == 0
    assert results["scores"]["mini"]["rules"]["strict"]["correct"] == 2


def test_an_unreachable_endpoint_fails_with_a_clear_message(tmp_path, benchmark):
    with FakeEndpoint() as endpoint:
        pass  # the server is gone once the block ends; its port refuses connections
    config = config_for(endpoint, benchmark, model="tiny-or", max_retries=1)
    with pytest.raises(GenerationError, match="failed after 2 attempts"):
        run_eval(config, tmp_path / "e", show_progress=False)


def test_an_item_the_server_always_refuses_ends_as_api_error_and_the_run_finishes(tmp_path, benchmark):
    out = tmp_path / "e"
    with FakeEndpoint() as endpoint:
        endpoint.refused_questions = {1}  # e.g. a prompt longer than the context: HTTP 400 on every try
        results = run_eval(config_for(endpoint, benchmark, samples=1, model="tiny-or"), out, show_progress=False)
        assert endpoint.refusals == 1  # a 400 is not retried: it would fail the same way
        assert endpoint.served == 3
    score = results["scores"]["mini"]
    assert score["outcomes"]["api_error"] == 1 and score["outcomes"]["correct"] == 2 and score["outcomes"]["no code"] == 1
    assert score["rules"]["strict"]["items"] == 4 and score["rules"]["strict"]["correct"] == 2  # refused counts as wrong
    records = {r["item_id"]: r for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    assert records["1"]["outcome"] == "api_error" and "HTTP 400" in records["1"]["reason"]
    assert (out / "manifest.json").is_file()
    assert len((out / "generations.jsonl").read_text().splitlines()) == 3  # the refusal is not cached

    with FakeEndpoint() as endpoint:  # a later run (forced: new settings) asks the refused item again
        endpoint.refused_questions = {0, 1, 2, 3}
        with pytest.raises(GenerationError, match="refused all 4 requests"):
            run_eval(config_for(endpoint, benchmark, samples=1, model="tiny-or"), tmp_path / "all", show_progress=False)


def test_completions_mode_sends_a_plain_prompt_and_extra_body(tmp_path, benchmark):
    with FakeEndpoint() as endpoint:
        config = config_for(endpoint, benchmark, samples=1, model="tiny-or", api_mode="completions",
                            extra_body='{"top_k": 20, "repetition_penalty": 1.05}', limit=2)  # fmt: skip
        results = run_eval(config, tmp_path / "e", show_progress=False)
        payload = endpoint.payloads[0]
    assert "messages" not in payload and payload["prompt"].startswith("You are an expert")
    assert payload["top_k"] == 20 and payload["repetition_penalty"] == 1.05 and payload["seed"] == 42
    assert results["scores"]["mini"]["rules"]["strict"]["correct"] == 2


def test_extra_body_must_be_a_json_object(tmp_path, benchmark):
    with FakeEndpoint() as endpoint:
        for bad in ("{not json", "[1, 2]"):
            with pytest.raises(ValueError, match="--extra-body"):
                run_eval(config_for(endpoint, benchmark, extra_body=bad), tmp_path / "e", show_progress=False)


def test_the_response_cache_skips_a_torn_last_line(tmp_path):
    from trex_cli.evaluate.generators import Completion, ResponseCache

    cache = ResponseCache(tmp_path / "generations.jsonl")
    cache.put("a", Completion(text="first", finish_reason="stop"))
    cache.put("b", Completion(text="second"))
    with open(tmp_path / "generations.jsonl", "a") as stream:
        stream.write('{"key": "c", "text": "cut off by a cra')  # an interruption mid-write
    reloaded = ResponseCache(tmp_path / "generations.jsonl")
    assert len(reloaded) == 2 and reloaded.get("a").text == "first" and reloaded.get("a").cached
    assert reloaded.get("c") is None
