"""Reciprocal rank fusion: combine ranked lists without comparing their raw scores."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Fused(Generic[Key]):
    """One fused result: its key, fused score and its 1-based rank in each input list."""

    key: Key
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[Key]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
) -> list[Fused[Key]]:
    """Fuse ranked lists: score(d) = Σ weight_list / (k + rank_list(d)), best first.

    A key that appears twice in one list counts at its best rank. Ties break by the
    best single rank, then by the order of first appearance, so output is deterministic.
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    scores: dict[Key, float] = {}
    ranks: dict[Key, dict[str, int]] = {}
    for name, ranking in rankings.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for position, key in enumerate(ranking, start=1):
            seen = ranks.setdefault(key, {})
            if name in seen:
                continue
            seen[name] = position
            scores[key] = scores.get(key, 0.0) + weight / (k + position)
    order = {key: index for index, key in enumerate(scores)}
    fused = [Fused(key, scores[key], ranks[key]) for key in scores]
    fused.sort(key=lambda item: (-item.score, min(item.ranks.values()), order[item.key]))
    return fused


def fuse_scored(rankings: Mapping[str, Sequence[tuple[Key, float]]], *, k: int = 60) -> list[Fused[Key]]:
    """Reciprocal rank fusion of lists of ``(key, score)``: the scores are ignored, only the order counts."""
    return reciprocal_rank_fusion({name: [key for key, _ in ranking] for name, ranking in rankings.items()}, k=k)
