"""What is left of a procedural pattern when turns that showed it are deleted: one rule for every backend."""

from __future__ import annotations

from typing import TypeVar

Moment = TypeVar("Moment")

#: When any of a user's turns is deleted: the evidence of patterns counted (in part) before
#: occurrences were recorded, unless a recorded occurrence still quotes the same words, is
#: cleared, as it may quote the deleted turn. ``%s`` is the user id (SQLite writes ``?``).
UNSURE_PATTERN_EVIDENCE = (
    "UPDATE patterns SET evidence = '' WHERE user_id = %s AND evidence <> ''"
    " AND count > (SELECT count(*) FROM pattern_observations o WHERE o.user_id = patterns.user_id"
    " AND o.key = patterns.key)"
    " AND NOT EXISTS (SELECT 1 FROM pattern_observations o WHERE o.user_id = patterns.user_id"
    " AND o.key = patterns.key AND o.evidence = patterns.evidence)"
)


def pattern_after_forgetting(
    count: int, recorded: int, first: Moment | None, last: Moment | None, evidence: str | None
) -> tuple[int, Moment | None, Moment | None, str] | None:
    """The pattern's new (count, first seen, last seen, evidence), or ``None`` when nothing of it is left.

    ``count`` is the stored count minus the occurrences just deleted; ``recorded`` how many of
    those left have an occurrence row, whose earliest and latest sightings are ``first`` and
    ``last`` and whose latest evidence is ``evidence``. Occurrences counted before rows were
    kept (older stores) have no dates, so then the stored sightings stay (``None`` here) and
    the evidence is the latest recorded one, or none: the old snippet may quote a deleted turn.
    """
    if count <= 0:
        return None
    if recorded >= count:
        return count, first, last, evidence or ""
    return count, None, None, (evidence or "") if recorded else ""
