"""Relative time phrases resolved against the date a turn was said."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.extraction.time_expressions import (
    annotate,
    may_mention_relative_time,
    resolve_time_expressions,
    without_notes,
)

MONDAY = date(2023, 5, 8)


def meanings(text: str, anchor: date = MONDAY) -> dict[str, str]:
    return {found.phrase.lower(): found.meaning for found in resolve_time_expressions(text, anchor)}


@pytest.mark.parametrize(
    ("phrase", "meaning"),
    [
        ("yesterday", "7 May 2023"),
        ("last night", "7 May 2023"),
        ("the day before yesterday", "6 May 2023"),
        ("tomorrow", "9 May 2023"),
        ("tonight", "8 May 2023"),
        ("last week", "the week before 8 May 2023"),
        ("next week", "the week after 8 May 2023"),
        ("last weekend", "the weekend before 8 May 2023"),
        ("last month", "April 2023"),
        ("this month", "May 2023"),
        ("next month", "June 2023"),
        ("last year", "2022"),
        ("next year", "2024"),
        ("last saturday", "Saturday, 6 May 2023"),
        ("last monday", "Monday, 1 May 2023"),
        ("last tues", "Tuesday, 2 May 2023"),
        ("next monday", "Monday, 15 May 2023"),
        ("next fri", "Friday, 12 May 2023"),
        ("this week", "the week of 8 May 2023"),
        ("this weekend", "the weekend of 8 May 2023"),
        ("last summer", "summer 2022"),
        ("last spring", "spring 2022"),
        ("last winter", "winter 2022-2023"),
        ("seven years now", "since 2016"),
        ("last august", "August 2022"),
        ("last february", "February 2023"),
        ("3 days ago", "5 May 2023"),
        ("two weeks ago", "the week of 24 April 2023"),
        ("a month ago", "April 2023"),
        ("3 years ago", "2020"),
        ("a couple of years ago", "2021"),
        ("for 3 years now", "since 2020"),
        ("the day after tomorrow", "10 May 2023"),
        ("for about 3 years now", "since about 2020"),
        ("a few days ago", "a few days before 8 May 2023"),
        ("few weeks back", "a few weeks before 8 May 2023"),
        ("the other day", "a few days before 8 May 2023"),
        ("on the 5th", "5 May 2023"),
        ("on the 8th", "8 May 2023"),
    ],
)
def test_each_phrase_means_a_date_relative_to_the_anchor(phrase: str, meaning: str) -> None:
    assert meanings(f"Well, {phrase}, it happened.") == {phrase: meaning}


def test_month_arithmetic_stays_in_the_calendar() -> None:
    assert meanings("next month", date(2023, 1, 31)) == {"next month": "February 2023"}
    assert meanings("last month", date(2024, 1, 15)) == {"last month": "December 2023"}
    assert meanings("last year", date(2024, 2, 29)) == {"last year": "2023"}
    assert meanings("a year ago", date(2024, 2, 29)) == {"a year ago": "2023"}


def test_last_season_skips_the_season_we_are_in() -> None:
    assert meanings("last summer", date(2023, 7, 20)) == {"last summer": "summer 2022"}
    assert meanings("last summer", date(2023, 9, 1)) == {"last summer": "summer 2023"}
    assert meanings("last winter", date(2023, 1, 10)) == {"last winter": "winter 2021-2022"}
    assert meanings("last fall", date(2023, 12, 20)) == {"last fall": "fall 2023"}


def test_longer_phrases_win_and_words_inside_other_words_do_not_match() -> None:
    assert meanings("last weekend") == {"last weekend": "the weekend before 8 May 2023"}
    assert meanings("a week-long camp, yesterdays, mid-last year") == {}
    assert meanings("the day after tomorrow") == {"the day after tomorrow": "10 May 2023"}
    assert meanings("300 years ago") == {}


def test_a_duration_up_to_now_says_since_when() -> None:
    assert meanings("We've been together for three years.") == {"we've been together for three years": "since 2020"}
    assert meanings("I’ve been playing for about four months") == {
        "i’ve been playing for about four months": "since about January 2023"
    }
    assert meanings("My sister-in-law's been here for 2 weeks.") == {
        "sister-in-law's been here for 2 weeks": "since the week of 24 April 2023"
    }
    assert meanings("She has really been there for 2 years and loves it") == {
        "has really been there for 2 years": "since 2021"
    }
    # A verb that lasts, in the present perfect, counts up to now as "been" does.
    assert meanings("I've had them for 3 years! Their names are Pepper and Panda.") == {
        "i've had them for 3 years": "since 2020"
    }
    assert meanings("I've known these friends for 4 years, since I moved") == {
        "i've known these friends for 4 years": "since 2019"
    }
    assert meanings("She has worked at the clinic for 2 months.") == {
        "has worked at the clinic for 2 months": "since March 2023"
    }
    # A verb of one act says how long something will last; "'s" may be "is"; a negation counts nothing up.
    assert meanings("We've booked the cabin for 2 weeks.") == {}
    assert meanings("It's kept in the fridge for 3 days.") == {}
    assert meanings("I haven't played for 3 years.") == {}
    assert meanings("I've not played guitar for 2 years.") == {}
    assert meanings("I have never been there for 5 years.") == {}
    # What would have been, and what is asked, is not said.
    assert meanings("I would have stayed for 2 weeks.") == {}
    assert meanings("I'd have been there for 3 days.") == {}
    assert meanings("Have you lived here for 3 years?") == {}
    assert meanings("Have you been together for 3 years ?") == {}
    # Counting up to another moment, or not a count at all, names no start.
    assert meanings("I had been working there for 3 years") == {}
    assert meanings("I'd been working there for 3 years.") == {}
    assert meanings("I had had it for 3 years.") == {}
    assert meanings("I've been waiting for a day like this") == {}
    assert meanings("We've been doing it for a few years") == {}
    assert meanings("It's been 3 years since, for 3 days later") == {}


def test_a_day_of_the_month_is_read_only_when_it_has_passed_and_stands_alone() -> None:
    assert meanings("My album dropped on the 11th and it was wild.", date(2023, 9, 13)) == {
        "on the 11th": "11 September 2023"
    }
    assert meanings("The show is on the 25th.", date(2023, 9, 13)) == {}  # ahead, or last month's?
    assert meanings("We live on the 5th floor, on the 2nd of June, in the 4th quarter.", date(2023, 9, 13)) == {}


def test_phrases_are_reported_in_text_order_and_once() -> None:
    found = resolve_time_expressions("Last year, then yesterday, and yesterday again.", MONDAY)
    assert [(f.phrase, f.meaning) for f in found] == [("Last year", "2022"), ("yesterday", "7 May 2023")]


def test_annotate_appends_meanings_and_keeps_the_words_verbatim() -> None:
    said = "We went hiking yesterday! Best trip since last year."
    assert annotate(said, datetime(2023, 5, 8, 13, 56, tzinfo=UTC)) == (
        f"{said} [yesterday = 7 May 2023; last year = 2022]"
    )
    assert annotate("Nothing relative here.", MONDAY) == "Nothing relative here."
    assert annotate("yesterday", None) == "yesterday"


@given(st.text(max_size=200), st.dates())
def test_annotate_never_fails_and_always_keeps_the_text(text: str, anchor: date) -> None:
    assert annotate(text, anchor).startswith(text)


@pytest.mark.parametrize(
    ("phrase", "first", "end"),
    [
        ("yesterday", date(2023, 5, 7), date(2023, 5, 8)),
        ("last week", date(2023, 5, 1), MONDAY),  # the calendar week before, up to today
        ("last weekend", date(2023, 5, 6), MONDAY),
        ("this weekend", date(2023, 5, 13), date(2023, 5, 15)),
        ("last month", date(2023, 4, 1), date(2023, 5, 1)),
        ("last winter", date(2022, 12, 1), date(2023, 3, 1)),
        ("last year", date(2022, 1, 1), date(2023, 1, 1)),
        ("two weeks ago", date(2023, 4, 21), date(2023, 4, 28)),
        ("for 3 years now", date(2020, 1, 1), date(2023, 5, 9)),
        ("a few days ago", date(2023, 5, 2), date(2023, 5, 7)),
        ("next fri", date(2023, 5, 12), date(2023, 5, 13)),
    ],
)
def test_each_meaning_covers_its_days(phrase: str, first: date, end: date) -> None:
    [found] = resolve_time_expressions(f"Well, {phrase}, it happened.", MONDAY)
    assert found.days == (first, end)


def test_the_last_week_of_a_month_is_not_the_week_before_today() -> None:
    assert meanings("during the last week of August, and the last month of the year") == {}


def test_last_weekend_said_on_a_sunday_is_the_one_before() -> None:
    sunday = date(2023, 5, 14)
    [found] = resolve_time_expressions("What a last weekend!", sunday)
    assert found.days == (date(2023, 5, 6), date(2023, 5, 8))


def test_the_last_one_of_something_is_not_relative() -> None:
    said = "the last Friday of August, the last summer of our twenties, next Monday of the month, last June of school"
    assert meanings(said, date(2023, 9, 13)) == {}


def test_letters_that_only_fold_to_ascii_are_read_and_never_raise() -> None:
    found = resolve_time_expressions("laſt week, yeſterday and thİs year, laſt Tueſday", MONDAY)
    assert [f.meaning for f in found] == ["the week before 8 May 2023", "7 May 2023", "2023", "Tuesday, 2 May 2023"]


def test_a_long_text_is_read_once_and_each_phrase_reported_once() -> None:
    found = resolve_time_expressions("yesterday " * 20_000, MONDAY)  # 200 KB: overlap checks stay linear
    assert [(f.phrase, f.meaning) for f in found] == [("yesterday", "7 May 2023")]


_PHRASES = ["last week", "yesterday", "last tuesday", "last spring", "this past weekend", "3 days ago", "last august"]
# Letters IGNORECASE matches to ASCII ones that str.lower() does not map back.
_LOOKALIKES = {"s": "ſ", "i": "İ", "k": "\u212a"}


@given(st.sampled_from(_PHRASES), st.lists(st.booleans(), min_size=20, max_size=20), st.dates())
def test_lookalike_letters_never_break_the_reader(phrase: str, swaps: list[bool], anchor: date) -> None:
    odd = "".join(_LOOKALIKES.get(ch, ch) if swaps[index % 20] else ch for index, ch in enumerate(phrase))
    found = resolve_time_expressions(f"What did I do {odd}?", anchor)
    assert all(expression.days[0] < expression.days[1] for expression in found)
    assert annotate(odd, anchor).startswith(odd)


@pytest.mark.parametrize("text", ["see you next month", "YESTERDAY was fun", "two weeks ago", "last Tues"])
def test_the_quick_check_sees_every_phrase_the_resolver_reads(text: str) -> None:
    assert may_mention_relative_time(text)
    assert resolve_time_expressions(text, MONDAY)


def test_the_quick_check_passes_over_text_without_time_words() -> None:
    assert not may_mention_relative_time("I love pottery and hiking in the hills.")


def test_notes_come_off_as_they_went_on() -> None:
    said = "I walked the dog yesterday. We go next week."
    assert without_notes(annotate(said, date(2023, 5, 8))) == said
    assert without_notes("a [b] c [x = y; z = w] d") == "a [b] c d"  # brackets without " = " stay


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("I'm moving in two weeks.", {"in two weeks": "the week of 22 May 2023"}),
        ("The wedding is in a month!", {"in a month": "June 2023"}),
        ("We will fly out in 3 days. It was hard.", {"in 3 days": "11 May 2023"}),
        ("Going to Paris in 2 weeks", {"in 2 weeks": "the week of 22 May 2023"}),
        ("We move in 3 weeks.", {"in 3 weeks": "the week of 29 May 2023"}),
        ("In 2 days I fly to Rome.", {"in 2 days": "10 May 2023"}),
        # A stretch or a gap, not a time ahead: no date stands for it.
        ("I haven't seen my sister in 3 years.", {}),
        ("First time in 10 years I went skiing!", {}),
        ("I lost 10 pounds in a month.", {}),
        ("It was done in two weeks, and it is great.", {}),
        ("I painted this whole wall in 2 days.", {}),
        ("It's the coldest winter in 20 years.", {}),
        ("I haven\u2019t seen my sister in 3 years.", {}),
        ("I got tickets, the concert is in 3 weeks!", {"in 3 weeks": "the week of 29 May 2023"}),
        ("Our flight leaves in 2 days.", {"in 2 days": "10 May 2023"}),
    ],
)
def test_in_so_many_days_is_dated_only_when_its_sentence_looks_ahead(text: str, found: dict[str, str]) -> None:
    assert meanings(text) == found


def test_short_weekdays_that_are_also_words_are_days_only_when_capitalised() -> None:
    assert meanings("When we last sat down together, she cried.") == {}
    assert meanings("They last wed in June, then next sun they left.") == {}
    assert meanings("See you next Sat!") == {"next sat": "Saturday, 13 May 2023"}
    assert meanings("last Wed was long") == {"last wed": "Wednesday, 3 May 2023"}
