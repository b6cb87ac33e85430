"""A small user's full-text search in an index of their own rows, built in memory for the query.

In a store shared by many users, FTS5 reads each query term's whole posting list, every
user's matches, and ``bm25()`` counts them again for its statistics: a user with twenty
turns paid about 9 ms per thousand other users. When a user's rows are a small share of the
index, copying them into an in-memory FTS5 table with the same tokenizer and ranking there
costs what their own rows cost (about 12 µs a row), whatever the store holds. The ranking is
the one a store holding that user alone gives: term statistics and average row length are
the user's own, so another tenant's memories change neither the scores nor their order.

A store keeps the own indexes of the users it searched last (``OwnIndexCache``): while a
user's turns are unchanged, a further search ranks in the index already built.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memstrata.storage.sqlite.ranking import Population, ranked_for_user

#: Rank in an index of the user's own rows when they are at most this share of the store's ...
OWN_INDEX_MAX_SHARE = 0.02
#: ... and at most this many (copying costs ~12 µs a row; a bigger user is ranked in the shared index).
OWN_INDEX_MAX_ROWS = 5_000
#: Rows the own indexes kept between searches may hold in all (16 MB of memory at 400 bytes of text a row).
OWN_CACHE_ROWS = 20_000
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
    cache: OwnIndexCache | None = None,
) -> list[tuple[int, float]]:
    """The ``limit`` best of ``user_id``'s rows of ``table`` that pass ``kept``, ranked among their own rows only.

    ``match`` is an FTS5 expression over ``rows.columns``; ``kept`` a SQL condition over the
    rows' table (alias ``x``). Every one of the user's rows is indexed, kept or not, so the
    term statistics are the user's whole, as in the shared index. With a ``cache``, an
    unfiltered search (``kept`` is ``"1"``) ranks in the user's kept index while it is current.
    """
    if not _NAME.fullmatch(table):
        raise ValueError(f"not a table name: {table!r}")
    if limit < 1:
        return []
    if cache is not None and kept == "1" and not kept_parameters:
        return cache.ranked(connection, rows, table=table, match=match, user_id=user_id, limit=limit)
    copied = _copied(connection, rows, table, user_id, kept=kept, kept_parameters=kept_parameters)
    if not copied:
        return []
    own = _own_connection()
    _create(own, rows)
    # Written and ranked in one transaction, then rolled back: FTS5 ranks its pending rows from
    # memory (a fifth of the cost of committing them), and no user's text stays behind.
    own.execute("BEGIN")
    try:
        _insert(own, rows, rows.name, copied)
        return _ranked(own, rows, rows.name, match, limit)
    finally:
        own.execute("ROLLBACK")


def _copied(
    connection: sqlite3.Connection,
    rows: OwnRows,
    table: str,
    user_id: str,
    *,
    kept: str,
    kept_parameters: Sequence[object],
) -> list[tuple[object, ...]]:
    """The user's rows as the own index takes them: seq, whether ``kept`` holds, then one value per column."""
    return connection.execute(
        f"SELECT x.seq, ({kept}), {', '.join(rows.values)} FROM {table} x {rows.joins} WHERE x.user_id = ?",
        [*kept_parameters, user_id],
    ).fetchall()


def _insert(own: sqlite3.Connection, rows: OwnRows, name: str, copied: Sequence[tuple[object, ...]]) -> None:
    marks = ", ".join("?" * (len(rows.columns) + 2))
    own.executemany(f"INSERT INTO {name} (rowid, kept, {', '.join(rows.columns)}) VALUES ({marks})", copied)


def _ranked(own: sqlite3.Connection, rows: OwnRows, name: str, match: str, limit: int) -> list[tuple[int, float]]:
    ranked = own.execute(
        f"SELECT rowid, -bm25({name}{', ' + rows.weights if rows.weights else ''}) AS score"
        f" FROM {name} WHERE {name} MATCH ? AND kept ORDER BY score DESC, rowid LIMIT ?",
        (match, limit),
    ).fetchall()
    return [(int(seq), float(score)) for seq, score in ranked]


