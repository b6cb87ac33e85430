"""SQL for the mid-term tier and sleep: topic segments, their heat, eviction, promotion to scenes, consolidations."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from memstrata.models import Consolidation, Segment, format_time
from memstrata.storage.sqlite.rows import chunks
from memstrata.storage.sqlite.shared import optional_time, put_derived, tier_event
from memstrata.storage.visits import RECORD_VISITS, visited

_SEGMENT_COLUMNS = (
    "id, user_id, summary, keywords, visits, turn_count, heat, state, created_at, last_activity,"
    " session_id, promoted_at"
)


class SegmentsMixin:
    """Mid-term methods the tiers call; mixed into SQLiteStore, which provides ``_read`` and ``_write``."""

    _read: Callable[[Callable[[sqlite3.Connection], Any]], Any]
    _write: Callable[[Callable[[sqlite3.Connection], Any]], Any]

    # -- segments ---------------------------------------------------------------------

    def active_segments(self, user_id: str, model_id: str | None = None) -> list[tuple[Segment, bytes | None]]:
        """The user's active mid-term segments with their directions (None: stored for another model)."""
        rows = self._read(
            lambda connection: connection.execute(
                f"SELECT {_SEGMENT_COLUMNS}, CASE WHEN :model IS NULL OR centroid_model IS NULL"
                " OR centroid_model = :model THEN centroid END"
                " FROM segments WHERE user_id = :user AND state = 'active'",
                {"user": user_id, "model": model_id},
            ).fetchall()
        )
        return [(_segment(row), row[12]) for row in rows]

    def segments(self, user_id: str, *, limit: int = 50) -> list[Segment]:
        """Segments of a user, hottest first (archived ones last)."""
        rows = self._read(
            lambda connection: connection.execute(
                f"SELECT {_SEGMENT_COLUMNS} FROM segments WHERE user_id = ?"
                " ORDER BY state = 'active' DESC, heat DESC, id LIMIT ?",
                (user_id, limit),
            ).fetchall()
        )
        return [_segment(row) for row in rows]

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

    def segment_turn_seqs(self, segment_id: str) -> list[int]:
        """Turns that make up a segment, oldest first."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT turn_seq FROM segment_turns WHERE segment_id = ? ORDER BY turn_seq", (segment_id,)
            ).fetchall()
        )
        return [int(row[0]) for row in rows]

    def active_segment(self, segment_id: str) -> tuple[Segment, list[int]] | None:
        """An active segment and its turns, oldest first, read together; None if it is gone or archived."""
        row = self._read(
            lambda connection: connection.execute(
                f"SELECT {_SEGMENT_COLUMNS}, (SELECT json_group_array(turn_seq) FROM"
                " (SELECT turn_seq FROM segment_turns WHERE segment_id = segments.id ORDER BY turn_seq))"
                " FROM segments WHERE id = ? AND state = 'active'",
                (segment_id,),
            ).fetchone()
        )
        return None if row is None else (_segment(row), [int(seq) for seq in json.loads(row[12])])

    def filed_turns(self, turn_seqs: Sequence[int]) -> set[int]:
        """Those of these turns that some segment (active or archived) already holds."""

        def read(connection: sqlite3.Connection) -> set[int]:
            found: set[int] = set()
            for part in chunks([int(seq) for seq in turn_seqs]):
                marks = ",".join("?" * len(part))
                sql = f"SELECT DISTINCT turn_seq FROM segment_turns WHERE turn_seq IN ({marks})"
                found.update(int(row[0]) for row in connection.execute(sql, part))
            return found

        return set(self._read(read))

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

        def work(connection: sqlite3.Connection) -> bool:
            if known_turns is not None and known_turns != _held(connection, segment.id):
                return False
            for part in chunks(sorted({int(seq) for seq in new_turn_seqs})):
                marks = ",".join("?" * len(part))
                sql = f"SELECT 1 FROM segment_turns WHERE turn_seq IN ({marks}) AND segment_id != ? LIMIT 1"
                if connection.execute(sql, (*part, segment.id)).fetchone():
                    return False
                # A turn deleted since it was read: file again without it.
                sql = f"SELECT COUNT(*) FROM turns WHERE seq IN ({marks})"
                if connection.execute(sql, part).fetchone()[0] != len(part):
                    return False
            connection.execute(
                "INSERT INTO segments (id, user_id, session_id, summary, keywords, visits, turn_count, heat, state,"
                " promoted_at, created_at, last_activity, centroid, centroid_model)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
                # Visits and state are not the filing's to set: a visit or an eviction may land meanwhile.
                " ON CONFLICT (id) DO UPDATE SET summary = excluded.summary, keywords = excluded.keywords,"
                # Nor heat and activity back: a visit may have raised them since the read.
                " turn_count = excluded.turn_count, heat = max(segments.heat, excluded.heat),"
                " last_activity = max(segments.last_activity, excluded.last_activity),"
                " centroid = excluded.centroid, centroid_model = excluded.centroid_model",
                (
                    segment.id,
                    segment.user_id,
                    segment.session_id,
                    segment.summary,
                    json.dumps(segment.keywords),
                    segment.visits,
                    segment.turn_count,
                    segment.heat,
                    segment.state,
                    optional_time(segment.promoted_at),
                    format_time(segment.created_at),
                    format_time(segment.last_activity),
                    centroid,
                    model_id,
                ),
            )
            connection.executemany(
                "INSERT OR IGNORE INTO segment_turns (segment_id, turn_seq) VALUES (?, ?)",
                [(segment.id, seq) for seq in new_turn_seqs],
            )
            sources = [
                int(row[0])
                for row in connection.execute("SELECT turn_seq FROM segment_turns WHERE segment_id = ?", (segment.id,))
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

        return bool(self._write(work))

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
        columns = ", ".join("s." + column.strip() for column in _SEGMENT_COLUMNS.split(","))

        def work(connection: sqlite3.Connection) -> list[Segment]:
            # The write lock is held from here: no other writer reads the visits this adds to.
            counting = connection.execute("UPDATE jobs SET counted = 1 WHERE id = ? AND counted = 0", (job_id,))
            holding: dict[int, list[str]] = {}
            found: dict[str, Segment] = {}
            for part in chunks(seqs):
                rows = connection.execute(
                    f"SELECT st.turn_seq, {columns} FROM segment_turns st JOIN segments s ON s.id = st.segment_id"
                    f" WHERE s.user_id = ? AND s.state = 'active' AND st.turn_seq IN ({','.join('?' * len(part))})",
                    (user_id, *part),
                ).fetchall()
                for row in rows:
                    segment = found.setdefault(str(row[1]), _segment(row[1:]))
                    holding.setdefault(int(row[0]), []).append(segment.id)
            if counting.rowcount != 1:
                return list(found.values())
            for after in visited(found, holding, searches, now, heat):
                connection.execute(
                    RECORD_VISITS.replace("%s", "?"), (after.visits, after.heat, format_time(now), after.id)
                )
                found[after.id] = after
            return list(found.values())

        result: list[Segment] = self._write(work)
        return result

    def archive_segments(self, user_id: str, segment_ids: Sequence[str], reason: Mapping[str, float]) -> None:
        """Move segments out of the active mid-term set; their turns stay searchable as episodes."""

        def work(connection: sqlite3.Connection) -> None:
            for segment_id in segment_ids:
                connection.execute("UPDATE segments SET state = 'archived' WHERE id = ?", (segment_id,))
                connection.execute("UPDATE derived SET is_current = 0 WHERE id = ?", (segment_id,))
                tier_event(connection, "eviction", user_id, {"segment_id": segment_id, "heat": reason.get(segment_id)})

        self._write(work)

    def promote_segment(self, segment: Segment, scene_id: str, title: str, now: datetime) -> None:
        """Turn a hot segment into a long-term scene; its turns' cells join the scene. A segment is promoted once."""

        def work(connection: sqlite3.Connection) -> None:
            # Once: another worker may have promoted it since this one read it.
            if not connection.execute(
                "UPDATE segments SET promoted_at = ? WHERE id = ? AND promoted_at IS NULL",
                (format_time(now), segment.id),
            ).rowcount:
                return
            connection.execute(
                "INSERT INTO scenes (id, user_id, title, summary, segment_id, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (scene_id, segment.user_id, title, segment.summary, segment.id, format_time(now), format_time(now)),
            )
            connection.execute(
                "UPDATE cells SET scene_id = ? WHERE scene_id IS NULL AND source_turn_seq IN"
                " (SELECT turn_seq FROM segment_turns WHERE segment_id = ?)",
                (scene_id, segment.id),
            )
            sources = [
                int(row[0])
                for row in connection.execute("SELECT turn_seq FROM segment_turns WHERE segment_id = ?", (segment.id,))
            ]
            put_derived(connection, scene_id, segment.user_id, "scene", f"{title}: {segment.summary}", sources, now)
            tier_event(
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
            "SELECT seq FROM turns WHERE user_id = ? AND seq NOT IN (SELECT turn_seq FROM consolidation_turns)"
        )

        def work(connection: sqlite3.Connection) -> list[int]:
            fresh = connection.execute(
                f"{unconsolidated} AND seq > ? ORDER BY seq LIMIT ?", (user_id, after_seq, limit)
            ).fetchall()
            room = limit - len(fresh)
            older = (
                connection.execute(
                    f"{unconsolidated} AND seq <= ? ORDER BY seq DESC LIMIT ?", (user_id, after_seq, room)
                ).fetchall()
                if room > 0
                else []
            )
            return sorted(int(row[0]) for row in [*fresh, *older])

        seqs: list[int] = self._read(work)
        return seqs

    def unconsolidated_size(self, user_id: str, *, after_seq: int = 0) -> tuple[int, int]:
        """(turns, words) of a user not yet in any consolidation, of the turns after ``after_seq``; in SQL."""
        row = self._read(
            lambda connection: connection.execute(
                "SELECT COUNT(*), COALESCE(SUM(length(trim(content)) - length(replace(trim(content), ' ', '')) + 1), 0)"
                " FROM turns WHERE user_id = ? AND seq > ? AND seq NOT IN (SELECT turn_seq FROM consolidation_turns)",
                (user_id, after_seq),
            ).fetchone()
        )
        return int(row[0]), int(row[1])

    def slept_through(self, user_id: str) -> int:
        """The newest turn seq the user's last sleep looked at (0: none yet)."""
        row = self._read(
            lambda connection: connection.execute(
                "SELECT through_seq FROM sleep_marks WHERE user_id = ?", (user_id,)
            ).fetchone()
        )
        return int(row[0]) if row else 0

    def mark_slept(self, user_id: str, through_seq: int) -> None:
        """Record that a sleep of the user looked at the turns up to ``through_seq`` (never moves back)."""
        self._write(
            lambda connection: connection.execute(
                # Only while the user has turns: a sleep that a forget overtook leaves no trace of them.
                "INSERT INTO sleep_marks (user_id, through_seq) SELECT ?1, ?2"
                " WHERE EXISTS (SELECT 1 FROM turns WHERE user_id = ?1) ON CONFLICT (user_id)"
                " DO UPDATE SET through_seq = MAX(through_seq, excluded.through_seq)",
                (user_id, through_seq),
            )
        )

    def add_consolidation(self, consolidation: Consolidation, turn_seqs: Sequence[int]) -> bool:
        """Store a consolidation summary with links to its source turns; False if one of them has one already."""

        def work(connection: sqlite3.Connection) -> bool:
            # Another sleep of this user (another process, or a job run twice) may have taken them.
            marks = ",".join("?" * len(turn_seqs))
            if (
                turn_seqs
                and connection.execute(
                    f"SELECT 1 FROM consolidation_turns WHERE turn_seq IN ({marks}) LIMIT 1", list(turn_seqs)
                ).fetchone()
            ):
                return False
            connection.execute(
                "INSERT INTO consolidations (id, user_id, summary, compression_ratio, entity_preservation, tes,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    consolidation.id,
                    consolidation.user_id,
                    consolidation.summary,
                    consolidation.compression_ratio,
                    consolidation.entity_preservation,
                    consolidation.tes,
                    format_time(consolidation.created_at),
                ),
            )
            connection.executemany(
                "INSERT INTO consolidation_turns (consolidation_id, turn_seq) VALUES (?, ?)",
                [(consolidation.id, seq) for seq in turn_seqs],
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
            tier_event(
                connection,
                "consolidation",
                consolidation.user_id,
                {"id": consolidation.id, "turns": len(turn_seqs), "tes": round(consolidation.tes, 4)},
            )

            return True

        return bool(self._write(work))

    def consolidations(self, user_id: str, *, limit: int = 20) -> list[Consolidation]:
        """Recent consolidations of a user, newest first."""

        def work(connection: sqlite3.Connection) -> list[Consolidation]:
            rows = connection.execute(
                "SELECT id, user_id, summary, compression_ratio, entity_preservation, tes, created_at"
                " FROM consolidations WHERE user_id = ? ORDER BY created_at DESC, id DESC LIMIT ?",
                (user_id, limit),
            ).fetchall()
            result = []
            for row in rows:
                sources = tuple(
                    str(s[0])
                    for s in connection.execute(
                        "SELECT t.id FROM consolidation_turns c JOIN turns t ON t.seq = c.turn_seq"
                        " WHERE c.consolidation_id = ? ORDER BY t.seq",
                        (row[0],),
                    )
                )
                result.append(
                    Consolidation(
                        str(row[0]),
                        str(row[1]),
                        str(row[2]),
                        sources,
                        float(row[3]),
                        float(row[4]),
                        float(row[5]),
                        datetime.fromisoformat(row[6]),
                    )
                )
            return result

        return list(self._read(work))


def _segment(row: Sequence[Any]) -> Segment:
    return Segment(
        id=str(row[0]),
        user_id=str(row[1]),
        summary=str(row[2]),
        keywords=tuple(json.loads(row[3])),
        visits=int(row[4]),
        turn_count=int(row[5]),
        heat=float(row[6]),
        state=str(row[7]),
        created_at=datetime.fromisoformat(row[8]),
        last_activity=datetime.fromisoformat(row[9]),
        session_id=row[10],
        promoted_at=datetime.fromisoformat(row[11]) if row[11] else None,
    )


def _held(connection: sqlite3.Connection, segment_id: str) -> int | None:
    """How many turns an active segment holds; None when it is gone or archived."""
    if connection.execute("SELECT 1 FROM segments WHERE id = ? AND state = 'active'", (segment_id,)).fetchone() is None:
        return None
    return int(
        connection.execute("SELECT COUNT(*) FROM segment_turns WHERE segment_id = ?", (segment_id,)).fetchone()[0]
    )
