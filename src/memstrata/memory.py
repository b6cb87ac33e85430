"""The Memory facade: the public API every front end calls."""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import numpy as np

from memstrata.config import Settings, load_settings
from memstrata.embeddings import load_embedder
from memstrata.embeddings.base import Embedder, Vectors, normalize_rows
from memstrata.errors import ConfigError, IdConflict, InvalidInput, NotFound, StorageError
from memstrata.ids import IdGenerator
from memstrata.llms import load_llm
from memstrata.llms.base import LLM
from memstrata.memory_chat import ChatViews
from memstrata.memory_context import ContextViews
from memstrata.memory_search import SearchViews
from memstrata.memory_tiers import TierViews
from memstrata.memory_transfer import TransferViews
from memstrata.models import Compaction, Deletion, Scope, Turn
from memstrata.policies.consolidation import ConsolidationPolicy
from memstrata.policies.heat import HeatPolicy
from memstrata.retrieval.bursts import MAX_BURST, burst_texts, continues
from memstrata.retrieval.fulltext import indexed_text
from memstrata.retrieval.vectors import VectorIndex
from memstrata.storage import open_store, open_working_set
from memstrata.storage.base import Job, ServerSideVectors, Store, TierStore
from memstrata.tiers.hierarchy import Hierarchy, HierarchyPolicy
from memstrata.tiers.worker import Activity, Worker, retry_delay
from memstrata.tiers.working import SharedWorkingMemory, WorkingPolicy
from memstrata.validation import (
    LARGEST_COUNT,
    MAX_IDENTIFIER_LENGTH,
    check_identifier,
    check_importance,
    check_limit,
    check_metadata,
    check_offset,
    check_stored_time,
    parse_messages,
)
from memstrata.version import __version__

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` during long work."""

EMBED_BATCH = 64
#: Rows read before a turn to find its own earlier messages on a busy store (other users' rows skipped).
BURST_LOOKBACK = 50
_DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


log = logging.getLogger("memstrata.memory")
P = ParamSpec("P")
R = TypeVar("R")


def _foreground(method: Callable[Concatenate[Memory, P], R]) -> Callable[Concatenate[Memory, P], R]:
    """Mark a call as foreground work, which background tier work waits for."""

    @functools.wraps(method)
    def wrapper(self: Memory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._activity:
            return method(self, *args, **kwargs)

    return wrapper


class Memory(SearchViews, TierViews, ContextViews, ChatViews, TransferViews):
    """Persistent memory for LLM agents: ``add`` what was said, ``search`` before answering.

    >>> with Memory("/tmp/demo-memory") as memory:            # doctest: +SKIP
    ...     memory.add("I live in Lisbon", user_id="ana")
    ...     memory.search("where does Ana live?", user_id="ana")[0].content
    'I live in Lisbon'
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        settings: Settings | None = None,
        store: Store | None = None,
        embedder: Embedder | str | None = None,
        llm: LLM | None = None,
        **overrides: Any,
    ) -> None:
        if isinstance(embedder, str):  # the setting's name, not an Embedder object
            overrides["embedder"], embedder = embedder, None
        if path is not None:
            location = Path(path).expanduser()
            if location.suffix in _DATABASE_SUFFIXES or location.is_file():
                overrides.setdefault("home", location.parent)
                overrides.setdefault("storage_url", f"sqlite:///{location.resolve()}")
            else:
                overrides.setdefault("home", location)
        if settings is None:
            settings = load_settings(**overrides)
        elif overrides:
            settings = load_settings(**{**settings.model_dump(exclude_unset=True), **overrides})
        self.settings = settings
        self._embedder = embedder or load_embedder(
            settings.embedder, threads=settings.embedding_threads, cache_dir=settings.data_dir, settings=settings
        )
        self._store = store or open_store(
            settings.resolved_storage_url, busy_timeout_seconds=settings.busy_timeout_seconds
        )
        if settings.vector_search == "server" and not isinstance(self._store, ServerSideVectors):
            self._store.close()
            raise ConfigError(
                f"vector_search = 'server' needs a store with its own vector index (PostgreSQL + pgvector), "
                f"not {self._store.location}; use vector_search = 'memory'"
            )
        self._index = VectorIndex(
            self._embedder.dimension, neighbour_weights=settings.neighbour_weights, max_rows=settings.vector_cache_rows
        )
        self._ids = IdGenerator()
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        # Per user, bumped when a deletion by another process left the user's vector index stale.
        self._index_reloads: Counter[str] = Counter()
        self._activity = Activity()
        self._pending_visits: dict[str, list[list[int]]] = {}
        self._visits_lock = threading.Lock()
        self._closed = False
        self._shared_working: SharedWorkingMemory | None = None
        self._owned_llm = False
        try:
            self._llm: LLM = llm or load_llm(settings)
            self._owned_llm = llm is None
            self._finish_opening(settings)
        except BaseException:
            # Nothing half-open stays behind: what this Memory opened is closed again.
            if self._executor is not None:
                self._executor.shutdown(wait=True)
            if self._shared_working is not None:
                self._shared_working.close()
            if store is None:
                self._store.close()
            closer = getattr(self._llm, "close", None) if self._owned_llm else None
            if callable(closer):
                closer()
            raise

    def _finish_opening(self, settings: Settings) -> None:
        """Embed what lacks vectors, then build the hierarchy, the shared working set and the worker."""
        self.reindex()
        policy = HierarchyPolicy(
            working_capacity=settings.working_capacity,
            segment_similarity=settings.segment_similarity,
            segment_continue_similarity=settings.segment_continue_similarity,
            heat=HeatPolicy(promote_threshold=settings.promote_heat, midterm_capacity=settings.midterm_capacity),
            consolidation=ConsolidationPolicy(
                every_turns=settings.consolidate_every, token_threshold=settings.consolidate_tokens
            ),
            timezone=settings.zone,
        )
        store_with_tiers = cast(TierStore, self._store)
        self._hierarchy = Hierarchy(store_with_tiers, self._embedder, self._llm, policy, self._ids)
        self._shared_working = _shared_working(settings, store_with_tiers)
        claim: Callable[[], Job | None] = functools.partial(
            store_with_tiers.claim_job, policy.job_lease_seconds, policy.max_attempts
        )

        def claim_users_job(user_id: str) -> Job | None:
            return store_with_tiers.claim_job(policy.job_lease_seconds, policy.max_attempts, user_id=user_id)

        claim_for: Callable[[str], Job | None] = claim_users_job
        run: Callable[[Job], None] = self._hierarchy.run
        if self._shared_working is not None:
            claim, run = self._shared_working.claimer(claim), self._shared_working.runner(run)
            claim_for = self._shared_working.user_claimer(claim_for)
        self._worker = Worker(
            claim,
            run,
            lambda job: store_with_tiers.finish_job(job.id, attempt=job.attempts),
            lambda job, error, retry: store_with_tiers.fail_job(
                job.id, error, retry=retry, attempt=job.attempts, retry_after=retry_delay(job.attempts)
            ),
            max_attempts=policy.max_attempts,
            activity=self._activity,
            renew=lambda job: store_with_tiers.renew_job(
                job.id, attempt=job.attempts, lease_seconds=policy.job_lease_seconds
            ),
            renew_every=policy.job_lease_seconds / 3,
            claim_for=claim_for,
        )
        if settings.background:
            self._worker.start()

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **overrides: Any) -> Memory:
        """Build a Memory from settings (arguments > env > memstrata.toml > defaults)."""
        return cls(settings=settings, **overrides)

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Release the store; the Memory cannot be used afterwards."""
        if not self._closed:
            self._queue_visits()
            self._worker.stop()
            self._closed = True
            if self._executor is not None:
                self._executor.shutdown(wait=True)
            self._index.drop()
            if self._shared_working is not None:
                self._shared_working.close()
            self._store.close()
            closer = getattr(self._llm, "close", None)
            if self._owned_llm and callable(closer):  # a model client built here; one passed in is the caller's
                closer()

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _require_open(self) -> None:
        if self._closed:
            raise StorageError("this Memory is closed; open a new one")

    @property
    def embedder(self) -> Embedder:
        """The embedder in use."""
        return self._embedder

    @property
    def llm(self) -> LLM:
        """The LLM in use (``none`` unless one is configured or passed)."""
        return self._llm

    # -- writing ----------------------------------------------------------------------

    @_foreground
    def add(
        self,
        messages: str | Sequence[dict[str, Any]] | dict[str, Any],
        *,
        user_id: str,
        session_id: str | None = None,
        agent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        timestamp: datetime | str | None = None,
        id: str | None = None,
        importance: float | None = None,
    ) -> list[Turn]:
        """Store messages verbatim, indexed for search; returns the stored turns.

        ``messages`` is one string (a user message) or a list of ``{"role", "content",
        "name"?, "id"?}`` dicts. A message whose id exists already with the same content
        is not stored twice (safe retries); with other content it raises IdConflict.
        Durable when it returns. Never calls an LLM.
        """
        self._require_open()
        scope = self._scope(user_id, agent_id, session_id)
        parsed = parse_messages(messages, max_bytes=self.settings.max_text_bytes, default_id=id)
        shared = check_metadata(metadata)
        moment = check_stored_time(timestamp) or datetime.now(UTC)
        weight = check_importance(importance)
        turns = [
            Turn(
                id=message.id or self._ids.new(),
                user_id=scope.user_id,
                agent_id=scope.agent_id,
                session_id=scope.session_id,
                role=message.role,
                name=message.name,
                content=message.content,
                created_at=moment,
                metadata={**shared, **message.metadata},
                importance=weight,
            )
            for message in parsed
        ]
        stored, _ = self._store_turns(turns, {}, "is already used by another message; use a new id")
        return stored

    def _store_turns(
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
        existing = self._store.get_by_ids([turn.id for turn in turns])
        for turn in turns:
            stored = existing.get(turn.id)
            if stored is not None and not same(stored, turn):
                raise IdConflict(f"id {turn.id!r} {conflict}")
        fresh = [turn for turn in turns if turn.id not in existing]
        if fresh:
            vectors = self._embed_turns(fresh, self._burst_texts(fresh), [known_vectors.get(t.id) for t in fresh])
            self._insert_turns(fresh, vectors, self._embedder.model_id)
            self._after_enqueue()
        return [existing.get(turn.id, turn) for turn in turns], fresh

    def _burst_texts(self, turns: Sequence[Turn]) -> list[str | None]:
        """Each new turn's message burst up to it, as one text (``None`` for none; ``retrieval/bursts.py``)."""
        if not self.settings.join_bursts:
            return [None] * len(turns)
        texts: dict[str, str | None] = {}
        for user_id in dict.fromkeys(turn.user_id for turn in turns):
            own = [turn for turn in turns if turn.user_id == user_id]
            before: list[Turn] = []
            if own[0].session_id is not None:  # a burst never spans sessions, and a turn without one is in none
                before = self._store.history(Scope(user_id), limit=MAX_BURST, newest_first=True)[::-1]
            texts.update(zip((turn.id for turn in own), burst_texts(own, before), strict=True))
        return [texts[turn.id] for turn in turns]

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

    def _insert_turns(self, turns: list[Turn], vectors: Vectors, model_id: str) -> None:
        """Write new turns durably; their working set follows in the same transaction, or in Redis."""
        if self._shared_working is not None:
            self._shared_working.insert(turns, vectors, model_id)
        else:
            self._store.insert_turns(turns, vectors, model_id, working_capacity=self.settings.working_capacity)

    def _working_seqs(self, user_id: str, session_id: str | None = None) -> list[int]:
        """Turns in working memory (one session, or all of the user's), oldest first."""
        if self._shared_working is not None:
            return self._shared_working.working_seqs(user_id, session_id)
        return cast(TierStore, self._store).working_seqs(user_id, session_id)

    def _after_enqueue(self) -> None:
        """Nudge the background worker (when there is one) about new jobs."""
        if self.settings.background:
            self._worker.wake()

    def _embed(self, texts: Sequence[str], known: Sequence[Vectors | None] | None = None) -> Vectors:
        """Embed ``texts``, reusing vectors already known for some of them."""
        matrix = np.zeros((len(texts), self._embedder.dimension), dtype=np.float32)
        missing = [i for i in range(len(texts)) if known is None or known[i] is None]
        for i in range(len(texts)):
            if known is not None and known[i] is not None:
                matrix[i] = known[i]
        for start in range(0, len(missing), EMBED_BATCH):
            rows = missing[start : start + EMBED_BATCH]
            matrix[rows] = self._embedder.embed_documents([texts[i] for i in rows])
        return matrix

    def reindex(self, progress: Progress | None = None, *, fulltext: bool = False, facts: bool = False) -> int:
        """Embed every stored turn that has no vector from the current model; how many (facts included).

        Runs on open, so a model change (or an import without vectors) never leaves
        turns unsearchable. ``fulltext=True`` also rebuilds the full-text indexes, and
        rewrites the search text of cells stored by an older version as it now reads.
        ``facts=True`` also embeds every user's current facts (cells) that have no vector
        from the current model, which the tier work otherwise does at each user's next job
        (facts without one are found by their words only).
        """
        self._require_open()
        if fulltext:
            self._store.rebuild_fulltext()
        model_id = self._embedder.model_id
        total = self._store.count_missing_vectors(model_id)
        done = 0
        while total and (batch := self._store.turns_missing_vectors(model_id, 256)):
            seqs = [seq for seq, _ in batch]
            turns = [turn for _, turn in batch]
            self._store.put_vectors(model_id, seqs, self._embed_turns(turns, self._reindex_bursts(batch)))
            done += len(batch)
            if progress is not None:
                progress(done, max(total, done))
        if done:
            self._index.drop()
        if facts:
            for user in self._store.user_ids(""):
                while embedded := self._hierarchy.embed_cells(user):
                    done += embedded
                    if progress is not None:
                        progress(done, max(total, done))
        return done

    def _reindex_bursts(self, batch: Sequence[tuple[int, Turn]]) -> list[str | None]:
        """Stored turns' message bursts up to them (see ``_burst_texts``): each after the user's turns stored before it.

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
            known.update(self._store.get_by_seqs(sorted(seqs - known.keys()), user_id))
        texts: list[str | None] = []
        for seq, turn in batch:
            earlier = [
                known[before]
                for before in range(seq - 1, max(0, seq - BURST_LOOKBACK - 1), -1)
                if before in known and known[before].user_id == turn.user_id
            ][:MAX_BURST]
            texts.append(burst_texts([turn], earlier[::-1])[0])
        return texts

    def _refresh_bursts(self, user_id: str, seqs: Sequence[int]) -> None:
        """Embed these turns again from what is stored now: a deleted message leaves no trace in later vectors."""
        if not self.settings.join_bursts or not seqs:
            return
        batch = sorted(self._store.get_by_seqs(list(seqs), user_id).items())
        if batch:
            vectors = self._embed_turns([turn for _, turn in batch], self._reindex_bursts(batch))
            self._store.put_vectors(self._embedder.model_id, [seq for seq, _ in batch], vectors)
            self._index.drop(user_id)

    def _pieces_after(self, user_id: str, seq: int, deleted: Turn) -> list[int]:
        """The seqs of the user's turns that went on the burst of ``deleted`` (stored at ``seq``) after it."""
        after = self._store.get_by_seqs(list(range(seq + 1, seq + BURST_LOOKBACK + 1)), user_id)
        pieces: list[int] = []
        previous = deleted
        for later in sorted(after):
            if len(pieces) == MAX_BURST or not continues(previous, after[later]):
                break
            pieces.append(later)
            previous = after[later]
        return pieces

    # -- reading ----------------------------------------------------------------------

    def get(self, turn_id: str, *, user_id: str) -> Turn:
        """The turn with this id in ``user_id``'s memory; NotFound otherwise."""
        self._require_open()
        user = self._user(user_id)
        identifier = str(check_identifier(turn_id, "id"))
        found = self._store.get_by_ids([identifier], user).get(identifier)
        if found is None:
            raise NotFound(f"no memory with id {identifier!r} for user {user!r}")
        return found

    def history(
        self,
        *,
        user_id: str,
        session_id: str | None = None,
        agent_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
        newest_first: bool = False,
    ) -> list[Turn]:
        """Turns of a user (or one session) in time order, paginated."""
        self._require_open()
        scope = self._scope(user_id, agent_id, session_id)
        offset = check_offset(offset)
        if not isinstance(newest_first, bool):
            raise InvalidInput("newest_first must be true or false")
        limit = check_limit(limit, maximum=10_000)
        return self._store.history(scope, limit=limit, offset=min(offset, LARGEST_COUNT), newest_first=newest_first)

    def users(self, prefix: str = "") -> list[str]:
        """Ids of the users with stored turns that start with ``prefix`` (all by default), in code point order."""
        self._require_open()
        return self._store.user_ids(self._prefix(prefix))

    # -- deleting ---------------------------------------------------------------------

    def delete(self, turn_id: str, *, user_id: str) -> None:
        """Hard-delete one turn of ``user_id`` with its index entries; NotFound if absent."""
        self._require_open()
        user = self._user(user_id)
        identifier = str(check_identifier(turn_id, "id"))
        # Read before it goes: which session's working set may hold it, and which burst it was in.
        found = self._store.get_by_ids([identifier], user).get(identifier)
        seq = self._store.delete(identifier, user)
        if seq is None:
            raise NotFound(f"no memory with id {identifier!r} for user {user!r}")
        self._index.remove(user, np.array([seq], dtype=np.int64))
        if found is not None:
            self._refresh_bursts(user, self._pieces_after(user, seq, found))
        if self._shared_working is not None and found is not None:
            shared = self._shared_working
            self._clear_working(user, lambda: shared.discard_turns(user, found.session_id, [seq]))

    def forget(self, *, user_id: str, agent_id: str | None = None, session_id: str | None = None) -> Deletion:
        """Hard-delete everything in a scope (a whole user by default), indexes included."""
        self._require_open()
        scope = self._scope(user_id, agent_id, session_id)
        if scope.agent_id is None and scope.session_id is None:
            with self._visits_lock:  # visits not yet queued would queue a job for a user who is gone
                self._pending_visits.pop(scope.user_id, None)
        count = self._store.forget(scope)
        self._index.drop(scope.user_id)
        self._discard_deleted(scope.user_id, scope.session_id)
        return Deletion(scope.user_id, count, scope.agent_id, scope.session_id)

    def vacuum(self) -> Compaction:
        """Rewrite the store so deleted memories leave its files; its size before and after.

        ``forget`` removes every row, index entry and log frame of what it deletes; a database
        file can still keep copies in free space (SQLite) or dead rows (PostgreSQL) until
        it is rewritten. Writers wait meanwhile, so run it at a quiet time.
        """
        self._require_open()
        started = time.perf_counter()
        before = self._store.size_bytes()
        complete = self._store.vacuum()
        after = self._store.size_bytes()
        return Compaction(before, after, round(time.perf_counter() - started, 3), complete)

    def _discard_deleted(self, user_id: str, session_id: str | None) -> None:
        """Free the Redis working-set places of deleted turns (one session's, or all the user's)."""
        if self._shared_working is not None:
            shared = self._shared_working
            self._clear_working(user_id, lambda: shared.discard_deleted(user_id, session_id))

    @staticmethod
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

    # -- about ------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Where data lives, what is stored and its size on disk, the model, versions, this process's vector cache."""
        self._require_open()
        return {
            "version": __version__,
            "data_dir": str(self.settings.data_dir),
            "storage": self._store.location,
            "embedder": self._embedder.model_id,
            "dimension": self._embedder.dimension,
            "counts": self._store.counts(),
            "size_bytes": self._store.size_bytes(),
            "vector_cache": self._index.stats(),
        }

    # -- helpers ----------------------------------------------------------------------

    @staticmethod
    def _user(user_id: object) -> str:
        return str(check_identifier(user_id, "user_id"))

    @staticmethod
    def _prefix(prefix: object) -> str:
        """A user-id prefix: any start of a valid id, empty or blank included."""
        if not isinstance(prefix, str) or len(prefix) > MAX_IDENTIFIER_LENGTH:
            raise InvalidInput(f"prefix must be a string of at most {MAX_IDENTIFIER_LENGTH} characters")
        if "\x00" in prefix:
            raise InvalidInput("prefix contains a NUL character")
        try:
            prefix.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"prefix is not valid Unicode (lone surrogate at position {exc.start})") from exc
        return prefix

    @staticmethod
    def _scope(user_id: object, agent_id: object, session_id: object) -> Scope:
        return Scope(
            str(check_identifier(user_id, "user_id")),
            check_identifier(agent_id, "agent_id", required=False),
            check_identifier(session_id, "session_id", required=False),
        )


def _shared_working(settings: Settings, store: TierStore) -> SharedWorkingMemory | None:
    """Working memory in Redis when ``working_url`` is set; ``None`` keeps it in the store's own transaction."""
    if settings.working_url is None:
        return None
    try:
        working = open_working_set(settings.working_url)
    except BaseException:
        store.close()
        raise
    policy = WorkingPolicy(capacity=settings.working_capacity, idle_seconds=settings.working_ttl_seconds)
    return SharedWorkingMemory(store, working, policy)
