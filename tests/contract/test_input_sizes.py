"""No input size reaches a driver's bound on one statement's parameters: lists are bound in slices.

SQLite refuses a statement with more variables than its build allows (999 before 3.32,
32,766 after, 250,000 in some distributions); here each SQLite store allows only
``VARIABLE_LIMIT``, so every list longer than that must be sliced. PostgreSQL binds each
list as one array parameter and runs the same tests.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.errors import EmbeddingError
from memstrata.models import Consolidation, Role, Scope, Turn, Vectors
from memstrata.storage.base import TierStore
from memstrata.storage.sqlite.store import SQLiteStore

#: Above the most one sliced statement binds (two slices of 500 and a few more), far below any list here.
VARIABLE_LIMIT = 1_100
MANY = 1_500


def _bounded(store: TierStore) -> TierStore:
    """``store``, allowing SQLite statements only ``VARIABLE_LIMIT`` parameters (PostgreSQL as it is)."""
    if isinstance(store, SQLiteStore):
        store._connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, VARIABLE_LIMIT)
    return store


@pytest.fixture
def bounded_store(open_tier_store: Callable[[], TierStore]) -> TierStore:
    """A store of the backend under test with few parameters per statement."""
    return _bounded(open_tier_store())


@pytest.fixture
def open_bounded_memory(open_tier_store: Callable[[], TierStore], tmp_path: Path) -> Iterator[Callable[[str], Memory]]:
    """Opens Memories (in homes named by the caller) on bounded stores of the backend under test."""
    opened: list[Memory] = []

    def opener(home: str) -> Memory:
        memory = Memory(
            tmp_path / home,
            store=_bounded(open_tier_store()),
            embedder=HashEmbedder(),
            background=False,
            max_messages_per_add=MANY,
        )
        opened.append(memory)
        return memory

    yield opener
    for memory in opened:
        memory.close()


def test_the_sqlite_bound_is_in_force(bounded_store: TierStore) -> None:
    if not isinstance(bounded_store, SQLiteStore):
        pytest.skip("SQLite's bound on variables")
    statement = f"SELECT 1 WHERE 1 IN ({','.join('?' * (VARIABLE_LIMIT + 1))})"
    with pytest.raises(sqlite3.OperationalError, match="too many SQL variables"):
        bounded_store._connection.execute(statement, [1] * (VARIABLE_LIMIT + 1))


def test_one_add_of_more_exchanges_than_a_statement_binds_fills_the_working_set(
    open_bounded_memory: Callable[[str], Memory],
) -> None:
    memory = open_bounded_memory("one")
    messages = [{"role": "user", "content": f"note number {n}"} for n in range(MANY)]
    stored = memory.add(messages, user_id="ana", session_id="long")
    assert len(stored) == MANY
    assert len(memory.history(user_id="ana", limit=1000, offset=MANY - 10)) == 10
    memory.flush()
    assert memory.search("note number 1499", user_id="ana", mode="fulltext")[0].content == "note number 1499"
    assert memory.forget(user_id="ana").turns == MANY


def test_an_export_of_a_long_session_imports_again(
    open_bounded_memory: Callable[[str], Memory], tmp_path: Path
) -> None:
    memory = open_bounded_memory("home")
    memory.add(
        [{"role": "user" if n % 2 else "assistant", "content": f"line {n}"} for n in range(MANY)],
        user_id="ana",
        session_id="long",
    )
    memory.export(tmp_path / "long.jsonl")
    memory.forget(user_id="ana")
    report = memory.import_(tmp_path / "long.jsonl")
    assert (report.turns, report.skipped) == (MANY, 0)
    assert memory.import_(tmp_path / "long.jsonl").skipped == MANY


def _turns(store: TierStore, count: int, *, working_capacity: int | None = None) -> list[int]:
    moment = datetime(2024, 1, 1, tzinfo=UTC)
    turns = [
        Turn(id=f"t{n}", user_id="ana", session_id="long", role=Role.USER, content=f"turn {n}", created_at=moment)
        for n in range(count)
    ]
    return store.insert_turns(turns, None, "model", working_capacity=working_capacity)


def _consolidation(identifier: str, sources: int) -> Consolidation:
    return Consolidation(
        id=identifier,
        user_id="ana",
        summary="a long day",
        source_turn_ids=tuple(f"t{n}" for n in range(sources)),
        compression_ratio=0.5,
        entity_preservation=1.0,
        tes=0.5,
        created_at=datetime(2024, 1, 2, tzinfo=UTC),
    )


def test_storing_more_exchanges_than_a_statement_binds_moves_the_oldest_out_of_the_working_set(
    bounded_store: TierStore,
) -> None:
    seqs = _turns(bounded_store, MANY, working_capacity=2)
    assert bounded_store.working_seqs("ana", "long") == seqs[-2:]


def test_store_reads_and_writes_of_long_lists_are_sliced(bounded_store: TierStore) -> None:
    seqs = _turns(bounded_store, MANY)
    assert len(bounded_store.get_by_seqs(seqs, "ana")) == MANY
    # Many owners: a federation of memories, most of them without these turns.
    assert len(bounded_store.get_by_seqs(seqs, ["ana", *(f"someone-{n}" for n in range(MANY))])) == MANY
    assert bounded_store.get_by_seqs(seqs, [f"someone-{n}" for n in range(MANY)]) == {}
    assert len(bounded_store.get_by_ids([f"t{n}" for n in range(MANY)])) == MANY
    assert set(bounded_store.importance_of(seqs)) <= set(seqs)
    names = [f"Name{n}" for n in range(MANY)]
    assert bounded_store.entities("ana", names=names) == []
    assert bounded_store.neighbours("ana", names) == []
    assert bounded_store.entity_mention_seqs("ana", list(range(1, MANY + 1))) == {}
    assert bounded_store.add_consolidation(_consolidation("c1", MANY), seqs)
    assert not bounded_store.add_consolidation(_consolidation("c2", MANY), seqs[::-1])
    assert bounded_store.forget(Scope("ana")) == MANY


class _OutageEmbedder(HashEmbedder):
    """Embeds ``budget`` documents, then fails as an embedding service that went away would."""

    def __init__(self, budget: int) -> None:
        super().__init__()
        self.budget = budget

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """The hash vectors of ``texts`` while the budget lasts; EmbeddingError after."""
        self.budget -= len(texts)
        if self.budget < 0:
            raise EmbeddingError("the embedding service went away")
        return super().embed_documents(texts)


def test_an_import_is_written_in_batches_and_an_interrupted_one_completes_when_run_again(
    open_tier_store: Callable[[], TierStore], tmp_path: Path
) -> None:
    def opened(home: str, embedder: HashEmbedder, batch: int = 10) -> Memory:
        # One batch per 10 turns; no message bursts, so each batch embeds its 10 texts once.
        settings = {"background": False, "max_messages_per_add": batch, "join_bursts": False}
        return Memory(tmp_path / home, store=open_tier_store(), embedder=embedder, **settings)

    with opened("source", HashEmbedder(), batch=25) as source:
        source.add([{"content": f"note {n}"} for n in range(25)], user_id="ana", session_id="s")
        source.export(tmp_path / "notes.jsonl")
        source.forget(user_id="ana")
    with opened("interrupted", _OutageEmbedder(budget=15)) as interrupted:
        with pytest.raises(EmbeddingError):
            interrupted.import_(tmp_path / "notes.jsonl")
        # The first batch was committed before the second one failed.
        assert [turn.content for turn in interrupted.history(user_id="ana")] == [f"note {n}" for n in range(10)]
    with opened("again", HashEmbedder()) as again:
        report = again.import_(tmp_path / "notes.jsonl")
        assert (report.turns, report.skipped) == (15, 10)
        assert len(again.history(user_id="ana")) == 25
        assert again.import_(tmp_path / "notes.jsonl").skipped == 25
