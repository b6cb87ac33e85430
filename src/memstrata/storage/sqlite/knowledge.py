"""SQL for the derived tiers: segments, cells, profile, patterns, entities, consolidations, search items."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from memstrata.models import Cell, Consolidation, EntityEdge, EntityNode, MemoryEvent, Segment, format_time

T = TypeVar("T")
_CELL_COLUMNS = (
    "c.id, c.user_id, c.kind, c.subject, c.attribute, c.value, c.content, c.salience, c.valid_from,"
    " t.id, c.valid_to, c.superseded_by, c.scene_id"
)
_SEGMENT_COLUMNS = (
    "id, user_id, summary, keywords, visits, turn_count, heat, state, created_at, last_activity,"
    " session_id, promoted_at"
)


class KnowledgeMixin:
    """Methods the tiers call; mixed into SQLiteStore, which provides ``_read`` and ``_write``."""

    _read: Callable[[Callable[[sqlite3.Connection], Any]], Any]
    _write: Callable[[Callable[[sqlite3.Connection], Any]], Any]

    # -- search items -----------------------------------------------------------------

    def derived_fulltext(
        self, match: str, user_id: str, limit: int, tiers: Sequence[str] = ("longterm",)
    ) -> list[tuple[int, float]]:
        """BM25 over current derived items of these tiers (longterm cells, scene, midterm, consolidation)."""
        marks = ",".join("?" * len(tiers))
        sql = (
            "SELECT d.seq, -bm25(derived_fts) FROM derived_fts JOIN derived d ON d.seq = derived_fts.rowid "
            f"WHERE derived_fts MATCH ? AND +d.user_id = ? AND d.is_current = 1 AND d.tier IN ({marks})"
            " ORDER BY bm25(derived_fts) LIMIT ?"
        )
        rows = self._read(lambda connection: connection.execute(sql, (match, user_id, *tiers, limit)).fetchall())
        return [(int(seq), float(score)) for seq, score in rows]

    def derived_items(self, seqs: Sequence[int], user_id: str) -> dict[int, tuple[str, str, str, tuple[str, ...]]]:
        """(id, tier, content, source turn ids) of derived items, by seq."""

        def work(connection: sqlite3.Connection) -> dict[int, tuple[str, str, str, tuple[str, ...]]]:
            result: dict[int, tuple[str, str, str, tuple[str, ...]]] = {}
            for seq in seqs:
                row = connection.execute(
                    "SELECT id, tier, content FROM derived WHERE seq = ? AND user_id = ?", (seq, user_id)
                ).fetchone()
                if row is None:
                    continue
                sources = tuple(
                    str(source[0])
                    for source in connection.execute(
                        "SELECT t.id FROM derived_sources s JOIN turns t ON t.seq = s.turn_seq"
                        " WHERE s.derived_seq = ? ORDER BY t.seq",
                        (seq,),
                    )
                )
                result[seq] = (str(row[0]), str(row[1]), str(row[2]), sources)
            return result

        return dict(self._read(work))

    # -- per-turn scores ----------------------------------------------------------------

    def set_importance(self, scores: Mapping[int, float]) -> None:
        """Record computed importance beside the turns; the turns themselves stay as they were said."""
        self._write(
            lambda connection: connection.executemany(
                "INSERT INTO turn_scores (turn_seq, importance) VALUES (?, ?)"
                " ON CONFLICT (turn_seq) DO UPDATE SET importance = excluded.importance",
                [(seq, score) for seq, score in scores.items()],
            )
        )

    def importance_of(self, turn_seqs: Sequence[int]) -> dict[int, float]:
        """Importance per turn: the caller's when given, else the computed one."""
        if not turn_seqs:
            return {}
        marks = ",".join("?" * len(turn_seqs))
        rows = self._read(
            lambda connection: connection.execute(
                f"SELECT t.seq, COALESCE(t.importance, s.importance) FROM turns t"
                f" LEFT JOIN turn_scores s ON s.turn_seq = t.seq WHERE t.seq IN ({marks})",
                list(turn_seqs),
            ).fetchall()
        )
        return {int(seq): float(value) for seq, value in rows if value is not None}

    def previous_user_text(self, user_id: str, session_id: str | None, before_seq: int) -> str | None:
        """The user's message before ``before_seq`` in the same session."""
        row = self._read(
            lambda connection: connection.execute(
                "SELECT content FROM turns WHERE user_id = ? AND session_id IS ? AND role = 'user' AND seq < ?"
                " ORDER BY seq DESC LIMIT 1",
                (user_id, session_id, before_seq),
            ).fetchone()
        )
        return None if row is None else str(row[0])

    def recent_vectors(self, model_id: str, user_id: str, before_seq: int, limit: int) -> list[bytes]:
        """Vectors of the user's turns just before ``before_seq``, for novelty."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT vector FROM turn_vectors WHERE model_id = ? AND user_id = ? AND turn_seq < ?"
                " ORDER BY turn_seq DESC LIMIT ?",
                (model_id, user_id, before_seq, limit),
            ).fetchall()
        )
        return [bytes(row[0]) for row in rows]

    # -- segments ---------------------------------------------------------------------

    def active_segments(self, user_id: str) -> list[tuple[Segment, bytes | None]]:
        """The user's active mid-term segments with their centroid vectors."""
        rows = self._read(
            lambda connection: connection.execute(
                f"SELECT {_SEGMENT_COLUMNS}, centroid FROM segments WHERE user_id = ? AND state = 'active'",
                (user_id,),
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

    def segment_turn_seqs(self, segment_id: str) -> list[int]:
        """Turns that make up a segment, oldest first."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT turn_seq FROM segment_turns WHERE segment_id = ? ORDER BY turn_seq", (segment_id,)
            ).fetchall()
        )
        return [int(row[0]) for row in rows]

    def save_segment(self, segment: Segment, centroid: bytes, new_turn_seqs: Sequence[int]) -> None:
        """Create or update a segment, link its new turns, and refresh its search item."""

        def work(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT INTO segments (id, user_id, session_id, summary, keywords, visits, turn_count, heat, state,"
                " promoted_at, created_at, last_activity, centroid) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
                " ON CONFLICT (id) DO UPDATE SET summary = excluded.summary, keywords = excluded.keywords,"
                " visits = excluded.visits, turn_count = excluded.turn_count, heat = excluded.heat,"
                " state = excluded.state, last_activity = excluded.last_activity, centroid = excluded.centroid",
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
                    _time(segment.promoted_at),
                    format_time(segment.created_at),
                    format_time(segment.last_activity),
                    centroid,
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
            _put_derived(
                connection,
                segment.id,
                segment.user_id,
                "midterm",
                content,
                sources,
                segment.created_at,
                is_current=segment.state == "active",
            )

        self._write(work)

    def update_segment_heat(self, segment_id: str, *, visits: int, heat: float, last_activity: datetime) -> None:
        """Record visits and the recomputed heat."""
        self._write(
            lambda connection: connection.execute(
                "UPDATE segments SET visits = ?, heat = ?, last_activity = ? WHERE id = ?",
                (visits, heat, format_time(last_activity), segment_id),
            )
        )

    def segments_of_turns(self, user_id: str, turn_seqs: Sequence[int]) -> list[Segment]:
        """Active segments containing any of these turns."""
        if not turn_seqs:
            return []
        marks = ",".join("?" * len(turn_seqs))
        rows = self._read(
            lambda connection: connection.execute(
                f"SELECT DISTINCT {', '.join('s.' + c.strip() for c in _SEGMENT_COLUMNS.split(','))}"
                f" FROM segments s JOIN segment_turns st ON st.segment_id = s.id"
                f" WHERE s.user_id = ? AND s.state = 'active' AND st.turn_seq IN ({marks})",
                (user_id, *turn_seqs),
            ).fetchall()
        )
        return [_segment(row) for row in rows]

    def archive_segments(self, user_id: str, segment_ids: Sequence[str], reason: Mapping[str, float]) -> None:
        """Move segments out of the active mid-term set; their turns stay searchable as episodes."""

        def work(connection: sqlite3.Connection) -> None:
            for segment_id in segment_ids:
                connection.execute("UPDATE segments SET state = 'archived' WHERE id = ?", (segment_id,))
                connection.execute("UPDATE derived SET is_current = 0 WHERE id = ?", (segment_id,))
                _event(connection, "eviction", user_id, {"segment_id": segment_id, "heat": reason.get(segment_id)})

        self._write(work)

    def promote_segment(self, segment: Segment, scene_id: str, title: str, now: datetime) -> None:
        """Turn a hot segment into a long-term scene; its turns' cells join the scene."""

        def work(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT INTO scenes (id, user_id, title, summary, segment_id, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (scene_id, segment.user_id, title, segment.summary, segment.id, format_time(now), format_time(now)),
            )
            connection.execute("UPDATE segments SET promoted_at = ? WHERE id = ?", (format_time(now), segment.id))
            connection.execute(
                "UPDATE cells SET scene_id = ? WHERE scene_id IS NULL AND source_turn_seq IN"
                " (SELECT turn_seq FROM segment_turns WHERE segment_id = ?)",
                (scene_id, segment.id),
            )
            sources = [
                int(row[0])
                for row in connection.execute("SELECT turn_seq FROM segment_turns WHERE segment_id = ?", (segment.id,))
            ]
            _put_derived(connection, scene_id, segment.user_id, "scene", f"{title}: {segment.summary}", sources, now)
            _event(
                connection,
                "promotion",
                segment.user_id,
                {"segment_id": segment.id, "scene_id": scene_id, "heat": segment.heat},
            )

        self._write(work)

    # -- cells and profile ------------------------------------------------------------

    def current_cells(self, user_id: str, subject: str, attribute: str) -> list[Cell]:
        """Cells still valid for one subject and attribute."""
        return self.cells(user_id, subject=subject, attribute=attribute, include_superseded=False)

    def cells(
        self,
        user_id: str,
        *,
        subject: str | None = None,
        attribute: str | None = None,
        include_superseded: bool = False,
        limit: int = 500,
    ) -> list[Cell]:
        """A user's cells, newest first; superseded ones only when asked."""
        clauses, parameters = ["c.user_id = ?"], [user_id]
        if subject is not None:
            clauses.append("c.subject = ?")
            parameters.append(subject)
        if attribute is not None:
            clauses.append("c.attribute = ?")
            parameters.append(attribute)
        if not include_superseded:
            clauses.append("c.valid_to IS NULL")
        sql = (
            f"SELECT {_CELL_COLUMNS} FROM cells c JOIN turns t ON t.seq = c.source_turn_seq"
            f" WHERE {' AND '.join(clauses)} ORDER BY c.valid_from DESC, c.rowid DESC LIMIT ?"
        )
        rows = self._read(lambda connection: connection.execute(sql, (*parameters, limit)).fetchall())
        return [_cell(row) for row in rows]

    def add_cell(self, cell: Cell, source_turn_seq: int, *, single_valued: bool, supersede: Sequence[str]) -> None:
        """Store a cell, closing the validity of the cells it supersedes (kept as history)."""

        def work(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT INTO cells (id, user_id, kind, subject, attribute, value, content, salience, single_valued,"
                " scene_id, source_turn_seq, valid_from, valid_to, superseded_by, created_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,NULL,NULL,?)",
                (
                    cell.id,
                    cell.user_id,
                    cell.kind,
                    cell.subject,
                    cell.attribute,
                    cell.value,
                    cell.content,
                    cell.salience,
                    int(single_valued),
                    cell.scene_id,
                    source_turn_seq,
                    format_time(cell.valid_from),
                    format_time(cell.valid_from),
                ),
            )
            for old_id in supersede:
                connection.execute(
                    "UPDATE cells SET valid_to = ?, superseded_by = ? WHERE id = ? AND valid_to IS NULL",
                    (format_time(cell.valid_from), cell.id, old_id),
                )
                connection.execute("UPDATE derived SET is_current = 0 WHERE id = ?", (old_id,))
                _event(
                    connection,
                    "supersession",
                    cell.user_id,
                    {"old": old_id, "new": cell.id, "subject": cell.subject, "attribute": cell.attribute},
                )
            _put_derived(
                connection, cell.id, cell.user_id, "longterm", _cell_text(cell), [source_turn_seq], cell.valid_from
            )

        self._write(work)

    def set_profile(self, user_id: str, values: Mapping[str, str], source_turn_seq: int, now: datetime) -> None:
        """Upsert profile traits, each with the turn it came from and when."""

        def work(connection: sqlite3.Connection) -> None:
            for key, value in values.items():
                connection.execute(
                    "INSERT INTO profile (user_id, key, value, source_turn_seq, updated_at) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value,"
                    " source_turn_seq = excluded.source_turn_seq, updated_at = excluded.updated_at",
                    (user_id, key, value, source_turn_seq, format_time(now)),
                )

        self._write(work)

    def profile(self, user_id: str) -> dict[str, str]:
        """The user's current profile."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT key, value FROM profile WHERE user_id = ? ORDER BY key", (user_id,)
            ).fetchall()
        )
        return {str(key): str(value) for key, value in rows}

    # -- patterns and entities --------------------------------------------------------

    def observe_pattern(self, user_id: str, key: str, description: str, evidence: str, when: datetime) -> None:
        """Count one more occurrence of an interaction pattern."""
        self._write(
            lambda connection: connection.execute(
                "INSERT INTO patterns (user_id, key, description, count, first_seen, last_seen, evidence)"
                " VALUES (?, ?, ?, 1, ?, ?, ?) ON CONFLICT (user_id, key) DO UPDATE SET count = count + 1,"
                " last_seen = MAX(last_seen, excluded.last_seen), evidence = excluded.evidence",
                (user_id, key, description, format_time(when), format_time(when), evidence[:200]),
            )
        )

    def pattern_rows(self, user_id: str) -> list[tuple[str, str, int, datetime, datetime, str]]:
        """(key, description, count, first_seen, last_seen, evidence) of a user's patterns."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT key, description, count, first_seen, last_seen, evidence FROM patterns WHERE user_id = ?",
                (user_id,),
            ).fetchall()
        )
        return [
            (str(r[0]), str(r[1]), int(r[2]), datetime.fromisoformat(r[3]), datetime.fromisoformat(r[4]), str(r[5]))
            for r in rows
        ]

    def add_entities(self, user_id: str, turn_seq: int, names: Sequence[tuple[str, str]], when: datetime) -> None:
        """Record (name, kind) mentions in one turn and their co-occurrence edges."""

        def work(connection: sqlite3.Connection) -> None:
            ids: list[int] = []
            for name, kind in dict.fromkeys(names):
                connection.execute(
                    "INSERT INTO entities (user_id, name, kind, mentions, first_seen, last_seen)"
                    " VALUES (?, ?, ?, 0, ?, ?) ON CONFLICT (user_id, name) DO NOTHING",
                    (user_id, name, kind, format_time(when), format_time(when)),
                )
                row = connection.execute(
                    "SELECT id FROM entities WHERE user_id = ? AND name = ?", (user_id, name)
                ).fetchone()
                entity_id = int(row[0])
                inserted = connection.execute(
                    "INSERT OR IGNORE INTO entity_mentions (entity_id, turn_seq) VALUES (?, ?)", (entity_id, turn_seq)
                ).rowcount
                if inserted:
                    connection.execute(
                        "UPDATE entities SET mentions = mentions + 1, last_seen = MAX(last_seen, ?),"
                        " kind = CASE WHEN kind = 'other' THEN ? ELSE kind END WHERE id = ?",
                        (format_time(when), kind, entity_id),
                    )
                    ids.append(entity_id)
            for position, first in enumerate(ids):
                for second in ids[position + 1 :]:
                    source, target = min(first, second), max(first, second)
                    connection.execute(
                        "INSERT INTO entity_edges (user_id, source, target, weight, last_seen)"
                        " VALUES (?, ?, ?, 1, ?) ON CONFLICT (source, target)"
                        " DO UPDATE SET weight = weight + 1, last_seen = excluded.last_seen",
                        (user_id, source, target, format_time(when)),
                    )

        self._write(work)

    def entities(self, user_id: str, *, names: Sequence[str] | None = None, limit: int = 50) -> list[EntityNode]:
        """Entities of a user, most mentioned first (or the ones named, case-insensitively)."""
        sql = "SELECT name, kind, mentions, first_seen, last_seen FROM entities WHERE user_id = ?"
        parameters: list[Any] = [user_id]
        if names is not None:
            if not names:
                return []
            sql += f" AND lower(name) IN ({','.join('?' * len(names))})"
            parameters.extend(name.lower() for name in names)
        sql += " ORDER BY mentions DESC, name LIMIT ?"
        rows = self._read(lambda connection: connection.execute(sql, (*parameters, limit)).fetchall())
        return [
            EntityNode(str(r[0]), str(r[1]), int(r[2]), datetime.fromisoformat(r[3]), datetime.fromisoformat(r[4]))
            for r in rows
        ]

    def neighbours(self, user_id: str, names: Sequence[str], limit: int = 20) -> list[EntityEdge]:
        """Edges touching the named entities, heaviest first."""
        if not names:
            return []
        marks = ",".join("?" * len(names))
        sql = (
            "SELECT a.name, b.name, e.weight FROM entity_edges e JOIN entities a ON a.id = e.source"
            " JOIN entities b ON b.id = e.target WHERE e.user_id = ?"
            f" AND (lower(a.name) IN ({marks}) OR lower(b.name) IN ({marks})) ORDER BY e.weight DESC LIMIT ?"
        )
        lowered = [name.lower() for name in names]
        rows = self._read(lambda connection: connection.execute(sql, (user_id, *lowered, *lowered, limit)).fetchall())
        return [EntityEdge(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    # -- consolidation ----------------------------------------------------------------

    def unconsolidated_turns(self, user_id: str, limit: int) -> list[int]:
        """Seqs of a user's turns not yet in any consolidation, oldest first."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT seq FROM turns WHERE user_id = ? AND seq NOT IN (SELECT turn_seq FROM consolidation_turns)"
                " ORDER BY seq LIMIT ?",
                (user_id, limit),
            ).fetchall()
        )
        return [int(row[0]) for row in rows]

    def unconsolidated_size(self, user_id: str) -> tuple[int, int]:
        """(turns, words) of a user not yet in any consolidation, counted in SQL."""
        row = self._read(
            lambda connection: connection.execute(
                "SELECT COUNT(*), COALESCE(SUM(length(trim(content)) - length(replace(trim(content), ' ', '')) + 1), 0)"
                " FROM turns WHERE user_id = ? AND seq NOT IN (SELECT turn_seq FROM consolidation_turns)",
                (user_id,),
            ).fetchone()
        )
        return int(row[0]), int(row[1])

    def add_consolidation(self, consolidation: Consolidation, turn_seqs: Sequence[int]) -> None:
        """Store a consolidation summary with links to its source turns."""

        def work(connection: sqlite3.Connection) -> None:
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
            _put_derived(
                connection,
                consolidation.id,
                consolidation.user_id,
                "consolidation",
                consolidation.summary,
                list(turn_seqs),
                consolidation.created_at,
            )
            _event(
                connection,
                "consolidation",
                consolidation.user_id,
                {"id": consolidation.id, "turns": len(turn_seqs), "tes": round(consolidation.tes, 4)},
            )

        self._write(work)

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

    # -- audit and counts -------------------------------------------------------------

    def events(self, user_id: str, *, limit: int = 50) -> list[MemoryEvent]:
        """The user's audit log, newest first."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT at, kind, detail FROM events WHERE user_id = ? ORDER BY id DESC LIMIT ?", (user_id, limit)
            ).fetchall()
        )
        return [MemoryEvent(datetime.fromisoformat(r[0]), str(r[1]), json.loads(r[2])) for r in rows]

    def tier_counts(self, user_id: str) -> dict[str, int]:
        """How many items each tier holds for a user."""
        queries = {
            "episodic": "SELECT COUNT(*) FROM turns WHERE user_id = ?",
            "working": "SELECT COUNT(*) FROM working_items WHERE user_id = ?",
            "midterm_active": "SELECT COUNT(*) FROM segments WHERE user_id = ? AND state = 'active'",
            "midterm_archived": "SELECT COUNT(*) FROM segments WHERE user_id = ? AND state = 'archived'",
            "scenes": "SELECT COUNT(*) FROM scenes WHERE user_id = ?",
            "cells_current": "SELECT COUNT(*) FROM cells WHERE user_id = ? AND valid_to IS NULL",
            "cells_superseded": "SELECT COUNT(*) FROM cells WHERE user_id = ? AND valid_to IS NOT NULL",
            "profile": "SELECT COUNT(*) FROM profile WHERE user_id = ?",
            "patterns": "SELECT COUNT(*) FROM patterns WHERE user_id = ?",
            "entities": "SELECT COUNT(*) FROM entities WHERE user_id = ?",
            "consolidations": "SELECT COUNT(*) FROM consolidations WHERE user_id = ?",
        }

        def work(connection: sqlite3.Connection) -> dict[str, int]:
            return {name: int(connection.execute(sql, (user_id,)).fetchone()[0]) for name, sql in queries.items()}

        return dict(self._read(work))

    def working_seqs(self, user_id: str, session_id: str | None = None) -> list[int]:
        """Turns in working memory (one session, or all of the user's), oldest first."""
        sql = "SELECT turn_seq FROM working_items WHERE user_id = ?"
        parameters: list[Any] = [user_id]
        if session_id is not None:
            sql += " AND session_key = ?"
            parameters.append(session_id)
        rows = self._read(lambda connection: connection.execute(sql + " ORDER BY turn_seq", parameters).fetchall())
        return [int(row[0]) for row in rows]


def purge_derived(connection: sqlite3.Connection, user_id: str, turn_seqs: Sequence[int] | None) -> None:
    """Delete every derived item built from these turns (all of the user's when ``None``).

    Summaries quote their sources, so a deleted turn takes the summaries that cite it along.
    """
    if turn_seqs is None:
        for table in (
            "segments",
            "scenes",
            "cells",
            "profile",
            "patterns",
            "entities",
            "entity_edges",
            "consolidations",
            "derived",
            "working_items",
            "jobs",
        ):
            connection.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,))
        return
    for chunk_start in range(0, len(turn_seqs), 500):
        chunk = list(turn_seqs[chunk_start : chunk_start + 500])
        marks = ",".join("?" * len(chunk))
        connection.execute(
            f"DELETE FROM derived WHERE seq IN (SELECT derived_seq FROM derived_sources WHERE turn_seq IN ({marks}))",
            chunk,
        )
        connection.execute(
            f"DELETE FROM segments WHERE id IN (SELECT segment_id FROM segment_turns WHERE turn_seq IN ({marks}))",
            chunk,
        )
        connection.execute(
            "DELETE FROM consolidations WHERE id IN"
            f" (SELECT consolidation_id FROM consolidation_turns WHERE turn_seq IN ({marks}))",
            chunk,
        )
        # The turns are deleted after this, so their mentions go now: an entity only they
        # mentioned is then unmentioned, and the others count one mention less.
        connection.execute(
            "UPDATE entities SET mentions = mentions - (SELECT count(*) FROM entity_mentions m"
            f" WHERE m.entity_id = entities.id AND m.turn_seq IN ({marks}))"
            f" WHERE id IN (SELECT entity_id FROM entity_mentions WHERE turn_seq IN ({marks}))",
            chunk + chunk,
        )
        connection.execute(f"DELETE FROM entity_mentions WHERE turn_seq IN ({marks})", chunk)
    connection.execute(
        "DELETE FROM entities WHERE user_id = ? AND id NOT IN (SELECT entity_id FROM entity_mentions)", (user_id,)
    )


def _put_derived(
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


def _event(connection: sqlite3.Connection, kind: str, user_id: str, detail: Mapping[str, Any]) -> None:
    connection.execute(
        "INSERT INTO events (at, kind, user_id, detail) VALUES (?, ?, ?, ?)",
        (format_time(datetime.now(UTC)), kind, user_id, json.dumps(dict(detail), sort_keys=True, default=str)),
    )


def _cell_text(cell: Cell) -> str:
    """A cell as searched: its attribute's words make it findable by what it is about."""
    label = cell.attribute.replace(":", " ").replace("_", " ")
    return f"{label}: {cell.value} — {cell.content}"


def _time(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


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


def _cell(row: Sequence[Any]) -> Cell:
    return Cell(
        id=str(row[0]),
        user_id=str(row[1]),
        kind=str(row[2]),
        subject=str(row[3]),
        attribute=str(row[4]),
        value=str(row[5]),
        content=str(row[6]),
        salience=float(row[7]),
        valid_from=datetime.fromisoformat(row[8]),
        source_turn_id=str(row[9]),
        valid_to=datetime.fromisoformat(row[10]) if row[10] else None,
        superseded_by=row[11],
        scene_id=row[12],
    )
