"""The memory hierarchy: one object per tier, and the queued jobs dispatched to them.

Each tier is its own module: ``longterm`` (importance, facts, profile), ``graph``
(entities), ``procedural`` (patterns), ``midterm`` (segments, heat, eviction, promotion)
and ``consolidation`` (sleep). :class:`Hierarchy` builds them over one store, embedder and
set of steps, and runs each job kind with the tier it belongs to.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from memstrata.embeddings.base import Embedder
from memstrata.errors import DeletedMeanwhile
from memstrata.ids import IdGenerator
from memstrata.llms.base import LLM
from memstrata.models import Consolidation, Role
from memstrata.policies.topics import TopicThresholds
from memstrata.storage.base import Job, TierStore
from memstrata.tiers.consolidation import Sleep
from memstrata.tiers.graph import Graph
from memstrata.tiers.longterm import CELL_VECTORS_PER_JOB, LongTerm
from memstrata.tiers.midterm import MidTerm
from memstrata.tiers.policy import HierarchyPolicy
from memstrata.tiers.procedural import Procedural
from memstrata.tiers.steps import MemorySteps

__all__ = ["Hierarchy", "HierarchyPolicy"]

T = TypeVar("T")
log = logging.getLogger("memstrata.tiers")
#: How often one job's step runs while turns keep being deleted under it (each run sees fewer).
DELETED_MEANWHILE_RUNS = 3


class Hierarchy:
    """Runs the background jobs that derive every tier from the episodic turns, one job at a time."""

    def __init__(
        self, store: TierStore, embedder: Embedder, llm: LLM, policy: HierarchyPolicy, ids: IdGenerator
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._ids = ids
        self.steps = MemorySteps(llm, embedder, policy.consolidation)
        self.longterm = LongTerm(store=store, embedder=embedder, steps=self.steps, ids=ids, weights=policy.importance)
        self.graph = Graph(store, embedder)
        self.procedural = Procedural(store)
        self.midterm = MidTerm(store=store, embedder=embedder, steps=self.steps, ids=ids, policy=policy)
        self.sleep = Sleep(store=store, embedder=embedder, steps=self.steps, ids=ids, policy=policy)
        self.policy = policy
        self._lock = threading.Lock()  # one job at a time touches the tiers of this process
        #: Each job kind and the tier step that runs it, given the job and the time the run started.
        self._handlers: dict[str, Callable[[Job, datetime], object]] = {
            "process": lambda job, now: self.process(job.user_id, _seqs(job.payload.get("seqs", []))),
            "midterm": lambda job, now: self.midterm.file(job.user_id, _seqs(job.payload.get("seqs", [])), now),
            "consolidate": lambda job, now: self.sleep.consolidate(job.user_id, now),
            "visit": lambda job, now: self.midterm.visit(
                job.id, job.user_id, [_seqs(searched) for searched in job.payload.get("searches", [])], now
            ),
        }

    @property
    def policy(self) -> HierarchyPolicy:
        """Every knob of the hierarchy; setting it reaches every tier."""
        return self._policy

    @policy.setter
    def policy(self, policy: HierarchyPolicy) -> None:
        self._policy = policy
        self.longterm.weights = policy.importance
        self.midterm.policy = policy
        self.sleep.policy = policy

    def topic_thresholds(self) -> TopicThresholds:
        """The cosines that file exchanges into segments: as configured, the rest set for the embedder."""
        return self.midterm.thresholds()

    def run(self, job: Job) -> None:
        """Do one queued job; ValueError for a kind no tier handles.

        Turns deleted while the job runs are skipped: a write that refers to one stores nothing,
        and the job's step runs again (every step is safe to repeat), now without them.
        """
        handler = self._handlers.get(job.kind)
        if handler is None:
            raise ValueError(f"unknown job kind {job.kind!r}")
        with self._lock:
            _sparing_deleted(f"job {job.id} ({job.kind})", lambda: handler(job, datetime.now(UTC)), retried_later=True)

    def process(self, user_id: str, seqs: Sequence[int]) -> None:
        """Importance, cells and profile, entities and patterns for newly stored turns.

        Safe to run again on the same turns (a retried job): nothing is stored or counted twice.
        """
        turns = self._store.get_by_seqs(list(seqs), user_id)
        vectors = self._store.vectors_for(self._embedder.model_id, list(turns))
        scores: dict[int, float] = {}
        for seq in sorted(turns):
            turn = turns[seq]
            entities = self.graph.observe(user_id, seq, turn)
            if turn.importance is None:
                scores[seq] = self.longterm.importance(user_id, seq, turn, entities, vectors.get(seq))
            if turn.role is Role.USER:
                self.longterm.remember(user_id, seq, turn)
                self.procedural.observe(user_id, seq, turn)
        if scores:
            self._store.set_importance(scores)
        self.graph.embed_names(user_id)
        self.longterm.embed_cells(user_id)
        if self.sleep.due(user_id):  # counted in SQL: this runs after every batch of new turns
            self.sleep.consolidate(user_id)

    def embed_cells(self, user_id: str, limit: int = CELL_VECTORS_PER_JOB) -> int:
        """Embed at most ``limit`` of the user's current facts that have no vector yet; how many."""
        return self.longterm.embed_cells(user_id, limit)

    def to_midterm(self, user_id: str, seqs: Sequence[int]) -> None:
        """File exchanges that left working memory into the closest topic segment, or a new one."""
        self.midterm.file(user_id, seqs)

    def consolidation_due(self, user_id: str) -> bool:
        """Whether enough turns (or words) came since the user's last sleep for the next one."""
        return self.sleep.due(user_id)

    def consolidate(self, user_id: str) -> list[Consolidation]:
        """Cluster turns not yet consolidated and store one summary per cluster, with its TES."""
        return self.sleep.consolidate(user_id)

    def consolidate_backlog(self, user_id: str) -> list[Consolidation]:
        """Sleep batch after batch until every turn there was when it started has been looked at.

        Under the lock the jobs run under: a job's sleep and this one never look at the same
        turns at once (each would summarise them, an LLM call each), as the mark moves only
        once a batch is stored.
        """
        made: list[Consolidation] = []
        with self._lock:
            # A run that turns were deleted under keeps what it stored before: the next run adds to it.
            _sparing_deleted("a sleep asked for", lambda: self.sleep.backlog(user_id, made))
        return made


def _sparing_deleted(what: str, step: Callable[[], T], *, retried_later: bool = False) -> T | None:
    """Run ``step``, and again while turns it read are deleted under it (each run skips those gone).

    Not a failure: the user deleted what the step was deriving from. One INFO line says so, no
    traceback. When turns were deleted under every run, a job's ``DeletedMeanwhile`` is raised
    (``retried_later``: the worker runs the job again after its backoff, so the turns that
    remain are still processed); otherwise None.
    """
    for attempt in range(1, DELETED_MEANWHILE_RUNS + 1):
        try:
            return step()
        except DeletedMeanwhile:
            if attempt == DELETED_MEANWHILE_RUNS and retried_later:
                log.info("%s: turns were deleted under each of its runs; it runs again later", what)
                raise
            again = attempt < DELETED_MEANWHILE_RUNS
            then = "running it again without them" if again else "the rest is left to the next sleep"
            log.info("%s: turns were deleted while it ran; %s", what, then)
    return None


def _seqs(values: Sequence[Any]) -> list[int]:
    return [int(value) for value in values]
