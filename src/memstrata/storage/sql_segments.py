"""The mid-term and sleep statements both stores share: segments, scenes, consolidations.

A backend adds what it words for its own planner or locks (``count_visits``, ``segment_before``,
``turns_after``), how it reads a segment's size under its locks (``_held``), and which turns no
consolidation holds (``_UNCONSOLIDATED``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from memstrata.models import Consolidation, Segment
from memstrata.storage.dialect import C, DerivedItem, Dialect, Runner, record_event
from memstrata.storage.visits import RECORD_VISITS, visited

#: A segment's columns, as ``segment_from_row`` reads them, from ``segments s``.
SEGMENT_COLUMNS = (
    "s.id, s.user_id, s.summary, s.keywords, s.visits, s.turn_count, s.heat, s.state, s.created_at,"
    " s.last_activity, s.session_id, s.promoted_at"
)

#: What a visit job's searches touched: active segments by id, and the ids of those holding each turn seq.
Touched = tuple[dict[str, Segment], dict[int, list[str]]]


def segment_from_row(dialect: Dialect, row: Sequence[Any]) -> Segment:
    """The segment a row selected with ``SEGMENT_COLUMNS`` holds."""
    return Segment(
        id=str(row[0]),
        user_id=str(row[1]),
        summary=str(row[2]),
        keywords=tuple(dialect.read_json(row[3])),
        visits=int(row[4]),
        turn_count=int(row[5]),
        heat=float(row[6]),
        state=str(row[7]),
        created_at=dialect.read_time(row[8]),
        last_activity=dialect.read_time(row[9]),
        session_id=row[10],
        promoted_at=dialect.read_optional_time(row[11]),
    )


class SegmentStatements(Runner[C]):
    """The segment and consolidation methods of ``TierStore`` that both stores run alike."""

    #: Turn ``t`` is in no consolidation yet (a condition each backend words for its planner).
    _UNCONSOLIDATED: str

    def _held(self, connection: C, segment_id: str) -> int | None:
        """How many turns an active segment holds; None when it is gone or archived."""
        raise NotImplementedError

    def _touched(self, connection: C, user_id: str, seqs: list[int], *, counting: bool) -> Touched:
        """The user's active segments holding any of ``seqs`` by id (locked while ``counting``, where rows lock),
        and the segments holding each of those seqs."""
        raise NotImplementedError

    # -- segments ---------------------------------------------------------------------

    def active_segments(self, user_id: str, model_id: str | None = None) -> list[tuple[Segment, bytes | None]]:
        """The user's active mid-term segments with their directions (None: stored for another model)."""
        d = self.dialect
        statement = d.sql(
            f"SELECT {SEGMENT_COLUMNS}, CASE WHEN %(model)s{d.text_cast} IS NULL OR s.centroid_model IS NULL"
            " OR s.centroid_model = %(model)s THEN s.centroid END"
            f" FROM segments s WHERE s.user_id = %(user)s AND s.state = 'active' ORDER BY s.{d.ordinal}"
        )
        rows = self._read(
            lambda connection: connection.execute(statement, {"user": user_id, "model": model_id}).fetchall()
        )
        return [(segment_from_row(d, row), None if row[12] is None else bytes(row[12])) for row in rows]

    def segments(self, user_id: str, *, limit: int = 50) -> list[Segment]:
        """Segments of a user, hottest first (archived ones last)."""
        d = self.dialect
        statement = d.sql(
            f"SELECT {SEGMENT_COLUMNS} FROM segments s WHERE s.user_id = %s"
            f" ORDER BY s.state = 'active' DESC, s.heat DESC, s.id{d.code_point} LIMIT %s"
        )
        rows = self._read(lambda connection: connection.execute(statement, (user_id, limit)).fetchall())
        return [segment_from_row(d, row) for row in rows]

    def segment_turn_seqs(self, segment_id: str) -> list[int]:
        """Turns that make up a segment, oldest first."""
        statement = self.dialect.sql("SELECT turn_seq FROM segment_turns WHERE segment_id = %s ORDER BY turn_seq")
        rows = self._read(lambda connection: connection.execute(statement, (segment_id,)).fetchall())
        return [int(row[0]) for row in rows]

    def active_segment(self, segment_id: str) -> tuple[Segment, list[int]] | None:
        """An active segment and its turns, oldest first, read together; None if it is gone or archived."""
        d = self.dialect
        seqs = d.array("SELECT turn_seq FROM segment_turns WHERE segment_id = s.id ORDER BY turn_seq", "turn_seq")
        statement = d.sql(f"SELECT {SEGMENT_COLUMNS}, {seqs} FROM segments s WHERE s.id = %s AND s.state = 'active'")
        row = self._read(lambda connection: connection.execute(statement, (segment_id,)).fetchone())
        return None if row is None else (segment_from_row(d, row), [int(seq) for seq in d.read_array(row[12])])

    def filed_turns(self, turn_seqs: Sequence[int]) -> set[int]:
        """Those of these turns that some segment (active or archived) already holds."""
        d = self.dialect

        def read(connection: C) -> set[int]:
            found: set[int] = set()
            for part in d.batches([int(seq) for seq in turn_seqs]):
                where, parameters = d.members("turn_seq", part, "bigint")
                statement = d.sql(f"SELECT DISTINCT turn_seq FROM segment_turns WHERE {where}")
                found.update(int(row[0]) for row in connection.execute(statement, parameters))
            return found

        return self._read(read)

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
        d = self.dialect

        def work(connection: C) -> bool:
            # Under the user's writer lock: two filings of one user's turns never interleave.
            if known_turns is not None and known_turns != self._held(connection, segment.id):
                return False
            for part in d.batches(sorted({int(seq) for seq in new_turn_seqs})):
                where, parameters = d.members("turn_seq", part, "bigint")
                statement = d.sql(f"SELECT 1 FROM segment_turns WHERE {where} AND segment_id <> %s LIMIT 1")
                if connection.execute(statement, (*parameters, segment.id)).fetchone():
                    return False
                # A turn deleted since it was read: file again without it.
                where, parameters = d.members("seq", part, "bigint")
                count = connection.execute(d.sql(f"SELECT COUNT(*) FROM turns WHERE {where}"), parameters).fetchone()
                if count is None or int(count[0]) != len(part):
                    return False
            connection.execute(
                d.sql(
                    "INSERT INTO segments (id, user_id, session_id, summary, keywords, visits, turn_count, heat, state,"
                    " promoted_at, created_at, last_activity, centroid, centroid_model)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                    # Visits and state are not the filing's to set: a visit or an eviction may land meanwhile.
                    " ON CONFLICT (id) DO UPDATE SET summary = excluded.summary, keywords = excluded.keywords,"
                    # Nor heat and activity back: a visit may have raised them since the read.
                    f" turn_count = excluded.turn_count, heat = {d.greatest}(segments.heat, excluded.heat),"
                    f" last_activity = {d.greatest}(segments.last_activity, excluded.last_activity),"
                    " centroid = excluded.centroid, centroid_model = excluded.centroid_model"
                ),
                (
                    segment.id,
                    segment.user_id,
                    segment.session_id,
                    segment.summary,
                    d.json(list(segment.keywords)),
                    segment.visits,
                    segment.turn_count,
                    segment.heat,
                    segment.state,
                    d.optional_time(segment.promoted_at),
                    d.time(segment.created_at),
                    d.time(segment.last_activity),
                    centroid,
                    model_id,
                ),
            )
            self._link_turns(connection, "segment_turns", "segment_id", segment.id, new_turn_seqs, once=True)
            content = segment.summary + (f" (topics: {', '.join(segment.keywords)})" if segment.keywords else "")
            sources = self._segment_turns(connection, segment.id)
            is_current = segment.state == "active"
            item = DerivedItem(
                id=segment.id,
                user_id=segment.user_id,
                tier="midterm",
                content=content,
                sources=sources,
                created_at=segment.created_at,
                is_current=is_current,
            )
            self._put_derived(connection, item)
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
        d = self.dialect
        seqs = sorted({int(seq) for search in searches for seq in search})

        def work(connection: C) -> list[Segment]:
            # The job's row first: a second worker on the same job waits here and then finds it
            # counted; one on other jobs waits per segment (or, in SQLite, for the file's write lock).
            marking = d.sql(f"UPDATE jobs SET counted = {d.true} WHERE id = %s AND counted = {d.false}")
            counting = connection.execute(marking, (job_id,)).rowcount == 1
            found, holding = self._touched(connection, user_id, seqs, counting=counting)
            if not counting:  # counted before: only read
                return list(found.values())
            for after in visited(found, holding, searches, now, heat):
                connection.execute(d.sql(RECORD_VISITS), (after.visits, after.heat, d.time(now), after.id))
                found[after.id] = after
            return list(found.values())

        return self._write(work)

    def archive_segments(self, user_id: str, segment_ids: Sequence[str], reason: Mapping[str, float]) -> None:
        """Move segments out of the active mid-term set; their turns stay searchable as episodes."""
        d = self.dialect
        # Where writers lock rows, in id (code point) order, as counting visits takes them.
        ordered = sorted(segment_ids) if d.locks_rows else segment_ids

        def work(connection: C) -> None:
            for segment_id in ordered:
                connection.execute(d.sql("UPDATE segments SET state = 'archived' WHERE id = %s"), (segment_id,))
                connection.execute(d.sql(f"UPDATE derived SET is_current = {d.false} WHERE id = %s"), (segment_id,))
                detail = {"segment_id": segment_id, "heat": reason.get(segment_id)}
                record_event(connection, d, "eviction", user_id, detail)

        self._write(work)

    def promote_segment(self, segment: Segment, scene_id: str, title: str, now: datetime) -> None:
        """Turn a hot segment into a long-term scene; its turns' cells join the scene. A segment is promoted once."""
        d = self.dialect

        def work(connection: C) -> None:
            # Once: another worker may have promoted it since this one read it.
            if not connection.execute(
                d.sql("UPDATE segments SET promoted_at = %s WHERE id = %s AND promoted_at IS NULL"),
                (d.time(now), segment.id),
            ).rowcount:
                return
            connection.execute(
                d.sql(
                    "INSERT INTO scenes (id, user_id, title, summary, segment_id, created_at, updated_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
                ),
                (scene_id, segment.user_id, title, segment.summary, segment.id, d.time(now), d.time(now)),
            )
            connection.execute(
                d.sql(
                    "UPDATE cells SET scene_id = %s WHERE scene_id IS NULL AND source_turn_seq IN"
                    " (SELECT turn_seq FROM segment_turns WHERE segment_id = %s)"
                ),
                (scene_id, segment.id),
            )
            sources = self._segment_turns(connection, segment.id)
            content = f"{title}: {segment.summary}"
            self._put_derived(
                connection,
                DerivedItem(
                    id=scene_id, user_id=segment.user_id, tier="scene", content=content, sources=sources, created_at=now
                ),
            )
            detail = {"segment_id": segment.id, "scene_id": scene_id, "heat": segment.heat}
            record_event(connection, d, "promotion", segment.user_id, detail)

        self._write(work)

    def _segment_turns(self, connection: C, segment_id: str) -> list[int]:
        """The seqs a segment links, in order, inside the caller's transaction."""
        statement = self.dialect.sql("SELECT turn_seq FROM segment_turns WHERE segment_id = %s ORDER BY turn_seq")
        return [int(row[0]) for row in connection.execute(statement, (segment_id,))]

    # -- consolidation ----------------------------------------------------------------

    def unconsolidated_turns(self, user_id: str, limit: int, *, after_seq: int = 0) -> list[int]:
        """At most ``limit`` seqs of unconsolidated turns: the oldest after ``after_seq``, then the newest."""
        d = self.dialect
        unconsolidated = f"SELECT t.seq FROM turns t WHERE t.user_id = %s AND {self._UNCONSOLIDATED}"
        fresh_turns = d.sql(f"{unconsolidated} AND t.seq > %s ORDER BY t.seq LIMIT %s")
        older_turns = d.sql(f"{unconsolidated} AND t.seq <= %s ORDER BY t.seq DESC LIMIT %s")

        def work(connection: C) -> list[int]:
            fresh = connection.execute(fresh_turns, (user_id, after_seq, limit)).fetchall()
            room = limit - len(fresh)
            older = connection.execute(older_turns, (user_id, after_seq, room)).fetchall() if room > 0 else []
            return sorted(int(row[0]) for row in [*fresh, *older])

        return self._read(work)

    def unconsolidated_size(self, user_id: str, *, after_seq: int = 0) -> tuple[int, int]:
        """(turns, words) of a user not yet in any consolidation, of the turns after ``after_seq``; in SQL."""
        statement = self.dialect.sql(
            "SELECT COUNT(*), COALESCE(SUM(length(trim(t.content))"
            " - length(replace(trim(t.content), ' ', '')) + 1), 0)"
            f" FROM turns t WHERE t.user_id = %s AND t.seq > %s AND {self._UNCONSOLIDATED}"
        )
        row = self._read(lambda connection: connection.execute(statement, (user_id, after_seq)).fetchone())
        return int(row[0]), int(row[1])

    def slept_through(self, user_id: str) -> int:
        """The newest turn seq the user's last sleep looked at (0: none yet)."""
        statement = self.dialect.sql("SELECT through_seq FROM sleep_marks WHERE user_id = %s")
        row = self._read(lambda connection: connection.execute(statement, (user_id,)).fetchone())
        return int(row[0]) if row else 0

    def mark_slept(self, user_id: str, through_seq: int) -> None:
        """Record that a sleep of the user looked at the turns up to ``through_seq`` (never moves back)."""
        d = self.dialect
        # Only while the user has turns: a sleep that a forget overtook leaves no trace of them.
        statement = d.sql(
            "INSERT INTO sleep_marks (user_id, through_seq) SELECT %(user)s, %(through)s"
            " WHERE EXISTS (SELECT 1 FROM turns WHERE user_id = %(user)s) ON CONFLICT (user_id)"
            f" DO UPDATE SET through_seq = {d.greatest}(sleep_marks.through_seq, excluded.through_seq)"
        )
        self._write(lambda connection: connection.execute(statement, {"user": user_id, "through": through_seq}))

    def add_consolidation(self, consolidation: Consolidation, turn_seqs: Sequence[int]) -> bool:
        """Store a consolidation summary with links to its source turns; False if one of them has one already."""
        d = self.dialect

        def work(connection: C) -> bool:
            # Under the user's writer lock: two sleeps of one user never both summarise a turn.
            for part in d.batches([int(seq) for seq in turn_seqs]):
                where, parameters = d.members("turn_seq", part, "bigint")
                if connection.execute(
                    d.sql(f"SELECT 1 FROM consolidation_turns WHERE {where} LIMIT 1"), parameters
                ).fetchone():
                    return False
            connection.execute(
                d.sql(
                    "INSERT INTO consolidations (id, user_id, summary, compression_ratio, entity_preservation, tes,"
                    " created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                ),
                (
                    consolidation.id,
                    consolidation.user_id,
                    consolidation.summary,
                    consolidation.compression_ratio,
                    consolidation.entity_preservation,
                    consolidation.tes,
                    d.time(consolidation.created_at),
                ),
            )
            self._link_turns(
                connection, "consolidation_turns", "consolidation_id", consolidation.id, turn_seqs, once=False
            )
            item = DerivedItem(
                id=consolidation.id,
                user_id=consolidation.user_id,
                tier="consolidation",
                content=consolidation.summary,
                sources=list(turn_seqs),
                created_at=consolidation.created_at,
            )
            self._put_derived(connection, item)
            detail = {"id": consolidation.id, "turns": len(turn_seqs), "tes": round(consolidation.tes, 4)}
            record_event(connection, d, "consolidation", consolidation.user_id, detail)
            return True

        return self._write(work, lock_users=[consolidation.user_id])

    def consolidations(self, user_id: str, *, limit: int = 20) -> list[Consolidation]:
        """Recent consolidations of a user, newest first."""
        d = self.dialect
        sources = d.array(
            "SELECT t.id FROM consolidation_turns ct JOIN turns t ON t.seq = ct.turn_seq"
            " WHERE ct.consolidation_id = c.id ORDER BY t.seq",
            "id",
        )
        statement = d.sql(
            "SELECT c.id, c.user_id, c.summary, c.compression_ratio, c.entity_preservation, c.tes, c.created_at,"
            f" {sources} FROM consolidations c WHERE c.user_id = %s"
            f" ORDER BY c.created_at DESC, c.id{d.code_point} DESC LIMIT %s"
        )
        rows = self._read(lambda connection: connection.execute(statement, (user_id, limit)).fetchall())
        return [
            Consolidation(
                id=str(row[0]),
                user_id=str(row[1]),
                summary=str(row[2]),
                source_turn_ids=tuple(str(turn_id) for turn_id in d.read_array(row[7])),
                compression_ratio=float(row[3]),
                entity_preservation=float(row[4]),
                tes=float(row[5]),
                created_at=d.read_time(row[6]),
            )
            for row in rows
        ]
