"""Episodic memory: turns stored verbatim with their vectors, message bursts embedded together."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, cast

import numpy as np

from memstrata.config import Settings
from memstrata.embeddings.base import Embedder, Vectors, normalize_rows
from memstrata.errors import IdConflict, NotFound, StorageError
from memstrata.ids import IdGenerator
from memstrata.models import Scope, Turn, whose
from memstrata.retrieval.bursts import MAX_BURST, burst_texts, continues
from memstrata.retrieval.fulltext import indexed_text
from memstrata.retrieval.vectors import VectorIndex
from memstrata.storage.roles import SearchStore, TierMaintenance, TurnStore, VectorStore
from memstrata.tiers.working import SharedWorkingMemory
from memstrata.validation import MessageInput

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` during long work."""

EMBED_BATCH = 64
#: Rows read before a turn to find its own earlier messages on a busy store (other users' rows skipped).
BURST_LOOKBACK = 50

log = logging.getLogger("memstrata.memory")


class EpisodicStore(TurnStore, SearchStore, VectorStore, TierMaintenance, Protocol):
    """What episodic memory writes and re-embeds: turns, their full text and vectors, the working set."""


@dataclass(kw_only=True, eq=False)
class Episodic:
    """Writes, re-embeds and deletes turns: store, vector index and working set (in the store or Redis) together."""

    store: EpisodicStore
    embedder: Embedder
    index: VectorIndex
    settings: Settings
    #: Working memory in Redis, or None when the store keeps it in the writing transaction.
    shared_working: SharedWorkingMemory | None
    ids: IdGenerator
    #: Nudges the background worker about new jobs.
    wake: Callable[[], None]

    def add(
        self,
        messages: Sequence[MessageInput],
        scope: Scope,
        *,
        moment: datetime,
        metadata: Mapping[str, Any],
        importance: float | None,
    ) -> list[Turn]:
        """Store checked messages said at ``moment`` in ``scope``; every turn as stored (retries stored once)."""
        turns = [
            Turn(
                id=message.id or self.ids.new(),
                user_id=scope.user_id,
                agent_id=scope.agent_id,
                session_id=scope.session_id,
                role=message.role,
                name=message.name,
                content=message.content,
                created_at=moment,
                metadata={**metadata, **message.metadata},
                importance=importance,
            )
            for message in messages
        ]
        stored, _ = self.store_turns(turns, {}, "is already used by another message; use a new id")
        return stored

    def store_turns(
        self,
        turns: list[Turn],
        known_vectors: dict[str, Vectors],
        conflict: str,
        same: Callable[[Turn, Turn], bool] = Turn.is_same_message,
    ) -> tuple[list[Turn], list[Turn]]:
        """Embed what is new, then write turns and vectors in one transaction.

        Returns every turn as stored and the ones this call wrote. A known id whose stored
        turn is not ``same`` (a retry of the message, by default) raises IdConflict
        (``id 'x' <conflict>``) before anything is written.
        """
        existing = self.refuse_conflicts(turns, conflict, same)
        fresh = [turn for turn in turns if turn.id not in existing]
        if fresh:
            vectors = self._embed_turns(fresh, self._burst_texts(fresh), [known_vectors.get(t.id) for t in fresh])
            if self.shared_working is not None:  # the working set goes to Redis
                self.shared_working.insert(fresh, vectors, self.embedder.model_id)
            else:  # in the same transaction
                self.store.insert_turns(
                    fresh, vectors, self.embedder.model_id, working_capacity=self.settings.working_capacity
                )
            self.wake()
        return [existing.get(turn.id, turn) for turn in turns], fresh

    def refuse_conflicts(
        self, turns: Sequence[Turn], conflict: str, same: Callable[[Turn, Turn], bool] = Turn.is_same_message
    ) -> dict[str, Turn]:
        """The stored turns with ids of ``turns``; IdConflict (``id 'x' <conflict>``) if one is not ``same``."""
        existing = self.store.get_by_ids([turn.id for turn in turns])
        for turn in turns:
            stored = existing.get(turn.id)
            if stored is not None and not same(stored, turn):
                raise IdConflict(f"id {turn.id!r} {conflict}")
        return existing

    def working_seqs(self, user_id: str, session_id: str | None = None) -> list[int]:
        """Turns in working memory (one session, or all of the user's), oldest first."""
        if self.shared_working is not None:
            return self.shared_working.working_seqs(user_id, session_id)
        return self.store.working_seqs(user_id, session_id)

    def reindex(self, progress: Progress | None, *, fulltext: bool, facts: Callable[[str], int] | None = None) -> int:
        """Embed every stored turn without a vector from the current model; how many (facts included).

        ``facts`` embeds some of one user's facts, returning how many (0 when none are left).
        """
        if fulltext:
            self.store.rebuild_fulltext()
        model_id = self.embedder.model_id
        total = self.store.count_missing_vectors(model_id)
        done = 0
        while total and (batch := self.store.turns_missing_vectors(model_id, 256)):
            seqs = [seq for seq, _ in batch]
            turns = [turn for _, turn in batch]
            self.store.put_vectors(model_id, seqs, self._embed_turns(turns, self._stored_bursts(batch)))
            done += len(batch)
            if progress is not None:
                progress(done, max(total, done))
        if done:
            self.index.drop()
        if facts is not None:
            for user in self.store.user_ids(""):
                while embedded := facts(user):
                    done += embedded
                    if progress is not None:
                        progress(done, max(total, done))
        return done

    def delete(self, turn_id: str, user_id: str) -> None:
        """Hard-delete one turn with its index entries; NotFound if absent. Its burst's later pieces are re-embedded."""
        # Read before it goes: which session's working set may hold it, and which burst it was in.
        found = self.store.get_by_ids([turn_id], user_id).get(turn_id)
        seq = self.store.delete(turn_id, user_id)
        if seq is None:
            raise NotFound(f"no memory with id {turn_id!r} for {whose(user_id)}")
        self.index.remove(user_id, np.array([seq], dtype=np.int64))
        if found is not None:
            self.refresh_bursts(user_id, self._pieces_after(user_id, seq, found))
        if self.shared_working is not None and found is not None:
            shared = self.shared_working
            _clear_working(user_id, lambda: shared.discard_turns(user_id, found.session_id, [seq]))

    def forget(self, scope: Scope) -> int:
        """Hard-delete everything in ``scope``, indexes included; how many turns."""
        count = self.store.forget(scope)
        self.forgotten(scope.user_id, scope.session_id)
        return count

    def forgotten(self, user_id: str, session_id: str | None = None) -> None:
        """After turns of a user (or one session) were deleted in the store: unload the user's vectors and
        free the Redis working-set places of the deleted turns."""
        self.index.drop(user_id)
        if self.shared_working is not None:
            shared = self.shared_working
            _clear_working(user_id, lambda: shared.discard_deleted(user_id, session_id))

    def refresh_bursts(self, user_id: str, seqs: Sequence[int]) -> None:
        """Embed these turns again from what is stored now: a deleted message leaves no trace in later vectors."""
        if not self.settings.join_bursts or not seqs:
            return
        batch = sorted(self.store.get_by_seqs(list(seqs), user_id).items())
        if batch:
            vectors = self._embed_turns([turn for _, turn in batch], self._stored_bursts(batch))
            self.store.put_vectors(self.embedder.model_id, [seq for seq, _ in batch], vectors)
            self.index.drop(user_id)

    # -- helpers ----------------------------------------------------------------------

    def _burst_texts(self, turns: Sequence[Turn]) -> list[str | None]:
        """Each new turn's message burst up to it, as one text (``None`` for none; ``retrieval/bursts.py``)."""
        if not self.settings.join_bursts:
            return [None] * len(turns)
        texts: dict[str, str | None] = {}
        for user_id in dict.fromkeys(turn.user_id for turn in turns):
            own = [turn for turn in turns if turn.user_id == user_id]
            before: list[Turn] = []
            if own[0].session_id is not None:  # a burst never spans sessions, and a turn without one is in none
                before = self.store.history(Scope(user_id), limit=MAX_BURST, newest_first=True)[::-1]
            texts.update(zip((turn.id for turn in own), burst_texts(own, before), strict=True))
        return [texts[turn.id] for turn in turns]

    def _stored_bursts(self, batch: Sequence[tuple[int, Turn]]) -> list[str | None]:
        """Stored turns' message bursts up to them (as ``_burst_texts``), each after the user's turns stored before it.

        A turn's own earlier turns are looked for among the :data:`BURST_LOOKBACK` rows stored
        before it (other users' rows in between are skipped, as ``add`` never sees them).
        """
        if not self.settings.join_bursts:
            return [None] * len(batch)
        known = {seq: turn for seq, turn in batch}
        wanted: dict[str, set[int]] = {}
        for seq, turn in batch:
            wanted.setdefault(turn.user_id, set()).update(range(max(1, seq - BURST_LOOKBACK), seq))
        for user_id, seqs in wanted.items():
            known.update(self.store.get_by_seqs(sorted(seqs - known.keys()), user_id))
        texts: list[str | None] = []
        for seq, turn in batch:
            earlier = [
                known[before]
                for before in range(seq - 1, max(0, seq - BURST_LOOKBACK - 1), -1)
                if before in known and known[before].user_id == turn.user_id
            ][:MAX_BURST]
            texts.append(burst_texts([turn], earlier[::-1])[0])
        return texts

    def _pieces_after(self, user_id: str, seq: int, deleted: Turn) -> list[int]:
        """The seqs of the user's turns that went on the burst of ``deleted`` (stored at ``seq``) after it."""
        after = self.store.get_by_seqs(list(range(seq + 1, seq + BURST_LOOKBACK + 1)), user_id)
        pieces: list[int] = []
        previous = deleted
        for later in sorted(after):
            if len(pieces) == MAX_BURST or not continues(previous, after[later]):
                break
            pieces.append(later)
            previous = after[later]
        return pieces

    def _embed_turns(
        self, turns: Sequence[Turn], bursts: Sequence[str | None], known: Sequence[Vectors | None] | None = None
    ) -> Vectors:
        """Each turn's vector: its text's, or for a burst's later piece the mean of its text's and its burst's."""
        matrix = self._embed([indexed_text(turn) for turn in turns], known)
        rows = [row for row, text in enumerate(bursts) if text is not None and (known is None or known[row] is None)]
        if rows:
            joined = self._embed([cast(str, bursts[row]) for row in rows])
            matrix[rows] = normalize_rows(matrix[rows] + joined)
        return matrix

    def _embed(self, texts: Sequence[str], known: Sequence[Vectors | None] | None = None) -> Vectors:
        """Embed ``texts``, reusing vectors already known for some of them."""
        matrix = np.zeros((len(texts), self.embedder.dimension), dtype=np.float32)
        missing = [i for i in range(len(texts)) if known is None or known[i] is None]
        for i in range(len(texts)):
            if known is not None and known[i] is not None:
                matrix[i] = known[i]
        for start in range(0, len(missing), EMBED_BATCH):
            rows = missing[start : start + EMBED_BATCH]
            matrix[rows] = self.embedder.embed_documents([texts[i] for i in rows])
        return matrix


def _clear_working(user_id: str, clear: Callable[[], None]) -> None:
    """Run a Redis clean-up after a deletion; its failure is a warning, as the deletion stands."""
    try:
        clear()
    except StorageError as exc:
        # The deletion stands: Redis holds turn numbers and ids, never text, and reads skip
        # turns the store no longer has. Its leftover keys wait for the session's expiry.
        log.warning(
            "the memories were deleted, but the Redis working set could not be cleared (%s); its keys"
            " for %r, which hold no text, go when the session expires or is forgotten",
            exc,
            user_id,
        )
