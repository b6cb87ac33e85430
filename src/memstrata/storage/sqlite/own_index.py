"""A small user's full-text search in an index of their own rows, built in memory for the query.

In a store shared by many users, FTS5 reads each query term's whole posting list, every
user's matches, and ``bm25()`` counts them again for its statistics: a user with twenty
turns paid about 9 ms per thousand other users. When a user's rows are a small share of the
index, copying them into an in-memory FTS5 table with the same tokenizer and ranking there
costs what their own rows cost (about 12 µs a row), whatever the store holds. The ranking is
the one a store holding that user alone gives: term statistics and average row length are
the user's own, so another tenant's memories change neither the scores nor their order.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from memstrata.storage.sqlite.ranking import Population, ranked_for_user

#: Rank in an index of the user's own rows when they are at most this share of the store's ...
OWN_INDEX_MAX_SHARE = 0.02
#: ... and at most this many (copying costs ~12 µs a row; a bigger user is ranked in the shared index).
OWN_INDEX_MAX_ROWS = 5_000
_NAME = re.compile(r"[a-z_]+")


@dataclass(frozen=True, slots=True)
class OwnRows:
    """How to copy one user's rows of an FTS5 index: its columns, their SQL over the rows' table, the tokenizer.

    ``values`` are SQL expressions over the rows' table (alias ``x``) and whatever ``joins``
    adds, one per column of ``columns``; ``weights`` is the ``bm25()`` column weights, as SQL.
    """

    name: str
    columns: tuple[str, ...]
    values: tuple[str, ...]
    joins: str = ""
    weights: str = ""
    tokenize: str = "porter unicode61 remove_diacritics 2"

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name) or not all(_NAME.fullmatch(column) for column in self.columns):
            raise ValueError(f"not an index name or its columns: {self.name!r} {self.columns!r}")
        if len(self.columns) != len(self.values):
            raise ValueError("one value per column")


def ranks_in_own_index(people: Population) -> bool:
    """Whether the user's rows are few enough, and a small enough share of the index, to be ranked on their own."""
    return (
        not people.is_whole_index
        and people.users_rows <= OWN_INDEX_MAX_ROWS
        and people.users_rows <= people.indexed * OWN_INDEX_MAX_SHARE
    )


def ranked_in_own_index(
    connection: sqlite3.Connection,
    rows: OwnRows,
    *,
    table: str,
    match: str,
    user_id: str,
    kept: str,
    kept_parameters: Sequence[object],
    limit: int,
) -> list[tuple[int, float]]:
    """The ``limit`` best of ``user_id``'s rows of ``table`` that pass ``kept``, ranked among their own rows only.

    ``match`` is an FTS5 expression over ``rows.columns``; ``kept`` a SQL condition over the
    rows' table (alias ``x``). Every one of the user's rows is indexed, kept or not, so the
    term statistics are the user's whole, as in the shared index.
    """
    if not _NAME.fullmatch(table):
        raise ValueError(f"not a table name: {table!r}")
    if limit < 1:
        return []
    copied = connection.execute(
        f"SELECT x.seq, ({kept}), {', '.join(rows.values)} FROM {table} x {rows.joins} WHERE x.user_id = ?",
        [*kept_parameters, user_id],
    ).fetchall()
    if not copied:
        return []
    own = _own_connection()
    _create(own, rows)
    columns = ", ".join(rows.columns)
    marks = ", ".join("?" * (len(rows.columns) + 2))
    # Written and ranked in one transaction, then rolled back: FTS5 ranks its pending rows from
    # memory (a fifth of the cost of committing them), and no user's text stays behind.
    own.execute("BEGIN")
    try:
        own.executemany(f"INSERT INTO {rows.name} (rowid, kept, {columns}) VALUES ({marks})", copied)
        ranked = own.execute(
            f"SELECT rowid, -bm25({rows.name}{', ' + rows.weights if rows.weights else ''}) AS score"
            f" FROM {rows.name} WHERE {rows.name} MATCH ? AND kept ORDER BY score DESC, rowid LIMIT ?",
            (match, limit),
        ).fetchall()
    finally:
        own.execute("ROLLBACK")
    return [(int(seq), float(score)) for seq, score in ranked]


def ranked_own_or_shared(
    connection: sqlite3.Connection,
    rows: OwnRows,
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
) -> list[tuple[int, float]]:
    """``ranked_for_user``, or ``ranked_in_own_index`` when ``ranks_in_own_index(people)``: one user's full text."""
    if ranks_in_own_index(people):
        return ranked_in_own_index(
            connection,
            rows,
            table=table,
            match=" OR ".join(parts),
            user_id=user_id,
            kept=kept,
            kept_parameters=kept_parameters,
            limit=limit,
        )
    return ranked_for_user(
        connection,
        fts=fts,
        table=table,
        rank=rank,
        parts=parts,
        user_id=user_id,
        kept=kept,
        kept_parameters=kept_parameters,
        limit=limit,
        people=people,
        window=window,
    )


_LOCAL = threading.local()


def _own_connection() -> sqlite3.Connection:
    """This thread's in-memory database for own indexes (searches run on several threads)."""
    connection: sqlite3.Connection | None = getattr(_LOCAL, "connection", None)
    if connection is None:
        connection = sqlite3.connect(":memory:", isolation_level=None)
        _LOCAL.connection = connection
        _LOCAL.created = {}
    return connection


def _create(connection: sqlite3.Connection, rows: OwnRows) -> None:
    created: dict[str, OwnRows] = _LOCAL.created
    if created.get(rows.name) == rows:
        return
    if rows.name in created:
        connection.execute(f"DROP TABLE {rows.name}")
    # ``kept`` comes last and is not indexed: bm25()'s column weights line up with ``columns``,
    # and it adds nothing to a row's length.
    connection.execute(
        f"CREATE VIRTUAL TABLE {rows.name} USING fts5 ({', '.join(rows.columns)}, kept UNINDEXED,"
        f" tokenize='{rows.tokenize}')"
    )
    created[rows.name] = rows
