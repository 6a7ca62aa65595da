"""Optional teacher rewrite (T-Rex's back-translation): an OpenAI-compatible chat endpoint rewrites a
template statement as a business problem in its own words.

A rewrite is kept only if it is safe to train on:
- every number of the instance still appears in it (written as in the template, or a fraction as a
  percentage), so the problem is still complete, and
- it does not leak the answer: no form of the optimal objective (as printed, or rounded) appears in it
  unless the template itself already contained that string (it is then an instance number).
Otherwise the template statement is kept and the outcome is counted.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass

from data_synth.family import fmt

SYSTEM_PROMPT = (
    "You rewrite optimization word problems as realistic business cases. Keep every number exactly as "
    "written and keep every requirement; do not solve the problem and do not add numbers. Answer with the "
    "rewritten problem only."
)


@dataclass
class Rewrite:
    accepted: bool
    text: str
    outcome: str  # "accepted", "missing_numbers", "leaked_answer", "empty", "http_error"
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


def chat(endpoint: str, model: str, messages: list[dict], timeout: float = 60.0) -> str:
    """One chat completion from an OpenAI-compatible endpoint (base URL ending in /v1 or similar)."""
    url = endpoint.rstrip("/") + "/chat/completions"
    body = json.dumps({"model": model, "messages": messages, "temperature": 0.0}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        payload = json.loads(response.read().decode())
    return payload["choices"][0]["message"]["content"] or ""


def rewrite_statement(statement: str, data: dict, objective: float | None, endpoint: str, model: str,
                      timeout: float = 60.0) -> Rewrite:
    """Ask the teacher for a rewrite and keep it only if `check_rewrite` accepts it."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": statement}]
    try:
        text = chat(endpoint, model, messages, timeout=timeout).strip()
    except (urllib.error.URLError, TimeoutError, OSError, KeyError, IndexError, ValueError) as error:
        return Rewrite(False, statement, "http_error", f"{type(error).__name__}: {error}")
    outcome, detail = check_rewrite(text, statement, data, objective)
    if outcome != "accepted":
        return Rewrite(False, statement, outcome, detail)
    return Rewrite(True, text, outcome)
