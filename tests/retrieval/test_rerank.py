"""Reranking after fusion: the linear model over retriever scores, speaker, length, session, date."""

from __future__ import annotations

import math
from dataclasses import fields
from datetime import UTC, date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.retrieval.fusion import Fused, fuse_scored
from memstrata.retrieval.periods import mentioned_periods
from memstrata.retrieval.rerank import (
    DEFAULT_RERANK,
    FEATURES,
    RerankPolicy,
    TurnSignals,
    rerank,
    rerank_features,
)

# Only the two rank weights: plain reciprocal rank fusion.
RANKS_ONLY = RerankPolicy(**{name: 0.0 for name in FEATURES} | {"fulltext_rank": 1.0, "vector_rank": 1.0})


def test_the_policy_names_a_weight_for_every_feature_in_order() -> None:
    names = [field.name for field in fields(RerankPolicy)]
    assert names[: len(FEATURES)] == list(FEATURES)
    assert len(DEFAULT_RERANK.weights()) == len(FEATURES)
    # Reciprocal-rank units: the fitted rank weights average 1.
    assert DEFAULT_RERANK.fulltext_rank + DEFAULT_RERANK.vector_rank == pytest.approx(2.0, abs=1e-3)


def test_features_read_ranks_scores_speaker_length_session_and_questions() -> None:
    scores = {"fulltext": {"a": 8.0, "b": 2.0}, "vector": {"b": 0.9, "c": 0.6}}
    fused = fuse_scored({name: list(found.items()) for name, found in scores.items()})
    signals = {
        "a": TurnSignals.of("Ana", "I paint on Sundays", "s1"),
        "b": TurnSignals.of("Bo", "Do you paint?", "s1"),
        "c": TurnSignals.of("Ana", "Blue and gold", "s2"),
    }
    found = rerank_features(fused, scores, signals, "Ana")
    a, b, c = (dict(zip(FEATURES, found[key], strict=True)) for key in "abc")
    assert a["fulltext_rank"] == 1 / 61 and a["vector_rank"] == 0.0 and b["vector_rank"] == 1 / 61
    assert a["fulltext_score"] == 1.0 and b["fulltext_score"] == 0.25 and c["fulltext_score"] == 0.0
    # Not found by the vectors: the policy's gap, or the farthest found turn's when that is lower.
    assert b["vector_gap"] == 0.0 and c["vector_gap"] == pytest.approx(-0.3) and a["vector_gap"] == pytest.approx(-0.3)
    shallow = rerank_features(fused, {"vector": {"b": 0.9}}, signals, None)
    assert shallow["a"][FEATURES.index("vector_gap")] == DEFAULT_RERANK.missing_gap
    assert (a["speaker"], b["speaker"], c["speaker"]) == (1.0, 0.0, 1.0)
    assert a["length"] == math.log(5) and b["both"] == 1.0 and a["both"] == 0.0
    assert a["session"] == math.log(2) and c["session"] == 0.0
    assert (a["asks"], b["asks"]) == (0.0, 1.0)


def test_ranks_beyond_the_policy_depth_carry_no_rank_signal() -> None:
    deep = Fused("x", 0.01, {"fulltext": 25, "vector": 3})
    found = rerank_features([deep], {}, {"x": TurnSignals(speaker="Ana", words=3)}, None, RerankPolicy(depth=20))
    features = dict(zip(FEATURES, found["x"], strict=True))
    assert features["fulltext_rank"] == 0.0 and features["vector_rank"] == 1 / 63 and features["both"] == 0.0


def test_with_rank_weights_alone_the_order_is_reciprocal_rank_fusion() -> None:
    rankings = {"fulltext": [("a", 3.0), ("b", 2.0), ("c", 1.0)], "vector": [("c", 0.9), ("b", 0.8)]}
    signals = {key: TurnSignals(speaker="Ana", words=4) for key in "abc"}
    for k in (60, 5):  # the fusion constant is the caller's, as in reciprocal_rank_fusion
        fused = fuse_scored(rankings, k=k)
        reranked = rerank("what?", fused, {n: dict(r) for n, r in rankings.items()}, signals, RANKS_ONLY, k=k)
        assert [item.key for item in reranked] == [item.key for item in fused]
        assert [item.score for item in reranked] == pytest.approx([item.score for item in fused])


