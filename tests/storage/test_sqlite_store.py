"""The SQLite store: migrations, pragmas, FTS sync, cascades, events and error mapping."""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memstrata import ConfigError, IdConflict, Role, SchemaTooNew, Scope, SearchFilters, StorageError, Turn
from memstrata.models import Cell
from memstrata.storage import open_store
from memstrata.storage.sqlite import queue, retrieval
from memstrata.storage.sqlite.migrations import LATEST_VERSION, MIGRATIONS
from memstrata.storage.sqlite.retrieval import _SPEAKERS as SPEAKERS_QUERY
from memstrata.storage.sqlite.store import SQLiteStore, open_sqlite
from tests.schema import undo_spaces

MODEL = "test-model"
T0 = datetime(2024, 1, 1, tzinfo=UTC)
DIM = 4


def _turn(turn_id: str, content: str, user_id: str = "ana", session_id: str | None = None) -> Turn:
    return Turn(
        id=turn_id,
        user_id=user_id,
        role=Role.USER,
        content=content,
        created_at=datetime(2024, 1, 1, tzinfo=UTC),
        session_id=session_id,
    )


def _vectors(count: int) -> np.ndarray:
    return np.eye(count, DIM, dtype=np.float32) if count else np.zeros((0, DIM), np.float32)


def _match(store: SQLiteStore, word: str, user_id: str = "ana") -> list[int]:
    return [seq for seq, _ in store.fulltext(f'"{word}"', user_id, SearchFilters(), 10)]


