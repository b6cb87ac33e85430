"""Procedural memory: recurring patterns in what the user says."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from memstrata.extraction.patterns import key_topic_words, observe_patterns, topic_words
from memstrata.models import Pattern, Turn
from memstrata.policies.importance import recency_decay
from memstrata.storage.roles import KnowledgeStore, TurnSignals

PATTERN_HALF_LIFE_SECONDS = 30 * 24 * 3600.0


class ProceduralStore(KnowledgeStore, TurnSignals, Protocol):
    """What procedural memory reads and writes: patterns, and the user's message before a turn."""


class Procedural:
    """Counts the patterns each new user turn shows (a habit, a preference for a format), and ranks them."""

    def __init__(self, store: ProceduralStore) -> None:
        self._store = store

    def observe(self, user_id: str, seq: int, turn: Turn) -> None:
        """Count each pattern ``turn`` shows, given the user's message before it in the session."""
        previous = self._store.previous_user_text(user_id, turn.session_id, seq)
        for pattern in observe_patterns(turn.content, previous_user_text=previous):
            self._store.observe_pattern(
                user_id,
                seq,
                pattern.key,
                description=pattern.description,
                evidence=pattern.evidence,
                when=turn.created_at,
            )

    def patterns(self, user_id: str, query: str | None, limit: int, now: datetime) -> list[Pattern]:
        """The user's patterns by frequency × recency at ``now``; those sharing a topic word with ``query`` first."""
        words = topic_words(query or "")
        found = [
            Pattern(
                key=key,
                description=description,
                count=count,
                first_seen=first,
                last_seen=last,
                score=count * recency_decay((now - last).total_seconds(), PATTERN_HALF_LIFE_SECONDS),
                evidence=evidence,
            )
            for key, description, count, first, last, evidence in self._store.pattern_rows(user_id)
        ]
        found.sort(key=lambda p: (-(len(words & key_topic_words(p.key)) > 0), -p.score, p.key))
        return found[:limit]
