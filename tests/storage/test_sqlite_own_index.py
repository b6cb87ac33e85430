"""A small user of a shared SQLite store is ranked in an index of their own rows: as if alone in the store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.models import SearchFilters
from memstrata.storage.sqlite import own_index
from memstrata.storage.sqlite.own_index import OwnIndexCache, OwnRows, ranked_in_own_index, ranks_in_own_index
from memstrata.storage.sqlite.ranking import Population, population, ranked_for_user

ANA = [
    "we go to lisbon in may",
    "lisbon trams are yellow and old",
    "we go sailing often near cascais",
    "sailing is what we love, sailing every weekend",
    "my sister lives in porto",
]
OWN = OwnRows(
    name="own_test",
    columns=("content", "name"),
    values=("f.content", "f.name"),
    joins="CROSS JOIN turns_fts f ON f.rowid = x.seq",
    weights="1.0, 0.5",
)


def _index(rows: list[tuple[str, str]]) -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("CREATE TABLE turns (seq INTEGER PRIMARY KEY, user_id TEXT NOT NULL, kind TEXT)")
    connection.execute("CREATE INDEX turns_by_user ON turns (user_id)")
    connection.execute(
        "CREATE VIRTUAL TABLE turns_fts USING fts5 (content, name, tokenize='porter unicode61 remove_diacritics 2')"
    )
    for seq, (user, text) in enumerate(rows, start=1):
        kind = "odd" if seq % 2 else "even"
        connection.execute("INSERT INTO turns (seq, user_id, kind) VALUES (?, ?, ?)", (seq, user, kind))
        connection.execute("INSERT INTO turns_fts (rowid, content, name) VALUES (?, ?, ?)", (seq, text, user))
    return connection


def _own(connection: sqlite3.Connection, match: str, kept: str = "1", limit: int = 10) -> list[tuple[int, float]]:
    return ranked_in_own_index(
        connection, OWN, table="turns", match=match, user_id="ana", kept=kept, kept_parameters=[], limit=limit
    )


def _alone(connection: sqlite3.Connection, match: str, kept: str = "1", limit: int = 10) -> list[tuple[int, float]]:
    return ranked_for_user(
        connection,
        fts="turns_fts",
        table="turns",
        rank="-bm25(turns_fts, 1.0, 0.5)",
        parts=match.split(" OR "),
        user_id="ana",
        kept=kept,
        kept_parameters=[],
        limit=limit,
        people=population(connection, "turns_fts", "turns", "ana"),
    )


def test_the_own_index_ranks_as_the_store_holding_the_user_alone() -> None:
    match = '"lisbon" OR "sailing" OR "go" OR "porto"'
    alone = _index([("ana", text) for text in ANA])
    # Bob says "lisbon" and "sailing" everywhere, in long rows: in the shared index both terms are
    # common and the rows longer on average, so FTS5's bm25 alone would rank ana's rows otherwise.
    shared = _index([("bob", "lisbon sailing lisbon sailing and more words " * 4)] * 40 + [("ana", t) for t in ANA])
    expected = _alone(alone, match)
    found = _own(shared, match)
    assert [seq - 40 for seq, _ in found] == [seq for seq, _ in expected]
    assert [score for _, score in found] == pytest.approx([score for _, score in expected], rel=1e-12)
    assert len(found) == 5


def test_kept_narrows_the_results_and_never_the_statistics() -> None:
    match = '"lisbon" OR "sailing"'
    alone = _index([("ana", text) for text in ANA])
    shared = _index([("bob", "nothing in common")] * 10 + [("ana", t) for t in ANA])
    expected = [(seq + 10, score) for seq, score in _alone(alone, match, kept="x.kind = 'odd'")]
    # Seqs shift by ten, an even number: the same rows are odd in both stores.
    found = _own(shared, match, kept="x.kind = 'odd'")
    assert [seq for seq, _ in found] == [seq for seq, _ in expected]
    assert [score for _, score in found] == pytest.approx([score for _, score in expected])
    assert {seq - 10 for seq, _ in found} == {1, 3}
    assert _own(shared, match, limit=1) == [max(_own(shared, match), key=lambda pair: pair[1])]
    assert _own(shared, match, limit=0) == []


def test_the_copy_lives_for_one_query_and_bad_input_raises() -> None:
    shared = _index([("bob", "lisbon")] * 10 + [("ana", t) for t in ANA])
    assert _own(shared, '"lisbon"')
    memory_index = own_index._own_connection()
    assert memory_index.execute("SELECT count(*) FROM own_test").fetchone() == (0,)
    with pytest.raises(sqlite3.OperationalError):
        _own(shared, '"lisbon" AND')  # a malformed expression is FTS5's error, and leaves nothing behind
    assert memory_index.execute("SELECT count(*) FROM own_test").fetchone() == (0,)
    assert _own(_index([("bob", "lisbon")]), '"lisbon"') == []  # a user without rows
    with pytest.raises(ValueError, match="not an index name"):
        OwnRows(name="x; drop", columns=("c",), values=("c",))
    with pytest.raises(ValueError, match="one value per column"):
        OwnRows(name="x", columns=("c", "d"), values=("c",))


def test_which_users_are_ranked_in_their_own_index() -> None:
    assert not ranks_in_own_index(Population(indexed=20, users_rows=20))  # alone: the shared index is theirs
    assert ranks_in_own_index(Population(indexed=200_000, users_rows=20))
    assert not ranks_in_own_index(Population(indexed=200_000, users_rows=10_000))  # too many to copy
    assert not ranks_in_own_index(Population(indexed=1_000, users_rows=100))  # a large share: the index is cheap


def _fill(memory: Memory, user: str, texts: list[str], session: str = "s") -> None:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(texts)]
    memory.add(messages, user_id=user, session_id=session)


@pytest.mark.parametrize("mode", ["fulltext", "hybrid"])
def test_a_small_users_search_in_a_crowded_store_equals_their_search_alone(tmp_path: Path, mode: str) -> None:
    settings = {"background": False, "embedder": "hash"}
    crowd = [f"lisbon sailing lisbon trip number {n} with many yellow trams" for n in range(300)]
    with Memory(tmp_path / "alone", **settings) as alone, Memory(tmp_path / "crowded", **settings) as crowded:
        for memory in (alone, crowded):
            _fill(memory, "ana", ANA[:3], session="one")
            _fill(memory, "ana", ANA[3:], session="two")
        for start in range(0, len(crowd), 2):
            _fill(crowded, f"user-{start}", crowd[start : start + 2])
        store = crowded.parts.store
        people = store._read(lambda c: population(c, "turns_fts", "turns", "ana"))  # type: ignore[attr-defined]
        assert ranks_in_own_index(people)  # the crowded store takes the own-index path for ana
        for query in ["sailing to lisbon", "yellow trams", "where does my sister live"]:
            for session in (None, "two"):
                expected = alone.search(query, user_id="ana", mode=mode, session_id=session)
                found = crowded.search(query, user_id="ana", mode=mode, session_id=session)
                assert found or session is not None, query
                assert [hit.content for hit in found] == [hit.content for hit in expected]
                assert [hit.score for hit in found] == pytest.approx([hit.score for hit in expected])


def test_derived_items_are_ranked_in_the_users_own_index_too(tmp_path: Path) -> None:
    settings = {"background": False, "embedder": "hash"}
    ana = "I live in Lisbon and I love sailing. My sister Maria lives in Porto."
    tiers = ("longterm", "midterm", "scene", "consolidation")
    found: dict[str, list[tuple[str, float]]] = {}
    for name, others in (("alone", 0), ("crowded", 160)):
        with Memory(tmp_path / name, **settings) as memory:
            _fill(memory, "ana", [ana, "Nice!"])
            for index in range(others):
                _fill(memory, f"user-{index}", [f"I live in Lisbon, flat {index}, and my sister Eva sails."])
            memory.flush(None)
            store = memory.parts.store
            people = store._read(lambda c: population(c, "derived_fts", "derived", "ana"))  # type: ignore[attr-defined]
            assert ranks_in_own_index(people) == (others > 0)
            ranked = store.derived_fulltext('"lisbon" OR "sister" OR "sailing"', "ana", 10, tiers=tiers)
            contents = store._read(  # type: ignore[attr-defined]
                lambda c: dict(c.execute("SELECT seq, content FROM derived WHERE user_id = 'ana'").fetchall())
            )
            found[name] = [(contents[seq], score) for seq, score in ranked]
    assert len(found["alone"]) >= 2
    assert [content for content, _ in found["crowded"]] == [content for content, _ in found["alone"]]
    assert [score for _, score in found["crowded"]] == pytest.approx([score for _, score in found["alone"]])


def test_a_federated_search_ranks_each_small_owner_as_its_own_search_does(tmp_path: Path) -> None:
    with Memory(tmp_path, background=False, embedder="hash") as memory:
        _fill(memory, "ana", ANA)
        _fill(memory, "bea", ANA[::-1])
        for index in range(300):
            _fill(memory, f"user-{index}", [f"lisbon sailing trams number {index}"])
        memory.flush(None)
        store = memory.parts.store
        match = '"lisbon" OR "sailing" OR "sister"'
        together = store.fulltext_many(match, ["ana", "bea"], SearchFilters(), 10)
        for owner in ("ana", "bea"):
            assert together[owner] and together[owner] == store.fulltext(match, owner, SearchFilters(), 10)
        tiers = ("longterm", "midterm", "scene", "consolidation")
        derived = store.derived_fulltext_many(match, ["ana", "bea"], 10, tiers)
        assert derived["ana"] == store.derived_fulltext(match, "ana", 10, tiers)


def _cached(
    connection: sqlite3.Connection, cache: OwnIndexCache, match: str, user: str = "ana", kept: str = "1"
) -> list[tuple[int, float]]:
    return ranked_in_own_index(
        connection, OWN, table="turns", match=match, user_id=user, kept=kept, kept_parameters=[], limit=10, cache=cache
    )


def _add(connection: sqlite3.Connection, user: str, text: str) -> int:
    seq = int(connection.execute("SELECT coalesce(max(seq), 0) + 1 FROM turns").fetchone()[0])
    connection.execute("INSERT INTO turns (seq, user_id, kind) VALUES (?, ?, 'odd')", (seq, user))
    connection.execute("INSERT INTO turns_fts (rowid, content, name) VALUES (?, ?, ?)", (seq, text, user))
    return seq


def _counting_copies(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    copies: list[str] = []
    copied = own_index._copied

    def counted(connection: sqlite3.Connection, rows: OwnRows, table: str, user_id: str, **kept: object) -> object:
        copies.append(user_id)
        return copied(connection, rows, table, user_id, **kept)  # type: ignore[arg-type]

    monkeypatch.setattr(own_index, "_copied", counted)
    return copies


def test_a_kept_own_index_ranks_as_a_fresh_one_until_the_users_rows_change(monkeypatch: pytest.MonkeyPatch) -> None:
    shared = _index([("bob", "lisbon sailing")] * 30 + [("ana", t) for t in ANA])
    match = '"lisbon" OR "sailing" OR "porto"'
    fresh, sister = _own(shared, match), _own(shared, '"sister"')
    copies = _counting_copies(monkeypatch)
    cache = OwnIndexCache()
    first = _cached(shared, cache, match)
    assert first == fresh and len(first) == 5
    assert _cached(shared, cache, '"sister"') == sister
    assert copies == ["ana"]  # the second search ranked in the kept index
    _add(shared, "bob", "porto porto porto")  # another user's write changes nothing of ana's
    assert _cached(shared, cache, match) == first and copies == ["ana"]
    added = _add(shared, "ana", "porto again, from lisbon")
    after = _cached(shared, cache, match)
    assert added in [seq for seq, _ in after] and len(copies) == 2
    assert after == _own(shared, match)
    shared.execute("DELETE FROM turns WHERE seq = ?", (added,))
    shared.execute("DELETE FROM turns_fts WHERE rowid = ?", (added,))
    copies.clear()
    assert _cached(shared, cache, match) == first and copies == ["ana"]
    # A filtered search is not kept: it copies, ranks and leaves nothing, as without a cache.
    odd = _cached(shared, cache, match, kept="x.kind = 'odd'")
    assert odd == _own(shared, match, kept="x.kind = 'odd'") and len(odd) < len(first)
    assert _cached(shared, cache, match, user="nobody") == []
    cache.close()


def test_the_kept_indexes_hold_at_most_their_rows_and_forget_drops_a_user() -> None:
    shared = _index([(user, f"lisbon {user} {n}") for user in ("ana", "bea", "cid") for n in range(4)])
    cache = OwnIndexCache(max_rows=8)
    for user in ("ana", "bea", "cid"):
        assert _cached(shared, cache, '"lisbon"', user=user)
    assert [user for _, user in cache._kept] == ["bea", "cid"]  # ana, searched least recently, was dropped
    tables = {row[0] for row in cache._connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {kept.table for kept in cache._kept.values()} <= tables
    assert not any(name.startswith("own_test_0") for name in tables)  # ana's table went with her
    assert OwnIndexCache(max_rows=3).ranked(shared, OWN, table="turns", match='"lisbon"', user_id="ana", limit=2)
    cache.forget("bea")
    assert [user for _, user in cache._kept] == ["cid"]
    cache.forget()
    assert not cache._kept and cache._rows == 0
    cache.close()


def test_a_store_keeps_a_small_users_index_and_forgets_it_with_the_user(tmp_path: Path) -> None:
    with Memory(tmp_path, background=False, embedder="hash") as memory:
        _fill(memory, "ana", ANA)
        for index in range(300):
            _fill(memory, f"user-{index}", [f"lisbon sailing trams number {index}"])
        store = memory.parts.store
        assert memory.search("sailing", user_id="ana", mode="fulltext")
        assert ("own_turns", "ana") in store._own_cache._kept  # type: ignore[attr-defined]
        _fill(memory, "ana", ["we bought a red kayak"])
        found = [hit.content for hit in memory.search("kayak", user_id="ana", mode="fulltext")]
        # The new turn, then the two before it, whose neighbour columns took its words: both re-read.
        assert found == ["we bought a red kayak", *ANA[-1:-3:-1]]
        memory.forget(user_id="ana")
        assert ("own_turns", "ana") not in store._own_cache._kept  # type: ignore[attr-defined]
        assert memory.search("kayak", user_id="ana", mode="fulltext") == []


def test_a_malformed_match_leaves_no_table_behind_the_kept_ones() -> None:
    shared = _index([("bob", "lisbon")] * 10 + [("ana", t) for t in ANA])
    cache = OwnIndexCache()
    with pytest.raises(sqlite3.OperationalError):
        _cached(shared, cache, '"lisbon" AND')
    assert _cached(shared, cache, '"lisbon"') == _own(shared, '"lisbon"')
    tables = {row[0] for row in cache._connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {name for name in tables if name.startswith("own_test_") and "_" not in name[9:]} == {
        kept.table for kept in cache._kept.values()
    }
    cache.close()
