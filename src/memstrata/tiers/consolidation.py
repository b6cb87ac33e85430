"""Consolidation ("sleep"): clusters of turns no sleep has looked at, each distilled into one summary."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Protocol

import numpy as np

from memstrata.embeddings.base import Embedder
from memstrata.extraction.entities import entity_names
from memstrata.ids import IdGenerator
from memstrata.models import Consolidation, Turn
from memstrata.policies.consolidation import dbscan, should_consolidate, token_efficiency
from memstrata.retrieval.fulltext import indexed_text
from memstrata.storage.roles import ConsolidationStore, TurnStore, VectorStore
from memstrata.tiers.policy import HierarchyPolicy
from memstrata.tiers.steps import MemorySteps, day_said

CONSOLIDATION_BATCH = 1000


class SleepStore(ConsolidationStore, TurnStore, VectorStore, Protocol):
    """What sleep reads and writes: what is not consolidated yet, those turns and their vectors, the summaries."""


def without_labels(text: str, speakers: Collection[str]) -> str:
    """``text`` less the "Name: " labels of ``speakers``' names, wherever one opens a line, a sentence or a word run."""
    names = sorted((re.escape(name) for name in speakers if name.strip()), key=len, reverse=True)
    if not names:
        return text
    return re.sub(rf"(?:(?<=^)|(?<=\s)|(?<=\]))(?:{'|'.join(names)}): ", "", text)


@dataclass(kw_only=True, eq=False)
class Sleep:
    """Consolidates a user's turns in bounded batches, oldest first, once enough have come."""

    store: SleepStore
    embedder: Embedder
    steps: MemorySteps
    ids: IdGenerator
    policy: HierarchyPolicy

    def due(self, user_id: str) -> bool:
        """Whether enough turns (or words) came since the user's last sleep for the next one.

        Counted from the newest turn that sleep looked at (stored, so every process agrees),
        not over every turn not consolidated: turns no cluster took would otherwise make
        every later batch of new turns sleep again.
        """
        pending, words = self.store.unconsolidated_size(user_id, after_seq=self.store.slept_through(user_id))
        return pending > 0 and should_consolidate(pending, words, self.policy.consolidation)

    def backlog(self, user_id: str, made: list[Consolidation] | None = None) -> list[Consolidation]:
        """Sleep batch after batch until every turn there was when it started has been looked at.

        Each summary is appended to ``made`` (a new list by default) as it is stored, so a caller
        whose sleep was cut short still knows what it stored.
        """
        made = [] if made is None else made
        pending, _ = self.store.unconsolidated_size(user_id, after_seq=self.store.slept_through(user_id))
        self.consolidate(user_id, made=made)
        for _ in range(max(0, pending - 1) // CONSOLIDATION_BATCH):
            self.consolidate(user_id, made=made)
        return made

    def consolidate(
        self, user_id: str, now: datetime | None = None, *, made: list[Consolidation] | None = None
    ) -> list[Consolidation]:
        """Cluster turns not yet consolidated and store one summary per cluster, with its TES.

        The summaries stored are returned, and appended to ``made`` as each is stored when given.
        """
        policy = self.policy.consolidation
        # Bounded batches keep one sleep short (DBSCAN is quadratic). A batch takes the turns
        # no sleep has looked at yet, oldest first, so a backlog is worked through in order.
        seqs = self.store.unconsolidated_turns(
            user_id, CONSOLIDATION_BATCH, after_seq=self.store.slept_through(user_id)
        )
        if not seqs:
            return []
        # Marked once the batch's clusters are stored: a sleep cut short (a crash, a storage
        # error) leaves the mark where it was, so its retry looks at the same turns again.
        looked_at = seqs[-1]
        vectors = self.store.vectors_for(self.embedder.model_id, seqs)
        seqs = [seq for seq in seqs if seq in vectors]
        if len(seqs) < policy.min_samples:
            self.store.mark_slept(user_id, looked_at)
            return []
        matrix = np.stack([vectors[seq] for seq in seqs])
        labels = dbscan(matrix, eps=policy.eps, min_samples=policy.min_samples)
        turns = self.store.get_by_seqs(seqs, user_id)
        stored: list[Consolidation] = []
        groups: list[list[int]] = []
        for label in sorted(set(labels) - {-1}):
            members = [seq for seq, value in zip(seqs, labels, strict=True) if value == label and seq in turns]
            size = self.policy.max_cluster_turns
            groups.extend(members[start : start + size] for start in range(0, len(members), size))
        for members in groups:
            if len(members) < policy.min_samples:
                continue
            texts = [indexed_text(turns[seq]) for seq in members]
            member_vectors = np.stack([vectors[seq] for seq in members])
            cluster = f"the cluster from turn {turns[members[0]].id}"
            said = [self._said(turns[seq]) for seq in members]
            summary = self.steps.consolidation_summary(texts, member_vectors, label=cluster, said=said)
            # Measured on what was said: the speaker labels the summary lends its sentences
            # would count as entities it keeps, by construction.
            speakers = {name for seq in members if (name := turns[seq].name)}
            efficiency = token_efficiency(
                [turns[seq].content for seq in members], without_labels(summary, speakers), entities=entity_names
            )
            consolidation = Consolidation(
                id=self.ids.new(),
                user_id=user_id,
                summary=summary,
                source_turn_ids=tuple(turns[seq].id for seq in members),
                compression_ratio=efficiency.compression_ratio,
                entity_preservation=efficiency.entity_preservation,
                tes=efficiency.score,
                created_at=now or datetime.now(UTC),
            )
            if self.store.add_consolidation(consolidation, members):
                stored.append(consolidation)
                if made is not None:
                    made.append(consolidation)
        self.store.mark_slept(user_id, looked_at)
        return stored

    def _said(self, turn: Turn) -> date:
        return day_said(turn, self.policy.timezone)