@contextmanager
def _raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A separate plain connection that commits and closes."""
    connection = sqlite3.connect(path)
    try:
        yield connection
        connection.commit()
    finally:
        connection.close()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "store.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(db_path)
    yield opened
    opened.close()


# -- migrations ---------------------------------------------------------------------------


def test_fresh_database_records_the_latest_version(store: SQLiteStore, db_path: Path) -> None:
    with _raw(db_path) as connection:
        rows = connection.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
    assert [row[0] for row in rows] == [m.version for m in MIGRATIONS]
    assert rows[-1][0] == LATEST_VERSION
    assert all(row[1] for row in rows)


def test_reopening_applies_nothing_twice(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    with _raw(db_path) as connection:
        first = connection.execute("SELECT * FROM schema_migrations ORDER BY version").fetchall()
    store = SQLiteStore(db_path)
    store.insert_turns([_turn("a", "still here")], _vectors(1), MODEL)
    store.close()
    reopened = SQLiteStore(db_path)
    try:
        assert reopened.get_by_ids(["a"])["a"].content == "still here"
    finally:
        reopened.close()
    with _raw(db_path) as connection:
        assert connection.execute("SELECT * FROM schema_migrations ORDER BY version").fetchall() == first


def test_patterns_counted_before_occurrences_were_recorded_keep_their_counts(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    seqs = store.insert_turns([_turn("a", "give me the code"), _turn("b", "code again")], None, MODEL)
    store.observe_pattern(
        "ana", seqs[0], "code_first", description="wants code first", evidence="give me the code", when=T0
    )
    store.observe_pattern("ana", seqs[0], "terse", description="writes tersely", evidence="give me the code", when=T0)
    store.close()
    with _raw(db_path) as connection:  # the store as version 5 left it: counts, no occurrence rows
        connection.execute("DROP TABLE pattern_observations")
        connection.execute("DROP TABLE sleep_marks")
        connection.execute("DROP INDEX jobs_open_by_user")  # version 7's
        connection.execute("ALTER TABLE jobs DROP COLUMN counted")  # version 8's
        connection.execute("ALTER TABLE segments DROP COLUMN centroid_model")  # version 13's
        undo_spaces(connection)
        connection.execute("DELETE FROM schema_migrations WHERE version > 5")
        connection.execute("UPDATE patterns SET count = 4 WHERE key = 'code_first'")
    upgraded = SQLiteStore(db_path)
    try:
        upgraded.observe_pattern(
            "ana", seqs[1], "code_first", description="wants code first", evidence="code again", when=T0
        )
        assert sorted(row[:1] + row[2:] for row in upgraded.pattern_rows("ana")) == [
            ("code_first", 5, T0, T0, "code again"),
            ("terse", 1, T0, T0, "give me the code"),
        ]
        # b's occurrence goes; the older ones stay, and no quote that may be a deleted turn's
        upgraded.delete("b", "ana")
        assert sorted(row[:1] + row[2:] for row in upgraded.pattern_rows("ana")) == [
            ("code_first", 4, T0, T0, ""),
            ("terse", 1, T0, T0, ""),
        ]
        upgraded.delete("a", "ana")  # unrecorded: nothing to take back
        assert sorted(row[2] for row in upgraded.pattern_rows("ana")) == [1, 4]
    finally:
        upgraded.close()


def test_an_upgrade_to_version_12_notes_restatements_from_then_on(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    first, again = store.insert_turns([_turn("a", "I live in Porto"), _turn("b", "I live in Porto")], None, MODEL)
    store.close()
    with _raw(db_path) as connection:  # the store as version 11 left it
        connection.execute("DROP TABLE cell_restatements")
        connection.execute("ALTER TABLE segments DROP COLUMN centroid_model")  # version 13's
        undo_spaces(connection)
        connection.execute("DELETE FROM schema_migrations WHERE version >= 12")
    upgraded = SQLiteStore(db_path)
    try:
        cell = Cell(
            id="c1",
            user_id="ana",
            kind="fact",
            subject="user",
            attribute="location",
            value="Porto",
            content="I live in Porto",
            salience=0.5,
            valid_from=T0,
            source_turn_id="a",
        )
        assert upgraded.add_cell(cell, first, single_valued=True, supersede=[])
        assert upgraded.restate_cell("ana", "c1", again, "Porto", "I live in Porto")
        upgraded.delete("a", "ana")
        [kept] = upgraded.cells("ana")
        assert (kept.id, kept.source_turn_id) == ("c1", "b")
    finally:
        upgraded.close()


def test_newer_schema_raises_schema_too_new_and_leaves_the_file_alone(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    store.insert_turns([_turn("a", "keep me")], None, MODEL)
    store.close()
    with _raw(db_path) as connection:
        connection.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from the future', 'x')",
            (LATEST_VERSION + 1,),
        )
    with _raw(db_path) as connection:  # a newer memstrata may also have left another journal mode
        connection.isolation_level = None
        assert connection.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
    before = db_path.read_bytes()
    with pytest.raises(SchemaTooNew) as info:
        SQLiteStore(db_path)
    assert isinstance(info.value, StorageError)
    message = str(info.value)
    assert "upgrade" in message.lower()
    assert str(LATEST_VERSION + 1) in message
    assert db_path.read_bytes() == before
    with _raw(db_path) as check:
        assert check.execute("SELECT content FROM turns").fetchall() == [("keep me",)]
        assert check.execute("SELECT MAX(version) FROM schema_migrations").fetchone() == (LATEST_VERSION + 1,)
        assert check.execute("PRAGMA journal_mode").fetchone() == ("delete",)


def test_newer_schema_through_open_store_and_memory(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    with _raw(db_path) as connection:
        connection.execute("INSERT INTO schema_migrations VALUES (?, 'future', 'x')", (LATEST_VERSION + 5,))
    with pytest.raises(SchemaTooNew, match="upgrade"):
        open_store(f"sqlite:///{db_path}")
    from memstrata import Memory
    from memstrata.embeddings.hashing import HashEmbedder

    with pytest.raises(SchemaTooNew):
        Memory(db_path, embedder=HashEmbedder())


def test_wal_and_synchronous_full(store: SQLiteStore, db_path: Path) -> None:
    connection = store._connection
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert connection.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert connection.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    with _raw(db_path) as other:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent in the file


# -- full-text index ------------------------------------------------------------------------


def test_fts_follows_inserts_and_deletes(store: SQLiteStore) -> None:
    [seq_a, seq_b] = store.insert_turns(
        [_turn("a", "the lighthouse keeper", session_id="s1"), _turn("b", "a quiet harbour", session_id="s2")],
        _vectors(2),
        MODEL,
    )
    assert _match(store, "lighthouse") == [seq_a]
    assert _match(store, "harbour") == [seq_b]
    assert _match(store, "keepers") == [seq_a]  # porter stemming
    assert store.delete("a", "ana") == seq_a
    assert _match(store, "lighthouse") == []
    assert _match(store, "harbour") == [seq_b]
    with store._lock:
        rows = store._connection.execute("SELECT rowid FROM turns_fts WHERE turns_fts MATCH 'lighthouse'").fetchall()
    assert rows == []


def _neighbours_of(store: SQLiteStore, seq: int) -> tuple[str, str]:
    with store._lock:
        row = store._connection.execute("SELECT near, far FROM turns_fts WHERE rowid = ?", (seq,)).fetchone()
    return str(row[0]).strip(), str(row[1]).strip()


def test_each_turn_is_indexed_with_its_session_neighbours(store: SQLiteStore) -> None:
    [a, b] = store.insert_turns(
        [_turn("a", "what did you research?", session_id="s"), _turn("b", "adoption agencies", session_id="s")],
        None,
        MODEL,
    )
    [other] = store.insert_turns([_turn("x", "unrelated chatter", session_id="t")], None, MODEL)
    [c] = store.insert_turns([_turn("c", "sounds great", session_id="s")], None, MODEL)
    [d] = store.insert_turns([_turn("d", "thanks", session_id="s")], None, MODEL)
    assert _neighbours_of(store, a) == ("adoption agencies", "sounds great")
    assert _neighbours_of(store, b) == ("what did you research? sounds great", "thanks")
    assert _neighbours_of(store, c) == ("adoption agencies thanks", "what did you research?")
    assert _neighbours_of(store, d) == ("sounds great", "adoption agencies")
    assert _neighbours_of(store, other) == ("", "")
    # The answer is found by the question's words, ranked below the question itself.
    assert _match(store, "research")[:2] == [a, b]
    assert store.delete("b", "ana") == b
    assert _neighbours_of(store, a) == ("sounds great", "thanks")
    assert _neighbours_of(store, c) == ("what did you research? thanks", "")
    assert _neighbours_of(store, d) == ("sounds great", "what did you research?")
    with store._lock:
        store._connection.execute("DELETE FROM turns_fts")
    store.rebuild_fulltext()
    assert _neighbours_of(store, a) == ("sounds great", "thanks") and _match(store, "research")[0] == a
    with store._lock:
        store._connection.execute("INSERT INTO turns_fts (turns_fts) VALUES ('integrity-check')")


def test_fts_follows_forget(store: SQLiteStore) -> None:
    store.insert_turns(
        [_turn("a", "apple pie", session_id="s1"), _turn("b", "apple tart", session_id="s2")], None, MODEL
    )
    assert store.forget(Scope("ana", session_id="s1")) == 1
    assert [store.get_by_seqs([s], "ana")[s].id for s in _match(store, "apple")] == ["b"]


def test_fulltext_is_confined_to_the_user(store: SQLiteStore) -> None:
    store.insert_turns(
        [_turn("a", "secret recipe", user_id="ana"), _turn("b", "my recipe", user_id="bob")], None, MODEL
    )
    assert len(_match(store, "recipe", "ana")) == 1
    assert len(_match(store, "recipe", "bob")) == 1
    assert _match(store, "secret", "bob") == []
    assert store.get_by_seqs(_match(store, "secret", "ana"), "bob") == {}


def test_rebuild_fulltext_restores_search_after_delete_all(store: SQLiteStore) -> None:
    [seq] = store.insert_turns([_turn("a", "the northern lights")], None, MODEL)
    with store._lock:
        store._connection.execute("DELETE FROM turns_fts")
    assert _match(store, "northern") == []
    store.rebuild_fulltext()
    assert _match(store, "northern") == [seq]


def test_rebuild_fulltext_after_deleting_fts_rows(store: SQLiteStore) -> None:
    seqs = store.insert_turns(
        [_turn("a", "blue whale", session_id="s1"), _turn("b", "blue jay", session_id="s2")], None, MODEL
    )
    with store._lock:
        # Wiping one entry leaves the index out of step with the table.
        store._connection.execute("DELETE FROM turns_fts WHERE rowid = ?", (seqs[0],))
    assert _match(store, "whale") == []
    store.rebuild_fulltext()
    assert sorted(_match(store, "blue")) == sorted(seqs)
    assert _match(store, "whale") == [seqs[0]]
    with store._lock:
        store._connection.execute("INSERT INTO turns_fts (turns_fts) VALUES ('integrity-check')")


def test_rebuild_fulltext_restores_the_derived_items_index(store: SQLiteStore) -> None:
    [seq] = store.insert_turns([_turn("a", "I live in Porto")], None, MODEL)
    cell = Cell(
        id="c1",
        user_id="ana",
        kind="fact",
        subject="ana",
        attribute="location",
        value="Porto",
        content="I live in Porto",
        salience=0.8,
        valid_from=T0,
        source_turn_id="a",
    )
    store.add_cell(cell, seq, single_valued=True, supersede=[])
    [(derived_seq, _)] = store.derived_fulltext('"porto"', "ana", 5)
    with store._lock:
        store._connection.execute("INSERT INTO derived_fts (derived_fts) VALUES ('delete-all')")
    assert store.derived_fulltext('"porto"', "ana", 5) == []
    store.rebuild_fulltext()
    assert [found for found, _ in store.derived_fulltext('"porto"', "ana", 5)] == [derived_seq]
    with store._lock:
        store._connection.execute("INSERT INTO derived_fts (derived_fts) VALUES ('integrity-check')")


# -- vectors, cascades, events -------------------------------------------------------------


def test_deleting_a_turn_cascades_its_vectors(store: SQLiteStore) -> None:
    seqs = store.insert_turns([_turn("a", "one"), _turn("b", "two")], _vectors(2), MODEL)
    store.put_vectors("other-model", seqs, _vectors(2))
    assert store.counts() == {"turns": 2, "users": 1, "sessions": 1, f"vectors[{MODEL}]": 2, "vectors[other-model]": 2}
    store.delete("a", "ana")
    with store._lock:
        left = store._connection.execute("SELECT turn_seq FROM turn_vectors ORDER BY id").fetchall()
    assert {row[0] for row in left} == {seqs[1]}
    assert store.vectors_for(MODEL, seqs).keys() == {seqs[1]}
    store.forget(Scope("ana"))
    with store._lock:
        assert store._connection.execute("SELECT COUNT(*) FROM turn_vectors").fetchone() == (0,)


def test_forget_and_delete_write_events(store: SQLiteStore) -> None:
    store.insert_turns(
        [_turn("a", "x", session_id="s1"), _turn("b", "y", session_id="s1"), _turn("c", "z", session_id="s2")],
        None,
        MODEL,
    )
    assert store.forget(Scope("ana", session_id="s1")) == 2
    assert store.delete("c", "ana") is not None
    assert store.delete("c", "ana") is None
    with store._lock:
        events = store._connection.execute("SELECT kind, user_id, detail, at FROM events ORDER BY id").fetchall()
    assert [(kind, user) for kind, user, _, _ in events] == [("forget", "ana"), ("delete", "ana")]
    assert json.loads(events[0][2]) == {"agent_id": None, "session_id": "s1", "turns": 2}
    assert json.loads(events[1][2]) == {"turn_id": "c"}
    assert datetime.fromisoformat(events[0][3]).tzinfo is not None


def test_vectors_after_tracks_high_water(store: SQLiteStore) -> None:
    seqs = store.insert_turns([_turn("a", "one"), _turn("b", "two", user_id="bob")], _vectors(2), MODEL)
    batch = store.vectors_after(MODEL, "ana", 0)
    assert batch.seqs.tolist() == [seqs[0]]
    assert batch.vectors.shape == (1, DIM)
    np.testing.assert_array_equal(batch.vectors[0], _vectors(2)[0])
    assert store.vectors_after(MODEL, "ana", batch.high_water).seqs.tolist() == []
    [seq_c] = store.insert_turns([_turn("c", "three")], _vectors(3)[2:], MODEL)
    later = store.vectors_after(MODEL, "ana", batch.high_water)
    assert later.seqs.tolist() == [seq_c] and later.high_water > batch.high_water
    assert store.vectors_after("unknown-model", "ana", 0).seqs.tolist() == []


def test_missing_vectors_and_put_vectors(store: SQLiteStore) -> None:
    seqs = store.insert_turns([_turn("a", "one"), _turn("b", "two")], None, MODEL)
    assert [(seq, turn.content) for seq, turn in store.turns_missing_vectors(MODEL, 10)] == [
        (seqs[0], "one"),
        (seqs[1], "two"),
    ]
    store.put_vectors(MODEL, seqs, _vectors(2))
    assert store.turns_missing_vectors(MODEL, 10) == []
    store.put_vectors(MODEL, [seqs[0], 9999], _vectors(2))  # a vanished turn is skipped
    assert store.counts()[f"vectors[{MODEL}]"] == 2


def test_speakers_are_read_by_seeking_through_the_speaker_index(store: SQLiteStore, db_path: Path) -> None:
    # A scan would return the same names; only the plan shows it walks the index one name at a time.
    with closing(sqlite3.connect(db_path)) as raw:
        plan = [row[3] for row in raw.execute("EXPLAIN QUERY PLAN " + SPEAKERS_QUERY, ("ana", 200))]
    searches = [step for step in plan if "turns" in step and step.startswith(("SEARCH", "SCAN"))]
    assert searches and all("INDEX turns_by_speaker (user_id=? AND name>?)" in step for step in searches), plan


def test_one_users_claim_reads_the_index_of_open_jobs_by_user(store: SQLiteStore, db_path: Path) -> None:
    # A flush for one user must not walk everyone's open jobs (nor, in stores from before version 7, done ones).
    store.enqueue_job("visit", "ana", {})
    statements: list[str] = []
    with closing(sqlite3.connect(db_path)) as raw:
        raw.set_trace_callback(statements.append)
        assert queue.claim(raw, 60, datetime.now(UTC), None, "ana") is not None
        raw.rollback()
        select = next(sql for sql in statements if sql.lstrip().startswith("SELECT id FROM jobs"))
        plan = [row[3] for row in raw.execute("EXPLAIN QUERY PLAN " + select)]
    assert plan == ["SEARCH jobs USING INDEX jobs_open_by_user (user_id=?)"], plan


def test_a_finished_job_leaves_no_row_and_the_upgrade_drops_those_finished_before(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    finished, parked = store.enqueue_job("visit", "ana", {}), store.enqueue_job("visit", "ana", {})
    store.enqueue_job("visit", "bob", {})
    for job_id, done in ((finished, True), (parked, False)):
        claimed = store.claim_job(60, user_id="ana")
        assert claimed is not None and claimed.id == job_id
        if done:
            store.finish_job(job_id, attempt=claimed.attempts)
        else:
            store.fail_job(job_id, "boom", retry=False, attempt=claimed.attempts)
    store.close()
    with _raw(db_path) as connection:
        assert connection.execute("SELECT user_id, state FROM jobs ORDER BY id").fetchall() == [
            ("ana", "failed"),  # kept, to be retried
            ("bob", "pending"),
        ]
        # What versions before 7 kept: a finished job's row.
        connection.execute("INSERT INTO jobs (kind, user_id, state, created_at) VALUES ('visit', 'ana', 'done', 'x')")
        connection.execute("DROP INDEX jobs_open_by_user")
        connection.execute("ALTER TABLE jobs DROP COLUMN counted")  # version 8's
        connection.execute("ALTER TABLE segments DROP COLUMN centroid_model")  # version 13's
        undo_spaces(connection)
        connection.execute("DELETE FROM schema_migrations WHERE version >= 7")
    SQLiteStore(db_path).close()
    with _raw(db_path) as connection:
        rows = connection.execute("SELECT state, counted FROM jobs ORDER BY id").fetchall()
        assert rows == [("failed", 0), ("pending", 0)]  # a job queued before counts its visits


def test_the_upgrade_takes_what_facts_said_out_of_supersession_events(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    old = {"old": "c1", "new": "c2", "subject": "user", "attribute": "pet:dog:max"}  # as versions before 9 wrote
    with _raw(db_path) as connection:
        for kind, detail in (("supersession", old), ("delete", {"turn_id": "t0"})):
            connection.execute(
                "INSERT INTO events (at, kind, user_id, detail) VALUES ('x', ?, 'ana', ?)", (kind, json.dumps(detail))
            )
        connection.execute("ALTER TABLE segments DROP COLUMN centroid_model")  # version 13's
        undo_spaces(connection)
        connection.execute("DELETE FROM schema_migrations WHERE version >= 9")
    SQLiteStore(db_path).close()
    with _raw(db_path) as connection:
        rows = connection.execute("SELECT kind, detail FROM events ORDER BY id").fetchall()
    assert [(kind, json.loads(detail)) for kind, detail in rows] == [
        ("supersession", {"old": "c1", "new": "c2"}),
        ("delete", {"turn_id": "t0"}),
    ]


def test_the_upgrade_deletes_scenes_whose_segment_retention_deleted(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    with _raw(db_path) as connection:
        connection.execute(
            "INSERT INTO segments (id, user_id, summary, created_at, last_activity) VALUES ('g1', 'ana', 's', 'x', 'x')"
        )
        for scene, segment in (("kept", "g1"), ("orphan", "pruned"), ("unlinked", None)):
            connection.execute(
                "INSERT INTO scenes (id, user_id, title, summary, segment_id, created_at, updated_at)"
                " VALUES (?, 'ana', 't', 'My PIN is 4417', ?, 'x', 'x')",
                (scene, segment),
            )
        connection.execute("ALTER TABLE segments DROP COLUMN centroid_model")  # version 13's
        undo_spaces(connection)
        connection.execute("DELETE FROM schema_migrations WHERE version >= 11")
    SQLiteStore(db_path).close()
    with _raw(db_path) as connection:
        assert connection.execute("SELECT id FROM scenes ORDER BY id").fetchall() == [("kept",), ("unlinked",)]


def test_insert_conflict_writes_nothing(store: SQLiteStore) -> None:
    store.insert_turns([_turn("a", "original")], None, MODEL)
    with pytest.raises(IdConflict):
        store.insert_turns([_turn("new", "fresh"), _turn("a", "changed")], _vectors(2), MODEL)
    assert store.get_by_ids(["new", "a"]).keys() == {"a"}
    assert store.counts()["turns"] == 1
    assert store.insert_turns([_turn("a", "original")], None, MODEL) == [1]  # identical retry: skipped


def test_turn_round_trips_through_the_row(store: SQLiteStore) -> None:
    turn = Turn(
        id="full",
        user_id="ana",
        agent_id="agent",
        session_id="s",
        role=Role.TOOL,
        name="calc",
        content="2 + 2 = 4",
        created_at=datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
        metadata={"nested": {"list": [1, 2.5, None, True]}, "é": "ü"},
        importance=0.25,
    )
    store.insert_turns([turn], None, MODEL)
    assert store.get_by_ids(["full"])["full"] == turn
    assert store.get_by_ids(["full"], "bob") == {}
    assert [t for _, t in store.iterate("ana")] == [turn]
    assert list(store.iterate("bob")) == []


# -- opening ----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["mongodb://localhost/db", "mysql://x", "memstrata.db", "", "redis:"])
def test_unknown_scheme_raises_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match="unsupported storage URL"):
        open_store(url)


def test_sqlite_url_without_a_path_raises_config_error() -> None:
    with pytest.raises(ConfigError):
        open_sqlite("sqlite:///")


def test_in_memory_url_works() -> None:
    store = open_store("sqlite:///:memory:")
    try:
        assert store.location == ":memory:"
        [seq] = store.insert_turns([_turn("a", "ephemeral thought")], _vectors(1), MODEL)
        assert store.fulltext('"ephemeral"', "ana", SearchFilters(), 5)[0][0] == seq
        assert store.counts()["turns"] == 1
        assert store.forget(Scope("ana")) == 1
    finally:
        store.close()


def test_absolute_url_opens_that_file(tmp_path: Path) -> None:
    target = tmp_path / "nested" / "x.db"
    store = open_store(f"sqlite:///{target}")
    store.close()
    assert target.is_file()
    assert store.location == str(target)


def test_opening_a_directory_raises_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError):
        SQLiteStore(tmp_path)
    with pytest.raises(StorageError):
        open_store(f"sqlite:///{tmp_path}")


def test_opening_a_path_under_a_file_raises_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StorageError):
        SQLiteStore(blocker / "sub" / "x.db")


def test_opening_a_non_database_file_raises_storage_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is definitely not an sqlite database" * 100)
    with pytest.raises(StorageError):
        SQLiteStore(junk)
    assert junk.read_bytes() == b"this is definitely not an sqlite database" * 100


def test_use_after_close_raises_storage_error(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    store.close()
    with pytest.raises(StorageError):
        store.counts()
    with pytest.raises(StorageError):
        store.insert_turns([_turn("a", "x")], None, MODEL)


def test_forget_leaves_no_word_of_the_user_in_the_database_files(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    for batch in range(3):  # several index segments, as a store written over time has
        store.insert_turns([_turn(f"b{batch}", f"bob's note {batch}", user_id="bob")], None, MODEL)
        store.insert_turns([_turn(f"a{batch}", f"the hint is qwzxplkvv {batch}", session_id="s")], None, MODEL)
    assert store.forget(Scope("ana")) == 3
    store.close()
    files = [path for path in db_path.parent.iterdir() if path.name.startswith(db_path.name)]
    assert all(b"qwzxplkvv" not in path.read_bytes() for path in files)
    with closing(SQLiteStore(db_path)) as reopened:
        assert len(reopened.fulltext('"note"', "bob", SearchFilters(), 10)) == 3  # bob's index still answers


def test_forget_warns_when_a_reader_keeps_the_deleted_text_in_the_wal(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(db_path, busy_timeout_seconds=20)
    store.insert_turns([_turn("a0", "the hint is qwzxplkvv")], None, MODEL)
    with _raw(db_path) as reader:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM turns").fetchall()  # holds a snapshot the checkpoint must keep
        started = time.monotonic()
        with caplog.at_level("WARNING", logger="memstrata.storage.sqlite"):
            assert store.forget(Scope("ana")) == 1
        # It does not wait for the reader (a wait held every other call of the store meanwhile)...
        assert time.monotonic() - started < 10
        store.insert_turns([_turn("b0", "and the store writes on")], None, MODEL)
        reader.execute("COMMIT")
    assert "write-ahead log still holds the deleted text" in caplog.text
    # ...and waits as long as it should for everything else.
    assert store._connection.execute("PRAGMA busy_timeout").fetchone() == (20_000,)
    store.close()


def _store_files(db_path: Path) -> bytes:
    return b"".join(path.read_bytes() for path in db_path.parent.iterdir() if path.name.startswith(db_path.name))


def test_vacuum_clears_the_copies_forget_leaves_in_pages_another_user_shares(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    lengths = random.Random(1)
    for n in range(200):  # two users' turns of varied length share pages, as they do in a live store
        ana = f"the hint is qwzxplkvv{n} " + "lorem ipsum " * lengths.randint(1, 40)
        bob = f"bob's note {n} " + "dolor sit " * lengths.randint(1, 40)
        store.insert_turns([_turn(f"a{n}", ana, session_id="s")], None, MODEL)
        store.insert_turns([_turn(f"b{n}", bob, user_id="bob", session_id="t")], None, MODEL)
    store.forget(Scope("ana"))
    # secure_delete zeroes the rows, yet a page SQLite rebalanced keeps copies in its free space.
    assert b"qwzxplkvv" in _store_files(db_path), "no residue to clear: this SQLite keeps none after forget"
    before = store.size_bytes()

    assert store.vacuum() is True
    assert b"qwzxplkvv" not in _store_files(db_path)
    assert store.size_bytes() < before
    assert len(store.fulltext('"note"', "bob", SearchFilters(), 500)) == 200  # bob's rows and index stay
    store.close()
    assert b"qwzxplkvv" not in _store_files(db_path)


def test_vacuum_keeps_every_row_with_its_rowid(tmp_path: Path) -> None:
    from memstrata import Memory
    from memstrata.embeddings.hashing import HashEmbedder

    memory = Memory(tmp_path, embedder=HashEmbedder(), background=False, working_capacity=2, segment_similarity=0.4)
    for n in range(60):  # cells and segments break ties by rowid, which VACUUM must keep
        said = [
            {"role": "user", "content": f"I moved to city{n % 7} and I prefer tea number {n}"},
            {"role": "assistant", "content": f"Noted, city{n % 7} and tea {n}."},
        ]
        memory.add(said, user_id=("ana", "bob")[n % 2], session_id=f"s{n % 3}")
    memory.flush()
    memory.forget(user_id="bob")  # frees pages between ana's rows
    connection = sqlite3.connect(tmp_path / "memstrata.db")
    tables = [
        str(row[0])
        for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%fts%'"
            " AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE '%WITHOUT ROWID%'"
        )
    ]
    rows = lambda: {table: connection.execute(f"SELECT rowid, * FROM {table}").fetchall() for table in tables}  # noqa: E731
    before = rows()
    assert before["cells"] and before["segments"]

    assert memory.vacuum().complete
    assert rows() == before
    connection.close()
    memory.close()


def test_vacuum_says_when_a_reader_keeps_old_pages_in_the_log(db_path: Path) -> None:
    store = SQLiteStore(db_path, busy_timeout_seconds=0.2)
    store.insert_turns([_turn("a0", "the hint is qwzxplkvv")], None, MODEL)
    store.insert_turns([_turn("b0", "bob's note", user_id="bob")], None, MODEL)
    store.forget(Scope("ana"))
    with _raw(db_path) as reader:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM turns").fetchall()  # a snapshot the checkpoint must keep
        assert store.vacuum() is False
        reader.execute("COMMIT")
    assert store.vacuum() is True
    assert store.get_by_ids(["b0"])["b0"].content == "bob's note"
    store.close()


def test_an_in_memory_store_vacuums_and_counts_its_pages() -> None:
    store = SQLiteStore(None)
    store.insert_turns([_turn("a0", "x" * 5000)], None, MODEL)
    assert store.size_bytes() > 5000
    assert store.vacuum() is True
    store.close()


def test_full_text_reads_its_counts_and_rows_in_one_snapshot(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, other = SQLiteStore(db_path), SQLiteStore(db_path)
    said = ["we sail to lisbon", "lisbon trams are yellow", *(f"an ordinary day number {n}" for n in range(6))]
    store.insert_turns([_turn(f"a{n}", text) for n, text in enumerate(said)], None, MODEL)
    store.insert_turns([_turn("b0", "a quiet day", user_id="bob")], None, MODEL)
    match = '"lisbon" OR "sail"'
    expected = store.fulltext(match, "ana", SearchFilters(), 10)
    counted = retrieval.population

    def then_bob_says_lisbon(*args: Any, **kwargs: Any) -> Any:
        found = counted(*args, **kwargs)
        # Another process commits between the counts and the rows: neither may see it.
        other.insert_turns([_turn(f"b{n}", "lisbon lisbon", user_id="bob") for n in range(1, 5)], None, MODEL)
        return found

    monkeypatch.setattr(retrieval, "population", then_bob_says_lisbon)
    assert store.fulltext(match, "ana", SearchFilters(), 10) == expected
    monkeypatch.undo()
    # Once committed, bob's words do not reorder ana's results; his rows' length moves the scores a little.
    assert [seq for seq, _ in store.fulltext(match, "ana", SearchFilters(), 10)] == [seq for seq, _ in expected]
    store.close()
    other.close()


def test_novelty_reads_a_user_s_last_vectors_through_their_own_index(tmp_path: Path) -> None:
    # Through (model_id, turn_seq) SQLite walked back over every other user's vectors: quadratic tier work.
    store = SQLiteStore(tmp_path / "store.db")
    try:
        plan = store._connection.execute(
            "EXPLAIN QUERY PLAN SELECT vector FROM turn_vectors WHERE model_id = ? AND user_id = ? AND turn_seq < ?"
            " ORDER BY turn_seq DESC LIMIT ?",
            ("m", "ana", 10, 50),
        ).fetchall()
    finally:
        store.close()
    assert "turn_vectors_by_user_turn" in " ".join(str(row[-1]) for row in plan)


def _counts(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Each user's turns as the triggers kept them, and as counted."""
    with _raw(path) as connection:
        kept = dict(connection.execute("SELECT user_id, turns FROM user_turn_counts").fetchall())
        counted = dict(connection.execute("SELECT user_id, count(*) FROM turns GROUP BY user_id").fetchall())
    return kept, counted


