"""Plain retrieval baselines computed beside memstrata on the same turns: BM25 and dense.

They are what a memory layer without memstrata's retrieval would do: FTS5 BM25 over each
turn's text and speaker (no neighbours), and cosine over each turn's own embedding (no
blending, no fusion). The benchmark reports memstrata's figures against them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np

from memstrata import Embedder
from memstrata.models import Vectors
from memstrata.retrieval.fulltext import fts_query


class PlainBM25:
    """BM25 (SQLite FTS5, Porter stemming) over turn text and speaker, one index for all users."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:")
        self._db.execute(
            "CREATE VIRTUAL TABLE turns USING fts5 (content, name, turn_id UNINDEXED, user_id UNINDEXED,"
            " tokenize='porter unicode61 remove_diacritics 2')"
        )

    def add(self, rows: Sequence[tuple[str, str, str, str]]) -> None:
        """Index (turn_id, user_id, speaker, text) rows."""
        self._db.executemany("INSERT INTO turns (turn_id, user_id, name, content) VALUES (?, ?, ?, ?)", list(rows))

    def search(self, query: str, user_id: str, limit: int) -> list[str]:
        """Turn ids of ``user_id`` best first (the query is sanitised as memstrata sanitises it)."""
        match = fts_query(query)
        if match is None:
            return []
        rows = self._db.execute(
            "SELECT turn_id FROM turns WHERE turns MATCH ? AND user_id = ? ORDER BY bm25(turns) LIMIT ?",
            (match, user_id, limit),
        )
        return [str(row[0]) for row in rows]


class PlainDense:
    """Cosine over each turn's own embedding, per user."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._ids: dict[str, list[str]] = {}
        self._vectors: dict[str, Vectors] = {}

    def add(self, user_id: str, turn_ids: Sequence[str], vectors: Vectors) -> None:
        """Hold ``user_id``'s turn vectors (unit length, as the embedder returns them)."""
        self._ids[user_id] = [*self._ids.get(user_id, []), *turn_ids]
        previous = self._vectors.get(user_id)
        self._vectors[user_id] = vectors if previous is None else np.vstack([previous, vectors])

    def search(self, query: str, user_id: str, limit: int) -> list[str]:
        """Turn ids of ``user_id`` best first."""
        matrix = self._vectors.get(user_id)
        if matrix is None:
            return []
        scores = matrix @ np.asarray(self._embedder.embed_query(query), dtype=np.float32)
        top = np.argsort(-scores, kind="stable")[:limit]
        return [self._ids[user_id][i] for i in top]
