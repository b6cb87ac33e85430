"""SQL for the summarising tiers: mid-term segments, long-term scenes and consolidations ("sleep")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from memstrata.models import Consolidation, Segment
from memstrata.storage.postgres.connection import Connected
from memstrata.storage.postgres.derived import put_derived
from memstrata.storage.postgres.rows import Connection, optional_utc, record_event, utc
from memstrata.storage.visits import RECORD_VISITS, visited

_SEGMENT_COLUMNS = (
    "s.id, s.user_id, s.summary, s.keywords, s.visits, s.turn_count, s.heat, s.state, s.created_at,"
    " s.last_activity, s.session_id, s.promoted_at"
)


class SegmentsMixin(Connected):
    """Methods the tiers call for segments, scenes and consolidations."""

    # -- segments ---------------------------------------------------------------------

    def active_segments(self, user_id: str, model_id: str | None = None) -> list[tuple[Segment, bytes | None]]:
        """The user's active mid-term segments with their directions (None: stored for another model)."""
        rows = self._read(
            lambda connection: connection.execute(
                f"SELECT {_SEGMENT_COLUMNS}, CASE WHEN %(model)s::text IS NULL OR s.centroid_model IS NULL"
                " OR s.centroid_model = %(model)s THEN s.centroid END"
                " FROM segments s WHERE s.user_id = %(user)s AND s.state = 'active' ORDER BY s.ordinal",
                {"user": user_id, "model": model_id},
            ).fetchall()
        )
        return [(_segment(row), None if row[12] is None else bytes(row[12])) for row in rows]

    def segments(self, user_id: str, *, limit: int = 50) -> list[Segment]:
        """Segments of a user, hottest first (archived ones last)."""
        rows = self._read(
            lambda connection: connection.execute(
                f"SELECT {_SEGMENT_COLUMNS} FROM segments s WHERE s.user_id = %s"
                " ORDER BY s.state = 'active' DESC, s.heat DESC, s.id COLLATE \"C\" LIMIT %s",
                (user_id, limit),
            ).fetchall()
        )
        return [_segment(row) for row in rows]

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

    def segment_turn_seqs(self, segment_id: str) -> list[int]:
        """Turns that make up a segment, oldest first."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT turn_seq FROM segment_turns WHERE segment_id = %s ORDER BY turn_seq", (segment_id,)
            ).fetchall()
        )
        return [int(row[0]) for row in rows]

    def active_segment(self, segment_id: str) -> tuple[Segment, list[int]] | None:
        """An active segment and its turns, oldest first, read together; None if it is gone or archived."""
        row = self._read(
            lambda connection: connection.execute(
                f"SELECT {_SEGMENT_COLUMNS}, ARRAY(SELECT turn_seq FROM segment_turns WHERE segment_id = s.id"
                " ORDER BY turn_seq) FROM segments s WHERE s.id = %s AND s.state = 'active'",
                (segment_id,),
            ).fetchone()
        )
        return None if row is None else (_segment(row), [int(seq) for seq in row[12]])

    def filed_turns(self, turn_seqs: Sequence[int]) -> set[int]:
        """Those of these turns that some segment (active or archived) already holds."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT DISTINCT turn_seq FROM segment_turns WHERE turn_seq = ANY(%s::bigint[])",
                ([int(seq) for seq in turn_seqs],),
            ).fetchall()
        )
        return {int(row[0]) for row in rows}

    def save_segment(
        self,
        segment: Segment,
        centroid: bytes,
        new_turn_seqs: Sequence[int],
        *,
        known_turns: int | None = None,
        model_id: str | None = None,
    ) -> bool:
        """Create or update a segment, link its new turns, refresh its search item; False if it changed meanwhile."""

        def work(connection: Connection) -> bool:
            # Under the user's writer lock: two filings of one user's turns never interleave.
            if known_turns is not None and known_turns != _held(connection, segment.id):
                return False
            seqs = sorted({int(seq) for seq in new_turn_seqs})
            if connection.execute(
                "SELECT 1 FROM segment_turns WHERE turn_seq = ANY(%s::bigint[]) AND segment_id <> %s LIMIT 1",
                (seqs, segment.id),
            ).fetchone():
                return False
            # A turn deleted since it was read: file again without it.
            count = connection.execute("SELECT COUNT(*) FROM turns WHERE seq = ANY(%s::bigint[])", (seqs,)).fetchone()
            if count is None or int(count[0]) != len(seqs):
                return False
            connection.execute(
                "INSERT INTO segments (id, user_id, session_id, summary, keywords, visits, turn_count, heat, state,"
                " promoted_at, created_at, last_activity, centroid, centroid_model)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                # Visits and state are not the filing's to set: a visit or an eviction may land meanwhile.
                " ON CONFLICT (id) DO UPDATE SET summary = excluded.summary, keywords = excluded.keywords,"
                # Nor heat and activity back: a visit may have raised them since the read.
                " turn_count = excluded.turn_count, heat = GREATEST(segments.heat, excluded.heat),"
                " last_activity = GREATEST(segments.last_activity, excluded.last_activity),"
                " centroid = excluded.centroid, centroid_model = excluded.centroid_model",
                (
                    segment.id,
                    segment.user_id,
                    segment.session_id,
                    segment.summary,
                    Jsonb(list(segment.keywords)),
                    segment.visits,
                    segment.turn_count,
                    segment.heat,
                    segment.state,
                    segment.promoted_at,
                    segment.created_at,
                    segment.last_activity,
                    centroid,
                    model_id,
                ),
            )
            connection.execute(
                "INSERT INTO segment_turns (segment_id, turn_seq) SELECT %s, unnest(%s::bigint[])"
                " ON CONFLICT DO NOTHING",
                (segment.id, [int(seq) for seq in new_turn_seqs]),
            )
            sources = [
                int(row[0])
                for row in connection.execute(
                    "SELECT turn_seq FROM segment_turns WHERE segment_id = %s ORDER BY turn_seq", (segment.id,)
                )
            ]
            content = segment.summary + (f" (topics: {', '.join(segment.keywords)})" if segment.keywords else "")
            put_derived(
                connection,
                segment.id,
                segment.user_id,
                "midterm",
                content,
                sources,
                segment.created_at,
                is_current=segment.state == "active",
            )
            return True

        return self._write(work, lock_users=[segment.user_id])

    def count_visits(
        self,
        job_id: int,
        user_id: str,
        searches: Sequence[Sequence[int]],
        now: datetime,
        heat: Callable[[int, int], float],
    ) -> list[Segment]:
        """Count a visit job's visits once; see ``TierStore.count_visits``."""
        seqs = sorted({int(seq) for search in searches for seq in search})

        def work(connection: Connection) -> list[Segment]:
            # The job's row first, then the segments' rows in id order: a second worker on the
            # same job waits here and then finds it counted; one on other jobs waits per segment.
            counting = connection.execute("UPDATE jobs SET counted = true WHERE id = %s AND NOT counted", (job_id,))
            lock = " FOR UPDATE OF s" if counting.rowcount == 1 else ""  # counted before: only read
            rows = connection.execute(
                f"SELECT {_SEGMENT_COLUMNS}, ARRAY(SELECT st.turn_seq FROM segment_turns st"
                " WHERE st.segment_id = s.id AND st.turn_seq = ANY(%s::bigint[])) FROM segments s"
                " WHERE s.user_id = %s AND s.state = 'active' AND EXISTS (SELECT 1 FROM segment_turns st"
                f' WHERE st.segment_id = s.id AND st.turn_seq = ANY(%s::bigint[])) ORDER BY s.id COLLATE "C"{lock}',
                (seqs, user_id, seqs),
            ).fetchall()
            found = {str(row[0]): _segment(row) for row in rows}
            if counting.rowcount != 1:
                return list(found.values())
            holding: dict[int, list[str]] = {}
            for row in rows:
                for seq in row[12]:
                    holding.setdefault(int(seq), []).append(str(row[0]))
            for after in visited(found, holding, searches, now, heat):
                connection.execute(RECORD_VISITS, (after.visits, after.heat, now, after.id))
                found[after.id] = after
            return list(found.values())

        result: list[Segment] = self._write(work)
        return result

    def archive_segments(self, user_id: str, segment_ids: Sequence[str], reason: Mapping[str, float]) -> None:
        """Move segments out of the active mid-term set; their turns stay searchable as episodes."""

        def work(connection: Connection) -> None:
            for segment_id in sorted(segment_ids):  # row locks in id (code point) order, as counting visits takes them
                connection.execute("UPDATE segments SET state = 'archived' WHERE id = %s", (segment_id,))
                connection.execute("UPDATE derived SET is_current = false WHERE id = %s", (segment_id,))
                record_event(
                    connection, "eviction", user_id, {"segment_id": segment_id, "heat": reason.get(segment_id)}
                )

        self._write(work)

    def promote_segment(self, segment: Segment, scene_id: str, title: str, now: datetime) -> None:
        """Turn a hot segment into a long-term scene; its turns' cells join the scene. A segment is promoted once."""

        def work(connection: Connection) -> None:
            # Once: another worker may have promoted it since this one read it.
            if not connection.execute(
                "UPDATE segments SET promoted_at = %s WHERE id = %s AND promoted_at IS NULL", (now, segment.id)
            ).rowcount:
                return
            connection.execute(
                "INSERT INTO scenes (id, user_id, title, summary, segment_id, created_at, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (scene_id, segment.user_id, title, segment.summary, segment.id, now, now),
            )
            connection.execute(
                "UPDATE cells SET scene_id = %s WHERE scene_id IS NULL AND source_turn_seq IN"
                " (SELECT turn_seq FROM segment_turns WHERE segment_id = %s)",
                (scene_id, segment.id),
            )
            sources = [
                int(row[0])
                for row in connection.execute(
                    "SELECT turn_seq FROM segment_turns WHERE segment_id = %s ORDER BY turn_seq", (segment.id,)
                )
            ]
            put_derived(connection, scene_id, segment.user_id, "scene", f"{title}: {segment.summary}", sources, now)
            record_event(
                connection,
                "promotion",
                segment.user_id,
                {"segment_id": segment.id, "scene_id": scene_id, "heat": segment.heat},
            )

        self._write(work)

    # -- consolidation ----------------------------------------------------------------

    def unconsolidated_turns(self, user_id: str, limit: int, *, after_seq: int = 0) -> list[int]:
        """At most ``limit`` seqs of unconsolidated turns: the oldest after ``after_seq``, then the newest."""
        unconsolidated = (
            "SELECT t.seq FROM turns t WHERE t.user_id = %s AND NOT EXISTS"
            " (SELECT 1 FROM consolidation_turns c WHERE c.turn_seq = t.seq)"
        )

        def work(connection: Connection) -> list[int]:
            fresh = connection.execute(
                f"{unconsolidated} AND t.seq > %s ORDER BY t.seq LIMIT %s", (user_id, after_seq, limit)
            ).fetchall()
            room = limit - len(fresh)
            older = (
                connection.execute(
                    f"{unconsolidated} AND t.seq <= %s ORDER BY t.seq DESC LIMIT %s", (user_id, after_seq, room)
                ).fetchall()
                if room > 0
                else []
            )
            return sorted(int(row[0]) for row in [*fresh, *older])

        return self._read(work)

    def unconsolidated_size(self, user_id: str, *, after_seq: int = 0) -> tuple[int, int]:
        """(turns, words) of a user not yet in any consolidation, of the turns after ``after_seq``; in SQL."""
        row = self._read(
            lambda connection: connection.execute(
                "SELECT COUNT(*), COALESCE(SUM(length(trim(t.content))"
                " - length(replace(trim(t.content), ' ', '')) + 1), 0)"
                " FROM turns t WHERE t.user_id = %s AND t.seq > %s AND NOT EXISTS"
                " (SELECT 1 FROM consolidation_turns c WHERE c.turn_seq = t.seq)",
                (user_id, after_seq),
            ).fetchone()
        )
        assert row is not None  # an aggregate always returns one row
        return int(row[0]), int(row[1])

    def slept_through(self, user_id: str) -> int:
        """The newest turn seq the user's last sleep looked at (0: none yet)."""
        row = self._read(
            lambda connection: connection.execute(
                "SELECT through_seq FROM sleep_marks WHERE user_id = %s", (user_id,)
            ).fetchone()
        )
        return int(row[0]) if row else 0

    def mark_slept(self, user_id: str, through_seq: int) -> None:
        """Record that a sleep of the user looked at the turns up to ``through_seq`` (never moves back)."""
        self._write(
            lambda connection: connection.execute(
                # Only while the user has turns: a sleep that a forget overtook leaves no trace of them.
                "INSERT INTO sleep_marks (user_id, through_seq) SELECT %(user)s, %(through)s"
                " WHERE EXISTS (SELECT 1 FROM turns WHERE user_id = %(user)s) ON CONFLICT (user_id)"
                " DO UPDATE SET through_seq = GREATEST(sleep_marks.through_seq, excluded.through_seq)",
                {"user": user_id, "through": through_seq},
            )
        )

    def add_consolidation(self, consolidation: Consolidation, turn_seqs: Sequence[int]) -> bool:
        """Store a consolidation summary with links to its source turns; False if one of them has one already."""

        def work(connection: Connection) -> bool:
            # Under the user's writer lock: two sleeps of one user never both summarise a turn.
            if connection.execute(
                "SELECT 1 FROM consolidation_turns WHERE turn_seq = ANY(%s::bigint[]) LIMIT 1",
                ([int(seq) for seq in turn_seqs],),
            ).fetchone():
                return False
            connection.execute(
                "INSERT INTO consolidations (id, user_id, summary, compression_ratio, entity_preservation, tes,"
                " created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    consolidation.id,
                    consolidation.user_id,
                    consolidation.summary,
                    consolidation.compression_ratio,
                    consolidation.entity_preservation,
                    consolidation.tes,
                    consolidation.created_at,
                ),
            )
            connection.execute(
                "INSERT INTO consolidation_turns (consolidation_id, turn_seq) SELECT %s, unnest(%s::bigint[])",
                (consolidation.id, [int(seq) for seq in turn_seqs]),
            )
            put_derived(
                connection,
                consolidation.id,
                consolidation.user_id,
                "consolidation",
                consolidation.summary,
                list(turn_seqs),
                consolidation.created_at,
            )
            record_event(
                connection,
                "consolidation",
                consolidation.user_id,
                {"id": consolidation.id, "turns": len(turn_seqs), "tes": round(consolidation.tes, 4)},
            )

            return True

        return bool(self._write(work, lock_users=[consolidation.user_id]))

    def consolidations(self, user_id: str, *, limit: int = 20) -> list[Consolidation]:
        """Recent consolidations of a user, newest first."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT c.id, c.user_id, c.summary, c.compression_ratio, c.entity_preservation, c.tes, c.created_at,"
                " ARRAY(SELECT t.id FROM consolidation_turns ct JOIN turns t ON t.seq = ct.turn_seq"
                " WHERE ct.consolidation_id = c.id ORDER BY t.seq)"
                ' FROM consolidations c WHERE c.user_id = %s ORDER BY c.created_at DESC, c.id COLLATE "C" DESC'
                " LIMIT %s",
                (user_id, limit),
            ).fetchall()
        )
        return [
            Consolidation(
                str(row[0]),
                str(row[1]),
                str(row[2]),
                tuple(str(turn_id) for turn_id in row[7]),
                float(row[3]),
                float(row[4]),
                float(row[5]),
                utc(row[6]),
            )
            for row in rows
        ]


def _segment(row: Sequence[Any]) -> Segment:
    return Segment(
        id=str(row[0]),
        user_id=str(row[1]),
        summary=str(row[2]),
        keywords=tuple(row[3]),
        visits=int(row[4]),
        turn_count=int(row[5]),
        heat=float(row[6]),
        state=str(row[7]),
        created_at=utc(row[8]),
        last_activity=utc(row[9]),
        session_id=row[10],
        promoted_at=optional_utc(row[11]),
    )


def _held(connection: Connection, segment_id: str) -> int | None:
    """How many turns an active segment holds; None when it is gone or archived."""
    row = connection.execute(
        # The row stays locked until the filing commits: an eviction or a visit waits for it.
        "SELECT (SELECT COUNT(*) FROM segment_turns WHERE segment_id = s.id) FROM segments s"
        " WHERE s.id = %s AND s.state = 'active' FOR UPDATE OF s",
        (segment_id,),
    ).fetchone()
    return None if row is None else int(row[0])
