"""Calendar periods a query names ("on 9 November, 2022", "in July 2022", "during summer 2023").

Pure: nothing here reads the clock. :func:`mentioned_periods` reads absolute dates only;
the caller resolves relative ones ("last week") against today and passes them in as
:class:`Span` values. Open ranges ("before 2023") are left alone.
See docs/retrieval.md#1-candidates ("Dates the query names").
"""

from __future__ import annotations

import calendar
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

#: Days either side of a named day that still count, at half weight.
NEAR_DAYS = 3
NEAR_WEIGHT = 0.5
_FULL_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
# Abbreviations only next to a day or a year: "Jan" alone is as likely a name.
_SHORT_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name} | {"sept": 9}
_MONTH_NUMBERS = _SHORT_MONTHS | _FULL_MONTHS
_SEASONS = {"spring": (3, 4, 5), "summer": (6, 7, 8), "fall": (9, 10, 11), "autumn": (9, 10, 11), "winter": (1, 2, 12)}
_ANY_MONTH = "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True))
_FULL_MONTH = "|".join(sorted(_FULL_MONTHS, key=len, reverse=True))
_YEAR = r"(?:19|20)\d\d"
# A year-like number followed by a unit counts something ("of 2000 euros", "in 1500 words"). Nouns
# that also start a sentence after a year ("in 2020 people stayed home") are left out.
_COUNTED = (
    r"percent|per\s*cent|euros?|eur|dollars?|usd|bucks|pounds?|gbp|quid|yen|yuan|rupees?|francs?|"
    r"followers|subscribers|likes|votes|points|words|pages|steps|calories|kcal|"
    r"km|kilometers|kilometres|miles|meters|metres|feet|ft|m|kg|lbs?|grams|g|hours|minutes|mins|seconds|secs"
)
_NOT_COUNTED = rf"(?![.,]\d)(?!\s*(?:%|(?:{_COUNTED})\b))"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR_AFTER = rf",?\s*(?:of\s+)?({_YEAR})\b"
_PART = r"early\s+|late\s+|mid-?"
_PATTERNS = (
    # 9 November, 2022 / 9th of November of 2022 / 9 Nov
    ("day", re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_ANY_MONTH})\b\.?(?:{_YEAR_AFTER})?", re.IGNORECASE)),
    # November 9, 2022 / Nov 9th,2022 / November 9
    ("month-day", re.compile(rf"\b({_ANY_MONTH})\.?\s+{_DAY}\b(?:{_YEAR_AFTER})?", re.IGNORECASE)),
    # winter 2022-2023 / winter 2022-23: December, then January and February (as excerpts' notes write it)
    ("winter", re.compile(rf"\bwinter\s+(?:of\s+)?({_YEAR})\s*[-\u2013/]\s*((?:19|20)?\d\d)\b", re.IGNORECASE)),
    # summer 2023 / summer of 2023
    ("season", re.compile(rf"\b({'|'.join(_SEASONS)})\s+(?:of\s+)?({_YEAR})\b", re.IGNORECASE)),
    # July 2022 / Sept, 2023 / November of 2022
    ("month-year", re.compile(rf"\b({_ANY_MONTH})\.?,?\s+(?:of\s+)?({_YEAR})\b", re.IGNORECASE)),
    # in June / during March (no year: any year's)
    ("month", re.compile(rf"\b(?:in|during|throughout|of)\s+(?:{_PART})?({_FULL_MONTH})\b", re.IGNORECASE)),
    # in 2023 / during 2022 / early 2021 / mid-2022
    ("year", re.compile(rf"\b(?:in|during|throughout|of|early|late|mid-?)\s*({_YEAR})\b{_NOT_COUNTED}", re.IGNORECASE)),
)
# A date after one of these is a boundary of an open range, not a period.
_BOUNDARY = re.compile(r"\b(?:before|after|until|till|since|by|prior\s+to)\s*$", re.IGNORECASE)
_BOUNDARY_REACH = 16  # characters before a date that are searched for a boundary word
_BOUNDARY_YEAR = re.compile(
    rf"\b(?:before|after|until|till|since|by|prior\s+to)\s+{_YEAR}\b{_NOT_COUNTED}", re.IGNORECASE
)
#: Queries are questions; a text naming more distinct periods than this is not asking about one.
MAX_PERIODS = 12


