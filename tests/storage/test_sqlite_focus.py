"""Common query terms are dropped, or kept to a turn's own text, once the user's turns are many."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.storage.focus import FOCUS_MIN_TURNS
from memstrata.storage.sqlite import focus as sqlite_focus
from memstrata.storage.sqlite import retrieval as sqlite_retrieval
from memstrata.storage.sqlite.focus import focus, focused_match
from memstrata.storage.sqlite.ranking import Population, population


def _index(turns: int, others: int = 0, path: Path | None = None) -> sqlite3.Connection:
    """An in-memory turns_fts like migration 4's: every one of ana's turns says "go", one in eight "family".

    ``others`` more turns are bob's, and every one of them says "family".
    """
    connection = sqlite3.connect(":memory:" if path is None else path)
    connection.execute("CREATE TABLE turns (seq INTEGER PRIMARY KEY, user_id TEXT NOT NULL)")
    connection.execute("CREATE INDEX turns_by_user ON turns (user_id)")
    connection.execute("CREATE VIRTUAL TABLE turns_fts USING fts5 (content, name, near, far)")
    rows = [
        (seq, "ana", "we go" + (" with family" if seq % 8 == 0 else "") + (" to lisbon" if seq == 7 else ""))
        for seq in range(1, turns + 1)
    ] + [(seq, "bob", "family dinner") for seq in range(turns + 1, turns + others + 1)]
    connection.executemany("INSERT INTO turns (seq, user_id) VALUES (?, ?)", [(seq, user) for seq, user, _ in rows])
    connection.executemany(
        "INSERT INTO turns_fts (rowid, content, name, near, far) VALUES (?, ?, 'ana', '', '')",
        [(seq, text) for seq, _, text in rows],
    )
    connection.commit()  # FTS5 writes the row count it ranks with on commit
    return connection


def _focused(connection: sqlite3.Connection, match: str, user: str = "ana") -> str:
    return focused_match(connection, match, population(connection, "turns_fts", "turns", user), user)


def test_a_large_index_drops_common_terms_and_keeps_rare_ones() -> None:
    connection = _index(FOCUS_MIN_TURNS)
    assert _focused(connection, '"go" OR "family" OR "lisbon"') == '{content name}: "family" OR "lisbon"'


def test_when_every_term_is_common_the_rarest_is_kept_in_the_turns_own_text() -> None:
    connection = _index(FOCUS_MIN_TURNS)
    assert _focused(connection, '"go" OR "we"') == '{content name}: "go"'
    found = connection.execute(
        "SELECT count(*) FROM turns_fts WHERE turns_fts MATCH ?", [_focused(connection, '"go" OR "we"')]
    ).fetchone()[0]
    assert found == FOCUS_MIN_TURNS


def test_a_small_index_or_an_unquoted_expression_is_left_alone() -> None:
    assert _focused(_index(100), '"go" OR "family"') == '"go" OR "family"'
    assert _focused(_index(FOCUS_MIN_TURNS), "go family") == "go family"


def test_what_other_users_say_never_changes_which_of_a_users_terms_are_searched() -> None:
    # Bob says "family" in every one of his turns, which makes it common in the index, not in ana's turns.
    alone, shared = _index(FOCUS_MIN_TURNS), _index(FOCUS_MIN_TURNS, others=3 * FOCUS_MIN_TURNS)
    match = '"go" OR "family" OR "lisbon"'
    assert _focused(shared, match) == _focused(alone, match) == '{content name}: "family" OR "lisbon"'
    assert population(shared, "turns_fts", "turns", "ana") == Population(4 * FOCUS_MIN_TURNS, FOCUS_MIN_TURNS)
    # Bob's turns are few by his own count: his queries run as they are.
    assert _focused(_index(FOCUS_MIN_TURNS, others=10), '"family"', user="bob") == '"family"'


def test_a_budget_keeps_the_rarest_terms_that_fit_it_in_the_querys_order() -> None:
    counts = {'"a"': 9_000, '"b"': 300, '"c"': 2_000, '"d"': 500}
    people = Population(indexed=FOCUS_MIN_TURNS * 10, users_rows=FOCUS_MIN_TURNS * 10)
    match = " OR ".join(counts)
    assert focus(match, people, counts.__getitem__, counts.__getitem__, budget=2_900) == '"b" OR "c" OR "d"'
    assert focus(match, people, counts.__getitem__, counts.__getitem__, budget=100) == '"b"'  # the rarest always
    assert focus(match, people, counts.__getitem__, counts.__getitem__) == match  # no budget: as before


def test_one_large_memory_is_focused_from_its_latest_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_focus, "BOUNDED_MIN_TURNS", 1_000)
    monkeypatch.setattr(sqlite_focus, "SAMPLE_TURNS", 100)
    connection = _index(FOCUS_MIN_TURNS)
    people = population(connection, "turns_fts", "turns", "ana")
    assert sqlite_focus.is_bounded(people)
    # "lisbon" is in turn 7 only, far from the latest 100: estimated at 0 and kept; "go" is in all of them.
    assert _focused(connection, '"go" OR "lisbon"') == '"lisbon"'
    # "family" is in one of eight of the latest turns: about 12% of all, searched in the turn's own text.
    assert _focused(connection, '"go" OR "family"') == '{content name}: "family"'
    monkeypatch.setattr(sqlite_focus, "SCORED_ROW_BUDGET", 100)
    assert _focused(connection, '"go" OR "family" OR "lisbon"') == '"lisbon"'

    # Beside another user, who says "family" in all of the latest turns of the store: the sample is ana's own.
    shared = _index(FOCUS_MIN_TURNS, others=FOCUS_MIN_TURNS)
    assert sqlite_focus.is_bounded(population(shared, "turns_fts", "turns", "ana"))
    assert _focused(shared, '"go" OR "family" OR "lisbon"') == '"lisbon"'
    monkeypatch.setattr(sqlite_focus, "SCORED_ROW_BUDGET", 10_000)
    assert _focused(shared, '"go" OR "family"') == '{content name}: "family"'


def test_a_large_memorys_search_scores_its_latest_matches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_focus, "FOCUS_MIN_TURNS", 50)
    monkeypatch.setattr(sqlite_focus, "BOUNDED_MIN_TURNS", 100)
    monkeypatch.setattr(sqlite_focus, "SAMPLE_TURNS", 20)
    monkeypatch.setattr(sqlite_retrieval, "SCORED_ROW_BUDGET", 5)
    texts = [f"turn {index} about sailing near lisbon" for index in range(200)]
    with Memory(tmp_path, background=False, embedder="hash") as memory:
        memory.add([{"role": "user", "content": text} for text in texts], user_id="ana", session_id="s")
        hits = memory.search("sailing", user_id="ana", mode="fulltext", limit=10)
    assert len(hits) == 5  # the window: five matches scored
    assert {hit.content for hit in hits} == set(texts[-5:])


def test_a_large_memorys_term_counts_and_sample_are_read_again_only_once_its_latest_turns_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_focus, "BOUNDED_MIN_TURNS", 1_000)
    monkeypatch.setattr(sqlite_focus, "SAMPLE_TURNS", 100)
    connection = _index(FOCUS_MIN_TURNS, path=tmp_path / "store.db")
    counted: list[str] = []
    walks: list[str] = []  # reads of the sample's first turn, a walk down SAMPLE_TURNS index entries

    def trace(sql: str) -> None:
        (counted if "count(*)" in sql else walks if "OFFSET" in sql else []).append(sql)

    connection.set_trace_callback(trace)
    assert _focused(connection, '"go" OR "family"') == '{content name}: "family"'
    assert len(counted) == 2 and len(walks) == 1  # one count per term
    assert _focused(connection, '"go" OR "family"') == '{content name}: "family"'
    assert len(counted) == 2 and len(walks) == 1  # the same latest turns: the counts and the sample are reused
    more = range(FOCUS_MIN_TURNS + 1, FOCUS_MIN_TURNS + 11)  # a tenth of the sample, all saying "family"
    connection.executemany("INSERT INTO turns (seq, user_id) VALUES (?, 'ana')", [(seq,) for seq in more])
    connection.executemany(
        "INSERT INTO turns_fts (rowid, content, name, near, far) VALUES (?, 'we go with family', 'ana', '', '')",
        [(seq,) for seq in more],
    )
    connection.commit()
    _focused(connection, '"go" OR "family"')
    assert len(counted) == 4 and len(walks) == 2  # the sample moved by a tenth of its turns: counted again


def test_forget_drops_the_counts_kept_for_the_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_focus, "FOCUS_MIN_TURNS", 50)
    monkeypatch.setattr(sqlite_focus, "BOUNDED_MIN_TURNS", 100)
    monkeypatch.setattr(sqlite_focus, "SAMPLE_TURNS", 20)
    with Memory(tmp_path, background=False, embedder="hash") as memory:
        for user in ("ana@example.com", "bob"):
            memory.add([{"role": "user", "content": f"sailing {n}"} for n in range(120)], user_id=user, session_id="s")
            memory.search("sailing", user_id=user, mode="fulltext")
        kept = [key for key in (*sqlite_focus._ESTIMATES, *sqlite_focus._FLOORS) if key[1] == "ana@example.com"]
        assert kept  # her large memory's counts were kept between searches
        memory.forget(user_id="ana@example.com")
        assert not [key for key in (*sqlite_focus._ESTIMATES, *sqlite_focus._FLOORS) if "ana@example.com" in key]
        assert [key for key in sqlite_focus._FLOORS if key[1] == "bob"]  # others' stay
