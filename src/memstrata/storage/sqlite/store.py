"""SQLite store: WAL, synchronous=FULL, FTS5 kept in sync by triggers, vectors as BLOBs."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import SecretStr

from memstrata.config import sqlite_file
from memstrata.errors import DeletedMeanwhile, IdConflict, StorageError
from memstrata.models import Scope, Turn, format_time, space_of
from memstrata.storage.base import Vectors
from memstrata.storage.dialect import record_event
from memstrata.storage.erasure import erase_user_id
from memstrata.storage.sql_spaces import SpaceStatements
from memstrata.storage.sql_turns import TurnStatements, prunable, scope_clause, turn_from_row

if TYPE_CHECKING:
    from memstrata.storage.base import KeyStore, TierStore
from memstrata.storage.sqlite import cipher, queue
from memstrata.storage.sqlite.focus import forget_estimates
from memstrata.storage.sqlite.graph import GraphMixin
from memstrata.storage.sqlite.keys import KeysMixin
from memstrata.storage.sqlite.knowledge import KnowledgeMixin, purge_derived
from memstrata.storage.sqlite.migrations import migrate, refuse_if_too_new, stored_version
from memstrata.storage.sqlite.own_index import OwnIndexCache
from memstrata.storage.sqlite.queue import QueueMixin
from memstrata.storage.sqlite.retrieval import RetrievalMixin, insert_vector, merge_fulltext
from memstrata.storage.sqlite.rows import CHUNK, SQLITE, TURN_COLUMNS, chunks, turn_row
from memstrata.storage.sqlite.segments import SegmentsMixin

T = TypeVar("T")
log = logging.getLogger("memstrata.storage.sqlite")

# A loose index scan: each step seeks the next distinct user id in turns_by_user_time.
_USERS_WITH_PREFIX = """
WITH RECURSIVE found(user_id) AS (
    SELECT (SELECT user_id FROM turns WHERE user_id >= ?1 ORDER BY user_id LIMIT 1)
    UNION ALL
    SELECT (SELECT turns.user_id FROM turns WHERE turns.user_id > found.user_id ORDER BY turns.user_id LIMIT 1)
    FROM found WHERE substr(found.user_id, 1, ?2) = ?1
)
SELECT user_id FROM found WHERE substr(user_id, 1, ?2) = ?1
"""


def open_sqlite(
    url: str, *, busy_timeout_seconds: float = 30.0, encryption_key: SecretStr | None = None
) -> SQLiteStore:
    """Open ``sqlite:///relative.db``, ``sqlite:////absolute/path.db`` or ``sqlite:///:memory:``.

    With ``encryption_key`` the file is opened (or created) encrypted with SQLCipher.
    """
    return SQLiteStore(sqlite_path(url), busy_timeout_seconds=busy_timeout_seconds, encryption_key=encryption_key)


def sqlite_path(url: str) -> Path | None:
    """The absolute file a ``sqlite:///…`` URL names; None for ``:memory:`` (``config.sqlite_file``)."""
    try:  # made absolute now: a process that changes directory later still names (and guards) the same file
        return sqlite_file(url)
    except OSError as exc:  # a relative path, and the current directory was deleted
        raise StorageError(f"cannot open the SQLite store at {url}: {exc.strerror or exc}") from exc


