"""MemoryOS-style heat of a mid-term segment: visits, interaction length and recency."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from memstrata.policies.importance import recency_decay

SECONDS_PER_HOUR = 3600.0


@dataclass(kw_only=True, frozen=True, slots=True)
class HeatPolicy:
    """Weights of the heat formula and the thresholds that promote or evict a segment.

    With the default weights, heat = visits + log1p(turns) + recency (1.0 for a segment active
    just now); docs/tiers.md#policies works out what reaches ``promote_threshold``.
    """

    visit_weight: float = 1.0
    length_weight: float = 1.0
    recency_weight: float = 1.0
    recency_half_life_hours: float = 24.0
    promote_threshold: float = 5.0
    evict_below: float | None = None
    midterm_capacity: int = 200

    def __post_init__(self) -> None:
        for name in ("visit_weight", "length_weight", "recency_weight"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not (math.isfinite(self.recency_half_life_hours) and self.recency_half_life_hours > 0):
            raise ValueError(f"recency_half_life_hours must be > 0, got {self.recency_half_life_hours!r}")
        if math.isnan(self.promote_threshold):
            raise ValueError("promote_threshold must be a number, got NaN")
        if self.evict_below is not None and math.isnan(self.evict_below):
            raise ValueError("evict_below must be a number or None, got NaN")
        if self.midterm_capacity < 1:
            raise ValueError(f"midterm_capacity must be >= 1, got {self.midterm_capacity!r}")


def _require_aware(name: str, moment: datetime) -> None:
    """Naive datetimes are ambiguous (local or UTC?), so heat refuses to guess."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, e.g. datetime.now(UTC); got naive {moment!r}")


def segment_heat(
    *,
    visits: int,
    interaction_length: int,
    last_activity: datetime,
    now: datetime,
    policy: HeatPolicy = HeatPolicy(),
) -> float:
    """Heat H = visit_weight·visits + length_weight·log1p(turns) + recency_weight·recency(age).

    recency(age) = 0.5 ** (age / half-life); a ``last_activity`` after ``now`` counts as age 0.
    log1p makes length saturate: a segment's 100th turn adds far less heat than its 2nd.
    """
    if visits < 0:
        raise ValueError(f"visits must be >= 0, got {visits!r}")
    if interaction_length < 0:
        raise ValueError(f"interaction_length must be >= 0, got {interaction_length!r}")
    _require_aware("last_activity", last_activity)
    _require_aware("now", now)
    age_seconds = max((now - last_activity).total_seconds(), 0.0)
    recency = recency_decay(age_seconds, policy.recency_half_life_hours * SECONDS_PER_HOUR)
    return (
        policy.visit_weight * visits
        + policy.length_weight * math.log1p(interaction_length)
        + policy.recency_weight * recency
    )


def should_promote(heat: float, policy: HeatPolicy) -> bool:
    """True when a segment is hot enough to promote its content to long-term memory."""
    return heat >= policy.promote_threshold


def choose_evictions(heats: Mapping[str, float], policy: HeatPolicy) -> list[str]:
    """Ids to archive, coldest first: the overflow past ``midterm_capacity`` plus any below ``evict_below``.

    Ties in heat break by id, so the same input always evicts the same segments.
    """
    for segment_id, heat in heats.items():
        if math.isnan(heat):
            raise ValueError(f"heat of segment {segment_id!r} is NaN; compute it with segment_heat")
    coldest_first = sorted(heats, key=lambda segment_id: (heats[segment_id], segment_id))
    count = max(len(coldest_first) - policy.midterm_capacity, 0)
    if policy.evict_below is not None:
        threshold = policy.evict_below
        # Ascending order makes the segments below the threshold a prefix of the list.
        count = max(count, sum(1 for segment_id in coldest_first if heats[segment_id] < threshold))
    return coldest_first[:count]
