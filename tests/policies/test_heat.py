"""Segment heat: monotonicity, promotion and eviction properties."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.policies.heat import HeatPolicy, choose_evictions, segment_heat, should_promote

MOMENTS = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5))]),
)
COUNTS = st.integers(min_value=0, max_value=10_000)
HEATS = st.dictionaries(
    st.text(alphabet="abcdef", min_size=1, max_size=4),
    st.floats(min_value=-10.0, max_value=100.0) | st.sampled_from([0.0, 1.0, 5.0]),
    max_size=40,
)
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


@settings(max_examples=200)
@given(first=COUNTS, second=COUNTS, length=COUNTS, last_activity=MOMENTS, now=MOMENTS)
def test_heat_is_monotone_in_visits(
    first: int, second: int, length: int, last_activity: datetime, now: datetime
) -> None:
    fewer, more = sorted((first, second))
    assert segment_heat(visits=fewer, interaction_length=length, last_activity=last_activity, now=now) <= segment_heat(
        visits=more, interaction_length=length, last_activity=last_activity, now=now
    )


@settings(max_examples=200)
@given(visits=COUNTS, first=COUNTS, second=COUNTS, last_activity=MOMENTS, now=MOMENTS)
def test_heat_is_monotone_in_length(
    visits: int, first: int, second: int, last_activity: datetime, now: datetime
) -> None:
    shorter, longer = sorted((first, second))
    assert segment_heat(
        visits=visits, interaction_length=shorter, last_activity=last_activity, now=now
    ) <= segment_heat(visits=visits, interaction_length=longer, last_activity=last_activity, now=now)


@settings(max_examples=200)
@given(visits=COUNTS, length=COUNTS, last_activity=MOMENTS, first=MOMENTS, second=MOMENTS)
def test_heat_cools_as_now_moves_later(
    visits: int, length: int, last_activity: datetime, first: datetime, second: datetime
) -> None:
    earlier, later = sorted((first, second))
    assert segment_heat(
        visits=visits, interaction_length=length, last_activity=last_activity, now=later
    ) <= segment_heat(visits=visits, interaction_length=length, last_activity=last_activity, now=earlier)


def test_heat_matches_the_formula() -> None:
    heat = segment_heat(visits=3, interaction_length=2, last_activity=NOW - timedelta(hours=24), now=NOW)
    assert heat == pytest.approx(3 + 1.0986122886681098 + 0.5)


def test_future_activity_counts_as_now() -> None:
    future = segment_heat(visits=1, interaction_length=1, last_activity=NOW + timedelta(days=3), now=NOW)
    assert future == segment_heat(visits=1, interaction_length=1, last_activity=NOW, now=NOW)


def test_default_threshold_promotes_a_few_recent_visits_only() -> None:
    def heat(visits: int, turns: int, hours_ago: float) -> float:
        return segment_heat(
            visits=visits, interaction_length=turns, last_activity=NOW - timedelta(hours=hours_ago), now=NOW
        )

    policy = HeatPolicy()
    assert should_promote(heat(3, 2, 0), policy)
    assert should_promote(heat(5, 1, 1), policy)
    assert not should_promote(heat(3, 1, 0), policy)
    assert not should_promote(heat(3, 2, 24 * 7), policy)
    assert not should_promote(heat(0, 20, 0), policy)


@settings(max_examples=200)
@given(heat=st.floats(allow_nan=False), threshold=st.floats(allow_nan=False))
def test_should_promote_is_the_threshold(heat: float, threshold: float) -> None:
    assert should_promote(heat, HeatPolicy(promote_threshold=threshold)) == (heat >= threshold)


def test_naive_datetimes_are_rejected() -> None:
    naive = datetime(2025, 6, 1)
    with pytest.raises(ValueError, match="last_activity"):
        segment_heat(visits=1, interaction_length=1, last_activity=naive, now=NOW)
    with pytest.raises(ValueError, match="now"):
        segment_heat(visits=1, interaction_length=1, last_activity=NOW, now=naive)


@pytest.mark.parametrize(
    "changes",
    [
        {"visit_weight": -1.0},
        {"length_weight": float("nan")},
        {"recency_weight": -0.1},
        {"recency_half_life_hours": 0.0},
        {"recency_half_life_hours": -2.0},
        {"midterm_capacity": 0},
        {"midterm_capacity": -5},
    ],
)
def test_policy_rejects_invalid_values(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(changes))):
        HeatPolicy(**changes)


def test_negative_counts_are_rejected() -> None:
    with pytest.raises(ValueError, match="visits"):
        segment_heat(visits=-1, interaction_length=0, last_activity=NOW, now=NOW)
    with pytest.raises(ValueError, match="interaction_length"):
        segment_heat(visits=0, interaction_length=-1, last_activity=NOW, now=NOW)


@settings(max_examples=200)
@given(heats=HEATS, capacity=st.integers(min_value=1, max_value=50))
def test_evictions_leave_capacity_and_take_the_coldest(heats: dict[str, float], capacity: int) -> None:
    evicted = choose_evictions(heats, HeatPolicy(midterm_capacity=capacity))
    kept = set(heats) - set(evicted)
    assert len(evicted) == len(set(evicted))
    assert len(kept) == min(len(heats), capacity)
    assert all(heats[gone] <= heats[stays] for gone in evicted for stays in kept)
    assert evicted == sorted(evicted, key=lambda segment_id: (heats[segment_id], segment_id))


@settings(max_examples=200)
@given(heats=HEATS, capacity=st.integers(min_value=1, max_value=50), floor=st.floats(min_value=-5.0, max_value=50.0))
def test_evict_below_also_evicts_cold_segments(heats: dict[str, float], capacity: int, floor: float) -> None:
    evicted = choose_evictions(heats, HeatPolicy(midterm_capacity=capacity, evict_below=floor))
    kept = set(heats) - set(evicted)
    assert len(kept) <= capacity
    assert all(heats[stays] >= floor for stays in kept)
    assert set(evicted) >= set(choose_evictions(heats, HeatPolicy(midterm_capacity=capacity)))
    assert all(heats[gone] <= heats[stays] for gone in evicted for stays in kept)


def test_eviction_ties_break_by_id() -> None:
    heats = {"c": 1.0, "a": 1.0, "b": 1.0, "d": 2.0}
    assert choose_evictions(heats, HeatPolicy(midterm_capacity=2)) == ["a", "b"]
    assert choose_evictions(heats, HeatPolicy(midterm_capacity=10)) == []
    assert choose_evictions(heats, HeatPolicy(midterm_capacity=10, evict_below=1.5)) == ["a", "b", "c"]


def test_a_segment_exactly_at_the_eviction_floor_stays() -> None:
    heats = {"a": 0.5, "b": 1.0, "c": 2.0}
    assert choose_evictions(heats, HeatPolicy(midterm_capacity=10, evict_below=1.0)) == ["a"]
    assert choose_evictions(heats, HeatPolicy(midterm_capacity=3, evict_below=None)) == []
    assert choose_evictions(heats, HeatPolicy(midterm_capacity=2)) == ["a"]


def test_eviction_rejects_nan_heat() -> None:
    with pytest.raises(ValueError, match="NaN"):
        choose_evictions({"a": float("nan")}, HeatPolicy())