class SQLiteStore(
    RetrievalMixin,
    KnowledgeMixin,
    SegmentsMixin,
    GraphMixin,
    KeysMixin,
    QueueMixin,
    SpaceStatements[sqlite3.Connection],
    TurnStatements[sqlite3.Connection],
):
    """The embedded source of truth; one connection shared by the threads of one process."""

    def __init__(
        self, path: Path | None, *, busy_timeout_seconds: float = 30.0, encryption_key: SecretStr | None = None
    ) -> None:
        self.location = str(path) if path else ":memory:"
        self.is_encrypted = encryption_key is not None
        self._lock = threading.RLock()
        # Small users' full-text indexes between searches (``own_index.py``); dropped on forget.
        self._own_cache = OwnIndexCache()
        try:
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
            if encryption_key is not None:
                self._connection = cipher.connect(self.location, encryption_key, timeout=busy_timeout_seconds)
            else:
                self._connection = sqlite3.connect(
                    self.location, isolation_level=None, check_same_thread=False, timeout=busy_timeout_seconds
                )
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open the SQLite store at {self.location}: {exc}") from exc
        except OSError as exc:
            raise StorageError(f"cannot create the data directory for {self.location}: {exc}") from exc
        try:
            # Refused before anything is set: switching to WAL would already change the file.
            refuse_if_too_new(stored_version(self._connection), self.location)
            self._configure(busy_timeout_seconds)
            migrate(self._connection, self.location)
        except BaseException as exc:
            self._connection.close()
            if isinstance(exc, sqlite3.Error):
                hint = (
                    f"; if it is encrypted, set {cipher.KEY_SETTING}"
                    if not self.is_encrypted and "not a database" in str(exc)
                    else ""
                )
                raise StorageError(f"cannot open the SQLite store at {self.location}: {exc}{hint}") from exc
            raise

    def _configure(self, busy_timeout_seconds: float) -> None:
        connection = self._connection
        self._busy_timeout_ms = int(busy_timeout_seconds * 1000)
        connection.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        if self.location != ":memory:":
            self._enable_wal(busy_timeout_seconds)
        # FULL makes each commit durable against power loss, not just a killed process;
        # measured at ~0.25 ms per commit here.
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("PRAGMA foreign_keys = ON")
        # Deleted content is overwritten, so forget() leaves no readable remains.
        connection.execute("PRAGMA secure_delete = ON")
        # SQLite's lower() folds ASCII letters only: "Élodie" would never equal a name lowered in Python.
        connection.create_function("memstrata_lower", 1, _lower, deterministic=True)

    def _enable_wal(self, busy_timeout_seconds: float) -> None:
        """Switch to WAL; the switch ignores the busy timeout, so retry while another opener holds the lock."""
        deadline = time.monotonic() + busy_timeout_seconds
        while True:
            try:
                mode = self._connection.execute("PRAGMA journal_mode = WAL").fetchone()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
                continue
            if mode and str(mode[0]).lower() == "wal":
                return
            raise StorageError(f"{self.location} cannot use write-ahead logging (journal mode stays {mode[0]!r})")

    # -- plumbing ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._connection.close()
            self._own_cache.close()

    def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                return work(self._connection)
            except sqlite3.Error as exc:
                raise StorageError(f"reading {self.location} failed: {exc}") from exc

    def _fetch_all(self, sql: str, parameters: Sequence[Any]) -> list[Any]:
        return self._read(lambda connection: connection.execute(sql, parameters).fetchall())

    def _write(self, work: Callable[[sqlite3.Connection], T], *, lock_users: Iterable[str] = ()) -> T:
        """Run ``work`` in one IMMEDIATE transaction: all of it commits, or none.

        The transaction holds the file's one write lock, so ``lock_users`` (the users whose
        writers PostgreSQL serialises) need nothing more here.
        """
        with self._lock:
            connection = self._connection
            try:
                connection.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StorageError(f"cannot start writing to {self.location}: {exc}") from exc
            try:
                result = work(connection)
                connection.execute("COMMIT")
                return result
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
                if isinstance(exc, sqlite3.IntegrityError) and "FOREIGN KEY" in str(exc):
                    # Every reference cascades on delete, so a failed one names a row deleted meanwhile.
                    raise DeletedMeanwhile(
                        f"writing to {self.location} referred to turns (or their items) deleted meanwhile: {exc}"
                    ) from exc
                if isinstance(exc, sqlite3.Error):
                    raise StorageError(f"writing to {self.location} failed: {exc}") from exc
                raise

    # -- turns ------------------------------------------------------------------------

    def insert_turns(
        self, turns: Sequence[Turn], vectors: Vectors | None, model_id: str, *, working_capacity: int | None = None
    ) -> list[int]:
        """Store new turns (see ``TurnStore.insert_turns``): a stored id is looked up first, then each turn inserted."""
        if vectors is not None and len(vectors) != len(turns):
            raise StorageError("insert_turns needs exactly one vector per turn")

        def work(connection: sqlite3.Connection) -> list[int]:
            existing = _fetch_by_ids(connection, [turn.id for turn in turns], None)
            seqs: list[int] = []
            fresh: list[tuple[int, Turn]] = []
            for index, turn in enumerate(turns):
                found = existing.get(turn.id)
                if found is not None:
                    _require_same(found[1], turn)
                    seqs.append(found[0])
                    continue
                cursor = connection.execute(
                    f"INSERT INTO turns ({TURN_COLUMNS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    turn_row(turn),
                )
                seq = int(cursor.lastrowid or 0)
                seqs.append(seq)
                fresh.append((seq, turn))
                if vectors is not None:
                    insert_vector(connection, model_id, seq, turn.user_id, vectors[index])
            if fresh and working_capacity is not None:
                now = datetime.now(UTC)
                queue.track_working(connection, fresh, working_capacity, now)
                for user_id in dict.fromkeys(turn.user_id for _, turn in fresh):
                    mine = [seq for seq, turn in fresh if turn.user_id == user_id]
                    queue.enqueue(connection, "process", user_id, {"seqs": mine}, now)
            return seqs

        return self._write(work)

    def get_by_ids(self, ids: Sequence[str], user_id: str | None = None) -> dict[str, Turn]:
        """Turns with these ids, limited to ``user_id`` when given."""
        found = self._read(lambda connection: _fetch_by_ids(connection, ids, user_id))
        return {turn_id: turn for turn_id, (_, turn) in found.items()}

    def get_by_seqs(self, seqs: Sequence[int], user_id: str | Sequence[str]) -> dict[int, Turn]:
        """Turns of ``user_id`` (or of any of several memories) with these seqs."""
        owners = {user_id} if isinstance(user_id, str) else set(user_id)

        def work(connection: sqlite3.Connection) -> dict[int, Turn]:
            result: dict[int, Turn] = {}
            for chunk in chunks(list(seqs)):
                marks = ",".join("?" * len(chunk))
                # Owners are checked here, not in SQL: a seq names one row, and a list of owners
                # in the statement would bind any number of parameters.
                rows = connection.execute(f"SELECT {TURN_COLUMNS} FROM turns WHERE seq IN ({marks})", chunk)
                for row in rows:
                    turn = turn_from_row(SQLITE, row)
                    if turn.user_id in owners:
                        result[int(row[0])] = turn
            return result

        return self._read(work)

    def delete(self, turn_id: str, user_id: str) -> int | None:
        """Delete one turn of ``user_id``; triggers and cascades clear its index entries."""

        def work(connection: sqlite3.Connection) -> int | None:
            row = connection.execute(
                "SELECT seq FROM turns WHERE id = ? AND user_id = ?", (turn_id, user_id)
            ).fetchone()
            if row is None:
                return None
            _purge_for_turns(connection, user_id, [int(row[0])])
            connection.execute("DELETE FROM turns WHERE seq = ?", (row[0],))
            record_event(connection, SQLITE, "delete", user_id, {"turn_id": turn_id})
            return int(row[0])

        deleted = self._write(work)
        self._own_cache.forget(user_id)
        return deleted

    def forget(self, scope: Scope) -> int:
        """Hard-delete a scope; the full-text indexes are merged and the WAL checkpointed so no copy remains.

        FTS5 deletes only write tombstones, so both indexes are merged (``merge_fulltext``).
        If a reader keeps the WAL from being checkpointed, a warning says so; the next
        checkpoint clears it.
        """
        where, parameters = scope_clause(scope)
        where = SQLITE.sql(where)

        def work(connection: sqlite3.Connection) -> int:
            if scope.agent_id is None and scope.session_id is None:
                purge_derived(connection, scope.user_id, None)
            else:
                seqs = [int(r[0]) for r in connection.execute(f"SELECT seq FROM turns WHERE {where}", parameters)]
                _purge_for_turns(connection, scope.user_id, seqs)
            cursor = connection.execute(f"DELETE FROM turns WHERE {where}", parameters)
            count = max(cursor.rowcount, 0)
            detail = {"agent_id": scope.agent_id, "session_id": scope.session_id, "turns": count}
            recorded_as = scope.user_id
            if scope.agent_id is None and scope.session_id is None and space_of(scope.user_id) is None:
                # A user id is personal data (an e-mail address, say): the audit keeps its salted hash.
                recorded_as = erase_user_id(connection, SQLITE, scope.user_id)
            record_event(connection, SQLITE, "forget", recorded_as, detail)
            merge_fulltext(connection)
            return count

        count = self._write(work)
        self._own_cache.forget(scope.user_id)
        forget_estimates(scope.user_id)
        [(busy, _, _)] = self._read(self._checkpoint_without_waiting)
        if busy:
            log.warning(
                "forget: another connection was reading %s, so the write-ahead log still holds the deleted"
                " text; it is cleared at the next checkpoint (when readers finish, or on close)",
                self.location,
            )
        return count

    def _checkpoint_without_waiting(self, connection: sqlite3.Connection) -> list[Any]:
        """Checkpoint and truncate the WAL as far as readers allow, now: waiting for them held every writer too."""
        connection.execute("PRAGMA busy_timeout = 0")
        try:
            return connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            connection.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")

    def size_bytes(self) -> int:
        """The database file and its write-ahead log (the pages in use, for a store in memory)."""
        if self.location == ":memory:":
            return self._read(
                lambda connection: (
                    int(connection.execute("PRAGMA page_count").fetchone()[0])
                    * int(connection.execute("PRAGMA page_size").fetchone()[0])
                )
            )
        total = 0
        for path in (Path(self.location), Path(self.location + "-wal")):
            try:
                total += path.stat().st_size
            except FileNotFoundError:
                continue  # no log (yet, or another process's last close just removed it)
            except OSError as exc:
                raise StorageError(f"cannot read the size of {self.location}: {exc}") from exc
        return total

    def vacuum(self) -> bool:
        """Merge the full-text indexes, rewrite the file (``VACUUM``) and truncate the write-ahead log.

        ``secure_delete`` zeroes deleted rows, but a page SQLite rebalanced can keep a copy of
        one in its unused space; the rewrite leaves such copies behind. It waits for other
        writers up to ``busy_timeout_seconds``, and every call of this store waits for it. The
        log is truncated only if no other connection is reading or writing (waiting for them
        would hold every call of the store too): False then, and the log keeps the rewritten
        pages, and the old file its remains, until the next full checkpoint. The rewrite needs free space
        about twice the size of the data kept: a copy in the temporary directory, and the
        rewritten pages in the log beside the database.
        """
        self._write(merge_fulltext)

        def rewrite(connection: sqlite3.Connection) -> None:
            # Rows keep their rowids: every table orders by an INTEGER PRIMARY KEY or by a
            # rowid VACUUM copies as it is (a test holds the tie-breaking order to it).
            connection.execute("VACUUM")

        self._read(rewrite)
        [(busy, _, _)] = self._read(self._checkpoint_without_waiting)
        return not busy

    def prune(self, user_id: str, tier: str, cutoff: datetime | None, keep_last: int | None) -> int:
        """Delete a tier's old items of one user (see ``Memory.prune``); how many.

        Like ``forget``, it merges the full-text indexes and checkpoints the WAL, so the
        deleted text does not linger in the files.
        """

        def work(connection: sqlite3.Connection) -> int:
            table, key, items = prunable(connection, SQLITE, user_id, tier, cutoff=cutoff, keep_last=keep_last)
            if tier == "episodic":
                _purge_for_turns(connection, user_id, items)
            for start in range(0, len(items), CHUNK):
                chunk = items[start : start + CHUNK]
                marks = ",".join("?" * len(chunk))
                if tier != "episodic":
                    connection.execute(f"DELETE FROM derived WHERE id IN ({marks})", chunk)
                connection.execute(f"DELETE FROM {table} WHERE {key} IN ({marks})", chunk)
            if items:
                detail = {
                    "tier": tier,
                    "items": len(items),
                    "cutoff": cutoff and format_time(cutoff),
                    "keep_last": keep_last,
                }
                record_event(connection, SQLITE, "retention", user_id, detail)
                merge_fulltext(connection)  # as forget does: no copy of the text left in the indexes
            return len(items)

        count = self._write(work)
        if count:
            self._own_cache.forget(user_id)
            self._read(self._checkpoint_without_waiting)
        return count

    def user_ids(self, prefix: str) -> list[str]:
        """Users whose id starts with ``prefix``: one seek in the user index per user, not a scan of the turns.

        In SQLite's binary order the ids with a prefix sit together from the prefix on, so
        the walk starts there and stops at the first id without it.
        """
        return [str(row[0]) for row in self._fetch_all(_USERS_WITH_PREFIX, [prefix, len(prefix)])]

    def clock(self) -> float:
        """This machine's clock: a SQLite file is shared only by processes on the machine that holds it."""
        return time.time()