def test_the_named_speakers_turns_rise_and_ranks_are_kept() -> None:
    fused = [Fused("a", 0.0164, {"fulltext": 1}), Fused("b", 0.0161, {"fulltext": 2})]
    signals = {"a": TurnSignals(speaker="Melanie", words=5), "b": TurnSignals(speaker="Caroline", words=5)}
    policy = RerankPolicy(**{name: 0.0 for name in FEATURES} | {"fulltext_rank": 1.0, "speaker": 0.015})
    reranked = rerank("What did Caroline paint?", fused, {}, signals, policy)
    assert [item.key for item in reranked] == ["b", "a"] and reranked[0].ranks == {"fulltext": 2}
    assert [item.key for item in rerank("What did they paint?", fused, {}, signals, policy)] == ["a", "b"]


def test_items_without_signals_keep_their_fused_score_plus_the_typical_turn_extra() -> None:
    fused = [Fused(("turn", 1), 1 / 61, {"fulltext": 1}), Fused(("derived", 7), 1 / 61, {"derived": 1})]
    signals = {("turn", 1): TurnSignals(speaker="Ana", words=9)}
    policy = RerankPolicy(**{name: 0.0 for name in FEATURES} | {"fulltext_rank": 1.0, "length": 0.01})
    reranked = {item.key: item.score for item in rerank("x", fused, {}, signals, policy)}
    assert reranked[("derived", 7)] == pytest.approx(1 / 61 + 0.01 * math.log(10))
    assert reranked[("turn", 1)] == pytest.approx(reranked[("derived", 7)])


@given(
    st.lists(st.floats(min_value=0, max_value=50), max_size=25),
    st.sampled_from(["Ana?", "Bo and Ana", "x", ""]),
)
def test_rerank_keeps_every_item_and_sorts_by_score(scores: list[float], query: str) -> None:
    ranking = [(index, score) for index, score in enumerate(sorted(scores, reverse=True))]
    fused = fuse_scored({"fulltext": ranking})
    signals = {
        index: TurnSignals(
            speaker="Ana" if index % 2 else "Bo", words=index, session=f"s{index % 3}", asks=index % 4 == 0
        )
        for index in range(len(scores))
    }
    reranked = rerank(query, fused, {"fulltext": dict(ranking)}, signals)
    assert sorted(item.key for item in reranked) == list(range(len(scores)))
    assert [item.score for item in reranked] == sorted((item.score for item in reranked), reverse=True)
    assert all(item.ranks == {"fulltext": item.key + 1} for item in reranked)


def test_a_turn_said_on_the_day_the_query_names_rises() -> None:
    fused = [Fused("a", 0.0164, {"fulltext": 1}), Fused("b", 0.0161, {"fulltext": 2})]
    signals = {
        "a": TurnSignals.of("Ana", "We baked bread", "s1", datetime(2022, 11, 2, 9, tzinfo=UTC)),
        "b": TurnSignals.of("Ana", "We baked a cake", "s2", datetime(2022, 11, 9, 18, tzinfo=UTC)),
    }
    assert signals["b"].day == date(2022, 11, 9)
    features = rerank_features(fused, {}, signals, None, periods=mentioned_periods("on 9 November 2022"))
    assert (features["a"][FEATURES.index("period")], features["b"][FEATURES.index("period")]) == (0.0, 1.0)
    policy = RerankPolicy(**{name: 0.0 for name in FEATURES} | {"fulltext_rank": 1.0, "period": 0.01})
    assert [item.key for item in rerank("What did Ana bake on 9 November 2022?", fused, {}, signals, policy)] == [
        "b",
        "a",
    ]
    assert [item.key for item in rerank("What did Ana bake?", fused, {}, signals, policy)] == ["a", "b"]


def test_full_text_weighs_less_when_its_best_matches_hold_few_of_the_query_terms() -> None:
    # "a" is full text's first, on one incidental word; "b" is the vectors' first.
    rankings = {"fulltext": [("a", 3.0), ("b", 1.0)], "vector": [("b", 0.9), ("a", 0.5)]}
    fused = fuse_scored(rankings)
    signals = {key: TurnSignals(speaker="Ana", words=4) for key in "ab"}
    scores = {name: dict(found) for name, found in rankings.items()}
    policy = RerankPolicy(fulltext_rank=1.5, vector_rank=0.5, lexical_floor=0.4)
    strong = rerank("q", fused, scores, signals, policy, coverage=0.4)
    weak = rerank("q", fused, scores, signals, policy, coverage=0.1)
    assert [item.key for item in strong] == ["a", "b"] and [item.key for item in weak] == ["b", "a"]
    off = RerankPolicy(fulltext_rank=1.5, vector_rank=0.5, lexical_floor=0.0)
    assert [item.key for item in rerank("q", fused, scores, signals, off, coverage=0.0)] == ["a", "b"]
