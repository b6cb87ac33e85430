"""Ranking metrics: hand-checked values and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.bench.metrics import hit_at, ndcg_at, recall_at


def test_recall_counts_each_relevant_once() -> None:
    assert recall_at(["a", "b", "c", "d"], {"b", "d", "z"}, 2) == pytest.approx(1 / 3)
    assert recall_at(["a", "b", "c", "d"], {"b", "d", "z"}, 4) == pytest.approx(2 / 3)


def test_hit_is_binary() -> None:
    assert hit_at(["x", "y"], {"y"}, 2) == 1.0
    assert hit_at(["x", "y"], {"y"}, 1) == 0.0


def test_ndcg_hand_computed() -> None:
    # relevant at ranks 2 and 3, two relevant in all
    expected = (1 / math.log2(3) + 1 / math.log2(4)) / (1 / math.log2(2) + 1 / math.log2(3))
    assert ndcg_at(["x", "a", "b"], {"a", "b"}, 10) == pytest.approx(expected)
    assert ndcg_at(["a", "b"], {"a", "b"}, 10) == pytest.approx(1.0)


def test_empty_relevant_set_is_an_error() -> None:
    with pytest.raises(ValueError):
        recall_at(["a"], set(), 1)
    with pytest.raises(ValueError):
        ndcg_at(["a"], set(), 1)


@given(
    st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=8),
    st.sets(st.sampled_from("abcdefgh"), min_size=1),
    st.integers(1, 10),
)
def test_metrics_stay_in_unit_interval_and_grow_with_k(ranked: list[str], relevant: set[str], k: int) -> None:
    for metric in (recall_at, hit_at, ndcg_at):
        value = metric(ranked, relevant, k)
        assert 0.0 <= value <= 1.0 + 1e-9
    assert recall_at(ranked, relevant, k) <= recall_at(ranked, relevant, k + 1)
    assert hit_at(ranked, relevant, k) <= hit_at(ranked, relevant, k + 1)
