"""The held-out split is held out by wording: a moderate sample of candidates, rendered as `trex synth`
renders them (the eval statement against every message of a training SFT sample) but without solving,
shares few 13-grams with training. The item share is what decontamination feels: it drops every
training sample that shares one 13-gram with a benchmark item."""

from __future__ import annotations

import pytest

from data_synth.config import SynthConfig
from data_synth.render import program_data, render_program, request_messages
from data_synth.statements import overlap_report, shared_ngrams
from data_synth.synthesis import candidate_statement, make_candidate

pytestmark = pytest.mark.slow  # renders 400 candidates of all 55 families (about 20 s)

TRAIN_CANDIDATES, EVAL_CANDIDATES = 300, 100


def _sft_text(candidate) -> str:
    """Every message of the training SFT sample `sft_sample` would write for this candidate."""
    family, data = candidate.family, candidate.data
    program = render_program(family, data, candidate.representation, candidate.program_style)
    messages = request_messages(candidate_statement(candidate), program_data(data, candidate.representation),
                                candidate.answer_style)
    formulation = family.formulation(data)
    answer = {"program": program, "model": formulation}.get(candidate.answer_style, f"{formulation}\n\n{program}")
    return " ".join(message["content"] for message in messages) + " " + answer


@pytest.fixture(scope="module")
def sample():
    config = SynthConfig()
    train = []
    for index in range(TRAIN_CANDIDATES):
        candidate = make_candidate(config, "train", index)
        train.append((candidate.family.name, _sft_text(candidate)))
    evaluation = []
    for index in range(EVAL_CANDIDATES):
        candidate = make_candidate(config, "eval", index)
        evaluation.append((candidate.id, candidate.family.name, candidate_statement(candidate)))
    return train, evaluation


def _report(sample) -> tuple[dict, list[dict]]:
    train, evaluation = sample
    return (overlap_report([text for _, text in train], [text for *_, text in evaluation]),
            shared_ngrams(train, evaluation))


def _sources(rows: list[dict], top: int = 8) -> str:
    """The `top` most widely shared runs of words, one per run, with their families."""
    spans = {}
    for row in rows:
        spans.setdefault(row["example_span"], row["example_family"])
    return "; ".join(f"{family}: {span!r}" for span, family in list(spans.items())[:top])


def test_the_overlap_does_not_grow_past_what_is_left(sample):
    """A ratchet on what is left (measured 2026-12-03: 0.4% of eval 13-grams, 25% of eval items, 12.7%
    of training samples at 300/100): a new fixed sentence worded alike in both splits fails here; the
    sources are in the message (and `python -m data_synth.stats FOLDER --shared-ngrams`)."""
    report, rows = _report(sample)
    assert report["eval_ngram_share_in_train"] <= 0.05
    assert report["eval_items_sharing_an_ngram"] <= 0.30, _sources(rows)
    assert report["train_texts_sharing_an_ngram"] <= 0.16, _sources(rows)


@pytest.mark.xfail(strict=True, reason="issue 23 point 4: the families' own fixed sentences (scenario openings, "
                   "rules) still share 13-grams; reword them per split in the family modules' phrasings")
def test_at_most_five_percent_of_eval_items_share_a_13gram_with_training(sample):
    report, rows = _report(sample)
    assert report["eval_items_sharing_an_ngram"] <= 0.05, _sources(rows)
    assert report["train_texts_sharing_an_ngram"] <= 0.05, _sources(rows)
