"""The collaborators a Memory is built from, opened once and closed together."""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

from memstrata.config import Settings, load_settings
from memstrata.embeddings import load_embedder
from memstrata.embeddings.base import Embedder
from memstrata.errors import ConfigError, StorageError
from memstrata.facade.chat import ChatParts, ChatResponder
from memstrata.facade.retention import Retention, RetentionKeeper
from memstrata.facade.spaces import Spaces
from memstrata.facade.tiers import Tiers
from memstrata.facade.transfer import Transfer
from memstrata.ids import IdGenerator
from memstrata.llms import load_llm
from memstrata.llms.base import LLM
from memstrata.models import Compaction, Context, Scope, Turn
from memstrata.policies.consolidation import ConsolidationPolicy
from memstrata.policies.heat import HeatPolicy
from memstrata.retrieval.context import ContextBuilder, ContextRequest
from memstrata.retrieval.federated import Federation
from memstrata.retrieval.pipeline import Pipeline
from memstrata.retrieval.vectors import VectorIndex
from memstrata.storage import open_store, open_working_set
from memstrata.storage.base import Job, ServerSideVectors, TierStore
from memstrata.tiers.episodic import Episodic
from memstrata.tiers.hierarchy import Hierarchy, HierarchyPolicy
from memstrata.tiers.visits import VisitRecorder
from memstrata.tiers.worker import Activity, Worker, retry_delay
from memstrata.tiers.working import SharedWorkingMemory, WorkingPolicy
from memstrata.validation import parse_messages
from memstrata.version import __version__

T = TypeVar("T")
_DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


@dataclass(frozen=True, kw_only=True, slots=True)
class Parts:
    """Everything a Memory holds: the adapters, the tiers, the retrieval pipeline and the background worker.

    For tools and tests that need to look below the public API; calls on these skip its checks.
    """

    settings: Settings
    store: TierStore
    embedder: Embedder
    llm: LLM
    index: VectorIndex
    ids: IdGenerator
    #: Held by foreground calls; background tier work waits for it.
    activity: Activity
    #: Working memory in Redis (``working_url``), or None when the store keeps it.
    shared_working: SharedWorkingMemory | None
    episodic: Episodic
    hierarchy: Hierarchy
    worker: Worker
    visits: VisitRecorder
    pipeline: Pipeline
    #: The pipeline over several memories at once (federated search).
    federation: Federation
    contexts: ContextBuilder
    #: Flush, inspect, prune.
    tiers: Tiers
    #: Export and import.
    transfer: Transfer
    chat: ChatResponder
    #: Shared spaces: records, grants, trust, shares.
    spaces: Spaces
    #: Whether the LLM was built here (and is closed with the rest); one passed in is the caller's.
    owns_llm: bool
    #: Set once ``close`` starts; every public call checks it first.
    closing: threading.Event
    #: The ``retention`` setting over every user and space (``Memory.apply_retention``).
    retention: Retention
    #: Applies it in the background when there are rules and a background worker; started with the worker.
    retention_keeper: RetentionKeeper | None = None

    def require_open(self) -> None:
        """StorageError once the Memory is closed."""
        _require_open(self.closing)

    def close(self) -> None:
        """Queue pending visits, stop the worker, then release the index, Redis, the store and an owned LLM."""
        if self.closing.is_set():
            return
        self.visits.queue()
        if self.retention_keeper is not None:
            self.retention_keeper.stop()
        self.worker.stop()
        self.closing.set()
        self.pipeline.close()
        self.index.drop()
        if self.shared_working is not None:
            self.shared_working.close()
        self.store.close()
        closer = getattr(self.llm, "close", None)
        if self.owns_llm and callable(closer):
            closer()

    def info(self) -> dict[str, Any]:
        """Where data lives, what is stored and its size on disk, the model, versions, this process's vector cache."""
        return {
            "version": __version__,
            "data_dir": str(self.settings.data_dir),
            "storage": self.store.location,
            "embedder": self.embedder.model_id,
            "dimension": self.embedder.dimension,
            "counts": self.store.counts(),
            "size_bytes": self.store.size_bytes(),
            "vector_cache": self.index.stats(),
        }

    def vacuum(self) -> Compaction:
        """Rewrite the store so deleted memories leave its files; its size before and after."""
        started = time.perf_counter()
        before = self.store.size_bytes()
        complete = self.store.vacuum()
        after = self.store.size_bytes()
        return Compaction(
            bytes_before=before, bytes_after=after, seconds=round(time.perf_counter() - started, 3), complete=complete
        )

    def build_context(self, request: ContextRequest) -> Context:
        """The block for a checked request, as foreground work; the visits of its excerpts are noted."""
        return _foreground_context(request, self.activity, self.closing, self.contexts, self.visits)


