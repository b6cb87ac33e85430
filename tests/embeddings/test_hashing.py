"""The hash embedder (tests and load benchmarks) keeps a bounded cache of word vectors."""

from __future__ import annotations

import numpy as np
import pytest

from memstrata.embeddings import hashing
from memstrata.embeddings.hashing import HashEmbedder


def test_the_word_cache_is_bounded_and_vectors_stay_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hashing, "MAX_CACHED_WORDS", 10)
    embedder = HashEmbedder(dimension=16)
    first = embedder.embed_documents(["word0 common"])
    embedder.embed_documents([f"word{index}" for index in range(1, 50)])
    assert len(embedder._cache) == 10
    np.testing.assert_array_equal(embedder.embed_documents(["word0 common"]), first)  # made again, identical
