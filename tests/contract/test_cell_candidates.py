"""Facts found by meaning, backend by backend: embedded by tier work per model, reached by questions sharing no word."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from memstrata import Memory
from memstrata.embeddings.base import Vectors, normalize_rows
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.retrieval.cell_candidates import CellCandidatePolicy
from tests.schema import undo_spaces

COOKING = "What should I cook for dinner?"
UNRELATED = "Who won the football match yesterday?"
ALLERGY = "I moved to Lisbon in May and I'm allergic to peanuts"
FACTS = (
    ALLERGY,
    "My daughter Sara plays the violin",
    "I work as a nurse at the city hospital",
    "I love hiking in the mountains",
    "My favourite colour is green",
)
# Sixty turns that share the cooking question's words: they fill the excerpts, so the turn about
# the allergy is not among them and its fact is not left out as restating an excerpt.
DINNERS = tuple(f"Dinner on day {n} was late again, we cooked something quick and watched a film." for n in range(60))


class MeaningVectors(HashEmbedder):
    """The hash embedder on all but two directions, which stand for meaning it does not know.

    The fact "allergy: peanuts" lies on the first, and so does most of any question about
    cooking; a question about football lies on the second, which no stored text shares.
    """

    def __init__(self, model: str = "meaning-32") -> None:
        super().__init__(dimension=32)
        self._model = model

    @property
    def model_id(self) -> str:
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        hashed = super().embed_documents(texts)
        hashed[:, :2] = 0.0
        hashed[[i for i, text in enumerate(texts) if text == "allergy: peanuts"]] = _direction(0)
        return normalize_rows(hashed)

    def embed_query(self, text: str) -> Vectors:
        if "football" in text:
            return _direction(1)
        if "cook" in text:
            return normalize_rows((0.8 * _direction(0) + 0.6 * self.embed_documents([text])[0])[None])[0]
        return self.embed_documents([text])[0]


def _direction(axis: int) -> Vectors:
    return np.eye(1, 32, axis, dtype=np.float32)[0]


def _open(storage_url: str, home: Path, model: str = "meaning-32") -> Memory:
    return Memory(home, embedder=MeaningVectors(model), background=False, storage_url=storage_url)


@pytest.fixture
def cook(storage_url: str, tmp_path: Path) -> Iterator[Memory]:
    """Ana's memory: a few facts about her, among them an allergy, and sixty dinners."""
    with _open(storage_url, tmp_path / "home") as memory:
        memory.add([{"content": text} for text in FACTS], user_id="ana")
        memory.add([{"content": text} for text in DINNERS], user_id="ana")
        memory.flush()
        yield memory


def _facts(memory: Memory, question: str, **policy: int) -> list[str]:
    """The fact lines of ``question``'s block, with the fact policy changed as given for this one call."""
    memory.cell_policy = replace(CellCandidatePolicy(), **policy)
    try:
        context = memory.context(question, user_id="ana", token_budget=600)
    finally:
        memory.cell_policy = CellCandidatePolicy()
    return [item.text for item in context.items if item.kind == "cell"]


def _facts_found(memory: Memory, question: str) -> list[str]:
    """The facts among ``search``'s hits over turns and facts (deep enough to hold all of them)."""
    hits = memory.search(question, user_id="ana", tiers=["longterm"], limit=100)
    return [hit.content for hit in hits if hit.tier == "longterm"]


def _allergy_shown(memory: Memory, **policy: int) -> bool:
    return any("allergy: peanuts" in fact for fact in _facts(memory, COOKING, **policy))


def test_a_question_sharing_no_word_with_a_fact_reaches_it_by_meaning(cook: Memory) -> None:
    assert not _allergy_shown(cook, cells=0)  # by its words alone, the question finds no fact
    context = cook.context(COOKING, user_id="ana", token_budget=600)
    assert "- user · allergy: peanuts — I moved to Lisbon" in context.text
    allergy = next(turn.id for turn in cook.history(user_id="ana", limit=1000) if turn.content == ALLERGY)
    assert allergy not in [item.id for item in context.items if item.kind == "episode"]  # the fact brings it
    assert _facts_found(cook, COOKING) == [
        "user · allergy: peanuts — I moved to Lisbon in May and I'm allergic to peanuts"
    ]


def test_a_question_close_to_no_fact_adds_none(cook: Memory) -> None:
    assert _facts(cook, UNRELATED) == _facts(cook, UNRELATED, cells=0) == []
    assert _facts_found(cook, UNRELATED) == []


