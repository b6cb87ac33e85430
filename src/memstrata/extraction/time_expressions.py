"""Relative time expressions ("yesterday", "last week", "3 years ago") resolved against a turn's date.

:func:`resolve_time_expressions` finds such phrases and returns what each means on the
turn's date; :func:`annotate` appends those meanings, leaving the words untouched. Pure:
the anchor date is passed in, nothing reads the clock. See docs/retrieval.md#relative-dates.
"""

from __future__ import annotations

import calendar
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

WEEKDAYS = tuple(name.lower() for name in calendar.day_name)
# Short forms people type ("last Tues"), longest first so the regex prefers them.
WEEKDAY_FORMS = {
    "tues": 1,
    "thurs": 3,
    "thur": 3,
    "thu": 3,
    "mon": 0,
    "tue": 1,
    "wed": 2,
    "fri": 4,
    "sat": 5,
    "sun": 6,
} | {name: index for index, name in enumerate(WEEKDAYS)}
#: Short forms that are also words ("when we last sat down", "they last wed in June"): a day only when capitalised.
WORD_LIKE_WEEKDAYS = frozenset({"sat", "wed", "sun"})
# Northern-hemisphere meteorological seasons: the months each one covers, in order.
SEASONS = {
    "spring": (3, 4, 5),
    "summer": (6, 7, 8),
    "fall": (9, 10, 11),
    "autumn": (9, 10, 11),
    "winter": (12, 1, 2),
}
MONTHS = tuple(name.lower() for name in calendar.month_name[1:])
NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "couple of": 2,
}
MAX_COUNT = 60  # "300 years ago" is history, not something to date against the turn

_NUMBER = "(?P<count>" + "|".join([r"\d{1,2}", *sorted(NUMBER_WORDS, key=len, reverse=True)]) + ")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_WEEKDAY = "(?P<weekday>" + "|".join(sorted(WEEKDAY_FORMS, key=len, reverse=True)) + ")"
_SEASON = "(?P<season>" + "|".join(SEASONS) + ")"
_MONTH = "(?P<month>" + "|".join(MONTHS) + ")"

_QUALIFIER = r"(?:(?P<about>about|around|almost|nearly) )?"
# "on the 15th" names a day of the month when a clause goes on or ends after it; before a
# noun ("on the 5th floor") or a month ("on the 21st of June") it is something else.
_CLAUSE_GOES_ON = "and|after|before|at|when|so|but|too|as|with|in|from|because|while|i|we|it|he|she|they"
_ORDINAL_END = rf"(?= *(?:[.,!?;:)]|$| (?:{_CLAUSE_GOES_ON})\b))"
_CLAUSE_END = _ORDINAL_END
# A present perfect counts up to now: not "would have stayed for 2 weeks", not "I've never been
# there for 3 years" (nothing counts up), not "have you lived here for 3 years?" (asked, not said).
_NOT_MODAL = r"(?<!would )(?<!could )(?<!should )(?<!might )(?<!must )(?<!['\u2019]d )"
_ONE_WORD = r"(?: (?!not\b|never\b)\w+)?"
_NOT_ASKED = r"(?! *\?)"
# Past participles of verbs that last, whose present perfect with "for" counts up to now.
_LASTING = (
    "(?:had|known|lived|owned|worked|played|practi[cs]ed|studied|used|kept|taught|dated|volunteered|collected"
    "|trained|stayed|run|done)"
)

