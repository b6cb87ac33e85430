"""What the SQLite mixins build on: the dialect and runner of the shared statements, derived search items, events."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from memstrata.models import format_time
from memstrata.storage.dialect import DerivedItem, Runner
from memstrata.storage.sqlite.rows import SQLITE


class SQLiteRunner(Runner[sqlite3.Connection]):
    """The SQLite side of the shared statements: its dialect, derived items and turn links."""

    dialect = SQLITE

    def _put_derived(self, connection: sqlite3.Connection, item: DerivedItem) -> None:
        row = connection.execute("SELECT seq FROM derived WHERE id = ?", (item.id,)).fetchone()
        if row is None:
            cursor = connection.execute(
                "INSERT INTO derived (id, user_id, tier, content, is_current, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (item.id, item.user_id, item.tier, item.content, int(item.is_current), format_time(item.created_at)),
            )
            seq = int(cursor.lastrowid or 0)
        else:
            seq = int(row[0])
            connection.execute(
                "UPDATE derived SET content = ?, is_current = ? WHERE seq = ?",
                (item.content, int(item.is_current), seq),
            )
        connection.executemany(
            "INSERT OR IGNORE INTO derived_sources (derived_seq, turn_seq) VALUES (?, ?)",
            [(seq, source) for source in item.sources],
        )

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
