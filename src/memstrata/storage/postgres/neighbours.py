"""Each turn's neighbours in the full-text index, as the SQLite store indexes them (its migration 4).

A turn is also found by the words of the turns around it in its session (an answer by
the question before it): ``turns.near`` holds the text of the turns one step before and
after it, ``turns.far`` of those two steps away, and the generated ``tsvector`` weighs
them low. A generated column cannot read other rows, so the writing transaction keeps
both current for the turns it adds and for the neighbours of the turns it adds or deletes.
"""

from __future__ import annotations

from collections.abc import Collection

from memstrata.storage.postgres.rows import Connection

#: How many turns on each side of a turn are indexed with it.
REACH = 2
#: How much of each neighbour's text is indexed with a turn. PostgreSQL's tsvector holds at most
#: 1 MB: with whole neighbours, four long turns around a short one could push its vector over,
#: and deleting a turn (which re-indexes its neighbours) would then fail.
NEIGHBOUR_CHARS = 4000
# Sessions compare null-safely; the index on (user_id, COALESCE(session_id, ''), seq) serves
# every lookup (validation never lets an empty session name through).
_SAME_SESSION = "o.user_id = t.user_id AND COALESCE(o.session_id, '') = COALESCE(t.session_id, '')"


def _before(step: int) -> str:
    """SQL for the seq of the turn ``step`` places before ``t`` in its session."""
    return f"(SELECT o.seq FROM turns o WHERE {_SAME_SESSION} AND o.seq < t.seq {_ordered('DESC', step)})"


def _after(step: int) -> str:
    """SQL for the seq of the turn ``step`` places after ``t`` in its session."""
    return f"(SELECT o.seq FROM turns o WHERE {_SAME_SESSION} AND o.seq > t.seq {_ordered('ASC', step)})"


def _ordered(direction: str, step: int) -> str:
    return f"ORDER BY o.seq {direction} LIMIT 1 OFFSET {step - 1}"


def _text(step: int) -> str:
    return (
        f"COALESCE((SELECT left(content, {NEIGHBOUR_CHARS}) FROM turns WHERE seq = {_before(step)}), '') || ' '"
        f" || COALESCE((SELECT left(content, {NEIGHBOUR_CHARS}) FROM turns WHERE seq = {_after(step)}), '')"
    )


#: SQL (on alias ``t``) for the text of the turns one and two steps away.
NEAR, FAR = _text(1), _text(2)
_AROUND = ", ".join(side(step) for step in range(1, REACH + 1) for side in (_before, _after))


def neighbour_seqs(connection: Connection, seqs: Collection[int]) -> set[int]:
    """The turns up to ``REACH`` steps before and after each of ``seqs`` in its session (``seqs`` excluded)."""
    if not seqs:
        return set()
    rows = connection.execute(
        f"SELECT {_AROUND} FROM turns t WHERE t.seq = ANY(%s::bigint[])", ([int(s) for s in seqs],)
    ).fetchall()
    return {int(seq) for row in rows for seq in row if seq is not None} - set(seqs)


def refresh_context(connection: Connection, seqs: Collection[int]) -> None:
    """Recompute the neighbour text of these turns (their tsvector follows)."""
    if seqs:
        connection.execute(
            f"UPDATE turns t SET near = {NEAR}, far = {FAR} WHERE t.seq = ANY(%s::bigint[])",
            ([int(s) for s in seqs],),
        )