# Longer phrases first, so "last weekend" wins over "last week".
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(rf"(?<![\w-])(?:{pattern})(?![\w-])", re.IGNORECASE))
    for kind, pattern in (
        ("ago", rf"{_NUMBER} {_UNIT} ago"),
        ("since", rf"(?:for )?{_QUALIFIER}{_NUMBER} {_UNIT} now"),
        # "we've been together for three years": the present perfect counts up to now, when
        # the clause ends there ("had been", "'d been" count up to some other moment, and
        # "for a day like this" is no duration).
        # The subject of a contraction is quoted whole: "We've been …", not "ve been …".
        (
            "since",
            rf"{_NOT_MODAL}(?:have|has|[\w-]*\w['\u2019](?:ve|s)){_ONE_WORD} been(?: \w+){{0,4}}?"
            rf" for {_QUALIFIER}{_NUMBER} {_UNIT}{_CLAUSE_END}{_NOT_ASKED}",
        ),
        # "I've had them for 3 years", "we've known each other for 4 years": a verb that lasts, in the
        # present perfect. Not after "'s", which may be "is" ("it's kept for 3 days"), nor verbs of one
        # act ("we've booked it for 2 weeks" says how long it will last).
        (
            "since",
            rf"{_NOT_MODAL}(?:have|has|[\w-]*\w['\u2019]ve){_ONE_WORD} {_LASTING}(?: \w+){{0,4}}?"
            rf" for {_QUALIFIER}{_NUMBER} {_UNIT}{_CLAUSE_END}{_NOT_ASKED}",
        ),
        ("few", r"(?:a )?few (?P<unit>day|week|month|year)s (?:ago|back)|the other day"),
        ("day_of_month", rf"on the (?P<ordinal>\d{{1,2}})(?:st|nd|rd|th){_ORDINAL_END}"),
        ("in", rf"in {_NUMBER} {_UNIT}(?! ago)"),
        ("last_weekday", rf"last {_WEEKDAY}(?! of\b)"),
        ("next_weekday", rf"next {_WEEKDAY}(?! of\b)"),
        ("last_month_name", rf"last {_MONTH}(?! of\b)"),
        ("last_season", rf"last {_SEASON}(?! of\b)"),
        ("fixed", r"the day before yesterday|yesterday|last night|the day after tomorrow|tomorrow|tonight"),
        # "the last week of August" is the end of a month, not the week before today.
        ("fixed", r"(?:(?:last|next|this past|this) weekend|(?:last|next|this) week|this past week)(?! of\b)"),
        ("fixed", r"(?:(?:last|next|this) month|(?:last|next|this) year)(?! of\b)"),
    )
)

# All the patterns in one, without their group names: most texts hold no relative time
# phrase, and one pass over them costs about half of ten passes.
_ANY = re.compile("|".join(re.sub(r"\(\?P<\w+>", "(?:", pattern.pattern) for _, pattern in _PATTERNS), re.IGNORECASE)


Days = tuple[date, date]
"""A run of days: the first, and the day after the last."""


def plain(text: str) -> str:
    """``text`` folded the way the patterns' IGNORECASE matched it ("Yeſterday", "thİs" → "yesterday", "this")."""
    return text.casefold().replace("ı", "i").replace("\u0307", "")


@dataclass(kw_only=True, frozen=True, slots=True)
class TimeExpression:
    """One relative phrase found in a text and what it means on the anchor date.

    ``days`` is the run of days the meaning covers: its first day and the day after its
    last ("last month", said on 8 May 2023: 1 April to 1 May 2023; "since 2020": from
    1 January 2020 to the day after the anchor).
    """

    phrase: str
    meaning: str
    start: int
    days: Days


def may_mention_relative_time(text: str) -> bool:
    """Whether ``text`` holds something that looks like a relative time phrase: a cheap test before a lookup."""
    return _ANY.search(text) is not None


def resolve_time_expressions(text: str, anchor: datetime | date) -> list[TimeExpression]:
    """Every relative time phrase in ``text`` with its absolute meaning on ``anchor``, in text order.

    Overlapping phrases keep the first, longest match; a phrase repeated with the same
    meaning is reported once.
    """
    if _ANY.search(text) is None:
        return []
    day = anchor.date() if isinstance(anchor, datetime) else anchor
    found: list[TimeExpression] = []
    taken = bytearray(len(text))  # 1 where a phrase was already read: linear in the text's length
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(taken[start:end]):
                continue
            if kind == "in" and not _looks_ahead(text, start, end):
                continue
            if kind in ("last_weekday", "next_weekday") and _is_a_word(match.group("weekday")):
                continue
            try:
                resolved = _meaning(kind, match, day)
            except (OverflowError, ValueError):  # the edge of the calendar (year 1 or 9999)
                resolved = None
            if resolved is None:
                continue
            taken[start:end] = b"\x01" * (end - start)
            found.append(TimeExpression(phrase=match.group(0), meaning=resolved[0], start=start, days=resolved[1]))
    found.sort(key=lambda expression: expression.start)
    unique: dict[tuple[str, str], TimeExpression] = {}
    for expression in found:
        unique.setdefault((plain(expression.phrase), expression.meaning), expression)
    return list(unique.values())


def _is_a_word(weekday: str) -> bool:
    """Whether a short weekday form is, as written, more likely a word: "sat" (not "Sat")."""
    return plain(weekday) in WORD_LIKE_WEEKDAYS and not weekday[:1].isupper()


def _looks_ahead(text: str, start: int, end: int) -> bool:
    """Whether "in 3 weeks" at ``start`` is a time to come ("we move in 3 weeks"), read from its sentence.

    The sentence must say something lies ahead (will, going to, move …) and nothing that looks
    back ("haven't seen her in 3 years", "the coldest winter in 20 years", "was", "did").
    """
    opening = max(text.rfind(mark, 0, start) for mark in (". ", "! ", "? ", "\n")) + 1
    closing = min(
        (found for mark in (". ", "! ", "? ", "\n") if (found := text.find(mark, end)) != -1), default=len(text)
    )
    sentence = text[opening:closing]
    return _AHEAD.search(sentence) is not None and _BEHIND.search(sentence) is None


