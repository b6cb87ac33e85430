"""Working memory kept outside the store (Redis), with the store as the durable ledger: nothing is lost.

A durable ``working`` job is queued and the turns stored before they are tracked in the
shared working set; the job replays the tracking (a no-op when it ran), or files the turns
straight to mid-term while the working set is unreachable, so a crash between any two
steps loses nothing. See docs/storage.md#redis-working-memory-optional.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from memstrata.errors import InvalidInput, StorageError
from memstrata.models import SearchFilters, Turn
from memstrata.storage.base import Job, Overflow, Vectors, WorkingSet
from memstrata.storage.roles import JobQueue, Maintenance, SearchStore, TurnStore

log = logging.getLogger("memstrata.working")
WORKING_JOB = "working"
UPKEEP_BATCH = 100


class WorkingStore(TurnStore, SearchStore, JobQueue, Maintenance, Protocol):
    """What the shared working memory needs of the store: turns, the replay jobs, the store's clock."""


@dataclass(kw_only=True, frozen=True, slots=True)
class WorkingPolicy:
    """Knobs of a working set kept outside the store."""

    capacity: int = 10
    idle_seconds: float = 7 * 24 * 3600.0
    # A replay whose turns are not stored yet waits this long: the add that queued it may still be writing.
    commit_grace_seconds: float = 60.0
    # A replay that cannot reach the working set retries this long, then files its turns to mid-term directly.
    unreachable_grace_seconds: float = 5.0
    # A replay that must wait is queued again after this pause.
    retry_seconds: float = 1.0
    # After the working set failed, add() leaves tracking to the replay for this long (no timeout per add).
    outage_seconds: float = 5.0

    @property
    def upkeep_every_seconds(self) -> float:
        """How often a worker reclaims stale overflows and expires idle sessions."""
        return min(30.0, self.idle_seconds / 4)


