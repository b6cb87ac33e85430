"""What only the PostgreSQL store has to get right: migrations under a lock, HNSW indexes, commit order, errors."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memstrata import InvalidInput, Memory, Role, SchemaTooNew, Scope, SearchFilters, StorageError, Turn
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.errors import ConfigError, MissingDependency
from memstrata.models import Segment
from memstrata.storage import focus, open_store
from tests.inputs import distinct_words
from tests.postgres_server import require_driver

psycopg = require_driver()

from memstrata.storage.postgres import retrieval  # noqa: E402
from memstrata.storage.postgres import segments as pg_segments  # noqa: E402
from memstrata.storage.postgres.connection import redact  # noqa: E402
from memstrata.storage.postgres.migrations import (  # noqa: E402
    LATEST_VERSION,
    LOCK_NAMESPACE,
    MIGRATION_LOCK,
    MIGRATIONS,
    TABLES,
    migrate,
)
from memstrata.storage.postgres.retrieval import _SPEAKERS, approximate_statement, match_terms  # noqa: E402
from memstrata.storage.postgres.rows import PgVector, configure_connection  # noqa: E402
from memstrata.storage.postgres.store import PostgresStore, open_postgres  # noqa: E402

MODEL = "pg-model"


def _turn(turn_id: str, content: str = "text", user_id: str = "ana") -> Turn:
    return Turn(
        id=turn_id, user_id=user_id, role=Role.USER, content=content, created_at=datetime(2024, 1, 1, tzinfo=UTC)
    )


def _unit_rows(count: int, dimension: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((count, dimension)).astype(np.float32)
    normalised: np.ndarray = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return normalised


def _query(url: str, statement: str, parameters: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as connection:
        cursor = connection.execute(statement, parameters)
        rows: list[tuple[object, ...]] = cursor.fetchall() if cursor.description else []
        return rows


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:
    opened = open_postgres(postgres_url)
    yield opened
    opened.close()


# -- opening and migrating ----------------------------------------------------------------------


def test_both_schemes_open_the_postgres_store(postgres_url: str) -> None:
    for url in (postgres_url, postgres_url.replace("postgresql://", "postgres://", 1)):
        store = open_store(url)
        try:
            assert isinstance(store, PostgresStore)
        finally:
            store.close()


def test_a_fresh_database_records_every_migration_once(store: PostgresStore, postgres_url: str) -> None:
    rows = _query(postgres_url, "SELECT version, name FROM schema_migrations ORDER BY version")
    assert rows == [(m.version, m.name) for m in MIGRATIONS] and rows[-1][0] == LATEST_VERSION
    store.insert_turns([_turn("a", "still here")], None, MODEL)
    store.close()
    reopened = open_postgres(postgres_url)
    try:
        assert reopened.get_by_ids(["a"])["a"].content == "still here"
    finally:
        reopened.close()
    assert _query(postgres_url, "SELECT version, name FROM schema_migrations ORDER BY version") == rows


def test_processes_opening_a_new_database_at_once_migrate_it_once(postgres_url: str) -> None:
    opened: list[PostgresStore] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def open_one() -> None:
        try:
            start.wait()
            opened.append(open_postgres(postgres_url))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for store in opened:
        store.close()
    assert errors == [] and len(opened) == 4
    assert _query(postgres_url, "SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations") == [
        (LATEST_VERSION, LATEST_VERSION)
    ]


def test_a_newer_schema_is_refused_and_left_alone(store: PostgresStore, postgres_url: str) -> None:
    store.insert_turns([_turn("a", "keep me")], None, MODEL)
    store.close()
    _query(
        postgres_url,
        "INSERT INTO schema_migrations (version, name) VALUES (%s, 'from the future')",
        (LATEST_VERSION + 1,),
    )
    with pytest.raises(SchemaTooNew, match="upgrade") as info:
        open_store(postgres_url)
    assert str(LATEST_VERSION + 1) in str(info.value)
    assert _query(postgres_url, "SELECT content FROM turns") == [("keep me",)]
    with pytest.raises(SchemaTooNew):
        Memory(storage_url=postgres_url, embedder=HashEmbedder(), background=False)


def test_an_unreachable_server_raises_storage_error_without_the_password() -> None:
    url = "postgresql://memstrata:topsecret@127.0.0.1:1/nowhere?connect_timeout=3"
    with pytest.raises(StorageError, match="cannot connect") as info:
        open_store(url)
    assert "topsecret" not in str(info.value) and "check the host" in str(info.value)


def test_a_malformed_url_raises_config_error() -> None:
    with pytest.raises(ConfigError):
        open_store("postgresql://host/db?not_a_libpq_option=1")


def test_locations_never_show_passwords(postgres_url: str) -> None:
    assert redact("postgresql://u:secret@db.example:5432/app?password=x&sslmode=require") == (
        "postgresql://u@db.example:5432/app?sslmode=require"
    )
    with_password = postgres_url.replace("postgres:@", "postgres:hunter2@", 1)
    store = open_store(with_password)
    try:
        assert "hunter2" not in store.location and store.location.startswith("postgresql://postgres@")
    finally:
        store.close()


def test_a_missing_driver_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name.startswith("memstrata.storage.postgres")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingDependency, match=r"pip install 'memstrata\[postgres\]'"):
        open_store("postgresql://localhost/db")


def test_driver_errors_become_storage_errors(store: PostgresStore, postgres_url: str) -> None:
    _query(postgres_url, "DROP TABLE events CASCADE")
    with pytest.raises(StorageError, match="reading"):
        store.events("ana")
    store.insert_turns([_turn("a")], None, MODEL)
    with pytest.raises(StorageError, match="writing"):
        store.delete("a", "ana")  # records an event
    assert store.get_by_ids(["a"]).keys() == {"a"}  # the failed transaction changed nothing


# -- full-text translation ---------------------------------------------------------------------------


def test_match_expressions_become_terms_never_syntax() -> None:
    assert match_terms('"lisbon" OR "moved"') == ["lisbon", "moved"]
    assert match_terms('"say ""hi"""') == ['say "hi"']
    assert match_terms("plain words OR NEAR more") == ["plain", "words", "more"]
    assert match_terms('"" OR "  "') == []


