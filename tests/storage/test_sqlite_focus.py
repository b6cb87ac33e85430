"""Common query terms are dropped, or kept to a turn's own text, once the index is large."""

from __future__ import annotations

import sqlite3

from memstrata.storage.focus import FOCUS_MIN_TURNS
from memstrata.storage.sqlite.focus import focused_match


def _index(turns: int) -> sqlite3.Connection:
    """An in-memory turns_fts like migration 4's: every turn says "go", one in eight "family"."""
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE VIRTUAL TABLE turns_fts USING fts5 (content, name, near, far)")
    connection.executemany(
        "INSERT INTO turns_fts (rowid, content, name, near, far) VALUES (?, ?, 'ana', '', '')",
        [
            (seq, "we go" + (" with family" if seq % 8 == 0 else "") + (" to lisbon" if seq == 7 else ""))
            for seq in range(1, turns + 1)
        ],
    )
    return connection


def test_a_large_index_drops_common_terms_and_keeps_rare_ones() -> None:
    connection = _index(FOCUS_MIN_TURNS)
    assert focused_match(connection, '"go" OR "family" OR "lisbon"') == '{content name}: "family" OR "lisbon"'


def test_when_every_term_is_common_the_rarest_is_kept_in_the_turns_own_text() -> None:
    connection = _index(FOCUS_MIN_TURNS)
    assert focused_match(connection, '"go" OR "we"') == '{content name}: "go"'
    found = connection.execute(
        "SELECT count(*) FROM turns_fts WHERE turns_fts MATCH ?", [focused_match(connection, '"go" OR "we"')]
    ).fetchone()[0]
    assert found == FOCUS_MIN_TURNS


def test_a_small_index_or_an_unquoted_expression_is_left_alone() -> None:
    assert focused_match(_index(100), '"go" OR "family"') == '"go" OR "family"'
    assert focused_match(_index(FOCUS_MIN_TURNS), "go family") == "go family"
