"""Connections to PostgreSQL: a small pool per store, transactions, advisory locks and error translation."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolClosed

from memstrata.errors import ConfigError, DeletedMeanwhile, InvalidInput, StorageError
from memstrata.storage.dialect import DerivedItem, Runner
from memstrata.storage.postgres.derived import put_derived
from memstrata.storage.postgres.migrations import (
    LOCK_NAMESPACE,
    USER_LOCK_NAMESPACE,
    VECTOR_INDEX_LOCK,
    migrate,
)
from memstrata.storage.postgres.rows import POSTGRES, Connection, configure_connection

T = TypeVar("T")
log = logging.getLogger("memstrata.storage.postgres")

#: Runs of a write transaction the server aborts as a deadlock victim.
WRITE_ATTEMPTS = 3
#: Connections per store: Memory calls it from the caller's thread, its search thread and its worker.
POOL_SIZE = 4
#: pgvector's HNSW index (0.5+) takes vectors of at most this many dimensions; longer ones are searched exactly.
HNSW_MAX_DIMENSIONS = 2000


def redact(url: str) -> str:
    """The URL without its password, for messages and ``Memory.info()``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user_info, host = netloc.rsplit("@", 1)
        netloc = f"{user_info.split(':', 1)[0]}@{host}"
    query = "&".join(item for item in parts.query.split("&") if item and not item.lower().startswith("password="))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _int32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def user_lock_key(user_id: str) -> int:
    """The advisory-lock key of a user's writers (a stable 32-bit hash; collisions only serialise more)."""
    return _int32(zlib.crc32(user_id.encode("utf-8")))


def take_user_locks(connection: Connection, user_ids: Iterable[str]) -> None:
    """Take these users' writer locks until the transaction ends, in one global order (no deadlocks)."""
    keys = sorted({user_lock_key(user_id) for user_id in user_ids})
    if keys:
        calls = ", ".join(f"pg_advisory_xact_lock({USER_LOCK_NAMESPACE}, {key})" for key in keys)
        connection.execute(f"SELECT {calls}")