class SharedWorkingMemory:
    """Keeps each session's last exchanges in a :class:`WorkingSet` shared by every process."""

    def __init__(self, store: WorkingStore, working: WorkingSet, policy: WorkingPolicy) -> None:
        self._store = store
        self._working = working
        self.policy = policy
        self._lock = threading.Lock()
        self._next_upkeep = 0.0
        self._quiet_until = 0.0

    @property
    def location(self) -> str:
        """Where the working set lives (without secrets)."""
        return self._working.location

    def close(self) -> None:
        """Release the working set's connections."""
        self._working.close()

    # -- writing ----------------------------------------------------------------------

    def insert(self, turns: Sequence[Turn], vectors: Vectors | None, model_id: str) -> list[int]:
        """Store new turns durably, then track them; the replay job queued first covers crashes and outages."""
        queued_at = self._store.clock()  # the store's clock, which every worker reads alike
        batches: dict[str, str] = {}
        queued: list[int] = []
        try:
            for user_id in dict.fromkeys(turn.user_id for turn in turns):
                batches[user_id] = uuid.uuid4().hex
                ids = [turn.id for turn in turns if turn.user_id == user_id]
                payload = {"ids": ids, "batch": batches[user_id], "queued_at": queued_at}
                queued.append(self._store.enqueue_job(WORKING_JOB, user_id, payload))
            seqs = self._store.insert_turns(turns, vectors, model_id)
        except BaseException as exc:
            # A refused add (an id conflict, text the store cannot index) changes nothing: its
            # replays go. Any other failure may come after the turns were committed (a connection
            # lost during COMMIT, an interrupt): the replays stay if the turns are there, or if
            # that cannot be told now (each then waits for its turns, or ends when they never come).
            if isinstance(exc, InvalidInput) or not self._maybe_stored(turns):
                for job_id in queued:
                    with contextlib.suppress(StorageError):
                        self._store.finish_job(job_id)
            raise
        if time.monotonic() < self._quiet_until:
            return seqs
        for user_id, batch in batches.items():
            pairs = [(seq, turn) for seq, turn in zip(seqs, turns, strict=True) if turn.user_id == user_id]
            try:
                overflows = self._working.track(pairs, self.policy.capacity, batch=batch)
            except StorageError as exc:
                log.warning("working memory not updated now; the background replay will do it: %s", exc)
                self._quiet_until = time.monotonic() + self.policy.outage_seconds
                break
            self._queue_quietly(overflows)
        return seqs

    def _maybe_stored(self, turns: Sequence[Turn]) -> bool:
        """Whether any of ``turns`` may be in the store: True when some are, or when the store cannot say."""
        try:
            for user_id in dict.fromkeys(turn.user_id for turn in turns):
                ids = [turn.id for turn in turns if turn.user_id == user_id]
                if self._store.get_by_ids(ids, user_id):
                    return True
        except StorageError:  # a store that fails again cannot say: keep the replays
            return True
        return False

    def discard_deleted(self, user_id: str, session_id: str | None = None) -> None:
        """After a forget or prune: drop from the working set the turns the store no longer holds.

        Only those go (one session's, or all the user's), and pending overflows left with none:
        a turn another process stored after the deletion keeps its place, and the exchanges
        of agents not forgotten stay in their session. StorageError when Redis fails, or
        failed a moment ago (it is not waited on again).
        """

        def work() -> None:
            tracked = self._working.tracked(user_id, session_id)
            pending = self._working.pending(user_id, session_id)
            seqs = {seq for found in tracked.values() for seq in found}
            seqs.update(seq for overflow in pending for seq in overflow.seqs)
            present = set(self._store.get_by_seqs(sorted(seqs), user_id)) if seqs else set()
            gone = {key: [seq for seq in found if seq not in present] for key, found in tracked.items()}
            tokens = [overflow.token for overflow in pending if not present.intersection(overflow.seqs)]
            self._working.discard(user_id, gone, tokens)

        self._unless_quiet(work)

    def discard_turns(self, user_id: str, session_id: str | None, seqs: Sequence[int]) -> None:
        """After a delete: drop these turns of one session (``None``: the turns without one); no reads needed."""
        self._unless_quiet(lambda: self._working.discard(user_id, {session_id or "": list(seqs)}))

    def _unless_quiet(self, work: Callable[[], None]) -> None:
        """Run a clean-up on the working set, unless it failed a moment ago; a failure starts a quiet spell."""
        if time.monotonic() < self._quiet_until:
            raise StorageError("the working set failed a moment ago; not tried again yet")
        try:
            work()
        except StorageError:
            self._quiet_until = time.monotonic() + self.policy.outage_seconds
            raise

    # -- reading ----------------------------------------------------------------------

    def working_seqs(self, user_id: str, session_id: str | None = None) -> list[int]:
        """Turns in working memory (one session, or all of the user's), oldest first; none while it is unreachable.

        Context and chat keep working through an outage: the turns are still in episodic
        memory, found by search; only the "recent exchanges" section is missing meanwhile.
        """
        if time.monotonic() < self._quiet_until:
            return []  # it failed a moment ago: a stalled server would cost every read its timeout
        try:
            return self._working.working_seqs(user_id, session_id)
        except StorageError as exc:
            log.warning("working memory unreadable; going on without it: %s", exc)
            self._quiet_until = time.monotonic() + self.policy.outage_seconds
            return []

    # -- background work --------------------------------------------------------------

    def runner(self, run: Callable[[Job], None]) -> Callable[[Job], None]:
        """Wrap the hierarchy's job runner with the ``working`` replay and once-only mid-term filing."""

        def execute(job: Job) -> None:
            if job.kind == WORKING_JOB:
                self._replay(job, run)
            else:  # a reclaimed overflow queued twice is filed once: to_midterm skips filed turns
                run(job)

        return execute

    def claimer(self, claim: Callable[[], Job | None]) -> Callable[[], Job | None]:
        """Wrap the worker's claim so every poll also does the (rate-limited) upkeep."""

        def take() -> Job | None:
            self.upkeep()
            return claim()

        return take

    def user_claimer(self, claim: Callable[[str], Job | None]) -> Callable[[str], Job | None]:
        """The same for the claim of one user's jobs."""

        def take(user_id: str) -> Job | None:
            self.upkeep()
            return claim(user_id)

        return take

    def upkeep(self, *, force: bool = False) -> None:
        """Queue reclaimed overflows and idle sessions for mid-term; at most every ``upkeep_every_seconds``."""
        with self._lock:
            now = time.monotonic()
            if not force and now < self._next_upkeep:
                return
            self._next_upkeep = now + self.policy.upkeep_every_seconds
        try:
            overflows = self._working.reclaim(UPKEEP_BATCH)
            overflows += self._working.expire_idle(self.policy.idle_seconds, UPKEEP_BATCH)
        except StorageError as exc:
            log.warning("working memory upkeep skipped: %s", exc)
            return
        self._queue_quietly(overflows)

    def _replay(self, job: Job, run: Callable[[Job], None]) -> None:
        """Track the job's turns (unless their add did), queue their overflow, then process them."""
        ids = [str(turn_id) for turn_id in job.payload.get("ids", [])]
        batch = str(job.payload.get("batch", ""))
        stored = self._stored(job.user_id, ids)
        if not stored:
            # Stored turns would be found (some at least: they are written at once), so the add
            # is still writing, or failed, or its turns were deleted since. The last shows in
            # Redis; the others are told apart by waiting a while, on the store's clock (the
            # database server's): the add's and the worker's machines need not agree on time.
            age = self._store.clock() - _number(job.payload.get("queued_at"))
            if age < self.policy.commit_grace_seconds and not self._tracked(batch):
                self._later(job)
            else:
                self._release(batch)
            return
        pairs = sorted(stored)
        try:
            overflows = self._working.track(pairs, self.policy.capacity, batch=batch or None)
            self._quiet_until = 0.0  # it answers again: adds and reads need not skip it any longer
        except StorageError as exc:
            # Counted from this job's first failed try, not from its add: a replay run late (a
            # backlog) that meets a blip would otherwise file turns its add had tracked already.
            now = self._store.clock()
            failing_since = _number(job.payload.get("unreachable_since")) or now
            if now - failing_since < self.policy.unreachable_grace_seconds:
                self._later(job, unreachable_since=failing_since)
                return
            log.warning("working memory unreachable; filing %d turns straight to mid-term: %s", len(pairs), exc)
            overflows = [Overflow("", job.user_id, tuple(seq for seq, _ in pairs))]
        self._queue(overflows)
        run(
            Job(
                id=job.id,
                kind="process",
                user_id=job.user_id,
                payload={"seqs": [seq for seq, _ in pairs]},
                attempts=job.attempts,
            )
        )
        self._release(batch)

    def _tracked(self, batch: str) -> bool:
        """Whether the add of this batch tracked its turns (so it had stored them); False when unknown."""
        try:
            return bool(batch) and self._working.is_tracked(batch)
        except StorageError:
            return False

    def _release(self, batch: str) -> None:
        """Forget the batch name: its job is done, so no replay of it can come."""
        if batch:
            with contextlib.suppress(StorageError):  # a leftover name only costs a few bytes
                self._working.release(batch)

    def _stored(self, user_id: str, ids: Sequence[str]) -> list[tuple[int, Turn]]:
        """(seq, turn) of the stored turns among ``ids``, read only (a deleted turn is not written back)."""
        turns = self._store.get_by_ids(ids, user_id)
        wanted = set(turns)
        found: list[tuple[int, Turn]] = []
        for session_id in dict.fromkeys(turn.session_id for turn in turns.values()):
            times = [turn.created_at for turn in turns.values() if turn.session_id == session_id]
            window = SearchFilters(
                session_id=session_id, after=min(times), before=max(times) + timedelta(microseconds=1)
            )
            candidates = self._store.filtered_seqs(user_id, window)
            for seq, turn in self._store.get_by_seqs([int(seq) for seq in candidates], user_id).items():
                if turn.id in wanted and turn.session_id == session_id:
                    found.append((seq, turn))
        return found

    def _later(self, job: Job, **noted: float) -> None:
        """Queue the job again after a pause, without spending its attempts (``noted`` joins its payload)."""
        time.sleep(self.policy.retry_seconds)
        self._store.enqueue_job(job.kind, job.user_id, {**job.payload, **noted})

    def _queue(self, overflows: Sequence[Overflow]) -> None:
        """Queue one ``midterm`` job per overflow, then acknowledge them."""
        for overflow in overflows:
            payload = {"seqs": list(overflow.seqs), "overflow": overflow.token}
            self._store.enqueue_job("midterm", overflow.user_id, payload)
        self._working.acknowledge(overflows)

    def _queue_quietly(self, overflows: Sequence[Overflow]) -> None:
        """Like ``_queue``; on failure the overflows stay pending, and upkeep reclaims them after their lease."""
        try:
            self._queue(overflows)
        except StorageError as exc:
            log.warning("overflow left pending in working memory, to be reclaimed: %s", exc)


def _number(value: object) -> float:
    """A time noted in a job's payload; 0 when absent or unreadable."""
    if not isinstance(value, int | float | str):
        return 0.0
    try:
        number = float(value)
    except ValueError:
        return 0.0
    return number if math.isfinite(number) else 0.0
