"""BM25 over one user's rows of a shared FTS5 index, with that user's own term statistics.

FTS5's ``bm25()`` weighs a term by how rare it is among *all* the rows of its index, every
user's. Then a user's scores, and the order of their own results, would shift when another
user's memories use the same words, which would let one tenant infer what another's
memories hold. FTS5's BM25 is a sum over the query's terms of idf(term) × a part that
depends only on the row (its hits, its length, the average length), so each term is
ranked on its own and its global idf swapped for the user's:

    score(row) = Σ_term bm25_term(row) × idf(user's rows, user's rows with the term)
                                       / idf(all rows, rows with the term)

with FTS5's own idf, log((N − n + 0.5) / (n + 0.5)), floored at 1e-6 as FTS5 floors it.
The average row length, which BM25 also reads, stays the index's: it says how much was
stored in all, never which words. When the user's rows are all the index holds (one user
per store, the embedded default), the statistics are theirs already and one query ranks.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

#: FTS5 floors a non-positive idf at this (fts5_aux.c), so a term in most rows still counts a little.
IDF_FLOOR = 1e-6
#: The id of the FTS5 "averages" record in ``<table>_data``: the row count, then each column's token total.
_AVERAGES_ID = 1
_TABLE_NAME = re.compile(r"[a-z_]+")
#: The ``kept`` condition of a query without filters: every row of the user passes.
UNFILTERED = "1"


@dataclass(frozen=True, slots=True)
class Population:
    """How many rows an FTS5 index holds in all and how many of them are one user's."""

    indexed: int
    users_rows: int

    @property
    def is_whole_index(self) -> bool:
        """Whether the user's rows are all the index holds (its statistics are then the user's)."""
        return self.users_rows >= self.indexed


def population(
    connection: sqlite3.Connection, fts: str, table: str, user_id: str, *, counts: str | None = None
) -> Population:
    """The rows of ``fts`` in all and those of ``user_id`` (``table`` holds the rows, keyed by ``seq``).

    ``counts``: a table of each user's rows (``user_id``, ``turns``) kept by triggers, read
    instead of counting the user's rows.
    """
    for name in (fts, table, counts or table):
        if not _TABLE_NAME.fullmatch(name):
            raise ValueError(f"not a table name: {name!r}")
    indexed = indexed_rows(connection, fts)
    # Two index seeks tell whether anyone else has rows; only then are the user's counted.
    others = connection.execute(
        f"SELECT EXISTS (SELECT 1 FROM {table} WHERE user_id < ?1)"
        f" OR EXISTS (SELECT 1 FROM {table} WHERE user_id > ?1)",
        (user_id,),
    ).fetchone()[0]
    if not others:
        return Population(indexed, indexed)
    if counts is not None:
        row = connection.execute(f"SELECT turns FROM {counts} WHERE user_id = ?", (user_id,)).fetchone()
        # Others have rows: never taken for the whole index (whose rows a search would not check).
        return Population(indexed, min(0 if row is None else int(row[0]), max(0, indexed - 1)))
    users = connection.execute(f"SELECT count(*) FROM {table} WHERE user_id = ?", (user_id,)).fetchone()[0]
    return Population(indexed, int(users))


def indexed_rows(connection: sqlite3.Connection, fts: str) -> int:
    """The row count FTS5 itself ranks with: the first varint of its averages record.

    FTS5 writes that record when a transaction commits, so inside a write transaction it
    may lag the rows written there (no caller ranks there); in a table whose first rows
    are not committed yet there is none, and the rows are counted.
    """
    row = connection.execute(f"SELECT block FROM {fts}_data WHERE id = ?", (_AVERAGES_ID,)).fetchone()
    if row is None or not row[0]:
        return int(connection.execute(f"SELECT count(*) FROM {fts}").fetchone()[0])
    return _first_varint(bytes(row[0]))


def fts5_idf(rows: int, matches: int) -> float:
    """FTS5's idf of a term in ``matches`` of ``rows`` rows."""
    idf = math.log((rows - matches + 0.5) / (matches + 0.5)) if rows > 0 else 0.0
    return idf if idf > 0 else IDF_FLOOR


@contextmanager
def one_snapshot(connection: sqlite3.Connection) -> Iterator[None]:
    """Read the counts and the rows in one read transaction, so a commit between them changes neither."""
    connection.execute("BEGIN")
    try:
        yield
    finally:
        connection.execute("COMMIT")


