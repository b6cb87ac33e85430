"""The turn statements both stores share: turn rows, scopes, filters, history, paging, totals, missing vectors."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from memstrata.models import Role, Scope, SearchFilters, Turn
from memstrata.storage.dialect import C, Connection, Dialect, Runner

#: A turn's columns, as ``turn_from_row`` reads them.
TURN_COLUMNS = "seq, id, user_id, agent_id, session_id, role, name, content, created_at, metadata, importance"
#: Turns read per page by ``iterate``.
_PAGE = 1000
#: What ``prune`` deletes of each tier: its table, the time it ages by, and which of its rows may go. A
#: segment promoted to a scene stays: the scene is deleted with its turns, found through the segment's links.
_PRUNABLE = {
    "episodic": ("turns", "created_at", "1 = 1"),
    "midterm": (
        "segments",
        "last_activity",
        "state = 'archived' AND id NOT IN (SELECT segment_id FROM scenes WHERE segment_id IS NOT NULL)",
    ),
    "longterm": ("cells", "valid_to", "valid_to IS NOT NULL"),
}
#: Turns (``t``) with no vector of a model (``%s``).
_MISSING_VECTOR = "NOT EXISTS (SELECT 1 FROM turn_vectors v WHERE v.model_id = %s AND v.turn_seq = t.seq)"


def turn_from_row(dialect: Dialect, row: Sequence[Any]) -> Turn:
    """The turn a row selected with ``TURN_COLUMNS`` holds."""
    return Turn(
        id=row[1],
        user_id=row[2],
        agent_id=row[3],
        session_id=row[4],
        role=Role(row[5]),
        name=row[6],
        content=row[7],
        created_at=dialect.read_time(row[8]),
        metadata=dialect.read_json(row[9]),
        importance=row[10],
    )


def scope_clause(scope: Scope) -> tuple[str, list[Any]]:
    """SQL (with ``%s``) narrowing ``turns`` to a scope, and its parameters."""
    clauses, parameters = ["user_id = %s"], [scope.user_id]
    if scope.agent_id is not None:
        clauses.append("agent_id = %s")
        parameters.append(scope.agent_id)
    if scope.session_id is not None:
        clauses.append("session_id = %s")
        parameters.append(scope.session_id)
    return " AND ".join(clauses), parameters


def filter_clause(dialect: Dialect, filters: SearchFilters, alias: str = "t") -> tuple[str, list[Any]]:
    """SQL (in the dialect's placeholders) for the filters on table alias ``alias``; empty when nothing narrows."""
    clauses: list[str] = []
    parameters: list[Any] = []
    if filters.agent_id is not None:
        clauses.append(f"{alias}.agent_id = %s")
        parameters.append(filters.agent_id)
    if filters.session_id is not None:
        clauses.append(f"{alias}.session_id = %s")
        parameters.append(filters.session_id)
    if filters.roles:
        roles, values = dialect.members(f"{alias}.role", [role.value for role in filters.roles], "text")
        clauses.append(roles)
        parameters.extend(values)
    if filters.after is not None:
        clauses.append(f"{alias}.created_at >= %s")
        parameters.append(dialect.time(filters.after))
    if filters.before is not None:
        clauses.append(f"{alias}.created_at < %s")
        parameters.append(dialect.time(filters.before))
    return dialect.sql("".join(f" AND {clause}" for clause in clauses)), parameters


def prunable(
    connection: Connection,
    dialect: Dialect,
    user_id: str,
    tier: str,
    *,
    cutoff: datetime | None,
    keep_last: int | None,
) -> tuple[str, str, list[Any]]:
    """A tier's table, its key column, and the keys (in order) of the user's items ``prune`` deletes.

    Those older than ``cutoff``, and those past the newest ``keep_last`` (by time, then insertion).
    """
    table, time_column, where = _PRUNABLE[tier]
    key, order = ("seq", "seq") if tier == "episodic" else ("id", dialect.ordinal)
    doomed: set[Any] = set()
    if cutoff is not None:
        older = f"SELECT {key} FROM {table} WHERE user_id = %s AND {where} AND {time_column} < %s"
        doomed |= {row[0] for row in connection.execute(dialect.sql(older), (user_id, dialect.time(cutoff)))}
    if keep_last is not None:
        beyond = (
            f"SELECT {key} FROM {table} WHERE user_id = %s AND {where}"
            f" ORDER BY {time_column} DESC, {order} DESC LIMIT %s OFFSET %s"
        )
        parameters = (user_id, dialect.no_limit, keep_last)
        doomed |= {row[0] for row in connection.execute(dialect.sql(beyond), parameters)}
    return table, key, sorted(doomed)


class TurnStatements(Runner[C]):
    """The turn reads of ``Store`` that both stores run alike."""

    def history(self, scope: Scope, *, limit: int, offset: int = 0, newest_first: bool = False) -> list[Turn]:
        """Turns of ``scope`` in time order (ties in insertion order)."""
        d = self.dialect
        where, parameters = scope_clause(scope)
        direction = "DESC" if newest_first else "ASC"
        statement = d.sql(
            f"SELECT {TURN_COLUMNS} FROM turns WHERE {where} "
            f"ORDER BY created_at {direction}, seq {direction} LIMIT %s OFFSET %s"
        )
        rows = self._read(lambda connection: connection.execute(statement, [*parameters, limit, offset]).fetchall())
        return [turn_from_row(d, row) for row in rows]

    def iterate(self, user_id: str | None = None) -> Iterator[tuple[int, Turn]]:
        """Every turn as (seq, turn), in pages, so memory stays flat on large stores."""
        d = self.dialect
        mine = "" if user_id is None else "user_id = %s AND "
        statement = d.sql(f"SELECT {TURN_COLUMNS} FROM turns WHERE {mine}seq > %s ORDER BY seq LIMIT {_PAGE}")

        def page(after: int) -> list[Any]:
            parameters = [after] if user_id is None else [user_id, after]
            return self._read(lambda connection: connection.execute(statement, parameters).fetchall())

        after = 0
        while True:
            rows = page(after)
            if not rows:
                return
            for row in rows:
                yield int(row[0]), turn_from_row(d, row)
            after = int(rows[-1][0])

    def counts(self) -> dict[str, int]:
        """Totals for ``info``."""
        vectors = (
            f"SELECT model_id, COUNT(*) FROM turn_vectors GROUP BY model_id ORDER BY model_id{self.dialect.code_point}"
        )

        def work(connection: C) -> dict[str, int]:
            turns, users, sessions = connection.execute(
                "SELECT COUNT(*), COUNT(DISTINCT user_id), COUNT(DISTINCT user_id || '/' || COALESCE(session_id, ''))"
                " FROM turns"
            ).fetchone()
            result = {"turns": int(turns), "users": int(users), "sessions": int(sessions)}
            for model_id, count in connection.execute(vectors):
                result[f"vectors[{model_id}]"] = int(count)
            return result

        return self._read(work)

    def count_missing_vectors(self, model_id: str) -> int:
        """How many turns have no vector of ``model_id``."""
        statement = self.dialect.sql(f"SELECT COUNT(*) FROM turns t WHERE {_MISSING_VECTOR}")
        row = self._read(lambda connection: connection.execute(statement, (model_id,)).fetchone())
        return int(row[0])

    def turns_missing_vectors(self, model_id: str, limit: int) -> list[tuple[int, Turn]]:
        """Turns that have no vector of ``model_id`` yet, as (seq, turn)."""
        d = self.dialect
        statement = d.sql(f"SELECT {TURN_COLUMNS} FROM turns t WHERE {_MISSING_VECTOR} ORDER BY t.seq LIMIT %s")
        rows = self._read(lambda connection: connection.execute(statement, (model_id, limit)).fetchall())
        return [(int(row[0]), turn_from_row(d, row)) for row in rows]
