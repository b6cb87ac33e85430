"""The embedder speed benchmark runs each configuration in its own process and reports positive rates."""

from __future__ import annotations

from memstrata.bench.embedders import run_embedders


def test_hash_embedder_configurations() -> None:
    result = run_embedders(["hash"], [1, 2], 20)
    assert result["benchmark"] == "embedders"
    assert [(row["embedder"], row["threads"]) for row in result["results"]] == [("hash", 1), ("hash", 2)]
    for row in result["results"]:
        assert row["batched_texts_per_s"] > 0 and row["single_texts_per_s"] > 0 and row["query_p50_ms"] >= 0
