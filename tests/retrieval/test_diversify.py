"""Maximal marginal relevance: relevant first, then unlike what was chosen."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.retrieval.diversify import maximal_marginal_relevance

# "a" and "b" say the same thing; "c" says something else, a little less relevantly.
VECTORS = {"a": [1.0, 0.0], "b": [0.99, 0.05], "c": [0.0, 1.0]}


def test_no_diversity_keeps_the_relevance_order() -> None:
    keys = ["a", "b", "c"]
    assert maximal_marginal_relevance(keys, [3.0, 2.9, 2.0], VECTORS, diversity=0.0, limit=3) == keys


def test_diversity_moves_a_near_duplicate_below_something_new() -> None:
    chosen = maximal_marginal_relevance(["a", "b", "c"], [3.0, 2.9, 2.0], VECTORS, diversity=0.5, limit=3)
    assert chosen == ["a", "c", "b"]


def test_crowded_cosines_still_tell_a_repeat_from_something_new() -> None:
    # Like e5: every pair scores about 0.8 because all vectors share one large component.
    shared = np.array([2.0, 0.0, 0.0, 0.0])
    vectors = {
        "a": shared + np.array([0, 1, 0, 0]),
        "b": shared + np.array([0, 1, 0.05, 0]),
        "c": shared + np.array([0, 0, 1, 0]),
        "d": shared + np.array([0, 0, 0, 1]),
    }
    chosen = maximal_marginal_relevance(["a", "b", "c", "d"], [1.0, 0.95, 0.8, 0.2], vectors, diversity=0.3, limit=3)
    assert chosen == ["a", "c", "b"]
    assert maximal_marginal_relevance(["a", "b", "c"], [1.0, 0.95, 0.8], vectors, diversity=0.0, limit=3) == [
        "a",
        "b",
        "c",
    ]


def test_the_limit_and_keys_without_vectors() -> None:
    chosen = maximal_marginal_relevance(["a", "b", "x"], [3.0, 2.9, 1.0], VECTORS, diversity=0.6, limit=2)
    assert chosen == ["a", "x"]  # "x" has no vector, so it resembles nothing
    assert maximal_marginal_relevance([], [], {}, diversity=0.5, limit=3) == []
    assert maximal_marginal_relevance(["a"], [1.0], {}, diversity=0.5, limit=0) == []


def test_equal_scores_and_zero_vectors_keep_the_given_order() -> None:
    vectors = {"a": [0.0, 0.0], "b": [0.0, 0.0]}
    assert maximal_marginal_relevance(["a", "b"], [1.0, 1.0], vectors, diversity=0.3, limit=2) == ["a", "b"]


@pytest.mark.parametrize("diversity", [-0.1, 1.5, float("nan")])
def test_diversity_outside_zero_to_one_is_refused(diversity: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        maximal_marginal_relevance(["a"], [1.0], VECTORS, diversity=diversity, limit=1)


def test_keys_and_scores_must_pair_up() -> None:
    with pytest.raises(ValueError, match="same length"):
        maximal_marginal_relevance(["a", "b"], [1.0], VECTORS, diversity=0.5, limit=1)


@given(
    st.lists(st.floats(min_value=-5, max_value=5), min_size=1, max_size=12),
    st.floats(min_value=0, max_value=1),
    st.integers(min_value=1, max_value=15),
)
def test_the_result_is_distinct_candidates_and_starts_with_the_best(
    scores: list[float], diversity: float, limit: int
) -> None:
    keys = list(range(len(scores)))
    rng = np.random.default_rng(len(scores))
    vectors = {key: rng.normal(size=4) for key in keys}
    order = sorted(keys, key=lambda key: -scores[key])
    chosen = maximal_marginal_relevance(
        order, [scores[key] for key in order], vectors, diversity=diversity, limit=limit
    )
    assert len(chosen) == min(limit, len(keys)) and len(set(chosen)) == len(chosen)
    assert chosen[0] == order[0]
