"""Exact and near-duplicate removal, keeping the first copy seen.

Exact: the same sequence of matching-form words (see `normalize`). Near: MinHash signatures of word
n-gram shingles (5 by default) indexed with datasketch's `MinHashLSH` at a Jaccard threshold (0.8 by
default); an LSH candidate counts as a duplicate only when the signatures agree on at least the
threshold share of permutations, so LSH false positives are not dropped. Signatures follow
datasketch's "affine64" scheme (h -> a*h + b mod 2^64 with odd a, over already-mixed 64-bit shingle
hashes, datasketch's own permutations) but are computed with numpy for a whole document at once,
which is much faster than feeding shingle strings to `MinHash.update` one at a time.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from trex_cli.data.normalize import ngram_hashes

_SCHEME = "affine64"
_MAX_HASH = np.uint64((1 << 64) - 1)
_BLOCK = 2048  # shingles per block when computing a signature, to bound memory on long documents


@dataclass
class Duplicate:
    reason: str  # "exact_duplicate" or "near_duplicate"
    duplicate_of: str
    similarity: float


class Deduplicator:
    """Streaming dedup: `check(id, word_hashes)` returns a Duplicate, or None and remembers the text."""

    def __init__(
        self,
        threshold: float = 0.8,
        num_permutations: int = 128,
        shingle_words: int = 5,
        seed: int = 1,
        exact: bool = True,
        near: bool = True,
    ) -> None:
        self.threshold = threshold
        self.num_permutations = num_permutations
        self.shingle_words = shingle_words
        self.exact = exact
        self.near = near
        self._exact_seen: dict[bytes, str] = {}
        # LSH keys are insertion numbers: item ids need not be unique across sources
        self._signatures: dict[str, np.ndarray] = {}
        self._ids_by_key: dict[str, str] = {}
        if near:
            try:
                from datasketch import LeanMinHash, MinHash, MinHashLSH
            except ImportError as error:  # pragma: no cover - datasketch is a dependency
                raise ImportError("near-duplicate removal needs datasketch: pip install datasketch") from error
            self._lean_minhash = LeanMinHash
            self._seed = seed
            self._lsh = MinHashLSH(threshold=threshold, num_perm=num_permutations)
            permutations = MinHash(num_perm=num_permutations, seed=seed, scheme=_SCHEME).permutations
            self._a = permutations[0].astype(np.uint64)
            self._b = permutations[1].astype(np.uint64)

    def signature(self, word_hashes: np.ndarray) -> np.ndarray:
        """MinHash signature (uint64, one value per permutation) of the text's shingles."""
        # no np.unique: a minimum does not change when a shingle repeats, and sorting costs more
        shingles = ngram_hashes(word_hashes, self.shingle_words)
        signature = np.full(self.num_permutations, _MAX_HASH, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for start in range(0, len(shingles), _BLOCK):
                block = shingles[start : start + _BLOCK]
                permuted = np.outer(block, self._a) + self._b  # wraps mod 2^64 on purpose
                np.minimum(signature, permuted.min(axis=0), out=signature)
        return signature

    def check(self, item_id: str, word_hashes: np.ndarray) -> Duplicate | None:
        if self.exact:
            key = hashlib.blake2b(word_hashes.tobytes(), digest_size=16).digest()
            first = self._exact_seen.get(key)
            if first is not None:
                return Duplicate("exact_duplicate", first, 1.0)
            self._exact_seen[key] = item_id
        if not self.near:
            return None
        signature = self.signature(word_hashes)
        # LeanMinHash: built from the values alone, without drawing the permutations again
        minhash = self._lean_minhash(seed=self._seed, hashvalues=signature, scheme=_SCHEME)
        best_id, best_similarity = None, 0.0
        for candidate in self._lsh.query(minhash):
            similarity = float(np.mean(self._signatures[candidate] == signature))
            if similarity > best_similarity:
                best_id, best_similarity = candidate, similarity
        if best_id is not None and best_similarity >= self.threshold:
            return Duplicate("near_duplicate", self._ids_by_key[best_id], round(best_similarity, 4))
        key_in_index = f"{len(self._signatures)}"
        self._signatures[key_in_index] = signature
        self._ids_by_key[key_in_index] = item_id
        self._lsh.insert(key_in_index, minhash, check_duplication=False)
        return None
