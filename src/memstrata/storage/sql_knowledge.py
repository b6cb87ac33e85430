"""The long-term, procedural and graph statements both stores share: cells, profile, patterns, entities.

A backend adds what it words apart: how it stores importance, observes a pattern, saves an
entity's vector, reads recent turn vectors, and purges what deleted turns derived.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memstrata.models import Cell, EntityEdge, EntityNode, MemoryEvent, Vectors
from memstrata.storage.cell_vectors import CELL_VECTORS, CELLS_WITHOUT_VECTORS, SAVE_CELL_VECTOR
from memstrata.storage.dialect import C, DerivedItem, Dialect, Runner, record_event
from memstrata.storage.erasure import names_of
from memstrata.storage.text import cell_text, late_supersession, supersession

#: A cell's columns, as ``cell_from_row`` reads them, from ``cells c JOIN turns t ON t.seq = c.source_turn_seq``.
CELL_COLUMNS = (
    "c.id, c.user_id, c.kind, c.subject, c.attribute, c.value, c.content, c.salience, c.valid_from,"
    " t.id, c.valid_to, c.superseded_by, c.scene_id"
)

#: Tables holding a user's derived state, all emptied when the whole user is forgotten.
USER_TABLES = (
    "segments",
    "scenes",
    "cells",
    "profile",
    "patterns",
    "pattern_observations",
    "sleep_marks",
    "entities",
    "entity_edges",
    "consolidations",
    "derived",
    "working_items",
    "jobs",
)

#: What ``tier_counts`` counts, each a count of one user's (``%(user)s``) rows.
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


def cell_from_row(dialect: Dialect, row: Sequence[Any]) -> Cell:
    """The cell a row selected with ``CELL_COLUMNS`` holds."""
    return Cell(
        id=str(row[0]),
        user_id=str(row[1]),
        kind=str(row[2]),
        subject=str(row[3]),
        attribute=str(row[4]),
        value=str(row[5]),
        content=str(row[6]),
        salience=float(row[7]),
        valid_from=dialect.read_time(row[8]),
        source_turn_id=str(row[9]),
        valid_to=dialect.read_optional_time(row[10]),
        superseded_by=row[11],
        scene_id=row[12],
    )


def _vector(blob: Any) -> Vectors:
    """A float32 vector stored as bytes."""
    return np.frombuffer(bytes(blob), dtype=np.float32).copy()


class KnowledgeStatements(Runner[C]):
    """The cell, profile, pattern and audit methods of ``TierStore`` that both stores run alike."""

    # -- per-turn signals -------------------------------------------------------------

    def importance_of(self, turn_seqs: Sequence[int]) -> dict[int, float]:
        """Importance per turn: the caller's when given, else the computed one."""
        if not turn_seqs:
            return {}
        d = self.dialect

        def work(connection: C) -> list[Any]:
            rows: list[Any] = []
            for part in d.batches([int(seq) for seq in turn_seqs]):
                where, parameters = d.members("t.seq", part, "bigint")
                statement = d.sql(
                    "SELECT t.seq, COALESCE(t.importance, s.importance) FROM turns t"
                    f" LEFT JOIN turn_scores s ON s.turn_seq = t.seq WHERE {where}"
                )
                rows.extend(connection.execute(statement, parameters).fetchall())
            return rows

        return {int(seq): float(value) for seq, value in self._read(work) if value is not None}

    def previous_user_text(self, user_id: str, session_id: str | None, before_seq: int) -> str | None:
        """The user's message before ``before_seq`` in the same session."""
        d = self.dialect
        statement = d.sql(
            f"SELECT content FROM turns WHERE user_id = %s AND session_id {d.same} %s{d.text_cast}"
            " AND role = 'user' AND seq < %s ORDER BY seq DESC LIMIT 1"
        )
        row = self._read(lambda connection: connection.execute(statement, (user_id, session_id, before_seq)).fetchone())
        return None if row is None else str(row[0])

    # -- cells and their vectors ------------------------------------------------------

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
        d = self.dialect
        clauses, parameters = ["c.user_id = %s"], [user_id]
        if subject is not None:
            clauses.append("c.subject = %s")
            parameters.append(subject)
        if attribute is not None:
            clauses.append("c.attribute = %s")
            parameters.append(attribute)
        if not include_superseded:
            clauses.append("c.valid_to IS NULL")
        statement = d.sql(
            f"SELECT {CELL_COLUMNS} FROM cells c JOIN turns t ON t.seq = c.source_turn_seq"
            f" WHERE {' AND '.join(clauses)} ORDER BY c.valid_from DESC, c.{d.ordinal} DESC LIMIT %s"
        )
        bound = d.no_limit if limit is None else limit
        rows = self._read(lambda connection: connection.execute(statement, (*parameters, bound)).fetchall())
        return [cell_from_row(d, row) for row in rows]

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
        d = self.dialect
        began = d.time(cell.valid_from)

        def work(connection: C) -> bool:
            if seen_slot is not None:
                rows = connection.execute(
                    d.sql(
                        "SELECT id, valid_to IS NULL FROM cells WHERE user_id = %s AND subject = %s AND attribute = %s"
                    ),
                    (cell.user_id, cell.subject, cell.attribute),
                ).fetchall()
                if {str(row[0]): bool(row[1]) for row in rows} != dict(seen_slot):
                    return False  # another worker stored, ended or deleted one of them since the read
            connection.execute(
                d.sql(
                    "INSERT INTO cells (id, user_id, kind, subject, attribute, value, content, salience, single_valued,"
                    " scene_id, source_turn_seq, valid_from, valid_to, superseded_by, created_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                ),
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
                    began,
                    d.optional_time(cell.valid_to),
                    cell.superseded_by,
                    began,
                ),
            )
            if cell.superseded_by is not None:
                record_event(connection, d, "supersession", cell.user_id, late_supersession(cell))
            for old_id in supersede:
                ended = connection.execute(
                    d.sql(
                        "UPDATE cells SET valid_to = %s, superseded_by = %s WHERE id = %s AND valid_from <= %s"
                        " AND (valid_to IS NULL OR valid_to > %s)"
                    ),
                    (began, cell.id, old_id, began, began),
                ).rowcount
                if not ended:  # began after this cell, or already ended before it: not this cell's to end
                    continue
                connection.execute(d.sql(f"UPDATE derived SET is_current = {d.false} WHERE id = %s"), (old_id,))
                record_event(connection, d, "supersession", cell.user_id, supersession(old_id, cell.id))
            content = cell_text(cell)
            item = DerivedItem(
                id=cell.id,
                user_id=cell.user_id,
                tier="longterm",
                content=content,
                sources=[source_turn_seq],
                created_at=cell.valid_from,
                is_current=cell.is_current,
            )
            self._put_derived(connection, item)
            return True

        return self._write(work, lock_users=[cell.user_id])

    def restate_cell(self, user_id: str, cell_id: str, turn_seq: int, value: str, content: str) -> bool:
        """Note that turn ``turn_seq`` said the cell ``cell_id`` again (``value`` in ``content``); False if it is gone.

        The user's writer lock orders this with deletes, which purge and delete under it.
        """
        d = self.dialect

        def work(connection: C) -> bool:
            found = connection.execute(d.sql("SELECT 1 FROM cells WHERE id = %s AND user_id = %s"), (cell_id, user_id))
            if found.fetchone() is None:
                return False
            connection.execute(
                d.sql(
                    f"{d.insert_or_ignore} INTO cell_restatements (cell_id, turn_seq, value, content)"
                    f" SELECT %s, seq, %s, %s FROM turns WHERE seq = %s AND user_id = %s{d.do_nothing}"
                ),
                (cell_id, value, content, turn_seq, user_id),
            )
            return True

        return self._write(work, lock_users=[user_id])

    def cells_without_vectors(self, user_id: str, model_id: str, limit: int) -> list[Cell]:
        """At most ``limit`` of a user's current cells with no vector of ``model_id``, newest first."""
        d = self.dialect
        statement = d.sql(CELLS_WITHOUT_VECTORS.format(columns=CELL_COLUMNS))
        rows = self._read(lambda connection: connection.execute(statement, (user_id, model_id, limit)).fetchall())
        return [cell_from_row(d, row) for row in rows]

    def save_cell_vectors(self, model_id: str, vectors: Mapping[str, Vectors]) -> None:
        """Store vectors by cell id; a cell deleted meanwhile is skipped, a stored vector replaced."""
        rows = [
            (model_id, np.asarray(vector, dtype=np.float32).tobytes(), cell_id) for cell_id, vector in vectors.items()
        ]
        statement = self.dialect.sql(SAVE_CELL_VECTOR)
        self._write(lambda connection: self._execute_many(connection, statement, rows))

    def cell_vectors(self, user_id: str, model_id: str) -> list[tuple[int, str, Vectors]]:
        """(search item seq, subject, vector) of a user's current cells that have a vector of ``model_id``, by seq."""
        statement = self.dialect.sql(CELL_VECTORS)
        rows = self._read(lambda connection: connection.execute(statement, (user_id, model_id)).fetchall())
        return [
            (int(seq), str(subject), _vector(vector))
            for seq, subject, vector in sorted(rows, key=lambda row: int(row[0]))
        ]

    # -- profile and patterns ---------------------------------------------------------

    def set_profile(self, user_id: str, values: Mapping[str, str], source_turn_seq: int, now: datetime) -> None:
        """Upsert profile traits, each with the turn it came from and when."""
        d = self.dialect
        statement = d.sql(
            "INSERT INTO profile (user_id, key, value, source_turn_seq, updated_at)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value,"
            " source_turn_seq = excluded.source_turn_seq, updated_at = excluded.updated_at"
            # A turn processed late never overwrites what a newer one set.
            " WHERE excluded.updated_at >= profile.updated_at"
        )

        def work(connection: C) -> None:
            for key, value in values.items():
                connection.execute(statement, (user_id, key, value, source_turn_seq, d.time(now)))

        self._write(work)

    def profile(self, user_id: str) -> dict[str, str]:
        """The user's current profile."""
        statement = self.dialect.sql(
            f"SELECT key, value FROM profile WHERE user_id = %s ORDER BY key{self.dialect.code_point}"
        )
        rows = self._read(lambda connection: connection.execute(statement, (user_id,)).fetchall())
        return {str(key): str(value) for key, value in rows}

    def profile_entries(self, user_id: str) -> list[tuple[str, str, str | None]]:
        """The profile with who said each trait: (key, value, speaker name of the turn that set it or None), by key."""
        statement = self.dialect.sql(
            "SELECT p.key, p.value, t.name FROM profile p LEFT JOIN turns t ON t.seq = p.source_turn_seq"
            f" WHERE p.user_id = %s ORDER BY p.key{self.dialect.code_point}"
        )
        rows = self._read(lambda connection: connection.execute(statement, (user_id,)).fetchall())
        return [(str(key), str(value), None if name is None else str(name)) for key, value, name in rows]

    def pattern_rows(self, user_id: str) -> list[tuple[str, str, int, datetime, datetime, str]]:
        """(key, description, count, first_seen, last_seen, evidence) of a user's patterns."""
        d = self.dialect
        statement = d.sql(
            "SELECT key, description, count, first_seen, last_seen, evidence FROM patterns WHERE user_id = %s"
        )
        rows = self._read(lambda connection: connection.execute(statement, (user_id,)).fetchall())
        return [(str(r[0]), str(r[1]), int(r[2]), d.read_time(r[3]), d.read_time(r[4]), str(r[5])) for r in rows]

    # -- audit, counts and working memory ---------------------------------------------

    def events(self, user_id: str, *, limit: int = 50) -> list[MemoryEvent]:
        """The user's audit log, newest first, with the rows kept under its hash once it was forgotten."""
        d = self.dialect

        def work(connection: C) -> list[Any]:
            names = names_of(connection, d, user_id)
            where, parameters = d.members("user_id", names, "text")
            statement = d.sql(f"SELECT at, kind, detail FROM events WHERE {where} ORDER BY id DESC LIMIT %s")
            return list(connection.execute(statement, [*parameters, limit]).fetchall())

        rows = self._read(work)
        return [MemoryEvent(d.read_time(r[0]), str(r[1]), dict(d.read_json(r[2]))) for r in rows]

    def tier_counts(self, user_id: str) -> dict[str, int]:
        """How many items each tier holds for a user (one statement, one snapshot)."""
        statement = self.dialect.sql("SELECT " + ", ".join(f"({sql}) AS {name}" for name, sql in _TIER_COUNTS.items()))
        row = self._read(lambda connection: connection.execute(statement, {"user": user_id}).fetchone())
        return {name: int(value) for name, value in zip(_TIER_COUNTS, row, strict=True)}

    def working_seqs(self, user_id: str, session_id: str | None = None) -> list[int]:
        """Turns in working memory (one session, or all of the user's), oldest first."""
        statement = "SELECT turn_seq FROM working_items WHERE user_id = %s"
        parameters: list[Any] = [user_id]
        if session_id is not None:
            statement += " AND session_key = %s"
            parameters.append(session_id)
        statement = self.dialect.sql(statement + " ORDER BY turn_seq")
        rows = self._read(lambda connection: connection.execute(statement, parameters).fetchall())
        return [int(row[0]) for row in rows]


