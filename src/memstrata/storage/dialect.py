"""What the SQL both stores share is written against: a connection, a backend's runner, and its dialect.

A shared statement is written once, in PostgreSQL's placeholders (``%s``, ``%(name)s``), with
the few words the two databases spell differently taken from a :class:`Dialect`; ``Dialect.sql``
turns it into the backend's placeholders. Each backend defines its dialect beside its rows
(``sqlite/rows.py``, ``postgres/rows.py``), so this module imports no driver.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

T = TypeVar("T")
_NAMED = re.compile(r"%\((\w+)\)s")

#: Most values one statement binds from a caller's list. SQLite refuses a statement past its
#: variable limit (999 in builds before 3.32), and a caller's list may hold any number, so a
#: list is bound in slices of this size and the results merged.
CHUNK = 500


def in_chunks(values: Sequence[T], size: int = CHUNK) -> Iterator[list[T]]:
    """``values`` in lists of at most ``size`` (none when empty)."""
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


class Cursor(Protocol):
    """What a shared statement reads back: rows and how many rows it changed."""

    @property
    def rowcount(self) -> int:
        """Rows the statement changed."""
        ...

    def fetchone(self) -> Any:
        """The next row, or None."""

    def fetchall(self) -> list[Any]:
        """Every row left."""
        ...

    def __iter__(self) -> Iterator[Any]:
        """The rows left, one by one."""
        ...


class Connection(Protocol):
    """A driver connection (``sqlite3.Connection``, ``psycopg.Connection``) as the shared statements use it."""

    def execute(self, query: str, parameters: Any = ..., /) -> Cursor:
        """Run one statement."""
        ...


C = TypeVar("C", bound=Connection)


@dataclass(kw_only=True, frozen=True, slots=True)
class Dialect:
    """How one database spells what the shared statements leave open."""

    #: Whether statements take ``?`` and ``:name`` (SQLite) rather than ``%s`` and ``%(name)s``.
    question_marks: bool
    #: Boolean literals.
    true: str
    false: str
    #: The larger of two values: ``max`` (SQLite's scalar max, NULL if either is) or ``GREATEST``.
    greatest: str
    #: Appended to a text ORDER BY term so that it sorts by code point, whatever the database's collation.
    code_point: str
    #: The column that numbers a table's rows in insertion order (``rowid``, PostgreSQL's ``ordinal``).
    ordinal: str
    #: A cast that makes a parameter's NULL a text NULL (PostgreSQL cannot guess its type).
    text_cast: str
    #: A cast that reads a JSON text parameter as the JSON column's type.
    jsonb_cast: str
    #: Equality that holds between two NULLs too.
    same: str
    #: How an INSERT that skips rows already there begins, and ends (SQLite's ``OR IGNORE``, else ``ON CONFLICT``).
    insert_or_ignore: str
    do_nothing: str
    #: The function that lowers text as Python's ``str.lower`` does.
    lower: str
    #: The LIMIT parameter that means no limit.
    no_limit: int | None
    #: Whether writers lock rows, so they take them in one order (PostgreSQL) or the store whole (SQLite).
    locks_rows: bool
    #: At most this many values in one ``members`` list (SQLite bounds its parameters); None: any number.
    chunk: int | None
    #: A time as a parameter, and back from a column.
    time: Callable[[datetime], Any]
    read_time: Callable[[Any], datetime]
    #: A JSON value as a parameter, and back from a column.
    json: Callable[[Any], Any]
    read_json: Callable[[Any], Any]
    #: ``(subquery, its column)`` as one value holding that column's rows as an array, and that value read back.
    array: Callable[[str, str], str]
    read_array: Callable[[Any], list[Any]]

    def sql(self, statement: str) -> str:
        """A statement written with ``%s`` and ``%(name)s`` in this dialect's placeholders."""
        return _question_marks(statement) if self.question_marks else statement

    def read_optional_time(self, value: Any) -> datetime | None:
        """``read_time`` that lets NULL through."""
        return None if value is None else self.read_time(value)

    def optional_time(self, value: datetime | None) -> Any:
        """``time`` that lets None through."""
        return None if value is None else self.time(value)

    def members(self, column: str, values: Sequence[Any], kind: str) -> tuple[str, list[Any]]:
        """``column`` is one of ``values`` (of SQL type ``kind``): the condition and its parameters."""
        if self.question_marks:
            return f"{column} IN ({','.join('?' * len(values))})", list(values)
        return f"{column} = ANY(%s::{kind}[])", [list(values)]

    def batches(self, values: Sequence[T]) -> Iterator[list[T]]:
        """``values`` in lists of at most ``chunk`` (SQLite: none when empty), or whole (PostgreSQL)."""
        if self.chunk is None:
            yield list(values)
            return
        yield from in_chunks(values, self.chunk)


@dataclass(kw_only=True, frozen=True, slots=True)
class DerivedItem:
    """A searchable item a tier derives (a cell, segment, scene or consolidation) and the turns it came from."""

    id: str
    user_id: str
    tier: str
    content: str
    sources: Sequence[int]
    created_at: datetime
    is_current: bool = True


class Runner(Generic[C]):
    """What the shared statements need of a store: a dialect, reads, and writes in one transaction each."""

    if TYPE_CHECKING:
        dialect: Dialect

        def _read(self, work: Callable[[C], T]) -> T: ...

        def _write(self, work: Callable[[C], T], *, lock_users: Iterable[str] = ()) -> T: ...

        def _put_derived(self, connection: C, item: DerivedItem) -> None:
            """Create or refresh one searchable derived item and link it to its source turns."""

        def _link_turns(
            self, connection: C, table: str, owner: str, owner_id: str, seqs: Sequence[int], *, once: bool
        ) -> None:
            """Link ``seqs`` to ``owner_id`` in ``table`` (column ``owner``); ``once``: an existing link is kept."""

        def _execute_many(self, connection: C, statement: str, rows: Sequence[Sequence[Any]]) -> None:
            """Run one statement (in the dialect's placeholders) once per row of parameters."""


def record_event(
    connection: Connection, dialect: Dialect, kind: str, user_id: str | None, detail: Mapping[str, Any]
) -> None:
    """Append to the audit log inside the caller's transaction."""
    connection.execute(
        dialect.sql(f"INSERT INTO events (at, kind, user_id, detail) VALUES (%s, %s, %s, %s{dialect.jsonb_cast})"),
        (dialect.time(datetime.now(UTC)), kind, user_id, json.dumps(dict(detail), sort_keys=True, default=str)),
    )


@functools.lru_cache(maxsize=1_024)
def _question_marks(statement: str) -> str:
    """``statement`` with sqlite3's placeholders; cached, as the same statements run on every search."""
    return _NAMED.sub(r":\1", statement).replace("%s", "?")
