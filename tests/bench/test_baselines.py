"""The plain baselines the LoCoMo benchmark compares memstrata against."""

from __future__ import annotations

import numpy as np

from memstrata.bench.baselines import PlainBM25, PlainDense
from memstrata.embeddings.hashing import HashEmbedder


def test_plain_bm25_ranks_within_one_user() -> None:
    index = PlainBM25()
    index.add(
        [
            ("a:1", "a", "Ana", "I adopted a dog"),
            ("a:2", "a", "Bo", "dogs and cats"),
            ("b:1", "b", "Cy", "my dog barks"),
        ]
    )
    assert index.search("dog adopted", "a", 5) == ["a:1", "a:2"]
    assert index.search("dog", "b", 5) == ["b:1"]
    assert index.search('"NEAR(*', "a", 5) == []


def test_plain_dense_ranks_by_cosine_within_one_user() -> None:
    embedder = HashEmbedder()
    dense = PlainDense(embedder)
    texts = ["the lighthouse keeper", "a quiet harbour"]
    dense.add("a", ["a:1", "a:2"], np.asarray(embedder.embed_documents(texts)))
    dense.add("b", ["b:1"], np.asarray(embedder.embed_documents(["the lighthouse keeper"])))
    assert dense.search("lighthouse keeper", "a", 2) == ["a:1", "a:2"]
    assert dense.search("anything", "c", 2) == []
