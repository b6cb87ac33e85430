"""SQL for the long-term tiers: cells, profile, search items, importance, events, purging.

Mid-term segments and consolidations are in ``segments.py``; patterns and entities in ``graph.py``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import numpy as np

from memstrata.models import Cell, MemoryEvent, format_time
from memstrata.storage.base import Vectors
from memstrata.storage.cell_vectors import CELL_VECTORS, CELLS_WITHOUT_VECTORS, DROP_CELL_VECTORS, SAVE_CELL_VECTOR
from memstrata.storage.patterns import UNSURE_PATTERN_EVIDENCE, pattern_after_forgetting
from memstrata.storage.sqlite.focus import terms_of
from memstrata.storage.sqlite.ranking import one_snapshot, population, ranked_for_user
from memstrata.storage.sqlite.shared import put_derived, tier_event
from memstrata.storage.text import (
    CELL_TEXT_COLUMNS,
    PROFILE_CELLS,
    cell_text,
    cell_text_of,
    late_supersession,
    stale_cell_texts,
    supersession,
)

T = TypeVar("T")
_REDERIVE_CHUNK = 2_000
_CELL_COLUMNS = (
    "c.id, c.user_id, c.kind, c.subject, c.attribute, c.value, c.content, c.salience, c.valid_from,"
    " t.id, c.valid_to, c.superseded_by, c.scene_id"
)


class KnowledgeMixin:
    """Methods the tiers call; mixed into SQLiteStore, which provides ``_read`` and ``_write``."""

    _read: Callable[[Callable[[sqlite3.Connection], Any]], Any]
    _write: Callable[[Callable[[sqlite3.Connection], Any]], Any]

    # -- search items -----------------------------------------------------------------

    def derived_fulltext(
        self, match: str, user_id: str, limit: int, tiers: Sequence[str] = ("longterm",)
    ) -> list[tuple[int, float]]:
        """BM25 over current derived items of these tiers (longterm cells, scene, midterm, consolidation).

        With the user's own term statistics, over all their derived items (``ranking.py``).
        """
        marks = ",".join("?" * len(tiers))

        def work(connection: sqlite3.Connection) -> list[tuple[int, float]]:
            with one_snapshot(connection):
                return ranked_for_user(
                    connection,
                    fts="derived_fts",
                    table="derived",
                    rank="-bm25(derived_fts)",
                    parts=terms_of(match),
                    user_id=user_id,
                    kept=f"x.is_current = 1 AND x.tier IN ({marks})",
                    kept_parameters=list(tiers),
                    limit=limit,
                    people=population(connection, "derived_fts", "derived", user_id),
                )

        result: list[tuple[int, float]] = self._read(work)
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

    # -- fact vectors -------------------------------------------------------------------

    def cells_without_vectors(self, user_id: str, model_id: str, limit: int) -> list[Cell]:
        """At most ``limit`` of a user's current cells with no vector of ``model_id``, newest first."""
        sql = _sqlite(CELLS_WITHOUT_VECTORS.format(columns=_CELL_COLUMNS))
        rows = self._read(lambda connection: connection.execute(sql, (user_id, model_id, limit)).fetchall())
        return [_cell(row) for row in rows]

    def save_cell_vectors(self, model_id: str, vectors: Mapping[str, Vectors]) -> None:
        """Store vectors by cell id; a cell deleted meanwhile is skipped, a stored vector replaced."""
        rows = [
            (model_id, np.asarray(vector, dtype=np.float32).tobytes(), cell_id) for cell_id, vector in vectors.items()
        ]
        self._write(lambda connection: connection.executemany(_sqlite(SAVE_CELL_VECTOR), rows))

    def cell_vectors(self, user_id: str, model_id: str) -> list[tuple[int, str, Vectors]]:
        """(search item seq, subject, vector) of a user's current cells that have a vector of ``model_id``, by seq."""
        rows = self._read(lambda connection: connection.execute(_sqlite(CELL_VECTORS), (user_id, model_id)).fetchall())
        return [
            (int(seq), str(subject), np.frombuffer(vector, dtype=np.float32).copy())
            for seq, subject, vector in sorted(rows, key=lambda row: int(row[0]))
        ]

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
        bound = -1 if limit is None else limit  # SQLite reads a negative limit as none
        rows = self._read(lambda connection: connection.execute(sql, (*parameters, bound)).fetchall())
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

        def work(connection: sqlite3.Connection) -> bool:
            if seen_slot is not None:
                rows = connection.execute(
                    "SELECT id, valid_to IS NULL FROM cells WHERE user_id = ? AND subject = ? AND attribute = ?",
                    (cell.user_id, cell.subject, cell.attribute),
                ).fetchall()
                if {str(row[0]): bool(row[1]) for row in rows} != dict(seen_slot):
                    return False  # another worker stored, ended or deleted one of them since the read
            connection.execute(
                "INSERT INTO cells (id, user_id, kind, subject, attribute, value, content, salience, single_valued,"
                " scene_id, source_turn_seq, valid_from, valid_to, superseded_by, created_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                    None if cell.valid_to is None else format_time(cell.valid_to),
                    cell.superseded_by,
                    format_time(cell.valid_from),
                ),
            )
            if cell.superseded_by is not None:
                tier_event(connection, "supersession", cell.user_id, late_supersession(cell))
            for old_id in supersede:
                ended = connection.execute(
                    "UPDATE cells SET valid_to = ?, superseded_by = ? WHERE id = ? AND valid_from <= ?"
                    " AND (valid_to IS NULL OR valid_to > ?)",
                    (format_time(cell.valid_from), cell.id, old_id, *[format_time(cell.valid_from)] * 2),
                ).rowcount
                if not ended:  # began after this cell, or already ended before it: not this cell's to end
                    continue
                connection.execute("UPDATE derived SET is_current = 0 WHERE id = ?", (old_id,))
                tier_event(connection, "supersession", cell.user_id, supersession(old_id, cell.id))
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

        return bool(self._write(work))

    def restate_cell(self, user_id: str, cell_id: str, turn_seq: int, value: str, content: str) -> bool:
        """Note that turn ``turn_seq`` said the cell ``cell_id`` again (``value`` in ``content``); False if gone."""

        def work(connection: sqlite3.Connection) -> bool:
            if connection.execute("SELECT 1 FROM cells WHERE id = ? AND user_id = ?", (cell_id, user_id)).fetchone():
                connection.execute(
                    "INSERT OR IGNORE INTO cell_restatements (cell_id, turn_seq, value, content)"
                    " SELECT ?, seq, ?, ? FROM turns WHERE seq = ? AND user_id = ?",
                    (cell_id, value, content, turn_seq, user_id),
                )
                return True
            return False

        return bool(self._write(work))

    def set_profile(self, user_id: str, values: Mapping[str, str], source_turn_seq: int, now: datetime) -> None:
        """Upsert profile traits, each with the turn it came from and when."""

        def work(connection: sqlite3.Connection) -> None:
            for key, value in values.items():
                connection.execute(
                    "INSERT INTO profile (user_id, key, value, source_turn_seq, updated_at) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value,"
                    " source_turn_seq = excluded.source_turn_seq, updated_at = excluded.updated_at"
                    # A turn processed late never overwrites what a newer one set.
                    " WHERE excluded.updated_at >= profile.updated_at",
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

    def profile_entries(self, user_id: str) -> list[tuple[str, str, str | None]]:
        """The profile with who said each trait: (key, value, speaker name of the turn that set it or None), by key."""
        rows = self._read(
            lambda connection: connection.execute(
                "SELECT p.key, p.value, t.name FROM profile p LEFT JOIN turns t ON t.seq = p.source_turn_seq"
                " WHERE p.user_id = ? ORDER BY p.key",
                (user_id,),
            ).fetchall()
        )
        return [(str(key), str(value), None if name is None else str(name)) for key, value, name in rows]

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
            "pattern_observations",
            "sleep_marks",
            "entities",
            "entity_edges",
            "consolidations",
            "derived",
            "working_items",
            "jobs",
        ):
            connection.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,))
        return
    doomed = set(turn_seqs)  # every turn deleted in this call: none of them may take a fact over
    for chunk_start in range(0, len(turn_seqs), 500):
        chunk = list(turn_seqs[chunk_start : chunk_start + 500])
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
        connection.execute(_sqlite(DROP_CELL_VECTORS), (cell_id,))  # made from the deleted turn's words
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
    connection.execute(
        "UPDATE derived SET is_current = 1 WHERE id IN"
        f" (SELECT id FROM cells WHERE valid_to IS NULL AND id IN ({','.join('?' * len(handed))}))",
        handed,
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
    connection.execute(UNSURE_PATTERN_EVIDENCE.replace("%s", "?"), (user_id,))


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


def _sqlite(statement: str) -> str:
    """A statement both backends share (written with ``%s``) in SQLite's placeholders."""
    return statement.replace("%s", "?")


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
