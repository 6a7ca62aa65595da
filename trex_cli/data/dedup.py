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
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trex_cli.data.normalize import ngram_hashes

_SCHEME = "affine64"
_MAX_HASH = np.uint64((1 << 64) - 1)
_FOLD = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xBF58476D1CE4E5B9)
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
            key = exact_digest(word_hashes)
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


def exact_digest(word_hashes: np.ndarray) -> bytes:
    """The 16-byte key of exact dedup: equal word sequences, equal keys."""
    return hashlib.blake2b(word_hashes.tobytes(), digest_size=16).digest()


class SignatureFile:
    """MinHash signatures appended to a file and read back by row: the index keeps none in memory
    beyond a small write buffer, and reads with `pread`, so no mapped page counts in the RSS."""

    def __init__(self, path: Path, num_permutations: int, buffer_rows: int = 4096) -> None:
        self.path = Path(path)
        self.width = num_permutations
        self._file = open(self.path, "w+b")  # noqa: SIM115 - closed by close()
        self._flushed = 0
        self._pending: list[np.ndarray] = []
        self._buffer_rows = buffer_rows

    def __len__(self) -> int:
        return self._flushed + len(self._pending)

    def append(self, signature: np.ndarray) -> None:
        self._pending.append(signature)
        if len(self._pending) >= self._buffer_rows:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._file.seek(0, os.SEEK_END)
            self._file.write(np.stack(self._pending).astype(np.uint64, copy=False).tobytes())
            self._file.flush()
            self._flushed += len(self._pending)
            self._pending = []

    def __getitem__(self, row: int) -> np.ndarray:
        if row >= self._flushed:
            return self._pending[row - self._flushed]
        size = self.width * 8
        return np.frombuffer(os.pread(self._file.fileno(), size, row * size), dtype=np.uint64)

    def close(self) -> None:
        self._file.close()
        self.path.unlink(missing_ok=True)


class BandedDeduplicator(Deduplicator):
    """The same decisions as `Deduplicator` in memory bounded by small per-document entries.

    Exact dedup keeps its 16-byte digests. Near dedup keeps the signatures of kept documents in a file
    (`SignatureFile`) and, per LSH band (datasketch's band and row counts for the threshold, as
    `MinHashLSH` chooses them), a dict from a 64-bit key of the band's values to the first document
    in that bucket (a list when there are more). The candidates are the kept documents sharing a band
    with the new one, as `MinHashLSH.query` gives them; a candidate counts only when the signatures
    agree on at least the threshold share of permutations. Among equally similar candidates the
    earliest is named (`MinHashLSH` returns a set, whose order is arbitrary)."""

    def __init__(self, work_folder: Path, **settings) -> None:
        super().__init__(**settings)
        self._signature_file = None
        if self.near:
            from datasketch.lsh import _optimal_param

            self._bands, self._rows = _optimal_param(self.threshold, self.num_permutations, 0.5, 0.5)
            self._buckets: list[dict[int, int | list[int]]] = [{} for _ in range(self._bands)]
            self._signature_file = SignatureFile(Path(work_folder) / "signatures.u64", self.num_permutations)
            self._kept_ids: list[str] = []
            # a fixed odd multiplier per position folds a band's values into one 64-bit key
            self._fold = (np.arange(self._rows, dtype=np.uint64) * np.uint64(2) + np.uint64(1)) * _FOLD

    def band_keys(self, signature: np.ndarray) -> list[int]:
        """One 64-bit key per band: equal bands give equal keys (other bands collide with chance
        2^-64, which only adds a candidate that the similarity check then judges)."""
        bands = signature[: self._bands * self._rows].reshape(self._bands, self._rows)
        with np.errstate(over="ignore"):
            mixed = bands * self._fold
            mixed ^= mixed >> np.uint64(29)
            mixed *= _MIX
            keys = np.bitwise_xor.reduce(mixed, axis=1) + np.arange(self._bands, dtype=np.uint64)
        return keys.tolist()

    def check(self, item_id: str, word_hashes: np.ndarray) -> Duplicate | None:
        return self.decide(item_id, exact_digest(word_hashes) if self.exact else None,
                           self.signature(word_hashes) if self.near else None)

    def decide(self, item_id: str, digest: bytes | None, signature: np.ndarray | None) -> Duplicate | None:
        """`check` on what it computes from the words: the exact digest (`exact_digest`, None without
        exact dedup) and the MinHash signature (None without near dedup). A sharded build computes these
        in its tasks and decides here, in read order, so the first copy wins as in one process."""
        if self.exact:
            first = self._exact_seen.get(digest)
            if first is not None:
                return Duplicate("exact_duplicate", first, 1.0)
            self._exact_seen[digest] = item_id
        if not self.near:
            return None
        keys = self.band_keys(signature)
        candidates: set[int] = set()
        for bucket, key in zip(self._buckets, keys, strict=True):
            found = bucket.get(key)
            if isinstance(found, list):
                candidates.update(found)
            elif found is not None:
                candidates.add(found)
        best_row, best_similarity = None, 0.0
        for row in sorted(candidates):
            similarity = float(np.mean(self._signature_file[row] == signature))
            if similarity > best_similarity:
                best_row, best_similarity = row, similarity
        if best_row is not None and best_similarity >= self.threshold:
            return Duplicate("near_duplicate", self._kept_ids[best_row], round(best_similarity, 4))
        row = len(self._signature_file)
        self._signature_file.append(signature)
        self._kept_ids.append(item_id)
        for bucket, key in zip(self._buckets, keys, strict=True):
            found = bucket.get(key)
            if found is None:
                bucket[key] = row
            elif isinstance(found, list):
                found.append(row)
            else:
                bucket[key] = [found, row]
        return None

    def close(self) -> None:
        if self._signature_file is not None:
            self._signature_file.close()
