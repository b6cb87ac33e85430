"""SQL for the procedural tier and the entity graph: interaction patterns, entities and their edges."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memstrata.models import EntityEdge, EntityNode, format_time
from memstrata.storage.base import Vectors


class GraphMixin:
    """Pattern and entity methods the tiers call; mixed into SQLiteStore, which provides ``_read`` and ``_write``."""

    _read: Callable[[Callable[[sqlite3.Connection], Any]], Any]
    _write: Callable[[Callable[[sqlite3.Connection], Any]], Any]

    # -- patterns and entities --------------------------------------------------------

    def observe_pattern(
        self, user_id: str, turn_seq: int, key: str, description: str, evidence: str, when: datetime
    ) -> None:
        """Count an interaction pattern seen in one turn; the same turn observed again counts once.

        A turn deleted meanwhile (its job read it before) counts nothing: its purge already ran.
        """

        def work(connection: sqlite3.Connection) -> None:
            snippet = evidence[:200]
            inserted = connection.execute(
                "INSERT OR IGNORE INTO pattern_observations (user_id, key, turn_seq, seen_at, evidence)"
                " SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM turns WHERE seq = ? AND user_id = ?)",
                (user_id, key, turn_seq, format_time(when), snippet, turn_seq, user_id),
            ).rowcount
            if not inserted:
                return
            connection.execute(
                "INSERT INTO patterns (user_id, key, description, count, first_seen, last_seen, evidence)"
                " VALUES (?, ?, ?, 1, ?, ?, ?) ON CONFLICT (user_id, key) DO UPDATE SET count = count + 1,"
                " last_seen = MAX(last_seen, excluded.last_seen), evidence = excluded.evidence",
                (user_id, key, description, format_time(when), format_time(when), snippet),
            )

        self._write(work)

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
            sql += f" AND memstrata_lower(name) IN ({','.join('?' * len(names))})"
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
            f" AND (memstrata_lower(a.name) IN ({marks}) OR memstrata_lower(b.name) IN ({marks}))"
            " ORDER BY e.weight DESC, e.source, e.target LIMIT ?"
        )
        lowered = [name.lower() for name in names]
        rows = self._read(lambda connection: connection.execute(sql, (user_id, *lowered, *lowered, limit)).fetchall())
        return [EntityEdge(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    # -- entity name vectors ----------------------------------------------------------

    def entities_without_vectors(self, user_id: str, model_id: str, limit: int) -> list[tuple[int, str]]:
        """(id, name) of a user's entities with no name vector of ``model_id``, most mentioned first."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT id, name FROM entities e WHERE user_id = ? AND NOT EXISTS ("
                " SELECT 1 FROM entity_vectors v WHERE v.entity_id = e.id AND v.model_id = ?)"
                " ORDER BY mentions DESC, id LIMIT ?",
                (user_id, model_id, limit),
            ).fetchall()
        )
        return [(int(r[0]), str(r[1])) for r in rows]

    def save_entity_vectors(self, model_id: str, vectors: Mapping[int, Vectors]) -> None:
        """Store name vectors by entity id; an entity deleted meanwhile is skipped, a stored vector replaced."""

        def work(connection: sqlite3.Connection) -> None:
            for entity_id, vector in vectors.items():
                connection.execute(
                    "INSERT OR REPLACE INTO entity_vectors (entity_id, model_id, vector)"
                    " SELECT id, ?, ? FROM entities WHERE id = ?",
                    (model_id, np.asarray(vector, dtype=np.float32).tobytes(), int(entity_id)),
                )

        self._write(work)

    def entity_vectors(self, user_id: str, model_id: str) -> list[tuple[int, str, Vectors]]:
        """(id, name, name vector) of a user's entities that have a vector of ``model_id``, by id."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT e.id, e.name, v.vector FROM entities e JOIN entity_vectors v ON v.entity_id = e.id"
                " WHERE e.user_id = ? AND v.model_id = ? ORDER BY e.id",
                (user_id, model_id),
            ).fetchall()
        )
        return [(int(r[0]), str(r[1]), np.frombuffer(r[2], dtype=np.float32).copy()) for r in rows]

    def entity_mention_seqs(self, user_id: str, entity_ids: Sequence[int]) -> dict[int, list[int]]:
        """The seqs of the turns that mention each of a user's entities, by entity id (oldest first)."""
        if not entity_ids:
            return {}
        marks = ",".join("?" * len(entity_ids))
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT m.entity_id, m.turn_seq FROM entity_mentions m JOIN entities e ON e.id = m.entity_id"
                f" WHERE e.user_id = ? AND m.entity_id IN ({marks}) ORDER BY m.entity_id, m.turn_seq",
                (user_id, *[int(i) for i in entity_ids]),
            ).fetchall()
        )
        found: dict[int, list[int]] = {}
        for entity_id, seq in rows:
            found.setdefault(int(entity_id), []).append(int(seq))
        return found
