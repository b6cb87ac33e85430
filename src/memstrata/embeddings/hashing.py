"""A deterministic bag-of-words embedder for tests and load benchmarks — never a default.

It knows no meaning: texts sharing words get similar vectors, nothing more. It exists
so tests run without a model and benchmarks can time the store at 100k turns without
spending an hour embedding; results measured with it say so.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from memstrata.embeddings.base import Vectors, normalize_rows

_WORD = re.compile(r"\w+", re.UNICODE)
#: Word vectors kept (about 1.5 KB each at 384 dimensions); past it the oldest are dropped and made again
#: when met. Unbounded, a million turns with a number in each held 1.7 GB of them.
MAX_CACHED_WORDS = 50_000


class HashEmbedder:
    """Feature-hashing embedder: each lower-cased word adds a fixed pseudo-random vector."""

    def __init__(self, dimension: int = 384) -> None:
        self._dimension = dimension
        self._cache: dict[str, Vectors] = {}

    @property
    def model_id(self) -> str:
        """Names the dimension so differently sized hash vectors are never mixed."""
        return f"hash-bow-{self._dimension}"

    @property
    def dimension(self) -> int:
        """Vector length chosen at construction."""
        return self._dimension

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """One normalised bag-of-words vector per text."""
        matrix = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                matrix[row] += self._word_vector(word)
            if not matrix[row].any():
                matrix[row] = self._word_vector("\0" + text)
        return normalize_rows(matrix)

    def embed_query(self, text: str) -> Vectors:
        """Queries and documents share one space."""
        row: Vectors = self.embed_documents([text])[0]
        return row

    def _word_vector(self, word: str) -> Vectors:
        vector = self._cache.get(word)
        if vector is None:
            seed = int.from_bytes(
                hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
            )
            vector = np.random.default_rng(seed).standard_normal(self._dimension).astype(np.float32)
            if len(self._cache) >= MAX_CACHED_WORDS:
                del self._cache[next(iter(self._cache))]  # the oldest (dicts keep insertion order)
            self._cache[word] = vector
        return vector
