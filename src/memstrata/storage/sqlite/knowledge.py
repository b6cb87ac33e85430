"""The long-term tiers in SQLite: what they word apart from PostgreSQL, and purging what deleted turns derived.

``sql_knowledge.py`` holds the statements both stores share; mid-term segments and consolidations
are in ``segments.py``; patterns and entities in ``graph.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence

from memstrata.storage.cell_vectors import DROP_CELL_VECTORS
from memstrata.storage.patterns import UNSURE_PATTERN_EVIDENCE, pattern_after_forgetting
from memstrata.storage.sql_knowledge import USER_TABLES, KnowledgeStatements
from memstrata.storage.sqlite.federated import every_part, ranked_for_owners
from memstrata.storage.sqlite.focus import terms_of
from memstrata.storage.sqlite.own_index import OwnRows, ranked_own_or_shared
from memstrata.storage.sqlite.ranking import one_snapshot, population
from memstrata.storage.sqlite.rows import SQLITE, chunks
from memstrata.storage.sqlite.shared import SQLiteRunner
from memstrata.storage.text import CELL_TEXT_COLUMNS, PROFILE_CELLS, cell_text_of, stale_cell_texts

_REDERIVE_CHUNK = 2_000
#: A user's derived items as ``derived_fts`` indexes them, for ranking in an index of their own (``own_index.py``).
OWN_DERIVED = OwnRows(name="own_derived", columns=("content",), values=("x.content",))


class KnowledgeMixin(SQLiteRunner, KnowledgeStatements[sqlite3.Connection]):
    """Methods the tiers call; mixed into SQLiteStore, which provides ``_read`` and ``_write``."""

    # -- search items -----------------------------------------------------------------

    def derived_fulltext(
        self, match: str, user_id: str, limit: int, tiers: Sequence[str] = ("longterm",)
    ) -> list[tuple[int, float]]:
        """BM25 over current derived items of these tiers (longterm cells, scene, midterm, consolidation).

        With the user's own term statistics, over all their derived items (``ranking.py``).
        """
        marks = ",".join("?" * len(tiers))
        kept = f"x.is_current = 1 AND x.tier IN ({marks})"

        def work(connection: sqlite3.Connection) -> list[tuple[int, float]]:
            with one_snapshot(connection):
                return ranked_own_or_shared(
                    connection,
                    OWN_DERIVED,
                    fts="derived_fts",
                    table="derived",
                    rank="-bm25(derived_fts)",
                    parts=terms_of(match),
                    user_id=user_id,
                    kept=kept,
                    kept_parameters=list(tiers),
                    limit=limit,
                    people=population(connection, "derived_fts", "derived", user_id),
                )

        result: list[tuple[int, float]] = self._read(work)
        return result

    def derived_fulltext_many(
        self, match: str, user_ids: Sequence[str], limit: int, tiers: Sequence[str] = ("longterm",)
    ) -> dict[str, list[tuple[int, float]]]:
        """``derived_fulltext`` for each of ``user_ids``, reading each term's posting list once for all."""
        marks = ",".join("?" * len(tiers))

        def work(connection: sqlite3.Connection) -> dict[str, list[tuple[int, float]]]:
            with one_snapshot(connection):
                return ranked_for_owners(
                    connection,
                    fts="derived_fts",
                    table="derived",
                    rank="-bm25(derived_fts)",
                    owners=user_ids,
                    parts_of=every_part(match),
                    kept=f"x.is_current = 1 AND x.tier IN ({marks})",
                    kept_parameters=list(tiers),
                    limit=limit,
                    own=OWN_DERIVED,
                )

        result: dict[str, list[tuple[int, float]]] = self._read(work)
        return result

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
                # A turn deleted since its score was computed is skipped, not an error.
                "INSERT INTO turn_scores (turn_seq, importance) SELECT ?1, ?2"
                " WHERE EXISTS (SELECT 1 FROM turns WHERE seq = ?1)"
                " ON CONFLICT (turn_seq) DO UPDATE SET importance = excluded.importance",
                [(seq, score) for seq, score in scores.items()],
            )
        )

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


