"""The storage roles: one narrow protocol per kind of caller, each a part of ``Store`` or ``TierStore``.

A caller depends on the roles it uses (the tiers on segments or knowledge, search on turns,
search and vectors, the worker on the job queue); ``base.Store`` and ``base.TierStore`` are
these roles put together, and their docstrings hold the invariants every backend keeps.
Every method raises :class:`memstrata.errors.StorageError` when the driver fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

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
    Vectors,
)

Seqs = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class VectorBatch:
    """Vectors read from the store: turn seqs, their vectors, and the last vector id read."""

    seqs: Seqs
    vectors: Vectors
    high_water: int


@dataclass(kw_only=True, frozen=True, slots=True)
class Job:
    """A unit of background work taken from the durable queue."""

    id: int
    kind: str
    user_id: str
    payload: dict[str, Any]
    attempts: int


# -- the roles of Store ----------------------------------------------------------------


class TurnStore(Protocol):
    """The turns themselves: written, read back, deleted, listed."""

    def insert_turns(
        self, turns: Sequence[Turn], vectors: Vectors | None, model_id: str, *, working_capacity: int | None = None
    ) -> list[int]:
        """Store new turns (and vectors; with ``working_capacity`` also the working set and their jobs) atomically.

        Returns their seqs; an identical turn already stored is skipped. Raises
        :class:`memstrata.errors.IdConflict` (writing nothing) for a different turn with a used id.
        """
        ...

    def get_by_ids(self, ids: Sequence[str], user_id: str | None = None) -> dict[str, Turn]:
        """Turns with these ids (of ``user_id`` only, when given)."""
        ...

    def get_by_seqs(self, seqs: Sequence[int], user_id: str | Sequence[str]) -> dict[int, Turn]:
        """Turns of ``user_id`` (or of any of several memories) with these seqs."""
        ...

    def delete(self, turn_id: str, user_id: str) -> int | None:
        """Delete one turn with its index entries and what was derived from it; its seq, or ``None`` if absent."""
        ...

    def forget(self, scope: Scope) -> int:
        """Hard-delete every turn in ``scope`` with its index entries and derived items; how many."""
        ...

    def history(self, scope: Scope, *, limit: int, offset: int = 0, newest_first: bool = False) -> list[Turn]:
        """Turns of a scope in time order (ties in seq order)."""
        ...

    def iterate(self, user_id: str | None = None) -> Iterator[tuple[int, Turn]]:
        """Every turn (of one user, or all) as (seq, turn), in seq order."""
        ...

    def user_ids(self, prefix: str) -> list[str]:
        """Distinct user ids with turns starting with ``prefix`` (``""``: all), in code point order, by index seeks."""
        ...


class FederatedSearch(Protocol):
    """Full text over several memories at once (a user's and shared spaces'), each ranked as if alone."""

    def fulltext_many(
        self, match: str, user_ids: Sequence[str], filters: SearchFilters, limit: int
    ) -> dict[str, list[tuple[int, float]]]:
        """``fulltext`` for each of ``user_ids``."""
        ...

    def derived_fulltext_many(
        self, match: str, user_ids: Sequence[str], limit: int, tiers: Sequence[str] = ("longterm",)
    ) -> dict[str, list[tuple[int, float]]]:
        """``derived_fulltext`` for each of ``user_ids``."""
        ...


class SearchStore(Protocol):
    """Full-text candidates among turns and derived items, and the filters search applies."""

    def fulltext(self, match: str, user_id: str, filters: SearchFilters, limit: int) -> list[tuple[int, float]]:
        """Full-text candidates as (seq, score), best first; higher score is better."""
        ...

    def speakers(self, user_id: str, limit: int) -> list[str]:
        """Distinct non-null names of the user's non-tool turns, in name order, at most ``limit``, by index seeks."""
        ...

    def filtered_seqs(self, user_id: str, filters: SearchFilters, limit: int | None = None) -> Seqs:
        """Seqs of ``user_id``'s turns that pass ``filters`` (with a ``limit``, at most that many, any of them)."""
        ...

    def derived_fulltext(
        self, match: str, user_id: str, limit: int, tiers: Sequence[str] = ("longterm",)
    ) -> list[tuple[int, float]]:
        """Full-text candidates among current derived items of these tiers, best first."""
        ...

    def derived_items(self, seqs: Sequence[int], user_id: str) -> dict[int, tuple[str, str, str, tuple[str, ...]]]:
        """(id, tier, content, source turn ids) of derived items, by seq."""
        ...

    def rebuild_fulltext(self) -> None:
        """Recreate the turns' and derived items' full-text indexes from the store, re-deriving cells' text."""
        ...


