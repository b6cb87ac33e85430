"""Bring a PostgreSQL database to the latest schema: the steps it lacks, in one transaction with their records.

Every opener takes the same transaction-scoped advisory lock first, so several processes
opening one database at once apply each migration exactly once.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors

from memstrata.errors import StorageError
from memstrata.storage import migrating
from memstrata.storage.migrating import Migration
from memstrata.storage.postgres.migrations.schema import SCHEMA
from memstrata.storage.postgres.migrations.upgrades import UPGRADES

#: First key of every advisory lock memstrata takes ("mems" in ASCII), so they never clash with an application's.
LOCK_NAMESPACE = 0x6D656D73
MIGRATION_LOCK = 0
VECTOR_INDEX_LOCK = 1
USER_LOCK_NAMESPACE = LOCK_NAMESPACE + 1

MIGRATIONS: tuple[Migration, ...] = SCHEMA + UPGRADES

LATEST_VERSION = MIGRATIONS[-1].version

# Every table the migrations create (a test holds this to the migrated schema): what
# ``vacuum`` rewrites and ``size_bytes`` sums, never another application's tables.
TABLES = (
    "agent_trust",
    "api_keys",
    "cell_restatements",
    "cell_vectors",
    "cells",
    "consolidation_turns",
    "consolidations",
    "derived",
    "derived_sources",
    "entities",
    "entity_edges",
    "entity_mentions",
    "entity_vectors",
    "events",
    "jobs",
    "pattern_observations",
    "patterns",
    "profile",
    "scenes",
    "schema_migrations",
    "segment_turns",
    "segments",
    "shares",
    "sleep_marks",
    "space_grants",
    "spaces",
    "store_secrets",
    "turn_scores",
    "turn_vectors",
    "turns",
    "user_term_counts",
    "user_turn_counts",
    "vector_indexes",
    "working_items",
)


def migrate(connection: psycopg.Connection[Any], location: str, lock_timeout_ms: int = 30_000) -> int:
    """Bring the schema to ``LATEST_VERSION`` under an advisory lock; refuse a database from a newer memstrata.

    The lock is waited for at most ``lock_timeout_ms``, then the open fails with a ``StorageError``.

    The tables pending steps alter (``Migration.locks``) are locked exclusively, in one
    statement, before any step runs, waiting at most ``lock_timeout_ms``: a lock taken
    later, or a weaker one raised later, would deadlock with an older process that holds
    one of them and waits for another.
    """
    wait = max(1, int(lock_timeout_ms))
    try:
        with connection.transaction():
            # Bounded too: a process that hangs while holding it must not hold every other open.
            connection.execute(f"SET LOCAL lock_timeout = {wait}")
            try:
                connection.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_NAMESPACE, MIGRATION_LOCK))
            except errors.LockNotAvailable as exc:
                raise StorageError(
                    f"cannot open {location}: another memstrata process has held the schema's migration lock"
                    f" for {wait / 1000:g} s (it is upgrading the schema, or is stuck doing so); open it again"
                    " once that process is done, or raise busy_timeout_seconds"
                ) from exc
            connection.execute("SET LOCAL lock_timeout = DEFAULT")
            connection.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            row = connection.execute(migrating.RECORDED_VERSION).fetchone()
            current = int(row[0]) if row else 0
            migrating.refuse_if_too_new(current, LATEST_VERSION, location, "'memstrata[postgres]'")
            pending = migrating.pending(MIGRATIONS, current)
            if current >= 1 and pending:
                # Every table a step locks waits this long at most: a session idle in a transaction
                # must not hold the upgrade, and every writer queued behind it, forever.
                connection.execute(f"SET LOCAL lock_timeout = {wait}")
            # turns first, as every writer takes it first: waiting for it, the upgrade holds nothing yet.
            locked = sorted(
                {table for migration in pending for table in migration.locks}, key=lambda t: (t != "turns", t)
            )
            if current >= 1 and locked:  # a database before migration 1 has none of these tables yet
                _lock_tables(connection, locked, location, lock_timeout_ms)
            for migration in pending:
                try:
                    connection.execute(migration.sql)
                except errors.LockNotAvailable as exc:
                    raise StorageError(
                        f"cannot upgrade the schema of {location} (step {migration.version}, {migration.name}):"
                        f" another session kept a table busy for {lock_timeout_ms / 1000:g} s; stop other"
                        " memstrata processes (or end long transactions) and open it again, or raise"
                        " busy_timeout_seconds"
                    ) from exc
                connection.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (migration.version, migration.name)
                )
    except errors.InsufficientPrivilege as exc:
        raise StorageError(
            f"cannot create memstrata's schema in {location}: {exc.diag.message_primary or exc}; connect as a role"
            " that may create tables in the database, and have an administrator run CREATE EXTENSION vector"
            " in it once if the role may not"
        ) from exc
    except (errors.UndefinedFile, errors.FeatureNotSupported) as exc:
        raise StorageError(
            f"cannot set up {location}: {exc.diag.message_primary or exc}; the pgvector extension must be"
            " installed on the server (https://github.com/pgvector/pgvector; most managed PostgreSQL services"
            " offer it as 'vector')"
        ) from exc
    except psycopg.Error as exc:
        raise StorageError(f"cannot migrate the schema of {location}: {exc}") from exc
    return LATEST_VERSION


def _lock_tables(connection: psycopg.Connection[Any], tables: list[str], location: str, lock_timeout_ms: int) -> None:
    """Lock the existing ``tables`` exclusively, in one statement, until the transaction ends (``lock_timeout``
    bounds the wait), or say they were busy."""
    present = [
        table
        for table in tables
        if connection.execute("SELECT to_regclass(%s)", (table,)).fetchone() not in (None, (None,))
    ]
    if not present:
        return
    try:
        connection.execute(f"LOCK TABLE {', '.join(present)} IN ACCESS EXCLUSIVE MODE")
    except errors.LockNotAvailable as exc:
        raise StorageError(
            f"cannot upgrade the schema of {location}: another session kept {_tables(present)} busy for"
            f" {lock_timeout_ms / 1000:g} s; stop other memstrata processes (or end long transactions) and"
            " open it again, or raise busy_timeout_seconds"
        ) from exc


def _tables(names: list[str]) -> str:
    """ "the turns table", "the turns and derived tables", "the turns, cells and derived tables"."""
    if len(names) == 1:
        return f"the {names[0]} table"
    return f"the {', '.join(names[:-1])} and {names[-1]} tables"