@dataclass(frozen=True, slots=True)
class Period:
    """A day, some months of a year (none: the whole year), or the same in any year (``year`` None)."""

    year: int | None
    months: tuple[int, ...] = ()
    day: int | None = None

    def nearness(self, moment: date) -> float:
        """1 if ``moment`` falls in the period, ``NEAR_WEIGHT`` within ``NEAR_DAYS`` of a named day, else 0."""
        if self.day is not None:
            # Without a year, the named day of the moment's year or of either year beside it:
            # 30 December is near "January 1".
            years = (self.year,) if self.year is not None else (moment.year - 1, moment.year, moment.year + 1)
            gaps = []
            for year in years:
                try:
                    gaps.append(abs((moment - date(year, self.months[0], self.day)).days))
                except (ValueError, OverflowError):  # 29 February of a common year; the calendar's edge
                    continue
            if not gaps:
                return 0.0
            gap = min(gaps)
            return 1.0 if gap == 0 else NEAR_WEIGHT if gap <= NEAR_DAYS else 0.0
        if self.year is not None and moment.year != self.year:
            return 0.0
        return 1.0 if not self.months or moment.month in self.months else 0.0

    def bounds(self) -> tuple[date, date] | None:
        """Its first day and the day after its last (a named day widened by ``NEAR_DAYS``); None without a year."""
        if self.year is None:
            return None
        if self.day is not None:
            named = date(self.year, self.months[0], self.day)
            return named - timedelta(days=NEAR_DAYS), named + timedelta(days=NEAR_DAYS + 1)
        first, last = (min(self.months), max(self.months)) if self.months else (1, 12)
        after_last = date(self.year + 1, 1, 1) if last == 12 else date(self.year, last + 1, 1)
        return date(self.year, first, 1), after_last


@dataclass(frozen=True, slots=True)
class Span:
    """Days a relative phrase names, from ``first`` to the day before ``end``, asked about on ``until``'s eve.

    What happened "last month" is told then or afterwards: days from ``end`` up to
    ``until`` (the day after the question was asked) count at ``NEAR_WEIGHT``.
    """

    first: date
    end: date
    until: date

    def nearness(self, moment: date) -> float:
        """1 inside the span, ``NEAR_WEIGHT`` after it up to ``until``, else 0."""
        if self.first <= moment < self.end:
            return 1.0
        return NEAR_WEIGHT if self.end <= moment < self.until else 0.0

    def bounds(self) -> tuple[date, date]:
        """Its first day and the later of its end and ``until``."""
        return self.first, max(self.end, self.until)


#: What a query can name: a calendar period, or the days of a relative phrase.
Dated = Period | Span


def mentioned_periods(text: str) -> tuple[Period, ...]:
    """The calendar periods ``text`` names, in the order found; a day or month without a year takes the
    year named elsewhere in the text when exactly one is ("between August 11 and August 15, 2023")."""
    # One search reads its query up to three times (candidates, then each rerank): remember short ones.
    return _cached_periods(text) if len(text) <= CACHED_TEXT_CHARS else _periods_in(text)


CACHED_TEXT_CHARS = 2_000


@functools.lru_cache(maxsize=1_024)
def _cached_periods(text: str) -> tuple[Period, ...]:
    return _periods_in(text)