class VectorStore(Protocol):
    """Turn vectors (and fact vectors for search): read to catch an index up, written when missing."""

    def vectors_after(self, model_id: str, user_id: str, after: int, limit: int | None = None) -> VectorBatch:
        """Vectors of ``model_id`` for ``user_id`` stored after vector id ``after``, the first ``limit`` (None: all)."""
        ...

    def vector_count(self, model_id: str, user_id: str) -> int:
        """How many ``model_id`` vectors ``user_id``'s turns have."""
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
        """Store vectors for existing turns (replacing any of the same model); a turn deleted meanwhile is skipped."""
        ...

    def cell_vectors(self, user_id: str, model_id: str) -> list[tuple[int, str, Vectors]]:
        """(derived item seq, subject, vector) of the user's current cells with a ``model_id`` vector, by seq."""
        ...


class JobIntake(Protocol):
    """Where background work is queued."""

    def enqueue_job(self, kind: str, user_id: str, payload: dict[str, Any]) -> int:
        """Queue background work durably; its job id."""
        ...


class Maintenance(Protocol):
    """What the store as a whole reports and does: totals, size, vacuum, its clock, closing."""

    location: str

    def close(self) -> None:
        """Release connections; further calls fail."""

    def counts(self) -> dict[str, int]:
        """Totals for ``info``: turns, users, sessions, vectors per model."""
        ...

    def size_bytes(self) -> int:
        """How many bytes the store's data takes on disk (its files, or its tables and indexes)."""
        ...

    def vacuum(self) -> bool:
        """Rewrite the store so deleted data leaves its files (rows and order kept); False if a reader held some."""
        ...

    def clock(self) -> float:
        """Seconds since the epoch on the store's own clock, which every process sharing the store reads alike."""
        ...


# -- the roles TierStore adds ----------------------------------------------------------


class TurnSignals(Protocol):
    """Per-turn signals of the tiers: importance, the message before, recent vectors for novelty."""

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


class SegmentStore(Protocol):
    """The mid-term tier: topic segments, their turns and visits, eviction and promotion to scenes."""

    def active_segments(self, user_id: str, model_id: str | None = None) -> list[tuple[Segment, bytes | None]]:
        """The user's active segments with their directions (None when stored for a model other than ``model_id``)."""
        ...

    def segments(self, user_id: str, *, limit: int = 50) -> list[Segment]:
        """Segments of a user, hottest first (archived ones last)."""
        ...

    def segment_turn_seqs(self, segment_id: str) -> list[int]:
        """Turns that make up a segment, oldest first."""
        ...

    def active_segment(self, segment_id: str) -> tuple[Segment, list[int]] | None:
        """An active segment and its turns, oldest first, read in one snapshot; None if gone or archived."""
        ...

    def filed_turns(self, turn_seqs: Sequence[int]) -> set[int]:
        """Those of these turns that some segment (active or archived) already holds."""
        ...

    def segment_before(self, user_id: str, turn_seq: int) -> tuple[str, datetime] | None:
        """The segment of the latest filed turn before ``turn_seq`` in its session (by time, then seq), and when."""
        ...

    def turns_after(self, user_id: str, turn_seq: int, limit: int) -> list[int]:
        """Up to ``limit`` seqs of turns after ``turn_seq`` in its session (by time, then seq); empty if not theirs."""
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
        """Create or update a segment with its new turns and search item, keeping its visits and state.

        False, storing nothing, when a new turn is gone or filed elsewhere, the segment was
        archived, or it no longer holds ``known_turns``: the caller reads again.
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
        """Count visit job ``job_id``'s visits once, in one transaction; the active segments its searches touched."""
        ...

    def archive_segments(self, user_id: str, segment_ids: Sequence[str], reason: Mapping[str, float]) -> None:
        """Move segments out of the active mid-term set; their turns stay searchable as episodes."""
        ...

    def promote_segment(self, segment: Segment, scene_id: str, title: str, now: datetime) -> None:
        """Turn a hot segment into a long-term scene that its turns' cells join; once per segment."""
        ...


