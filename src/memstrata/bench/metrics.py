"""Ranking metrics over ids: recall@k, hit@k, NDCG@k with binary relevance."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence


def recall_at(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Share of ``relevant`` found in the first ``k`` of ``ranked``."""
    if not relevant:
        raise ValueError("recall needs at least one relevant id")
    return len(set(ranked[:k]) & set(relevant)) / len(set(relevant))


def hit_at(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 if any relevant id is in the first ``k``, else 0.0."""
    return 1.0 if set(ranked[:k]) & set(relevant) else 0.0


def ndcg_at(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Normalised discounted cumulative gain at ``k`` (each relevant id has gain 1)."""
    wanted = set(relevant)
    if not wanted:
        raise ValueError("NDCG needs at least one relevant id")
    seen: set[str] = set()
    gain = 0.0
    for position, item in enumerate(ranked[:k], start=1):
        if item in wanted and item not in seen:
            gain += 1.0 / math.log2(position + 1)
            seen.add(item)
    ideal = sum(1.0 / math.log2(position + 1) for position in range(1, min(k, len(wanted)) + 1))
    return gain / ideal