class Forwarded(Generic[T]):
    """A Memory attribute kept on one of its parts (``Memory.rerank_policy`` is ``memory.parts.pipeline``'s)."""

    def __init__(self, part: str, doc: str) -> None:
        self._part = part
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, memory: None, owner: type) -> Forwarded[T]: ...
    @overload
    def __get__(self, memory: object, owner: type) -> T: ...
    def __get__(self, memory: object, owner: type) -> T | Forwarded[T]:
        if memory is None:
            return self
        value: T = getattr(getattr(_parts_of(memory), self._part), self._name)
        return value

    def __set__(self, memory: object, value: T) -> None:
        setattr(getattr(_parts_of(memory), self._part), self._name, value)


def _parts_of(memory: object) -> Parts:
    parts: Parts = getattr(memory, "parts")  # noqa: B009  # the facade's own attribute, named once here
    return parts


def settings_for(path: str | os.PathLike[str] | None, settings: Settings | None, overrides: dict[str, Any]) -> Settings:
    """The settings a Memory opens with: a data directory or database file ``path``, ``settings``, ``overrides``."""
    if path is not None:
        location = Path(path).expanduser()
        if location.suffix in _DATABASE_SUFFIXES or location.is_file():
            overrides.setdefault("home", location.parent)
            overrides.setdefault("storage_url", f"sqlite:///{location.resolve()}")
        else:
            overrides.setdefault("home", location)
    if settings is None:
        return load_settings(**overrides)
    if overrides:
        return load_settings(**{**settings.model_dump(exclude_unset=True), **overrides})
    return settings


def open_parts(settings: Settings, *, store: TierStore | None, embedder: Embedder | None, llm: LLM | None) -> Parts:
    """Open what is not given (embedder, store, LLM), then build the rest over them.

    Anything opened here is closed again if a later step fails. Raises ConfigError for
    settings that do not fit together, and whatever opening an adapter raises.
    """
    embedder = embedder or load_embedder(
        settings.embedder, threads=settings.embedding_threads, cache_dir=settings.data_dir, settings=settings
    )
    opened = store or open_store(
        settings.resolved_storage_url,
        busy_timeout_seconds=settings.busy_timeout_seconds,
        encryption_key=settings.encryption_key,
    )
    if settings.vector_search == "server" and not isinstance(opened, ServerSideVectors):
        opened.close()
        raise ConfigError(
            f"vector_search = 'server' needs a store with its own vector index (PostgreSQL + pgvector), "
            f"not {opened.location}; use vector_search = 'memory'"
        )
    closers: list[Callable[[], None]] = [opened.close] if store is None else []
    try:
        model = llm or load_llm(settings)
        close = getattr(model, "close", None)
        if llm is None and callable(close):  # a model client built here; one passed in is the caller's
            closers.append(close)
        return _build(settings, opened, embedder, model, closers, owns_llm=llm is None)
    except BaseException:
        # Nothing half-open stays behind: what was opened here is closed again.
        for close in reversed(closers):
            close()
        raise


