"""Full text over several memories at once (a user's and shared spaces'), each ranked as if searched alone.

A term's posting list spans every memory in the index, so searching five memories one by one
reads each list five times over. Here each list is read once for all of them: one count of
the term's matches everywhere, one of each memory's matches, one pass over the rows of all of
them. Each memory keeps its own term statistics and focus (``ranking.py``, ``focus.py``), so
its list is the one its own search returns.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable, Sequence

from memstrata.storage.sqlite.focus import focus, own_columns_only, terms_of
from memstrata.storage.sqlite.own_index import OwnIndexCache, OwnRows, ranked_in_own_index, ranks_in_own_index
from memstrata.storage.sqlite.ranking import Population, fts5_idf, population, ranked_for_user
from memstrata.storage.sqlite.rows import chunks

Ranked = dict[str, list[tuple[int, float]]]


class Postings:
    """Counts read from one index's posting lists, each at most once per search."""

    def __init__(self, connection: sqlite3.Connection, fts: str, table: str, owners: Sequence[str]) -> None:
        self._connection, self._fts, self._table, self._owners = connection, fts, table, list(owners)
        self._everywhere: dict[str, int] = {}
        self._by_owner: dict[str, dict[str, int]] = {}

    def everywhere(self, part: str) -> int:
        """How many rows of the whole index match ``part``."""
        if part not in self._everywhere:
            statement = f"SELECT count(*) FROM {self._fts} WHERE {self._fts} MATCH ?"
            self._everywhere[part] = int(self._connection.execute(statement, [part]).fetchone()[0])
        return self._everywhere[part]

    def by_owner(self, part: str) -> dict[str, int]:
        """How many of each owner's rows match ``part``."""
        if part not in self._by_owner:
            counts: dict[str, int] = {}
            for owners in chunks(self._owners):
                marks = ",".join("?" * len(owners))
                rows = self._connection.execute(
                    f"SELECT x.user_id, count(*) FROM {self._fts} JOIN {self._table} x ON x.seq = {self._fts}.rowid"
                    f" WHERE {self._fts} MATCH ? AND +x.user_id IN ({marks}) GROUP BY x.user_id",
                    [part, *owners],
                ).fetchall()
                counts.update((str(owner), int(count)) for owner, count in rows)
            self._by_owner[part] = counts
        return self._by_owner[part]


def focused_for(match: str, people: Population, owner: str, postings: Postings) -> str:
    """``focused_match`` for one of several owners, from shared posting counts."""
    return focus(match, people, postings.everywhere, lambda term: postings.by_owner(term).get(owner, 0))


def ranked_for_owners(
    connection: sqlite3.Connection,
    *,
    fts: str,
    table: str,
    rank: str,
    owners: Sequence[str],
    parts_of: Callable[[str, Population, Postings], list[str]],
    kept: str,
    kept_parameters: Sequence[object],
    limit: int,
    own: OwnRows | None = None,
    cache: OwnIndexCache | None = None,
    people: dict[str, Population] | None = None,
) -> Ranked:
    """Each owner's ``limit`` best rows that pass ``kept``, for the terms ``parts_of`` gives it, as (seq, score).

    The same as ``ranked_for_user`` run once per owner, reading each posting list once; with
    ``own``, an owner small enough is ranked in an index of its own rows (``own_index.py``),
    as its search alone would be. ``people``: each owner's, when the caller has read them.
    """
    owners = list(dict.fromkeys(owners))
    postings = Postings(connection, fts, table, owners)
    if people is None:
        people = {owner: population(connection, fts, table, owner) for owner in owners}
    found: Ranked = {owner: [] for owner in owners}
    wanted: dict[str, list[str]] = {}
    for owner in owners:
        parts = parts_of(owner, people[owner], postings)
        if people[owner].is_whole_index:  # the only owner with rows: its own single query
            found[owner] = ranked_for_user(
                connection,
                fts=fts,
                table=table,
                rank=rank,
                parts=parts,
                user_id=owner,
                kept=kept,
                kept_parameters=kept_parameters,
                limit=limit,
                people=people[owner],
            )
        elif own is not None and parts and ranks_in_own_index(people[owner]):
            found[owner] = ranked_in_own_index(
                connection,
                own,
                table=table,
                match=" OR ".join(parts),
                user_id=owner,
                kept=kept,
                kept_parameters=kept_parameters,
                limit=limit,
                cache=cache,
            )
        elif people[owner].users_rows and parts and limit >= 1:
            wanted[owner] = list(dict.fromkeys(parts))
    scores: dict[str, dict[int, float]] = {owner: defaultdict(float) for owner in wanted}
    every_part = list(dict.fromkeys(part for parts in wanted.values() for part in parts))
    for part in every_part:
        asking = [owner for owner, parts in wanted.items() if part in parts]
        rows = []
        for owners_part in chunks(asking):
            marks = ",".join("?" * len(owners_part))
            rows.extend(
                connection.execute(
                    f"SELECT x.user_id, x.seq, {rank}, ({kept}) FROM {fts} JOIN {table} x ON x.seq = {fts}.rowid"
                    f" WHERE {fts} MATCH ? AND +x.user_id IN ({marks})",
                    [*kept_parameters, part, *owners_part],
                ).fetchall()
            )
        matched: dict[str, int] = defaultdict(int)
        for owner, *_ in rows:
            matched[owner] += 1
        everywhere = postings.everywhere(part)
        factors = {
            owner: fts5_idf(people[owner].users_rows, count) / fts5_idf(people[owner].indexed, everywhere)
            for owner, count in matched.items()
        }
        for owner, seq, score, is_kept in rows:
            if is_kept:
                scores[owner][int(seq)] += float(score) * factors[owner]
    for owner, scored in scores.items():
        found[owner] = sorted(scored.items(), key=lambda pair: (-pair[1], pair[0]))[:limit]
    return found


def turn_parts(match: str, *, own_only: bool) -> Callable[[str, Population, Postings], list[str]]:
    """How ``fulltext`` picks each owner's terms: its focus, and with an agent filter its turns' own text only."""

    def parts_of(owner: str, people: Population, postings: Postings) -> list[str]:
        focused = focused_for(match, people, owner, postings)
        return terms_of(own_columns_only(focused) if own_only else focused)

    return parts_of


def every_part(match: str) -> Callable[[str, Population, Postings], list[str]]:
    """Derived items search every term of ``match``, whoever owns them."""
    parts = terms_of(match)
    return lambda _owner, _people, _postings: parts
