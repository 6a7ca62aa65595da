"""Optional teacher rewrite (T-Rex's back-translation): an OpenAI-compatible chat endpoint rewrites a
template statement as a business problem in its own words.

A rewrite is kept only if it is safe to train on:
- every number of the instance still appears in it (written as in the template, or a fraction as a
  percentage), so the problem is still complete;
- it does not leak the answer: no form of the optimal objective (as printed, or rounded) appears in it
  unless the template itself already contained that string (it is then an instance number);
- it still means the same problem: the teacher is asked, in a second request, to write a program from the
  rewritten statement alone, and that program, run in the sandbox, must reach the verified objective (or
  report infeasible). A rewrite that dropped or changed a requirement fails here.
Otherwise the template statement is kept and the outcome is counted.

Table statements are rewritten too: their Markdown tables are replaced by placeholders the teacher must keep,
and put back verbatim, so the numbers stay in their rows and columns.

Transport: the API key (when given) is sent as a bearer token; connection errors, timeouts, HTTP 429 and 5xx
are retried with exponential backoff; other HTTP errors are not. An endpoint that cannot be reached at all
stops synthesis loudly (`TeacherUnreachable`) instead of quietly keeping every template: `probe` runs before
any work, and a run whose endpoint goes away mid-way stops and resumes from its last finished block.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from data_synth.family import fmt

SYSTEM_PROMPT = (
    "You rewrite optimization word problems as realistic business cases. Keep every number exactly as "
    "written and keep every requirement; do not solve the problem and do not add numbers. Keep every "
    "placeholder such as [TABLE 1] exactly once, on its own line, where the table belongs. Answer with the "
    "rewritten problem only."
)
PROGRAM_PROMPT = (
    "You are an operations research expert. Write one complete Python program that models and solves the "
    "user's optimization problem with Pyomo and the HiGHS solver (pyo.SolverFactory('appsi_highs'), or "
    "'highs' for a quadratic objective). The program must not read any file. Its last printed line must be `Optimal objective value: <value>` when "
    "an optimum is found, or `Status: infeasible` when the problem has no feasible solution. Answer with the "
    "program in one ```python block."
)
RETRY_STATUSES = (429, 500, 502, 503, 504)
_TABLE = re.compile(r"(?:^\|.*\|[ \t]*\n?)+", re.MULTILINE)
_CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


class TeacherUnreachable(ValueError):
    """The teacher endpoint could not be reached after every retry (a setting to fix: the command prints it
    as one line, like any other bad setting, and a rerun resumes)."""


class TeacherRejected(ValueError):
    """The endpoint answered with an HTTP error that retrying cannot fix (400, 401, 404, ...)."""


@dataclass(frozen=True)
class TeacherEndpoint:
    """Where the teacher is and how to talk to it."""

    url: str  # OpenAI-compatible base URL, ".../v1"
    model: str
    api_key: str = ""
    timeout: float = 60.0
    retries: int = 3  # further attempts after the first, on connection errors, timeouts, 429 and 5xx
    backoff: float = 1.0  # seconds before the first retry; doubled each time


@dataclass
class Rewrite:
    accepted: bool
    text: str
    # "accepted", "missing_numbers", "leaked_answer", "lost_table", "reverify_failed", "empty", "http_error"
    outcome: str
    detail: str = ""


def instance_numbers(obj) -> list[float | int]:
    if isinstance(obj, bool):
        return []
    if isinstance(obj, int | float):
        return [obj]
    if isinstance(obj, dict):
        return [n for value in obj.values() for n in instance_numbers(value)]
    if isinstance(obj, list | tuple):
        return [n for value in obj for n in instance_numbers(value)]
    return []


def _contains(text: str, written: str) -> bool:
    return re.search(r"(?<![\d.])" + re.escape(written) + r"(?!\.?\d)", text) is not None


def number_survives(number: float | int, text: str) -> bool:
    forms = [fmt(number)]
    if isinstance(number, float) and 0 < abs(number) < 1:
        forms.append(fmt(round(number * 100, 6)) + "%")
    return any(_contains(text, form) for form in forms)


def answer_forms(objective: float) -> set[str]:
    """Ways a rewrite could state the optimal objective."""
    forms = {fmt(objective), repr(float(objective))}
    for digits in range(0, 5):
        rounded = round(objective, digits)
        forms.add(fmt(rounded))
        forms.add(f"{rounded:,.{digits}f}")
    return {form for form in forms if form not in ("0", "0.0")}


def check_rewrite(rewrite: str, template: str, data: dict, objective: float | None) -> tuple[str, str]:
    """("accepted", "") or (reason, detail) for a candidate rewrite."""
    if not rewrite.strip():
        return "empty", "the teacher returned no text"
    missing = sorted({fmt(n) for n in instance_numbers(data) if not number_survives(n, rewrite)})
    if missing:
        return "missing_numbers", f"numbers lost in the rewrite: {', '.join(missing[:8])}"
    if objective is not None:
        leaked = [form for form in answer_forms(objective) if _contains(rewrite, form) and not _contains(template, form)]
        if leaked:
            return "leaked_answer", f"the rewrite states the optimal objective ({leaked[0]})"
    return "accepted", ""


# ------------------------------------------------------------------------------------------- transport

def chat(endpoint: TeacherEndpoint, messages: list[dict], temperature: float = 0.0) -> str:
    """One chat completion, retried on transient failures. Raises `TeacherUnreachable` when every attempt
    failed to connect or timed out (or kept answering 429/5xx), `TeacherRejected` on another HTTP error."""
    url = endpoint.url.rstrip("/") + "/chat/completions"
    body = json.dumps({"model": endpoint.model, "messages": messages, "temperature": temperature}).encode()
    headers = {"Content-Type": "application/json"}
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    last = ""
    for attempt in range(endpoint.retries + 1):
        if attempt:
            time.sleep(endpoint.backoff * 2 ** (attempt - 1))
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=endpoint.timeout) as response:
                payload = json.loads(response.read().decode())
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:300]
            if error.code not in RETRY_STATUSES:
                raise TeacherRejected(f"{url} answered HTTP {error.code}: {detail}") from error
            last = f"HTTP {error.code}: {detail}"
            continue
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
            last = f"{type(error).__name__}: {getattr(error, 'reason', error)}"
            continue
        try:
            return payload["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as error:
            raise TeacherRejected(f"{url} answered without choices[0].message.content: "
                                  f"{json.dumps(payload)[:300]}") from error
    raise TeacherUnreachable(f"the teacher endpoint {url} did not answer after {endpoint.retries + 1} attempts "
                             f"({last}); check --teacher-endpoint and that the server is up, or run without "
                             "a teacher")


def probe(endpoint: TeacherEndpoint) -> None:
    """One short request before any work: an endpoint that is down, or refuses the model or the key, is an
    error now, not a run of templates counted as http_error."""
    try:
        chat(endpoint, [{"role": "user", "content": "Reply with the word OK."}])
    except TeacherRejected as error:
        raise TeacherRejected(f"{error} (model {endpoint.model!r}; check --teacher-model and the API key)") from None


# --------------------------------------------------------------------------------------------- rewrite

def protect_tables(statement: str) -> tuple[str, list[str]]:
    """The statement with each Markdown table replaced by a [TABLE k] placeholder line, and the tables."""
    tables: list[str] = []

    def placeholder(match: re.Match) -> str:
        tables.append(match.group(0).rstrip("\n"))
        return f"[TABLE {len(tables)}]\n"

    return _TABLE.sub(placeholder, statement), tables


def restore_tables(text: str, tables: list[str]) -> str | None:
    """`text` with the placeholders replaced by their tables, or None when one is missing or repeated."""
    for k, table in enumerate(tables, start=1):
        marker = f"[TABLE {k}]"
        if text.count(marker) != 1:
            return None
        before, _, after = text.partition(marker)
        text = f"{before.rstrip(' ')}\n\n{table}\n\n{after.lstrip(' ')}"
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def program_from(reply: str) -> str:
    """The Python program in a teacher's reply: its first fenced block, or the whole reply."""
    match = _CODE_BLOCK.search(reply)
    return (match.group(1) if match else reply).strip() + "\n"


