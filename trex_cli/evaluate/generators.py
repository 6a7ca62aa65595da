"""Where completions come from: an OpenAI-compatible endpoint, a local trex HF export, a file, or the
benchmark's own reference programs (gold, to check the harness itself).

Every generator takes a list of `GenerationRequest`s and calls `on_done(request, completion)` as each
completion arrives, so the caller can execute and grade while generation goes on. Completions are
stored in a `ResponseCache` (an append-only JSONL file keyed by a hash of the request), so an
interrupted eval resumes without asking the model again.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from trex_cli.evaluate.benchmarks import BenchmarkItem


class GenerationError(ValueError):
    """Generation failed for good (after retries); the cache keeps what was done, so rerun to resume."""


@dataclass
class GenerationRequest:
    item: BenchmarkItem
    sample: int
    messages: list[dict[str, str]]
    key: str = ""


@dataclass
class Completion:
    text: str
    finish_reason: str | None = None
    reasoning: str | None = None  # a separate reasoning channel, when the server splits it off
    usage: dict = field(default_factory=dict)
    cached: bool = False
    error: str | None = None  # the request failed for good (never cached: the next run asks again)

    def to_dict(self) -> dict:
        return {"text": self.text, "finish_reason": self.finish_reason, "reasoning": self.reasoning, "usage": self.usage}


OnDone = Callable[[GenerationRequest, Completion], None]


def request_key(identity: dict, request: GenerationRequest) -> str:
    """What decides a completion: the generator's identity and settings, the messages, the sample."""
    payload = {"generator": identity, "messages": request.messages, "sample": request.sample}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class ResponseCache:
    """Completions by request key, in an append-only JSONL file (one line per completion, flushed at
    once, so a crash loses at most the line being written; a torn last line is skipped on load)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._entries: dict[str, dict] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self._entries[entry["key"]] = entry
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> Completion | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        return Completion(
            text=entry["text"],
            finish_reason=entry.get("finish_reason"),
            reasoning=entry.get("reasoning"),
            usage=entry.get("usage") or {},
            cached=True,
        )

    def put(self, key: str, completion: Completion) -> None:
        entry = {"key": key, **completion.to_dict()}
        with self._lock:
            self._entries[key] = entry
            with open(self.path, "a", encoding="utf-8") as stream:
                stream.write(json.dumps(entry) + "\n")
                stream.flush()


class Generator:
    """Base: serve cached completions, generate the rest (subclasses implement `_generate`)."""

    name = "generator"

    def identity(self) -> dict:
        return {"backend": self.name}

    def generate(self, requests: list[GenerationRequest], on_done: OnDone, cache: ResponseCache | None = None) -> None:
        identity = self.identity()
        missing = []
        for request in requests:
            request.key = request_key(identity, request)
            cached = cache.get(request.key) if cache is not None else None
            if cached is not None:
                on_done(request, cached)
            else:
                missing.append(request)
        if not missing:
            return

        def store_then_report(request: GenerationRequest, completion: Completion) -> None:
            if cache is not None and completion.error is None:
                cache.put(request.key, completion)
            on_done(request, completion)

        self._generate(missing, store_then_report)

    def _generate(self, requests: list[GenerationRequest], on_done: OnDone) -> None:
        raise NotImplementedError


# ------------------------------------------------------------------------------------------------
class OpenAIGenerator(Generator):
    """Any OpenAI-compatible endpoint (vLLM, vllm-ascend, MindIE, ...), through the `openai` package:
    chat completions, or plain-text completions for base models (`api_mode="completions"`).

    One request per sample with seed + sample index, so each sample is reproducible and cached on
    its own; `concurrency` requests in flight; retries with exponential backoff (and the server's
    Retry-After) on connection errors, timeouts, 408, 409, 429 and 5xx. A request the server refuses
    for what it is (400, 413, 422: a prompt longer than the context, say) ends that sample as an
    `api_error` and the run goes on; retries used up, or any other refusal (a wrong key, a wrong
    model), stops the run with the completions so far cached.
    """

    name = "openai"
    RETRY_STATUS = (408, 409, 429, 500, 502, 503, 504)
    ITEM_STATUS = (400, 413, 422)  # the request itself is at fault: other items may still succeed

    def __init__(
        self,
        endpoint: str,
        model: str = "",
        *,
        api_key: str | None = None,
        temperature: float = 0.6,
        top_p: float = 1.0,
        max_tokens: int = 9600,
        seed: int = 42,
        concurrency: int = 16,
        request_timeout: float = 600.0,
        max_retries: int = 5,
        backoff_base: float = 1.0,
        api_mode: str = "chat",
        extra_body: dict | None = None,
    ) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"--endpoint {endpoint!r}: expected an http(s) URL such as http://127.0.0.1:8000/v1")
        if api_mode not in ("chat", "completions"):
            raise ValueError(f"--api-mode {api_mode!r}: use chat or completions")
        try:
            import openai
        except ImportError:
            raise ValueError("the openai backend needs the openai package: pip install 'openai>=1.40'") from None
        self.endpoint = endpoint.rstrip("/")
        self.model = model
        self.temperature, self.top_p, self.max_tokens, self.seed = temperature, top_p, max_tokens, seed
        self.concurrency = max(1, concurrency)
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.api_mode = api_mode
        self.extra_body = dict(extra_body or {})
        self.requests_sent = 0  # HTTP requests made (retries included)
        self._lock = threading.Lock()
        # Retries are trex's own (counted, with Retry-After), so the client makes one attempt per call.
        self.client = openai.OpenAI(
            base_url=self.endpoint, api_key=api_key or "EMPTY", timeout=request_timeout, max_retries=0
        )

    def identity(self) -> dict:
        return {
            "backend": self.name,
            "endpoint": self.endpoint,
            "model": self.resolved_model(),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "api_mode": self.api_mode,
            "extra_body": self.extra_body,
        }

    def resolved_model(self) -> str:
        if not self.model:
            listing = self._call("GET /models", self.client.models.list)
            models = [entry.id for entry in listing.data if getattr(entry, "id", None)]
            if not models:
                raise GenerationError(f"{self.endpoint}/models lists no model; pass --model NAME")
            self.model = models[0]
        return self.model

    def _call(self, what: str, function, *args, **kwargs):
        """`function(*args, **kwargs)` with retries; GenerationError when it fails for good, carrying
        `item_error = True` when the server refused this request for what it is."""
        import openai

        last_problem = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                delay = min(60.0, self.backoff_base * 2 ** (attempt - 1)) * (0.5 + random.random())
                time.sleep(delay)
            with self._lock:
                self.requests_sent += 1
            try:
                return function(*args, **kwargs)
            except openai.APIStatusError as error:
                detail = error.response.text[:500] if error.response is not None else str(error)
                last_problem = f"HTTP {error.status_code}: {detail}"
                if error.status_code in self.ITEM_STATUS:
                    failure = GenerationError(f"{what} {self.endpoint}: refused with {last_problem}")
                    failure.item_error = True
                    raise failure from None
                if error.status_code not in self.RETRY_STATUS:
                    raise GenerationError(f"{what} {self.endpoint} failed with {last_problem}") from None
                retry_after = error.response.headers.get("Retry-After") if error.response is not None else None
                if retry_after and retry_after.replace(".", "", 1).isdigit():
                    time.sleep(min(60.0, float(retry_after)))
            except (openai.APIConnectionError, openai.APITimeoutError) as error:
                last_problem = f"{type(error).__name__}: {error}"
            except openai.APIResponseValidationError as error:
                last_problem = f"the reply is not what the API promises ({error})"
        raise GenerationError(
            f"{what} {self.endpoint} failed after {self.max_retries + 1} attempts ({last_problem}); completions so far "
            "are cached: run the same command again to resume"
        )

    def complete(self, request: GenerationRequest) -> Completion:
        common = {
            "model": self.resolved_model(),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed + request.sample,
            "n": 1,
            "extra_body": self.extra_body or None,
        }
        try:
            if self.api_mode == "completions":
                reply = self._call("POST /completions", self.client.completions.create, prompt=completion_prompt(request.messages), **common)
                choice = reply.choices[0]
                text, reasoning = choice.text or "", None
            else:
                reply = self._call("POST /chat/completions", self.client.chat.completions.create, messages=request.messages, **common)
                choice = reply.choices[0]
                message = choice.message
                text = message.content or ""
                extra = getattr(message, "model_extra", None) or {}
                reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        except GenerationError as error:
            if getattr(error, "item_error", False):
                return Completion(text="", error=str(error))
            raise
        except (IndexError, AttributeError, TypeError):
            raise GenerationError(f"{self.endpoint}: unexpected reply {str(reply)[:300]}") from None
        usage = reply.usage.model_dump() if getattr(reply, "usage", None) is not None else {}
        return Completion(text=text, finish_reason=choice.finish_reason, reasoning=reasoning, usage=usage)

    def _generate(self, requests: list[GenerationRequest], on_done: OnDone) -> None:
        self.resolved_model()
        failure: list[BaseException] = []
        item_errors: list[str] = []

        def complete_unless_failed(request: GenerationRequest) -> Completion | None:
            # Once one request failed for good, the rest are not sent: rerunning resumes them.
            return None if failure else self.complete(request)

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = {pool.submit(complete_unless_failed, request): request for request in requests}
            for future in as_completed(futures):
                try:
                    completion = future.result()
                except BaseException as error:  # keep collecting: every finished answer gets cached
                    failure.append(error)
                    continue
                if completion is not None:
                    if completion.error is not None:
                        item_errors.append(completion.error)
                    on_done(futures[future], completion)
        if failure:
            raise failure[0]
        if requests and len(item_errors) == len(requests):
            raise GenerationError(
                f"{self.endpoint} refused all {len(requests)} requests, e.g. {item_errors[0]}; check --model, "
                "--max-tokens and the server's context length"
            )


def completion_prompt(messages: list[dict[str, str]]) -> str:
    """A chat prompt as plain text for a base model: the messages' contents, a blank line apart."""
    return "\n\n".join(message["content"].strip() for message in messages) + "\n\n"


