"""Cheaper full-text queries: the most common terms are dropped or kept to a turn's own text.

FTS5 must score every turn a query term matches before it can return the best twenty. A
term in most turns ("go", "family" in a long chat) gets almost no BM25 weight (none past
one half of the turns), yet scoring its matches was most of a search's cost at 100k turns.
Counting a term's matches only reads its posting list: about a millisecond even for a term
in 90% of 100k turns.
"""

from __future__ import annotations

import re
import sqlite3

# Past this share of the indexed turns a query term is dropped; past the smaller one it is
# matched in the turn's own text and speaker only, not in the neighbour columns (where it
# would match about five times as many turns). Chosen at 100k turns: search p50 35 → 27 ms.
# Applied to all of LoCoMo (5,882 turns) it left recall@10 as it was (0.759 → 0.761).
DROP_TERM_SHARE = 0.30
OWN_TEXT_TERM_SHARE = 0.10
# Below this many indexed turns scoring is cheap, and a small store's shares say little
# (one turn of three is a third), so queries are left as they are.
FOCUS_MIN_TURNS = 10_000
OWN_COLUMNS = "{content name}"
_QUOTED_TERM = re.compile(r'"(?:[^"]|"")*"')  # one term of an fts_query expression, quotes included


def term_reach(matches: int, indexed: int) -> str:
    """Where a term that matches ``matches`` of ``indexed`` turns is searched.

    ``"all"`` columns (a rare term), ``"own"`` text and speaker only (a common one), or
    ``"none"`` (so common it only costs time).
    """
    share = matches / indexed if indexed > 0 else 0.0
    if share > DROP_TERM_SHARE:
        return "none"
    return "own" if share > OWN_TEXT_TERM_SHARE else "all"


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
