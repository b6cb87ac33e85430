"""Which topic an exchange belongs to: the segment it is filed in, and runs of one topic in a batch.

A topic is followed by the mean of its latest :data:`RECENT_EXCHANGES` exchanges, not by its
whole centroid, which drifts toward the middle of everything said. Staying takes less
similarity than returning to an older topic; an exchange too short to have a topic, or a
one-line aside, stays put. See docs/tiers.md (mid-term) and docs/configuration.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]

#: A topic's direction is the mean of this many of its latest exchanges.
RECENT_EXCHANGES = 4
#: An exchange with fewer distinct content words than this has no topic of its own.
MIN_TOPIC_WORDS = 4
#: A conversation that pauses longer than this has no current topic when it resumes.
CONVERSATION_GAP = timedelta(hours=1)
#: Where the default thresholds sit between unrelated (0) and identical (1): returning to an
#: earlier topic, and continuing the current one.
JOIN_SHARE = 0.72
CONTINUE_SHARE = 0.44


@dataclass(frozen=True, slots=True)
class TopicThresholds:
    """The cosines at which an exchange joins a topic.

    ``join``: any topic, such as a segment the conversation left earlier.
    ``stay``: the current topic (the segment filed last, or the run before it in a batch);
    never above ``join``.
    :attr:`returning`: halfway between them, for the exchange after one that strays.
    """

    join: float
    stay: float

    def __post_init__(self) -> None:
        if self.stay > self.join:
            raise ValueError(f"staying on a topic ({self.stay}) cannot take more than joining one ({self.join})")

    @property
    def returning(self) -> float:
        """The cosine at which the exchange after a stray one comes back to the current topic.

        Halfway between ``stay`` and ``join``: more than continuing takes, since it has to
        outweigh the stray exchange, and less than returning to an older topic.
        """
        return (self.stay + self.join) / 2

    @classmethod
    def calibrated(cls, unrelated: float) -> TopicThresholds:
        """The defaults for an embedder whose cosine between unrelated lines is ``unrelated``.

        Chosen on synthetic streams of LoCoMo conversations 1–5 (blocks of 4–12 turns from
        different conversations, which a segmentation should tell apart) with e5, and checked
        on conversations 6–10 and with MiniLM, whose cosines are spread out: see the
        benchmarks page.
        """
        scale = 1.0 - unrelated
        return cls(join=unrelated + JOIN_SHARE * scale, stay=unrelated + CONTINUE_SHARE * scale)

    def with_overrides(self, join: float | None, stay: float | None) -> TopicThresholds:
        """These thresholds with either replaced, keeping ``stay`` ≤ ``join``.

        A ``join`` set alone also caps ``stay``; a ``stay`` set alone also raises ``join``.
        """
        if join is not None and stay is not None:
            return TopicThresholds(join=join, stay=stay)
        if join is not None:
            return TopicThresholds(join=join, stay=min(self.stay, join))
        if stay is not None:
            return TopicThresholds(join=max(self.join, stay), stay=stay)
        return self


def recent_direction(exchanges: Sequence[Vector]) -> Vector:
    """The unit mean of the last :data:`RECENT_EXCHANGES` exchange vectors (zero if they cancel out)."""
    if not exchanges:
        raise ValueError("a topic has at least one exchange")
    total: Vector = np.stack(list(exchanges)[-RECENT_EXCHANGES:]).sum(axis=0).astype(np.float32)
    norm = float(np.linalg.norm(total))
    return total / np.float32(norm) if norm > 0 else total


def has_topic(vector: Vector, words: Collection[str]) -> bool:
    """Whether an exchange can tell its topic: a vector, and :data:`MIN_TOPIC_WORDS` distinct content words."""
    return bool(np.any(vector)) and len(set(words)) >= MIN_TOPIC_WORDS


def choose_topic(
    vector: Vector,
    words: Collection[str],
    directions: Sequence[Vector | None],
    current: int | None,
    thresholds: TopicThresholds,
    *,
    following: tuple[Vector, Collection[str]] | None = None,
) -> int | None:
    """The index of the topic in ``directions`` that an exchange joins, or None for a new one.

    ``directions`` are the topics' :func:`recent_direction` (None: never chosen), ``current`` the
    current topic's index. An exchange without a topic (:func:`has_topic`) stays in the current
    one; otherwise the topic clearing its threshold (``stay`` or ``join``) by the widest margin
    wins; when none does, an aside that ``following`` comes back from (:func:`comes_back`) stays put.
    """
    if current is not None and not has_topic(vector, words):
        return current
    chosen, widest = None, -np.inf
    for index, direction in enumerate(directions):
        if direction is None:
            continue
        margin = float(np.dot(direction, vector)) - (thresholds.stay if index == current else thresholds.join)
        if margin >= 0 and margin > widest:
            chosen, widest = index, margin
    if chosen is None and current is not None and following is not None:
        direction = directions[current]
        if direction is not None and comes_back(direction, *following, thresholds.returning):
            return current
    return chosen


def comes_back(direction: Vector, vector: Vector, words: Collection[str], returning: float) -> bool:
    """Whether the exchange after a stray one (``vector``, ``words``) returns to the topic ``direction``."""
    return has_topic(vector, words) and float(np.dot(direction, vector)) >= returning


def topic_runs(
    vectors: Sequence[Vector],
    words: Sequence[Collection[str]],
    stay: float,
    *,
    breaks: Collection[int] = (),
    returning: float | None = None,
) -> list[list[int]]:
    """Split a batch of exchanges, in the order they were said, into runs that stay on one topic.

    An exchange continues the run before it when it has no topic (:func:`has_topic`), when its
    cosine with the run's :func:`recent_direction` reaches ``stay``, or (with ``returning``) when
    the next one comes back to the run; the exchanges in ``breaks`` always start a run.
    Returns the exchanges' indexes, run by run. Linear in the batch.
    """
    if len(vectors) != len(words):
        raise ValueError(f"{len(vectors)} vectors for {len(words)} exchanges")
    runs: list[list[int]] = []
    topical: deque[Vector] = deque(maxlen=RECENT_EXCHANGES)
    every: deque[Vector] = deque(maxlen=RECENT_EXCHANGES)
    aside: Vector | None = None  # an aside joins the run's direction only after the exchange that came back
    for index, (vector, said) in enumerate(zip(vectors, words, strict=True)):
        own_topic = has_topic(vector, said)
        continues = bool(runs) and index not in breaks
        strays = False
        if continues and own_topic:
            direction = recent_direction(topical or every)
            following = index + 1
            strays = float(np.dot(direction, vector)) < stay
            continues = not strays or (
                returning is not None
                and following < len(vectors)
                and following not in breaks
                and comes_back(direction, vectors[following], words[following], returning)
            )
        if continues:
            runs[-1].append(index)
        else:
            runs.append([index])
            topical.clear()
            every.clear()
            aside = None
        if aside is not None:
            every.append(aside)
            topical.append(aside)
            aside = None
        kept = np.asarray(vector, dtype=np.float32)
        if continues and strays:
            aside = kept
            continue
        every.append(kept)
        if own_topic:
            topical.append(kept)
    return runs
