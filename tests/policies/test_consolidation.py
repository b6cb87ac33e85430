"""Consolidation: DBSCAN invariants, extractive summaries and the TES metric."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memstrata.policies.consolidation import (
    ConsolidationPolicy,
    TokenEfficiency,
    capitalised_entities,
    dbscan,
    extractive_summary,
    should_consolidate,
    split_sentences,
    token_efficiency,
)

Matrix = npt.NDArray[np.float64]
SEEDS = st.integers(min_value=0, max_value=2**32 - 1)
SENTENCES = [
    "Alice moved to Paris in 2019.",
    "The weather was nice.",
    "We decided to use Postgres!",
    "Is the report ready?",
    "Bob prefers green tea",
    "ok",
    "The launch slipped to March 3 because of the Berlin outage.",
    "Nothing else happened.",
    "Dana: we shipped it.",
]
TEXTS = st.lists(st.lists(st.sampled_from(SENTENCES), max_size=4).map(" ".join), max_size=6)


def random_unit_rows(seed: int, count: int, dimension: int) -> Matrix:
    """Reproducible random unit vectors."""
    rows: Matrix = np.random.default_rng(seed).normal(size=(count, dimension))
    unit: Matrix = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


def labelled(sentences: Sequence[str]) -> list[str]:
    """A text's sentences as the summary may quote them: later ones after the first one's "Dana: " label."""
    if not sentences or not sentences[0].startswith("Dana: "):
        return list(sentences)
    return [sentences[0], *(f"Dana: {sentence}" for sentence in sentences[1:])]


def fewest_parts(output: str, sentences: Sequence[str], start: int = 0) -> int | None:
    """The fewest sentences, in order, whose " ".join is ``output``; None if there is no such join."""
    counts: list[int] = []
    for index in range(start, len(sentences)):
        sentence = sentences[index]
        if output == sentence:
            counts.append(1)
        elif output.startswith(sentence + " "):
            rest = fewest_parts(output[len(sentence) + 1 :], sentences, index + 1)
            if rest is not None:
                counts.append(rest + 1)
    return min(counts, default=None)


@settings(max_examples=100)
@given(
    seed=SEEDS,
    count=st.integers(min_value=0, max_value=40),
    eps=st.floats(min_value=0.05, max_value=1.5),
    min_samples=st.integers(min_value=1, max_value=6),
)
def test_dbscan_satisfies_the_definition(seed: int, count: int, eps: float, min_samples: int) -> None:
    vectors = random_unit_rows(seed, count, 3)
    distances = 1.0 - vectors @ vectors.T
    # Rounding may differ between this matrix product and the library's; keep clear of the edge.
    assume(not np.any(np.abs(distances - eps) < 1e-9))
    labels = dbscan(vectors, eps=eps, min_samples=min_samples)
    assert len(labels) == count
    assert labels == dbscan(vectors.copy(), eps=eps, min_samples=min_samples)
    near = distances <= eps
    np.fill_diagonal(near, True)
    is_core = near.sum(axis=1) >= min_samples
    clusters = sorted({label for label in labels if label != -1})
    assert clusters == list(range(len(clusters)))
    first_core = [min(i for i in range(count) if labels[i] == cluster and is_core[i]) for cluster in clusters]
    assert first_core == sorted(first_core)
    for point in range(count):
        core_neighbours = [other for other in range(count) if near[point, other] and is_core[other]]
        if is_core[point]:
            assert labels[point] != -1
            assert all(labels[other] == labels[point] for other in core_neighbours)
        elif core_neighbours:
            assert labels[point] in {labels[other] for other in core_neighbours}
        else:
            assert labels[point] == -1


@settings(max_examples=100)
@given(seed=SEEDS, count=st.integers(min_value=1, max_value=20), min_samples=st.integers(min_value=1, max_value=20))
def test_dbscan_puts_identical_points_together(seed: int, count: int, min_samples: int) -> None:
    vectors = np.repeat(random_unit_rows(seed, 1, 8) * 3.0, count, axis=0)
    labels = dbscan(vectors, eps=0.01, min_samples=min_samples)
    assert labels == ([0] * count if min_samples <= count else [-1] * count)


@settings(max_examples=100)
@given(
    seed=SEEDS,
    sizes=st.tuples(st.integers(min_value=2, max_value=15), st.integers(min_value=2, max_value=15)),
    min_samples=st.integers(min_value=1, max_value=2),
)
def test_dbscan_separates_groups_around_orthogonal_centres(seed: int, sizes: tuple[int, int], min_samples: int) -> None:
    generator = np.random.default_rng(seed)
    centres = np.eye(8)[:2]
    groups = np.repeat([0, 1], sizes)
    points = centres[groups] + generator.uniform(-0.02, 0.02, size=(len(groups), 8))
    order = generator.permutation(len(groups))
    labels = np.array(dbscan(points[order], eps=0.2, min_samples=min_samples))
    assert set(labels.tolist()) == {0, 1}
    for group in (0, 1):
        assert len(set(labels[groups[order] == group].tolist())) == 1


@settings(max_examples=100)
@given(seed=SEEDS, count=st.integers(min_value=0, max_value=10))
def test_dbscan_min_samples_above_n_is_all_noise(seed: int, count: int) -> None:
    assert dbscan(random_unit_rows(seed, count, 4), eps=2.0, min_samples=count + 1) == [-1] * count


def test_dbscan_zero_rows_are_noise_unless_alone_is_enough() -> None:
    vectors = np.array([[0.0, 0.0], [1.0, 0.0], [0.99, 0.01]])
    assert dbscan(vectors, eps=0.1, min_samples=2) == [-1, 0, 0]
    assert dbscan(vectors, eps=0.1, min_samples=1) == [0, 1, 1]


@pytest.mark.parametrize(
    ("vectors", "options", "message"),
    [
        (np.ones((2, 2)), {"eps": 0.0, "min_samples": 1}, "eps"),
        (np.ones((2, 2)), {"eps": float("nan"), "min_samples": 1}, "eps"),
        (np.ones((2, 2)), {"eps": 0.1, "min_samples": 0}, "min_samples"),
        (np.ones(3), {"eps": 0.1, "min_samples": 1}, "2-D"),
        (np.array([[1.0, np.nan]]), {"eps": 0.1, "min_samples": 1}, "NaN"),
    ],
)
def test_dbscan_rejects_bad_arguments(vectors: Matrix, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dbscan(vectors, **options)


@settings(max_examples=200)
@given(
    texts=TEXTS,
    seed=SEEDS,
    max_sentences=st.integers(min_value=1, max_value=5),
    max_chars=st.integers(min_value=1, max_value=300),
)
def test_summary_is_an_ordered_selection_within_budget(
    texts: list[str], seed: int, max_sentences: int, max_chars: int
) -> None:
    summary = extractive_summary(
        texts, random_unit_rows(seed, len(texts), 6), max_sentences=max_sentences, max_chars=max_chars
    )
    candidates = [sentence for text in texts for sentence in labelled(split_sentences(text))]
    assert len(summary) <= max_chars
    assert bool(summary) == bool(candidates)
    if summary and not summary.endswith("…"):
        parts = fewest_parts(summary, candidates)
        assert parts is not None
        assert parts <= max_sentences
    if summary.endswith("…"):
        assert all(len(sentence) > max_chars for sentence in candidates)


@settings(max_examples=200)
@given(
    texts=st.lists(st.text(max_size=120), max_size=5),
    seed=SEEDS,
    max_chars=st.integers(min_value=1, max_value=200),
)
def test_summary_of_arbitrary_text_is_bounded_and_non_empty(texts: list[str], seed: int, max_chars: int) -> None:
    summary = extractive_summary(texts, random_unit_rows(seed, len(texts), 4), max_chars=max_chars)
    assert len(summary) <= max_chars
    assert bool(summary) == any(text.strip() for text in texts)


def test_summary_prefers_the_central_text_and_keeps_order() -> None:
    texts = ["Cats purr. Dogs bark.", "Alice flew to Oslo in May.", "Zebras run."]
    vectors = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    assert extractive_summary(texts, vectors, max_sentences=2) == "Cats purr. Alice flew to Oslo in May."


def test_restated_sentences_are_picked_as_said_and_fit_as_restated() -> None:
    texts = ["Ana: We sailed yesterday to the islands.", "Ana: Harbour fees went up this year."]
    vectors = np.array([[1.0, 0.0], [0.9, 0.1]])

    def dated(index: int, sentence: str) -> str:
        return f"{sentence} [yesterday = 7 May 2023]" if "yesterday" in sentence else sentence

    plain = extractive_summary(texts, vectors, max_sentences=2)
    restated = extractive_summary(texts, vectors, max_sentences=2, restate=dated)
    assert restated == plain.replace("islands.", "islands. [yesterday = 7 May 2023]")
    # What must fit is the restated sentence: with room for the plain one only, the other is kept.
    room = len(texts[0]) + 5
    assert extractive_summary(texts, vectors, max_chars=room, restate=dated) == texts[1]
    # When no restatement fits, the best sentence is kept as said, whole if it fits.
    assert extractive_summary(texts[:1], vectors[:1], max_chars=len(texts[0]), restate=dated) == texts[0]
    assert extractive_summary(texts[:1], vectors[:1], max_chars=25, restate=dated) == "Ana: We sailed yesterday…"


def test_short_exclamations_give_way_to_sentences_that_state_something() -> None:
    texts = [
        "Melanie: Wow, Caroline! I finally signed up for the pottery class on Monday.",
        "Caroline: Thanks, Mel! That sounds great.",
        "Melanie: Hey Caroline! The kids loved the camping trip to the lake.",
    ]
    vectors = np.array([[1.0, 0.0], [1.0, 0.0], [0.8, 0.6]])
    summary = extractive_summary(texts, vectors, max_sentences=2)
    # Each quoted sentence keeps its speaker; the greetings lose to what was said.
    assert summary == (
        "Melanie: I finally signed up for the pottery class on Monday. "
        "Melanie: The kids loved the camping trip to the lake."
    )


def test_only_short_sentences_still_give_a_summary() -> None:
    texts = ["Caroline: Thanks, Mel!", "Melanie: Wow, Caroline!"]
    assert extractive_summary(texts, np.ones((2, 2)), max_sentences=1) == "Caroline: Thanks, Mel!"


def test_a_label_needs_a_name_and_a_space() -> None:
    texts = [
        "Note:the build broke. It is green now after the fix landed today.",
        "12: not a speaker at all here. Still not one here either, sadly.",
    ]
    summary = extractive_summary(texts, np.ones((2, 2)), max_sentences=4)
    # Neither prefix is a speaker label, so no sentence is given one.
    assert summary == " ".join(texts)


def test_summary_skips_near_duplicates() -> None:
    texts = ["The build is green again.", "the build is green again!", "Deploy on Friday."]
    summary = extractive_summary(texts, np.ones((3, 2)), max_sentences=3)
    assert summary == "The build is green again. Deploy on Friday."


def test_a_single_overlong_sentence_is_truncated_at_a_word_boundary() -> None:
    summary = extractive_summary(["Alpha beta gamma delta epsilon."], np.ones((1, 2)), max_chars=15)
    assert summary == "Alpha beta…"
    assert extractive_summary(["Supercalifragilistic."], np.ones((1, 2)), max_chars=6) == "Super…"


def test_summary_validates_its_arguments() -> None:
    with pytest.raises(ValueError, match="rows"):
        extractive_summary(["a", "b"], np.ones((1, 2)))
    with pytest.raises(ValueError, match="max_sentences"):
        extractive_summary(["a"], np.ones((1, 2)), max_sentences=0)
    with pytest.raises(ValueError, match="max_chars"):
        extractive_summary(["a"], np.ones((1, 2)), max_chars=0)
    assert extractive_summary([], np.zeros((0, 3))) == ""


@settings(max_examples=200)
@given(sources=st.lists(st.text(max_size=80), max_size=5), summary=st.text(max_size=80))
def test_tes_is_the_geometric_mean_in_the_unit_interval(sources: list[str], summary: str) -> None:
    result = token_efficiency(sources, summary)
    assert result.score == math.sqrt(result.compression_ratio * result.entity_preservation)
    for value in (result.compression_ratio, result.entity_preservation, result.score):
        assert 0.0 <= value <= 1.0


@settings(max_examples=200)
@given(sources=TEXTS)
def test_a_summary_identical_to_its_source_does_not_compress(sources: list[str]) -> None:
    result = token_efficiency(sources, " ".join(sources))
    assert result.compression_ratio == 0.0
    assert result.entity_preservation == 1.0
    assert result.score == 0.0


@settings(max_examples=200)
@given(sources=TEXTS, summary=st.lists(st.sampled_from(["ok", "fine", "the", "weather"]), max_size=6).map(" ".join))
def test_a_summary_without_entities_preserves_none(sources: list[str], summary: str) -> None:
    result = token_efficiency(sources, summary)
    if any(capitalised_entities(text) for text in sources):
        assert result.entity_preservation == 0.0
        assert result.score == 0.0
    else:
        assert result.entity_preservation == 1.0


def test_tes_example() -> None:
    sources = ["Yesterday Alice met Bob in Paris.", "They discussed the weather for hours."]
    result = token_efficiency(sources, "Then Alice met Bob.")
    assert result.compression_ratio == pytest.approx(1 - 4 / 12)
    assert result.entity_preservation == pytest.approx(2 / 3)
    assert result.score == pytest.approx(2 / 3)


def test_tes_edges_and_custom_entities() -> None:
    assert token_efficiency([], "") == TokenEfficiency(0.0, 1.0, 0.0)
    assert token_efficiency(["short"], "much longer summary").compression_ratio == 0.0
    result = token_efficiency(["red green blue"], "red", entities=lambda text: set(text.split()))
    assert result.entity_preservation == pytest.approx(1 / 3)


def test_capitalised_entities() -> None:
    text = "Yesterday Alice's cat met Bob in Paris at 5:30. I think I'm late. Carol agreed, 3 times"
    assert capitalised_entities(text) == {"alice", "bob", "paris", "5:30", "3"}


def test_split_sentences() -> None:
    assert split_sentences("One. Two!  Three?\nFour\n\n five") == ["One.", "Two!", "Three?", "Four", "five"]
    assert split_sentences("e.g.this stays   ") == ["e.g.this stays"]
    assert split_sentences("  \n ") == []


def test_should_consolidate_on_turns_or_tokens() -> None:
    policy = ConsolidationPolicy()
    assert not should_consolidate(49, 4000, policy)
    assert should_consolidate(50, 0, policy)
    assert should_consolidate(0, 4001, policy)


@settings(max_examples=200)
@given(turns=st.integers(min_value=0, max_value=500), tokens=st.integers(min_value=0, max_value=10**5))
def test_should_consolidate_matches_either_trigger(turns: int, tokens: int) -> None:
    policy = ConsolidationPolicy(every_turns=30, token_threshold=2000)
    assert should_consolidate(turns, tokens, policy) == (turns >= 30 or tokens > 2000)


@pytest.mark.parametrize(
    "changes",
    [{"every_turns": 0}, {"token_threshold": -1}, {"min_samples": 0}, {"max_sentences": 0}, {"eps": 0.0}, {"eps": 3.0}],
)
def test_consolidation_policy_rejects_invalid_values(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(changes))):
        ConsolidationPolicy(**changes)
