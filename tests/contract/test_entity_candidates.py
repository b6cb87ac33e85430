"""Entity candidates in ``context()``, backend by backend: names embedded by tier work, followed by kind questions."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memstrata import Memory
from memstrata.embeddings.base import Vectors
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.retrieval.entity_candidates import EntityCandidatePolicy

MODEL = "kind-vectors-32"
SPAIN = "We loved the paella in Spain last summer with the kids."
QUESTION = "What European countries has Maria been to?"


class KindVectors(HashEmbedder):
    """The hash embedder, except that the name "Spain" and any question about countries share one direction."""

    def __init__(self) -> None:
        super().__init__(dimension=32)
        self._country = np.eye(1, 32, 0, dtype=np.float32)[0]

    @property
    def model_id(self) -> str:
        return MODEL

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        hashed = super().embed_documents(texts)
        return np.stack([self._country if text == "Spain" else hashed[i] for i, text in enumerate(texts)])

    def embed_query(self, text: str) -> Vectors:
        return self._country if "countries" in text else super().embed_query(text)


@pytest.fixture
def travels(storage_url: str, tmp_path: Path) -> Iterator[Memory]:
    """Maria's memory: forty turns about the gym that share the question's words, one about Spain that does not."""
    with Memory(tmp_path / "home", embedder=KindVectors(), background=False, storage_url=storage_url) as memory:
        said = [f"Maria has been to the gym again, session {n} of the week with her trainer {n}." for n in range(40)]
        said[20] = SPAIN
        for n, text in enumerate(said):
            extra = f" Costco, Tuesday and Max{n} came up too." if n % 3 == 0 else ""
            memory.add(  # an hour apart: forty notes, not message bursts
                {"role": "user", "content": text + extra, "name": "Maria"},
                user_id="maria",
                session_id=f"s{n // 10}",
                timestamp=datetime(2025, 3, 1, tzinfo=UTC) + timedelta(hours=n),
            )
        memory.flush()
        yield memory


def _block(memory: Memory, question: str, **policy: int) -> str:
    memory.entity_policy = replace(EntityCandidatePolicy(), **policy)
    try:
        return memory.context(question, user_id="maria", token_budget=300).text
    finally:
        memory.entity_policy = EntityCandidatePolicy()


def test_a_question_asking_for_a_kind_of_thing_reaches_the_turn_naming_one(travels: Memory) -> None:
    assert "Spain" not in _block(travels, QUESTION, entities=0)  # the gym turns share its words and fill the block
    context = travels.context(QUESTION, user_id="maria", token_budget=300)
    spain = next(turn.id for turn in travels.history(user_id="maria") if turn.content == SPAIN)
    assert "Spain" in context.text and spain in context.turn_ids
    # The turn goes after the first excerpts, not before them.
    assert _block(travels, QUESTION, after=100) == _block(travels, QUESTION, entities=0)


def test_other_questions_and_search_are_unchanged(travels: Memory) -> None:
    for question in ("What did Maria do at the gym?", "Which country has Maria been to?"):
        assert _block(travels, question) == _block(travels, question, entities=0)
    spain = next(turn.id for turn in travels.history(user_id="maria") if turn.content == SPAIN)
    assert spain not in [hit.id for hit in travels.search(QUESTION, user_id="maria", limit=5)]


def test_entity_names_are_embedded_by_the_tier_work_and_forgotten_with_the_user(travels: Memory) -> None:
    store = travels.parts.store
    assert "Spain" in {name for _, name, _ in store.entity_vectors("maria", MODEL)}  # type: ignore[attr-defined]
    assert store.entities_without_vectors("maria", MODEL, 10) == []  # type: ignore[attr-defined]
    travels.forget(user_id="maria")
    assert store.entity_vectors("maria", MODEL) == []  # type: ignore[attr-defined]
