"""Cheaper full-text queries on a large memory: what each backend does with a query's common terms.

A full-text engine must score every turn a query term matches before it can return the
best twenty. A term in most turns ("go", "family" in a long chat) gets little BM25 weight
(none past one half of the turns), yet scoring its matches was most of a search's cost at
100k turns. Both stores know how many turns each term is in before they read any (SQLite
from the FTS5 posting list, PostgreSQL from counts its triggers keep), and use it here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Past this share of the indexed turns a query term is dropped; past the smaller one it is
# matched in the turn's own text and speaker only, not in the neighbour columns (where it
# would match about five times as many turns). Chosen at 100k turns on SQLite: search p50
# 35 → 27 ms. Applied to all of LoCoMo (5,882 turns) it left recall@10 as it was (0.759 → 0.761).
DROP_TERM_SHARE = 0.30
OWN_TEXT_TERM_SHARE = 0.10
# PostgreSQL has one index over all of a turn's text, so a common term cannot be narrowed
# to the turn's own words. Instead a query reads the rows of its rarest terms, up to this
# many rows in all (reading and scoring one costs about 5 µs at 100k turns), and scores
# them with every term; a turn that only common terms match is not a candidate. A query
# whose terms match fewer rows in all is ranked exactly. Chosen at 100k turns: full-text
# p50 118 → 18 ms, the top 20 keeping 99% of the exact ranking's score (see docs/benchmarks.md).
FIND_ROW_BUDGET = 5_000
# SQLite: below this many indexed turns scoring is cheap, and a small store's shares say little
# (one turn of three is a third), so queries are left as they are.
FOCUS_MIN_TURNS = 10_000
# SQLite, a store holding one memory of at least this many turns: counting a term's matches
# reads its whole posting list (about 25 ms for a term in 40% of 1M turns), and FTS5 scores
# every match of the query (about 1 µs each). There each term's share is estimated from the
# latest ``SAMPLE_TURNS`` turns; the rarest terms are kept while their estimated matches add
# up to at most ``SCORED_ROW_BUDGET`` (the rarest always), and of the matches only the
# ``SCORED_ROW_BUDGET`` most recent are scored. Smaller memories are ranked as before.
BOUNDED_MIN_TURNS = 200_000
SAMPLE_TURNS = 50_000
SCORED_ROW_BUDGET = 10_000
# PostgreSQL: scoring a turn with the query's terms costs about this many times as much as
# checking whether a turn read by time matches (3.4 / 1.1 µs at 1M turns); reading a match
# through the index costs about one check. So the latest turns are read instead of a
# common term's matches only where that is cheaper: at 1M turns once the finding terms
# match ~37,000 turns, at 100k ~13,000.
SCORE_CHECKS = 3


def term_reach(matches: int, indexed: int) -> str:
    """Where a term that matches ``matches`` of ``indexed`` turns is searched.

    ``"all"`` columns (a rare term), ``"own"`` text and speaker only (a common one), or
    ``"none"`` (so common it only costs time).
    """
    share = matches / indexed if indexed > 0 else 0.0
    if share > DROP_TERM_SHARE:
        return "none"
    return "own" if share > OWN_TEXT_TERM_SHARE else "all"


def bm25_idf(matches: int, indexed: int) -> float:
    """BM25's inverse document frequency of a term in ``matches`` of ``indexed`` turns (never negative)."""
    return math.log(1 + (indexed - matches + 0.5) / (matches + 0.5))


@dataclass(frozen=True, slots=True)
class TermPlan:
    """What a query does with one term: its BM25 weight, and whether the turns it matches are candidates."""

    term: str
    weight: float
    finds: bool


def plan_terms(terms: Sequence[str], matches: Sequence[int], indexed: int, limit: int) -> list[TermPlan]:
    """Which terms find candidates, in a store of ``indexed`` turns; every term scores them.

    The rarest terms find, as long as their matches add up to at most ``FIND_ROW_BUDGET``
    rows; the rarest finds whatever its count, and further terms find while the finders
    match fewer than ``limit`` rows, so a rare term alone does not leave the list short.
    Every term is weighted by its BM25 idf, so when all terms find, the ranking is exact.
    """
    if len(terms) != len(matches):
        raise ValueError("plan_terms needs one match count per term")
    finding: set[int] = set()
    found = 0
    for index in sorted(range(len(terms)), key=lambda index: (matches[index], index)):
        if not finding or found < limit or found + matches[index] <= FIND_ROW_BUDGET:
            finding.add(index)
            found += matches[index]
    return [
        TermPlan(term, bm25_idf(count, indexed), index in finding)
        for index, (term, count) in enumerate(zip(terms, matches, strict=True))
    ]


def recent_turns(indexed: int, plan: Sequence[TermPlan], matches: Sequence[int]) -> int | None:
    """How many of a memory's latest turns its terms should find candidates in; None: all of them.

    When the finding terms match more than ``FIND_ROW_BUDGET`` turns in all, the latest
    turns that hold about that many matches (if the terms are spread evenly) are read
    instead, but only where checking them one by one costs less than reading and scoring
    every match through the index (``SCORE_CHECKS``). SQLite's bounded full text scores
    its latest matches likewise.
    """
    if len(plan) != len(matches):
        raise ValueError("recent_turns needs one match count per term")
    found = sum(count for step, count in zip(plan, matches, strict=True) if step.finds)
    if found <= FIND_ROW_BUDGET:
        return None
    latest = max(1, indexed * FIND_ROW_BUDGET // found)
    if latest + SCORE_CHECKS * FIND_ROW_BUDGET >= (1 + SCORE_CHECKS) * found:
        return None
    return latest
