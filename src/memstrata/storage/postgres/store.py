"""PostgreSQL store: the same protocols as the SQLite store, for several processes and machines sharing one database."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg

from memstrata.errors import IdConflict, StorageError
from memstrata.models import Scope, Turn, format_time, space_of
from memstrata.storage.base import Vectors
from memstrata.storage.dialect import record_event
from memstrata.storage.erasure import erase_user_id
from memstrata.storage.postgres import queue
from memstrata.storage.postgres.derived import purge_derived
from memstrata.storage.postgres.keys import KeysMixin
from memstrata.storage.postgres.knowledge import KnowledgeMixin
from memstrata.storage.postgres.migrations import TABLES
from memstrata.storage.postgres.neighbours import neighbour_seqs, refresh_context
from memstrata.storage.postgres.queue import QueueMixin
from memstrata.storage.postgres.retrieval import RetrievalMixin, insert_vectors
from memstrata.storage.postgres.rows import POSTGRES, Connection, turn_row
from memstrata.storage.postgres.segments import SegmentsMixin
from memstrata.storage.sql_spaces import SpaceStatements
from memstrata.storage.sql_turns import TURN_COLUMNS, TurnStatements, prunable, scope_clause, turn_from_row

log = logging.getLogger("memstrata.storage.postgres")

if TYPE_CHECKING:
    from memstrata.storage.base import KeyStore, ServerSideVectors, TierStore

_PAGE = 1000

# A loose index scan: each step seeks the next distinct user id in turns_by_user_time.
_USERS_WITH_PREFIX = """
WITH RECURSIVE found(user_id) AS (
    (SELECT user_id FROM turns ORDER BY user_id LIMIT 1)
    UNION ALL
    SELECT (SELECT turns.user_id FROM turns WHERE turns.user_id > found.user_id ORDER BY turns.user_id LIMIT 1)
    FROM found WHERE found.user_id IS NOT NULL
)
SELECT user_id FROM found WHERE starts_with(user_id, %s) ORDER BY user_id COLLATE "C"
"""


def open_postgres(url: str, *, busy_timeout_seconds: float = 30.0) -> PostgresStore:
    """Open ``postgresql://user:password@host:5432/database`` (``postgres://`` works too)."""
    return PostgresStore(url, busy_timeout_seconds=busy_timeout_seconds)