def ranked_for_user(
    connection: sqlite3.Connection,
    *,
    fts: str,
    table: str,
    rank: str,
    parts: Sequence[str],
    user_id: str,
    kept: str,
    kept_parameters: Sequence[object],
    limit: int,
    people: Population,
    window: int | None = None,
    estimate: Callable[[str], int] | None = None,
) -> list[tuple[int, float]]:
    """The ``limit`` best of ``user_id``'s rows that pass ``kept``, for the terms ``parts``, as (seq, score).

    ``rank`` is the FTS5 rank expression (``-bm25(...)``, higher is better); each part is one
    term of a match expression, with its column filter if any; ``kept`` is a SQL condition
    over the row's table (alias ``x``). Term statistics count all the user's rows, whatever
    ``kept`` narrows, as PostgreSQL's do. With a ``window``, only about the ``window`` most
    recent matches are scored; in a store holding other users too, the user's matches of a
    term are then not counted but taken from ``estimate`` (``_ranked_recent``).
    """
    if not parts or limit < 1:
        return []
    # "+x.user_id": the match drives the join; walking the user's rows and matching each was 30x slower.
    base = f"FROM {fts} JOIN {table} x ON x.seq = {fts}.rowid WHERE {fts} MATCH ? AND +x.user_id = ?"
    if people.is_whole_index:
        match = " OR ".join(parts)
        arguments: list[object] = [match, user_id, *kept_parameters]
        if kept == UNFILTERED:
            # Every row of the index is one of the user's (triggers keep it to the table's rows):
            # the join would only look each match up again, about a third of a large search's cost.
            base, arguments = f"FROM {fts} WHERE {fts} MATCH ?", [match]
        sql = f"SELECT {fts}.rowid, {rank} AS score {base} AND ({kept}) ORDER BY score DESC, {fts}.rowid LIMIT ?"
        bounds: list[object] = [limit]
        if window is not None:
            # FTS5 walks its posting lists newest first and stops after ``window`` matches.
            recent = f"SELECT {fts}.rowid AS seq, {rank} AS score {base} AND ({kept}) ORDER BY {fts}.rowid DESC LIMIT ?"
            sql = f"SELECT seq, score FROM ({recent}) ORDER BY score DESC, seq LIMIT ?"
            bounds = [window, limit]
        return [(int(seq), float(score)) for seq, score in connection.execute(sql, [*arguments, *bounds])]
    if window is not None and estimate is not None:
        return _ranked_recent(
            connection,
            fts=fts,
            rank=rank,
            base=base,
            parts=parts,
            user_id=user_id,
            kept=kept,
            kept_parameters=kept_parameters,
            limit=limit,
            people=people,
            window=window,
            estimate=estimate,
        )
    scores: dict[int, float] = defaultdict(float)
    for part in dict.fromkeys(parts):
        everywhere = connection.execute(f"SELECT count(*) FROM {fts} WHERE {fts} MATCH ?", (part,)).fetchone()[0]
        rows = connection.execute(
            f"SELECT x.seq, {rank}, ({kept}) {base}", [*kept_parameters, part, user_id]
        ).fetchall()
        factor = fts5_idf(people.users_rows, len(rows)) / fts5_idf(people.indexed, int(everywhere))
        for seq, score, is_kept in rows:
            if is_kept:
                scores[int(seq)] += float(score) * factor
    best = sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))
    return best[:limit]


def _ranked_recent(
    connection: sqlite3.Connection,
    *,
    fts: str,
    rank: str,
    base: str,
    parts: Sequence[str],
    user_id: str,
    kept: str,
    kept_parameters: Sequence[object],
    limit: int,
    people: Population,
    window: int,
    estimate: Callable[[str], int],
) -> list[tuple[int, float]]:
    """``ranked_for_user`` of a large memory beside others: each term's latest ``window`` matches, scored alike.

    Each term's posting list is walked newest first for its latest ``window`` matches among
    the user's rows that pass ``kept``. A row is scored only if it is newer than the oldest
    match of every term that filled its window, so each row scored has every term's share.
    A term's idf is the user's, from its estimated matches; the index's is divided out exactly.
    """
    found: list[tuple[str, list[tuple[int, float]]]] = []
    floor = 0
    for part in dict.fromkeys(parts):
        sql = f"SELECT {fts}.rowid, {rank} {base} AND ({kept}) ORDER BY {fts}.rowid DESC LIMIT ?"
        rows = connection.execute(sql, [part, user_id, *kept_parameters, window]).fetchall()
        if len(rows) == window:
            floor = max(floor, int(rows[-1][0]))
        found.append((part, rows))
    scores: dict[int, float] = defaultdict(float)
    for part, rows in found:
        # Even a lone term's factor counts: a federated search merges memories' lists by score.
        everywhere = connection.execute(f"SELECT count(*) FROM {fts} WHERE {fts} MATCH ?", (part,)).fetchone()[0]
        factor = fts5_idf(people.users_rows, estimate(part)) / fts5_idf(people.indexed, int(everywhere))
        for seq, score in rows:
            if seq >= floor:
                scores[int(seq)] += float(score) * factor
    best = sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))
    return best[:limit]


def _first_varint(blob: bytes) -> int:
    """The first SQLite varint of ``blob``: 7 bits a byte, high bit set on all but the last, the ninth whole."""
    value = 0
    for position, byte in enumerate(blob[:9]):
        if position == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return value