# -- row helpers -----------------------------------------------------------------------


def _require_same(stored: Turn, incoming: Turn) -> None:
    """A retried write with the same id must carry the same message."""
    if not stored.is_same_message(incoming):
        raise IdConflict(f"id {incoming.id!r} is already used by another message; use a new id")


def _fetch_by_ids(
    connection: sqlite3.Connection, ids: Sequence[str], user_id: str | None
) -> dict[str, tuple[int, Turn]]:
    result: dict[str, tuple[int, Turn]] = {}
    for chunk in chunks(list(ids)):
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT {TURN_COLUMNS} FROM turns WHERE id IN ({marks})"
        parameters: list[Any] = list(chunk)
        if user_id is not None:
            sql += " AND user_id = ?"
            parameters.append(user_id)
        for row in connection.execute(sql, parameters):
            result[row[1]] = (int(row[0]), turn_from_row(SQLITE, row))
    return result


def _purge_for_turns(connection: sqlite3.Connection, user_id: str, seqs: list[int]) -> None:
    """Drop what was derived from ``seqs``; the other turns of a dropped segment go back to mid-term."""
    if not seqs:
        return
    gone = set(seqs)
    remaining: list[int] = []
    for chunk_start in range(0, len(seqs), CHUNK):
        chunk = seqs[chunk_start : chunk_start + CHUNK]
        marks = ",".join("?" * len(chunk))
        remaining.extend(
            int(row[0])
            for row in connection.execute(
                "SELECT DISTINCT turn_seq FROM segment_turns WHERE segment_id IN"
                f" (SELECT segment_id FROM segment_turns WHERE turn_seq IN ({marks}))",
                chunk,
            )
            if int(row[0]) not in gone
        )
    purge_derived(connection, user_id, seqs)
    if remaining:
        queue.enqueue(connection, "midterm", user_id, {"seqs": sorted(set(remaining))}, datetime.now(UTC))


if TYPE_CHECKING:

    def _satisfies_the_protocol(store: SQLiteStore) -> TierStore:
        """mypy proves here that the adapter implements every method the tiers call."""
        return store

    def _holds_api_keys(store: SQLiteStore) -> KeyStore:
        """mypy proves here that the adapter can hold the REST server's API keys."""
        return store


def _lower(text: str | None) -> str | None:
    """``str.lower`` for SQL (``memstrata_lower``), as Python lowers the names compared with it; NULL stays NULL."""
    return text.lower() if isinstance(text, str) else None
