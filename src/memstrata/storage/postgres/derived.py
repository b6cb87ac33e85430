"""Searchable derived items and their purge: what every tier writes, and what goes when its turns go."""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.storage.cell_vectors import DROP_CELL_VECTORS
from memstrata.storage.dialect import DerivedItem
from memstrata.storage.patterns import UNSURE_PATTERN_EVIDENCE, pattern_after_forgetting
from memstrata.storage.postgres.rows import Connection
from memstrata.storage.sql_knowledge import USER_TABLES
from memstrata.storage.text import PROFILE_CELLS, cell_text_of


def purge_derived(connection: Connection, user_id: str, turn_seqs: Sequence[int] | None) -> None:
    """Delete every derived item built from these turns (all of the user's when ``None``).

    Summaries quote their sources, so a deleted turn takes the summaries that cite it along.
    """
    if turn_seqs is None:
        for table in USER_TABLES:
            connection.execute(f"DELETE FROM {table} WHERE user_id = %s", (user_id,))
        return
    seqs = [int(seq) for seq in turn_seqs]
    _rehome_restated(connection, seqs)
    _hand_on_supersession(connection, seqs)
    _hand_back_profile(connection, user_id, seqs)
    connection.execute(
        "DELETE FROM derived WHERE seq IN (SELECT derived_seq FROM derived_sources WHERE turn_seq = ANY(%s::bigint[]))",
        (seqs,),
    )
    # A scene quotes its segment: it goes with it.
    connection.execute(
        "DELETE FROM scenes WHERE segment_id IN"
        " (SELECT segment_id FROM segment_turns WHERE turn_seq = ANY(%s::bigint[]))",
        (seqs,),
    )
    connection.execute(
        "DELETE FROM segments WHERE id IN (SELECT segment_id FROM segment_turns WHERE turn_seq = ANY(%s::bigint[]))",
        (seqs,),
    )
    connection.execute(
        "DELETE FROM consolidations WHERE id IN"
        " (SELECT consolidation_id FROM consolidation_turns WHERE turn_seq = ANY(%s::bigint[]))",
        (seqs,),
    )
    # As in the SQLite store: the turns are deleted after this, so their mentions go now.
    connection.execute(
        "UPDATE entities e SET mentions = e.mentions - gone.count"
        " FROM (SELECT entity_id, count(*) AS count FROM entity_mentions"
        " WHERE turn_seq = ANY(%s::bigint[]) GROUP BY entity_id) gone WHERE e.id = gone.entity_id",
        (seqs,),
    )
    # An edge counts the turns that mention both its entities: these turns' count goes too.
    connection.execute(
        "UPDATE entity_edges e SET weight = e.weight - gone.count"
        " FROM (SELECT a.entity_id AS source, b.entity_id AS target, count(*) AS count FROM entity_mentions a"
        " JOIN entity_mentions b ON b.turn_seq = a.turn_seq AND b.entity_id > a.entity_id"
        " WHERE a.turn_seq = ANY(%s::bigint[]) GROUP BY a.entity_id, b.entity_id) gone"
        " WHERE e.source = gone.source AND e.target = gone.target",
        (seqs,),
    )
    connection.execute("DELETE FROM entity_edges WHERE user_id = %s AND weight <= 0", (user_id,))
    connection.execute("DELETE FROM entity_mentions WHERE turn_seq = ANY(%s::bigint[])", (seqs,))
    _forget_pattern_occurrences(connection, user_id, seqs)
    connection.execute(
        "DELETE FROM entities e WHERE e.user_id = %s"
        " AND NOT EXISTS (SELECT 1 FROM entity_mentions m WHERE m.entity_id = e.id)",
        (user_id,),
    )


def _rehome_restated(connection: Connection, seqs: list[int]) -> None:
    """As SQLite's: a fact whose turn goes, said again by a kept turn, is sourced from the earliest such turn.

    It takes that turn's value as spelled there and its sentence, and is valid from that
    turn's time if that is later (and the value it replaced until then).
    """
    rows = connection.execute(
        "SELECT DISTINCT ON (c.id) c.id, c.kind, c.subject, c.attribute, r.turn_seq, r.value, r.content,"
        " CASE WHEN t.created_at > c.valid_from AND (c.valid_to IS NULL OR t.created_at < c.valid_to)"
        " THEN t.created_at ELSE c.valid_from END"
        " FROM cells c JOIN cell_restatements r ON r.cell_id = c.id JOIN turns t ON t.seq = r.turn_seq"
        " WHERE c.source_turn_seq = ANY(%s::bigint[]) AND r.turn_seq <> ALL(%s::bigint[])"
        " ORDER BY c.id, t.created_at, t.seq",
        (seqs, seqs),
    ).fetchall()
    for cell_id, kind, subject, attribute, seq, value, sentence, since in rows:
        connection.execute(
            "UPDATE cells SET source_turn_seq = %s, value = %s, content = %s, valid_from = %s WHERE id = %s",
            (seq, value, sentence, since, cell_id),
        )
        # The value it replaced held until the fact's first kept evidence: no gap between them.
        connection.execute("UPDATE cells SET valid_to = %s WHERE superseded_by = %s", (since, cell_id))
        connection.execute("DELETE FROM cell_restatements WHERE cell_id = %s AND turn_seq = %s", (cell_id, seq))
        connection.execute(DROP_CELL_VECTORS, (cell_id,))  # made from the deleted turn's words
        item = connection.execute("SELECT seq FROM derived WHERE id = %s", (cell_id,)).fetchone()
        if item is not None:
            connection.execute(
                "DELETE FROM derived_sources WHERE derived_seq = %s AND turn_seq = ANY(%s::bigint[])", (item[0], seqs)
            )
            connection.execute(
                "INSERT INTO derived_sources (derived_seq, turn_seq) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (item[0], seq),
            )
            text = cell_text_of(str(kind), str(subject), str(attribute), str(value), str(sentence))
            connection.execute("UPDATE derived SET content = %s WHERE seq = %s", (text, item[0]))


