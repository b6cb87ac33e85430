"""The collaborators a Memory is built from, opened once and closed together."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from memstrata.config import Settings
from memstrata.embeddings import load_embedder
from memstrata.embeddings.base import Embedder
from memstrata.errors import ConfigError
from memstrata.ids import IdGenerator
from memstrata.llms import load_llm
from memstrata.llms.base import LLM
from memstrata.policies.consolidation import ConsolidationPolicy
from memstrata.policies.heat import HeatPolicy
from memstrata.retrieval.context import ContextBuilder
from memstrata.retrieval.pipeline import Pipeline
from memstrata.retrieval.vectors import VectorIndex
from memstrata.storage import open_store, open_working_set
from memstrata.storage.base import Job, ServerSideVectors, TierStore
from memstrata.tiers.episodic import Episodic
from memstrata.tiers.hierarchy import Hierarchy, HierarchyPolicy
from memstrata.tiers.visits import VisitRecorder
from memstrata.tiers.worker import Activity, Worker, retry_delay
from memstrata.tiers.working import SharedWorkingMemory, WorkingPolicy


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
    contexts: ContextBuilder


def open_parts(settings: Settings, *, store: TierStore | None, embedder: Embedder | None, llm: LLM | None) -> Parts:
    """Open what is not given (embedder, store, LLM), then build the rest over them.

    Anything opened here is closed again if a later step fails. Raises ConfigError for
    settings that do not fit together, and whatever opening an adapter raises.
    """
    embedder = embedder or load_embedder(
        settings.embedder, threads=settings.embedding_threads, cache_dir=settings.data_dir, settings=settings
    )
    opened = store or open_store(settings.resolved_storage_url, busy_timeout_seconds=settings.busy_timeout_seconds)
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
        return _build(settings, opened, embedder, model, closers)
    except BaseException:
        # Nothing half-open stays behind: what was opened here is closed again.
        for close in reversed(closers):
            close()
        raise


def _build(
    settings: Settings, store: TierStore, embedder: Embedder, llm: LLM, closers: list[Callable[[], None]]
) -> Parts:
    """The collaborators over opened adapters; each that must be closed is added to ``closers``."""
    index = VectorIndex(
        embedder.dimension, neighbour_weights=settings.neighbour_weights, max_rows=settings.vector_cache_rows
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
        visits=VisitRecorder(store=store, enabled=settings.record_visits, wake=wake),
        pipeline=pipeline,
        contexts=contexts,
    )


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
