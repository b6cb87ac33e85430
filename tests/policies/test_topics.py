"""Which segment an exchange is filed in, and the runs a batch of exchanges is cut into."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.policies.topics import (
    MIN_TOPIC_WORDS,
    RECENT_EXCHANGES,
    TopicThresholds,
    choose_topic,
    has_topic,
    recent_direction,
    topic_runs,
)

WORDS = {"sailing", "regatta", "cascais", "harbour"}  # enough to have a topic
THANKS = {"thanks"}  # too few
THRESHOLDS = TopicThresholds(join=0.9, stay=0.7)


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def at(degrees: float) -> np.ndarray:
    """A unit vector in the plane, ``degrees`` from the x axis."""
    return unit(np.cos(np.radians(degrees)), np.sin(np.radians(degrees)))


def test_calibrated_thresholds_sit_between_unrelated_and_identical() -> None:
    e5_like = TopicThresholds.calibrated(0.78)
    spread = TopicThresholds.calibrated(0.05)
    assert 0.78 < e5_like.stay < e5_like.join < 1
    assert 0.05 < spread.stay < spread.join < e5_like.stay  # a spread-out embedder needs lower cosines
    assert e5_like.join == pytest.approx(0.78 + 0.72 * 0.22)


def test_staying_cannot_take_more_than_joining() -> None:
    with pytest.raises(ValueError, match="cannot take more"):
        TopicThresholds(join=0.5, stay=0.6)


def test_an_override_set_alone_keeps_stay_at_most_join() -> None:
    calibrated = TopicThresholds(join=0.94, stay=0.88)
    assert calibrated.with_overrides(0.8, None) == TopicThresholds(join=0.8, stay=0.8)
    assert calibrated.with_overrides(0.95, None) == TopicThresholds(join=0.95, stay=0.88)
    assert calibrated.with_overrides(None, 0.5) == TopicThresholds(join=0.94, stay=0.5)
    assert calibrated.with_overrides(None, 0.97) == TopicThresholds(join=0.97, stay=0.97)  # raises join
    assert calibrated.with_overrides(None, None) == calibrated


def test_a_topic_is_where_its_latest_exchanges_point() -> None:
    old = [unit(1, 0)] * 20
    new = [unit(0, 1)] * RECENT_EXCHANGES
    assert np.allclose(recent_direction(old + new), unit(0, 1))
    assert np.allclose(recent_direction([unit(1, 0), unit(0, 1)]), unit(1, 1))
    assert not np.any(recent_direction([unit(1, 0), unit(-1, 0)]))  # cancelled out: no direction
    with pytest.raises(ValueError, match="at least one"):
        recent_direction([])


def test_an_exchange_needs_a_vector_and_some_content_words_to_have_a_topic() -> None:
    assert has_topic(unit(1, 0), WORDS)
    assert not has_topic(unit(1, 0), list(WORDS)[: MIN_TOPIC_WORDS - 1])
    assert not has_topic(np.zeros(2, dtype=np.float32), WORDS)


def test_the_current_topic_takes_less_similarity_than_an_earlier_one() -> None:
    exchange = at(40)  # cosine 0.77 with the x axis
    assert choose_topic(exchange, WORDS, [at(0)], current=0, thresholds=THRESHOLDS) == 0
    assert choose_topic(exchange, WORDS, [at(0), at(90)], current=1, thresholds=THRESHOLDS) is None


def test_the_widest_margin_wins() -> None:
    exchange = at(0)
    # Earlier topic at cosine 0.98 (margin 0.08) against the current one at 0.77 (margin 0.07).
    assert choose_topic(exchange, WORDS, [at(11), at(40)], current=1, thresholds=THRESHOLDS) == 0
    assert choose_topic(exchange, WORDS, [at(20), at(40)], current=1, thresholds=THRESHOLDS) == 1


def test_an_exchange_without_a_topic_stays_where_the_conversation_is() -> None:
    assert choose_topic(at(90), THANKS, [at(0), at(90)], current=0, thresholds=THRESHOLDS) == 0
    assert choose_topic(np.zeros(2, dtype=np.float32), WORDS, [at(0)], current=0, thresholds=THRESHOLDS) == 0
    # With no current topic it is filed on its vector like any other.
    assert choose_topic(at(90), THANKS, [at(0), at(90)], current=None, thresholds=THRESHOLDS) == 1


def test_a_topic_without_a_direction_is_never_chosen() -> None:
    assert choose_topic(at(0), WORDS, [None, at(0)], current=None, thresholds=THRESHOLDS) == 1
    assert choose_topic(at(0), WORDS, [None], current=0, thresholds=THRESHOLDS) is None


def test_an_aside_stays_on_the_current_topic_when_the_next_exchange_comes_back_to_it() -> None:
    assert THRESHOLDS.returning == pytest.approx(0.8)  # halfway between staying and joining
    aside, topics = at(90), [at(0), at(88)]
    assert choose_topic(aside, WORDS, topics, current=0, thresholds=THRESHOLDS) == 1
    back = (at(20), WORDS)  # cosine 0.94 with the current topic
    assert choose_topic(aside, WORDS, topics, current=0, thresholds=THRESHOLDS, following=back) == 1  # joins still
    assert choose_topic(aside, WORDS, [at(0)], current=0, thresholds=THRESHOLDS, following=back) == 0
    # The next exchange must come back by more than it takes to stay (0.77 < 0.8), and have a topic.
    assert choose_topic(aside, WORDS, [at(0)], current=0, thresholds=THRESHOLDS, following=(at(40), WORDS)) is None
    assert choose_topic(aside, WORDS, [at(0)], current=0, thresholds=THRESHOLDS, following=(at(0), THANKS)) is None
    # Without a current topic, or one without a direction, there is nothing to come back to.
    assert choose_topic(aside, WORDS, [at(0)], current=None, thresholds=THRESHOLDS, following=back) is None
    assert choose_topic(aside, WORDS, [None], current=0, thresholds=THRESHOLDS, following=back) is None


def test_an_aside_in_a_batch_continues_its_run_when_the_next_exchange_comes_back() -> None:
    said = [WORDS] * 4
    assert topic_runs([at(0), at(10), at(90), at(5)], said, stay=0.7) == [[0, 1], [2], [3]]
    assert topic_runs([at(0), at(10), at(90), at(5)], said, stay=0.7, returning=0.8) == [[0, 1, 2, 3]]
    # Not across a break, and not when the next exchange only comes close (40° from the run's 5°).
    assert topic_runs([at(0), at(10), at(90), at(5)], said, stay=0.7, returning=0.8, breaks={3}) == [[0, 1], [2], [3]]
    assert topic_runs([at(0), at(10), at(90), at(45)], said, stay=0.7, returning=0.8) == [[0, 1], [2, 3]]
    # The exchange that came back is compared with the run as it was before the aside: 0.70 with
    # the first exchange, 0.49 with the mean of it and the aside.
    three = [unit(1, 0, 0), unit(0, 1, 0), unit(0.7, 0, 0.714)]
    assert topic_runs(three, [WORDS] * 3, stay=0.5, returning=0.65) == [[0, 1, 2]]
    # The last exchange of a batch has no next one here: filing its run looks further (the store).
    assert topic_runs([at(0), at(10), at(90)], said[:3], stay=0.7, returning=0.8) == [[0, 1], [2]]


def test_exchanges_on_one_topic_make_one_run_and_a_new_topic_starts_another() -> None:
    vectors = [at(0), at(10), at(90), at(95), at(0)]
    # The last exchange returns to the first topic; the run before it is on another, so it starts a run:
    # filing that run then finds the first topic's segment, as one add per exchange would.
    assert topic_runs(vectors, [WORDS] * 5, stay=0.7) == [[0, 1], [2, 3], [4]]


def test_a_run_follows_its_topic_as_it_drifts() -> None:
    # Each 10° from the one before; the last points away from the first. The mean of the whole
    # run would lie 90° from it; the run's latest exchanges lie 25° from it.
    vectors = [at(angle) for angle in range(0, 190, 10)]
    assert topic_runs(vectors, [WORDS] * len(vectors), stay=0.7) == [list(range(len(vectors)))]


def test_an_exchange_without_a_topic_continues_its_run() -> None:
    assert topic_runs([at(0), at(90), at(0)], [WORDS, THANKS, WORDS], stay=0.7) == [[0, 1, 2]]


def test_exchanges_without_a_topic_do_not_steer_their_run() -> None:
    vectors = [at(0), *[at(90)] * 6, at(10)]
    assert topic_runs(vectors, [WORDS, *[THANKS] * 6, WORDS], stay=0.7) == [list(range(8))]


def test_a_break_starts_a_run_whatever_the_exchange_says() -> None:
    vectors = [at(0), at(0), at(90), at(85)]
    assert topic_runs(vectors, [WORDS, WORDS, THANKS, WORDS], stay=0.7, breaks={1, 2}) == [[0], [1], [2, 3]]


def test_vectors_and_words_must_pair_up() -> None:
    with pytest.raises(ValueError, match="2 vectors for 1 exchanges"):
        topic_runs([at(0), at(90)], [WORDS], stay=0.7)


@given(
    st.lists(st.tuples(st.floats(-1, 1), st.floats(-1, 1), st.booleans()), max_size=30),
    st.floats(-1, 2),
    st.none() | st.floats(-1, 2),
)
def test_runs_cover_every_exchange_once_in_order(
    items: list[tuple[float, float, bool]], stay: float, returning: float | None
) -> None:
    vectors = [
        np.asarray([x, y], dtype=np.float32) / max(float(np.hypot(x, y)), 1e-9)
        if np.hypot(x, y) > 1e-6
        else np.zeros(2, dtype=np.float32)
        for x, y, _ in items
    ]
    said = [WORDS if wordy else THANKS for _, _, wordy in items]
    runs = topic_runs(vectors, said, stay=stay, returning=returning)
    assert [index for run in runs for index in run] == list(range(len(items)))
    assert all(runs)
