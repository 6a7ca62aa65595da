"""Text normalization, and the word hashes that dedup and decontamination compare.

Two forms of a text: the *stored* form (`normalize_text`: Unicode NFC, Unix newlines, no trailing
spaces, at most one blank line in a row; code indentation is kept) is what gets tokenized; the
*matching* form (`words`: NFKC, case-folded, runs of letters and digits only) is what dedup and
decontamination compare, so that case, punctuation and spacing changes do not hide a copy.
Word hashes are 64-bit and stable across processes (BLAKE2b), so a build is reproducible.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

import numpy as np

_WORD = re.compile(r"\w+")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")
_BLANK_RUN = re.compile(r"\n{3,}")
# An odd 64-bit multiplier for the rolling n-gram hash (n-gram = polynomial in this base).
_BASE = np.uint64(0x100000001B3)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def normalize_text(text: str) -> str:
    """The stored form of a document or message."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _TRAILING_SPACE.sub("\n", text)
    text = _BLANK_RUN.sub("\n\n", text)
    return text.strip()


def words(text: str) -> list[str]:
    """The matching form: case-folded runs of letters and digits."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


class WordHasher:
    """Stable 64-bit hashes of words, cached because corpora repeat their words a lot."""

    def __init__(self) -> None:
        self._cache: dict[str, int] = {}

    def _hash_new(self, word: str) -> int:
        value = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        self._cache[word] = value
        return value

    def __call__(self, text: str) -> np.ndarray:
        """uint64 hash per word of `text` (matching form)."""
        tokens = words(text)
        try:
            # map() with the dict's own lookup runs without a Python frame per word
            values = list(map(self._cache.__getitem__, tokens))
        except KeyError:  # a word not seen before: hash the new ones, once
            values = [self._cache.get(word) or self._hash_new(word) for word in tokens]
        return np.array(values, dtype=np.uint64)


def ngram_hashes(word_hashes: np.ndarray, n: int) -> np.ndarray:
    """uint64 hash of every run of `n` consecutive words (a single hash of all words when the text
    has fewer than `n` words, none when it has none). Wrapping uint64 arithmetic is intended."""
    count = len(word_hashes)
    if count == 0:
        return np.zeros(0, dtype=np.uint64)
    n = min(n, count)
    width = count - n + 1
    with np.errstate(over="ignore"):
        accumulator = word_hashes[:width].copy()
        for offset in range(1, n):
            accumulator = accumulator * _BASE + word_hashes[offset : offset + width]
        # splitmix64 finalizer: neighbouring n-grams must not give correlated hash bits
        accumulator ^= accumulator >> np.uint64(30)
        accumulator *= _MIX_1
        accumulator ^= accumulator >> np.uint64(27)
        accumulator *= _MIX_2
        accumulator ^= accumulator >> np.uint64(31)
    return accumulator