class GraphStatements(Runner[C]):
    """The entity graph methods of ``TierStore`` that both stores run alike."""

    def add_entities(self, user_id: str, turn_seq: int, names: Sequence[tuple[str, str]], when: datetime) -> None:
        """Record (name, kind) mentions in one turn and their co-occurrence edges."""
        d = self.dialect
        seen = d.time(when)

        def work(connection: C) -> None:
            ids: list[int] = []
            for name, kind in dict.fromkeys(names):
                connection.execute(
                    d.sql(
                        "INSERT INTO entities (user_id, name, kind, mentions, first_seen, last_seen)"
                        " VALUES (%s, %s, %s, 0, %s, %s) ON CONFLICT (user_id, name) DO NOTHING"
                    ),
                    (user_id, name, kind, seen, seen),
                )
                row = connection.execute(
                    d.sql("SELECT id FROM entities WHERE user_id = %s AND name = %s"), (user_id, name)
                ).fetchone()
                entity_id = int(row[0])  # inserted just above, or there already
                inserted = connection.execute(
                    d.sql(
                        f"{d.insert_or_ignore} INTO entity_mentions (entity_id, turn_seq) VALUES (%s, %s){d.do_nothing}"
                    ),
                    (entity_id, turn_seq),
                ).rowcount
                if inserted:
                    connection.execute(
                        d.sql(
                            f"UPDATE entities SET mentions = mentions + 1, last_seen = {d.greatest}(last_seen, %s),"
                            " kind = CASE WHEN kind = 'other' THEN %s ELSE kind END WHERE id = %s"
                        ),
                        (seen, kind, entity_id),
                    )
                    ids.append(entity_id)
            for position, first in enumerate(ids):
                for second in ids[position + 1 :]:
                    connection.execute(
                        d.sql(
                            "INSERT INTO entity_edges (user_id, source, target, weight, last_seen)"
                            " VALUES (%s, %s, %s, 1, %s) ON CONFLICT (source, target)"
                            " DO UPDATE SET weight = entity_edges.weight + 1, last_seen = excluded.last_seen"
                        ),
                        (user_id, min(first, second), max(first, second), seen),
                    )

        self._write(work)

    def entities(self, user_id: str, *, names: Sequence[str] | None = None, limit: int = 50) -> list[EntityNode]:
        """Entities of a user, most mentioned first (or the ones named, case-insensitively)."""
        d = self.dialect
        statement = "SELECT name, kind, mentions, first_seen, last_seen FROM entities WHERE user_id = %s"
        order = f" ORDER BY mentions DESC, name{d.code_point} LIMIT %s"
        if names is None:
            whole = d.sql(statement + order)
            rows = self._read(lambda connection: connection.execute(whole, (user_id, limit)).fetchall())
        else:
            lowered = list(dict.fromkeys(name.lower() for name in names))

            def work(connection: C) -> list[Any]:
                found: list[Any] = []
                for part in d.batches(lowered):
                    where, named = d.members(f"{d.lower}(name)", part, "text")
                    found.extend(connection.execute(d.sql(f"{statement} AND {where}{order}"), (user_id, *named, limit)))
                return found

            # Each slice's best, merged in the statement's order (the names compared by code point).
            rows = sorted(self._read(work), key=lambda row: (-int(row[2]), str(row[0])))[:limit]
        return [
            EntityNode(
                name=str(r[0]),
                kind=str(r[1]),
                mentions=int(r[2]),
                first_seen=d.read_time(r[3]),
                last_seen=d.read_time(r[4]),
            )
            for r in rows
        ]

    def neighbours(self, user_id: str, names: Sequence[str], limit: int = 20) -> list[EntityEdge]:
        """Edges touching the named entities, heaviest first."""
        if not names:
            return []
        d = self.dialect
        lowered = list(dict.fromkeys(name.lower() for name in names))

        def work(connection: C) -> dict[tuple[int, int], Any]:
            # An edge between names of two slices comes back from both: kept once, by its ends.
            found: dict[tuple[int, int], Any] = {}
            for part in d.batches(lowered):
                source, source_names = d.members(f"{d.lower}(a.name)", part, "text")
                target, target_names = d.members(f"{d.lower}(b.name)", part, "text")
                statement = d.sql(
                    "SELECT a.name, b.name, e.weight, e.source, e.target FROM entity_edges e"
                    " JOIN entities a ON a.id = e.source JOIN entities b ON b.id = e.target"
                    f" WHERE e.user_id = %s AND ({source} OR {target})"
                    " ORDER BY e.weight DESC, e.source, e.target LIMIT %s"
                )
                for row in connection.execute(statement, (user_id, *source_names, *target_names, limit)):
                    found[(int(row[3]), int(row[4]))] = row
            return found

        found = self._read(work)
        heaviest = sorted(found, key=lambda ends: (-int(found[ends][2]), ends))[:limit]
        return [EntityEdge(str(found[ends][0]), str(found[ends][1]), int(found[ends][2])) for ends in heaviest]

    def entities_without_vectors(self, user_id: str, model_id: str, limit: int) -> list[tuple[int, str]]:
        """(id, name) of a user's entities with no name vector of ``model_id``, most mentioned first."""
        statement = self.dialect.sql(
            "SELECT id, name FROM entities e WHERE user_id = %s AND NOT EXISTS ("
            " SELECT 1 FROM entity_vectors v WHERE v.entity_id = e.id AND v.model_id = %s)"
            " ORDER BY mentions DESC, id LIMIT %s"
        )
        rows = self._read(lambda connection: connection.execute(statement, (user_id, model_id, limit)).fetchall())
        return [(int(r[0]), str(r[1])) for r in rows]

    def entity_vectors(self, user_id: str, model_id: str) -> list[tuple[int, str, Vectors]]:
        """(id, name, name vector) of a user's entities that have a vector of ``model_id``, by id."""
        statement = self.dialect.sql(
            "SELECT e.id, e.name, v.vector FROM entities e JOIN entity_vectors v ON v.entity_id = e.id"
            " WHERE e.user_id = %s AND v.model_id = %s ORDER BY e.id"
        )
        rows = self._read(lambda connection: connection.execute(statement, (user_id, model_id)).fetchall())
        return [(int(r[0]), str(r[1]), _vector(r[2])) for r in rows]

    def entity_mention_seqs(self, user_id: str, entity_ids: Sequence[int]) -> dict[int, list[int]]:
        """The seqs of the turns that mention each of a user's entities, by entity id (oldest first)."""
        if not entity_ids:
            return {}
        d = self.dialect

        def work(connection: C) -> list[Any]:
            found: list[Any] = []
            for part in d.batches(sorted({int(i) for i in entity_ids})):
                where, parameters = d.members("m.entity_id", part, "bigint")
                statement = d.sql(
                    "SELECT m.entity_id, m.turn_seq FROM entity_mentions m JOIN entities e ON e.id = m.entity_id"
                    f" WHERE e.user_id = %s AND {where} ORDER BY m.entity_id, m.turn_seq"
                )
                found.extend(connection.execute(statement, (user_id, *parameters)).fetchall())
            return found

        rows = self._read(work)
        found: dict[int, list[int]] = {}
        for entity_id, seq in rows:
            found.setdefault(int(entity_id), []).append(int(seq))
        return found
