"""The held-out split is held out by wording: a moderate sample of candidates, rendered as `trex synth`
renders them (the eval statement against every message of a training SFT sample) but without solving,
shares few 13-grams with training. The item share is what decontamination feels: it drops every
training sample that shares one 13-gram with a benchmark item."""

from __future__ import annotations

import pytest

from data_synth.statements import overlap_report, shared_ngrams
from data_synth.stats import rendered_sample

pytestmark = pytest.mark.slow  # renders 400 candidates of all 55 families (about 20 s)

TRAIN_CANDIDATES, EVAL_CANDIDATES = 300, 100


@pytest.fixture(scope="module")
def sample():
    return rendered_sample(TRAIN_CANDIDATES, EVAL_CANDIDATES)


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


def test_at_most_five_percent_of_eval_items_share_a_13gram_with_training(sample):
    """Issue 23 point 4 (measured 2026-12-03 at 300/100: no eval item and no training sample share one; at
    1,100/400 with `python -m data_synth.stats --rendered`, none of 400): a new fixed sentence worded alike in
    both splits fails here; the sources are in the message (and `python -m data_synth.stats FOLDER
    --shared-ngrams`)."""
    report, rows = _report(sample)
    assert report["eval_ngram_share_in_train"] <= 0.01, _sources(rows)
    assert report["eval_items_sharing_an_ngram"] <= 0.05, _sources(rows)
    assert report["train_texts_sharing_an_ngram"] <= 0.05, _sources(rows)
