"""What is left of a pattern after turns that showed it are deleted."""

from __future__ import annotations

from memstrata.storage.patterns import pattern_after_forgetting


def test_a_pattern_with_no_occurrence_left_is_gone() -> None:
    assert pattern_after_forgetting(0, 0, None, None, None) is None
    assert pattern_after_forgetting(-1, 0, None, None, None) is None


def test_fully_recorded_patterns_take_their_dates_and_evidence_from_what_is_left() -> None:
    assert pattern_after_forgetting(2, 2, "2024-01-01", "2024-01-03", "code please") == (
        2,
        "2024-01-01",
        "2024-01-03",
        "code please",
    )


def test_occurrences_counted_before_they_were_recorded_keep_their_dates() -> None:
    # Two old, unrecorded occurrences and one recorded: the stored sightings stay.
    assert pattern_after_forgetting(3, 1, "2024-01-05", "2024-01-05", "code please") == (3, None, None, "code please")
    # Only old ones left: their snippet may quote the deleted turn, so there is none.
    assert pattern_after_forgetting(2, 0, None, None, None) == (2, None, None, "")
