"""Search candidates from PostgreSQL: tsvector full-text ranking and pgvector vectors (exact or through HNSW)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from psycopg import sql

from memstrata.models import SearchFilters
from memstrata.storage.base import Seqs, VectorBatch, Vectors
from memstrata.storage.focus import TermPlan, plan_terms, recent_turns
from memstrata.storage.postgres.connection import Connected, take_user_locks
from memstrata.storage.postgres.knowledge import rederive_cell_texts
from memstrata.storage.postgres.neighbours import FAR, NEAR
from memstrata.storage.postgres.rows import POSTGRES, Connection, PgVector
from memstrata.storage.sql_turns import filter_clause

_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
_WORD = re.compile(r"\w+", re.UNICODE)
_FTS5_OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})
#: Text search configuration made by migration 1: English stemming, no stopword list.
TEXT_SEARCH_CONFIG = "memstrata_english"
#: ts_rank weights of the labels {D, C, B, A}: the SQLite store's BM25 column weights, text and speaker 1.0,
#: the turns ±1 away 0.5, ±2 away 0.25.
_TURN_WEIGHTS = "'{0.25, 0.5, 1.0, 1.0}'"
#: Ranks ``{table}`` rows of one user by Σ idf(term) × ts_rank(row, term), BM25's shape: ``ts_rank`` of one
#: term saturates with repeats and (normalisation 1) divides by the log of the row's length; the idf is
#: BM25's, over the ``{total}`` rows of the user, counting those that the term matches. Each term is looked
#: up through the GIN index on its own. ``{kept}`` narrows what is ranked and returned, not the counts.
_IDF_RANKING = """
WITH terms AS MATERIALIZED (
    SELECT x.i, phraseto_tsquery('{config}', x.term) AS query FROM unnest(%s::text[]) WITH ORDINALITY AS x(term, i)
), pairs AS MATERIALIZED (
    SELECT t.seq, ({kept}) AS kept, terms.i,
        CASE WHEN {kept} THEN ts_rank({weights}t.search, terms.query, 1) END AS rank
    FROM terms JOIN {table} t ON t.search @@ terms.query WHERE t.user_id = %s{scope}
), total AS (
    SELECT ({total}) AS n
), idf AS (
    SELECT p.i, ln(1 + (total.n - count(*) + 0.5) / (count(*) + 0.5)) AS weight FROM pairs p, total
    GROUP BY p.i, total.n
)
SELECT p.seq, sum(idf.weight * p.rank) AS score FROM pairs p JOIN idf ON idf.i = p.i
WHERE p.kept GROUP BY p.seq ORDER BY score DESC, p.seq LIMIT %s
"""
#: BM25's N for turns: kept by migration 4's triggers, as counting the rows took tens of ms at 100k turns.
_TURN_TOTAL = "SELECT COALESCE((SELECT c.turns FROM user_turn_counts c WHERE c.user_id = %s), 0)"
#: A user's turn count and how many of those turns each term is in: a one-lexeme term's count from
#: migration 6's table, a phrase's (a term the parser splits, "snake_case") counted among the turns its
#: rarest lexeme is in. Read before the user's turns are searched.
_TERM_COUNTS = f"""
SELECT ({_TURN_TOTAL}), ARRAY(
    SELECT CASE WHEN numnode(phrase) <= 1 THEN COALESCE((
        SELECT c.turns FROM user_term_counts c
        WHERE c.user_id = %s AND c.lexeme = (tsvector_to_array(to_tsvector('{{config}}', x.term)))[1]
    ), 0) ELSE (
        SELECT count(*) FROM turns t WHERE t.user_id = %s AND t.search @@ phrase
    ) END
    FROM unnest(%s::text[]) WITH ORDINALITY AS x(term, i),
        LATERAL phraseto_tsquery('{{config}}', x.term) AS phrase
    ORDER BY x.i
)
"""
#: Ranks a user's turns as ``_IDF_RANKING`` does, with the weights (BM25 idf) computed beforehand from the
#: counts: the turns that the terms marked ``finds`` match are read once (one index scan of their
#: disjunction) and scored by every term (``storage/focus.py``). ``{vector}`` is the candidate's tsvector as
#: the terms read it (``_IN_ROW`` or ``_COPIED``). ``{kept}`` narrows what is ranked. ``{finding}`` is
#: ``_FOUND_BY_INDEX``, or ``_FOUND_BY_RECHECK`` when ``{kept}`` keeps to a user's latest turns.
_FOCUSED_RANKING = """
WITH terms AS MATERIALIZED (
    SELECT phraseto_tsquery('{config}', x.term) AS query, x.weight, x.finds
    FROM unnest(%s::text[], %s::float8[], %s::boolean[]) AS x(term, weight, finds)
), finder AS MATERIALIZED (
    SELECT string_agg('(' || query::text || ')', ' | ')::tsquery AS query FROM terms
    WHERE finds AND query::text <> ''
)
SELECT r.seq, (
    SELECT sum(terms.weight * ts_rank({weights}r.search, terms.query, 1)) FROM terms WHERE r.search @@ terms.query
) AS score
FROM (
    SELECT t.seq, {vector} AS search FROM finder, turns t
    WHERE t.user_id = %s AND {finding} AND {kept} OFFSET 0
) AS r
ORDER BY score DESC, r.seq LIMIT %s
"""
#: The finders' matches read through the GIN index ...
_FOUND_BY_INDEX = "t.search @@ finder.query"
#: ... or checked on each of the user's latest turns, read by time: a common term's whole posting list
#: (400,000 turns at 1M) costs more than matching the ~12,000 latest turns one by one (60-78 → 28-41 ms).
_FOUND_BY_RECHECK = "(t.search @@ finder.query) IS TRUE"
#: Migration 7 keeps a turn's tsvector in its row, stored plain, so each term reads it where it lies. A long
#: turn's may still be compressed, or (over about 8 KB) stored out of line; then each term would decompress
#: or fetch it again, so it is copied out once (``|| ''``). Servers before 14 cannot tell: always copied.
_IN_ROW = (
    "CASE WHEN pg_column_compression(t.search) IS NULL AND pg_column_size(t.search) < 2000"
    " THEN t.search ELSE t.search || ''::tsvector END"
)
_COPIED = "t.search || ''::tsvector"
#: When the ``%s``-th latest of a user's turns was said (``storage/focus.py``, ``recent_turns``): a walk
#: down ``turns_by_user_time``, which the ranking then reads from that time on.
_RECENT_FLOOR = "SELECT created_at FROM turns WHERE user_id = %s ORDER BY created_at DESC, seq DESC OFFSET %s LIMIT 1"
#: A turn's tsvector without its neighbours' words: labels A and B are its own text and speaker.
_OWN_LABELS = "ts_filter({vector}, '{{a,b}}')"
#: Derived items are far fewer than turns, and whether they count changes with ``is_current``: counted.
_DERIVED_TOTAL = "SELECT count(*) FROM derived t WHERE t.user_id = %s AND t.is_current AND t.tier = ANY(%s::text[])"
#: A user's distinct speaker names (tool turns aside) by a loose index scan of ``turns_by_speaker``:
#: one seek per name, not a scan of the user's turns; at most ``limit`` names.
_SPEAKERS = """
WITH RECURSIVE found(name, position) AS (
    SELECT (SELECT name FROM turns WHERE user_id = %(user)s AND name IS NOT NULL AND role <> 'tool'
        ORDER BY name LIMIT 1), 1
    UNION ALL
    SELECT (SELECT t.name FROM turns t WHERE t.user_id = %(user)s AND t.name IS NOT NULL AND t.role <> 'tool'
        AND t.name > found.name ORDER BY t.name LIMIT 1), found.position + 1
    FROM found WHERE found.name IS NOT NULL AND found.position < %(limit)s
)
SELECT name FROM found WHERE name IS NOT NULL ORDER BY position
"""
#: hnsw.ef_search bounds: pgvector's default, and its maximum.
_EF_SEARCH = (40, 1000)


#: A term longer than this is cut: "a_b_c_…" is one term here, but PostgreSQL reads each part as a
#: word of a phrase, and a phrase of thousands of words overflows the server's stack.
MAX_TERM_CHARS = 256


def match_terms(match: str) -> list[str]:
    """The terms of a full-text match expression as made by ``retrieval.fulltext.fts_query``.

    That expression is a disjunction of double-quoted terms (``"lisbon" OR "moved"``).
    Only the quoted strings are taken; nothing in them is ever read as syntax, because
    each becomes its own ``phraseto_tsquery``. An expression without quotes is read as
    plain words, FTS5's operator words dropped.
    """
    quoted = [term.replace('""', '"') for term in _QUOTED.findall(match)]
    if quoted:
        return [term[:MAX_TERM_CHARS] for term in quoted if term.strip()]
    return [word[:MAX_TERM_CHARS] for word in _WORD.findall(match) if word not in _FTS5_OPERATORS]


class RetrievalMixin(Connected):
    """Full-text and vector candidates of the PostgreSQL store."""

    def fulltext(self, match: str, user_id: str, filters: SearchFilters, limit: int) -> list[tuple[int, float]]:
        """Candidates ranked like BM25 (idf-weighted ``ts_rank``; higher is better, as SQLite's ``-bm25``), best first.

        ``ts_rank_cd`` alone, as before, has no idf: a word in every turn counted as much
        as a name said once, and full text alone reached LoCoMo recall@10 0.664 against
        SQLite's 0.760. With the idf it is 0.758. Term statistics are the user's own,
        whatever the filters, read from migration 6's counts. Only the rarest terms' rows
        are read, up to a budget (``storage/focus.py``), and scored by every term: ranking
        every row a common term matches cost 80-270 ms at 100k turns.
        """
        terms = match_terms(match)
        if not terms or limit < 1:
            return []

        def ranked(connection: Connection) -> list[tuple[int, float]]:
            with connection.transaction():  # the counts and the rows from one snapshot
                connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                return self._fulltext_in(connection, terms, user_id, filters, limit)

        return self._read(ranked)

    def _fulltext_in(
        self, connection: Connection, terms: list[str], user_id: str, filters: SearchFilters, limit: int
    ) -> list[tuple[int, float]]:
        """``fulltext`` on a connection already in a repeatable-read transaction."""
        counting = _TERM_COUNTS.format(config=TEXT_SEARCH_CONFIG)
        row = connection.execute(counting, (user_id, user_id, user_id, terms)).fetchone()
        indexed, matches = (int(row[0]), [int(count) for count in row[1]]) if row else (0, [])
        if indexed == 0:
            return []
        plan = plan_terms(terms, matches, indexed, limit)
        where, filter_parameters = filter_clause(POSTGRES, filters)
        kept = f"TRUE{where}"
        vector = _IN_ROW if self._column_compression else _COPIED
        if filters.agent_id is not None:
            # The neighbour labels hold what other agents said in the session: one agent's search
            # matches and ranks its turns by their own text and speaker only.
            kept += f" AND {_OWN_LABELS.format(vector='t.search')} @@ finder.query"
            vector = _OWN_LABELS.format(vector=vector)
        recent = recent_turns(indexed, plan, matches)
        floor = connection.execute(_RECENT_FLOOR, (user_id, recent - 1)).fetchone() if recent is not None else None
        if floor is not None:
            # A very large memory whose finding terms are all common: only its latest turns are read.
            kept += " AND t.created_at >= %s"
            filter_parameters = [*filter_parameters, floor[0]]
        statement = _FOCUSED_RANKING.format(
            config=TEXT_SEARCH_CONFIG,
            kept=kept,
            weights=f"{_TURN_WEIGHTS}, ",
            vector=vector,
            finding=_FOUND_BY_INDEX if floor is None else _FOUND_BY_RECHECK,
        )

        def rank(connection: Connection, plan: Sequence[TermPlan]) -> list[tuple[Any, ...]]:
            parameters = [
                [step.term for step in plan],
                [step.weight for step in plan],
                [step.finds for step in plan],
                user_id,
                *filter_parameters,
                limit,
            ]
            return connection.execute(statement, parameters).fetchall()

        rows = rank(connection, plan)
        if len(rows) < limit and not all(step.finds for step in plan):
            # Too few: the finders' matches (counted over all the user's turns) fell outside
            # the filters, or overlapped. Every term finds, as the exact ranking does.
            rows = rank(connection, [replace(step, finds=True) for step in plan])
        return [(int(seq), float(score)) for seq, score in rows]

    def derived_fulltext(
        self, match: str, user_id: str, limit: int, tiers: Sequence[str] = ("longterm",)
    ) -> list[tuple[int, float]]:
        """Full-text candidates among current derived items of these tiers, best first (ranked as ``fulltext``)."""
        terms = match_terms(match)
        if not terms or not tiers or limit < 1:
            return []
        return self._read(lambda connection: _derived_ranked(connection, terms, user_id, limit, tiers))

    def fulltext_many(
        self, match: str, user_ids: Sequence[str], filters: SearchFilters, limit: int
    ) -> dict[str, list[tuple[int, float]]]:
        """``fulltext`` for each of ``user_ids``, on one connection and from one snapshot."""
        terms = match_terms(match)
        owners = list(dict.fromkeys(user_ids))
        if not terms or limit < 1:
            return {user_id: [] for user_id in owners}

        def ranked(connection: Connection) -> dict[str, list[tuple[int, float]]]:
            with connection.transaction():
                connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                return {user_id: self._fulltext_in(connection, terms, user_id, filters, limit) for user_id in owners}

        return self._read(ranked)

    def derived_fulltext_many(
        self, match: str, user_ids: Sequence[str], limit: int, tiers: Sequence[str] = ("longterm",)
    ) -> dict[str, list[tuple[int, float]]]:
        """``derived_fulltext`` for each of ``user_ids``, on one connection."""
        terms = match_terms(match)
        owners = list(dict.fromkeys(user_ids))
        if not terms or not tiers or limit < 1:
            return {user_id: [] for user_id in owners}
        return self._read(
            lambda connection: {
                user_id: _derived_ranked(connection, terms, user_id, limit, tiers) for user_id in owners
            }
        )

    def derived_items(self, seqs: Sequence[int], user_id: str) -> dict[int, tuple[str, str, str, tuple[str, ...]]]:
        """(id, tier, content, source turn ids) of derived items, by seq."""
        if not seqs:
            return {}
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT d.seq, d.id, d.tier, d.content, ARRAY(SELECT t.id FROM derived_sources s"
                " JOIN turns t ON t.seq = s.turn_seq WHERE s.derived_seq = d.seq ORDER BY t.seq)"
                " FROM derived d WHERE d.seq = ANY(%s::bigint[]) AND d.user_id = %s",
                ([int(seq) for seq in seqs], user_id),
            ).fetchall()
        )
        return {int(row[0]): (str(row[1]), str(row[2]), str(row[3]), tuple(str(s) for s in row[4])) for row in rows}

    def speakers(self, user_id: str, limit: int) -> list[str]:
        """Distinct names ``user_id``'s turns (tool turns aside) were said under, in name order, at most ``limit``."""
        if limit < 1:
            return []
        parameters = {"user": user_id, "limit": limit}
        rows = self._read(lambda connection: connection.execute(_SPEAKERS, parameters).fetchall())
        return [str(row[0]) for row in rows]

    def filtered_seqs(self, user_id: str, filters: SearchFilters, limit: int | None = None) -> Seqs:
        """Seqs of ``user_id``'s turns that pass ``filters`` (with a ``limit``, at most that many, any of them)."""
        where, parameters = filter_clause(POSTGRES, filters)
        bounded = " LIMIT %s" if limit is not None else ""
        extra = [limit] if limit is not None else []
        rows = self._read(
            lambda connection: connection.execute(
                f"SELECT t.seq FROM turns t WHERE t.user_id = %s{where}{bounded}", [user_id, *parameters, *extra]
            ).fetchall()
        )
        return np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))

    # -- vectors ----------------------------------------------------------------------

    def vectors_after(self, model_id: str, user_id: str, after: int, limit: int | None = None) -> VectorBatch:
        """Vectors stored after vector id ``after``, the first ``limit`` (None: all), for catching an index up."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT id, turn_seq, embedding FROM turn_vectors WHERE model_id = %s AND user_id = %s AND id > %s"
                " ORDER BY id LIMIT %s",
                (model_id, user_id, after, limit),
                binary=True,
            ).fetchall()
        )
        if not rows:
            return VectorBatch(np.zeros(0, np.int64), np.zeros((0, 0), np.float32), after)
        seqs = np.fromiter((row[1] for row in rows), dtype=np.int64, count=len(rows))
        return VectorBatch(seqs, np.stack([row[2] for row in rows]), int(rows[-1][0]))

    def vector_count(self, model_id: str, user_id: str) -> int:
        """How many ``model_id`` vectors ``user_id``'s turns have."""
        statement = "SELECT count(*) FROM turn_vectors WHERE model_id = %s AND user_id = %s"
        rows = self._read(lambda connection: connection.execute(statement, (model_id, user_id)).fetchall())
        return int(rows[0][0])

    def vectors_for(self, model_id: str, seqs: Sequence[int]) -> dict[int, Vectors]:
        """Stored vectors of these turns, by seq."""
        if not seqs:
            return {}
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT turn_seq, embedding FROM turn_vectors WHERE model_id = %s AND turn_seq = ANY(%s::bigint[])",
                (model_id, [int(seq) for seq in seqs]),
                binary=True,
            ).fetchall()
        )
        return {int(seq): vector for seq, vector in rows}

    def put_vectors(self, model_id: str, seqs: Sequence[int], vectors: Vectors) -> None:
        """Store vectors for existing turns (replacing any of the same model); a turn deleted meanwhile is skipped."""
        pairs = list(zip((int(seq) for seq in seqs), vectors, strict=True))
        if not pairs:
            return
        self._ensure_vector_index(model_id, int(np.asarray(vectors).shape[-1]))

        def work(connection: Connection) -> None:
            owners = dict(
                connection.execute(
                    "SELECT seq, user_id FROM turns WHERE seq = ANY(%s::bigint[])", ([seq for seq, _ in pairs],)
                ).fetchall()
            )
            take_user_locks(connection, owners.values())
            kept = [(seq, vector) for seq, vector in pairs if seq in owners]
            connection.execute(
                "DELETE FROM turn_vectors WHERE model_id = %s AND turn_seq = ANY(%s::bigint[])",
                (model_id, [seq for seq, _ in kept]),
            )
            insert_vectors(connection, model_id, [(seq, owners[seq], vector) for seq, vector in kept])

        self._write(work)

    def rebuild_fulltext(self) -> None:
        """Recompute every turn's neighbour text and each cell's search text, and rebuild the full-text indexes.

        The per-user turn and lexeme counts are counted again from the turns. The tsvectors
        follow the text; cells' text that an older version wrote reads as ``cell_text`` does now.
        """

        def work(connection: Connection) -> None:
            # Writers wait until the counts are rebuilt too (and cannot deadlock with the triggers).
            connection.execute("LOCK TABLE turns IN SHARE ROW EXCLUSIVE MODE")
            connection.execute(f"UPDATE turns t SET near = {NEAR}, far = {FAR}")
            recount_terms(connection)
            rederive_cell_texts(connection)
            connection.execute("REINDEX INDEX turns_search; REINDEX INDEX derived_search")

        self._write(work)

    def nearest(
        self, model_id: str, user_id: str, vector: Vectors, limit: int, allowed_seqs: Seqs | Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``limit`` turns of ``user_id`` nearest to ``vector`` as (seq, cosine similarity), best first.

        Without ``allowed_seqs`` the model's HNSW index answers (approximate); when it
        returns fewer than ``limit`` (a user with a small share of the table, whose turns
        the index's candidate list missed) the same question is answered exactly. With
        ``allowed_seqs`` (a filtered search) the answer is exact over those turns.
        """
        query_vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        dimension = int(query_vector.shape[0])
        if limit < 1:
            return []
        allowed = None if allowed_seqs is None else [int(seq) for seq in allowed_seqs]
        if allowed is not None and not allowed:
            return []
        if allowed is None and self._has_vector_index(model_id, dimension):
            found = self._read(lambda c: self._approximate(c, model_id, user_id, query_vector, limit))
            if len(found) >= limit:
                return found
        exact = (
            "SELECT turn_seq, 1 - (embedding <=> %s) AS similarity FROM turn_vectors"
            " WHERE model_id = %s AND user_id = %s AND dimension = %s"
            + ("" if allowed is None else " AND turn_seq = ANY(%s::bigint[])")
            + " ORDER BY embedding <=> %s, turn_seq LIMIT %s"
        )
        parameters: list[Any] = [PgVector(query_vector), model_id, user_id, dimension]
        parameters += [] if allowed is None else [allowed]
        parameters += [PgVector(query_vector), limit]
        rows = self._read(lambda connection: connection.execute(exact, parameters).fetchall())
        return [(int(seq), float(score)) for seq, score in rows]

    def _approximate(
        self, connection: Connection, model_id: str, user_id: str, vector: Vectors, limit: int
    ) -> list[tuple[int, float]]:
        """Ask the HNSW index, letting it look at more candidates than pgvector's default when ``limit`` is large."""
        ef_search = min(max(_EF_SEARCH[0], 2 * limit), _EF_SEARCH[1])
        statement = approximate_statement(model_id, len(vector))
        settings = f"BEGIN; SET LOCAL hnsw.ef_search = {ef_search}"
        if self._iterative_scan:
            settings += "; SET LOCAL hnsw.iterative_scan = strict_order"
        connection.execute(settings)
        try:
            rows = connection.execute(statement, (PgVector(vector), user_id, PgVector(vector), limit)).fetchall()
        finally:
            connection.execute("ROLLBACK")
        return [(int(seq), float(score)) for seq, score in rows]


def approximate_statement(model_id: str, dimension: int) -> sql.Composed:
    """The query the HNSW index of (model, dimension) answers; parameters: vector, user, vector, limit.

    The model and dimension are literals, not parameters, so the planner can match the
    partial index's predicate and expression.
    """
    return sql.SQL(
        "SELECT turn_seq, 1 - (embedding::vector({dimension}) <=> %s::vector({dimension})) FROM turn_vectors"
        " WHERE model_id = {model_id} AND dimension = {dimension} AND user_id = %s"
        " ORDER BY embedding::vector({dimension}) <=> %s::vector({dimension}) LIMIT %s"
    ).format(dimension=sql.Literal(dimension), model_id=sql.Literal(model_id))


def insert_vectors(connection: Connection, model_id: str, rows: Sequence[tuple[int, str, Vectors]]) -> None:
    """Insert (turn seq, user id, vector) rows in order, so their ids grow in that order."""
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO turn_vectors (turn_seq, model_id, user_id, dimension, embedding) VALUES (%s, %s, %s, %s, %s)",
            [
                (seq, model_id, user_id, int(np.asarray(vector).shape[-1]), PgVector(np.asarray(vector, np.float32)))
                for seq, user_id, vector in rows
            ],
        )


def recount_terms(connection: Connection) -> None:
    """Count every user's turns and lexemes again from the turns (the triggers keep them after that)."""
    connection.execute("DELETE FROM user_turn_counts")
    connection.execute("INSERT INTO user_turn_counts (user_id, turns) SELECT user_id, count(*) FROM turns GROUP BY 1")
    connection.execute("DELETE FROM user_term_counts")
    connection.execute(
        "INSERT INTO user_term_counts (user_id, lexeme, turns) SELECT t.user_id, l.lexeme, count(*)"
        " FROM turns t, unnest(tsvector_to_array(t.search)) AS l(lexeme) GROUP BY 1, 2"
    )


def _derived_ranked(
    connection: Connection, terms: list[str], user_id: str, limit: int, tiers: Sequence[str]
) -> list[tuple[int, float]]:
    """``derived_fulltext``'s ranking of one user's items."""
    scope = " AND t.is_current AND t.tier = ANY(%s::text[])"
    statement = _IDF_RANKING.format(
        config=TEXT_SEARCH_CONFIG, kept="TRUE", weights="", table="derived", scope=scope, total=_DERIVED_TOTAL
    )
    parameters = [terms, user_id, list(tiers), user_id, list(tiers), limit]
    return [(int(seq), float(score)) for seq, score in connection.execute(statement, parameters).fetchall()]