def test_facts_are_embedded_by_the_tier_work_once_per_model(cook: Memory, storage_url: str, tmp_path: Path) -> None:
    store = cook.parts.store
    current = len(cook.cells(user_id="ana"))
    assert current >= 5 and len(store.cell_vectors("ana", "meaning-32")) == current
    assert store.cells_without_vectors("ana", "meaning-32", 10) == []  # type: ignore[attr-defined]
    cook.close()
    # Another model's vectors are never compared with this one's, though their sizes match.
    with _open(storage_url, tmp_path / "home", model="meaning-32-b") as other:
        assert other.parts.store.cell_vectors("ana", "meaning-32-b") == []
        assert not _allergy_shown(other)
        other.add("Tomorrow I am off work", user_id="ana")  # the next tier job embeds them
        other.flush()
        assert len(other.parts.store.cell_vectors("ana", "meaning-32-b")) == len(other.cells(user_id="ana"))
        assert _allergy_shown(other)
    assert _vector_rows(storage_url, "meaning-32") == current  # the first model's stay, unused


def test_a_deleted_or_forgotten_fact_takes_its_vector_with_it(cook: Memory, storage_url: str) -> None:
    before = _vector_rows(storage_url)
    allergy = next(turn.id for turn in cook.history(user_id="ana", limit=1000) if turn.content == ALLERGY)
    cook.delete(allergy, user_id="ana")  # its two facts (allergy, location) go
    assert _vector_rows(storage_url) == before - 2
    assert not _allergy_shown(cook)
    cook.forget(user_id="ana")
    assert _vector_rows(storage_url) == 0


def test_a_store_made_before_fact_vectors_gets_them_at_the_users_next_job(storage_url: str, tmp_path: Path) -> None:
    with _open(storage_url, tmp_path / "home") as memory:
        memory.add([{"content": text} for text in (*FACTS, *DINNERS)], user_id="ana")
        memory.add("I live in Porto", user_id="bob")
        memory.flush()
    _as_before_fact_vectors(storage_url)
    with _open(storage_url, tmp_path / "home") as upgraded:
        assert _vector_rows(storage_url) == 0
        assert not _allergy_shown(upgraded)  # found by words only, as before
        upgraded.add("Tomorrow I am off work", user_id="ana")
        upgraded.flush()
        assert len(upgraded.parts.store.cell_vectors("ana", "meaning-32")) == len(upgraded.cells(user_id="ana"))
        assert _allergy_shown(upgraded)
        assert upgraded.parts.store.cell_vectors("bob", "meaning-32") == []  # bob has had no job since
        assert upgraded.reindex(facts=True) == 1  # ... until a reindex embeds every user's facts
        assert len(upgraded.parts.store.cell_vectors("bob", "meaning-32")) == 1
        assert upgraded.reindex(facts=True) == 0


def _as_before_fact_vectors(storage_url: str) -> None:
    """Take the store back to the schema before fact vectors (SQLite 14, PostgreSQL 17)."""
    if storage_url.startswith("sqlite:///"):
        with closing(sqlite3.connect(storage_url.removeprefix("sqlite:///"))) as connection, connection:
            connection.execute("DROP TABLE cell_vectors")
            undo_spaces(connection)
            connection.execute("DELETE FROM schema_migrations WHERE version >= 15")
        return
    import psycopg

    with psycopg.connect(storage_url) as connection:
        connection.execute("DROP TABLE cell_vectors")
        connection.execute("DELETE FROM schema_migrations WHERE version >= 18")


def _vector_rows(storage_url: str, model_id: str | None = None) -> int:
    """How many fact vectors the database holds, for any user (of one model, if given)."""
    where = "" if model_id is None else f" WHERE model_id = '{model_id}'"
    if storage_url.startswith("sqlite:///"):
        with closing(sqlite3.connect(storage_url.removeprefix("sqlite:///"))) as connection:
            return int(connection.execute(f"SELECT count(*) FROM cell_vectors{where}").fetchone()[0])
    import psycopg

    with psycopg.connect(storage_url) as connection:
        row = connection.execute(f"SELECT count(*) FROM cell_vectors{where}").fetchone()
        assert row is not None
        return int(row[0])


def test_a_fact_found_by_meaning_stays_a_fact_when_its_turn_is_shown_too(storage_url: str, tmp_path: Path) -> None:
    with _open(storage_url, tmp_path / "small") as memory:
        memory.add([{"content": text} for text in FACTS], user_id="ana")
        memory.flush()
        context = memory.context(COOKING, user_id="ana", token_budget=600)
        assert ALLERGY in context.text  # every turn fits, the allergy's among them
        assert "## Facts\n- user · allergy: peanuts\n" in context.text  # and it reads as a fact, without its sentence
