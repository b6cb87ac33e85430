"""Calendar periods a query names: days, months, seasons and years, and how near a date is to them."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.retrieval.periods import (
    NEAR_WEIGHT,
    Period,
    Span,
    covering_window,
    mentioned_periods,
    names_a_year,
    nearness,
)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Nate make on 9 November, 2022?", (Period(2022, (11,), 9),)),
        ("What did Nate make on 9th of Nov 2022?", (Period(2022, (11,), 9),)),
        ("What painting did Melanie show on October 13, 2023?", (Period(2023, (10,), 13),)),
        ("Where was the picture shared on December 1,2023 taken?", (Period(2023, (12,), 1),)),
        (
            "What did Dave open in May 2023?",
            (
                Period(
                    2023,
                    (5,),
                ),
            ),
        ),
        (
            "Which country did James visit in Sept, 2022?",
            (
                Period(
                    2022,
                    (9,),
                ),
            ),
        ),
        (
            "When did Melanie go camping in June?",
            (
                Period(
                    None,
                    (6,),
                ),
            ),
        ),
        ("Where was Jolene during summer of 2022?", (Period(2022, (6, 7, 8)),)),
        ("How often did she swim in 2023?", (Period(2023),)),
        ("What were her plans for mid-2022?", (Period(2022),)),
        ("What did she buy in November of 2022?", (Period(2022, (11,)),)),  # not all of 2022 as well
        ("What did she buy on the 9th of November of 2022?", (Period(2022, (11,), 9),)),
        ("What did she do in 2022 and in March 2023?", (Period(2022), Period(2023, (3,)))),
        # A day without a year takes the one year named elsewhere.
        ("Where was John between August 11 and August 15 2023?", (Period(2023, (8,), 11), Period(2023, (8,), 15))),
    ],
)
def test_dates_in_a_query_are_read_as_periods(query: str, expected: tuple[Period, ...]) -> None:
    assert mentioned_periods(query) == expected


@pytest.mark.parametrize(
    "query",
    [
        "What may I bring?",  # the verb, not the month
        "When did James try the Cyberpunk 2077 game?",  # a number, not a year
        "How many tournaments had Nate won by July 10, 2022?",  # a boundary, not a period
        "What did she do before 2021?",
        "What happened on 30 February 2023?",  # no such day
        "Did Jan call?",  # a name; short months only count next to a day or a year
        "What did she do last week?",  # relative: depends on when the question is asked
        "What did I buy last week with most of 2000 euros?",  # an amount, not a year
        "Did she finish the essay in 1500 words?",
        "How did the run of 2000 m go?",
        "What was the growth of 2000%?",
    ],
)
def test_words_that_only_look_like_dates_name_no_period(query: str) -> None:
    assert mentioned_periods(query) == ()


def test_a_named_day_counts_fully_and_the_days_around_it_half() -> None:
    day = Period(2022, (11,), 9)
    assert day.nearness(date(2022, 11, 9)) == 1.0
    assert day.nearness(date(2022, 11, 12)) == NEAR_WEIGHT == day.nearness(date(2022, 11, 6))
    assert day.nearness(date(2022, 11, 13)) == 0.0 and day.nearness(date(2023, 11, 9)) == 0.0
    assert Period(None, (11,), 9).nearness(date(2031, 11, 9)) == 1.0  # no year: any year's
    assert Period(None, (2,), 29).nearness(date(2023, 3, 1)) == 0.0  # no 29 February that year


def test_months_seasons_and_years_contain_their_days() -> None:
    assert Period(2023, (5,)).nearness(date(2023, 5, 31)) == 1.0
    assert Period(2023, (5,)).nearness(date(2023, 6, 1)) == 0.0
    assert Period(None, (6,)).nearness(date(2019, 6, 2)) == 1.0
    assert Period(2022, (6, 7, 8)).nearness(date(2022, 7, 4)) == 1.0
    assert Period(2022).nearness(date(2022, 12, 31)) == 1.0 and Period(2022).nearness(date(2023, 1, 1)) == 0.0
    periods = mentioned_periods("in May 2023 or on 2 June 2023")
    assert nearness(periods, datetime(2023, 6, 3, 23, tzinfo=UTC)) == NEAR_WEIGHT
    assert nearness(periods, datetime(2023, 5, 3, tzinfo=UTC)) == 1.0
    assert nearness((), date(2023, 5, 3)) == 0.0 and nearness(periods, None) == 0.0


def test_the_covering_window_spans_every_period_and_needs_their_years() -> None:
    window = covering_window(mentioned_periods("between August 11 and August 15 2023"))
    assert window == (datetime(2023, 8, 8, tzinfo=UTC), datetime(2023, 8, 19, tzinfo=UTC))
    assert covering_window(mentioned_periods("in December 2022")) == (
        datetime(2022, 12, 1, tzinfo=UTC),
        datetime(2023, 1, 1, tzinfo=UTC),
    )
    assert covering_window(mentioned_periods("camping in June")) is None
    assert covering_window(()) is None


def test_the_covering_window_runs_from_midnight_to_midnight_in_the_given_zone() -> None:
    # The days around 9 August 2022 (6 to 12 August), in Los Angeles: UTC-7 in summer.
    window = covering_window(mentioned_periods("on 9 August 2022"), ZoneInfo("America/Los_Angeles"))
    assert window == (datetime(2022, 8, 6, 7, tzinfo=UTC), datetime(2022, 8, 13, 7, tzinfo=UTC))
    assert window[0].tzinfo is UTC


@given(st.dates(min_value=date(1900, 1, 1), max_value=date(2099, 12, 31)), st.booleans())
def test_any_written_day_is_read_back_as_itself(day: date, day_first: bool) -> None:
    month = calendar.month_name[day.month]
    written = f"on {day.day} {month}, {day.year}" if day_first else f"on {month} {day.day}, {day.year}"
    periods = mentioned_periods(f"What happened {written}?")
    assert periods == (Period(day.year, (day.month,), day.day),)
    assert nearness(periods, day) == 1.0
    window = covering_window(periods)
    assert window is not None and window[0].date() < day < window[1].date()


def test_a_borrowed_year_never_makes_a_day_that_does_not_exist() -> None:
    periods = mentioned_periods("What happened on 29 February in 2023?")
    assert periods == (Period(None, (2,), 29), Period(2023))
    assert covering_window(periods) == covering_window((Period(2023),))  # the dated one's window; and no error
    assert mentioned_periods("on 29 February in 2024")[0] == Period(2024, (2,), 29)


def test_a_text_naming_many_periods_names_none_and_long_texts_are_read_once() -> None:
    assert mentioned_periods(" ".join(f"in {year}" for year in range(2000, 2013))) == ()
    assert mentioned_periods("in 2023 " * 50) == (Period(2023),)  # one period, however often
    # Each character is matched at most once per pattern: a megabyte of dates is no worse than a megabyte of text.
    assert mentioned_periods("9 " * 200_000 + "on 9 November 2022") == (Period(2022, (11,), 9),)


def test_a_span_counts_its_days_fully_and_the_days_since_at_half_weight() -> None:
    last_week = Span(date(2023, 5, 1), date(2023, 5, 8), until=date(2023, 5, 11))
    assert [last_week.nearness(date(2023, 5, day)) for day in (1, 7, 8, 10, 11)] == [
        1.0,
        1.0,
        NEAR_WEIGHT,
        NEAR_WEIGHT,
        0.0,
    ]
    assert last_week.nearness(date(2023, 4, 30)) == 0.0
    assert covering_window([last_week]) == (datetime(2023, 5, 1, tzinfo=UTC), datetime(2023, 5, 11, tzinfo=UTC))
    # A span reaching past the question's day ("this week") keeps its own end.
    this_week = Span(date(2023, 5, 8), date(2023, 5, 15), until=date(2023, 5, 11))
    assert this_week.bounds() == (date(2023, 5, 8), date(2023, 5, 15))
    assert nearness([this_week, Period(2023, (5,), 1)], date(2023, 5, 1)) == 1.0


def test_a_date_with_its_year_is_named_as_a_period_or_a_boundary() -> None:
    assert names_a_year("What did I do on 10 April 2023?")
    assert names_a_year("What did I do before 10 April 2023?")
    assert names_a_year("What changed since 2020?")
    assert not names_a_year("What did I do in June, or on 4 July?")
    assert not names_a_year("What did I do last weekend?")
    assert not names_a_year("What did I spend last week, out of 2000 dollars?")
    assert not names_a_year("Was it seen by 2000 followers?")
    assert not names_a_year("Did it grow by 2000 % last year?")
    # A year followed by a noun that also starts a clause stays a year.
    assert names_a_year("What happened in 2020 people still talk about?")
    assert mentioned_periods("What did I do in 2022, mostly?") == (Period(2022),)


def test_letters_that_only_fold_to_ascii_still_name_their_month() -> None:
    assert mentioned_periods("What happened on 9 Auguſt 2022?") == (Period(2022, (8,), 9),)
    assert mentioned_periods("in Aprİl 2023") == (Period(2023, (4,)),)


def test_a_relative_date_beside_a_yearless_month_still_has_its_window() -> None:
    asked = (Span(date(2024, 6, 14), date(2024, 6, 15), date(2024, 6, 16)), Period(None, (6,)))
    assert covering_window(asked) == covering_window(asked[:1]) is not None


def test_a_day_named_without_a_year_is_near_across_new_year() -> None:
    assert Period(None, (12,), 31).nearness(date(2024, 1, 1)) == NEAR_WEIGHT
    assert Period(None, (1,), 1).nearness(date(2023, 12, 31)) == NEAR_WEIGHT
    assert Period(None, (1,), 1).nearness(date(2023, 6, 1)) == 0.0


def test_a_winter_across_two_years_reads_as_the_notes_write_it() -> None:
    periods = mentioned_periods("What did we do in winter 2022-2023?")  # as "[last winter = winter 2022-2023]"
    assert periods == mentioned_periods("in winter 2022-23") == (Period(2022, (12,)), Period(2023, (1, 2)))
    assert nearness(periods, date(2023, 1, 15)) == 1.0 and nearness(periods, date(2022, 1, 15)) == 0.0
    assert covering_window(periods) == (datetime(2022, 12, 1, tzinfo=UTC), datetime(2023, 3, 1, tzinfo=UTC))
    assert mentioned_periods("winter 2022-2025") == ()  # not one winter