def test_stemming_and_neighbour_text_are_indexed(store: PostgresStore, postgres_url: str) -> None:
    moment = datetime(2024, 1, 1, tzinfo=UTC)
    seqs = store.insert_turns(
        [
            Turn(
                id="a", user_id="ana", role=Role.USER, content="running late today", created_at=moment, session_id="s"
            ),
            Turn(
                id="b", user_id="ana", role=Role.ASSISTANT, content="she runs daily", created_at=moment, session_id="s"
            ),
        ],
        None,
        MODEL,
    )
    assert {seq for seq, _ in store.fulltext('"run"', "ana", SearchFilters(), 5)} == set(seqs)
    assert _query(postgres_url, "SELECT near, far FROM turns ORDER BY seq") == [
        (" she runs daily", " "),
        ("running late today ", " "),
    ]


def test_each_users_turn_count_follows_inserts_and_deletes(store: PostgresStore, postgres_url: str) -> None:
    def counts() -> dict[object, object]:
        return dict(_query(postgres_url, "SELECT user_id, turns FROM user_turn_counts"))

    store.insert_turns([_turn("a"), _turn("b"), _turn("c", user_id="bob")], None, MODEL)
    store.insert_turns([_turn("d")], None, MODEL)
    assert counts() == {"ana": 3, "bob": 1}
    store.insert_turns([_turn("d")], None, MODEL)  # a retry stores nothing new
    assert counts() == {"ana": 3, "bob": 1}
    store.delete("a", "ana")
    assert counts() == {"ana": 2, "bob": 1}
    store.forget(Scope("bob"))
    assert counts() == {"ana": 2}  # a forgotten user leaves no row
    # The count is BM25's N: both of ana's turns hold "text", so idf = ln(1 + 0.5 / 2.5).
    [(seq, score)] = store.fulltext('"text" OR "nothing"', "ana", SearchFilters(roles=(Role.USER,)), 1)
    [(expected,)] = _query(
        postgres_url,
        "SELECT ln(1.2) * ts_rank('{0.25, 0.5, 1.0, 1.0}', search, phraseto_tsquery('memstrata_english', 'text'), 1)"
        " FROM turns WHERE seq = %s",
        (seq,),
    )
    assert score == pytest.approx(float(expected))  # type: ignore[arg-type]


def test_each_users_lexeme_counts_follow_inserts_neighbours_and_deletes(
    store: PostgresStore, postgres_url: str
) -> None:
    def kept() -> dict[object, object]:
        return {(user, lexeme): turns for user, lexeme, turns in _query(postgres_url, "SELECT * FROM user_term_counts")}

    def recounted() -> dict[object, object]:
        rows = _query(
            postgres_url,
            "SELECT t.user_id, l, count(*) FROM turns t, unnest(tsvector_to_array(t.search)) AS l GROUP BY 1, 2",
        )
        return {(user, lexeme): turns for user, lexeme, turns in rows}

    moment = datetime(2024, 1, 1, tzinfo=UTC)
    store.insert_turns(
        [
            Turn(
                id="a", user_id="ana", role=Role.USER, content="we moved to Lisbon", created_at=moment, session_id="s"
            ),
            Turn(
                id="b", user_id="ana", role=Role.ASSISTANT, content="Lisbon is sunny", created_at=moment, session_id="s"
            ),
            Turn(id="c", user_id="bob", role=Role.USER, content="sunny days", created_at=moment),
        ],
        None,
        MODEL,
    )
    # One turn at a time, as an agent adds them: each changes its neighbours' text too.
    store.insert_turns(
        [Turn(id="d", user_id="ana", role=Role.USER, content="I love the sea", created_at=moment, session_id="s")],
        None,
        MODEL,
    )
    assert kept() == recounted()
    assert kept()["ana", "lisbon"] == 3  # "d" holds Lisbon among the words two turns away
    assert kept()["ana", "sea"] == 3
    store.delete("b", "ana")
    assert kept() == recounted()
    store.forget(Scope("bob"))
    assert kept() == recounted()
    assert not any(user == "bob" for user, _ in kept())  # a forgotten user's words do not stay
    store.forget(Scope("ana"))
    assert kept() == {}