# ------------------------------------------------------------------------------------------------
class FileGenerator(Generator):
    """Completions from a JSONL file: one object per line with `id` (the item id), `completion`, and
    `sample` when there are several per item (`benchmark` too, when ids repeat across benchmarks)."""

    name = "file"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"completions file {self.path} not found (--completions)")
        self.by_item: dict[tuple[str | None, str, int], str] = {}
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{self.path}:{number}: not valid JSON ({error})") from None
            if not isinstance(record, dict) or "id" not in record or "completion" not in record:
                raise ValueError(f"{self.path}:{number}: each line needs 'id' and 'completion' (and 'sample' when n > 1)")
            sample = record.get("sample", 0)
            if isinstance(sample, bool) or not (isinstance(sample, int) or str(sample).strip().isdigit()):
                raise ValueError(
                    f"{self.path}:{number}: 'sample' is {sample!r}; give the sample's number, a whole number "
                    "from 0 (or leave it out when there is one sample per item)"
                )
            key = (record.get("benchmark"), str(record["id"]), int(sample))
            self.by_item[key] = str(record["completion"] or "")

    def identity(self) -> dict:
        return {"backend": self.name, "path": str(self.path)}

    def lookup(self, request: GenerationRequest) -> str:
        for key in ((request.item.benchmark, request.item.id, request.sample), (None, request.item.id, request.sample)):
            if key in self.by_item:
                return self.by_item[key]
        raise ValueError(
            f"{self.path}: no completion for item {request.item.id!r} sample {request.sample} of "
            f"{request.item.benchmark} (item ids are the benchmark's 'id' field, else the 0-based position)"
        )

    def generate(self, requests: list[GenerationRequest], on_done: OnDone, cache: ResponseCache | None = None) -> None:
        texts = [self.lookup(request) for request in requests]  # fail before running anything
        for request, text in zip(requests, texts, strict=True):
            on_done(request, Completion(text=text))


