"""The mid-term tier in SQLite: what it words apart from PostgreSQL (``sql_segments.py`` holds the rest)."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from memstrata.models import Segment
from memstrata.storage.sql_segments import SEGMENT_COLUMNS, SegmentStatements, Touched, segment_from_row
from memstrata.storage.sqlite.rows import SQLITE, chunks
from memstrata.storage.sqlite.shared import SQLiteRunner


class SegmentsMixin(SQLiteRunner, SegmentStatements[sqlite3.Connection]):
    """Mid-term and sleep methods; mixed into SQLiteStore, which provides ``_read`` and ``_write``."""

    _UNCONSOLIDATED = "t.seq NOT IN (SELECT turn_seq FROM consolidation_turns)"

    def _held(self, connection: sqlite3.Connection, segment_id: str) -> int | None:
        """How many turns an active segment holds; None when it is gone or archived."""
        if (
            connection.execute("SELECT 1 FROM segments WHERE id = ? AND state = 'active'", (segment_id,)).fetchone()
            is None
        ):
            return None
        return int(
            connection.execute("SELECT COUNT(*) FROM segment_turns WHERE segment_id = ?", (segment_id,)).fetchone()[0]
        )

    def segment_before(self, user_id: str, turn_seq: int) -> tuple[str, datetime] | None:
        """The segment of the user's latest filed turn said before turn ``turn_seq`` in its session, and when."""
        row = self._read(
            lambda connection: connection.execute(
                "SELECT st.segment_id, t.created_at FROM turns t JOIN segment_turns st ON st.turn_seq = t.seq"
                " JOIN turns this ON this.seq = ? AND this.user_id = t.user_id"
                " WHERE t.user_id = ? AND t.session_id IS this.session_id"
                " AND (t.created_at, t.seq) < (this.created_at, this.seq)"
                " ORDER BY t.created_at DESC, t.seq DESC LIMIT 1",
                (turn_seq, user_id),
            ).fetchone()
        )
        return None if row is None else (str(row[0]), datetime.fromisoformat(row[1]))

    def turns_after(self, user_id: str, turn_seq: int, limit: int) -> list[int]:
        """The seqs of up to ``limit`` turns said after turn ``turn_seq`` in its session, in the order said."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT t.seq FROM turns t JOIN turns this ON this.seq = ? AND this.user_id = t.user_id"
                " WHERE t.user_id = ? AND t.session_id IS this.session_id"
                " AND (t.created_at, t.seq) > (this.created_at, this.seq)"
                " ORDER BY t.created_at, t.seq LIMIT ?",
                (turn_seq, user_id, limit),
            ).fetchall()
        )
        return [int(row[0]) for row in rows]

    def _touched(self, connection: sqlite3.Connection, user_id: str, seqs: list[int], *, counting: bool) -> Touched:
        # The write lock is held: no other writer reads the visits this adds to.
        holding: dict[int, list[str]] = {}
        found: dict[str, Segment] = {}
        for part in chunks(seqs):
            rows = connection.execute(
                f"SELECT st.turn_seq, {SEGMENT_COLUMNS} FROM segment_turns st"
                " JOIN segments s ON s.id = st.segment_id"
                f" WHERE s.user_id = ? AND s.state = 'active' AND st.turn_seq IN ({','.join('?' * len(part))})",
                (user_id, *part),
            ).fetchall()
            for row in rows:
                segment = found.setdefault(str(row[1]), segment_from_row(SQLITE, row[1:]))
                holding.setdefault(int(row[0]), []).append(segment.id)
        return found, holding
