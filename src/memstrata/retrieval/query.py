"""What one search asks for (a frozen ``Query``), and the dates it names."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, tzinfo

from memstrata.extraction.time_expressions import resolve_time_expressions
from memstrata.models import SearchFilters
from memstrata.retrieval.periods import MAX_PERIODS, Dated, Span, mentioned_periods, names_a_year

ItemKey = tuple[str, int]
"""A search candidate: ``("turn", seq)`` or ``("derived", seq)``."""
Rankings = dict[str, list[tuple[ItemKey, float]]]
"""Each retriever's candidates, best first, with its own score (higher is better)."""
# Measured on LoCoMo (evidence recall@10 of the turns): turns alone 0.626, with cells 0.618,
# with every summary 0.565 (a summary stands for many turns and crowds the evidence out).
# So search ranks turns by default and the derived tiers are opt-in.
DEFAULT_SEARCH_TIERS: tuple[str, ...] = ()
#: Suffix of the lists a retriever found inside the dates a query names (see ``joined``).
DATED = ":dated"
ASKED_CACHED_CHARS = 2_000


@dataclass(frozen=True, kw_only=True, slots=True)
class Query:
    """One checked search: its text, whose memory, which turns, how deep, which retrievers and tiers, and when.

    ``today`` is read once per call, so a search across midnight asks about one "yesterday";
    ``zone`` is where dates are read (the query's and each turn's day).
    """

    text: str
    user_id: str
    depth: int
    today: date
    zone: tzinfo
    filters: SearchFilters = field(default_factory=SearchFilters)
    mode: str = "hybrid"
    tiers: tuple[str, ...] = ()
    #: Other memories ranked together with ``user_id``'s (a federated search's shared spaces).
    also: tuple[str, ...] = ()

    @property
    def owners(self) -> tuple[str, ...]:
        """Every memory the query ranks: ``user_id``'s, then ``also``."""
        return (self.user_id, *self.also)


def today_in(zone: tzinfo) -> date:
    """Today's date in ``zone``: what relative phrases in a query are read against."""
    return datetime.now(zone).date()


def asked_periods(text: str, today: date) -> tuple[Dated, ...]:
    """The dates a query asks about: the periods it names, and its relative phrases on ``today``.

    A query that names a date with its year is anchored there, not today (its relative
    phrases are left out); phrases about the future name nothing said yet.
    """
    return _asked(text, today) if len(text) <= ASKED_CACHED_CHARS else _asked_periods(text, today)


@functools.lru_cache(maxsize=1_024)
def _asked(text: str, today: date) -> tuple[Dated, ...]:
    return _asked_periods(text, today)


def _asked_periods(text: str, today: date) -> tuple[Dated, ...]:
    named = mentioned_periods(text)
    if names_a_year(text):
        # "last week, as I said on 6 November 2023" counts back from the named day, not from
        # today: the named day's window already holds it (or, after "before", bounds it).
        return named
    until = today + timedelta(days=1)
    relative = dict.fromkeys(
        Span(*expression.days, until)
        for expression in resolve_time_expressions(text, today)
        if expression.days[0] < until
    )
    return (*named, *(relative if len(relative) <= MAX_PERIODS else ()))


def narrowed(filters: SearchFilters, window: tuple[datetime, datetime] | None) -> SearchFilters | None:
    """``filters`` narrowed to ``window`` as well; None without a window or when the filters are no wider."""
    if window is None:
        return None
    after = window[0] if filters.after is None else max(filters.after, window[0])
    before = window[1] if filters.before is None else min(filters.before, window[1])
    if after >= before or (after == filters.after and before == filters.before):
        return None
    return replace(filters, after=after, before=before)


def joined(rankings: Rankings, depth: int | None = None) -> Rankings:
    """Each list's top ``depth`` (None: all) joined with its top ``depth`` inside the query's dates, best first.

    The lists found inside the dates (``fulltext:dated``, ``vector:dated``) are folded into
    their retriever's list, one entry per item at its own score, so fusion and the reranker
    see one list per retriever.
    """
    result: Rankings = {}
    for name, ranking in rankings.items():
        if name.endswith(DATED):
            continue
        inside = rankings.get(name + DATED, [])[:depth]
        if not inside:
            result[name] = ranking[:depth]
            continue
        best: dict[ItemKey, float] = {}
        for key, score in [*ranking[:depth], *inside]:
            best[key] = max(score, best.get(key, score))
        result[name] = sorted(best.items(), key=lambda pair: -pair[1])  # stable: ties keep the order found
    return result
