"""What a large memory's full-text search does with each query term, by how many turns it is in."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.storage.focus import (
    DROP_TERM_SHARE,
    FIND_ROW_BUDGET,
    OWN_TEXT_TERM_SHARE,
    SCORE_CHECKS,
    bm25_idf,
    plan_terms,
    recent_turns,
    term_reach,
)


@pytest.mark.parametrize(
    ("matches", "expected"),
    [
        (0, "all"),
        (int(OWN_TEXT_TERM_SHARE * 1000), "all"),
        (int(OWN_TEXT_TERM_SHARE * 1000) + 1, "own"),
        (int(DROP_TERM_SHARE * 1000), "own"),
        (int(DROP_TERM_SHARE * 1000) + 1, "none"),
        (1000, "none"),
    ],
)
def test_term_reach_by_share(matches: int, expected: str) -> None:
    assert term_reach(matches, 1000) == expected


def test_term_reach_of_an_empty_index() -> None:
    assert term_reach(0, 0) == "all"


def test_idf_is_bm25s_and_falls_as_a_term_gets_common() -> None:
    assert bm25_idf(2, 10) == pytest.approx(math.log(1 + 8.5 / 2.5))
    assert bm25_idf(1, 1000) > bm25_idf(100, 1000) > bm25_idf(1000, 1000) > 0


def test_the_rarest_terms_find_within_the_row_budget_and_every_term_is_weighted() -> None:
    rare, common = 10, FIND_ROW_BUDGET
    plan = plan_terms(["family", "lisbon", "go"], [common, rare, 3 * common], 100_000, limit=5)
    assert [(step.term, step.finds) for step in plan] == [("family", False), ("lisbon", True), ("go", False)]
    assert [step.weight for step in plan] == [bm25_idf(count, 100_000) for count in (common, rare, 3 * common)]


def test_terms_that_fit_the_budget_together_all_find() -> None:
    plan = plan_terms(["a", "b", "c"], [FIND_ROW_BUDGET // 2, FIND_ROW_BUDGET // 4, FIND_ROW_BUDGET // 4], 10**6, 10)
    assert all(step.finds for step in plan)


def test_when_rare_terms_find_too_few_turns_the_next_rarest_find_as_well() -> None:
    plan = plan_terms(["family", "lisbon", "friends"], [2 * FIND_ROW_BUDGET, 3, 3 * FIND_ROW_BUDGET], 10**6, 20)
    assert [(step.term, step.finds) for step in plan] == [("family", True), ("lisbon", True), ("friends", False)]


def test_the_rarest_term_finds_whatever_its_count() -> None:
    plan = plan_terms(["go", "we"], [9 * FIND_ROW_BUDGET, 8 * FIND_ROW_BUDGET], 10**6, limit=0)
    assert [(step.term, step.finds) for step in plan] == [("go", False), ("we", True)]


def test_a_count_per_term_is_required() -> None:
    with pytest.raises(ValueError, match="one match count per term"):
        plan_terms(["go"], [], 1000, limit=10)


@given(st.lists(st.integers(min_value=0, max_value=3 * FIND_ROW_BUDGET), min_size=1, max_size=8), st.integers(1, 100))
def test_some_term_always_finds_and_every_term_is_kept_in_order(matches: list[int], limit: int) -> None:
    terms = [f"t{index}" for index in range(len(matches))]
    plan = plan_terms(terms, matches, 10**6, limit)
    assert any(step.finds for step in plan)
    assert [step.term for step in plan] == terms
    if sum(matches) <= FIND_ROW_BUDGET:
        assert all(step.finds for step in plan)  # exact whenever the budget covers every match
    # A term that finds is never commoner than one that only scores.
    finding = [count for count, step in zip(matches, plan, strict=True) if step.finds]
    scoring = [count for count, step in zip(matches, plan, strict=True) if not step.finds]
    assert not scoring or max(finding) <= min(scoring)


def test_a_memory_whose_finding_terms_are_common_is_searched_in_its_latest_turns_where_cheaper() -> None:
    large = 1_000_000
    matches = [80 * FIND_ROW_BUDGET, 90 * FIND_ROW_BUDGET]  # in 40% and 45% of the turns
    plan = plan_terms(["go", "we"], matches, large, limit=10)  # "go" finds, alone
    # As many latest turns as hold about the budget's matches, if "go" is spread evenly.
    assert recent_turns(large, plan, matches) == large // 80
    # Four times the budget: in a memory of 100k turns the quarter holding the budget's matches is
    # cheaper to check than scoring them all; in one of 1M, checking its quarter would not be.
    four = [4 * FIND_ROW_BUDGET, 9 * FIND_ROW_BUDGET]
    assert recent_turns(100_000, plan_terms(["go", "we"], four, 100_000, 10), four) == 100_000 // 4
    assert recent_turns(large, plan_terms(["go", "we"], four, large, 10), four) is None
    rare = [FIND_ROW_BUDGET, 9 * FIND_ROW_BUDGET]  # within the budget: every match is read
    assert recent_turns(large, plan_terms(["go", "we"], rare, large, 10), rare) is None
    with pytest.raises(ValueError, match="one match count per term"):
        recent_turns(large, plan, [1])


@given(st.integers(1, 10**7), st.integers(0, 10**7))
def test_the_latest_turns_are_read_only_when_that_costs_less(indexed: int, found: int) -> None:
    found = min(found, indexed)
    plan = plan_terms(["go"], [found], indexed, limit=10)
    latest = recent_turns(indexed, plan, [found])
    if latest is None:
        return
    assert found > FIND_ROW_BUDGET
    assert 1 <= latest < indexed
    assert latest + SCORE_CHECKS * FIND_ROW_BUDGET < (1 + SCORE_CHECKS) * found