def purge_derived(connection: sqlite3.Connection, user_id: str, turn_seqs: Sequence[int] | None) -> None:
    """Delete every derived item built from these turns (all of the user's when ``None``).

    Summaries quote their sources, so a deleted turn takes the summaries that cite it along.
    """
    if turn_seqs is None:
        for table in USER_TABLES:
            connection.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,))
        return
    doomed = set(turn_seqs)  # every turn deleted in this call: none of them may take a fact over
    for chunk in chunks(list(turn_seqs)):
        marks = ",".join("?" * len(chunk))
        _rehome_restated(connection, marks, chunk, doomed)
        _hand_on_supersession(connection, marks, chunk)
        _hand_back_profile(connection, user_id, marks, chunk)
        connection.execute(
            f"DELETE FROM derived WHERE seq IN (SELECT derived_seq FROM derived_sources WHERE turn_seq IN ({marks}))",
            chunk,
        )
        # A scene quotes its segment: it goes with it.
        connection.execute(
            "DELETE FROM scenes WHERE segment_id IN"
            f" (SELECT segment_id FROM segment_turns WHERE turn_seq IN ({marks}))",
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
        # An edge counts the turns that mention both its entities: these turns' count goes too.
        connection.execute(
            "UPDATE entity_edges SET weight = weight - (SELECT count(*) FROM entity_mentions a"
            " JOIN entity_mentions b ON b.turn_seq = a.turn_seq WHERE a.entity_id = entity_edges.source"
            f" AND b.entity_id = entity_edges.target AND a.turn_seq IN ({marks}))"
            f" WHERE user_id = ? AND source IN (SELECT entity_id FROM entity_mentions WHERE turn_seq IN ({marks}))",
            (*chunk, user_id, *chunk),
        )
        connection.execute(f"DELETE FROM entity_mentions WHERE turn_seq IN ({marks})", chunk)
        _forget_pattern_occurrences(connection, user_id, chunk)
    connection.execute("DELETE FROM entity_edges WHERE user_id = ? AND weight <= 0", (user_id,))
    connection.execute(
        "DELETE FROM entities WHERE user_id = ? AND id NOT IN (SELECT entity_id FROM entity_mentions)", (user_id,)
    )


def _rehome_restated(connection: sqlite3.Connection, marks: str, chunk: list[int], doomed: set[int]) -> None:
    """A fact whose turn goes, said again by a kept turn, is sourced from the earliest such turn from now on.

    It takes that turn's sentence and value as said there, so nothing of the deleted turn
    stays in it or its search text; it is valid from that turn's time if that is later
    (and the value it replaced until then). Run first: the fact is then no longer one of
    these turns' facts, and neither the cells nor the profile traits after it see it go.
    ``doomed`` holds every turn this call deletes (the chunks are purged one by one).
    """
    rows = connection.execute(
        "SELECT c.id, c.kind, c.subject, c.attribute, c.valid_from, c.valid_to, r.turn_seq, r.value, r.content,"
        " t.created_at"
        " FROM cells c JOIN cell_restatements r ON r.cell_id = c.id JOIN turns t ON t.seq = r.turn_seq"
        f" WHERE c.source_turn_seq IN ({marks}) ORDER BY c.id, t.created_at, t.seq",
        chunk,
    ).fetchall()
    moved: set[str] = set()
    for cell_id, kind, subject, attribute, valid_from, valid_to, seq, value, sentence, said in rows:
        if cell_id in moved or int(seq) in doomed:
            continue  # its earliest kept restatement came first, or this one goes too
        moved.add(cell_id)
        # Stored times are one fixed-width UTC format: they compare as text.
        later = str(said) > str(valid_from) and (valid_to is None or str(said) < str(valid_to))
        since = str(said) if later else str(valid_from)
        connection.execute(
            "UPDATE cells SET source_turn_seq = ?, value = ?, content = ?, valid_from = ? WHERE id = ?",
            (seq, value, sentence, since, cell_id),
        )
        # The value it replaced held until the fact's first kept evidence: no gap between them.
        connection.execute("UPDATE cells SET valid_to = ? WHERE superseded_by = ?", (since, cell_id))
        connection.execute("DELETE FROM cell_restatements WHERE cell_id = ? AND turn_seq = ?", (cell_id, seq))
        connection.execute(SQLITE.sql(DROP_CELL_VECTORS), (cell_id,))  # made from the deleted turn's words
        item = connection.execute("SELECT seq FROM derived WHERE id = ?", (cell_id,)).fetchone()
        if item is not None:
            connection.execute(
                f"DELETE FROM derived_sources WHERE derived_seq = ? AND turn_seq IN ({marks})", (item[0], *chunk)
            )
            connection.execute(
                "INSERT OR IGNORE INTO derived_sources (derived_seq, turn_seq) VALUES (?, ?)", (item[0], seq)
            )
            text = cell_text_of(str(kind), str(subject), str(attribute), str(value), str(sentence))
            connection.execute("UPDATE derived SET content = ? WHERE seq = ?", (text, item[0]))


def _hand_on_supersession(connection: sqlite3.Connection, marks: str, chunk: list[int]) -> None:
    """Cells these turns' cells superseded take their place: the successor's end and successor, or current again.

    The turns' cells go with them (a cascade); without this, the value they replaced would
    stay marked superseded by a fact that no longer exists, and no value would be current.
    """
    doomed = f"SELECT id FROM cells WHERE source_turn_seq IN ({marks})"
    handed = [
        str(row[0])
        for row in connection.execute(
            f"SELECT id FROM cells WHERE superseded_by IN ({doomed}) AND source_turn_seq NOT IN ({marks})",
            chunk + chunk,
        )
    ]
    if not handed:
        return
    # Repeated while a successor is doomed too (a chain of replaced values forgotten at once).
    while connection.execute(
        "UPDATE cells SET valid_to = (SELECT d.valid_to FROM cells d WHERE d.id = cells.superseded_by),"
        " superseded_by = (SELECT d.superseded_by FROM cells d WHERE d.id = cells.superseded_by)"
        f" WHERE superseded_by IN ({doomed}) AND source_turn_seq NOT IN ({marks})",
        chunk + chunk,
    ).rowcount:
        pass
    for part in chunks(handed):
        connection.execute(
            "UPDATE derived SET is_current = 1 WHERE id IN"
            f" (SELECT id FROM cells WHERE valid_to IS NULL AND id IN ({','.join('?' * len(part))}))",
            part,
        )


def _hand_back_profile(connection: sqlite3.Connection, user_id: str, marks: str, chunk: list[int]) -> None:
    """A profile trait these turns set takes the value of the latest current fact left for it, if any.

    Without one it goes with its turn (a cascade). Run after ``_hand_on_supersession``, so
    the value a forgotten fact had replaced is current again and comes back here too.
    """
    keys = [
        str(row[0])
        for row in connection.execute(
            f"SELECT key FROM profile WHERE user_id = ? AND source_turn_seq IN ({marks})", (user_id, *chunk)
        )
    ]
    for key in keys:
        row = connection.execute(
            "SELECT value, source_turn_seq, valid_from FROM cells WHERE user_id = ? AND attribute = ?"
            f" AND valid_to IS NULL AND {PROFILE_CELLS} AND source_turn_seq NOT IN ({marks})"
            " ORDER BY valid_from DESC, id DESC LIMIT 1",
            (user_id, key, *chunk),
        ).fetchone()
        if row is not None:
            connection.execute(
                "UPDATE profile SET value = ?, source_turn_seq = ?, updated_at = ? WHERE user_id = ? AND key = ?",
                (row[0], row[1], row[2], user_id, key),
            )


def _forget_pattern_occurrences(connection: sqlite3.Connection, user_id: str, turn_seqs: Sequence[int]) -> None:
    """Take back the pattern occurrences these turns made: fewer counts, evidence from a turn still stored."""
    marks = ",".join("?" * len(turn_seqs))
    removed = connection.execute(
        f"SELECT key, count(*) FROM pattern_observations WHERE user_id = ? AND turn_seq IN ({marks}) GROUP BY key",
        (user_id, *turn_seqs),
    ).fetchall()
    connection.execute(
        f"DELETE FROM pattern_observations WHERE user_id = ? AND turn_seq IN ({marks})", (user_id, *turn_seqs)
    )
    for key, gone in removed:
        row = connection.execute(
            "SELECT p.count, o.recorded, o.first, o.last, (SELECT evidence FROM pattern_observations e"
            "  WHERE e.user_id = p.user_id AND e.key = p.key ORDER BY seen_at DESC, turn_seq DESC LIMIT 1)"
            " FROM patterns p, (SELECT count(*) AS recorded, min(seen_at) AS first, max(seen_at) AS last"
            "  FROM pattern_observations WHERE user_id = ? AND key = ?) o"
            " WHERE p.user_id = ? AND p.key = ?",
            (user_id, key, user_id, key),
        ).fetchone()
        if row is None:
            continue
        update = pattern_after_forgetting(int(row[0]) - int(gone), int(row[1]), row[2], row[3], row[4])
        if update is None:
            connection.execute("DELETE FROM patterns WHERE user_id = ? AND key = ?", (user_id, key))
            continue
        count, first, last, evidence = update
        connection.execute(
            "UPDATE patterns SET count = ?, first_seen = COALESCE(?, first_seen), last_seen = COALESCE(?, last_seen),"
            " evidence = ? WHERE user_id = ? AND key = ?",
            (count, first, last, evidence, user_id, key),
        )
    # Occurrences counted before they were recorded cannot say which turn they quote.
    connection.execute(SQLITE.sql(UNSURE_PATTERN_EVIDENCE), (user_id,))


def rederive_cell_texts(connection: sqlite3.Connection) -> int:
    """Rewrite each cell's search text an older version wrote differently (``stale_cell_texts``); how many.

    Reads the cells a chunk at a time, in id order; the ``derived_fts`` triggers follow the new text.
    """
    changed, after = 0, ""
    query = (
        f"SELECT {CELL_TEXT_COLUMNS} FROM cells c JOIN derived d ON d.id = c.id WHERE c.id > ? ORDER BY c.id LIMIT ?"
    )
    while rows := connection.execute(query, (after, _REDERIVE_CHUNK)).fetchall():
        stale = stale_cell_texts(rows)
        connection.executemany("UPDATE derived SET content = ? WHERE id = ?", stale)
        changed, after = changed + len(stale), str(rows[-1][0])
    return changed
