"""What the SQLite mixins build on: the dialect and runner of the shared statements, derived search items, events."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from memstrata.models import format_time
from memstrata.storage.dialect import Runner
from memstrata.storage.sqlite.rows import SQLITE


class SQLiteRunner(Runner[sqlite3.Connection]):
    """The SQLite side of the shared statements: its dialect, derived items and turn links."""

    dialect = SQLITE

    def _put_derived(
        self,
        connection: sqlite3.Connection,
        item_id: str,
        user_id: str,
        tier: str,
        content: str,
        sources: Sequence[int],
        created_at: datetime,
        *,
        is_current: bool = True,
    ) -> None:
        put_derived(connection, item_id, user_id, tier, content, sources, created_at, is_current=is_current)

    def _link_turns(
        self,
        connection: sqlite3.Connection,
        table: str,
        owner: str,
        owner_id: str,
        seqs: Sequence[int],
        *,
        once: bool,
    ) -> None:
        connection.executemany(
            f"INSERT {'OR IGNORE ' if once else ''}INTO {table} ({owner}, turn_seq) VALUES (?, ?)",
            [(owner_id, seq) for seq in seqs],
        )

    def _execute_many(self, connection: sqlite3.Connection, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        connection.executemany(statement, rows)


def put_derived(
    connection: sqlite3.Connection,
    item_id: str,
    user_id: str,
    tier: str,
    content: str,
    sources: Sequence[int],
    created_at: datetime,
    *,
    is_current: bool = True,
) -> None:
    """Insert or update a derived search item (cell, scene, summary) and link it to its source turns."""
    row = connection.execute("SELECT seq FROM derived WHERE id = ?", (item_id,)).fetchone()
    if row is None:
        cursor = connection.execute(
            "INSERT INTO derived (id, user_id, tier, content, is_current, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (item_id, user_id, tier, content, int(is_current), format_time(created_at)),
        )
        seq = int(cursor.lastrowid or 0)
    else:
        seq = int(row[0])
        connection.execute(
            "UPDATE derived SET content = ?, is_current = ? WHERE seq = ?", (content, int(is_current), seq)
        )
    connection.executemany(
        "INSERT OR IGNORE INTO derived_sources (derived_seq, turn_seq) VALUES (?, ?)", [(seq, s) for s in sources]
    )


def tier_event(connection: sqlite3.Connection, kind: str, user_id: str, detail: Mapping[str, Any]) -> None:
    """Record an audit event of the tiers (eviction, promotion, supersession, consolidation)."""
    connection.execute(
        "INSERT INTO events (at, kind, user_id, detail) VALUES (?, ?, ?, ?)",
        (format_time(datetime.now(UTC)), kind, user_id, json.dumps(dict(detail), sort_keys=True, default=str)),
    )


def optional_time(value: datetime | None) -> str | None:
    """A stored timestamp, or NULL."""
    return None if value is None else format_time(value)
