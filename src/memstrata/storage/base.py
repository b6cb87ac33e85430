"""The storage seam: what a backend must do to hold memstrata's source of truth."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from memstrata.models import (
    Cell,
    Consolidation,
    EntityEdge,
    EntityNode,
    MemoryEvent,
    Scope,
    SearchFilters,
    Segment,
    Turn,
)
from memstrata.models import Vectors as Vectors

Seqs = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class VectorBatch:
    """Vectors read from the store: turn seqs, their vectors, and the last vector id read."""

    seqs: Seqs
    vectors: Vectors
    high_water: int


@dataclass(frozen=True, slots=True)
class Job:
    """A unit of background work taken from the durable queue."""

    id: int
    kind: str
    user_id: str
    payload: dict[str, Any]
    attempts: int


class Store(Protocol):
    """A durable home for turns, their full-text index and their vectors.

    Invariants every backend keeps:

    - A method that writes either commits all of its effect durably before returning, or
      raises and changes nothing. What it returned stays after a crash.
    - Every read is confined to the ``user_id`` it is given; no method returns another
      user's data.
    - Turns get an integer ``seq`` that grows with commit order; vectors get an id that
      grows with commit order, so readers can catch up with ``vectors_after``.
    - The full-text indexes and vectors are derived: ``rebuild_fulltext`` (which also
      rewrites cells' search text as ``cell_text`` makes it) and ``turns_missing_vectors``
      + ``put_vectors`` recreate them from the store.
    - Driver errors are raised as :class:`memstrata.errors.StorageError`.
    """

    location: str

    def close(self) -> None:
        """Release connections; further calls fail."""

    def insert_turns(
        self, turns: Sequence[Turn], vectors: Vectors | None, model_id: str, *, working_capacity: int | None = None
    ) -> list[int]:
        """Store new turns (and their vectors) atomically; return their seqs.

        With ``working_capacity`` the same transaction updates the working set and queues
        the background jobs for the new turns.

        A turn whose id exists already is not written again: an identical one is skipped,
        a different one raises :class:`memstrata.errors.IdConflict` and nothing is written.
        """
        ...

    def get_by_ids(self, ids: Sequence[str], user_id: str | None = None) -> dict[str, Turn]:
        """Turns with these ids (of ``user_id`` only, when given)."""
        ...

    def get_by_seqs(self, seqs: Sequence[int], user_id: str) -> dict[int, Turn]:
        """Turns of ``user_id`` with these seqs."""
        ...

    def delete(self, turn_id: str, user_id: str) -> int | None:
        """Delete one turn with its index entries; its seq, or ``None`` if absent."""
        ...

    def forget(self, scope: Scope) -> int:
        """Hard-delete every turn in ``scope`` with its index entries; how many."""
        ...

    def history(self, scope: Scope, *, limit: int, offset: int = 0, newest_first: bool = False) -> list[Turn]:
        """Turns of a scope in time order."""
        ...

    def iterate(self, user_id: str | None = None) -> Iterator[tuple[int, Turn]]:
        """Every turn (of one user, or all) as (seq, turn), in seq order."""
        ...

    def user_ids(self, prefix: str) -> list[str]:
        """Distinct user ids that have turns and start with ``prefix`` (``""``: all), in code point order.

        Found by seeking through the user index, not by scanning the turns.
        """
        ...

    def fulltext(self, match: str, user_id: str, filters: SearchFilters, limit: int) -> list[tuple[int, float]]:
        """Full-text candidates as (seq, score), best first; higher score is better."""
        ...

    def speakers(self, user_id: str, limit: int) -> list[str]:
        """Distinct non-null names of ``user_id``'s turns other than tool turns, in name order, at most ``limit``.

        Found by seeking through a (user, name) index, one seek per name, not by scanning the turns.
        """
        ...

    def filtered_seqs(self, user_id: str, filters: SearchFilters, limit: int | None = None) -> Seqs:
        """Seqs of ``user_id``'s turns that pass ``filters`` (with a ``limit``, at most that many, any of them)."""
        ...

    def vectors_after(self, model_id: str, user_id: str, after: int) -> VectorBatch:
        """Vectors of ``model_id`` for ``user_id`` stored after vector id ``after``."""
        ...

    def vectors_for(self, model_id: str, seqs: Sequence[int]) -> dict[int, Vectors]:
        """Stored vectors of these turns, by seq."""
        ...

    def count_missing_vectors(self, model_id: str) -> int:
        """How many turns have no ``model_id`` vector."""
        ...

    def turns_missing_vectors(self, model_id: str, limit: int) -> list[tuple[int, Turn]]:
        """Up to ``limit`` (seq, turn) of turns without a ``model_id`` vector."""
        ...

    def put_vectors(self, model_id: str, seqs: Sequence[int], vectors: Vectors) -> None:
        """Store vectors for existing turns (replacing any of the same model)."""
        ...

    def rebuild_fulltext(self) -> None:
        """Recreate the turns' and derived items' full-text indexes from the store, re-deriving cells' text."""
        ...

    def enqueue_job(self, kind: str, user_id: str, payload: dict[str, Any]) -> int:
        """Queue background work durably."""
        ...

    def derived_fulltext(
        self, match: str, user_id: str, limit: int, tiers: Sequence[str] = ("longterm",)
    ) -> list[tuple[int, float]]:
        """Full-text candidates among current derived items of these tiers, best first."""
        ...

    def derived_items(self, seqs: Sequence[int], user_id: str) -> dict[int, tuple[str, str, str, tuple[str, ...]]]:
        """(id, tier, content, source turn ids) of derived items, by seq."""
        ...

    def cell_vectors(self, user_id: str, model_id: str) -> list[tuple[int, str, Vectors]]:
        """(search item seq, subject, vector) of a user's current cells that have a vector of ``model_id``, by seq.

        The seq is the cell's derived item's, as ``derived_fulltext`` ranks it. A cell
        without a vector of this model (not embedded yet, or by another model) is left out.
        """
        ...

    def counts(self) -> dict[str, int]:
        """Totals for ``info``: turns, users, sessions, vectors per model."""
        ...

    def size_bytes(self) -> int:
        """How many bytes the store's data takes on disk (its files, or its tables and indexes)."""
        ...

    def vacuum(self) -> bool:
        """Rewrite the store so deleted data leaves its files; False if a reader kept some of it for now.

        Every row stays as it was (ids, seqs and their order included); only free space and
        the remains of deleted rows go. Other writers wait while it runs.
        """
        ...

    def clock(self) -> float:
        """Seconds since the epoch on the store's own clock, read alike by every process that shares it.

        SQLite is shared only by processes on one machine, so that machine's clock; PostgreSQL
        reads the database server's. Waits that span processes (and machines) are timed on it.
        """
        ...


class TierStore(Store, Protocol):
    """A store that also holds the derived tiers (segments, cells, profile, patterns, entities,
    consolidations) and the job queue. Same invariants as :class:`Store`; every derived row
    links to its source turns and goes when they go.
    """

    def set_importance(self, scores: Mapping[int, float]) -> None:
        """Record computed importance beside the turns; the turns themselves stay as they were said."""
        ...

    def importance_of(self, turn_seqs: Sequence[int]) -> dict[int, float]:
        """Importance per turn: the caller's when given, else the computed one."""
        ...

    def previous_user_text(self, user_id: str, session_id: str | None, before_seq: int) -> str | None:
        """The user's message before ``before_seq`` in the same session."""
        ...

    def recent_vectors(self, model_id: str, user_id: str, before_seq: int, limit: int) -> list[bytes]:
        """Vectors of the user's turns just before ``before_seq``, for novelty."""
        ...

    def active_segments(self, user_id: str, model_id: str | None = None) -> list[tuple[Segment, bytes | None]]:
        """The user's active mid-term segments with their direction vectors.

        With ``model_id``, a direction stored for another embedder reads None: vectors of
        different models are never compared. One stored before the model was recorded is
        returned as it is.
        """
        ...

    def segments(self, user_id: str, *, limit: int = 50) -> list[Segment]:
        """Segments of a user, hottest first (archived ones last)."""
        ...

    def segment_turn_seqs(self, segment_id: str) -> list[int]:
        """Turns that make up a segment, oldest first."""
        ...

    def active_segment(self, segment_id: str) -> tuple[Segment, list[int]] | None:
        """An active segment and its turns, oldest first, read together (one snapshot); None if gone or archived."""
        ...

    def filed_turns(self, turn_seqs: Sequence[int]) -> set[int]:
        """Those of these turns that some segment (active or archived) already holds."""
        ...

    def segment_before(self, user_id: str, turn_seq: int) -> tuple[str, datetime] | None:
        """The segment of the user's latest filed turn said before turn ``turn_seq`` in its session, and when.

        "Before" orders by time, then seq; turns without a session count as one session.
        None when no such turn is filed.
        """
        ...

    def turns_after(self, user_id: str, turn_seq: int, limit: int) -> list[int]:
        """The seqs of up to ``limit`` turns said after turn ``turn_seq`` in its session, in the order said.

        The order is by time, then seq, as in :meth:`segment_before`; turns without a session
        count as one session. Empty when the turn is not the user's.
        """
        ...

    def save_segment(
        self,
        segment: Segment,
        centroid: bytes,
        new_turn_seqs: Sequence[int],
        *,
        known_turns: int | None = None,
        model_id: str | None = None,
    ) -> bool:
        """Create or update a segment, link its new turns, and refresh its search item.

        ``centroid`` is the segment's direction, made by the embedder ``model_id``.

        Invariant: a turn is filed in at most one segment, and a segment's summary covers
        the turns it links. Nothing is stored, and the answer is False, when one of
        ``new_turn_seqs`` already belongs to another segment (a filing job run twice at
        once) or no longer exists, or when ``known_turns`` (how many turns the segment held
        when the caller read it) no longer holds, or the segment was archived: another
        filing, a delete or an eviction came between. The caller reads again and files what
        is left. An existing segment keeps its visits and state: those are not the filing's
        to set.
        """
        ...

    def count_visits(
        self,
        job_id: int,
        user_id: str,
        searches: Sequence[Sequence[int]],
        now: datetime,
        heat: Callable[[int, int], float],
    ) -> list[Segment]:
        """Count the visits of the visit job ``job_id``: once, and none lost to another writer.

        Each search is one visit to every active segment holding one of its turns. In one
        transaction the job is marked counted, each such segment's visits grow by its
        count, its last activity becomes ``now`` and its heat ``heat(visits, turn_count)``.
        A job counted before (a retry after a crash, or a worker that took the job over) or
        no longer in the queue (finished, or its user forgotten) counts nothing. Returns the
        active segments the searches touched, as stored after, so the caller can promote the
        hot ones either way.
        """
        ...

    def archive_segments(self, user_id: str, segment_ids: Sequence[str], reason: Mapping[str, float]) -> None:
        """Move segments out of the active mid-term set; their turns stay searchable as episodes."""
        ...

    def promote_segment(self, segment: Segment, scene_id: str, title: str, now: datetime) -> None:
        """Turn a hot segment into a long-term scene; its turns' cells join the scene.

        Once: a segment already promoted (by another worker since it was read) is left alone.
        """
        ...

    def current_cells(self, user_id: str, subject: str, attribute: str) -> list[Cell]:
        """Every cell still valid for one subject and attribute, newest first."""
        ...

    def cells(
        self,
        user_id: str,
        *,
        subject: str | None = None,
        attribute: str | None = None,
        include_superseded: bool = False,
        limit: int | None = 500,
    ) -> list[Cell]:
        """A user's cells, newest first; superseded ones only when asked; all of them with ``limit=None``."""
        ...

    def add_cell(
        self,
        cell: Cell,
        source_turn_seq: int,
        *,
        single_valued: bool,
        supersede: Sequence[str],
        seen_slot: Mapping[str, bool] | None = None,
    ) -> bool:
        """Store a cell, closing the validity of the cells it supersedes (kept as history).

        With ``seen_slot`` (every cell of the new cell's subject and attribute its caller
        read, each id with whether it was current), stores nothing and returns False when
        the slot is no longer exactly that: another worker stored, ended or deleted one of
        its cells since the read, so the caller decides again. The check and the write are
        one transaction under the user's writer lock.

        A cell given with ``valid_to`` and ``superseded_by`` set is stored as history at once
        (its turn was processed after a newer turn's value), with its supersession event.
        A superseded cell still valid after the new one began (the value before a late one)
        ends where the new one begins and is superseded by it instead; one that began after
        the new one is never superseded by it.
        """
        ...

    def restate_cell(self, user_id: str, cell_id: str, turn_seq: int, value: str, content: str) -> bool:
        """Note that turn ``turn_seq`` said the cell ``cell_id`` again: ``value`` (as spelled) in ``content``; once.

        False when the cell is gone (its turn was deleted since the caller read it): then the
        caller decides again, and stores the fact from this turn. True otherwise, also when
        the turn itself is gone (its deletion already took what it said). When the cell's own
        turn is deleted, the earliest turn that restated it becomes its source, in the same
        transaction, with its value and sentence, valid from its time if that is later: the
        fact stays, and nothing of the deleted turn does.
        """
        ...

    def set_profile(self, user_id: str, values: Mapping[str, str], source_turn_seq: int, now: datetime) -> None:
        """Upsert profile traits, each with the turn it came from and when; a trait set at a later ``now`` stays."""
        ...

    def profile(self, user_id: str) -> dict[str, str]:
        """The user's current profile."""
        ...

    def profile_entries(self, user_id: str) -> list[tuple[str, str, str | None]]:
        """The profile with who said each trait: (key, value, speaker name of the turn that set it or None), by key."""
        ...

    def observe_pattern(
        self, user_id: str, turn_seq: int, key: str, description: str, evidence: str, when: datetime
    ) -> None:
        """Count an interaction pattern seen in turn ``turn_seq``, in one transaction.

        Idempotent per (user, key, turn): a job retried after failing part-way observes its
        turns again and must not count them twice. Deleting the turn (``purge_derived``)
        takes its occurrence back.
        """
        ...

    def pattern_rows(self, user_id: str) -> list[tuple[str, str, int, datetime, datetime, str]]:
        """(key, description, count, first_seen, last_seen, evidence) of a user's patterns."""
        ...

    def add_entities(self, user_id: str, turn_seq: int, names: Sequence[tuple[str, str]], when: datetime) -> None:
        """Record (name, kind) mentions in one turn and their co-occurrence edges."""
        ...

    def entities(self, user_id: str, *, names: Sequence[str] | None = None, limit: int = 50) -> list[EntityNode]:
        """Entities of a user, most mentioned first (or the ones named, case-insensitively)."""
        ...

    def neighbours(self, user_id: str, names: Sequence[str], limit: int = 20) -> list[EntityEdge]:
        """Edges touching the named entities, heaviest first."""
        ...

    def entities_without_vectors(self, user_id: str, model_id: str, limit: int) -> list[tuple[int, str]]:
        """(id, name) of a user's entities with no name vector of ``model_id``, most mentioned first."""
        ...

    def save_entity_vectors(self, model_id: str, vectors: Mapping[int, Vectors]) -> None:
        """Store name vectors by entity id; an entity deleted meanwhile is skipped, a stored vector replaced."""
        ...

    def entity_vectors(self, user_id: str, model_id: str) -> list[tuple[int, str, Vectors]]:
        """(id, name, name vector) of a user's entities that have a vector of ``model_id``, by id."""
        ...

    def entity_mention_seqs(self, user_id: str, entity_ids: Sequence[int]) -> dict[int, list[int]]:
        """The seqs of the turns that mention each of a user's entities, by entity id (oldest first)."""
        ...

    def cells_without_vectors(self, user_id: str, model_id: str, limit: int) -> list[Cell]:
        """At most ``limit`` of a user's current cells with no vector of ``model_id``, newest first."""
        ...

    def save_cell_vectors(self, model_id: str, vectors: Mapping[str, Vectors]) -> None:
        """Store vectors by cell id; a cell deleted meanwhile is skipped, a stored vector replaced.

        A vector goes with its cell, and when the cell's own turn is deleted and a kept turn
        that said it again becomes its source (``restate_cell``), since it was made from the
        deleted turn's words.
        """
        ...

    def unconsolidated_turns(self, user_id: str, limit: int, *, after_seq: int = 0) -> list[int]:
        """Seqs of at most ``limit`` of a user's turns not yet in any consolidation, oldest first.

        First the oldest such turns after ``after_seq`` (the turns no sleep has looked at, so
        a backlog is worked through in order); any room left goes to the newest ones up to
        it (turns an earlier sleep could not cluster get another chance beside new ones).
        """
        ...

    def unconsolidated_size(self, user_id: str, *, after_seq: int = 0) -> tuple[int, int]:
        """(turns, words) of a user not yet in any consolidation, of the turns after ``after_seq``."""
        ...

    def slept_through(self, user_id: str) -> int:
        """The newest turn seq the user's last sleep looked at (0: none yet)."""
        ...

    def mark_slept(self, user_id: str, through_seq: int) -> None:
        """Record that a sleep of the user looked at the turns up to ``through_seq`` (never moves back)."""
        ...

    def add_consolidation(self, consolidation: Consolidation, turn_seqs: Sequence[int]) -> bool:
        """Store a consolidation summary with links to its source turns.

        Nothing is stored, and the result is False, if any of the turns has a consolidation
        already: two sleeps of one user (two processes, or a job run twice) each summarise a
        turn at most once between them.
        """
        ...

    def consolidations(self, user_id: str, *, limit: int = 20) -> list[Consolidation]:
        """Recent consolidations of a user, newest first."""
        ...

    def events(self, user_id: str, *, limit: int = 50) -> list[MemoryEvent]:
        """The user's audit log, newest first."""
        ...

    def tier_counts(self, user_id: str) -> dict[str, int]:
        """How many items each tier holds for a user."""
        ...

    def working_seqs(self, user_id: str, session_id: str | None = None) -> list[int]:
        """Turns in working memory (one session, or all of the user's), oldest first."""
        ...

    def prune(self, user_id: str, tier: str, cutoff: datetime | None, keep_last: int | None) -> int:
        """Delete a tier's old items of one user (see ``Memory.prune``); how many."""
        ...

    def claim_job(
        self, lease_seconds: float, max_attempts: int | None = None, *, user_id: str | None = None
    ) -> Job | None:
        """Take the next job to run (or one a crashed worker left), leased for a while.

        With ``user_id``, only that user's jobs are taken, oldest first, as the whole queue
        would give them: a caller waiting on one user's work need not run everyone's.

        Each claim counts one attempt (``Job.attempts``). A job whose lease ran out after
        ``max_attempts`` claims is parked as failed rather than claimed again.
        """
        ...

    def renew_job(self, job_id: int, *, attempt: int, lease_seconds: float) -> bool:
        """Extend the lease of a job claim ``attempt`` still holds; False if another worker took it over."""
        ...

    def finish_job(self, job_id: int, *, attempt: int | None = None) -> None:
        """A job ran to its end: its row is deleted (a finished job has nothing left to say, and
        one row per write kept forever grew the store without bound).

        With ``attempt`` (the claim's ``Job.attempts``) only while that claim still holds the
        job: a worker whose lease another took over changes nothing.
        """
        ...

    def fail_job(
        self, job_id: int, error: str, *, retry: bool, attempt: int | None = None, retry_after: float = 0.0
    ) -> None:
        """Record a failure; the job is tried again ``retry_after`` seconds later, or parked as failed.

        ``attempt``: as in finish_job.
        """
        ...

    def count_failed_jobs(self, user_id: str | None = None) -> int:
        """Jobs parked as failed (tried too often), of ``user_id`` or of everyone."""
        ...

    def retry_failed_jobs(self, user_id: str | None = None) -> int:
        """Queue the failed jobs (of ``user_id``, or everyone's) again, with fresh attempts; how many."""
        ...

    def count_jobs(self, user_id: str | None = None) -> int:
        """Jobs not finished yet (pending or running)."""
        ...


@dataclass(frozen=True, slots=True)
class Overflow:
    """Exchanges that left a working set together, owed to mid-term; ``token`` acknowledges them once queued."""

    token: str
    user_id: str
    seqs: tuple[int, ...]


class WorkingSet(Protocol):
    """Working memory kept outside the store (Redis), so processes on many machines share each session.

    The built-in stores keep the working set in the transaction that stores the turns
    (``insert_turns(..., working_capacity=N)``); this seam is for one that cannot join it.
    Invariants every adapter keeps:

    - ``track`` is atomic (for a large batch, part by part, each part remembered by name
      until the batch is whole) and idempotent: a turn seq already in its session is
      ignored, and a ``batch`` name tracked before is skipped whole (until ``release``), so
      a replay of the same write is a no-op even after its session expired.
    - An exchange starts at each user message. Every exchange leaves exactly once, across
      processes: ``track`` (overflow beyond ``capacity``) and ``expire_idle`` (sessions idle
      for ``idle_seconds``) hand each leaving exchange to one caller only, as an
      :class:`Overflow` that stays pending until ``acknowledge``; ``reclaim`` hands pending
      overflows out again once their lease ran out (their caller died before queueing them).
      Expiry is a move, never a drop. Overflow moves the exchanges said first (their earliest
      turn's ``created_at``, to the millisecond; ties in the order they were added), so turns back-filled into a
      live session never push out newer ones. A reply joins the exchange in the set opened
      last at or before its own time (the latest added among equals; times to the
      millisecond), or starts its own when none was. Deleting an exchange's first turn makes
      it as old as its earliest turn left.
    - Reads never see another user's turns. ``discard`` removes exactly the turns and
      overflows it is given (those the store no longer holds), never one tracked since, and
      a session left with no tracked turn goes whole: forgetting a user leaves no trace of them.
    - Driver errors are raised as :class:`memstrata.errors.StorageError`.
    """

    location: str

    def track(self, turns: Sequence[tuple[int, Turn]], capacity: int, *, batch: str | None = None) -> list[Overflow]:
        """Add (seq, turn) pairs to their sessions; the overflowing exchanges this call moved out."""
        ...

    def acknowledge(self, overflows: Sequence[Overflow]) -> None:
        """Forget pending overflows whose mid-term jobs are queued durably."""
        ...

    def reclaim(self, limit: int) -> list[Overflow]:
        """Pending overflows whose lease ran out, leased again to this caller."""
        ...

    def expire_idle(self, idle_seconds: float, limit: int) -> list[Overflow]:
        """Move whole sessions idle for ``idle_seconds`` out, as overflows (empty sessions just go)."""
        ...

    def is_tracked(self, batch: str) -> bool:
        """Whether a batch of that name was tracked (and not released since)."""
        ...

    def release(self, batch: str) -> None:
        """Forget a batch name once no replay of it can come."""
        ...

    def working_seqs(self, user_id: str, session_id: str | None = None) -> list[int]:
        """Turns in working memory (one session, or all of the user's), oldest first."""
        ...

    def tracked(self, user_id: str, session_id: str | None = None) -> dict[str, list[int]]:
        """Session key ('' for turns without one) → every turn tracked there and not discarded since."""
        ...

    def pending(self, user_id: str, session_id: str | None = None) -> list[Overflow]:
        """The user's (or one session's) overflows not acknowledged yet, whoever holds their lease."""
        ...

    def discard(self, user_id: str, seqs: Mapping[str, Sequence[int]], tokens: Sequence[str] = ()) -> None:
        """Remove these turns (session key → seqs) and these pending overflows, atomically.

        A session goes whole once no turn it tracked is left; until then it remembers the turns
        it tracked, so a replayed add of one of them stays a no-op.
        """
        ...

    def close(self) -> None:
        """Release connections."""
        ...


@dataclass(frozen=True, slots=True)
class ApiKey:
    """An API key's record: only a hash of the secret is ever stored."""

    id: str
    tenant: str
    name: str
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def is_active(self) -> bool:
        """Whether the key may still be used."""
        return self.revoked_at is None


class KeyStore(Protocol):
    """Where the REST server's API keys live (in the same database as the memories).

    Invariants: ``secret_hash`` is a one-way hash (the secret itself is never stored);
    ``key_for_hash`` returns revoked keys too, so callers can tell 401 from 403;
    writes are durable when they return.
    """

    def add_api_key(self, key: ApiKey, secret_hash: str) -> None:
        """Store a new key; its id and hash must both be new."""

    def key_for_hash(self, secret_hash: str) -> ApiKey | None:
        """The key whose secret hashes to ``secret_hash``, if any."""

    def api_keys(self, tenant: str | None = None) -> list[ApiKey]:
        """Keys (of one tenant, or all), oldest first."""

    def revoke_api_key(self, key_id: str, when: datetime) -> bool:
        """Mark a key revoked; False if there is no such key."""


@runtime_checkable
class ServerSideVectors(Protocol):
    """A store that ranks vectors itself, through an index, so a process need not load them all.

    Invariants: only ``user_id``'s turns are returned, as (seq, cosine similarity) best
    first (the convention of the in-process ``VectorIndex.search``); the answer may be
    approximate, but fewer than ``limit`` results means the user has no more turns (within
    ``allowed_seqs``, when given, where the answer is exact).
    """

    def nearest(
        self, model_id: str, user_id: str, vector: Vectors, limit: int, allowed_seqs: Seqs | Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``limit`` turns of ``user_id`` whose ``model_id`` vectors are nearest to ``vector``."""
        ...
