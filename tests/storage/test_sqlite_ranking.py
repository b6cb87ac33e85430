"""BM25 over one user's rows of a shared FTS5 index ranks with that user's own term statistics."""

from __future__ import annotations

import math
import sqlite3

import pytest

from memstrata.storage.sqlite.ranking import IDF_FLOOR, fts5_idf, indexed_rows, population, ranked_for_user

ANA = ["we go to lisbon", "lisbon trams are yellow", "we go sailing often", "sailing near cascais today"]


def _index(rows: list[tuple[str, str]]) -> sqlite3.Connection:
    """Turns of (user, text) in a table and an FTS5 index over them, committed."""
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE turns (seq INTEGER PRIMARY KEY, user_id TEXT NOT NULL)")
    connection.execute("CREATE INDEX turns_by_user ON turns (user_id)")
    connection.execute("CREATE VIRTUAL TABLE turns_fts USING fts5 (content, name)")
    for seq, (user, text) in enumerate(rows, start=1):
        connection.execute("INSERT INTO turns (seq, user_id) VALUES (?, ?)", (seq, user))
        connection.execute("INSERT INTO turns_fts (rowid, content, name) VALUES (?, ?, ?)", (seq, text, user))
    connection.commit()
    return connection


def _ranked(
    connection: sqlite3.Connection, terms: list[str], kept: str = "1", limit: int = 10
) -> list[tuple[int, float]]:
    return ranked_for_user(
        connection,
        fts="turns_fts",
        table="turns",
        rank="-bm25(turns_fts, 1.0, 0.5)",
        parts=terms,
        user_id="ana",
        kept=kept,
        kept_parameters=[],
        limit=limit,
        people=population(connection, "turns_fts", "turns", "ana"),
    )


def test_fts5_idf_is_the_one_bm25_ranks_with() -> None:
    connection = _index([("ana", text) for text in ANA])
    [(score,)] = connection.execute(
        "SELECT -bm25(turns_fts) FROM turns_fts WHERE turns_fts MATCH '\"cascais\"'"
    ).fetchall()
    # One hit in a row of 5 tokens (4 words and the name), as long as the average: with k1 = 1.2
    # and b = 0.75, the hit's part is 1 x 2.2 / (1 + 1.2), and the score is the idf alone.
    assert score == pytest.approx(fts5_idf(4, 1)) == pytest.approx(math.log(3.5 / 1.5))
    assert fts5_idf(4, 3) == IDF_FLOOR  # in most rows: floored, as FTS5 floors it
    assert indexed_rows(connection, "turns_fts") == 4


def test_what_other_users_stored_never_moves_a_users_ranking() -> None:
    terms = ['"lisbon"', '"sailing"', '"go"']
    alone = _index([("ana", text) for text in ANA])
    # Bob's turns are as long as ana's, so the average length BM25 reads is the same; he says
    # "lisbon" everywhere (common in the index, rare for ana) and never "sailing".
    bob = ["lisbon lisbon lisbon lisbon"] * 4
    shared = _index([*(("bob", text) for text in bob), *(("ana", text) for text in ANA)])
    expected = [(seq + 4, score) for seq, score in _ranked(alone, terms)]
    found = _ranked(shared, terms)
    assert [seq for seq, _ in found] == [seq for seq, _ in expected]
    assert [score for _, score in found] == pytest.approx([score for _, score in expected])
    # FTS5's own bm25 over the shared index ranks ana's rows otherwise: the oracle this closes.
    global_order = [
        seq
        for (seq,) in shared.execute(
            "SELECT t.seq FROM turns_fts JOIN turns t ON t.seq = turns_fts.rowid"
            " WHERE turns_fts MATCH ? AND t.user_id = 'ana' ORDER BY bm25(turns_fts, 1.0, 0.5), t.seq",
            [" OR ".join(terms)],
        )
    ]
    assert global_order != [seq for seq, _ in expected]


def test_the_kept_rows_are_ranked_but_statistics_count_all_the_users_rows() -> None:
    shared = _index([("bob", "sailing lisbon"), *(("ana", text) for text in ANA)])
    everything = dict(_ranked(shared, ['"sailing"', '"lisbon"']))
    narrowed = _ranked(shared, ['"sailing"', '"lisbon"'], kept="x.seq > 3")
    assert narrowed == sorted(((seq, score) for seq, score in everything.items() if seq > 3), key=lambda p: -p[1])
    assert _ranked(shared, ['"sailing"'], limit=1) == [
        max(((seq, score) for seq, score in _ranked(shared, ['"sailing"'])), key=lambda p: p[1])
    ]
    assert _ranked(shared, []) == [] and _ranked(shared, ['"nowhere"']) == []


def test_a_window_scores_only_the_most_recent_matches() -> None:
    # The oldest row says "lisbon" three times (the best score); four later rows once each.
    rows = [("ana", "lisbon lisbon lisbon")] + [("ana", f"lisbon trip {n}") for n in range(4)] + [("ana", "porto")]
    connection = _index(rows)
    people = population(connection, "turns_fts", "turns", "ana")

    def ranked(window: int | None) -> list[int]:
        found = ranked_for_user(
            connection,
            fts="turns_fts",
            table="turns",
            rank="-bm25(turns_fts, 1.0, 0.5)",
            parts=['"lisbon"'],
            user_id="ana",
            kept="1",
            kept_parameters=[],
            limit=10,
            people=people,
            window=window,
        )
        return [seq for seq, _ in found]

    assert ranked(None)[0] == 1 and sorted(ranked(None)) == [1, 2, 3, 4, 5]
    assert sorted(ranked(3)) == [3, 4, 5]  # the three latest matches; the best, oldest one is out of the window
    assert ranked(100) == ranked(None)  # a window wider than the matches changes nothing


@pytest.mark.parametrize("window", [None, 3])
def test_an_unfiltered_lone_user_ranks_without_the_table_as_with_it(window: int | None) -> None:
    connection = _index([("ana", text) for text in [*ANA, "lisbon sailing", "go go lisbon", "trams near lisbon"]])
    people = population(connection, "turns_fts", "turns", "ana")

    def ranked(kept: str) -> list[tuple[int, float]]:
        return ranked_for_user(
            connection,
            fts="turns_fts",
            table="turns",
            rank="-bm25(turns_fts, 1.0, 0.5)",
            parts=['"lisbon"', '"go"'],
            user_id="ana",
            kept=kept,
            kept_parameters=[],
            limit=10,
            people=people,
            window=window,
        )

    unfiltered = ranked("1")
    assert unfiltered == ranked("1 AND 1")  # the same condition spelt otherwise: joined to the table
    assert ranked("x.seq <> 6") == ranked("1 AND x.seq <> 6") != unfiltered
    # Only the index is read: a row the table lacks (never so in a store, whose triggers keep
    # the two in step) is still found, and a query through the table drops it.
    connection.execute("DELETE FROM turns WHERE seq = 6")
    assert 6 in {seq for seq, _ in ranked("1")} and 6 not in {seq for seq, _ in ranked("1 AND 1")}
