"""SQL for retrieval: full-text candidates, filtered turns and the stored vectors."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from memstrata.models import SearchFilters
from memstrata.storage.base import Seqs, VectorBatch, Vectors
from memstrata.storage.focus import SCORED_ROW_BUDGET
from memstrata.storage.sql_turns import filter_clause
from memstrata.storage.sqlite.federated import ranked_for_owners, turn_parts
from memstrata.storage.sqlite.focus import (
    estimated_matches,
    focused_match,
    is_bounded,
    own_columns_only,
    terms_of,
)
from memstrata.storage.sqlite.knowledge import rederive_cell_texts
from memstrata.storage.sqlite.own_index import OwnIndexCache, OwnRows, ranked_own_or_shared
from memstrata.storage.sqlite.ranking import Population, one_snapshot, population
from memstrata.storage.sqlite.rows import SQLITE, chunks

# BM25 column weights: content, speaker name, the turns ±1 and ±2 away in the session.
# Chosen on LoCoMo conversations 1-5 (see docs/benchmarks.md).
FULLTEXT_WEIGHTS = "1.0, 1.0, 0.5, 0.25"
# A user's distinct speaker names (tool turns aside) by a loose index scan of ``turns_by_speaker``:
# one seek per name, not a scan of the user's turns; at most ``?2`` names.
_SPEAKERS = """
WITH RECURSIVE found(name, position) AS (
    SELECT (SELECT name FROM turns WHERE user_id = ?1 AND name IS NOT NULL AND role <> 'tool'
        ORDER BY name LIMIT 1), 1
    UNION ALL
    SELECT (SELECT t.name FROM turns t WHERE t.user_id = ?1 AND t.name IS NOT NULL AND t.role <> 'tool'
        AND t.name > found.name ORDER BY t.name LIMIT 1), found.position + 1
    FROM found WHERE found.name IS NOT NULL AND found.position < ?2
)
SELECT name FROM found WHERE name IS NOT NULL ORDER BY position
"""
#: A user's turns as ``turns_fts`` indexes them, for ranking in an index of their own (``own_index.py``).
OWN_TURNS = OwnRows(
    name="own_turns",
    columns=("content", "name", "near", "far"),
    values=("f.content", "f.name", "f.near", "f.far"),
    joins="CROSS JOIN turns_fts f ON f.rowid = x.seq",
    weights=FULLTEXT_WEIGHTS,
)
#: Each user's turns, kept by triggers (migration 20): read instead of counting them.
TURN_COUNTS = "user_turn_counts"
T = TypeVar("T")


class RetrievalMixin:
    """Methods retrieval calls; mixed into SQLiteStore, which provides ``_read``, ``_write`` and ``_fetch_all``."""

    if TYPE_CHECKING:
        _own_cache: OwnIndexCache

        def _read(self, work: Callable[[sqlite3.Connection], T]) -> T: ...

        def _write(self, work: Callable[[sqlite3.Connection], T]) -> T: ...

        def _fetch_all(self, sql: str, parameters: Sequence[Any]) -> list[Any]: ...

    def fulltext(self, match: str, user_id: str, filters: SearchFilters, limit: int) -> list[tuple[int, float]]:
        """BM25 candidates, with the user's own term statistics (``ranking.py``); higher is better."""

        def work(connection: sqlite3.Connection) -> list[tuple[int, float]]:
            with one_snapshot(connection):
                people = population(connection, "turns_fts", "turns", user_id, counts=TURN_COUNTS)
                return self._ranked_turns(
                    connection, match=match, user_id=user_id, people=people, filters=filters, limit=limit
                )

        return self._read(work)

    def _ranked_turns(
        self,
        connection: sqlite3.Connection,
        *,
        match: str,
        user_id: str,
        people: Population,
        filters: SearchFilters,
        limit: int,
    ) -> list[tuple[int, float]]:
        """``fulltext`` inside a read transaction, the user's ``people`` read in it."""
        where, parameters = filter_clause(SQLITE, filters, alias="x")
        bounded = is_bounded(people)
        estimate = estimated_matches(connection, people, user_id) if bounded else None
        focused = focused_match(connection, match, people, user_id, estimate)
        if filters.agent_id is not None:
            # The neighbour columns hold what other agents said in the session: one agent's
            # search matches its turns' own text and speaker only.
            focused = own_columns_only(focused)
        return ranked_own_or_shared(
            connection,
            OWN_TURNS,
            fts="turns_fts",
            table="turns",
            rank=f"-bm25(turns_fts, {FULLTEXT_WEIGHTS})",
            parts=terms_of(focused),
            user_id=user_id,
            kept=f"1{where}",
            kept_parameters=parameters,
            limit=limit,
            people=people,
            window=SCORED_ROW_BUDGET if bounded else None,
            # Beside other users, a large memory's matches of a term are estimated, not counted.
            estimate=None if people.is_whole_index else estimate,
            cache=self._own_cache,
        )

    def fulltext_many(
        self, match: str, user_ids: Sequence[str], filters: SearchFilters, limit: int
    ) -> dict[str, list[tuple[int, float]]]:
        """``fulltext`` for each of ``user_ids``, reading each term's posting list once for all (``federated.py``).

        A large memory (``is_bounded``) is ranked on its own, as its search alone is: reading
        every match of a term for all owners at once is what its bounded search avoids.
        """
        where, parameters = filter_clause(SQLITE, filters, alias="x")

        def work(connection: sqlite3.Connection) -> dict[str, list[tuple[int, float]]]:
            with one_snapshot(connection):
                owners = list(dict.fromkeys(user_ids))
                people = {
                    owner: population(connection, "turns_fts", "turns", owner, counts=TURN_COUNTS) for owner in owners
                }
                large = {owner for owner in owners if is_bounded(people[owner])}
                found = ranked_for_owners(
                    connection,
                    fts="turns_fts",
                    table="turns",
                    rank=f"-bm25(turns_fts, {FULLTEXT_WEIGHTS})",
                    owners=[owner for owner in owners if owner not in large],
                    parts_of=turn_parts(match, own_only=filters.agent_id is not None),
                    kept=f"1{where}",
                    kept_parameters=parameters,
                    limit=limit,
                    own=OWN_TURNS,
                    cache=self._own_cache,
                    people={owner: people[owner] for owner in owners if owner not in large},
                )
                for owner in large:
                    found[owner] = self._ranked_turns(
                        connection, match=match, user_id=owner, people=people[owner], filters=filters, limit=limit
                    )
                return {owner: found[owner] for owner in owners}

        return self._read(work)

    def speakers(self, user_id: str, limit: int) -> list[str]:
        """Distinct names ``user_id``'s turns (tool turns aside) were said under, in name order, at most ``limit``."""
        if limit < 1:
            return []
        return [str(row[0]) for row in self._read(lambda c: c.execute(_SPEAKERS, (user_id, limit)).fetchall())]

    def filtered_seqs(self, user_id: str, filters: SearchFilters, limit: int | None = None) -> Seqs:
        """Seqs of ``user_id``'s turns that pass ``filters`` (with a ``limit``, at most that many, any of them)."""
        where, parameters = filter_clause(SQLITE, filters)
        sql = f"SELECT t.seq FROM turns t WHERE t.user_id = ?{where} LIMIT ?"
        bound = -1 if limit is None else limit  # SQLite: a negative LIMIT is no limit
        rows = self._read(lambda connection: connection.execute(sql, [user_id, *parameters, bound]).fetchall())
        return np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))

    def vectors_after(self, model_id: str, user_id: str, after: int, limit: int | None = None) -> VectorBatch:
        """Vectors stored after vector id ``after``, the first ``limit`` (None: all), for catching an index up."""
        bound = -1 if limit is None else limit  # SQLite: a negative LIMIT is no limit
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT id, turn_seq, vector FROM turn_vectors WHERE model_id = ? AND user_id = ? AND id > ? "
                "ORDER BY id LIMIT ?",
                (model_id, user_id, after, bound),
            ).fetchall()
        )
        if not rows:
            return VectorBatch(np.zeros(0, np.int64), np.zeros((0, 0), np.float32), after)
        seqs = np.fromiter((row[1] for row in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(row[2] for row in rows), dtype=np.float32).reshape(len(rows), -1)
        return VectorBatch(seqs, matrix, int(rows[-1][0]))

    def vector_count(self, model_id: str, user_id: str) -> int:
        """How many ``model_id`` vectors ``user_id``'s turns have."""
        statement = "SELECT count(*) FROM turn_vectors WHERE model_id = ? AND user_id = ?"
        return int(self._read(lambda connection: connection.execute(statement, (model_id, user_id)).fetchone()[0]))

    def vectors_for(self, model_id: str, seqs: Sequence[int]) -> dict[int, Vectors]:
        """Stored vectors of these turns, by seq."""

        def work(connection: sqlite3.Connection) -> dict[int, Vectors]:
            result: dict[int, Vectors] = {}
            for chunk in chunks(list(seqs)):
                marks = ",".join("?" * len(chunk))
                rows = connection.execute(
                    f"SELECT turn_seq, vector FROM turn_vectors WHERE model_id = ? AND turn_seq IN ({marks})",
                    [model_id, *chunk],
                )
                for seq, blob in rows:
                    result[int(seq)] = np.frombuffer(blob, dtype=np.float32).copy()
            return result

        return self._read(work)

    def put_vectors(self, model_id: str, seqs: Sequence[int], vectors: Vectors) -> None:
        """Store vectors for existing turns; a turn deleted meanwhile is skipped."""

        def work(connection: sqlite3.Connection) -> None:
            for seq, vector in zip(seqs, vectors, strict=True):
                row = connection.execute("SELECT user_id FROM turns WHERE seq = ?", (seq,)).fetchone()
                if row is None:
                    continue
                connection.execute("DELETE FROM turn_vectors WHERE model_id = ? AND turn_seq = ?", (model_id, seq))
                insert_vector(connection, model_id, seq, str(row[0]), vector)

        self._write(work)

    def rebuild_fulltext(self) -> None:
        """Recreate both FTS5 indexes (turns' from the turns table, derived items' from theirs) and turn counts.

        Cells' search text is derived from the cells first, so text an older version wrote
        reads as ``cell_text`` does now.
        """

        def rebuild(connection: sqlite3.Connection) -> None:
            connection.execute(f"DELETE FROM {TURN_COUNTS}")  # counted again too: what full text reads first
            connection.execute(
                f"INSERT INTO {TURN_COUNTS} (user_id, turns) SELECT user_id, count(*) FROM turns GROUP BY user_id"
            )
            connection.execute("DELETE FROM turns_fts")
            connection.execute(
                "INSERT INTO turns_fts (rowid, content, name, near, far) "
                "SELECT seq, content, name, near, far FROM turn_index_text"
            )
            rederive_cell_texts(connection)
            connection.execute("INSERT INTO derived_fts (derived_fts) VALUES ('rebuild')")
            merge_fulltext(connection)

        self._write(rebuild)


def merge_fulltext(connection: sqlite3.Connection) -> None:
    """Merge each FTS5 index into one segment, dropping what deletes only marked as deleted.

    FTS5 deletes write tombstones: a deleted turn's words stay in the older segments (and
    so in the file) until a merge. This rewrites both indexes: it costs time in proportion
    to the store's text, so it runs on ``forget`` and rebuilds, not on every delete.
    """
    for table in ("turns_fts", "derived_fts"):
        connection.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")


def insert_vector(connection: sqlite3.Connection, model_id: str, seq: int, user_id: str, vector: Vectors) -> None:
    """Store ``vector`` as the ``model_id`` vector of turn ``seq``."""
    array = np.ascontiguousarray(vector, dtype=np.float32)
    connection.execute(
        "INSERT INTO turn_vectors (turn_seq, model_id, user_id, dimension, vector) VALUES (?, ?, ?, ?, ?)",
        (seq, model_id, user_id, int(array.shape[-1]), array.tobytes()),
    )
