"""Every knob of the memory hierarchy, with named defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, tzinfo

from memstrata.policies.consolidation import ConsolidationPolicy
from memstrata.policies.heat import HeatPolicy
from memstrata.policies.importance import ImportanceWeights

#: Filing a fact or an exchange is read, then written; a write that lost a race to another worker is redone.
FILING_ATTEMPTS = 5
FILING_PAUSE_SECONDS = 0.05  # at most this many seconds times the attempt number between two


@dataclass(kw_only=True, frozen=True, slots=True)
class HierarchyPolicy:
    """Every knob of the hierarchy, with named defaults."""

    working_capacity: int = 10
    #: Cosines at which an exchange joins an earlier segment, and stays in the current one;
    #: None: set for the embedder (:meth:`TopicThresholds.calibrated`).
    segment_similarity: float | None = None
    segment_continue_similarity: float | None = None
    heat: HeatPolicy = field(default_factory=HeatPolicy)
    consolidation: ConsolidationPolicy = field(default_factory=ConsolidationPolicy)
    importance: ImportanceWeights = field(default_factory=ImportanceWeights)
    # DBSCAN chains dense sentence embeddings into one cluster per conversation (measured on
    # LoCoMo: one cluster of 419 turns, TES 0.26), so big clusters are cut into runs of
    # consecutive turns, whose topics are local in time.
    max_cluster_turns: int = 20
    # Shorter than ``flush()``'s default 60 s wait, so a job a killed process left leased runs
    # again within it; renewed every third of it while it runs.
    job_lease_seconds: float = 45.0
    max_attempts: int = 3
    #: The zone in which a turn's day is read when a summary resolves its relative dates.
    timezone: tzinfo = UTC
