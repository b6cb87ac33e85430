"""Cheaper full-text queries on SQLite: the most common terms are dropped or kept to a turn's own text.

Counting a term's matches only reads its FTS5 posting list: about a millisecond even for a
term in 90% of 100k turns. The policy (``storage/focus.py``) is shared with PostgreSQL.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable

from memstrata.storage.focus import (
    BOUNDED_MIN_TURNS,
    FOCUS_MIN_TURNS,
    SAMPLE_TURNS,
    SCORED_ROW_BUDGET,
    term_reach,
)
from memstrata.storage.sqlite.ranking import Population

OWN_COLUMNS = "{content name}"
QUOTED_TERM = re.compile(r'"(?:[^"]|"")*"')  # one term of an fts_query expression, quotes included
_PART = re.compile(r'(?:\{[a-z ]+\}: )?"(?:[^"]|"")*"')  # a quoted term with its column filter, if any


#: A term's count in the sampled latest turns is reused until the sample has moved by this
#: fraction (1 / it) of its turns: each count reads a stretch of the term's posting list.
ESTIMATE_REUSE_SHARE = 10
MAX_ESTIMATES = 4_096
# (database file, user, term) -> (the sample's first seq, the term's matches in it); shared by threads.
_ESTIMATES: dict[tuple[str, str, str], tuple[int, int]] = {}
# (database file, user) -> (the user's latest seq, the sample's first seq) when the sample was last
# found: finding it walks SAMPLE_TURNS index entries (about 5 ms), so it is reused like the counts.
_FLOORS: dict[tuple[str, str], tuple[int, int]] = {}


def focused_match(
    connection: sqlite3.Connection,
    match: str,
    people: Population,
    user_id: str,
    estimated: Callable[[str], int] | None = None,
) -> str:
    """``match`` (as made by ``fts_query``) with each term searched as ``term_reach`` says, by ``user_id``'s counts.

    When every term is common, the rarest is kept (in the turn's own text) so the query
    still ranks something. An expression without quoted terms, or a user with fewer than
    ``FOCUS_MIN_TURNS`` turns, is returned unchanged. Shares are the user's own, so what
    other users said never changes which of the user's words are searched: a term's count
    over the whole index bounds the user's, which is counted only when that bound is not
    already rare enough. A memory of ``BOUNDED_MIN_TURNS`` or more is focused from
    estimates, within a row budget (``bounded_match``; ``estimated``: its ``estimated_matches``
    when the caller has them).
    """
    if is_bounded(people):
        return bounded_match(connection, match, people, user_id, estimated)

    def everywhere(term: str) -> int:
        # Reading a term's posting list costs about a millisecond even at 90% of 100k turns.
        statement = "SELECT count(*) FROM turns_fts WHERE turns_fts MATCH ?"
        return int(connection.execute(statement, [term]).fetchone()[0])

    def users(term: str) -> int:
        statement = (
            "SELECT count(*) FROM turns_fts JOIN turns t ON t.seq = turns_fts.rowid"
            " WHERE turns_fts MATCH ? AND +t.user_id = ?"
        )
        return int(connection.execute(statement, [term, user_id]).fetchone()[0])

    return focus(match, people, everywhere, users)


def is_bounded(people: Population) -> bool:
    """Whether full text over this memory is estimated and bounded (a memory of ``BOUNDED_MIN_TURNS`` or more)."""
    return people.users_rows >= BOUNDED_MIN_TURNS


def bounded_match(
    connection: sqlite3.Connection,
    match: str,
    people: Population,
    user_id: str,
    estimated: Callable[[str], int] | None = None,
) -> str:
    """``focused_match`` for a large memory: shares estimated from its latest turns (``estimated_matches``).

    The terms kept add up to at most ``SCORED_ROW_BUDGET`` estimated matches, the rarest always.
    """
    estimated = estimated or estimated_matches(connection, people, user_id)
    return focus(match, people, estimated, estimated, budget=SCORED_ROW_BUDGET)


def estimated_matches(connection: sqlite3.Connection, people: Population, user_id: str) -> Callable[[str], int]:
    """How many of ``user_id``'s turns a term (or a term with its column filter) matches, estimated.

    Each term's matches among the user's latest ``SAMPLE_TURNS`` turns (an index seek to the
    first of them, then a read of that part of its posting list) are scaled to all the user's
    turns. Counts and the sample's first turn are reused until the sample has moved by a tenth.
    """
    sample = min(SAMPLE_TURNS, people.users_rows)
    alone = people.is_whole_index
    store = str(connection.execute("PRAGMA database_list").fetchone()[2])
    if alone:
        latest = int(connection.execute("SELECT coalesce(max(seq), 0) FROM turns").fetchone()[0])
    else:
        statement = "SELECT coalesce(max(seq), 0) FROM turns WHERE user_id = ?"
        latest = int(connection.execute(statement, (user_id,)).fetchone()[0])
    known_floor = _FLOORS.get((store, user_id)) if store else None
    if known_floor is not None and 0 <= latest - known_floor[0] < sample // ESTIMATE_REUSE_SHARE:
        floor = known_floor[1]  # fewer turns than that came since: the sample has hardly moved
    else:
        # Another user's turns may lie among this one's: walk this user's (``turns_by_user`` holds them in seq order).
        mine = "" if alone else "WHERE user_id = ? "
        statement = f"SELECT seq FROM turns {mine}ORDER BY seq DESC LIMIT 1 OFFSET ?"
        row = connection.execute(statement, (sample - 1,) if alone else (user_id, sample - 1)).fetchone()
        floor = int(row[0]) if row is not None else 0
        if store:
            if len(_FLOORS) >= MAX_ESTIMATES:
                _FLOORS.clear()
            _FLOORS[(store, user_id)] = (latest, floor)

    def estimated(term: str) -> int:
        known = _ESTIMATES.get((store, user_id, term)) if store else None  # an in-memory store has no name to key by
        if known is not None and 0 <= floor - known[0] < sample // ESTIMATE_REUSE_SHARE:
            found = known[1]  # the sample has hardly moved since: its count still estimates the share
        else:
            if alone:
                statement = "SELECT count(*) FROM turns_fts WHERE turns_fts MATCH ? AND rowid >= ?"
                arguments: list[object] = [term, floor]
            else:
                statement = (
                    "SELECT count(*) FROM turns_fts JOIN turns t ON t.seq = turns_fts.rowid"
                    " WHERE turns_fts MATCH ? AND turns_fts.rowid >= ? AND +t.user_id = ?"
                )
                arguments = [term, floor, user_id]
            found = int(connection.execute(statement, arguments).fetchone()[0])
            if store:
                if len(_ESTIMATES) >= MAX_ESTIMATES:
                    _ESTIMATES.clear()
                _ESTIMATES[(store, user_id, term)] = (floor, found)
        return round(found * people.users_rows / sample) if sample else 0

    return estimated


def forget_estimates(user_id: str) -> None:
    """Drop the term counts and sample kept for ``user_id`` (in every store): a forgotten id stays nowhere."""
    for key in [key for key in _ESTIMATES if key[1] == user_id]:
        _ESTIMATES.pop(key, None)
    for floor in [floor for floor in _FLOORS if floor[1] == user_id]:
        _FLOORS.pop(floor, None)


def focus(
    match: str,
    people: Population,
    everywhere: Callable[[str], int],
    users: Callable[[str], int],
    *,
    budget: int | None = None,
) -> str:
    """``focused_match`` with the counts read by ``everywhere`` (a term's matches in the whole index) and ``users``.

    With a ``budget``, the terms kept are the rarest whose matches add up to at most that
    (the rarest whatever its count), in the query's order.
    """
    terms = QUOTED_TERM.findall(match)
    if not terms or people.users_rows < FOCUS_MIN_TURNS:
        return match
    counted: list[tuple[str, int]] = []
    for term in terms:
        matches = everywhere(term)
        if not people.is_whole_index and term_reach(matches, people.users_rows) != "all":
            matches = users(term)
        counted.append((term, matches))
    parts: list[tuple[str, int]] = []
    for term, matches in counted:
        reach = term_reach(matches, people.users_rows)
        if reach == "all":
            parts.append((term, matches))
        elif reach == "own":
            parts.append((f"{OWN_COLUMNS}: {term}", matches))
    if not parts:
        rarest, matches = min(counted, key=lambda pair: pair[1])
        parts.append((f"{OWN_COLUMNS}: {rarest}", matches))
    if budget is not None:
        parts = _within(parts, budget)
    return " OR ".join(part for part, _ in parts)


def _within(parts: list[tuple[str, int]], budget: int) -> list[tuple[str, int]]:
    """The rarest of ``parts`` while their matches add up to at most ``budget`` (the rarest always), in order."""
    kept: set[int] = set()
    total = 0
    for index in sorted(range(len(parts)), key=lambda index: (parts[index][1], index)):
        if kept and total + parts[index][1] > budget:
            break
        kept.add(index)
        total += parts[index][1]
    return [part for index, part in enumerate(parts) if index in kept]


def terms_of(match: str) -> list[str]:
    """The terms of a disjunction made by ``fts_query``, ``focused_match`` or ``own_columns_only``, each with
    its column filter; an expression without quoted terms is one term."""
    return _PART.findall(match) or [match]


def own_columns_only(match: str) -> str:
    """``match`` (from ``fts_query`` or ``focused_match``) with every term searched in a turn's own text and speaker."""
    terms = QUOTED_TERM.findall(match)
    return " OR ".join(f"{OWN_COLUMNS}: {term}" for term in terms) if terms else match
