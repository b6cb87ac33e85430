"""Reranking after fusion: a small linear model over what the retrievers already know.

Its weights are in reciprocal-rank units, so an item it knows nothing about (a derived
cell or summary) keeps its fused score and stays comparable. See docs/retrieval.md#3-rerank.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import TypeVar

from memstrata.retrieval.fusion import Fused
from memstrata.retrieval.periods import Dated, mentioned_periods, nearness
from memstrata.retrieval.speakers import mentioned_speaker

Key = TypeVar("Key", bound=Hashable)

#: The two turn retrievers whose lists the reranker reads.
FULLTEXT, VECTOR = "fulltext", "vector"

#: Names of the reranker's features, in the order ``rerank_features`` returns them.
FEATURES = (
    "fulltext_rank",
    "vector_rank",
    "fulltext_score",
    "vector_gap",
    "speaker",
    "length",
    "both",
    "session",
    "asks",
    "period",
)


@dataclass(kw_only=True, frozen=True, slots=True)
class RerankPolicy:
    """Weights of the linear reranker; a turn's score is the weighted sum of its features.

    The features are in docs/retrieval.md#3-rerank. The defaults were fitted on LoCoMo
    conversations 1-5 by ``scripts/fit_reranker.py`` and rescaled so the two rank weights
    average 1, which keeps scores in reciprocal-rank units.
    """

    fulltext_rank: float = 0.6546
    vector_rank: float = 1.3454
    fulltext_score: float = 0.029
    vector_gap: float = 0.0343
    speaker: float = 0.0131
    length: float = 0.0061
    both: float = -0.0194
    session: float = 0.0043
    asks: float = -0.0031
    period: float = 0.01
    #: Ranks below it carry no rank signal and ``both`` counts only within it; ``None``: every rank counts.
    depth: int | None = None
    #: ``vector_gap`` of a turn the vectors did not find (or the list's lowest gap, when lower).
    missing_gap: float = -0.2
    #: Full text counts fully when its best matches hold at least this share of the query's
    #: terms, and in proportion below it (``coverage`` of :func:`rerank`); 0 always counts it fully.
    #: Chosen on LoCoMo conversations 1-3 with the LoCoMo-Plus pairs stitched into them: 0.3, the
    #: largest floor that left recall@10 on the questions as it was (0.845), lifted the cue into the
    #: top ten for 0.07 → 0.26 of the tuning half's triggers; 0.5 and more cost recall.
    lexical_floor: float = 0.3

    def weights(self) -> tuple[float, ...]:
        """The feature weights in ``FEATURES`` order."""
        return tuple(float(getattr(self, name)) for name in FEATURES)


DEFAULT_RERANK = RerankPolicy()


@dataclass(kw_only=True, frozen=True, slots=True)
class TurnSignals:
    """What the store knows about one candidate turn: speaker, size, session, whether it asks, its date."""

    speaker: str | None
    words: int
    session: str | None = None
    asks: bool = False
    day: date | None = None

    @classmethod
    def of(cls, speaker: str | None, content: str, session: str | None, when: datetime | None = None) -> TurnSignals:
        """The signals of a turn with this speaker, text, session and time."""
        return cls(
            speaker=speaker,
            words=len(content.split()),
            session=session,
            asks="?" in content,
            day=when.date() if when else None,
        )


def rerank_features(
    fused: Sequence[Fused[Key]],
    scores: Mapping[str, Mapping[Key, float]],
    signals: Mapping[Key, TurnSignals],
    speaker: str | None,
    policy: RerankPolicy = DEFAULT_RERANK,
    *,
    k: int = 60,
    periods: Sequence[Dated] = (),
) -> dict[Key, tuple[float, ...]]:
    """The features (in ``FEATURES`` order) of each candidate turn, the fused items in ``signals``.

    ``scores`` holds each retriever's raw scores (higher is better) for its whole list;
    ``speaker`` is the speaker the query names, if any; ``k`` is the fusion constant the
    ranks were fused with; ``periods`` are the dates the query asks about (``Period`` or ``Span``).
    """
    limit = policy.depth
    fulltext = scores.get(FULLTEXT, {})
    best_fulltext = max(fulltext.values(), default=0.0)
    vector = scores.get(VECTOR, {})
    best_vector = max(vector.values(), default=0.0)
    # A turn the vectors did not find is no closer than the farthest one they did find.
    absent = min(policy.missing_gap, min(vector.values(), default=best_vector) - best_vector)
    turns = [item for item in fused if item.key in signals]
    per_session = Counter(signals[item.key].session for item in turns)
    found: dict[Key, tuple[float, ...]] = {}
    for item in turns:
        ranks = {name: rank for name, rank in item.ranks.items() if limit is None or rank <= limit}
        turn = signals[item.key]
        share = fulltext.get(item.key, 0.0) / best_fulltext if best_fulltext > 0 else 0.0
        found[item.key] = (
            1.0 / (k + ranks[FULLTEXT]) if FULLTEXT in ranks else 0.0,
            1.0 / (k + ranks[VECTOR]) if VECTOR in ranks else 0.0,
            max(0.0, share),
            vector[item.key] - best_vector if item.key in vector else absent,
            1.0 if speaker is not None and turn.speaker == speaker else 0.0,
            math.log1p(max(0, turn.words)),
            1.0 if FULLTEXT in ranks and VECTOR in ranks else 0.0,
            math.log(per_session[turn.session]) if turn.session is not None else 0.0,
            1.0 if turn.asks else 0.0,
            nearness(periods, turn.day),
        )
    return found


def rerank(
    query: str,
    fused: Sequence[Fused[Key]],
    scores: Mapping[str, Mapping[Key, float]],
    signals: Mapping[Key, TurnSignals],
    policy: RerankPolicy = DEFAULT_RERANK,
    *,
    k: int = 60,
    periods: Sequence[Dated] | None = None,
    coverage: float = 1.0,
) -> list[Fused[Key]]:
    """Rescore fused candidates with the policy's linear model, best first.

    Turns (the keys in ``signals``) get the weighted sum of their features; other items keep
    their fused score plus the turns' mean non-rank share. Ties keep the fused order.
    ``periods`` default to the absolute dates the query names; below the policy's
    ``lexical_floor``, ``coverage`` (``fulltext.term_coverage``) scales the full-text features.
    """
    speaker = mentioned_speaker(query, [s.speaker for s in signals.values() if s.speaker], by_alias=True)
    weights = policy.weights()
    if policy.lexical_floor > 0 and coverage < policy.lexical_floor:
        lexical = max(0.0, coverage) / policy.lexical_floor
        weights = tuple(
            w * lexical if name.startswith(FULLTEXT) else w for name, w in zip(FEATURES, weights, strict=True)
        )
    rank_weights, other_weights = weights[:2], weights[2:]
    rescored: list[Fused[Key]] = []
    extras: list[float] = []
    others: list[Fused[Key]] = []
    asked = mentioned_periods(query) if periods is None else periods
    every = rerank_features(fused, scores, signals, speaker, policy, k=k, periods=asked)
    for item in fused:
        features = every.get(item.key)
        if features is None:
            others.append(item)
            continue
        extra = sum(w * f for w, f in zip(other_weights, features[2:], strict=True))
        extras.append(extra)
        ranked = sum(w * f for w, f in zip(rank_weights, features[:2], strict=True))
        rescored.append(Fused(item.key, ranked + extra, item.ranks))
    if others:
        typical = sum(extras) / len(extras) if extras else 0.0
        rescored.extend(Fused(item.key, item.score + typical, item.ranks) for item in others)
    order = {item.key: position for position, item in enumerate(fused)}
    return sorted(rescored, key=lambda item: (-item.score, order[item.key]))
