"""The storage seam: what a backend must do to hold memstrata's source of truth.

``Store`` and ``TierStore`` put together the narrow roles of ``roles.py``; a caller that needs
only one of them depends on that role. The other seams here are the working set kept outside
the store (``WorkingSet``), the server's API keys (``KeyStore``) and stores that rank vectors
themselves (``ServerSideVectors``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from memstrata.models import Access, Grant, Share, Space, Turn
from memstrata.models import ApiKey as ApiKey
from memstrata.models import Vectors as Vectors
from memstrata.storage.roles import (
    ConsolidationStore,
    FederatedSearch,
    GraphStore,
    Job,
    JobIntake,
    JobQueue,
    KnowledgeStore,
    Maintenance,
    SearchStore,
    SegmentStore,
    Seqs,
    TierMaintenance,
    TurnSignals,
    TurnStore,
    VectorBatch,
    VectorStore,
)

__all__ = [
    "ApiKey",
    "ConsolidationStore",
    "FederatedSearch",
    "GraphStore",
    "Job",
    "JobIntake",
    "JobQueue",
    "KeyStore",
    "KnowledgeStore",
    "Maintenance",
    "Overflow",
    "ProvenanceStore",
    "SearchStore",
    "SegmentStore",
    "Seqs",
    "ServerSideVectors",
    "SpaceStore",
    "Store",
    "TierMaintenance",
    "TierStore",
    "TurnSignals",
    "TurnStore",
    "VectorBatch",
    "VectorStore",
    "Vectors",
    "WorkingSet",
]


class Store(TurnStore, SearchStore, FederatedSearch, VectorStore, JobIntake, Maintenance, Protocol):
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
    - ``user_ids`` and ``speakers`` seek through an index, one seek per name, never scanning the turns.
    - ``vacuum`` keeps every row as it was (ids, seqs and their order included); other writers wait for it.
    - ``clock`` is the machine's for SQLite (shared by one machine only), the server's for PostgreSQL.
    - Driver errors are raised as :class:`memstrata.errors.StorageError`.
    """


class SpaceStore(Protocol):
    """Shared spaces and who may use them. A space's memories are stored under ``space_scope(name)``.

    Invariants: names are unique (``create_space`` of a taken name, or of one being deleted,
    is an IdConflict and changes nothing); a space being deleted is gone for every read but
    ``access`` until its record goes; a space's grants go with it; writes are durable when
    they return.
    """

    def create_space(self, space: Space) -> None:
        """Store a new space; IdConflict when the name is taken."""
        ...

    def spaces(self, prefix: str = "") -> list[Space]:
        """Spaces whose name starts with ``prefix``, in code point order."""
        ...

    def space(self, name: str) -> Space | None:
        """The space called ``name``, if any."""
        ...

    def begin_space_deletion(self, name: str, when: datetime) -> bool:
        """Mark a space as being deleted: from then on it is gone for every call; False if there is no record."""
        ...

    def delete_space(self, name: str, detail: Mapping[str, object]) -> bool:
        """Remove a space's record and grants (not its memories), audited with ``detail``; False if absent."""
        ...

    def set_grant(self, grant: Grant) -> None:
        """Give an agent its access to a space (replacing what it had); NotFound when the space is gone."""
        ...

    def remove_grant(self, space: str, agent_id: str) -> bool:
        """Take an agent's access to a space away; False if it had none."""
        ...

    def grants(self, space: str) -> list[Grant]:
        """Who may use a space, by agent id."""
        ...

    def access(self, space: str, agent_id: str) -> Access | None:
        """What ``agent_id`` may do in ``space`` (None: nothing)."""
        ...

    def grants_of(self, agent_id: str) -> list[Grant]:
        """Every space ``agent_id`` may use, by space name."""
        ...


class ProvenanceStore(Protocol):
    """How far agents trust each other, and where shared memories came from."""

    def set_trust(self, agent_id: str, of_agent: str, weight: float) -> None:
        """How much ``of_agent``'s memories count when ``agent_id`` reads them (1: the default, stored as none)."""
        ...

    def trust_of(self, agent_id: str) -> dict[str, float]:
        """The weights ``agent_id`` set for other agents (those not named count 1)."""
        ...

    def add_shares(self, shares: Sequence[Share]) -> None:
        """Record the links of shared copies, in the copies' transaction's wake."""
        ...

    def shares(self, turn_ids: Sequence[str]) -> dict[str, Share]:
        """The links of those of ``turn_ids`` that are shared copies."""
        ...


class TierStore(
    Store,
    TurnSignals,
    SegmentStore,
    KnowledgeStore,
    GraphStore,
    ConsolidationStore,
    TierMaintenance,
    JobQueue,
    SpaceStore,
    ProvenanceStore,
    Protocol,
):
    """A store that also holds the derived tiers (segments, cells, profile, patterns, entities,
    consolidations) and the job queue. Same invariants as :class:`Store`; every derived row
    links to its source turns and goes when they go. Besides:

    - A turn is filed in at most one segment, and a segment's summary covers the turns it
      links; ``save_segment`` never sets visits or state, nor lowers heat or activity.
    - ``count_visits`` counts a job's visits once, none lost to another writer: a job counted
      before, or gone from the queue, counts nothing (its touched segments are still returned).
    - ``add_cell`` with ``seen_slot`` checks and writes in one transaction under the user's
      writer lock. A cell given with ``valid_to`` and ``superseded_by`` is stored as history
      (with its supersession event); a superseded cell still valid after the new one began
      ends where it begins; one that began after it is never superseded by it.
    - When a cell's own turn is deleted, the earliest kept turn that restated it becomes its
      source (its value, sentence and time if later), and its vectors go.
    - ``observe_pattern`` is idempotent per (user, key, turn); deleting the turn takes its
      occurrence back.
    - Each ``claim_job`` counts one attempt (``Job.attempts``); a job whose lease ran out
      after ``max_attempts`` claims is parked as failed. ``finish_job`` and ``fail_job`` with
      ``attempt`` change nothing once another worker took the job over.
    - Two sleeps of one user summarise a turn at most once between them.
    """


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
