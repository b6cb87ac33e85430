"""The tier half of the Memory API: flush, consolidate, inspect, profile, cells, patterns, graph, prune."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from memstrata.errors import InvalidInput, NotFound, StorageError
from memstrata.extraction.entities import extract_entities
from memstrata.extraction.patterns import key_topic_words, topic_words
from memstrata.models import Cell, Consolidation, Inspection, Pattern, SearchFilters, Subgraph, Tier, Turn
from memstrata.policies.importance import recency_decay
from memstrata.retrieval.bursts import MAX_BURST
from memstrata.validation import LARGEST_COUNT, check_identifier, check_limit, check_text

# Counting a user's queued jobs while waiting for them: attempts, and the pause between them.
COUNT_ATTEMPTS = 3
COUNT_RETRY_SECONDS = 0.1

if TYPE_CHECKING:
    from memstrata.config import Settings
    from memstrata.storage.base import TierStore
    from memstrata.tiers.hierarchy import Hierarchy
    from memstrata.tiers.worker import Worker

PATTERN_HALF_LIFE_SECONDS = 30 * 24 * 3600.0
PRUNABLE_TIERS = (Tier.EPISODIC, Tier.MIDTERM, Tier.LONGTERM)


class TierViews:
    """Mixed into Memory: everything about the derived tiers."""

    settings: Settings
    _hierarchy: Hierarchy
    _worker: Worker

    @property
    def _tiers(self) -> TierStore:
        return self._store  # type: ignore[attr-defined, no-any-return]

    def _checked_user(self, user_id: object) -> str:
        self._require_open()  # type: ignore[attr-defined]
        return str(check_identifier(user_id, "user_id"))

    def flush(self, timeout: float | None = 60.0, *, user_id: str | None = None) -> None:
        """Wait until background tier work queued so far is done: all of it, or with ``user_id`` that user's.

        With ``user_id``, that user's jobs run first, oldest first, so other users' work holds
        the wait up little: the background worker takes them ahead of the queue meanwhile
        (after a job of another user already running, and with one job in four still taken
        in queue order so no one else's work stops), and without one (``background =
        false``) the caller runs them alone. ``StorageError`` when ``timeout`` seconds pass first.
        """
        self._require_open()  # type: ignore[attr-defined]
        user = self._checked_user(user_id) if user_id is not None else None
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 <= timeout < math.inf
        ):
            raise InvalidInput("timeout must be a number of seconds ≥ 0, or None to wait as long as it takes")
        deadline = None if timeout is None else time.monotonic() + timeout
        self._queue_visits()  # type: ignore[attr-defined]
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            # With a user, only until that user's jobs are done: work queued after them never holds it up.
            if not self.settings.background:
                # Only this user's jobs (the work of users queued earlier does not hold the caller up),
                # and only until the deadline: another process may keep queueing more of them.
                self._worker.drain(lambda: _settled(user, deadline, self._has_no_jobs), user_id=user)
            elif user is not None:
                if not self._worker.wait_until(lambda: self._has_no_jobs(user), remaining, user_id=user):
                    raise StorageError(
                        f"the background work of user {user!r} did not finish in time; call flush() again or raise"
                        " timeout (another process may hold the jobs)"
                    )
            elif not self._worker.wait_idle(remaining):
                raise StorageError("background work did not finish in time; call flush() again or raise timeout")
            if self._has_no_jobs(user):
                return
            if deadline is not None and time.monotonic() > deadline:
                raise StorageError(
                    "background work did not finish in time; another process may hold the jobs, or a failed"
                    " job is waiting before its next attempt (2 s, then 4 s)"
                )
            time.sleep(0.05)

    def _has_no_jobs(self, user_id: str | None) -> bool:
        """Whether ``user_id`` (None: anyone) has no unfinished job. Asked every 50 ms while waiting, so a passing
        storage error (a busy database, a dropped connection) is tried again; a lasting one is raised."""
        for attempt in range(COUNT_ATTEMPTS):
            try:
                return self._tiers.count_jobs(user_id) == 0
            except StorageError:
                if attempt == COUNT_ATTEMPTS - 1:
                    raise
                time.sleep(COUNT_RETRY_SECONDS)
        return False  # not reached: the last attempt returns or raises

    def consolidate(self, *, user_id: str) -> list[Consolidation]:
        """Run "sleep" now: cluster what is not consolidated yet and summarise each cluster.

        A backlog (an import, turns added with sleep off) is worked through in batches of
        1,000 turns in one call.
        """
        user = self._checked_user(user_id)
        self.flush(user_id=user)  # this user's queued work, run ahead of other users'
        return self._hierarchy.consolidate_backlog(user)

    def consolidations(self, *, user_id: str, limit: int = 100) -> list[Consolidation]:
        """Stored consolidation summaries, newest first, each with its TES."""
        return self._tiers.consolidations(self._checked_user(user_id), limit=check_limit(limit, maximum=100_000))

    def profile(self, *, user_id: str) -> dict[str, str]:
        """The user's stable traits and preferences (key → value)."""
        return self._tiers.profile(self._checked_user(user_id))

    def cells(
        self,
        *,
        user_id: str,
        attribute: str | None = None,
        subject: str | None = None,
        include_superseded: bool = False,
        limit: int = 100,
    ) -> list[Cell]:
        """Long-term memory cells, newest first; ``include_superseded`` shows what was said before."""
        user = self._checked_user(user_id)
        return self._tiers.cells(
            user,
            subject=check_identifier(subject, "subject", required=False),
            attribute=check_identifier(attribute, "attribute", required=False),
            include_superseded=include_superseded,
            limit=check_limit(limit, maximum=10_000),
        )

    def patterns(self, *, user_id: str, query: str | None = None, limit: int = 10) -> list[Pattern]:
        """Recurring interaction patterns, by frequency × recency; those matching ``query`` first."""
        user = self._checked_user(user_id)
        if query is not None:
            query = check_text(query, "query", max_bytes=self.settings.max_text_bytes)
        now = datetime.now(UTC)
        words = topic_words(query or "")
        found = [
            Pattern(
                key,
                description,
                count,
                first,
                last,
                count * recency_decay((now - last).total_seconds(), PATTERN_HALF_LIFE_SECONDS),
                evidence,
            )
            for key, description, count, first, last, evidence in self._tiers.pattern_rows(user)
        ]
        found.sort(key=lambda p: (-(len(words & key_topic_words(p.key)) > 0), -p.score, p.key))
        return found[: check_limit(limit, maximum=1000)]

    def graph(self, *, user_id: str, query: str, limit: int = 20) -> Subgraph:
        """The entities ``query`` mentions, their neighbours, and the edges between them."""
        user = self._checked_user(user_id)
        query = check_text(query, "query", max_bytes=self.settings.max_text_bytes)
        limit = check_limit(limit)
        names = {entity.name for entity in extract_entities(query)}
        names |= {word.strip(".,?!'\"").lower() for word in query.split() if len(word) > 2}
        matched = self._tiers.entities(user, names=sorted(names), limit=limit)
        edges = self._tiers.neighbours(user, [node.name for node in matched], limit)
        wanted = {node.name for node in matched} | {e.source for e in edges} | {e.target for e in edges}
        nodes = self._tiers.entities(user, names=sorted(wanted), limit=limit * 2)
        return Subgraph(tuple(nodes), tuple(edges))

    def inspect(self, *, user_id: str, limit: int = 20) -> Inspection:
        """Each tier of a user: counts, working set, hot segments, profile, cells, patterns, entities, log."""
        user = self._checked_user(user_id)
        limit = check_limit(limit)
        store = self._tiers
        working = store.get_by_seqs(self._working_seqs(user), user)  # type: ignore[attr-defined]
        return Inspection(
            user_id=user,
            counts={**store.tier_counts(user), Tier.WORKING: len(working)},
            working=tuple(working[seq] for seq in sorted(working)),
            segments=tuple(store.segments(user, limit=limit)),
            profile=store.profile(user),
            cells=tuple(store.cells(user, include_superseded=True, limit=limit * 5)),
            patterns=tuple(self.patterns(user_id=user, limit=limit)),
            entities=tuple(store.entities(user, limit=limit)),
            consolidations=tuple(store.consolidations(user, limit=limit)),
            events=tuple(store.events(user, limit=limit * 2)),
            pending_jobs=store.count_jobs(user),
            failed_jobs=store.count_failed_jobs(user),
        )

    def segment_turns(self, segment_id: str, *, user_id: str) -> list[Turn]:
        """The turns filed in one of the user's mid-term segments (active or archived), in the order they were said.

        Raises NotFound when ``segment_id`` names no segment of ``user_id`` that holds a turn.
        """
        user = self._checked_user(user_id)
        segment = str(check_identifier(segment_id, "segment_id"))
        store = self._tiers
        turns = store.get_by_seqs(store.segment_turn_seqs(segment), user)
        if not turns:
            raise NotFound(f"user {user!r} has no mid-term segment {segment!r}")
        return [turns[seq] for seq in sorted(turns, key=lambda seq: (turns[seq].created_at, seq))]

    def retry_failed_jobs(self, *, user_id: str | None = None) -> int:
        """Queue the background jobs that failed every attempt again (``user_id``'s, or everyone's); how many.

        A job is parked as failed after three failed attempts (a bug, or an outage that
        outlasted its retries); ``inspect`` counts them. Once the cause is fixed, this runs them again.
        """
        self._require_open()  # type: ignore[attr-defined]
        user = self._checked_user(user_id) if user_id is not None else None
        count = self._tiers.retry_failed_jobs(user)
        if count:
            self._worker.wake()
        return count

    def prune(
        self,
        *,
        user_id: str,
        tier: str,
        older_than: timedelta | None = None,
        keep_last: int | None = None,
    ) -> int:
        """Retention: explicitly delete a tier's items older than ``older_than`` or beyond the newest ``keep_last``.

        ``episodic`` deletes turns (and what was derived from them); ``midterm`` deletes
        archived segments; ``longterm`` deletes superseded cells. Every deletion is
        recorded in the audit log. Returns how many items went.
        """
        user = self._checked_user(user_id)
        if tier not in PRUNABLE_TIERS:
            raise InvalidInput(f"tier must be one of {', '.join(PRUNABLE_TIERS)}, not {tier!r}")
        if older_than is None and keep_last is None:
            raise InvalidInput("give older_than, keep_last, or both")
        if keep_last is not None and (isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0):
            raise InvalidInput("keep_last must be a whole number ≥ 0")
        if older_than is not None and (not isinstance(older_than, timedelta) or older_than < timedelta(0)):
            # A negative age would put the cutoff in the future and delete everything.
            raise InvalidInput("older_than must be a timedelta ≥ 0, e.g. timedelta(days=90)")
        if keep_last is not None:
            keep_last = min(keep_last, LARGEST_COUNT)
        try:
            cutoff = datetime.now(UTC) - older_than if older_than is not None else None
        except OverflowError:  # older than the calendar: nothing is that old
            cutoff = datetime.min.replace(tzinfo=UTC)
        count = self._tiers.prune(user, tier, cutoff, keep_last)
        if tier == Tier.EPISODIC and count:
            self._index.drop(user)  # type: ignore[attr-defined]
            self._discard_deleted(user, None)  # type: ignore[attr-defined]
            # The oldest turns left may have been embedded with pruned messages of their burst.
            oldest = sorted(int(seq) for seq in self._tiers.filtered_seqs(user, SearchFilters()))[: MAX_BURST - 1]
            self._refresh_bursts(user, oldest)  # type: ignore[attr-defined]
        return count


def _settled(user_id: str | None, deadline: float | None, has_no_jobs: Callable[[str | None], bool]) -> bool:
    """Whether a flush that runs the jobs itself may stop: the deadline passed, or the user has none left."""
    if deadline is not None and time.monotonic() > deadline:
        return True
    return user_id is not None and has_no_jobs(user_id)