def test_each_users_turns_are_counted_by_triggers_and_a_forgotten_user_leaves_no_count(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    rng = random.Random(4)
    ids: list[tuple[str, str]] = []
    for batch in range(12):
        user = rng.choice(["ana", "bob", "cy"])
        turns = [_turn(f"{user}-{batch}-{n}", f"turn {n}", user_id=user) for n in range(rng.randint(1, 5))]
        store.insert_turns(turns, None, MODEL)
        ids.extend((turn.id, user) for turn in turns)
    for turn_id, user in rng.sample(ids, 8):
        store.delete(turn_id, user)
    kept, counted = _counts(db_path)
    assert kept == counted and sum(kept.values()) == len(ids) - 8
    store.forget(Scope(user_id="bob"))
    store.close()
    kept, counted = _counts(db_path)
    assert kept == counted and "bob" not in kept


def test_the_upgrade_counts_the_turns_stored_before_it(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    store.insert_turns([_turn(f"a{n}", "hello", user_id="ana") for n in range(3)], None, MODEL)
    store.insert_turns([_turn("b0", "hello", user_id="bob")], None, MODEL)
    store.close()
    with _raw(db_path) as connection:  # the store as version 19 left it
        for trigger in ("insert", "delete", "move"):
            connection.execute(f"DROP TRIGGER user_turn_counts_{trigger}")
        connection.execute("DROP TABLE user_turn_counts")
        connection.execute("DROP INDEX turns_by_user")
        connection.execute("DELETE FROM schema_migrations WHERE version > 19")
    SQLiteStore(db_path).close()
    assert _counts(db_path)[0] == {"ana": 3, "bob": 1}