def _periods_in(text: str) -> tuple[Period, ...]:
    taken = bytearray(len(text))  # 1 where a pattern already matched: each character is read once
    found: list[tuple[int, Period]] = []
    distinct: set[Period] = set()
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(taken[start:end]):
                continue
            taken[start:end] = b"\x01" * (end - start)
            try:
                read = _winter(match.groups()) if kind == "winter" else (_period(kind, match.groups()),)
            except KeyError:  # a letter IGNORECASE matched that no fold maps back (defensive)
                read = ()
            if _BOUNDARY.search(text[max(0, start - _BOUNDARY_REACH) : start]):
                continue
            for period in read:
                if period is None:
                    continue
                found.append((start, period))
                distinct.add(period)
                if len(distinct) > MAX_PERIODS:
                    return ()
    periods = [period for _, period in sorted(found, key=lambda pair: pair[0])]
    years = {period.year for period in periods if period.year is not None}
    if len(years) == 1:
        year = years.pop()
        periods = [_in_year(period, year) if period.year is None else period for period in periods]
    # "in November of 2022" names November; the year alone adds nothing to it.
    named = {period.year for period in periods if period.months}
    periods = [period for period in periods if period.months or period.year not in named]
    return tuple(dict.fromkeys(periods))


def names_a_year(text: str) -> bool:
    """Whether ``text`` names a date with its year, as a period or a boundary ("before 10 April 2023", "since 2020")."""
    for kind, pattern in _PATTERNS:
        if kind != "month" and any(match.groups()[-1] is not None for match in pattern.finditer(text)):
            return True
    return _BOUNDARY_YEAR.search(text) is not None


def nearness(periods: Sequence[Dated], moment: datetime | date | None) -> float:
    """How well ``moment`` matches the nearest of ``periods`` (0 when there are none)."""
    if moment is None or not periods:
        return 0.0
    day = moment.date() if isinstance(moment, datetime) else moment
    return max(period.nearness(day) for period in periods)


def covering_window(periods: Sequence[Dated], zone: tzinfo = UTC) -> tuple[datetime, datetime] | None:
    """The span from the first dated period's start to the last one's end, midnights in ``zone``, as UTC.

    Periods without a year ("in June") have no window of their own and count in the
    reranker only; None if no period has a year.
    """
    bounds = [bound for bound in (period.bounds() for period in periods) if bound is not None]
    if not bounds:
        return None
    first = min(bound[0] for bound in bounds if bound is not None)
    after_last = max(bound[1] for bound in bounds if bound is not None)
    return _midnight(first, zone), _midnight(after_last, zone)


def _period(kind: str, groups: Sequence[str | None]) -> Period | None:
    if kind in ("day", "month-day"):
        day_text, month_text, year_text = groups if kind == "day" else (groups[1], groups[0], groups[2])
        assert day_text is not None and month_text is not None
        month, day = _MONTH_NUMBERS[_plain(month_text)], int(day_text)
        year = int(year_text) if year_text else None
        try:
            date(year or 2000, month, day)  # 2000 is a leap year: 29 February is a real day
        except ValueError:
            return None
        return Period(year, (month,), day)
    if kind == "season":
        season, year_text = groups
        assert season is not None and year_text is not None
        return Period(int(year_text), _SEASONS[_plain(season)])
    if kind == "month-year":
        month_text, year_text = groups
        assert month_text is not None and year_text is not None
        return Period(int(year_text), (_MONTH_NUMBERS[_plain(month_text)],))
    if kind == "month":
        (month_text,) = groups
        assert month_text is not None
        return Period(None, (_FULL_MONTHS[_plain(month_text)],))
    (year_text,) = groups
    assert year_text is not None
    return Period(int(year_text))


def _winter(groups: Sequence[str | None]) -> tuple[Period | None, ...]:
    """ "winter 2022-2023": December of the first year, January and February of the next; None if not consecutive."""
    first_text, second_text = groups
    assert first_text is not None and second_text is not None
    first = int(first_text)
    second = int(second_text) if len(second_text) == 4 else first // 100 * 100 + int(second_text)
    if second != first + 1:
        return (None,)
    return Period(first, (12,)), Period(second, (1, 2))


def _plain(text: str) -> str:
    return text.casefold().replace("ı", "i").replace("\u0307", "")


def _in_year(period: Period, year: int) -> Period:
    """``period`` in ``year``, unless that is no real day (29 February of a common year)."""
    if period.day is not None:
        try:
            date(year, period.months[0], period.day)
        except ValueError:
            return period
    return Period(year, period.months, period.day)


def _midnight(day: date, zone: tzinfo) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=zone).astimezone(UTC)
