"""Helpers for tests that take a SQLite store back to an older schema."""

from __future__ import annotations

import sqlite3


def undo_key_roles(connection: sqlite3.Connection) -> None:
    """Undo SQLite's migration 17 (the role of an API key)."""
    connection.execute("ALTER TABLE api_keys DROP COLUMN role")


def undo_spaces(connection: sqlite3.Connection) -> None:
    """Undo SQLite's migration 16 (spaces, grants, trust, share links, the agent of an API key), and 17 after it."""
    undo_key_roles(connection)
    for table in ("space_grants", "spaces", "agent_trust", "shares"):
        connection.execute(f"DROP TABLE {table}")
    connection.execute("ALTER TABLE api_keys DROP COLUMN agent_id")