def rewrite_statement(statement: str, data: dict, objective: float | None, endpoint: TeacherEndpoint,
                      reverify: Callable[[str], tuple[bool, str]] | None = None) -> Rewrite:
    """Ask the teacher for a rewrite and keep it only if `check_rewrite` accepts it and, with `reverify`
    (program text -> (agrees, detail)), the program the teacher writes from the rewrite alone agrees with
    the verified answer. Raises `TeacherUnreachable` when the endpoint is gone."""
    protected, tables = protect_tables(statement)
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": protected}]
    try:
        reply = chat(endpoint, messages).strip()
    except TeacherRejected as error:
        return Rewrite(False, statement, "http_error", str(error))
    text = restore_tables(reply, tables) if tables else reply
    if text is None:
        return Rewrite(False, statement, "lost_table", "the rewrite did not keep every [TABLE k] placeholder once")
    outcome, detail = check_rewrite(text, statement, data, objective)
    if outcome != "accepted":
        return Rewrite(False, statement, outcome, detail)
    if reverify is not None:
        try:
            answer = chat(endpoint, [{"role": "system", "content": PROGRAM_PROMPT}, {"role": "user", "content": text}])
        except TeacherRejected as error:
            return Rewrite(False, statement, "http_error", str(error))
        agrees, detail = reverify(program_from(answer))
        if not agrees:
            return Rewrite(False, statement, "reverify_failed",
                           f"the program the teacher wrote from its rewrite disagrees: {detail}")
    return Rewrite(True, text, outcome)
