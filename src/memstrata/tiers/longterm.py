"""Long-term memory: each new turn's importance, its facts (cells) and the profile, and the facts' vectors."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from memstrata.embeddings.base import Embedder, Vectors
from memstrata.errors import StorageError
from memstrata.extraction.cells import ExtractedCell
from memstrata.ids import IdGenerator
from memstrata.models import Cell, Turn, whose
from memstrata.policies.importance import ImportanceWeights, TurnFeatures, importance
from memstrata.storage.roles import KnowledgeStore, SearchStore, TurnSignals
from memstrata.storage.text import cell_gist
from memstrata.tiers.policy import FILING_ATTEMPTS, FILING_PAUSE_SECONDS
from memstrata.tiers.steps import MemorySteps

NOVELTY_WINDOW = 50
CELL_VECTORS_PER_JOB = 256  # facts embedded in one job at most, newest first
SPEAKERS_READ = 200  # speaker names read to leave out of the facts' embedded text, as search does of a query
KNOWN_ATTRIBUTES_SCANNED = 200  # recent current cells whose attributes the LLM extractor is shown


class LongTermStore(KnowledgeStore, TurnSignals, SearchStore, Protocol):
    """What long-term memory reads and writes: facts and the profile, turn signals, the speakers."""


@dataclass(kw_only=True, eq=False)
class LongTerm:
    """Scores, remembers and embeds what each new turn says for good."""

    store: LongTermStore
    embedder: Embedder
    steps: MemorySteps
    ids: IdGenerator
    weights: ImportanceWeights
    #: Each user's running importance, so a score reads against the user's recent turns.
    _running_importance: dict[str, float] = field(default_factory=dict, init=False)

    def importance(self, user_id: str, seq: int, turn: Turn, entity_count: int, vector: Vectors | None) -> float:
        """How much ``turn`` matters, from its words, entities and how new it is among the user's recent turns."""
        novelty = 1.0
        if vector is not None:
            recent = self.store.recent_vectors(self.embedder.model_id, user_id, seq, NOVELTY_WINDOW)
            if recent:
                matrix = np.frombuffer(b"".join(recent), dtype=np.float32).reshape(len(recent), -1)
                novelty = 1.0 - float(np.max(matrix @ vector))
        features = TurnFeatures(
            text=turn.content,
            role=turn.role.value,
            pinned=bool(turn.metadata.get("pinned", False)),
            entity_count=entity_count,
            novelty=novelty,
        )
        score, running = importance(features, weights=self.weights, running=self._running_importance.get(user_id))
        self._running_importance[user_id] = running
        return score

    def remember(self, user_id: str, seq: int, turn: Turn) -> None:
        """Store the facts ``turn`` states, each in its slot, and update the profile.

        Raises StorageError when other workers keep changing a fact's slot meanwhile (the job is retried).
        """
        known = self._known_attributes(user_id) if self.steps.uses_llm else []
        extracted = self.steps.cells(turn, known)
        for item in extracted:
            for attempt in range(FILING_ATTEMPTS):
                if attempt:  # two workers that keep colliding drift apart
                    time.sleep(random.uniform(0, FILING_PAUSE_SECONDS * attempt))
                if self._remember_cell(user_id, seq, turn, item):
                    break
            else:
                raise StorageError(
                    f"a fact of {whose(user_id)} could not be stored: other workers kept changing its"
                    f" {item.subject} {item.attribute!r} meanwhile; the job is tried again"
                )
        current_profile = self.store.profile(user_id) if self.steps.uses_llm else {}
        updates = self.steps.profile(turn, extracted, current_profile)
        if updates:
            self.store.set_profile(user_id, updates, seq, turn.created_at)

    def embed_cells(self, user_id: str, limit: int = CELL_VECTORS_PER_JOB) -> int:
        """Embed at most ``limit`` of the user's current facts that have no vector of this embedder yet; how many.

        The newest first, each as ``cell_gist`` reads it. Each job does it after storing its
        facts, so a store from before fact vectors (or one whose embedder changed) catches up
        over the user's next jobs. A fact deleted meanwhile is skipped when the vectors are saved.
        """
        model = self.embedder.model_id
        missing = self.store.cells_without_vectors(user_id, model, limit)
        if not missing:
            return 0
        speakers = self.store.speakers(user_id, SPEAKERS_READ)
        vectors = self.embedder.embed_documents([cell_gist(cell, speakers) for cell in missing])
        self.store.save_cell_vectors(model, {cell.id: vectors[i] for i, cell in enumerate(missing)})
        return len(missing)

    def _remember_cell(self, user_id: str, seq: int, turn: Turn, item: ExtractedCell) -> bool:
        """Store one extracted cell where it belongs; False, storing nothing, if its slot changed meanwhile.

        Another worker storing or ending a value of the same subject and attribute between
        the read and the write would otherwise leave two current values of a single-valued
        fact, the same value twice, or two late values whose validities overlap; the write
        checks the slot is still as read.
        """
        # Every cell of the slot: multi-valued attributes carry their object ("likes:hiking"),
        # so a slot holds the history of one value, not a list that grows without end.
        slot = self.store.cells(
            user_id, subject=item.subject, attribute=item.attribute, include_superseded=True, limit=None
        )
        current = [c for c in slot if c.is_current]
        same = [cell for cell in current if cell.value.casefold() == item.value.casefold()]
        if same:
            if same[0].source_turn_id == turn.id:
                return True  # this turn's own fact (a retried job)
            # Said again: nothing new to remember, but this turn is noted, so the fact outlives the
            # deletion of the turn that said it first. False when that fact went meanwhile: decide again.
            return self.store.restate_cell(user_id, same[0].id, seq, item.value, _sentence(item))
        if any(c.source_turn_id == turn.id and c.value.casefold() == item.value.casefold() for c in slot):
            return True  # stored when this turn was processed before (a retried job), superseded since
        seen = {c.id: c.is_current for c in slot}
        cell = Cell(
            id=self.ids.new(),
            user_id=user_id,
            kind=item.kind.value,
            subject=item.subject,
            attribute=item.attribute,
            value=item.value,
            content=_sentence(item),
            salience=item.salience,
            valid_from=turn.created_at,
            source_turn_id=turn.id,
        )
        # A cell from a turn processed late never retires a newer one; of a single value,
        # it is history at once, replaced by the value said next.
        candidates = [c for c in current if c.valid_from <= turn.created_at]
        newer = [c for c in slot if c.valid_from > turn.created_at]
        if item.is_single_valued and any(c.is_current for c in newer):
            following = min(newer, key=lambda c: (c.valid_from, c.id))
            cell = replace(cell, valid_to=following.valid_from, superseded_by=following.id)
            # The value before it now ends where it begins, so their validities never overlap.
            before = [c.id for c in slot if c.superseded_by == following.id and c.valid_from < cell.valid_from]
            stored = self.store.add_cell(cell, seq, single_valued=True, supersede=before, seen_slot=seen)
        else:
            older = self.steps.superseded(cell, candidates, is_single_valued=item.is_single_valued)
            stored = self.store.add_cell(
                cell, seq, single_valued=item.is_single_valued, supersede=older, seen_slot=seen
            )
        return stored is not False  # a store written before the check returns None: it stored the cell

    def _known_attributes(self, user_id: str) -> list[str]:
        """Attributes of the user's recent current cells, so the LLM extractor reuses their keys."""
        cells = self.store.cells(user_id, limit=KNOWN_ATTRIBUTES_SCANNED)
        return list(dict.fromkeys(cell.attribute for cell in cells))


def _sentence(item: ExtractedCell) -> str:
    """A cell's searchable sentence: the LLM's scene label (which has no column of its own) leads it."""
    return f"{item.scene}: {item.text}" if item.scene else item.text
