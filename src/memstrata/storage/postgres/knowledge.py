"""The per-turn, long-term and graph tiers in PostgreSQL: what they word apart (``sql_knowledge.py`` holds the rest)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import numpy as np

from memstrata.storage.base import Vectors
from memstrata.storage.postgres.connection import Connected
from memstrata.storage.postgres.rows import Connection
from memstrata.storage.sql_knowledge import GraphStatements, KnowledgeStatements
from memstrata.storage.text import CELL_TEXT_COLUMNS, stale_cell_texts

_REDERIVE_CHUNK = 2_000


class KnowledgeMixin(Connected, KnowledgeStatements[Connection], GraphStatements[Connection]):
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

    # -- patterns and entity vectors ---------------------------------------------------

    def observe_pattern(
        self, user_id: str, turn_seq: int, key: str, *, description: str, evidence: str, when: datetime
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