def test_full_text_reads_the_rare_terms_rows_within_a_budget_and_scores_them_by_every_term(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 40 turns, each its own session (no neighbour text): "lisbon" in 1, "family" in 8, "go" in 20.
    moment = datetime(2024, 1, 1, tzinfo=UTC)
    texts = [
        " ".join(
            word
            for word, said in (("go", n % 2 == 0), ("family", n % 5 == 0), ("lisbon", n == 10), ("hello", True))
            if said
        )
        for n in range(40)
    ]
    seqs = store.insert_turns(
        [
            Turn(id=f"t{n}", user_id="ana", role=Role.USER, content=text, created_at=moment, session_id=f"s{n}")
            for n, text in enumerate(texts)
        ],
        None,
        MODEL,
    )
    query = '"lisbon" OR "family" OR "go"'
    exact = store.fulltext(query, "ana", SearchFilters(), 40)  # the budget covers all 24 rows: exact
    assert len(exact) == 24
    _assert_same_ranking(exact, _idf_ranking(store, ["lisbon", "family", "go"], "ana", 40))
    monkeypatch.setattr(focus, "FIND_ROW_BUDGET", 9)
    # Within 9 rows, "lisbon" (1) and "family" (8) find; the turns only "go" matches are not candidates,
    # and the ones found keep their exact scores, "go" included.
    with_family = [(seq, score) for seq, score in exact if "family" in texts[seqs.index(seq)]]
    assert store.fulltext(query, "ana", SearchFilters(), 5) == with_family[:5]
    # Filters narrow what is ranked, not the weights.
    assert store.fulltext(query, "ana", SearchFilters(session_id="s20"), 5) == [
        (seq, score) for seq, score in exact if seq == seqs[20]
    ]
    # A limit larger than what the rare terms find lets the next rarest find too.
    assert store.fulltext(query, "ana", SearchFilters(), 20) == exact[:20]
    # When the finders' turns fall outside the filters, every term finds: "s2" only says "go".
    assert store.fulltext(query, "ana", SearchFilters(session_id="s2"), 5) == [
        (seq, score) for seq, score in exact if seq == seqs[2]
    ]


def test_a_very_large_memory_whose_terms_are_all_common_is_searched_in_its_latest_turns(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 40 turns a minute apart, each its own session: "go" in every second, "family" in every fifth.
    start = datetime(2024, 1, 1, tzinfo=UTC)
    said = (("go", 2), ("family", 5), ("hi", 1))
    texts = [" ".join(word for word, every in said if n % every == 0) for n in range(40)]
    seqs = store.insert_turns(
        [
            Turn(
                id=f"t{n}",
                user_id="ana",
                role=Role.USER,
                content=text,
                created_at=start + timedelta(minutes=n),
                session_id=f"s{n}",
            )
            for n, text in enumerate(texts)
        ],
        None,
        MODEL,
    )
    query = '"family" OR "go"'
    exact = store.fulltext(query, "ana", SearchFilters(), 40)
    family = [(seq, score) for seq, score in exact if "family" in texts[seqs.index(seq)]]
    monkeypatch.setattr(focus, "FIND_ROW_BUDGET", 4)
    assert store.fulltext(query, "ana", SearchFilters(), 4) == family[:4]  # "family" (8 turns) finds alone
    monkeypatch.setattr(focus, "SCORE_CHECKS", 10)
    # With scoring that dear, checking the latest 40 * 4 // 8 = 20 turns (where "family" is in four)
    # costs less than scoring its eight matches: only those are read, each keeping the score it had.
    recent = store.fulltext(query, "ana", SearchFilters(), 4)
    assert recent == [(seq, score) for seq, score in family if seqs.index(seq) >= 20]
    assert len(recent) == 4
    # The other filters still apply inside the latest turns.
    assert store.fulltext(query, "ana", SearchFilters(session_id="s25"), 4) == [
        (seq, score) for seq, score in exact if seq == seqs[25]
    ]
    assert store.fulltext(query, "ana", SearchFilters(session_id="s5"), 4) == []  # older than the latest 20


def test_a_phrase_term_is_weighed_by_its_own_count(store: PostgresStore) -> None:
    moment = datetime(2024, 1, 1, tzinfo=UTC)
    texts = ["snake case", "snake_case here", "case closed", "a snake", "snake"]
    store.insert_turns(
        [
            Turn(id=f"t{n}", user_id="ana", role=Role.USER, content=text, created_at=moment, session_id=f"s{n}")
            for n, text in enumerate(texts)
        ],
        None,
        MODEL,
    )
    terms = ["snake_case", "closed"]  # the parser splits the first into the phrase 'snake' <-> 'case'
    found = store.fulltext('"snake_case" OR "closed"', "ana", SearchFilters(), 10)
    _assert_same_ranking(found, _idf_ranking(store, terms, "ana", 10))
    assert len(found) == 3


def test_rebuilding_the_full_text_index_counts_the_terms_again(store: PostgresStore, postgres_url: str) -> None:
    store.insert_turns([_turn("a", "we moved to Lisbon"), _turn("b", "sunny Lisbon", user_id="bob")], None, MODEL)
    _query(postgres_url, "UPDATE user_term_counts SET turns = 99")  # drift, as from SQL run by hand
    _query(postgres_url, "INSERT INTO user_term_counts VALUES ('gone', 'secret', 1)")
    store.rebuild_fulltext()
    rows = _query(postgres_url, "SELECT user_id, lexeme, turns FROM user_term_counts ORDER BY 1, 2")
    assert rows == [
        ("ana", "lisbon", 1),
        ("ana", "move", 1),
        ("ana", "to", 1),
        ("ana", "we", 1),
        ("bob", "lisbon", 1),
        ("bob", "sunni", 1),
    ]


def test_full_text_vectors_move_into_the_row_when_an_older_database_is_opened(
    store: PostgresStore, postgres_url: str
) -> None:
    # Words that do not repeat, in one session, so each turn's vector also holds its neighbours'
    # words: over 2 KB, too long to stay out of the TOAST table before migration 7.
    words = iter(f"w{n:05d}x" for n in range(100_000))
    moment = datetime(2024, 1, 1, tzinfo=UTC)
    turns = [
        Turn(
            id=f"t{n}",
            user_id="ana",
            role=Role.USER,
            content=" ".join(next(words) for _ in range(30)),
            created_at=moment,
            session_id="s",
        )
        for n in range(40)
    ]
    store.insert_turns(turns, None, MODEL)
    query = '"w00031x" OR "w00100x" OR "w00400x"'
    found = store.fulltext(query, "ana", SearchFilters(), 10)
    store.close()

    def toast_bytes() -> int:
        rows = _query(postgres_url, "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'turns'")
        return int(str(rows[0][0]))

    # The layout of a database made before migration 7: the vectors stored out of line.
    _query(postgres_url, "ALTER TABLE turns ALTER COLUMN search SET STORAGE EXTENDED")
    _query(postgres_url, "VACUUM FULL turns")
    _query(postgres_url, "DROP TABLE pattern_observations")
    _query(postgres_url, "DROP TABLE sleep_marks")
    _query(postgres_url, "DROP INDEX jobs_failed_by_user")
    _query(postgres_url, "ALTER TABLE jobs DROP COLUMN counted")
    _query(postgres_url, "DELETE FROM schema_migrations WHERE version >= 7")
    before = toast_bytes()
    reopened = open_postgres(postgres_url)
    try:
        storage = "SELECT attstorage FROM pg_attribute WHERE attrelid = 'turns'::regclass AND attname = 'search'"
        assert _query(postgres_url, storage) == [("m",)]
        assert toast_bytes() < 0.7 * before  # the existing rows were rewritten: their vectors left the TOAST table
        assert reopened.fulltext(query, "ana", SearchFilters(), 10) == found
    finally:
        reopened.close()


def test_patterns_counted_before_occurrences_were_recorded_keep_their_counts(
    store: PostgresStore, postgres_url: str
) -> None:
    moment = datetime(2024, 1, 1, tzinfo=UTC)
    seqs = store.insert_turns([_turn("a", "give me the code"), _turn("b", "code again")], None, MODEL)
    store.observe_pattern(
        "ana", seqs[0], "code_first", description="wants code first", evidence="give me the code", when=moment
    )
    store.close()
    _query(postgres_url, "DROP TABLE pattern_observations")  # as version 7 left it: a count, no rows
    _query(postgres_url, "DROP TABLE sleep_marks")
    _query(postgres_url, "DROP INDEX jobs_failed_by_user")
    _query(postgres_url, "ALTER TABLE jobs DROP COLUMN counted")
    _query(postgres_url, "DELETE FROM schema_migrations WHERE version > 7")
    _query(postgres_url, "UPDATE patterns SET count = 4")
    upgraded = open_postgres(postgres_url)
    try:
        upgraded.observe_pattern(
            "ana", seqs[1], "code_first", description="wants code first", evidence="code again", when=moment
        )
        assert [row[2:] for row in upgraded.pattern_rows("ana")] == [(5, moment, moment, "code again")]
        upgraded.delete("b", "ana")  # its occurrence goes; the four older ones stay, without a quote
        assert [row[2:] for row in upgraded.pattern_rows("ana")] == [(4, moment, moment, "")]
    finally:
        upgraded.close()


def test_a_finished_job_leaves_no_row_and_the_upgrade_drops_those_finished_before(
    store: PostgresStore, postgres_url: str
) -> None:
    finished = store.enqueue_job("visit", "ana", {})
    store.enqueue_job("visit", "bob", {})
    claimed = store.claim_job(60, user_id="ana")
    assert claimed is not None and claimed.id == finished
    store.finish_job(finished, attempt=claimed.attempts)
    assert _query(postgres_url, "SELECT user_id, state FROM jobs ORDER BY id") == [("bob", "pending")]
    store.close()
    # What versions before 9 kept: a finished job's row.
    _query(postgres_url, "INSERT INTO jobs (kind, user_id, state, created_at) VALUES ('visit', 'ana', 'done', now())")
    _query(postgres_url, "ALTER TABLE jobs DROP COLUMN counted")
    _query(postgres_url, "DELETE FROM schema_migrations WHERE version >= 9")
    open_postgres(postgres_url).close()
    assert _query(postgres_url, "SELECT user_id, state FROM jobs ORDER BY id") == [("bob", "pending")]


def test_the_upgrade_indexes_words_joined_by_punctuation_and_recounts_them(
    store: PostgresStore, postgres_url: str
) -> None:
    store.insert_turns([_turn("t0", "mail ana@example.com about v2.4.1"), _turn("t1", "tea at noon")], None, MODEL)
    store.close()
    # The columns as versions before 14 made them: the parser's own tokens ("ana@example.com" whole).
    _query(postgres_url, "ALTER TABLE turns DROP COLUMN search")
    _query(
        postgres_url,
        "ALTER TABLE turns ADD COLUMN search tsvector GENERATED ALWAYS AS ("
        " setweight(to_tsvector('memstrata_english', content), 'A')"
        " || setweight(to_tsvector('memstrata_english', coalesce(name, '')), 'B')"
        " || setweight(to_tsvector('memstrata_english', near), 'C')"
        " || setweight(to_tsvector('memstrata_english', far), 'D')) STORED",
    )
    _query(postgres_url, "DELETE FROM user_term_counts")
    _query(
        postgres_url,
        "INSERT INTO user_term_counts SELECT t.user_id, l.lexeme, count(*)"
        " FROM turns t, unnest(tsvector_to_array(t.search)) AS l(lexeme) GROUP BY 1, 2",
    )
    _query(postgres_url, "ALTER TABLE derived DROP COLUMN search")
    _query(
        postgres_url,
        "ALTER TABLE derived ADD COLUMN search tsvector"
        " GENERATED ALWAYS AS (to_tsvector('memstrata_english', content)) STORED",
    )
    _query(
        postgres_url,
        "INSERT INTO derived (id, user_id, tier, content, created_at)"
        " VALUES ('d1', 'ana', 'longterm', 'user · email: ana@example.com', now())",
    )
    _query(postgres_url, "DROP TABLE cell_restatements")
    _query(postgres_url, "DELETE FROM schema_migrations WHERE version >= 14")
    old_lexemes = {row[0] for row in _query(postgres_url, "SELECT lexeme FROM user_term_counts")}
    assert "ana@example.com" in old_lexemes and "exampl" not in old_lexemes
    upgraded = open_postgres(postgres_url)
    try:
        counts = dict(_query(postgres_url, "SELECT lexeme, turns FROM user_term_counts WHERE user_id = 'ana'"))
        recounted = (
            "SELECT l.lexeme, count(*) FROM turns t, unnest(tsvector_to_array(t.search)) AS l(lexeme) GROUP BY 1"
        )
        assert counts == dict(_query(postgres_url, recounted))
        assert {"exampl", "com", "v2"} <= counts.keys() and "ana@example.com" not in counts
        for match in ('"ana" OR "example" OR "com"', '"v2" OR "4" OR "1"'):
            assert [seq for seq, _ in upgraded.fulltext(match, "ana", SearchFilters(), 10)][:1] == [1]
        # The derived items' column is made again too, with its index.
        found = "SELECT id FROM derived WHERE search @@ to_tsquery('memstrata_english', 'example')"
        assert _query(postgres_url, found) == [("d1",)]
        assert _query(postgres_url, "SELECT to_regclass('derived_search') IS NOT NULL") == [(True,)]
        assert _query(postgres_url, "SELECT max(version) FROM schema_migrations") == [(LATEST_VERSION,)]
    finally:
        upgraded.close()


def test_an_upgrade_locks_every_table_it_alters_first_so_an_older_processs_read_does_not_deadlock_it(
    store: PostgresStore, postgres_url: str
) -> None:
    store.insert_turns([_turn(f"t{n}", f"mail ana@example.com about v2.4.{n}") for n in range(2000)], None, MODEL)
    store.close()
    _query(
        postgres_url,
        "INSERT INTO derived (id, user_id, tier, content, created_at) VALUES ('d1', 'ana', 'longterm', 'jazz', now())",
    )
    _query(postgres_url, "INSERT INTO derived_sources SELECT d.seq, 1 FROM derived d")
    _query(postgres_url, "DROP TABLE cell_restatements")
    _query(postgres_url, "DELETE FROM schema_migrations WHERE version >= 14")
    read: list[object] = []

    def older_process_reads() -> None:
        # A statement that locks derived, then turns (derived_items' shape), once the upgrade holds turns.
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            held = "SELECT count(*) FROM pg_locks WHERE relation = 'turns'::regclass AND mode = 'AccessExclusiveLock'"
            deadline = time.monotonic() + 30
            while not connection.execute(held).fetchone()[0] and time.monotonic() < deadline:  # type: ignore[index]
                time.sleep(0.005)
            read.extend(
                connection.execute(
                    "SELECT d.id, ARRAY(SELECT t.id FROM derived_sources s JOIN turns t ON t.seq = s.turn_seq"
                    " WHERE s.derived_seq = d.seq) FROM derived d WHERE d.user_id = 'ana'"
                ).fetchall()
            )

    reader = threading.Thread(target=older_process_reads)
    reader.start()
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        migrate(connection, "the test database", 30_000)  # a deadlock would abort it
    reader.join(timeout=60)
    assert read == [("d1", ["t0"])]
    assert _query(postgres_url, "SELECT max(version) FROM schema_migrations") == [(LATEST_VERSION,)]
    statistics = "SELECT count(*) FROM pg_stats WHERE tablename = 'turns' AND attname = 'search'"
    assert _query(postgres_url, statistics) == [(1,)]  # analysed: the planner knows its common terms


def test_the_upgrade_takes_what_facts_said_out_of_supersession_events(store: PostgresStore, postgres_url: str) -> None:
    store.close()
    _query(  # as versions before 11 wrote
        postgres_url,
        "INSERT INTO events (at, kind, user_id, detail) VALUES (now(), 'supersession', 'ana',"
        ' \'{"old": "c1", "new": "c2", "subject": "user", "attribute": "pet:dog:max"}\'),'
        " (now(), 'delete', 'ana', '{\"turn_id\": \"t0\"}')",
    )
    _query(postgres_url, "DELETE FROM schema_migrations WHERE version >= 11")
    open_postgres(postgres_url).close()
    assert _query(postgres_url, "SELECT kind, detail FROM events ORDER BY id") == [
        ("supersession", {"old": "c1", "new": "c2"}),
        ("delete", {"turn_id": "t0"}),
    ]


def test_an_eviction_waits_for_a_filing_that_holds_its_segment(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = store.insert_turns(
        [_turn("t0", "we sailed the regatta"), _turn("t1", "and sailed again")], None, MODEL
    )
    moment = datetime(2024, 1, 1, tzinfo=UTC)
    segment = Segment(
        id="seg1",
        user_id="ana",
        summary="sailing",
        keywords=("sailing",),
        visits=0,
        turn_count=1,
        heat=1.0,
        state="active",
        created_at=moment,
        last_activity=moment,
        session_id="s",
    )
    centroid = np.ones(4, np.float32).tobytes()
    assert store.save_segment(segment, centroid, [first])
    holding, release = threading.Event(), threading.Event()
    held = pg_segments._held

    def paused(connection: object, segment_id: str) -> int | None:  # a filing between its check and its write
        count = held(connection, segment_id)  # type: ignore[arg-type]
        holding.set()
        assert release.wait(30)
        return count

    monkeypatch.setattr(pg_segments, "_held", paused)
    filed: list[bool] = []
    grown = replace(segment, turn_count=2)
    filing = threading.Thread(target=lambda: filed.append(store.save_segment(grown, centroid, [second], known_turns=1)))
    filing.start()
    evicting = threading.Thread(target=store.archive_segments, args=("ana", ["seg1"], {"seg1": 0.1}))
    try:
        assert holding.wait(30)
        evicting.start()
        evicting.join(0.5)
        assert evicting.is_alive(), "the eviction did not wait for the filing's lock on the segment"
    finally:
        release.set()
        filing.join(30)
        if evicting.ident is not None:  # started
            evicting.join(30)
    assert filed == [True]
    # The eviction landed after the filing: archived, and its search item no longer current.
    assert [(s.id, s.state, s.turn_count) for s in store.segments("ana")] == [("seg1", "archived", 2)]
    assert store.derived_fulltext('"sailing"', "ana", 10, ("midterm",)) == []


def _as_of_version_5(postgres_url: str) -> None:
    """Take a migrated database back to the schema of version 5 (before term counts and later steps)."""
    for statement in (
        "DROP TRIGGER turn_lexemes_on_insert ON turns",
        "DROP TRIGGER turn_lexemes_on_update ON turns",
        "DROP TRIGGER turn_lexemes_on_delete ON turns",
        "DROP FUNCTION memstrata_count_turn_lexemes()",
        "DROP FUNCTION memstrata_count_lexemes(text[], text[], bigint[])",
        "DROP TABLE user_term_counts",
        "ALTER TABLE turns ALTER COLUMN search SET STORAGE EXTENDED",
        "DROP TABLE pattern_observations",
        "DROP TABLE sleep_marks",
        "DROP INDEX jobs_failed_by_user",
        "ALTER TABLE jobs DROP COLUMN counted",
        "DELETE FROM schema_migrations WHERE version > 5",
    ):
        _query(postgres_url, statement)


def test_an_upgrade_takes_its_strongest_lock_first_so_an_older_writer_does_not_deadlock(postgres_url: str) -> None:
    open_postgres(postgres_url).close()
    _as_of_version_5(postgres_url)
    # An older process in the middle of a write: it has read turns and is about to insert.
    older = psycopg.connect(postgres_url)
    older.execute("SELECT count(*) FROM turns").fetchall()
    upgraded: list[PostgresStore] = []
    failures: list[BaseException] = []

    def upgrade() -> None:
        try:
            upgraded.append(open_postgres(postgres_url))
        except BaseException as exc:  # reported below
            failures.append(exc)

    thread = threading.Thread(target=upgrade)
    thread.start()
    # Until the upgrade waits for the lock (migration 6 used to hold a share lock here, then ask for more).
    waiting = "SELECT count(*) FROM pg_locks WHERE relation = 'turns'::regclass AND NOT granted"
    for _ in range(200):
        if _query(postgres_url, waiting) != [(0,)]:
            break
        thread.join(0.05)
    older.execute("LOCK TABLE turns IN ROW EXCLUSIVE MODE")  # what its INSERT takes
    older.commit()
    older.close()
    thread.join(60)
    assert failures == [] and len(upgraded) == 1
    upgraded[0].close()
    assert _query(postgres_url, "SELECT max(version) FROM schema_migrations") == [(LATEST_VERSION,)]


def test_an_upgrade_that_cannot_lock_turns_says_so_and_changes_nothing(postgres_url: str) -> None:
    open_postgres(postgres_url).close()
    _as_of_version_5(postgres_url)
    failures: list[BaseException] = []

    def upgrade() -> None:
        try:
            open_postgres(postgres_url, busy_timeout_seconds=0.5).close()
        except BaseException as exc:  # checked below
            failures.append(exc)

    with psycopg.connect(postgres_url) as reader:
        reader.execute("SELECT count(*) FROM turns").fetchall()  # a long transaction, still open
        thread = threading.Thread(target=upgrade)
        thread.start()
        thread.join(30)
        assert not thread.is_alive()  # it gave up rather than waiting for the reader
    thread.join(30)
    assert len(failures) == 1 and isinstance(failures[0], StorageError)
    assert "kept the turns, api_keys, cells, derived, entities and segments tables busy" in str(failures[0])
    assert _query(postgres_url, "SELECT max(version) FROM schema_migrations") == [(5,)]
    assert _query(postgres_url, "SELECT to_regclass('user_term_counts')") == [(None,)]


def test_an_upgrade_that_cannot_alter_jobs_says_so_and_changes_nothing(postgres_url: str) -> None:
    open_postgres(postgres_url).close()
    _query(postgres_url, "ALTER TABLE jobs DROP COLUMN counted")  # as version 9 left it
    _query(postgres_url, "DELETE FROM schema_migrations WHERE version >= 10")
    with psycopg.connect(postgres_url) as idle:
        idle.execute("SELECT count(*) FROM jobs").fetchall()  # a session idle in its transaction
        started = time.monotonic()
        with pytest.raises(StorageError, match=r"step 10, visit jobs counted once.*kept a table busy for 0.5 s"):
            open_postgres(postgres_url, busy_timeout_seconds=0.5)
        assert time.monotonic() - started < 20
    assert _query(postgres_url, "SELECT max(version) FROM schema_migrations") == [(9,)]
    open_postgres(postgres_url).close()  # once the session is gone, the upgrade goes through
    assert _query(postgres_url, "SELECT max(version) FROM schema_migrations") == [(LATEST_VERSION,)]


def test_an_open_waits_for_the_migration_lock_only_as_long_as_the_busy_timeout(postgres_url: str) -> None:
    open_postgres(postgres_url).close()
    with psycopg.connect(postgres_url) as stuck:
        # Another process holds the migration lock and never lets go (hung mid-upgrade).
        stuck.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_NAMESPACE, MIGRATION_LOCK))
        started = time.monotonic()
        with pytest.raises(StorageError, match=r"migration lock for 0.5 s.*raise busy_timeout_seconds"):
            open_postgres(postgres_url, busy_timeout_seconds=0.5)
        assert time.monotonic() - started < 20
    open_postgres(postgres_url).close()  # once it is released, the store opens


def _assert_same_ranking(found: list[tuple[int, float]], expected: list[tuple[int, float]]) -> None:
    assert [seq for seq, _ in found] == [seq for seq, _ in expected]
    assert [score for _, score in found] == pytest.approx([score for _, score in expected])


def _idf_ranking(store: PostgresStore, terms: list[str], user_id: str, limit: int) -> list[tuple[int, float]]:
    """The exact ranking: every row each term matches, counted and scored (what derived items still use)."""
    statement = retrieval._IDF_RANKING.format(
        config=retrieval.TEXT_SEARCH_CONFIG,
        kept="TRUE",
        weights=f"{retrieval._TURN_WEIGHTS}, ",
        table="turns",
        scope="",
        total=retrieval._TURN_TOTAL,
    )
    rows = store._read(lambda connection: connection.execute(statement, [terms, user_id, user_id, limit]).fetchall())
    return [(int(seq), float(score)) for seq, score in rows]


# -- vacuum -------------------------------------------------------------------------------------


def test_the_tables_vacuum_rewrites_are_every_table_of_the_schema(store: PostgresStore, postgres_url: str) -> None:
    schema = _query(postgres_url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    assert {str(row[0]) for row in schema} == set(TABLES)


def test_vacuum_rewrites_the_tables_without_the_forgotten_rows_and_keeps_the_rest(
    store: PostgresStore, postgres_url: str
) -> None:
    for batch in range(4):
        turns = [_turn(f"a{batch}-{n}", f"the hint is qwzxplkvv {'x' * 900}") for n in range(100)]
        store.insert_turns(turns, None, MODEL)
    store.insert_turns([_turn("b0", "bob's note", user_id="bob")], None, MODEL)
    store.forget(Scope("ana"))
    before = store.size_bytes()
    kept = _query(postgres_url, "SELECT seq, id, content FROM turns")

    assert store.vacuum() is True
    assert store.size_bytes() < before
    assert _query(postgres_url, "SELECT seq, id, content FROM turns") == kept
    assert [seq for seq, _ in store.fulltext("note", "bob", SearchFilters(), 10)] == [kept[0][0]]


def test_vacuum_by_a_role_that_does_not_own_the_tables_is_an_error_not_a_silent_skip(
    store: PostgresStore, postgres_url: str
) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    store.insert_turns([_turn("a0", "the hint is qwzxplkvv")], None, MODEL)
    role = "memstrata_vacuum_guest"
    _query(postgres_url, f"DROP ROLE IF EXISTS {role}")
    _query(postgres_url, f"CREATE ROLE {role} LOGIN")
    try:
        database = str(_query(postgres_url, "SELECT current_database()")[0][0])
        _query(postgres_url, f'GRANT ALL ON DATABASE "{database}" TO {role}')
        _query(postgres_url, f"GRANT ALL ON SCHEMA public TO {role}")
        _query(postgres_url, f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
        _query(postgres_url, f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
        guest_url = make_conninfo(**{**conninfo_to_dict(postgres_url), "user": role})
        for quiet in (False, True):  # with warnings off, PostgreSQL skips the table without a word
            if quiet:
                _query(postgres_url, f"ALTER ROLE {role} SET client_min_messages = error")
            guest = open_postgres(guest_url)
            try:
                with pytest.raises(StorageError, match=r"stopped at the \w+ table: PostgreSQL skipped it.*owner"):
                    guest.vacuum()
            finally:
                guest.close()
    finally:
        _query(postgres_url, f"DROP OWNED BY {role}")
        _query(postgres_url, f"DROP ROLE {role}")


def test_vacuum_gives_up_on_a_table_another_session_keeps_busy(postgres_url: str) -> None:
    store = open_postgres(postgres_url, busy_timeout_seconds=0.5)
    try:
        with psycopg.connect(postgres_url) as reader:
            reader.execute("SELECT count(*) FROM turns").fetchall()  # a long transaction, still open
            with pytest.raises(StorageError, match=r"kept the turns table busy for 0\.5 s"):
                store.vacuum()
        assert store.vacuum() is True
        # The pooled connection is handed back with the server's own lock timeout.
        assert store._read(lambda connection: connection.execute("SHOW lock_timeout").fetchall()) == [("0",)]
    finally:
        store.close()


# -- vectors ------------------------------------------------------------------------------------


def test_each_model_gets_an_hnsw_index_that_its_queries_use(store: PostgresStore, postgres_url: str) -> None:
    store.insert_turns([_turn(f"t{n}") for n in range(50)], _unit_rows(50, 8, 1), MODEL)
    store.put_vectors("other-model", [1, 2], _unit_rows(2, 16, 2))
    indexes = _query(postgres_url, "SELECT model_id, dimension, index_name FROM vector_indexes ORDER BY model_id")
    assert [(model, dimension) for model, dimension, _ in indexes] == [("other-model", 16), (MODEL, 8)]
    definitions = dict(
        _query(postgres_url, "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'turn_vectors'")
    )
    for _, dimension, name in indexes:
        assert "USING hnsw" in str(definitions[name]) and f"vector({dimension})" in str(definitions[name])
    mine = next(name for model, _, name in indexes if model == MODEL)
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        configure_connection(connection)
        connection.execute("BEGIN; SET LOCAL enable_seqscan = off")
        query = _unit_rows(1, 8, 3)[0]
        statement = approximate_statement(MODEL, 8)
        plan = connection.execute(
            b"EXPLAIN " + statement.as_bytes(connection), (PgVector(query), "ana", PgVector(query), 5)
        ).fetchall()
        connection.execute("ROLLBACK")
    assert any(f"Index Scan using {mine}" in str(row[0]) for row in plan), plan


def test_speakers_are_read_through_the_partial_speaker_index(store: PostgresStore, postgres_url: str) -> None:
    # On a small table the planner may rightly prefer a scan; with scans priced out, a query the
    # partial index cannot serve (its WHERE no longer implying the index's) would still show one.
    named = [replace(_turn(f"t{n}"), name=("Ana", "Bo", "Cy")[n % 3]) for n in range(30)]
    store.insert_turns(named, None, MODEL)
    assert store.speakers("ana", 200) == ["Ana", "Bo", "Cy"]
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("BEGIN; SET LOCAL enable_seqscan = off")
        plan = [str(row[0]) for row in connection.execute("EXPLAIN " + _SPEAKERS, {"user": "ana", "limit": 200})]
        connection.execute("ROLLBACK")
    scans = [step for step in plan if " on turns" in step]
    assert scans and all("using turns_by_speaker on turns" in step for step in scans), plan


def test_nearest_is_exact_for_a_user_the_index_candidates_miss(store: PostgresStore) -> None:
    vectors = _unit_rows(400, 8, 4)
    store.insert_turns([_turn(f"big{n}", user_id="big") for n in range(397)], vectors[:397], MODEL)
    small = store.insert_turns([_turn(f"small{n}", user_id="small") for n in range(3)], vectors[397:], MODEL)
    found = store.nearest(MODEL, "small", vectors[0], 10)
    assert sorted(seq for seq, _ in found) == small
    expected = sorted(range(3), key=lambda n: -float(vectors[397 + n] @ vectors[0]))
    assert [seq for seq, _ in found] == [small[n] for n in expected]
    big = store.nearest(MODEL, "big", vectors[5], 10)
    assert big[0][0] == 6 and len(big) == 10  # seqs start at 1
    store.delete("big5", "big")
    assert 6 not in {seq for seq, _ in store.nearest(MODEL, "big", vectors[5], 10)}


def test_vector_ids_grow_in_commit_order_for_concurrent_writers(postgres_url: str) -> None:
    writers = [open_postgres(postgres_url) for _ in range(2)]
    reader = open_postgres(postgres_url)
    written: list[int] = []
    seen: set[int] = set()
    done = threading.Event()

    def write(index: int) -> None:
        for n in range(40):
            written.extend(writers[index].insert_turns([_turn(f"w{index}-{n}")], _unit_rows(1, 4, n), MODEL))

    def read() -> None:
        high_water = 0
        while True:
            finished = done.is_set()
            batch = reader.vectors_after(MODEL, "ana", high_water)
            seen.update(batch.seqs.tolist())
            high_water = batch.high_water
            if finished:
                return

    threads = [threading.Thread(target=write, args=(index,)) for index in (0, 1)]
    catch_up = threading.Thread(target=read)
    catch_up.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    done.set()
    catch_up.join(60)
    for store in [*writers, reader]:
        store.close()
    assert len(written) == 80 and seen == set(written)  # catching up by id never skipped a commit


# -- limits of the server ------------------------------------------------------------------------


def test_a_message_too_big_for_a_full_text_vector_is_invalid_input_and_stores_nothing(
    postgres_url: str, tmp_path: Path
) -> None:
    with Memory(tmp_path, storage_url=postgres_url, embedder=HashEmbedder(), background=False) as memory:
        with pytest.raises(InvalidInput, match="tsvector"):
            memory.add(distinct_words(82_000, 1), user_id="big")  # ~900 KB, under max_text_bytes
        assert memory.history(user_id="big") == []


def test_a_search_term_of_thousands_of_parts_is_cut_not_a_server_error(store: PostgresStore) -> None:
    long_term = "_".join(f"v{n}" for n in range(16_000))
    assert len(match_terms(f'"{long_term}"')[0]) == retrieval.MAX_TERM_CHARS
    store.insert_turns([_turn("t1", "hello world v1_v2")], None, MODEL)
    store.fulltext(f'"{long_term}"', "ana", SearchFilters(), 10)  # answered, whatever it finds


def test_a_dropped_connection_is_replaced_before_use(postgres_url: str, tmp_path: Path) -> None:
    with Memory(tmp_path, storage_url=postgres_url, embedder=HashEmbedder(), background=False) as memory:
        memory.add("warm up", user_id="ana")
        memory.search("warm", user_id="ana")
        _query(
            postgres_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        memory.add("after the restart", user_id="ana")
        assert [hit.content for hit in memory.search("restart", user_id="ana")][:1] == ["after the restart"]


def test_a_forget_racing_a_job_of_the_same_user_leaves_nothing_derived(postgres_url: str, tmp_path: Path) -> None:
    open_postgres(postgres_url).close()
    # The job's transaction stretched to seconds, as a slow disk or a busy server would.
    _query(
        postgres_url,
        "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$",
    )
    _query(postgres_url, "CREATE TRIGGER slow AFTER INSERT ON derived FOR EACH ROW EXECUTE FUNCTION slow()")
    with Memory(tmp_path / "home", storage_url=postgres_url, embedder=HashEmbedder(), background=False) as memory:
        memory.add("I live in Paris and my name is Bob.", user_id="alice")
        worker = threading.Thread(target=memory.parts.worker.drain)
        worker.start()
        time.sleep(0.5)  # the job is inside its slow transaction
        assert memory.forget(user_id="alice").turns == 1
        worker.join(60)
    _query(postgres_url, "DROP TRIGGER slow ON derived")
    for table in ("turns", "derived", "cells", "entities", "entity_edges"):
        assert _query(postgres_url, f"SELECT count(*) FROM {table} WHERE user_id = 'alice'") == [(0,)], table
