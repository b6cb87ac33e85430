"""The mid-term tier in PostgreSQL: what it words apart from SQLite (``sql_segments.py`` holds the rest)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memstrata.storage.postgres.connection import Connected
from memstrata.storage.postgres.rows import POSTGRES, Connection, utc
from memstrata.storage.sql_segments import SEGMENT_COLUMNS, SegmentStatements, Touched, segment_from_row


class SegmentsMixin(Connected, SegmentStatements[Connection]):
    """Methods the tiers call for segments, scenes and consolidations."""

    _UNCONSOLIDATED = "NOT EXISTS (SELECT 1 FROM consolidation_turns c WHERE c.turn_seq = t.seq)"

    def _held(self, connection: Connection, segment_id: str) -> int | None:
        return _held(connection, segment_id)

    def segment_before(self, user_id: str, turn_seq: int) -> tuple[str, datetime] | None:
        """The segment of the user's latest filed turn said before turn ``turn_seq`` in its session, and when."""

        def read(connection: Connection) -> Any:
            this = connection.execute(
                "SELECT session_id, created_at FROM turns WHERE seq = %s AND user_id = %s", (turn_seq, user_id)
            ).fetchone()
            if this is None:
                return None
            # The turn's own values as parameters, so the session index bounds the scan.
            same_session = "t.session_id IS NULL" if this[0] is None else "t.session_id = %(session)s"
            return connection.execute(
                "SELECT st.segment_id, t.created_at FROM turns t JOIN segment_turns st ON st.turn_seq = t.seq"
                f" WHERE t.user_id = %(user)s AND {same_session} AND (t.created_at, t.seq) < (%(at)s, %(seq)s)"
                " ORDER BY t.created_at DESC, t.seq DESC LIMIT 1",
                {"user": user_id, "session": this[0], "at": this[1], "seq": turn_seq},
            ).fetchone()

        row = self._read(read)
        return None if row is None else (str(row[0]), utc(row[1]))

    def turns_after(self, user_id: str, turn_seq: int, limit: int) -> list[int]:
        """The seqs of up to ``limit`` turns said after turn ``turn_seq`` in its session, in the order said."""

        def read(connection: Connection) -> Any:
            this = connection.execute(
                "SELECT session_id, created_at FROM turns WHERE seq = %s AND user_id = %s", (turn_seq, user_id)
            ).fetchone()
            if this is None:
                return []
            # The turn's own values as parameters, so the session index bounds the scan.
            same_session = "t.session_id IS NULL" if this[0] is None else "t.session_id = %(session)s"
            return connection.execute(
                f"SELECT t.seq FROM turns t WHERE t.user_id = %(user)s AND {same_session}"
                " AND (t.created_at, t.seq) > (%(at)s, %(seq)s) ORDER BY t.created_at, t.seq LIMIT %(limit)s",
                {"user": user_id, "session": this[0], "at": this[1], "seq": turn_seq, "limit": limit},
            ).fetchall()

        return [int(row[0]) for row in self._read(read)]

    def _touched(self, connection: Connection, user_id: str, seqs: list[int], *, counting: bool) -> Touched:
        # The segments' rows in id order: a worker counting other jobs waits per segment.
        lock = " FOR UPDATE OF s" if counting else ""
        rows = connection.execute(
            f"SELECT {SEGMENT_COLUMNS}, ARRAY(SELECT st.turn_seq FROM segment_turns st"
            " WHERE st.segment_id = s.id AND st.turn_seq = ANY(%s::bigint[])) FROM segments s"
            " WHERE s.user_id = %s AND s.state = 'active' AND EXISTS (SELECT 1 FROM segment_turns st"
            f' WHERE st.segment_id = s.id AND st.turn_seq = ANY(%s::bigint[])) ORDER BY s.id COLLATE "C"{lock}',
            (seqs, user_id, seqs),
        ).fetchall()
        found = {str(row[0]): segment_from_row(POSTGRES, row) for row in rows}
        holding: dict[int, list[str]] = {}
        for row in rows:
            for seq in row[12]:
                holding.setdefault(int(seq), []).append(str(row[0]))
        return found, holding


def _held(connection: Connection, segment_id: str) -> int | None:
    """How many turns an active segment holds; None when it is gone or archived."""
    row = connection.execute(
        # The row stays locked until the filing commits: an eviction or a visit waits for it.
        "SELECT (SELECT COUNT(*) FROM segment_turns WHERE segment_id = s.id) FROM segments s"
        " WHERE s.id = %s AND s.state = 'active' FOR UPDATE OF s",
        (segment_id,),
    ).fetchone()
    return None if row is None else int(row[0])
