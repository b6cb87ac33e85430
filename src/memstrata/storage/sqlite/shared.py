"""Row helpers shared by the SQLite tier mixins: derived search items, tier events, optional times."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from memstrata.models import format_time


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
