"""Bring a SQLite database to the latest schema: the steps it lacks, in one transaction with their records."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from memstrata.errors import StorageError
from memstrata.storage import migrating
from memstrata.storage.migrating import Migration
from memstrata.storage.sqlite.migrations.schema import SCHEMA
from memstrata.storage.sqlite.migrations.upgrades import UPGRADES

MIGRATIONS: tuple[Migration, ...] = SCHEMA + UPGRADES

LATEST_VERSION = MIGRATIONS[-1].version


def refuse_if_too_new(version: int, location: str) -> None:
    """Raise ``SchemaTooNew`` for a schema ``version`` past what this memstrata knows."""
    migrating.refuse_if_too_new(version, LATEST_VERSION, location, "memstrata")


def stored_version(connection: sqlite3.Connection) -> int:
    """The schema version a database holds (0: none yet), read without writing anything."""
    known = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
    if known.fetchone() is None:
        return 0
    return int(connection.execute(migrating.RECORDED_VERSION).fetchone()[0])


def migrate(connection: sqlite3.Connection, location: str) -> int:
    """Bring the schema to ``LATEST_VERSION``; refuse a database from a newer memstrata."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        current = int(connection.execute(migrating.RECORDED_VERSION).fetchone()[0])
        refuse_if_too_new(current, location)
        for migration in migrating.pending(MIGRATIONS, current):
            for statement in _statements(migration.sql):
                connection.execute(statement)
            connection.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, datetime.now(UTC).isoformat()),
            )
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return LATEST_VERSION


def _statements(script: str) -> list[str]:
    """Split a script into statements, keeping trigger bodies whole."""
    statements: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current.strip())
            current = ""
    if current.strip():
        raise StorageError(f"incomplete SQL in a migration: {current.strip()[:80]}")
    return statements
