"""SQL for the per-turn and long-term tiers: importance, cells, profile, patterns, entities, audit log."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memstrata.models import Cell, EntityEdge, EntityNode, MemoryEvent
from memstrata.storage.base import Vectors
from memstrata.storage.cell_vectors import CELLS_WITHOUT_VECTORS, SAVE_CELL_VECTOR
from memstrata.storage.postgres.connection import Connected
from memstrata.storage.postgres.derived import put_derived
from memstrata.storage.postgres.rows import Connection, optional_utc, record_event, utc
from memstrata.storage.text import CELL_TEXT_COLUMNS, cell_text, late_supersession, stale_cell_texts, supersession

_REDERIVE_CHUNK = 2_000
_CELL_COLUMNS = (
    "c.id, c.user_id, c.kind, c.subject, c.attribute, c.value, c.content, c.salience, c.valid_from,"
    " t.id, c.valid_to, c.superseded_by, c.scene_id"
)
_TIER_COUNTS = {
    "episodic": "SELECT COUNT(*) FROM turns WHERE user_id = %(user)s",
    "working": "SELECT COUNT(*) FROM working_items WHERE user_id = %(user)s",
    "midterm_active": "SELECT COUNT(*) FROM segments WHERE user_id = %(user)s AND state = 'active'",
    "midterm_archived": "SELECT COUNT(*) FROM segments WHERE user_id = %(user)s AND state = 'archived'",
    "scenes": "SELECT COUNT(*) FROM scenes WHERE user_id = %(user)s",
    "cells_current": "SELECT COUNT(*) FROM cells WHERE user_id = %(user)s AND valid_to IS NULL",
    "cells_superseded": "SELECT COUNT(*) FROM cells WHERE user_id = %(user)s AND valid_to IS NOT NULL",
    "profile": "SELECT COUNT(*) FROM profile WHERE user_id = %(user)s",
    "patterns": "SELECT COUNT(*) FROM patterns WHERE user_id = %(user)s",
    "entities": "SELECT COUNT(*) FROM entities WHERE user_id = %(user)s",
    "consolidations": "SELECT COUNT(*) FROM consolidations WHERE user_id = %(user)s",
}


class KnowledgeMixin(Connected):
    """Methods the tiers call for importance, cells, profile, patterns, entities and the audit log."""

    # -- per-turn scores ----------------------------------------------------------------

    def set_importance(self, scores: Mapping[int, float]) -> None:
        """Record computed importance beside the turns; the turns themselves stay as they were said."""
        if not scores:
            return
        self._write(
            lambda connection: connection.execute(
                "INSERT INTO turn_scores (turn_seq, importance)"
                " SELECT s.seq, s.importance FROM unnest(%s::bigint[], %s::double precision[]) AS s (seq, importance)"
                " WHERE EXISTS (SELECT 1 FROM turns WHERE turns.seq = s.seq)"
                " ON CONFLICT (turn_seq) DO UPDATE SET importance = excluded.importance",
                (list(scores), list(scores.values())),
            )
        )

    def importance_of(self, turn_seqs: Sequence[int]) -> dict[int, float]:
        """Importance per turn: the caller's when given, else the computed one."""
        if not turn_seqs:
            return {}
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT t.seq, COALESCE(t.importance, s.importance) FROM turns t"
                " LEFT JOIN turn_scores s ON s.turn_seq = t.seq WHERE t.seq = ANY(%s::bigint[])",
                ([int(seq) for seq in turn_seqs],),
            ).fetchall()
        )
        return {int(seq): float(value) for seq, value in rows if value is not None}

    def previous_user_text(self, user_id: str, session_id: str | None, before_seq: int) -> str | None:
        """The user's message before ``before_seq`` in the same session."""
        row = self._read(
            lambda connection: connection.execute(
                "SELECT content FROM turns WHERE user_id = %s AND session_id IS NOT DISTINCT FROM %s::text"
                " AND role = 'user' AND seq < %s ORDER BY seq DESC LIMIT 1",
                (user_id, session_id, before_seq),
            ).fetchone()
        )
        return None if row is None else str(row[0])

    def recent_vectors(self, model_id: str, user_id: str, before_seq: int, limit: int) -> list[bytes]:
        """Vectors of the user's turns just before ``before_seq``, for novelty (as float32 bytes)."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT embedding FROM turn_vectors WHERE model_id = %s AND user_id = %s AND turn_seq < %s"
                " ORDER BY turn_seq DESC LIMIT %s",
                (model_id, user_id, before_seq, limit),
                binary=True,
            ).fetchall()
        )
        return [row[0].tobytes() for row in rows]

    # -- cells and profile ------------------------------------------------------------

    def current_cells(self, user_id: str, subject: str, attribute: str) -> list[Cell]:
        """Every cell still valid for one subject and attribute, newest first."""
        return self.cells(user_id, subject=subject, attribute=attribute, include_superseded=False, limit=None)

    def cells(
        self,
        user_id: str,
        *,
        subject: str | None = None,
        attribute: str | None = None,
        include_superseded: bool = False,
        limit: int | None = 500,
    ) -> list[Cell]:
        """A user's cells, newest first; superseded ones only when asked; all of them with ``limit=None``."""
        clauses, parameters = ["c.user_id = %s"], [user_id]
        if subject is not None:
            clauses.append("c.subject = %s")
            parameters.append(subject)
        if attribute is not None:
            clauses.append("c.attribute = %s")
            parameters.append(attribute)
        if not include_superseded:
            clauses.append("c.valid_to IS NULL")
        query = (
            f"SELECT {_CELL_COLUMNS} FROM cells c JOIN turns t ON t.seq = c.source_turn_seq"
            f" WHERE {' AND '.join(clauses)} ORDER BY c.valid_from DESC, c.ordinal DESC LIMIT %s"
        )
        rows = self._read(lambda connection: connection.execute(query, (*parameters, limit)).fetchall())
        return [_cell(row) for row in rows]

    def add_cell(
        self,
        cell: Cell,
        source_turn_seq: int,
        *,
        single_valued: bool,
        supersede: Sequence[str],
        seen_slot: Mapping[str, bool] | None = None,
    ) -> bool:
        """Store a cell, closing the validity of the cells it supersedes (kept as history).

        False, storing nothing, when ``seen_slot`` is given and the slot is no longer as read.
        """

        def work(connection: Connection) -> bool:
            if seen_slot is not None:
                rows = connection.execute(
                    "SELECT id, valid_to IS NULL FROM cells WHERE user_id = %s AND subject = %s AND attribute = %s",
                    (cell.user_id, cell.subject, cell.attribute),
                ).fetchall()
                if {str(row[0]): bool(row[1]) for row in rows} != dict(seen_slot):
                    return False  # another worker stored, ended or deleted one of them since the read
            connection.execute(
                "INSERT INTO cells (id, user_id, kind, subject, attribute, value, content, salience, single_valued,"
                " scene_id, source_turn_seq, valid_from, valid_to, superseded_by, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    cell.id,
                    cell.user_id,
                    cell.kind,
                    cell.subject,
                    cell.attribute,
                    cell.value,
                    cell.content,
                    cell.salience,
                    single_valued,
                    cell.scene_id,
                    source_turn_seq,
                    cell.valid_from,
                    cell.valid_to,
                    cell.superseded_by,
                    cell.valid_from,
                ),
            )
            if cell.superseded_by is not None:
                record_event(connection, "supersession", cell.user_id, late_supersession(cell))
            for old_id in supersede:
                ended = connection.execute(
                    "UPDATE cells SET valid_to = %s, superseded_by = %s WHERE id = %s AND valid_from <= %s"
                    " AND (valid_to IS NULL OR valid_to > %s)",
                    (cell.valid_from, cell.id, old_id, cell.valid_from, cell.valid_from),
                ).rowcount
                if not ended:  # began after this cell, or already ended before it: not this cell's to end
                    continue
                connection.execute("UPDATE derived SET is_current = false WHERE id = %s", (old_id,))
                record_event(connection, "supersession", cell.user_id, supersession(old_id, cell.id))
            put_derived(
                connection,
                cell.id,
                cell.user_id,
                "longterm",
                cell_text(cell),
                [source_turn_seq],
                cell.valid_from,
                is_current=cell.is_current,
            )
            return True

        return bool(self._write(work, lock_users=[cell.user_id]))

    def set_profile(self, user_id: str, values: Mapping[str, str], source_turn_seq: int, now: datetime) -> None:
        """Upsert profile traits, each with the turn it came from and when."""

        def work(connection: Connection) -> None:
            for key, value in values.items():
                connection.execute(
                    "INSERT INTO profile (user_id, key, value, source_turn_seq, updated_at)"
                    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value,"
                    " source_turn_seq = excluded.source_turn_seq, updated_at = excluded.updated_at"
                    # A turn processed late never overwrites what a newer one set.
                    " WHERE excluded.updated_at >= profile.updated_at",
                    (user_id, key, value, source_turn_seq, now),
                )

        self._write(work)

    def profile(self, user_id: str) -> dict[str, str]:
        """The user's current profile."""
        rows = self._read(
            lambda connection: connection.execute(
                'SELECT key, value FROM profile WHERE user_id = %s ORDER BY key COLLATE "C"', (user_id,)
            ).fetchall()
        )
        return {str(key): str(value) for key, value in rows}

    def profile_entries(self, user_id: str) -> list[tuple[str, str, str | None]]:
        """The profile with who said each trait: (key, value, speaker name of the turn that set it or None), by key."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT p.key, p.value, t.name FROM profile p LEFT JOIN turns t ON t.seq = p.source_turn_seq"
                ' WHERE p.user_id = %s ORDER BY p.key COLLATE "C"',
                (user_id,),
            ).fetchall()
        )
        return [(str(key), str(value), None if name is None else str(name)) for key, value, name in rows]

    # -- patterns and entities --------------------------------------------------------

    def restate_cell(self, user_id: str, cell_id: str, turn_seq: int, value: str, content: str) -> bool:
        """Note that turn ``turn_seq`` said the cell ``cell_id`` again (``value`` in ``content``); False if it is gone.

        The user's writer lock orders this with deletes, which purge and delete under it.
        """

        def work(connection: Connection) -> bool:
            found = connection.execute("SELECT 1 FROM cells WHERE id = %s AND user_id = %s", (cell_id, user_id))
            if found.fetchone() is None:
                return False
            connection.execute(
                "INSERT INTO cell_restatements (cell_id, turn_seq, value, content)"
                " SELECT %s, seq, %s, %s FROM turns WHERE seq = %s AND user_id = %s ON CONFLICT DO NOTHING",
                (cell_id, value, content, turn_seq, user_id),
            )
            return True

        return bool(self._write(work, lock_users=[user_id]))

    def observe_pattern(
        self, user_id: str, turn_seq: int, key: str, description: str, evidence: str, when: datetime
    ) -> None:
        """Count an interaction pattern seen in one turn; the same turn observed again counts once.

        A turn deleted meanwhile (its job read it before) counts nothing: its purge already ran.
        The user's writer lock orders this with deletes, which purge and delete under it.
        """

        def work(connection: Connection) -> None:
            snippet = evidence[:200]
            alive = connection.execute(
                "SELECT 1 FROM turns WHERE seq = %s AND user_id = %s", (turn_seq, user_id)
            ).fetchone()
            if alive is None:
                return
            inserted = connection.execute(
                "INSERT INTO pattern_observations (user_id, key, turn_seq, seen_at, evidence)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (user_id, key, turn_seq, when, snippet),
            ).rowcount
            if not inserted:
                return
            connection.execute(
                "INSERT INTO patterns (user_id, key, description, count, first_seen, last_seen, evidence)"
                " VALUES (%s, %s, %s, 1, %s, %s, %s) ON CONFLICT (user_id, key) DO UPDATE SET"
                " count = patterns.count + 1, last_seen = GREATEST(patterns.last_seen, excluded.last_seen),"
                " evidence = excluded.evidence",
                (user_id, key, description, when, when, snippet),
            )

        self._write(work, lock_users=[user_id])

    def pattern_rows(self, user_id: str) -> list[tuple[str, str, int, datetime, datetime, str]]:
        """(key, description, count, first_seen, last_seen, evidence) of a user's patterns."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT key, description, count, first_seen, last_seen, evidence FROM patterns WHERE user_id = %s",
                (user_id,),
            ).fetchall()
        )
        return [(str(r[0]), str(r[1]), int(r[2]), utc(r[3]), utc(r[4]), str(r[5])) for r in rows]

    def add_entities(self, user_id: str, turn_seq: int, names: Sequence[tuple[str, str]], when: datetime) -> None:
        """Record (name, kind) mentions in one turn and their co-occurrence edges."""

        def work(connection: Connection) -> None:
            ids: list[int] = []
            for name, kind in dict.fromkeys(names):
                connection.execute(
                    "INSERT INTO entities (user_id, name, kind, mentions, first_seen, last_seen)"
                    " VALUES (%s, %s, %s, 0, %s, %s) ON CONFLICT (user_id, name) DO NOTHING",
                    (user_id, name, kind, when, when),
                )
                row = connection.execute(
                    "SELECT id FROM entities WHERE user_id = %s AND name = %s", (user_id, name)
                ).fetchone()
                assert row is not None  # inserted just above, or there already
                entity_id = int(row[0])
                inserted = connection.execute(
                    "INSERT INTO entity_mentions (entity_id, turn_seq) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    (entity_id, turn_seq),
                ).rowcount
                if inserted:
                    connection.execute(
                        "UPDATE entities SET mentions = mentions + 1, last_seen = GREATEST(last_seen, %s),"
                        " kind = CASE WHEN kind = 'other' THEN %s ELSE kind END WHERE id = %s",
                        (when, kind, entity_id),
                    )
                    ids.append(entity_id)
            for position, first in enumerate(ids):
                for second in ids[position + 1 :]:
                    connection.execute(
                        "INSERT INTO entity_edges (user_id, source, target, weight, last_seen)"
                        " VALUES (%s, %s, %s, 1, %s) ON CONFLICT (source, target)"
                        " DO UPDATE SET weight = entity_edges.weight + 1, last_seen = excluded.last_seen",
                        (user_id, min(first, second), max(first, second), when),
                    )

        self._write(work)

    def entities(self, user_id: str, *, names: Sequence[str] | None = None, limit: int = 50) -> list[EntityNode]:
        """Entities of a user, most mentioned first (or the ones named, case-insensitively)."""
        query = "SELECT name, kind, mentions, first_seen, last_seen FROM entities WHERE user_id = %s"
        parameters: list[Any] = [user_id]
        if names is not None:
            if not names:
                return []
            query += " AND lower(name) = ANY(%s::text[])"
            parameters.append([name.lower() for name in names])
        query += ' ORDER BY mentions DESC, name COLLATE "C" LIMIT %s'
        rows = self._read(lambda connection: connection.execute(query, (*parameters, limit)).fetchall())
        return [EntityNode(str(r[0]), str(r[1]), int(r[2]), utc(r[3]), utc(r[4])) for r in rows]

    def neighbours(self, user_id: str, names: Sequence[str], limit: int = 20) -> list[EntityEdge]:
        """Edges touching the named entities, heaviest first."""
        if not names:
            return []
        lowered = [name.lower() for name in names]
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT a.name, b.name, e.weight FROM entity_edges e JOIN entities a ON a.id = e.source"
                " JOIN entities b ON b.id = e.target WHERE e.user_id = %s"
                " AND (lower(a.name) = ANY(%s::text[]) OR lower(b.name) = ANY(%s::text[]))"
                " ORDER BY e.weight DESC, e.source, e.target LIMIT %s",
                (user_id, lowered, lowered, limit),
            ).fetchall()
        )
        return [EntityEdge(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    # -- entity name vectors ----------------------------------------------------------

    def entities_without_vectors(self, user_id: str, model_id: str, limit: int) -> list[tuple[int, str]]:
        """(id, name) of a user's entities with no name vector of ``model_id``, most mentioned first."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT id, name FROM entities e WHERE user_id = %s AND NOT EXISTS ("
                " SELECT 1 FROM entity_vectors v WHERE v.entity_id = e.id AND v.model_id = %s)"
                " ORDER BY mentions DESC, id LIMIT %s",
                (user_id, model_id, limit),
            ).fetchall()
        )
        return [(int(r[0]), str(r[1])) for r in rows]

    def save_entity_vectors(self, model_id: str, vectors: Mapping[int, Vectors]) -> None:
        """Store name vectors by entity id; an entity deleted meanwhile is skipped, a stored vector replaced."""

        def work(connection: Connection) -> None:
            for entity_id, vector in vectors.items():
                connection.execute(
                    "INSERT INTO entity_vectors (entity_id, model_id, vector) SELECT id, %s, %s FROM entities"
                    " WHERE id = %s ON CONFLICT (entity_id, model_id) DO UPDATE SET vector = excluded.vector",
                    (model_id, np.asarray(vector, dtype=np.float32).tobytes(), int(entity_id)),
                )

        self._write(work)

    def entity_vectors(self, user_id: str, model_id: str) -> list[tuple[int, str, Vectors]]:
        """(id, name, name vector) of a user's entities that have a vector of ``model_id``, by id."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT e.id, e.name, v.vector FROM entities e JOIN entity_vectors v ON v.entity_id = e.id"
                " WHERE e.user_id = %s AND v.model_id = %s ORDER BY e.id",
                (user_id, model_id),
            ).fetchall()
        )
        return [(int(r[0]), str(r[1]), np.frombuffer(bytes(r[2]), dtype=np.float32).copy()) for r in rows]

    def entity_mention_seqs(self, user_id: str, entity_ids: Sequence[int]) -> dict[int, list[int]]:
        """The seqs of the turns that mention each of a user's entities, by entity id (oldest first)."""
        if not entity_ids:
            return {}
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT m.entity_id, m.turn_seq FROM entity_mentions m JOIN entities e ON e.id = m.entity_id"
                " WHERE e.user_id = %s AND m.entity_id = ANY(%s::bigint[]) ORDER BY m.entity_id, m.turn_seq",
                (user_id, [int(i) for i in entity_ids]),
            ).fetchall()
        )
        found: dict[int, list[int]] = {}
        for entity_id, seq in rows:
            found.setdefault(int(entity_id), []).append(int(seq))
        return found

    # -- fact vectors -------------------------------------------------------------------

    def cells_without_vectors(self, user_id: str, model_id: str, limit: int) -> list[Cell]:
        """At most ``limit`` of a user's current cells with no vector of ``model_id``, newest first."""
        query = CELLS_WITHOUT_VECTORS.format(columns=_CELL_COLUMNS)
        rows = self._read(lambda connection: connection.execute(query, (user_id, model_id, limit)).fetchall())
        return [_cell(row) for row in rows]

    def save_cell_vectors(self, model_id: str, vectors: Mapping[str, Vectors]) -> None:
        """Store vectors by cell id; a cell deleted meanwhile is skipped, a stored vector replaced."""
        rows = [
            (model_id, np.asarray(vector, dtype=np.float32).tobytes(), cell_id) for cell_id, vector in vectors.items()
        ]

        def work(connection: Connection) -> None:
            with connection.cursor() as cursor:
                cursor.executemany(SAVE_CELL_VECTOR, rows)

        self._write(work)

    # -- audit and counts -------------------------------------------------------------

    def events(self, user_id: str, *, limit: int = 50) -> list[MemoryEvent]:
        """The user's audit log, newest first."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT at, kind, detail FROM events WHERE user_id = %s ORDER BY id DESC LIMIT %s", (user_id, limit)
            ).fetchall()
        )
        return [MemoryEvent(utc(r[0]), str(r[1]), dict(r[2])) for r in rows]

    def tier_counts(self, user_id: str) -> dict[str, int]:
        """How many items each tier holds for a user (one statement, one snapshot)."""
        query = "SELECT " + ", ".join(f"({sql}) AS {name}" for name, sql in _TIER_COUNTS.items())
        row = self._read(lambda connection: connection.execute(query, {"user": user_id}).fetchone())
        assert row is not None  # a SELECT without FROM returns one row
        return {name: int(value) for name, value in zip(_TIER_COUNTS, row, strict=True)}


def rederive_cell_texts(connection: Connection) -> int:
    """Rewrite each cell's search text an older version wrote differently (``stale_cell_texts``); how many.

    Reads the cells a chunk at a time, in id order (so concurrent rebuilds lock rows in one
    order); the generated tsvector follows the new text.
    """
    changed, after = 0, ""
    query = (
        f"SELECT {CELL_TEXT_COLUMNS} FROM cells c JOIN derived d ON d.id = c.id WHERE c.id > %s ORDER BY c.id LIMIT %s"
    )
    while rows := connection.execute(query, (after, _REDERIVE_CHUNK)).fetchall():
        stale = stale_cell_texts(rows)
        if stale:
            with connection.cursor() as cursor:
                cursor.executemany("UPDATE derived SET content = %s WHERE id = %s", stale)
        changed, after = changed + len(stale), str(rows[-1][0])
    return changed


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
        valid_from=utc(row[8]),
        source_turn_id=str(row[9]),
        valid_to=optional_utc(row[10]),
        superseded_by=row[11],
        scene_id=row[12],
    )
