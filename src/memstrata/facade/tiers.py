"""The derived tiers as the facade shows them: waiting for tier work, reading each tier, retention."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memstrata.config import Settings
from memstrata.errors import NotFound, StorageError
from memstrata.models import Inspection, SearchFilters, Tier, Turn, whose
from memstrata.retrieval.bursts import MAX_BURST
from memstrata.storage.base import TierStore
from memstrata.tiers.episodic import Episodic
from memstrata.tiers.hierarchy import Hierarchy
from memstrata.tiers.visits import VisitRecorder
from memstrata.tiers.worker import Worker

# Counting a user's queued jobs while waiting for them: attempts, and the pause between them.
COUNT_ATTEMPTS = 3
COUNT_RETRY_SECONDS = 0.1


@dataclass(kw_only=True, eq=False)
class Tiers:
    """Flush, inspect and prune the tiers the background jobs derive from the turns."""

    store: TierStore
    hierarchy: Hierarchy
    worker: Worker
    visits: VisitRecorder
    episodic: Episodic
    settings: Settings

    def flush(self, timeout: float | None, user_id: str | None) -> None:
        """Wait until the tier work queued so far is done (all of it, or ``user_id``'s); StorageError on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.visits.queue()
        user = user_id
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            # With a user, only until that user's jobs are done: work queued after them never holds it up.
            if not self.settings.background:
                # Only this user's jobs (the work of users queued earlier does not hold the caller up),
                # and only until the deadline: another process may keep queueing more of them.
                self.worker.drain(lambda: _settled(user, deadline, self._has_no_jobs), user_id=user)
            elif user is not None:
                if not self.worker.wait_until(lambda: self._has_no_jobs(user), remaining, user_id=user):
                    raise StorageError(
                        f"the background work of {whose(user)} did not finish in time; call flush() again or raise"
                        " timeout (another process may hold the jobs)"
                    )
            elif not self.worker.wait_idle(remaining):
                raise StorageError("background work did not finish in time; call flush() again or raise timeout")
            if self._has_no_jobs(user):
                return
            if deadline is not None and time.monotonic() > deadline:
                raise StorageError(
                    "background work did not finish in time; another process may hold the jobs, or a failed"
                    " job is waiting before its next attempt (2 s, then 4 s)"
                )
            time.sleep(0.05)

    def inspect(self, user_id: str, limit: int) -> Inspection:
        """Each tier of a user: counts, working set, hot segments, profile, cells, patterns, entities, log."""
        store = self.store
        working = store.get_by_seqs(self.episodic.working_seqs(user_id), user_id)
        return Inspection(
            user_id=user_id,
            counts={**store.tier_counts(user_id), Tier.WORKING: len(working)},
            working=tuple(working[seq] for seq in sorted(working)),
            segments=tuple(store.segments(user_id, limit=limit)),
            profile=store.profile(user_id),
            cells=tuple(store.cells(user_id, include_superseded=True, limit=limit * 5)),
            patterns=tuple(self.hierarchy.procedural.patterns(user_id, None, limit, datetime.now(UTC))),
            entities=tuple(store.entities(user_id, limit=limit)),
            consolidations=tuple(store.consolidations(user_id, limit=limit)),
            events=tuple(store.events(user_id, limit=limit * 2)),
            pending_jobs=store.count_jobs(user_id),
            failed_jobs=store.count_failed_jobs(user_id),
        )

    def segment_turns(self, segment_id: str, user_id: str) -> list[Turn]:
        """The turns filed in one of the user's mid-term segments, in the order they were said; NotFound if none."""
        turns = self.store.get_by_seqs(self.store.segment_turn_seqs(segment_id), user_id)
        if not turns:
            raise NotFound(f"{whose(user_id)} has no mid-term segment {segment_id!r}")
        return [turns[seq] for seq in sorted(turns, key=lambda seq: (turns[seq].created_at, seq))]

    def retry_failed_jobs(self, user_id: str | None) -> int:
        """Queue the jobs parked as failed again (``user_id``'s, or everyone's); how many."""
        count = self.store.retry_failed_jobs(user_id)
        if count:
            self.worker.wake()
        return count

    def prune(self, user_id: str, tier: str, older_than: timedelta | None, keep_last: int | None) -> int:
        """Delete a tier's items older than ``older_than`` or beyond the newest ``keep_last``; how many went."""
        try:
            cutoff = datetime.now(UTC) - older_than if older_than is not None else None
        except OverflowError:  # older than the calendar: nothing is that old
            cutoff = datetime.min.replace(tzinfo=UTC)
        count = self.store.prune(user_id, tier, cutoff, keep_last)
        if tier == Tier.EPISODIC and count:
            self.episodic.forgotten(user_id)
            # The oldest turns left may have been embedded with pruned messages of their burst.
            oldest = sorted(int(seq) for seq in self.store.filtered_seqs(user_id, SearchFilters()))[: MAX_BURST - 1]
            self.episodic.refresh_bursts(user_id, oldest)
        return count

    def _has_no_jobs(self, user_id: str | None) -> bool:
        """Whether ``user_id`` (None: anyone) has no unfinished job. Asked every 50 ms while waiting, so a passing
        storage error (a busy database, a dropped connection) is tried again; a lasting one is raised."""
        for attempt in range(COUNT_ATTEMPTS):
            try:
                return self.store.count_jobs(user_id) == 0
            except StorageError:
                if attempt == COUNT_ATTEMPTS - 1:
                    raise
                time.sleep(COUNT_RETRY_SECONDS)
        return False  # not reached: the last attempt returns or raises


def _settled(user_id: str | None, deadline: float | None, has_no_jobs: Callable[[str | None], bool]) -> bool:
    """Whether a flush that runs the jobs itself may stop: the deadline passed, or the user has none left."""
    if deadline is not None and time.monotonic() > deadline:
        return True
    return user_id is not None and has_no_jobs(user_id)
