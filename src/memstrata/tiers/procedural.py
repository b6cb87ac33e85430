"""Procedural memory: recurring patterns in what the user says."""

from __future__ import annotations

from memstrata.extraction.patterns import observe_patterns
from memstrata.models import Turn
from memstrata.storage.base import TierStore


class Procedural:
    """Counts the patterns each new user turn shows (a habit, a preference for a format)."""

    def __init__(self, store: TierStore) -> None:
        self._store = store

    def observe(self, user_id: str, seq: int, turn: Turn) -> None:
        """Count each pattern ``turn`` shows, given the user's message before it in the session."""
        previous = self._store.previous_user_text(user_id, turn.session_id, seq)
        for pattern in observe_patterns(turn.content, previous_user_text=previous):
            self._store.observe_pattern(
                user_id, seq, pattern.key, pattern.description, pattern.evidence, turn.created_at
            )