class PostgresStore(
    KnowledgeMixin,
    SegmentsMixin,
    QueueMixin,
    RetrievalMixin,
    KeysMixin,
    SpaceStatements[Connection],
    TurnStatements[Connection],
):
    """The shared source of truth; a small connection pool serves the threads of one process."""

    # -- turns ------------------------------------------------------------------------

    def insert_turns(
        self, turns: Sequence[Turn], vectors: Vectors | None, model_id: str, *, working_capacity: int | None = None
    ) -> list[int]:
        """Store new turns (see ``TurnStore.insert_turns``) in one pipelined round trip, under the users' locks.

        The neighbours' text of each new turn is refreshed in the same transaction.
        """
        if vectors is not None and len(vectors) != len(turns):
            raise StorageError("insert_turns needs exactly one vector per turn")
        if vectors is not None and len(turns):
            self._ensure_vector_index(model_id, int(np.asarray(vectors).shape[-1]))

        def work(connection: Connection) -> list[int]:
            seqs: list[int] = []
            fresh: list[tuple[int, Turn]] = []
            new_vectors: list[tuple[int, str, Vectors]] = []
            for index, (turn, inserted) in enumerate(zip(turns, _insert_rows(connection, turns), strict=True)):
                if inserted is None:  # the id exists: a retry of the same message is skipped, anything else conflicts
                    seqs.append(_existing_seq(connection, turn))
                    continue
                seqs.append(inserted)
                fresh.append((inserted, turn))
                if vectors is not None:
                    new_vectors.append((inserted, turn.user_id, vectors[index]))
            insert_vectors(connection, model_id, new_vectors)
            added = {seq for seq, _ in fresh}
            refresh_context(connection, added | neighbour_seqs(connection, added))
            if fresh and working_capacity is not None:
                queue.track_working(connection, fresh, working_capacity)
                for user_id in dict.fromkeys(turn.user_id for _, turn in fresh):
                    mine = [seq for seq, turn in fresh if turn.user_id == user_id]
                    queue.enqueue(connection, "process", user_id, {"seqs": mine})
            return seqs

        return self._write(work, lock_users=[turn.user_id for turn in turns])

    def get_by_ids(self, ids: Sequence[str], user_id: str | None = None) -> dict[str, Turn]:
        """Turns with these ids, limited to ``user_id`` when given."""
        if not ids:
            return {}
        query = f"SELECT {TURN_COLUMNS} FROM turns WHERE id = ANY(%s::text[])"
        parameters: list[Any] = [list(ids)]
        if user_id is not None:
            query += " AND user_id = %s"
            parameters.append(user_id)
        rows = self._read(lambda connection: connection.execute(query, parameters).fetchall())
        return {str(row[1]): turn_from_row(POSTGRES, row) for row in rows}

    def get_by_seqs(self, seqs: Sequence[int], user_id: str | Sequence[str]) -> dict[int, Turn]:
        """Turns of ``user_id`` (or of any of several memories) with these seqs."""
        if not seqs:
            return {}
        owned, owner = (
            ("user_id = %s", user_id) if isinstance(user_id, str) else ("user_id = ANY(%s::text[])", list(user_id))
        )
        rows = self._read(
            lambda connection: connection.execute(
                f"SELECT {TURN_COLUMNS} FROM turns WHERE seq = ANY(%s::bigint[]) AND {owned}",
                ([int(seq) for seq in seqs], owner),
            ).fetchall()
        )
        return {int(row[0]): turn_from_row(POSTGRES, row) for row in rows}

    def delete(self, turn_id: str, user_id: str) -> int | None:
        """Delete one turn of ``user_id``; cascades clear its vectors and links, and what was derived from it."""

        def work(connection: Connection) -> int | None:
            row = connection.execute(
                "SELECT seq FROM turns WHERE id = %s AND user_id = %s FOR UPDATE", (turn_id, user_id)
            ).fetchone()
            if row is None:
                return None
            seq = int(row[0])
            neighbours = neighbour_seqs(connection, [seq])
            _purge_for_turns(connection, user_id, [seq])
            connection.execute("DELETE FROM turns WHERE seq = %s", (seq,))
            refresh_context(connection, neighbours)
            record_event(connection, POSTGRES, "delete", user_id, {"turn_id": turn_id})
            return seq

        return self._write(work, lock_users=[user_id])

    def forget(self, scope: Scope) -> int:
        """Hard-delete a scope with everything derived from it.

        The rows are gone for every reader when this returns; their bytes stay in the table
        files until (auto)vacuum reuses the space (``VACUUM FULL`` rewrites the tables).
        """
        where, parameters = scope_clause(scope)  # written with %s, as PostgreSQL reads it

        def work(connection: Connection) -> int:
            # Locked first: a background job deriving from these turns holds them (its rows refer
            # to them), so this waits for it to commit and then purges what it wrote too; a job
            # that starts later finds them gone. Without it, a job's rows outlived the forget.
            seqs = [
                int(r[0]) for r in connection.execute(f"SELECT seq FROM turns WHERE {where} FOR UPDATE", parameters)
            ]
            neighbours: set[int] = set()  # forgetting a whole user leaves no neighbours behind
            if scope.agent_id is None and scope.session_id is None:
                purge_derived(connection, scope.user_id, None)
            else:
                neighbours = neighbour_seqs(connection, seqs)
                _purge_for_turns(connection, scope.user_id, seqs)
            count = max(connection.execute(f"DELETE FROM turns WHERE {where}", parameters).rowcount, 0)
            refresh_context(connection, neighbours)
            detail = {"agent_id": scope.agent_id, "session_id": scope.session_id, "turns": count}
            recorded_as = scope.user_id
            if scope.agent_id is None and scope.session_id is None and space_of(scope.user_id) is None:
                # A user id is personal data (an e-mail address, say): the audit keeps its salted hash.
                recorded_as = erase_user_id(connection, POSTGRES, scope.user_id)
            record_event(connection, POSTGRES, "forget", recorded_as, detail)
            return count

        return self._write(work, lock_users=[scope.user_id])

    def prune(self, user_id: str, tier: str, cutoff: datetime | None, keep_last: int | None) -> int:
        """Delete a tier's old items of one user (see ``Memory.prune``); how many."""

        def work(connection: Connection) -> int:
            table, _, items = prunable(connection, POSTGRES, user_id, tier, cutoff=cutoff, keep_last=keep_last)
            if tier == "episodic":
                # As in ``forget``: wait for a job deriving from these turns, then purge its rows too.
                connection.execute("SELECT seq FROM turns WHERE seq = ANY(%s::bigint[]) FOR UPDATE", (items,))
                neighbours = neighbour_seqs(connection, items)
                _purge_for_turns(connection, user_id, items)
                connection.execute("DELETE FROM turns WHERE seq = ANY(%s::bigint[])", (items,))
                refresh_context(connection, neighbours)
            elif items:
                connection.execute("DELETE FROM derived WHERE id = ANY(%s::text[])", (items,))
                connection.execute(f"DELETE FROM {table} WHERE id = ANY(%s::text[])", (items,))
            if items:
                cutoff_text = cutoff and format_time(cutoff)
                detail = {"tier": tier, "items": len(items), "cutoff": cutoff_text, "keep_last": keep_last}
                record_event(connection, POSTGRES, "retention", user_id, detail)
            return len(items)

        return self._write(work, lock_users=[user_id])

    def user_ids(self, prefix: str) -> list[str]:
        """Users whose id starts with ``prefix``: one seek in the user index per user, not a scan of the turns.

        The database's collation need not keep the ids with a prefix together, so the walk
        visits every distinct user id and keeps those with the prefix.
        """
        return [str(row[0]) for row in self._fetch_all(_USERS_WITH_PREFIX, [prefix])]

    def clock(self) -> float:
        """The database server's clock, which every process and machine sharing the store reads alike."""
        (row,) = self._fetch_all("SELECT extract(epoch FROM clock_timestamp())::float8", [])
        return float(row[0])

    def size_bytes(self) -> int:
        """The bytes memstrata's tables take with their indexes and TOAST data."""
        (row,) = self._fetch_all(
            "SELECT COALESCE(SUM(pg_total_relation_size(to_regclass(name))), 0)::bigint FROM unnest(%s::text[]) name",
            [list(TABLES)],
        )
        return int(row[0])

    def vacuum(self) -> bool:
        """``VACUUM (FULL, ANALYZE)`` each of memstrata's tables: rewritten, they keep no deleted row's bytes.

        Each table is locked while it is rewritten (readers wait too, also while it waits for
        its lock); a lock not had within ``busy_timeout_seconds`` stops it with a
        StorageError naming the table, the tables done so far done. PostgreSQL skips a table
        the role may not vacuum with only a warning (or silently, with ``client_min_messages``
        above it), so each table's file is compared before and after: a table left as it was
        is a StorageError too. Copies outside the tables (WAL segments, archives, backups)
        are the server's to expire.
        """

        def note(diagnostic: psycopg.errors.Diagnostic) -> None:
            if diagnostic.severity_nonlocalized == "WARNING":
                log.warning("vacuum of %s: %s", self.location, diagnostic.message_primary)

        def work(connection: Connection) -> bool:
            try:
                connection.add_notice_handler(note)
                connection.execute(f"SET lock_timeout = {self._lock_timeout_ms}")
                for table in TABLES:
                    if connection.execute("SELECT to_regclass(%s)", (table,)).fetchone() not in (None, (None,)):
                        self._vacuum_table(connection, table)
            finally:
                connection.remove_notice_handler(note)
                if not connection.broken:
                    connection.execute("RESET lock_timeout")
            return True

        return self._read(work)

    def _vacuum_table(self, connection: Connection, table: str) -> None:
        """Rewrite one table, or raise a StorageError that names it and says what to do."""
        stopped = f"vacuum of {self.location} stopped at the {table} table"
        file = "SELECT pg_relation_filenode(%s)"
        try:
            before = connection.execute(file, (table,)).fetchone()
            connection.execute(f"VACUUM (FULL, ANALYZE) {table}")
            after = connection.execute(file, (table,)).fetchone()
        except psycopg.errors.LockNotAvailable as exc:
            raise StorageError(
                f"{stopped}: another session kept the {table} table busy for {self._lock_timeout_ms / 1000:g} s;"
                " run it again when the store is quiet, or raise busy_timeout_seconds"
            ) from exc
        except psycopg.Error as exc:
            raise StorageError(f"{stopped}: {str(exc).strip()}") from exc
        if after == before:  # a rewrite always writes a new file
            raise StorageError(
                f"{stopped}: PostgreSQL skipped it, as it does for a role that may not vacuum it; run it as the"
                " tables' owner, the database's owner or a superuser (on PostgreSQL 17, also a role granted"
                " MAINTAIN or pg_maintain)"
            )