_AHEAD = re.compile(
    r"(?:\b(?:will|shall|going to|gonna|is|are|am|plan(?:s|ning)? to|hop(?:e|ing) to|expect\w*|scheduled|due"
    r"|coming up|see you|can['\u2019]?t wait|need to|want to|have got|has got|move|moving|leave|leaves|leaving"
    r"|start|starts|starting|begin|begins|fly|flying|head(?:ing)? (?:to|out|off))\b|['\u2019](?:ll|m|re|ve got)\b)",
    re.IGNORECASE,
)
_BEHIND = re.compile(
    r"\b(?:never|ever|first time|(?:have|has|had|did|was|were)n['\u2019]?t|have not|has not|was|were|did|had"
    r"|lost|gained|took|finished|managed|happened|went|spent|best|worst|most|least|longest|biggest|coldest"
    r"|hottest|warmest|highest|lowest|greatest)\b",
    re.IGNORECASE,
)


def annotate(text: str, anchor: datetime | date | None) -> str:
    """``text`` followed by what its relative time phrases mean, e.g. ``… yesterday! [yesterday = 7 May 2023]``.

    The original text is kept verbatim; without an anchor or a phrase, it is returned unchanged.
    """
    if anchor is None:
        return text
    day = anchor.date() if isinstance(anchor, datetime) else anchor
    return _annotated_cached(text, day) if len(text) <= CACHED_TEXT_CHARS else _annotated(text, day)


def without_notes(text: str) -> str:
    """``text`` less the notes ``annotate`` added (" [yesterday = 7 May 2023]"): for text resolved in another zone."""
    return _NOTE.sub("", text)


_NOTE = re.compile(r" \[[^\[\]]*? = [^\[\]]*\]")

# Context assembly annotates the same turns for query after query: short texts are remembered.
CACHED_TEXT_CHARS = 2_000


@functools.lru_cache(maxsize=16_384)
def _annotated_cached(text: str, day: date) -> str:
    return _annotated(text, day)


def _annotated(text: str, day: date) -> str:
    expressions = resolve_time_expressions(text, day)
    if not expressions:
        return text
    notes = "; ".join(f"{expression.phrase} = {expression.meaning}" for expression in expressions)
    return f"{text} [{notes}]"


def _meaning(kind: str, match: re.Match[str], day: date) -> tuple[str, Days] | None:
    if kind == "fixed":
        return _fixed(plain(match.group(0)), day)
    if kind in ("last_weekday", "next_weekday"):
        target = WEEKDAY_FORMS[plain(match.group("weekday"))]
        if kind == "last_weekday":
            back = (day.weekday() - target) % 7 or 7
            return _weekday(day - timedelta(days=back))
        ahead = (target - day.weekday()) % 7 or 7
        return _weekday(day + timedelta(days=ahead))
    if kind == "last_month_name":
        month = MONTHS.index(plain(match.group("month"))) + 1
        return _month(date(day.year if month < day.month else day.year - 1, month, 1))
    if kind == "last_season":
        return _last_season(plain(match.group("season")), day)
    if kind == "few":
        # Vague, so restated against the anchor rather than given a date nobody said.
        unit = plain(match.group("unit") or "day")
        earliest, latest = FEW[unit]
        first, last = _shift(day, unit, -earliest), _shift(day, unit, -latest)
        if first is None or last is None:
            return None
        return f"a few {unit}s before {_day(day)}", (first, last)
    if kind == "day_of_month":
        # Only days already past this month: "on the 25th", said on the 17th, may be ahead
        # this month or behind in the last one.
        ordinal = int(match.group("ordinal"))
        return _one_day(day.replace(day=ordinal)) if 0 < ordinal <= day.day else None
    count = _count(match.group("count"))
    if count is None:
        return None
    unit = plain(match.group("unit"))
    sign = 1 if kind == "in" else -1
    moved = _shift(day, unit, sign * count)
    if moved is None:
        return None
    if unit == "day":
        meaning, days = _one_day(moved)
    elif unit == "week":
        meaning, days = f"the week of {_day(moved)}", (moved - timedelta(days=3), moved + timedelta(days=4))
    elif unit == "month":
        meaning, days = _month(moved)
    else:
        meaning, days = _year(moved.year)
    if kind != "since":
        return meaning, days
    about = "about " if match.groupdict().get("about") else ""
    return f"since {about}{meaning}", (days[0], day + timedelta(days=1))


# How many units back "a few" of them reaches: from the first to the second.
FEW = {"day": (6, 1), "week": (7, 1), "month": (6, 1), "year": (6, 1)}