class KnowledgeStore(Protocol):
    """The long-term and procedural tiers: cells (facts), their vectors, the profile, interaction patterns."""

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
        """Store a cell, ending the cells it supersedes (kept as history) that were valid when it began.

        With ``seen_slot`` (the slot's cell ids as read, each with whether it was current),
        False, storing nothing, when the slot changed since: the caller decides again.
        """
        ...

    def restate_cell(self, user_id: str, cell_id: str, turn_seq: int, value: str, content: str) -> bool:
        """Note that turn ``turn_seq`` said cell ``cell_id`` again (``value`` in ``content``); False if it is gone."""
        ...

    def cells_without_vectors(self, user_id: str, model_id: str, limit: int) -> list[Cell]:
        """At most ``limit`` of a user's current cells with no vector of ``model_id``, newest first."""
        ...

    def save_cell_vectors(self, model_id: str, vectors: Mapping[str, Vectors]) -> None:
        """Store vectors by cell id; a cell deleted meanwhile is skipped, a stored vector replaced."""
        ...

    def set_profile(self, user_id: str, values: Mapping[str, str], source_turn_seq: int, now: datetime) -> None:
        """Upsert profile traits, each with the turn it came from and when; a trait set at a later ``now`` stays."""
        ...

    def profile(self, user_id: str) -> dict[str, str]:
        """The user's current profile."""
        ...

    def profile_entries(self, user_id: str) -> list[tuple[str, str, str | None]]:
        """(key, value, speaker name of the turn that set it or None) of the profile, by key."""
        ...

    def observe_pattern(
        self, user_id: str, turn_seq: int, key: str, *, description: str, evidence: str, when: datetime
    ) -> None:
        """Count an interaction pattern seen in turn ``turn_seq``, once per (user, key, turn), in one transaction."""
        ...

    def pattern_rows(self, user_id: str) -> list[tuple[str, str, int, datetime, datetime, str]]:
        """(key, description, count, first_seen, last_seen, evidence) of a user's patterns."""
        ...


class GraphStore(Protocol):
    """The entity graph: entities, their co-mentions and mentions, and their name vectors."""

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


class ConsolidationStore(Protocol):
    """Sleep: which turns no consolidation holds yet, how far sleep looked, and the summaries it stored."""

    def unconsolidated_turns(self, user_id: str, limit: int, *, after_seq: int = 0) -> list[int]:
        """Seqs of at most ``limit`` unconsolidated turns: the oldest after ``after_seq``, then the newest up to it."""
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
        """Store a summary linked to its source turns; False, storing nothing, if one of them has one already."""
        ...

    def consolidations(self, user_id: str, *, limit: int = 20) -> list[Consolidation]:
        """Recent consolidations of a user, newest first."""
        ...


class TierMaintenance(Maintenance, Protocol):
    """What the tiers hold for a user, as a whole: counts, the audit log, working memory, retention."""

    def tier_counts(self, user_id: str) -> dict[str, int]:
        """How many items each tier holds for a user."""
        ...

    def events(self, user_id: str, *, limit: int = 50) -> list[MemoryEvent]:
        """The user's audit log, newest first."""
        ...

    def working_seqs(self, user_id: str, session_id: str | None = None) -> list[int]:
        """Turns in working memory (one session, or all of the user's), oldest first."""
        ...

    def prune(self, user_id: str, tier: str, cutoff: datetime | None, keep_last: int | None) -> int:
        """Delete a tier's old items of one user (see ``Memory.prune``); how many."""
        ...


class JobQueue(JobIntake, Protocol):
    """The durable job queue: claimed under a lease, renewed, finished or failed, retried."""

    def claim_job(
        self, lease_seconds: float, max_attempts: int | None = None, *, user_id: str | None = None
    ) -> Job | None:
        """Lease the next job (of ``user_id`` only, when given), counting an attempt; park one tried too often."""
        ...

    def renew_job(self, job_id: int, *, attempt: int, lease_seconds: float) -> bool:
        """Extend the lease of a job claim ``attempt`` still holds; False if another worker took it over."""
        ...

    def finish_job(self, job_id: int, *, attempt: int | None = None) -> None:
        """Delete a job that ran to its end (with ``attempt``: only while that claim still holds it)."""
        ...

    def fail_job(
        self, job_id: int, error: str, *, retry: bool, attempt: int | None = None, retry_after: float = 0.0
    ) -> None:
        """Record a failure: tried again ``retry_after`` seconds later, or parked (``attempt`` as in finish_job)."""
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
