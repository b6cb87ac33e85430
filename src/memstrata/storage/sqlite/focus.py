"""Cheaper full-text queries on SQLite: the most common terms are dropped or kept to a turn's own text.

Counting a term's matches only reads its FTS5 posting list: about a millisecond even for a
term in 90% of 100k turns. The policy (``storage/focus.py``) is shared with PostgreSQL.
"""

from __future__ import annotations

import re
import sqlite3

from memstrata.storage.focus import FOCUS_MIN_TURNS, term_reach

OWN_COLUMNS = "{content name}"
_QUOTED_TERM = re.compile(r'"(?:[^"]|"")*"')  # one term of an fts_query expression, quotes included


def focused_match(connection: sqlite3.Connection, match: str) -> str:
    """``match`` (as made by ``fts_query``) with each term searched as ``term_reach`` says.

    When every term is common, the rarest is kept (in the turn's own text) so the query
    still ranks something. An expression without quoted terms, or an index smaller than
    ``FOCUS_MIN_TURNS``, is returned unchanged.
    """
    terms = _QUOTED_TERM.findall(match)
    # The highest rowid bounds the count of turns (deleted ones leave gaps) and costs one seek.
    indexed = connection.execute("SELECT max(rowid) FROM turns_fts").fetchone()[0] or 0
    if not terms or indexed < FOCUS_MIN_TURNS:
        return match
    counted = [
        (term, int(connection.execute("SELECT count(*) FROM turns_fts WHERE turns_fts MATCH ?", [term]).fetchone()[0]))
        for term in terms
    ]
    parts: list[str] = []
    for term, matches in counted:
        reach = term_reach(matches, indexed)
        if reach == "all":
            parts.append(term)
        elif reach == "own":
            parts.append(f"{OWN_COLUMNS}: {term}")
    if not parts:
        rarest, _ = min(counted, key=lambda pair: pair[1])
        parts.append(f"{OWN_COLUMNS}: {rarest}")
    return " OR ".join(parts)


def own_columns_only(match: str) -> str:
    """``match`` (from ``fts_query`` or ``focused_match``) with every term searched in a turn's own text and speaker."""
    terms = _QUOTED_TERM.findall(match)
    return " OR ".join(f"{OWN_COLUMNS}: {term}" for term in terms) if terms else match
