"""Retrieval visits: which turns searches found, queued in batches to warm their mid-term segments."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from memstrata.models import Hit
from memstrata.storage.roles import JobIntake

VISIT_BATCH = 32


class VisitRecorder:
    """Collects visits in memory and queues them as ``visit`` jobs in batches, keeping writes off search.

    Visits only warm segments up; a crash loses at most one unqueued batch of them.
    """

    def __init__(self, *, store: JobIntake, enabled: bool, wake: Callable[[], None]) -> None:
        self._store = store
        self._enabled = enabled
        self._wake = wake
        self._pending: dict[str, list[list[int]]] = {}
        self._lock = threading.Lock()

    def note_hits(self, user_id: str, hits: Sequence[Hit]) -> None:
        """Note a visit to the turns among ``hits`` (when the ``record_visits`` setting is on)."""
        if not self._enabled:
            return
        visited = [hit.seq for hit in hits if hit.turn is not None and hit.seq is not None]
        if visited:
            with self._lock:
                self._pending.setdefault(user_id, []).append(visited)
                waiting = sum(len(searches) for searches in self._pending.values())
            if waiting >= VISIT_BATCH:
                self.queue()

    def queue(self) -> None:
        """Queue every visit noted so far."""
        with self._lock:
            pending, self._pending = self._pending, {}
        for user_id, searches in pending.items():
            self._store.enqueue_job("visit", user_id, {"searches": searches})
        if pending:
            self._wake()

    def drop(self, user_id: str) -> None:
        """Forget the visits not yet queued of a user who is gone (they would queue a job for no one)."""
        with self._lock:
            self._pending.pop(user_id, None)