def _definition(rows: OwnRows, name: str) -> str:
    # ``kept`` comes last and is not indexed: bm25()'s column weights line up with ``columns``,
    # and it adds nothing to a row's length.
    return (
        f"CREATE VIRTUAL TABLE {name} USING fts5 ({', '.join(rows.columns)}, kept UNINDEXED,"
        f" tokenize='{rows.tokenize}')"
    )


@dataclass(slots=True)
class _Kept:
    table: str
    version: tuple[int, int]
    rows: int


@dataclass
class OwnIndexCache:
    """Own indexes of the users searched last, kept between searches while their rows are unchanged.

    A user's rows are current while their count and highest seq are: a row is only ever
    added (with a seq higher than any before), deleted, or re-indexed with a neighbour added
    or deleted beside it, never rewritten in place. Only tables that keep to that may be
    ranked through the cache (the turns; derived items are rewritten). At most ``max_rows``
    rows are kept; the users searched least recently are dropped first.
    """

    max_rows: int = OWN_CACHE_ROWS
    _connection: sqlite3.Connection = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)
    _kept: OrderedDict[tuple[str, str], _Kept] = field(init=False, repr=False, default_factory=OrderedDict)
    _rows: int = field(init=False, default=0)
    _names: itertools.count[int] = field(init=False, repr=False, default_factory=itertools.count)

    def __post_init__(self) -> None:
        self._connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)

    def ranked(
        self, connection: sqlite3.Connection, rows: OwnRows, *, table: str, match: str, user_id: str, limit: int
    ) -> list[tuple[int, float]]:
        """``ranked_in_own_index`` of an unfiltered search, in the user's kept index (built if not current)."""
        # Read in the caller's transaction, so the version and any rows copied agree.
        count, highest = connection.execute(
            f"SELECT count(*), max(seq) FROM {table} WHERE user_id = ?", (user_id,)
        ).fetchone()
        if not count:
            return []
        version = (int(count), int(highest))
        key = (rows.name, user_id)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and kept.version == version:
                self._kept.move_to_end(key)
                return _ranked(self._connection, rows, kept.table, match, limit)
        copied = _copied(connection, rows, table, user_id, kept="1", kept_parameters=())
        with self._lock:
            self._drop_locked(key)
            name = f"{rows.name}_{next(self._names)}"
            self._connection.execute(_definition(rows, name))
            self._connection.execute("BEGIN")
            try:
                _insert(self._connection, rows, name, copied)
            except BaseException:
                self._connection.execute("ROLLBACK")
                self._connection.execute(f"DROP TABLE {name}")
                raise
            self._connection.execute("COMMIT")
            self._kept[key] = _Kept(name, version, len(copied))
            self._rows += len(copied)
            try:
                return _ranked(self._connection, rows, name, match, limit)
            finally:
                while self._rows > self.max_rows:  # a user larger than the bound is not kept either
                    self._drop_locked(next(iter(self._kept)))

    def forget(self, user_id: str | None = None) -> None:
        """Drop what is kept of ``user_id`` (None: of every user), so none of their text stays in memory."""
        with self._lock:
            for key in [key for key in self._kept if user_id is None or key[1] == user_id]:
                self._drop_locked(key)

    def close(self) -> None:
        """Drop everything kept and close the in-memory database."""
        with self._lock:
            self._kept.clear()
            self._rows = 0
            self._connection.close()

    def _drop_locked(self, key: tuple[str, str]) -> None:
        kept = self._kept.pop(key, None)
        if kept is not None:
            self._rows -= kept.rows
            self._connection.execute(f"DROP TABLE {kept.table}")


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
    estimate: Callable[[str], int] | None = None,
    cache: OwnIndexCache | None = None,
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
            cache=cache,
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
        estimate=estimate,
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
    connection.execute(_definition(rows, rows.name))
    created[rows.name] = rows