def _fixed(phrase: str, day: date) -> tuple[str, Days]:
    monday = day - timedelta(days=day.weekday())

    def week_before() -> tuple[str, Days]:
        return f"the week before {_day(day)}", (monday - timedelta(days=7), day)

    def weekend_before() -> tuple[str, Days]:
        # The weekend before this week's Monday: said on a Sunday, not the one under way.
        saturday = monday - timedelta(days=2)
        return f"the weekend before {_day(day)}", (saturday, monday)

    def weekend_after() -> tuple[str, Days]:
        saturday = day + timedelta(days=(5 - day.weekday()) % 7 or 7)
        return f"the weekend after {_day(day)}", (saturday, saturday + timedelta(days=2))

    meanings: dict[str, Callable[[], tuple[str, Days]]] = {
        "the day before yesterday": lambda: _one_day(day - timedelta(days=2)),
        "yesterday": lambda: _one_day(day - timedelta(days=1)),
        "last night": lambda: _one_day(day - timedelta(days=1)),
        "tonight": lambda: _one_day(day),
        "tomorrow": lambda: _one_day(day + timedelta(days=1)),
        "the day after tomorrow": lambda: _one_day(day + timedelta(days=2)),
        "last week": week_before,
        "this past week": week_before,
        "next week": lambda: (f"the week after {_day(day)}", (day + timedelta(days=1), monday + timedelta(days=14))),
        "this week": lambda: (f"the week of {_day(day)}", (monday, monday + timedelta(days=7))),
        "this weekend": lambda: (
            f"the weekend of {_day(day)}",
            (monday + timedelta(days=5), monday + timedelta(days=7)),
        ),
        "last weekend": weekend_before,
        "this past weekend": weekend_before,
        "next weekend": weekend_after,
        "last month": lambda: _month(_shift(day, "month", -1) or day),
        "this month": lambda: _month(day),
        "next month": lambda: _month(_shift(day, "month", 1) or day),
        "last year": lambda: _year(day.year - 1),
        "this year": lambda: _year(day.year),
        "next year": lambda: _year(day.year + 1),
    }
    return meanings[phrase]()


def _last_season(season: str, day: date) -> tuple[str, Days]:
    """The latest ``season`` that ended before ``day``'s own season began, named by its first month's year."""
    months = SEASONS[season]
    current = next(name for name, covered in SEASONS.items() if day.month in covered)
    # Walk back month by month; skip the season we are in now ("last summer", said in July, is a year ago).
    year, month = day.year, day.month
    inside_current = True
    for _ in range(24):
        month -= 1
        if month == 0:
            year, month = year - 1, 12
        if inside_current and month in SEASONS[current]:
            continue
        inside_current = False
        if month in months:
            # Walking back, the first month found is the season's last.
            after_last = _month(date(year, month, 1))[1][1]
            first = _shift(date(year, month, 1), "month", -2) or date(year, month, 1)
            if season == "winter":
                start = year - 1 if month in (1, 2) else year
                return f"winter {start}-{start + 1}", (first, after_last)
            return f"{season} {year}", (first, after_last)
    raise AssertionError("unreachable: every season recurs within 24 months")


def _count(text: str) -> int | None:
    lowered = plain(text)
    count = int(lowered) if lowered.isdigit() else NUMBER_WORDS.get(lowered)
    return count if count is not None and 0 < count <= MAX_COUNT else None


def _shift(day: date, unit: str, amount: int) -> date | None:
    """``day`` moved by ``amount`` units; ``None`` when that leaves the calendar."""
    try:
        if unit == "day":
            return day + timedelta(days=amount)
        if unit == "week":
            return day + timedelta(weeks=amount)
        if unit == "month":
            months = day.year * 12 + day.month - 1 + amount
            year, month = divmod(months, 12)
            return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))
        return date(day.year + amount, day.month, min(day.day, 28 if day.month == 2 else day.day))
    except (OverflowError, ValueError):
        return None


def _day(moment: date) -> str:
    return f"{moment.day} {moment:%B %Y}"


def _one_day(moment: date) -> tuple[str, Days]:
    return _day(moment), (moment, moment + timedelta(days=1))


def _weekday(moment: date) -> tuple[str, Days]:
    return f"{moment:%A}, {_day(moment)}", (moment, moment + timedelta(days=1))


def _month(moment: date) -> tuple[str, Days]:
    first = moment.replace(day=1)
    after_last = date(first.year + 1, 1, 1) if first.month == 12 else first.replace(month=first.month + 1)
    return f"{first:%B %Y}", (first, after_last)


def _year(year: int) -> tuple[str, Days]:
    return str(year), (date(year, 1, 1), date(year + 1, 1, 1))
