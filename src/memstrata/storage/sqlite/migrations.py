"""Numbered schema migrations; each runs in one transaction with its record. Never edit a released one."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime

from memstrata.errors import SchemaTooNew, StorageError


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step."""

    version: int
    name: str
    sql: str


# AUTOINCREMENT: seqs and vector ids are never reused after a delete, so an index that
# catches up by "ids above the last one seen" can neither miss a row nor mislabel one.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "turns, full-text index, vectors, events",
        """
        CREATE TABLE turns (
            seq         INTEGER PRIMARY KEY AUTOINCREMENT,
            id          TEXT NOT NULL UNIQUE,
            user_id     TEXT NOT NULL,
            agent_id    TEXT,
            session_id  TEXT,
            role        TEXT NOT NULL,
            name        TEXT,
            content     TEXT NOT NULL,
            created_at  TEXT NOT NULL,
            metadata    TEXT NOT NULL DEFAULT '{}',
            importance  REAL
        );
        CREATE INDEX turns_by_user_time ON turns (user_id, created_at, seq);
        CREATE INDEX turns_by_session ON turns (user_id, session_id, created_at, seq);

        CREATE VIRTUAL TABLE turns_fts USING fts5 (
            content, name, content='turns', content_rowid='seq',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER turns_fts_insert AFTER INSERT ON turns BEGIN
            INSERT INTO turns_fts (rowid, content, name) VALUES (new.seq, new.content, new.name);
        END;
        CREATE TRIGGER turns_fts_delete AFTER DELETE ON turns BEGIN
            INSERT INTO turns_fts (turns_fts, rowid, content, name) VALUES ('delete', old.seq, old.content, old.name);
        END;
        CREATE TRIGGER turns_fts_update AFTER UPDATE OF content, name ON turns BEGIN
            INSERT INTO turns_fts (turns_fts, rowid, content, name) VALUES ('delete', old.seq, old.content, old.name);
            INSERT INTO turns_fts (rowid, content, name) VALUES (new.seq, new.content, new.name);
        END;

        CREATE TABLE turn_vectors (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            turn_seq    INTEGER NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            model_id    TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            dimension   INTEGER NOT NULL,
            vector      BLOB NOT NULL,
            UNIQUE (model_id, turn_seq)
        );
        CREATE INDEX turn_vectors_by_user ON turn_vectors (model_id, user_id, id);
        CREATE INDEX turn_vectors_by_turn ON turn_vectors (turn_seq);

        CREATE TABLE events (
            id          INTEGER PRIMARY KEY,
            at          TEXT NOT NULL,
            kind        TEXT NOT NULL,
            user_id     TEXT,
            detail      TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX events_by_user ON events (user_id, id);
        """,
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version


def migrate(connection: sqlite3.Connection, location: str) -> int:
    """Bring the schema to ``LATEST_VERSION``; refuse a database from a newer memstrata."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        row = connection.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
        current = int(row[0])
        if current > LATEST_VERSION:
            raise SchemaTooNew(
                f"{location} has schema version {current}, but this memstrata knows only up to "
                f"{LATEST_VERSION}; upgrade memstrata (pip install -U memstrata) to open it"
            )
        for migration in MIGRATIONS:
            if migration.version <= current:
                continue
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