def _hand_on_supersession(connection: Connection, seqs: list[int]) -> None:
    """As in the SQLite store: cells these turns' cells superseded take their successor's end, or are current again."""
    handed: set[str] = set()
    # Repeated while a successor is doomed too (a chain of replaced values forgotten at once).
    while rows := connection.execute(
        "UPDATE cells c SET valid_to = d.valid_to, superseded_by = d.superseded_by"
        " FROM cells d WHERE d.id = c.superseded_by AND d.source_turn_seq = ANY(%s::bigint[])"
        " AND NOT c.source_turn_seq = ANY(%s::bigint[]) RETURNING c.id",
        (seqs, seqs),
    ).fetchall():
        handed.update(str(row[0]) for row in rows)
    if handed:
        connection.execute(
            "UPDATE derived SET is_current = true WHERE id IN"
            " (SELECT id FROM cells WHERE id = ANY(%s::text[]) AND valid_to IS NULL)",
            (sorted(handed),),
        )


def _hand_back_profile(connection: Connection, user_id: str, seqs: list[int]) -> None:
    """As in the SQLite store: a trait these turns set takes the latest current fact left for it, if any."""
    keys = connection.execute(
        "SELECT key FROM profile WHERE user_id = %s AND source_turn_seq = ANY(%s::bigint[]) ORDER BY key",
        (user_id, seqs),
    ).fetchall()
    for (key,) in keys:
        row = connection.execute(
            "SELECT value, source_turn_seq, valid_from FROM cells WHERE user_id = %s AND attribute = %s"
            f" AND valid_to IS NULL AND {PROFILE_CELLS} AND NOT source_turn_seq = ANY(%s::bigint[])"
            " ORDER BY valid_from DESC, id DESC LIMIT 1",
            (user_id, key, seqs),
        ).fetchone()
        if row is not None:
            connection.execute(
                "UPDATE profile SET value = %s, source_turn_seq = %s, updated_at = %s WHERE user_id = %s AND key = %s",
                (row[0], row[1], row[2], user_id, key),
            )


def _forget_pattern_occurrences(connection: Connection, user_id: str, seqs: list[int]) -> None:
    """Take back the pattern occurrences these turns made: fewer counts, evidence from a turn still stored."""
    removed = connection.execute(
        "DELETE FROM pattern_observations WHERE user_id = %s AND turn_seq = ANY(%s::bigint[]) RETURNING key",
        (user_id, seqs),
    ).fetchall()
    gone: dict[str, int] = {}
    for (key,) in removed:
        gone[str(key)] = gone.get(str(key), 0) + 1
    for key, count in sorted(gone.items()):
        # Lock first, read after: a statement that waited for the lock would still see the
        # occurrences as they were when it began; the next statement sees those added meanwhile.
        locked = connection.execute(
            "SELECT count FROM patterns WHERE user_id = %s AND key = %s FOR UPDATE", (user_id, key)
        ).fetchone()
        if locked is None:
            continue
        row = connection.execute(
            "SELECT count(*), min(seen_at), max(seen_at), (SELECT evidence FROM pattern_observations"
            "  WHERE user_id = %s AND key = %s ORDER BY seen_at DESC, turn_seq DESC LIMIT 1)"
            " FROM pattern_observations WHERE user_id = %s AND key = %s",
            (user_id, key, user_id, key),
        ).fetchone()
        assert row is not None  # an aggregate always returns a row
        update = pattern_after_forgetting(int(locked[0]) - count, int(row[0]), row[1], row[2], row[3])
        if update is None:
            connection.execute("DELETE FROM patterns WHERE user_id = %s AND key = %s", (user_id, key))
            continue
        left, first, last, evidence = update
        connection.execute(
            "UPDATE patterns SET count = %s, first_seen = COALESCE(%s, first_seen),"
            " last_seen = COALESCE(%s, last_seen), evidence = %s WHERE user_id = %s AND key = %s",
            (left, first, last, evidence, user_id, key),
        )
    # Occurrences counted before they were recorded cannot say which turn they quote.
    connection.execute(UNSURE_PATTERN_EVIDENCE, (user_id,))


def put_derived(connection: Connection, item: DerivedItem) -> None:
    """Create or refresh one searchable derived item and link it to its source turns."""
    row = connection.execute(
        "INSERT INTO derived (id, user_id, tier, content, is_current, created_at) VALUES (%s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (id) DO UPDATE SET content = excluded.content, is_current = excluded.is_current"
        " RETURNING seq",
        (item.id, item.user_id, item.tier, item.content, item.is_current, item.created_at),
    ).fetchone()
    assert row is not None  # an upsert with RETURNING always returns the row
    connection.execute(
        "INSERT INTO derived_sources (derived_seq, turn_seq) SELECT %s, unnest(%s::bigint[]) ON CONFLICT DO NOTHING",
        (int(row[0]), [int(seq) for seq in item.sources]),
    )