def _build(
    settings: Settings,
    store: TierStore,
    embedder: Embedder,
    llm: LLM,
    closers: list[Callable[[], None]],
    *,
    owns_llm: bool,
) -> Parts:
    """The collaborators over opened adapters; each that must be closed is added to ``closers``."""
    index = VectorIndex(
        embedder.dimension,
        neighbour_weights=settings.neighbour_weights,
        max_rows=settings.vector_cache_rows,
        approximate_from=settings.vector_approximate_from or None,  # 0: always exact
    )
    ids = IdGenerator()
    activity = Activity()
    shared_working = _shared_working(settings, store)
    if shared_working is not None:
        closers.append(shared_working.close)
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
    hierarchy = Hierarchy(store, embedder, llm, policy, ids)
    worker = _worker(store, hierarchy, shared_working, activity)

    def wake() -> None:
        """Nudge the background worker (when there is one) about new jobs."""
        if settings.background:
            worker.wake()

    episodic = Episodic(
        store=store,
        embedder=embedder,
        index=index,
        settings=settings,
        shared_working=shared_working,
        ids=ids,
        wake=wake,
    )
    # Turns without a vector from this model (a model change, an import without vectors) become searchable.
    episodic.reindex(None, fulltext=False)
    pipeline = Pipeline(store=store, embedder=embedder, index=index, settings=settings)
    closers.append(pipeline.close)
    contexts = ContextBuilder(
        pipeline=pipeline,
        store=store,
        model_id=embedder.model_id,
        settings=settings,
        procedural=hierarchy.procedural,
        graph=hierarchy.graph,
        working_seqs=episodic.working_seqs,
    )
    visits = VisitRecorder(store=store, enabled=settings.record_visits, wake=wake)
    closing = threading.Event()
    chat = ChatResponder(
        ChatParts(
            store=store,
            llm=llm,
            settings=settings,
            context=lambda request: _foreground_context(request, activity, closing, contexts, visits),
            remember=lambda messages, scope: _remember(
                messages,
                scope,
                activity=activity,
                closing=closing,
                episodic=episodic,
                max_bytes=settings.max_text_bytes,
            ),
            working_seqs=episodic.working_seqs,
            consolidation_due=hierarchy.consolidation_due,
        )
    )
    tiers = Tiers(store=store, hierarchy=hierarchy, worker=worker, visits=visits, episodic=episodic, settings=settings)
    retention = Retention(rules=settings.retention, owners=lambda: store.user_ids(""), prune=tiers.prune)
    keeper = (
        RetentionKeeper(retention, settings.retention_interval_seconds, activity=activity)
        if settings.retention and settings.background
        else None
    )
    return Parts(
        settings=settings,
        store=store,
        embedder=embedder,
        llm=llm,
        index=index,
        ids=ids,
        activity=activity,
        shared_working=shared_working,
        episodic=episodic,
        hierarchy=hierarchy,
        worker=worker,
        visits=visits,
        pipeline=pipeline,
        federation=Federation(pipeline=pipeline, store=store, settings=settings),
        contexts=contexts,
        tiers=tiers,
        transfer=Transfer(store=store, embedder=embedder, episodic=episodic, settings=settings),
        chat=chat,
        spaces=Spaces(store=store, episodic=episodic, visits=visits),
        owns_llm=owns_llm,
        closing=closing,
        retention=retention,
        retention_keeper=keeper,
    )


def _require_open(closing: threading.Event) -> None:
    if closing.is_set():
        raise StorageError("this Memory is closed; open a new one")


def _foreground_context(
    request: ContextRequest,
    activity: Activity,
    closing: threading.Event,
    contexts: ContextBuilder,
    visits: VisitRecorder,
) -> Context:
    with activity:
        _require_open(closing)
        built, shown = contexts.build(request)
        visits.note_hits(request.scope.user_id, shown)
        return built


def _remember(
    messages: Sequence[dict[str, str]],
    scope: Scope,
    *,
    activity: Activity,
    closing: threading.Event,
    episodic: Episodic,
    max_bytes: int,
) -> list[Turn]:
    """Store ``add``-style messages said now in ``scope``, as foreground work."""
    with activity:
        _require_open(closing)
        parsed = parse_messages(list(messages), max_bytes=max_bytes)
        return episodic.add(parsed, scope, moment=datetime.now(UTC), metadata={}, importance=None)


def _worker(
    store: TierStore, hierarchy: Hierarchy, shared_working: SharedWorkingMemory | None, activity: Activity
) -> Worker:
    """The background worker: claims the store's jobs (through Redis when it keeps the working set) and runs them."""
    policy = hierarchy.policy
    claim: Callable[[], Job | None] = functools.partial(store.claim_job, policy.job_lease_seconds, policy.max_attempts)

    def claim_users_job(user_id: str) -> Job | None:
        return store.claim_job(policy.job_lease_seconds, policy.max_attempts, user_id=user_id)

    claim_for: Callable[[str], Job | None] = claim_users_job
    run: Callable[[Job], None] = hierarchy.run
    if shared_working is not None:
        claim, run = shared_working.claimer(claim), shared_working.runner(run)
        claim_for = shared_working.user_claimer(claim_for)
    return Worker(
        claim,
        run,
        lambda job: store.finish_job(job.id, attempt=job.attempts),
        lambda job, error, retry: store.fail_job(
            job.id, error, retry=retry, attempt=job.attempts, retry_after=retry_delay(job.attempts)
        ),
        max_attempts=policy.max_attempts,
        activity=activity,
        renew=lambda job: store.renew_job(job.id, attempt=job.attempts, lease_seconds=policy.job_lease_seconds),
        renew_every=policy.job_lease_seconds / 3,
        claim_for=claim_for,
    )


def _shared_working(settings: Settings, store: TierStore) -> SharedWorkingMemory | None:
    """Working memory in Redis when ``working_url`` is set; ``None`` keeps it in the store's own transaction."""
    if settings.working_url is None:
        return None
    working = open_working_set(settings.working_url)
    policy = WorkingPolicy(capacity=settings.working_capacity, idle_seconds=settings.working_ttl_seconds)
    return SharedWorkingMemory(store, working, policy)
