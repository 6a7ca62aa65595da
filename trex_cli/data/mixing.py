"""Mixing sources by token shares, with repetition capped.

Each source gets `share * total` tokens, where `total` is the recipe's `total_tokens` or, by default,
the tokens all sources hold after cleaning. A source holding more than its target is subsampled
(whole items, in random order, until the target is reached); one holding less is repeated, whole
copies first and then a random part, but never more than `max_upsample` times in all, so a small
source cannot be repeated into memorization. When the cap binds, the source falls short of its share,
which the report shows (`capped`). Sources without a share are taken once, as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class SourceMix:
    source: str
    items_available: int
    tokens_available: int
    target_tokens: int | None
    selected: list[int]  # item indices, repeated items appear more than once
    tokens_selected: int
    capped: bool

    @property
    def repeats(self) -> float:
        return self.tokens_selected / self.tokens_available if self.tokens_available else 0.0


def mix_by_shares(
    token_counts: dict[str, np.ndarray],
    shares: dict[str, float | None],
    total_tokens: int,
    max_upsample: float,
    rng: np.random.Generator,
) -> dict[str, SourceMix]:
    """Choose items per source; `token_counts[source][i]` is the token length of item i."""
    given = [shares[source] for source in token_counts]
    if any(share is not None for share in given) and any(share is None for share in given):
        missing = [source for source in token_counts if shares[source] is None]
        raise ValueError(
            f"some sources have a share and some do not ({', '.join(missing)}); give every source a share "
            "(PATH=SHARE) or none"
        )
    available = {source: int(counts.sum()) for source, counts in token_counts.items()}
    result: dict[str, SourceMix] = {}
    if all(share is None for share in given):
        for source, counts in token_counts.items():
            result[source] = SourceMix(
                source, len(counts), available[source], None, list(range(len(counts))), available[source], False
            )
        return result
    share_sum = sum(given)
    total = total_tokens or sum(available.values())
    for source, counts in token_counts.items():
        target = int(round(shares[source] / share_sum * total))
        selected, capped = _select(counts, target, max_upsample, rng)
        result[source] = SourceMix(
            source, len(counts), available[source], target, selected, int(counts[selected].sum()) if selected else 0, capped
        )
    return result


def _select(counts: np.ndarray, target: int, max_upsample: float, rng: np.random.Generator) -> tuple[list[int], bool]:
    available = int(counts.sum())
    if available == 0 or target <= 0:
        return [], False
    limit = min(target, int(available * max_upsample))
    capped = limit < target
    selected: list[int] = []
    whole_copies = limit // available
    for _ in range(whole_copies):
        selected.extend(range(len(counts)))
    remaining = limit - whole_copies * available
    if remaining > 0:
        order = rng.permutation(len(counts))
        cumulative = np.cumsum(counts[order])
        # take items until the remaining target is reached (the last one may overshoot a little)
        take = int(np.searchsorted(cumulative, remaining, side="left")) + 1
        selected.extend(int(index) for index in order[: min(take, len(order))])
    return selected, capped