def _insert_rows(connection: Connection, turns: Sequence[Turn]) -> list[int | None]:
    """Insert the turns in order (one round trip, pipelined); each one's new seq, or ``None`` if its id exists."""
    if not turns:
        return []
    inserted: list[int | None] = []
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO turns ({TURN_COLUMNS.removeprefix('seq, ')})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING seq",
            [turn_row(turn) for turn in turns],
            returning=True,
        )
        while True:
            row = cursor.fetchone()
            inserted.append(None if row is None else int(row[0]))
            if not cursor.nextset():
                return inserted


def _existing_seq(connection: Connection, turn: Turn) -> int:
    """The seq of the stored turn with ``turn``'s id, after checking it is the same message."""
    row = connection.execute(f"SELECT {TURN_COLUMNS} FROM turns WHERE id = %s", (turn.id,)).fetchone()
    if row is None:  # deleted between the conflicting insert and this read: a conflict, to be retried
        raise StorageError(f"turn {turn.id!r} was deleted while being written; retry the write")
    if not turn_from_row(POSTGRES, row).is_same_message(turn):
        raise IdConflict(f"id {turn.id!r} is already used by another message; use a new id")
    return int(row[0])


def _purge_for_turns(connection: Connection, user_id: str, seqs: list[int]) -> None:
    """Drop what was derived from ``seqs``; the other turns of a dropped segment go back to mid-term."""
    if not seqs:
        return
    remaining = [
        int(row[0])
        for row in connection.execute(
            "SELECT DISTINCT turn_seq FROM segment_turns WHERE segment_id IN"
            " (SELECT segment_id FROM segment_turns WHERE turn_seq = ANY(%s::bigint[]))"
            " AND turn_seq <> ALL(%s::bigint[]) ORDER BY turn_seq",
            (seqs, seqs),
        )
    ]
    purge_derived(connection, user_id, seqs)
    if remaining:
        queue.enqueue(connection, "midterm", user_id, {"seqs": remaining})


if TYPE_CHECKING:

    def _satisfies_the_protocols(store: PostgresStore) -> tuple[TierStore, KeyStore, ServerSideVectors]:
        """mypy proves here that the adapter implements every method the tiers, the server and search call."""
        return store, store, store
