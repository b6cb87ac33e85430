"""BM25 over one user's rows of a shared FTS5 index ranks with that user's own term statistics."""

from __future__ import annotations

import math
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from memstrata import Memory, SearchFilters
from memstrata.storage.sqlite import focus as sqlite_focus
from memstrata.storage.sqlite import retrieval as sqlite_retrieval
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
    connection: sqlite3.Connection,
    terms: list[str],
    kept: str = "1",
    limit: int = 10,
    *,
    window: int | None = None,
    estimate: Callable[[str], int] | None = None,
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
        window=window,
        estimate=estimate,
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


def _exact_count(connection: sqlite3.Connection, user: str) -> Callable[[str], int]:
    def count(part: str) -> int:
        statement = (
            "SELECT count(*) FROM turns_fts JOIN turns t ON t.seq = turns_fts.rowid"
            " WHERE turns_fts MATCH ? AND t.user_id = ?"
        )
        return int(connection.execute(statement, (part, user)).fetchone()[0])

    return count


def test_beside_another_user_a_window_wider_than_the_matches_ranks_as_every_match_does() -> None:
    ana = [f"lisbon {'sailing ' * (n % 3)}trip {n}" for n in range(12)] + ["go go lisbon", "porto"]
    rows = [
        ("bob", "lisbon lisbon"),
        *(("ana", text) for text in ana[:7]),
        ("bob", "sailing"),
        *(("ana", t) for t in ana[7:]),
    ]
    shared = _index(rows)
    terms = ['"lisbon"', '"sailing"', '"go"']
    exact = _ranked(shared, terms, limit=20)
    found = _ranked(shared, terms, limit=20, window=100, estimate=_exact_count(shared, "ana"))
    assert [seq for seq, _ in found] == [seq for seq, _ in exact]
    assert [score for _, score in found] == pytest.approx([score for _, score in exact])


def test_beside_another_user_each_term_scores_the_same_latest_rows() -> None:
    # Ana's rows 1-10 say "lisbon", and every third "sailing" too; bob's rows between say both.
    ana = [f"lisbon {'sailing' if n % 3 == 0 else 'trip'} {n}" for n in range(10)]
    rows = [(user, text) for text in ana for user in ("ana", "bob")]
    shared = _index([(user, text if user == "ana" else "lisbon sailing") for user, text in rows])
    ana_seqs = [seq for seq, (user, _) in enumerate(rows, start=1) if user == "ana"]
    found = _ranked(shared, ['"lisbon"', '"sailing"'], limit=20, window=4, estimate=_exact_count(shared, "ana"))
    # "lisbon"'s latest four of ana's matches start at her seventh row; "sailing" (rows 1, 4, 7, 10)
    # fills its window too, from her first: only rows from the seventh on are scored, by both terms.
    assert sorted(seq for seq, _ in found) == ana_seqs[6:]
    scores = dict(found)
    assert scores[ana_seqs[6]] > scores[ana_seqs[7]]  # "sailing" counted for row 7: it is in both windows
    assert all(seq in ana_seqs for seq in scores)  # never bob's


def test_a_large_memory_beside_another_is_searched_by_its_latest_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_focus, "FOCUS_MIN_TURNS", 50)
    monkeypatch.setattr(sqlite_focus, "BOUNDED_MIN_TURNS", 100)
    monkeypatch.setattr(sqlite_focus, "SAMPLE_TURNS", 20)
    monkeypatch.setattr(sqlite_retrieval, "SCORED_ROW_BUDGET", 5)
    texts = [f"turn {index} about sailing near lisbon" for index in range(200)]
    with Memory(tmp_path, background=False, embedder="hash") as memory:
        memory.add([{"role": "user", "content": text} for text in texts[:150]], user_id="ana", session_id="s")
        memory.add([{"role": "user", "content": "sailing sailing sailing"}] * 30, user_id="bob", session_id="s")
        memory.add([{"role": "user", "content": text} for text in texts[150:]], user_id="ana", session_id="s")
        hits = memory.search("sailing", user_id="ana", mode="fulltext", limit=10)
        assert memory.search("sailing", user_id="bob", mode="fulltext", limit=50)  # bob's few turns: as before
    assert {hit.content for hit in hits} == set(texts[-5:])  # the window: ana's five latest matches


def test_a_large_memory_searched_with_others_gets_the_list_it_gets_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_focus, "FOCUS_MIN_TURNS", 50)
    monkeypatch.setattr(sqlite_focus, "BOUNDED_MIN_TURNS", 100)
    monkeypatch.setattr(sqlite_focus, "SAMPLE_TURNS", 20)
    monkeypatch.setattr(sqlite_retrieval, "SCORED_ROW_BUDGET", 5)
    rng = random.Random(3)
    words = ["sailing", "lisbon", "trams", "porto", "budget", "garden"]
    with Memory(tmp_path, background=False, embedder="hash") as memory:
        for user, turns in (("ana", 150), ("bob", 30), ("ana", 50)):
            said = [" ".join(rng.choices(words, k=4)) for _ in range(turns)]
            memory.add([{"role": "user", "content": text} for text in said], user_id=user, session_id="s")
        store = memory.parts.store
        latest = {
            row[0]
            for row in store._fetch_all("SELECT seq FROM turns WHERE user_id = 'ana' ORDER BY seq DESC LIMIT 30", [])
        }
        for match in ['"sailing"', '"lisbon" OR "garden"', '"porto" OR "trams" OR "budget"']:
            for filters in (SearchFilters(), SearchFilters(session_id="s")):
                together = store.fulltext_many(match, ["ana", "bob", "nobody"], filters, 10)
                alone = {owner: store.fulltext(match, owner, filters, 10) for owner in ["ana", "bob", "nobody"]}
                assert together == alone
                # Ana's is the bounded search: each term's five latest matches, all among her latest turns.
                assert alone["ana"] and {seq for seq, _ in alone["ana"]} <= latest
