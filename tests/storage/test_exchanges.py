"""Placing turns in exchanges by when they were said: one pass with binary search, as a scan would."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memstrata.storage.exchanges import ExchangeOpenings


def placed_by_scan(openings: dict[int, int], said: int, starts: bool) -> int:
    """The rule written plainly: a reply joins the exchange opened last at or before it, the latest among equals."""
    if not starts:
        before = [(opened, number) for number, opened in openings.items() if opened <= said]
        if before:
            return max(before)[1]
    number = max(openings, default=-1) + 1
    openings[number] = said
    return number


def test_a_reply_joins_the_exchange_opened_last_before_it_and_a_user_message_opens_one() -> None:
    openings = ExchangeOpenings([(10, 0), (30, 1)])
    assert openings.place(35, starts=False) == 1
    assert openings.place(20, starts=False) == 0  # back-filled: answers the exchange opened at 10
    assert openings.place(5, starts=False) == 2  # said before every exchange: opens its own
    assert openings.place(1, starts=True) == 3
    assert openings.place(5, starts=False) == 2  # opened at 5, later than 3 (opened at 1, added after it)


@given(
    st.dictionaries(st.integers(0, 20), st.integers(-5, 5), max_size=6),
    st.lists(st.tuples(st.integers(-6, 6), st.booleans()), max_size=30),
)
def test_placing_in_one_pass_agrees_with_a_scan(initial: dict[int, int], turns: list[tuple[int, bool]]) -> None:
    openings = ExchangeOpenings([(opened, number) for number, opened in initial.items()])
    scanned = dict(initial)
    for said, starts in turns:
        assert openings.place(said, starts=starts) == placed_by_scan(scanned, said, starts)


def test_withdrawing_takes_back_only_an_exchange_the_last_place_opened() -> None:
    openings = ExchangeOpenings([(10, 0)])
    assert openings.place(20, starts=True) == 1
    openings.withdraw()  # that turn was tracked already: exchange 1 was never stored
    assert openings.place(25, starts=False) == 0 and openings.place(30, starts=True) == 1
    assert openings.place(30, starts=False) == 1  # joined, opened nothing
    openings.withdraw()
    assert openings.place(31, starts=False) == 1
