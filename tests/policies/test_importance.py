"""Turn importance: signal classification examples and properties of the score."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.policies.importance import (
    ImportanceWeights,
    SignalType,
    TurnFeatures,
    classify_signal,
    ema,
    importance,
    recency_decay,
)

ROLES = st.sampled_from(["user", "assistant", "system", "tool", "narrator"])
WORDS = st.lists(st.sampled_from(["pizza", "Paris", "the", "blue", "42", "quietly", "Monday", "code"]), max_size=30)
UNIT = st.floats(min_value=0.0, max_value=1.0)
AGES = st.floats(min_value=0.0, max_value=1e10)
RUNNING = st.none() | UNIT
ANY_TEXT = st.text(max_size=200)


@st.composite
def turn_features(draw: st.DrawFn, text: st.SearchStrategy[str] = ANY_TEXT) -> TurnFeatures:
    """Arbitrary valid features, text drawn from ``text``."""
    return TurnFeatures(
        text=draw(text),
        role=draw(ROLES),
        pinned=draw(st.booleans()),
        entity_count=draw(st.integers(min_value=0, max_value=50)),
        novelty=draw(st.floats(min_value=-1.0, max_value=2.0)),
        age_seconds=draw(AGES),
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I prefer tea over coffee", SignalType.PREFERENCE),
        ("i really LOVE hiking in the alps", SignalType.PREFERENCE),
        ("I hate waking up early", SignalType.PREFERENCE),
        ("My favourite band is Radiohead", SignalType.PREFERENCE),
        ("my favorite color is green", SignalType.PREFERENCE),
        ("I don’t like spicy food", SignalType.PREFERENCE),
        ("We decided to use Postgres", SignalType.DECISION),
        ("Let's go with the blue one", SignalType.DECISION),
        ("I chose the cheaper flight", SignalType.DECISION),
        ("I'll go with option B", SignalType.DECISION),
        ("I need to renew my passport", SignalType.TASK),
        ("Remind me to call Anna", SignalType.TASK),
        ("add milk to my todo list", SignalType.TASK),
        ("I have to submit the form", SignalType.TASK),
        ("I'm planning a trip to Japan", SignalType.PLAN),
        ("I will start running again", SignalType.PLAN),
        ("Next week I'm going to visit my parents", SignalType.PLAN),
        ("I'm worried about the launch", SignalType.RISK),
        ("The migration might fail on old data", SignalType.RISK),
        ("The deadline is Friday", SignalType.RISK),
        ("There is a real risk here", SignalType.RISK),
        ("I am a nurse", SignalType.FACT),
        ("I live in Lisbon", SignalType.FACT),
        ("I work at a bakery", SignalType.FACT),
        ("My sister's name is Maya", SignalType.FACT),
        ("I'm 34 years old", SignalType.FACT),
        ("ok thanks", SignalType.NONE),
        ("", SignalType.NONE),
        ("What's the weather like?", SignalType.NONE),
        ("Do you like pizza?", SignalType.NONE),
        ("I'm not sure", SignalType.NONE),
        ("I'm fine, thanks", SignalType.NONE),
        ("I'd like a summary", SignalType.NONE),
        ("I have tomatoes", SignalType.NONE),
        ("hi, likely the willow tree", SignalType.NONE),
        ("Alicelike preferences", SignalType.NONE),
        ("The myth is old", SignalType.NONE),
    ],
)
def test_classify_signal_examples(text: str, expected: SignalType) -> None:
    assert classify_signal(text) == expected


def test_specific_cues_win_over_broad_ones() -> None:
    assert classify_signal("I'm worried I will miss it") == SignalType.RISK
    assert classify_signal("I'll go with the red one") == SignalType.DECISION
    assert classify_signal("I am planning to move") == SignalType.PLAN
    assert classify_signal("I love that I live here") == SignalType.PREFERENCE


@settings(max_examples=200)
@given(text=st.text(max_size=300))
def test_classify_signal_is_total(text: str) -> None:
    assert classify_signal(text) in set(SignalType)


@settings(max_examples=200)
@given(features=turn_features(), running=RUNNING)
def test_importance_and_running_are_in_the_unit_interval(features: TurnFeatures, running: float | None) -> None:
    score, new_running = importance(features, running=running)
    assert 0.0 <= score <= 1.0
    assert 0.0 <= new_running <= 1.0


@settings(max_examples=200)
@given(features=turn_features(), running=RUNNING)
def test_pinned_scores_at_least_unpinned(features: TurnFeatures, running: float | None) -> None:
    pinned, _ = importance(dataclasses.replace(features, pinned=True), running=running)
    unpinned, _ = importance(dataclasses.replace(features, pinned=False), running=running)
    assert pinned >= unpinned


@settings(max_examples=200)
@given(
    features=turn_features(),
    running=RUNNING,
    template=st.sampled_from(["I prefer {}", "I love {}", "We decided {}", "Let's go with {}", "my favourite is {}"]),
    words=WORDS,
)
def test_preferences_and_decisions_outrank_bland_acknowledgements(
    features: TurnFeatures, running: float | None, template: str, words: list[str]
) -> None:
    signal, _ = importance(dataclasses.replace(features, text=template.format(" ".join(words))), running=running)
    bland, _ = importance(dataclasses.replace(features, text="ok thanks"), running=running)
    assert signal >= bland


def test_pinned_bland_turn_scores_high() -> None:
    score, _ = importance(TurnFeatures(text="ok", role="user", pinned=True, novelty=0.0))
    assert score >= 0.5


def test_the_running_value_is_the_ema_of_the_dynamic_signal() -> None:
    weights = ImportanceWeights(ema_alpha=0.25)
    fresh = TurnFeatures(text="ok", role="user", entity_count=5, novelty=1.0, age_seconds=0.0)
    stale = TurnFeatures(text="ok", role="user", entity_count=0, novelty=0.0, age_seconds=1e12)
    _, first = importance(fresh, weights=weights)
    assert first == pytest.approx(1.0)
    _, second = importance(stale, weights=weights, running=first)
    assert second == pytest.approx(0.75)


def test_more_novel_turns_score_higher() -> None:
    low, _ = importance(TurnFeatures(text="I live in Oslo", role="user", novelty=0.1))
    high, _ = importance(TurnFeatures(text="I live in Oslo", role="user", novelty=0.9))
    assert high > low


def _static_score(text: str) -> float:
    """The score of a user turn with no dynamic signal, so only the text's cues count."""
    weights = ImportanceWeights(entity_density_weight=0.0, novelty_weight=0.0, recency_weight=0.0)
    return importance(TurnFeatures(text=text, role="user"), weights=weights)[0]