class GoldGenerator(Generator):
    """The benchmark's reference programs, as if a model had written them: checks the harness."""

    name = "gold"

    def generate(self, requests: list[GenerationRequest], on_done: OnDone, cache: ResponseCache | None = None) -> None:
        for request in requests:
            program = request.item.reference_program
            if not program:
                raise ValueError(
                    f"benchmark {request.item.benchmark}: item {request.item.id!r} has no reference program; "
                    "the gold backend needs a benchmark that ships them (Bench4Opt, trex's synth eval split)"
                )
        for request in requests:
            on_done(request, Completion(text=f"```python\n{request.item.reference_program.strip()}\n```"))


# ------------------------------------------------------------------------------------------------
def torch_inference_mode_lazy(function):
    """Run `function` under torch.inference_mode without importing torch at module import."""
    import functools

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        import torch

        with torch.inference_mode():
            return function(*args, **kwargs)

    return wrapper


class HFGenerator(Generator):
    """A local trex HF export (config.json + safetensors + tokenizer files), batched generation on the
    local device (npu, else cuda, else cpu). Sampling follows the eval settings; the seed of each
    batch is seed + its first sample index, so runs repeat."""

    name = "hf"

    def __init__(
        self,
        checkpoint: str | Path,
        *,
        temperature: float = 0.6,
        top_p: float = 1.0,
        max_tokens: int = 9600,
        seed: int = 42,
        batch_size: int = 4,
        device: str = "auto",
        progress_every: float = 10.0,
    ) -> None:
        self.checkpoint = Path(checkpoint)
        if not (self.checkpoint / "config.json").is_file():
            raise FileNotFoundError(
                f"--checkpoint {self.checkpoint}: no config.json there; point it at a trex HF export "
                "(train/<stage>/hf) or another DeepSeek-V4 model folder"
            )
        self.temperature, self.top_p, self.max_tokens, self.seed = temperature, top_p, max_tokens, seed
        self.batch_size = max(1, batch_size)
        self.device_name = device
        self.progress_every = progress_every  # seconds between progress lines; 0: none
        self._model = None
        self._tokenizer = None

    def identity(self) -> dict:
        weights = sorted(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in self.checkpoint.glob("*.safetensors"))
        return {
            "backend": self.name,
            "checkpoint": str(self.checkpoint.resolve()),
            "weights": weights,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
        }

    def _device(self):
        import torch

        if self.device_name != "auto":
            return torch.device(self.device_name)
        try:
            import torch_npu  # noqa: F401

            if torch.npu.is_available():
                return torch.device("npu")
        except Exception:  # torch_npu breaks where CANN is missing: detect by trying
            pass
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("cpu")

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import AutoTokenizer

        from trex_cli.models.deepseek_v4.state_dict_adapter import load_model

        device = self._device()
        if device.type == "cpu":
            # decoding allocates and frees the same activations every token, as a training step does
            from trex_cli.host_memory import keep_freed_memory

            keep_freed_memory()
        # bf16 on accelerators; float32 on CPU, where it runs faster than bf16 matmuls without AMX paths
        dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
        self._model = load_model(self.checkpoint, dtype=dtype, device=device)
        self._model.eval()
        self._tokenizer = AutoTokenizer.from_pretrained(str(self.checkpoint))
        if self._tokenizer.pad_token_id is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token

    def _prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        tokenizer = self._tokenizer
        if getattr(tokenizer, "chat_template", None):
            ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            return list(ids)
        text = "\n\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\n\nassistant: "
        return tokenizer(text)["input_ids"]

    def _progress_line(self, batch_number: int, batches: int, rows: int) -> Callable[[int, int], None] | None:
        """A callback for the model's `generate` that prints, every `progress_every` seconds, how far this
        batch is: a batch of long programs on a CPU decodes for minutes before any sample is graded."""
        if self.progress_every <= 0:
            return None
        from trex_cli.console import out

        started = time.monotonic()
        last = [started]

        def on_step(tokens: int, finished: int) -> None:
            now = time.monotonic()
            if now - last[0] < self.progress_every:
                return
            last[0] = now
            out.print(
                f"hf: batch {batch_number}/{batches} ({rows} prompts): {tokens}/{self.max_tokens} tokens, "
                f"{finished} finished, {tokens / (now - started):.1f} tokens/s per prompt",
                highlight=False,
            )

        return on_step

    def _generate(self, requests: list[GenerationRequest], on_done: OnDone) -> None:
        self._load()
        batches = -(-len(requests) // self.batch_size)
        for start in range(0, len(requests), self.batch_size):
            batch = requests[start : start + self.batch_size]
            prompts = [self._prompt_ids(request.messages) for request in batch]
            on_step = self._progress_line(start // self.batch_size + 1, batches, len(batch))
            outputs = self._sample(prompts, seed=self.seed + start, on_step=on_step)
            for request, (token_ids, finish_reason) in zip(batch, outputs, strict=True):
                text = self._tokenizer.decode(token_ids, skip_special_tokens=True)
                usage = {"prompt_tokens": len(self._prompt_ids(request.messages)), "completion_tokens": len(token_ids)}
                on_done(request, Completion(text=text, finish_reason=finish_reason, usage=usage))

    @torch_inference_mode_lazy
    def _sample(
        self, prompts: list[list[int]], seed: int, on_step: Callable[[int, int], None] | None = None
    ) -> list[tuple[list[int], str]]:
        """Continue a batch of prompts with the model's own `generate` (prompts of any lengths)."""
        model, tokenizer = self._model, self._tokenizer
        if not hasattr(model, "generate"):
            raise ValueError(f"{type(model).__name__} has no generate(); the hf backend needs one")
        eos = tokenizer.eos_token_id
        new_tokens = model.generate(
            prompts, max_new_tokens=self.max_tokens, temperature=self.temperature, top_p=self.top_p,
            eos_token_id=eos, seed=seed, on_step=on_step,
        )  # fmt: skip
        if hasattr(new_tokens, "tolist"):
            new_tokens = [row[len(prompt) :] for row, prompt in zip(new_tokens.tolist(), prompts, strict=True)]
        results = []
        for tokens in new_tokens:
            tokens = list(tokens)
            if eos is not None and eos in tokens:
                results.append((tokens[: tokens.index(eos)], "stop"))
            else:
                results.append((tokens, "length"))
        return results


def parse_extra_body(text: str) -> dict:
    """--extra-body / [eval] extra_body: a JSON object merged into every request body."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"--extra-body {text!r}: not valid JSON ({error}); give an object such as '{{\"top_k\": 20}}'") from None
    if not isinstance(value, dict):
        raise ValueError(f"--extra-body {text!r}: give a JSON object (keys to add to each request), not {type(value).__name__}")
    return value


def build_generator(config, api_key: str | None = None) -> Generator:
    """The generator an EvalConfig asks for."""
    backend = config.backend
    if backend == "openai":
        key = api_key if api_key is not None else os.environ.get(config.api_key_env) if config.api_key_env else None
        return OpenAIGenerator(
            config.endpoint,
            config.model,
            api_key=key,
            temperature=config.temperature,
            top_p=config.top_p,
            max_tokens=config.max_tokens,
            seed=config.seed,
            concurrency=config.concurrency,
            request_timeout=config.request_timeout,
            max_retries=config.max_retries,
            backoff_base=config.retry_backoff_s,
            api_mode=config.api_mode,
            extra_body=parse_extra_body(config.extra_body),
        )
    if backend == "hf":
        if not config.checkpoint:
            raise ValueError("backend 'hf' needs --checkpoint (or [eval] checkpoint): a trex HF export folder")
        return HFGenerator(
            config.checkpoint,
            temperature=config.temperature,
            top_p=config.top_p,
            max_tokens=config.max_tokens,
            seed=config.seed,
            batch_size=config.hf_batch_size,
            device=config.hf_device,
        )
    if backend == "file":
        if not config.completions:
            raise ValueError("backend 'file' needs --completions (or [eval] completions): a JSONL file")
        return FileGenerator(config.completions)
    if backend == "gold":
        return GoldGenerator()
    raise ValueError(f"backend {backend!r}: use openai, hf, file or gold")
