"""The storage seam: what a backend must do to hold memstrata's source of truth."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from memstrata.models import Scope, SearchFilters, Turn

Vectors = npt.NDArray[np.float32]
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
    - The full-text index and vectors are derived: ``rebuild_fulltext`` and
      ``turns_missing_vectors`` + ``put_vectors`` recreate them from the turns.
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

    def fulltext(self, match: str, user_id: str, filters: SearchFilters, limit: int) -> list[tuple[int, float]]:
        """Full-text candidates as (seq, score), best first; higher score is better."""
        ...

    def filtered_seqs(self, user_id: str, filters: SearchFilters) -> Seqs:
        """Seqs of ``user_id``'s turns that pass ``filters``."""
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
        """Recreate the full-text index from the turns."""
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

    def counts(self) -> dict[str, int]:
        """Totals for ``info``: turns, users, sessions, vectors per model."""
        ...
