"""The procedural tier and the entity graph in SQLite: what they word apart (``sql_knowledge.py`` holds the rest)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from datetime import datetime

import numpy as np

from memstrata.models import format_time
from memstrata.storage.base import Vectors
from memstrata.storage.sql_knowledge import GraphStatements
from memstrata.storage.sqlite.shared import SQLiteRunner


class GraphMixin(SQLiteRunner, GraphStatements[sqlite3.Connection]):
    """Pattern and entity methods the tiers call; mixed into SQLiteStore, which provides ``_read`` and ``_write``."""

    def observe_pattern(
        self, user_id: str, turn_seq: int, key: str, *, description: str, evidence: str, when: datetime
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