def test_a_question_a_number_and_a_date_word_each_add_their_weight() -> None:
    weights = ImportanceWeights()
    plain = _static_score("we talked about the garden again")  # six words, no cue
    assert _static_score("we talked about the garden again?") == pytest.approx(plain + weights.question_weight)
    assert _static_score("we talked about the garden 42") == pytest.approx(plain + weights.numbers_weight)
    assert _static_score("we talked about the garden Monday") == pytest.approx(plain + weights.numbers_weight)
    assert _static_score("we talked about the garden yesterday") == pytest.approx(plain + weights.numbers_weight)
    both = _static_score("we talked about the garden 42?")
    assert both == pytest.approx(plain + weights.question_weight + weights.numbers_weight)


def test_length_counts_up_to_its_saturation_and_no_further() -> None:
    weights = ImportanceWeights()
    words = weights.length_saturation_words
    scores = [_static_score(" ".join(["garden"] * n)) for n in (1, 5, 20, words, words * 3)]
    assert scores[0] < scores[1] < scores[2] < scores[3] == scores[4]
    role = weights.role_weights["user"]
    assert scores[3] == pytest.approx(role + weights.length_weight)  # saturated: the whole length weight


def test_user_outranks_assistant_outranks_tool() -> None:
    scores = [
        importance(TurnFeatures(text="I live in Oslo", role=role, novelty=0.5))[0]
        for role in ("user", "assistant", "tool")
    ]
    assert scores[0] > scores[1] > scores[2]


@settings(max_examples=200)
@given(first=AGES, second=AGES, half_life=st.floats(min_value=1.0, max_value=1e9))
def test_recency_decay_is_monotone_and_bounded(first: float, second: float, half_life: float) -> None:
    younger, older = sorted((first, second))
    assert recency_decay(younger, half_life) >= recency_decay(older, half_life)
    assert 0.0 <= recency_decay(older, half_life) <= 1.0
    if older / half_life < 1000:
        assert recency_decay(older, half_life) > 0.0


@settings(max_examples=200)
@given(half_life=st.floats(min_value=1e-3, max_value=1e9))
def test_recency_decay_anchors(half_life: float) -> None:
    assert recency_decay(0.0, half_life) == 1.0
    assert recency_decay(half_life, half_life) == pytest.approx(0.5)
    assert recency_decay(-half_life, half_life) == 1.0


@pytest.mark.parametrize("half_life", [0.0, -1.0, float("nan"), float("inf")])
def test_recency_decay_rejects_bad_half_lives(half_life: float) -> None:
    with pytest.raises(ValueError, match="half_life"):
        recency_decay(10.0, half_life)


@settings(max_examples=200)
@given(
    previous=st.floats(min_value=-1e6, max_value=1e6),
    value=st.floats(min_value=-1e6, max_value=1e6),
    alpha=UNIT,
)
def test_ema_lies_between_previous_and_value(previous: float, value: float, alpha: float) -> None:
    result = ema(previous, value, alpha)
    assert min(previous, value) <= result <= max(previous, value)


def test_ema_edges() -> None:
    assert ema(None, 0.3, 0.1) == 0.3
    assert ema(0.2, 0.8, 0.0) == 0.2
    assert ema(0.2, 0.8, 1.0) == 0.8
    assert ema(0.0, 1.0, 0.25) == 0.25
    with pytest.raises(ValueError, match="alpha"):
        ema(0.0, 1.0, 1.5)


@pytest.mark.parametrize(
    "changes",
    [{"pinned_bonus": -0.1}, {"novelty_weight": float("nan")}, {"ema_alpha": 1.1}, {"length_saturation_words": 0}],
)
def test_weights_reject_invalid_values(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(changes))):
        ImportanceWeights(**changes)


def test_weights_reject_negative_signal_weights() -> None:
    with pytest.raises(ValueError, match="signal_weights"):
        ImportanceWeights(signal_weights={SignalType.FACT: -1.0})


def test_features_and_running_are_validated() -> None:
    with pytest.raises(ValueError, match="entity_count"):
        TurnFeatures(text="x", role="user", entity_count=-1)
    with pytest.raises(ValueError, match="age_seconds"):
        TurnFeatures(text="x", role="user", age_seconds=-1.0)
    with pytest.raises(ValueError, match="running"):
        importance(TurnFeatures(text="x", role="user"), running=1.5)
