"""Entity candidates: which questions ask for a kind, which entities they reach, which turns move where."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.retrieval.entity_candidates import (
    EntityCandidatePolicy,
    asks_for_kind,
    closest_entities,
    entity_turns,
    placed,
)

POLICY = EntityCandidatePolicy()


@pytest.mark.parametrize(
    "question",
    [
        "What European countries has Maria been to?",
        "Which US cities does John mention visiting to Tim?",
        "What books has Tim read?",
        "what board games has Nate played",
        "Which kinds of cars does Dave like the most?",
        "What people has Maria met and helped while volunteering?",
        "What movies have both Joanna and Nate seen?",
    ],
)
def test_questions_asking_for_things_of_a_kind(question: str) -> None:
    assert asks_for_kind(question)


@pytest.mark.parametrize(
    "question",
    [
        "What did Maria buy?",  # no kind named
        "Which country has Tim visited most?",  # one thing, not a kind of things
        "What is Maria's job?",
        "What has Melanie painted?",
        "Where did Caroline move from?",
        "When did John visit the cities?",
        "What class was Ana in?",  # a word ending in "ss" is no plural
        "What Maria's is about?",  # a possessive is no plural
        "What of all the lovely little European countries has Maria been to?",  # longer than four words
        "Tell me the countries Maria has been to",
        "",
    ],
)
def test_other_questions_do_not(question: str) -> None:
    assert not asks_for_kind(question)


def _cosines(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def test_the_entities_that_stand_out_are_taken_closest_first() -> None:
    names = ["Oslo", "Spain", "England", "Max", "Costco", "Tuesday"]
    cosines = _cosines(0.80, 0.95, 0.92, 0.70, 0.71, 0.69)  # mean 0.795, deviation 0.10
    assert closest_entities("What European countries has Maria been to?", names, cosines, [], POLICY) == [1, 2]
    at_most_one = replace(POLICY, entities=1)
    assert closest_entities("What European countries has Maria been to?", names, cosines, [], at_most_one) == [1]
    anything_above_the_mean = replace(POLICY, min_deviations=0.0)
    picked = closest_entities("What countries?", names, cosines, [], anything_above_the_mean)
    assert picked == [1, 2, 0]


def test_names_the_question_says_and_the_speakers_names_are_left_out() -> None:
    names = ["Maria", "Spain", "European Union", "Lord of the Rings", *(f"Other{n}" for n in range(10))]
    cosines = _cosines(0.99, 0.90, 0.95, 0.91, *[0.3] * 10)
    picked = closest_entities("What European countries has Maria been to?", names, cosines, ["maria"], POLICY)
    # "Maria" speaks and "European Union" shares "European"; "of" and "the" are no shared words.
    assert [names[index] for index in picked] == ["Lord of the Rings", "Spain"]


def test_nothing_is_taken_when_nothing_stands_out_or_there_is_nothing_to_compare() -> None:
    question = "What countries has Maria been to?"
    assert closest_entities(question, ["Spain", "Oslo"], _cosines(0.8, 0.8), [], POLICY) == []
    assert closest_entities(question, ["Spain"], _cosines(0.9), [], POLICY) == []
    assert closest_entities(question, [], _cosines(), [], POLICY) == []
    assert closest_entities(question, ["Spain", "Oslo"], _cosines(0.9), [], POLICY) == []  # mismatched lengths


def test_each_entity_brings_its_turns_closest_to_the_question_first() -> None:
    mentions = {0: [10, 11, 12], 1: [12, 13]}
    closeness = {10: 0.1, 11: 0.9, 12: 0.5, 13: 0.7}
    assert entity_turns([0, 1], mentions, closeness, POLICY) == [11, 12, 13]  # 12 once
    assert entity_turns([1, 0], mentions, closeness, POLICY) == [13, 12, 11, 10]
    assert entity_turns([0, 1], mentions, closeness, replace(POLICY, turns=2)) == [11, 12]
    assert entity_turns([0], mentions, closeness, replace(POLICY, turns_per_entity=1)) == [11]
    assert entity_turns([0], {0: [20, 21]}, {21: 0.2}, POLICY) == [21, 20]  # a turn without a vector comes last
    assert entity_turns([], mentions, closeness, POLICY) == []


def test_turns_go_after_the_first_excerpts_and_ones_ranked_high_stay() -> None:
    order = list(range(30))
    policy = replace(POLICY, after=2, kept=5)
    assert placed(order, [40, 3, 25], policy) == [0, 1, 40, 25, 2, 3, 4, *range(5, 25), *range(26, 30)]
    assert placed(order, [1, 4], policy) == order  # all already near the top
    assert placed([], [7], policy) == [7]


@given(
    st.lists(st.integers(0, 60), unique=True, max_size=40),
    st.lists(st.integers(0, 80), unique=True, max_size=8),
    st.integers(0, 10),
    st.integers(0, 30),
)
def test_placing_keeps_every_key_once(order: list[int], added: list[int], after: int, kept: int) -> None:
    policy = replace(POLICY, after=after, kept=kept)
    result = placed(order, added, policy)
    assert sorted(result) == sorted(set(order) | set(added))
    assert [key for key in result if key not in added] == [key for key in order if key not in added]
    moved = [key for key in added if key not in order[:kept]]
    if moved:
        start = min(after, len(order) - len([key for key in order if key in moved]))
        assert result[start : start + len(moved)] == moved
