"""Topic scores and the runs a batch of exchanges is filed in."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.policies.topics import _Label, topic_runs, topic_score


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def words_of(texts: Sequence[str]) -> Counter[str]:
    return Counter(word for text in texts for word in text.lower().split())


def test_the_score_is_the_cosine_when_no_words_are_shared() -> None:
    assert topic_score(unit(1, 0), {"boat"}, unit(1, 1), {"tax"}) == pytest.approx(np.sqrt(0.5))


def test_shared_words_lift_the_score_by_half_their_share() -> None:
    lifted = topic_score(unit(1, 0), {"boat", "sail"}, unit(0, 1), {"boat"})
    assert lifted == pytest.approx(0.25)  # cosine 0, one word of two in common


def test_phrases_from_an_llm_count_word_by_word() -> None:
    assert topic_score(unit(1, 0), {"sailing", "regatta"}, unit(0, 1), ["sailing regatta"]) == pytest.approx(0.5)


def test_exchanges_on_one_topic_make_one_run_and_a_new_topic_starts_another() -> None:
    vectors = [unit(1, 0, 0), unit(0.95, 0.05, 0), unit(0, 1, 0), unit(0, 0.9, 0.1), unit(1, 0, 0)]
    texts = [["sailing"], ["sailing again"], ["taxes"], ["taxes again"], ["sailing once more"]]
    # The last exchange returns to the first topic; the run before it is on taxes, so it starts a run:
    # filing that run then finds the sailing segment, as one add per exchange would.
    assert topic_runs(vectors, texts, words_of, 0.8) == [[0, 1], [2, 3], [4]]


def test_shared_words_keep_a_borderline_exchange_in_its_run() -> None:
    vectors = [unit(1, 0), unit(0.6, 0.8)]  # cosine 0.6
    assert topic_runs(vectors, [["regatta cascais"], ["regatta cascais"]], words_of, 0.8) == [[0, 1]]
    assert topic_runs(vectors, [["regatta cascais"], ["invoice receipt"]], words_of, 0.8) == [[0], [1]]


def test_a_zero_vector_scores_on_words_alone() -> None:
    vectors = [np.zeros(2, dtype=np.float32), np.zeros(2, dtype=np.float32)]
    assert topic_runs(vectors, [["a"], ["b"]], words_of, 0.4) == [[0], [1]]
    assert topic_runs(vectors, [["a"], ["a"]], words_of, 0.4) == [[0, 1]]


def test_vectors_and_texts_must_pair_up() -> None:
    with pytest.raises(ValueError, match="2 vectors for 1 exchanges"):
        topic_runs([unit(1, 0), unit(0, 1)], [["a"]], words_of, 0.8)


@given(
    st.lists(st.tuples(st.floats(-1, 1), st.floats(-1, 1), st.sampled_from(["a", "b", "c d"])), max_size=30),
    st.floats(-1, 2),
)
def test_runs_cover_every_exchange_once_in_order(items: list[tuple[float, float, str]], threshold: float) -> None:
    vectors = [
        np.asarray([x, y], dtype=np.float32) / max(float(np.hypot(x, y)), 1e-9)
        if np.hypot(x, y) > 1e-6
        else np.zeros(2, dtype=np.float32)
        for x, y, _ in items
    ]
    runs = topic_runs(vectors, [[text] for _, _, text in items], words_of, threshold)
    assert [index for run in runs for index in run] == list(range(len(items)))
    assert all(runs)


@given(st.lists(st.lists(st.sampled_from("abcdefghij"), max_size=8), max_size=20), st.integers(1, 6))
def test_a_runs_label_is_its_most_common_words_with_ties_to_the_first_seen(
    exchanges: list[list[str]], size: int
) -> None:
    label = _Label(size)
    everything: Counter[str] = Counter()
    for words in exchanges:
        label.update(Counter(words))
        everything.update(Counter(words))
        assert label.words() == [word for word, _ in everything.most_common(size)]
