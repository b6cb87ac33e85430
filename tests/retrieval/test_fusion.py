"""Reciprocal rank fusion: properties over arbitrary ranked lists."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.retrieval.fusion import reciprocal_rank_fusion

KEYS = st.integers(min_value=0, max_value=40)
RANKINGS = st.dictionaries(
    st.sampled_from(["fulltext", "vector", "graph", "recent"]), st.lists(KEYS, max_size=25), max_size=4
)
UNIQUE_RANKINGS = st.dictionaries(
    st.sampled_from(["fulltext", "vector", "graph", "recent"]), st.lists(KEYS, max_size=25, unique=True), max_size=4
)
K = st.integers(min_value=1, max_value=200)


@settings(max_examples=200)
@given(rankings=RANKINGS, k=K)
def test_keys_are_the_union_without_duplicates(rankings: dict[str, list[int]], k: int) -> None:
    fused = reciprocal_rank_fusion(rankings, k=k)
    keys = [item.key for item in fused]
    assert len(keys) == len(set(keys))
    assert set(keys) == {key for ranking in rankings.values() for key in ranking}


@settings(max_examples=200)
@given(rankings=RANKINGS, k=K)
def test_scores_are_non_increasing_and_match_the_formula(rankings: dict[str, list[int]], k: int) -> None:
    fused = reciprocal_rank_fusion(rankings, k=k)
    scores = [item.score for item in fused]
    assert scores == sorted(scores, reverse=True)
    for item in fused:
        expected_ranks = {
            name: ranking.index(item.key) + 1 for name, ranking in rankings.items() if item.key in ranking
        }
        assert dict(item.ranks) == expected_ranks
        assert item.score == pytest.approx(sum(1.0 / (k + rank) for rank in expected_ranks.values()))


@settings(max_examples=200)
@given(rankings=UNIQUE_RANKINGS, k=K, top=KEYS)
def test_an_item_first_in_every_list_comes_first(rankings: dict[str, list[int]], k: int, top: int) -> None:
    rankings = {name: [top, *[key for key in ranking if key != top]] for name, ranking in rankings.items()}
    fused = reciprocal_rank_fusion(rankings, k=k)
    if rankings:
        assert fused[0].key == top
        assert all(item.score < fused[0].score for item in fused[1:])
        assert all(rank == 1 for rank in fused[0].ranks.values())


@settings(max_examples=200)
@given(ranking=st.lists(KEYS, max_size=40, unique=True), k=K, name=st.sampled_from(["fulltext", "vector"]))
def test_a_single_list_keeps_its_order_exactly(ranking: list[int], k: int, name: str) -> None:
    fused = reciprocal_rank_fusion({name: ranking}, k=k)
    assert [item.key for item in fused] == ranking
    assert [dict(item.ranks) for item in fused] == [{name: i + 1} for i in range(len(ranking))]


@settings(max_examples=200)
@given(ranking=st.lists(KEYS, max_size=40), k=K)
def test_a_single_list_with_repeats_keeps_first_appearance_order(ranking: list[int], k: int) -> None:
    fused = reciprocal_rank_fusion({"only": ranking}, k=k)
    assert [item.key for item in fused] == list(dict.fromkeys(ranking))


@settings(max_examples=200)
@given(
    rankings=UNIQUE_RANKINGS,
    k=K,
    weights=st.dictionaries(
        st.sampled_from(["fulltext", "vector", "graph", "recent"]),
        st.floats(min_value=0.0, max_value=10.0, allow_nan=False),
        max_size=4,
    ),
)
def test_weights_scale_each_lists_contribution(
    rankings: dict[str, list[int]], k: int, weights: dict[str, float]
) -> None:
    fused = reciprocal_rank_fusion(rankings, k=k, weights=weights)
    scores = [item.score for item in fused]
    assert scores == sorted(scores, reverse=True)
    for item in fused:
        expected = sum(weights.get(name, 1.0) / (k + rank) for name, rank in item.ranks.items())
        assert item.score == pytest.approx(expected)


def test_heavier_list_wins_between_two_single_list_items() -> None:
    rankings = {"fulltext": ["a", "x"], "vector": ["b", "y"]}
    assert reciprocal_rank_fusion(rankings, weights={"fulltext": 2.0})[0].key == "a"
    assert reciprocal_rank_fusion(rankings, weights={"vector": 2.0})[0].key == "b"
    assert reciprocal_rank_fusion(rankings, weights={"fulltext": 0.5})[0].key == "b"


def test_agreement_beats_a_single_first_place() -> None:
    fused = reciprocal_rank_fusion({"fulltext": ["solo", "both"], "vector": ["other", "both"]}, k=60)
    assert fused[0].key == "both"
    assert fused[0].ranks == {"fulltext": 2, "vector": 2}


@settings(max_examples=200)
@given(rankings=RANKINGS, k=K)
def test_deterministic(rankings: dict[str, list[int]], k: int) -> None:
    first = reciprocal_rank_fusion(rankings, k=k)
    second = reciprocal_rank_fusion({name: list(ranking) for name, ranking in rankings.items()}, k=k)
    assert [(i.key, i.score, dict(i.ranks)) for i in first] == [(i.key, i.score, dict(i.ranks)) for i in second]


def test_ties_break_by_best_rank_then_first_appearance() -> None:
    fused = reciprocal_rank_fusion({"a": ["p", "q"], "b": ["q", "p"]})
    assert [item.key for item in fused] == ["p", "q"]
    assert fused[0].score == fused[1].score


def test_equal_scores_prefer_the_better_single_rank_over_first_appearance() -> None:
    # With k=1: rank 1 scores 1/2, and two rank-3 places score 1/4 + 1/4 = 1/2 as well.
    rankings = {"a": ["m", "n", "Y"], "b": ["X"], "c": ["o", "p", "Y"]}
    fused = reciprocal_rank_fusion(rankings, k=1)
    assert [item.key for item in fused] == ["m", "X", "o", "Y", "n", "p"]
    assert {item.score for item in fused[:4]} == {0.5}


def test_empty_inputs() -> None:
    assert reciprocal_rank_fusion({}) == []
    assert reciprocal_rank_fusion({"fulltext": [], "vector": []}) == []


@pytest.mark.parametrize("k", [0, -1, -60])
def test_k_below_one_raises(k: int) -> None:
    with pytest.raises(ValueError, match="k"):
        reciprocal_rank_fusion({"a": [1]}, k=k)