class Connected(Runner[Connection]):
    """What every part of the PostgreSQL store builds on: ``_read``, ``_write``, the dialect and the vector indexes."""

    dialect = POSTGRES

    def __init__(self, url: str, *, busy_timeout_seconds: float = 30.0) -> None:
        self.location = redact(url)
        self._lock_timeout_ms = max(1, int(busy_timeout_seconds * 1000))
        try:
            options = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise ConfigError(
                f"storage URL {self.location!r} is not a valid PostgreSQL URL ({exc}); "
                "use postgresql://user:password@host:5432/database"
            ) from exc
        extra: dict[str, Any] = {} if "connect_timeout" in options else {"connect_timeout": 10}
        try:
            with psycopg.connect(url, autocommit=True, **extra) as connection:
                migrate(connection, self.location, self._lock_timeout_ms)
                # pg_column_compression() (PostgreSQL 14) tells a vector stored plain from a compressed one.
                self._column_compression = connection.info.server_version >= 140000
                version = _pgvector_version(connection)
                self._has_hnsw = version >= (0, 5)
                self._iterative_scan = version >= (0, 8)
        except psycopg.OperationalError as exc:
            raise StorageError(
                f"cannot connect to PostgreSQL at {self.location}: {str(exc).strip()}; check the host, port,"
                " database and credentials in the storage URL, and that the server is running"
            ) from exc
        except psycopg.Error as exc:
            raise StorageError(f"cannot open the PostgreSQL store at {self.location}: {exc}") from exc
        # Automatic prepared statements stay off: they break behind pgbouncer in transaction mode,
        # and a generic plan could not use the per-model partial vector indexes.
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs={"autocommit": True, "prepare_threshold": None, **extra},
            configure=configure_connection,
            # A connection the server dropped (a restart, a failover) is replaced before use, not
            # handed to a call that would fail: one round trip per checkout.
            check=ConnectionPool.check_connection,
            timeout=busy_timeout_seconds,
            name=f"memstrata {self.location}",
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=max(busy_timeout_seconds, 10.0))
        except psycopg.Error as exc:
            self._pool.close()
            raise StorageError(f"cannot open connections to {self.location}: {exc}") from exc
        self._indexed_vectors: set[tuple[str, int]] = set()

    # -- plumbing ---------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection; further calls raise StorageError."""
        self._pool.close()

    def _read(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` on a pooled connection in autocommit mode (each statement sees what is committed)."""
        try:
            with self._pool.connection() as connection:
                return work(connection)
        except PoolClosed as exc:
            raise StorageError(f"the store at {self.location} is closed; open a new one") from exc
        except psycopg.Error as exc:
            raise StorageError(f"reading {self.location} failed: {exc}") from exc

    def _fetch_all(self, query: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]:
        """All rows of one query."""
        return self._read(lambda connection: connection.execute(query, parameters).fetchall())

    def _write(self, work: Callable[[Connection], T], *, lock_users: Iterable[str] = ()) -> T:
        """Run ``work`` in one transaction that commits before this returns, or changes nothing.

        ``lock_users`` takes those users' writer locks first, so the ids this transaction
        draws grow in commit order for each of them (``vectors_after`` relies on it), and
        turns are added and deleted one transaction at a time (neighbour text stays right).
        A transaction the server aborted as a deadlock victim is run again.
        """
        users = list(lock_users)
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                return self._write_once(work, users)
            except errors.DeadlockDetected:
                if attempt == WRITE_ATTEMPTS:
                    raise StorageError(
                        f"writing to {self.location} deadlocked with other writers {attempt} times; retry"
                    ) from None
        raise AssertionError("unreachable")  # the loop returns or raises

    def _write_once(self, work: Callable[[Connection], T], lock_users: list[str]) -> T:
        try:
            with self._pool.connection() as connection:
                connection.execute(f"BEGIN; SET LOCAL lock_timeout = {self._lock_timeout_ms}")
                try:
                    take_user_locks(connection, lock_users)
                    result = work(connection)
                    connection.execute("COMMIT")
                    return result
                except BaseException:
                    with contextlib.suppress(psycopg.Error):
                        connection.execute("ROLLBACK")
                    raise
        except errors.DeadlockDetected:
            raise
        except PoolClosed as exc:
            raise StorageError(f"the store at {self.location} is closed; open a new one") from exc
        except errors.LockNotAvailable as exc:
            raise StorageError(
                f"writing to {self.location} waited too long for another writer's lock; retry,"
                " or raise busy_timeout_seconds (MEMSTRATA_BUSY_TIMEOUT_SECONDS)"
            ) from exc
        except errors.ForeignKeyViolation as exc:
            # Every reference cascades on delete, so a failed one names a row deleted meanwhile.
            raise DeletedMeanwhile(
                f"writing to {self.location} referred to turns (or their items) deleted meanwhile: {exc}"
            ) from exc
        except errors.ProgramLimitExceeded as exc:
            # The data, not the server: a retry fails the same way (e.g. a message whose distinct
            # words overflow PostgreSQL's 1 MB full-text vector).
            raise InvalidInput(
                f"PostgreSQL cannot index this: {exc.diag.message_primary or exc}; split it into smaller messages"
            ) from exc
        except psycopg.Error as exc:
            raise StorageError(f"writing to {self.location} failed: {exc}") from exc

    def _put_derived(self, connection: Connection, item: DerivedItem) -> None:
        put_derived(connection, item)

    def _link_turns(
        self, connection: Connection, table: str, owner: str, owner_id: str, seqs: Sequence[int], *, once: bool
    ) -> None:
        connection.execute(
            f"INSERT INTO {table} ({owner}, turn_seq) SELECT %s, unnest(%s::bigint[])"
            + (" ON CONFLICT DO NOTHING" if once else ""),
            (owner_id, [int(seq) for seq in seqs]),
        )

    def _execute_many(self, connection: Connection, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        with connection.cursor() as cursor:
            cursor.executemany(statement, rows)

    # -- vector indexes ---------------------------------------------------------------

    def _ensure_vector_index(self, model_id: str, dimension: int) -> None:
        """Create the HNSW index of one model's vectors the first time that model writes any."""
        key = (model_id, dimension)
        if key in self._indexed_vectors or not self._has_hnsw or not 1 <= dimension <= HNSW_MAX_DIMENSIONS:
            return
        name = "turn_vectors_hnsw_" + hashlib.sha256(f"{model_id}\0{dimension}".encode()).hexdigest()[:16]
        statement = sql.SQL(
            "CREATE INDEX IF NOT EXISTS {name} ON turn_vectors USING hnsw ((embedding::vector({dimension}))"
            " vector_cosine_ops) WHERE model_id = {model_id} AND dimension = {dimension}"
        ).format(name=sql.Identifier(name), dimension=sql.Literal(dimension), model_id=sql.Literal(model_id))

        def work(connection: Connection) -> None:
            connection.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_NAMESPACE, VECTOR_INDEX_LOCK))
            known = connection.execute(
                "SELECT 1 FROM vector_indexes WHERE model_id = %s AND dimension = %s", key
            ).fetchone()
            if known is None:
                connection.execute(statement)
                connection.execute(
                    "INSERT INTO vector_indexes (model_id, dimension, index_name) VALUES (%s, %s, %s)",
                    (model_id, dimension, name),
                )

        known = self._read(
            lambda connection: connection.execute(
                "SELECT 1 FROM vector_indexes WHERE model_id = %s AND dimension = %s", key
            ).fetchone()
        )
        if known is None:
            self._write(work)
        self._indexed_vectors.add(key)

    def _has_vector_index(self, model_id: str, dimension: int) -> bool:
        key = (model_id, dimension)
        if key in self._indexed_vectors:
            return True
        if not self._has_hnsw or not 1 <= dimension <= HNSW_MAX_DIMENSIONS:
            return False
        found = self._read(
            lambda connection: connection.execute(
                "SELECT 1 FROM vector_indexes WHERE model_id = %s AND dimension = %s", key
            ).fetchone()
        )
        if found is not None:
            self._indexed_vectors.add(key)
        return found is not None


def _pgvector_version(connection: Connection) -> tuple[int, ...]:
    row = connection.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    try:
        return tuple(int(part) for part in str(row[0]).split(".")[:2]) if row else (0,)
    except ValueError:
        return (0,)
