"""Which exchange of a session's working set a new turn joins, placed by when it was said.

Shared by the stores that keep the working set in their own tables (SQLite, PostgreSQL);
the Redis working set does the same in ``track.lua``.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Iterable
from datetime import datetime
from typing import Generic, TypeVar

Said = TypeVar("Said", str, datetime)


class ExchangeOpenings(Generic[Said]):
    """A session's exchanges by when each opened (its earliest turn), to place a batch of turns in one pass.

    Loaded once per batch: placing a turn never moves an opening (a reply joins only an
    exchange opened at or before it), so each turn costs a binary search, not a scan.
    """

    def __init__(self, openings: Iterable[tuple[Said, int]]) -> None:
        self._order: list[tuple[Said, int]] = sorted(openings)
        self._latest: int | None = max((number for _, number in self._order), default=None)
        self._opened_last: tuple[Said, int] | None = None  # what the last ``place`` opened, if anything

    def place(self, said: Said, *, starts: bool) -> int:
        """The exchange a turn said at ``said`` belongs to.

        A user message (``starts``) opens a new exchange. A reply joins the exchange opened
        last at or before ``said`` (the latest added among equals), or opens its own when
        none was: its question, back-filled earlier, has left the set already.
        """
        self._opened_last = None
        if not starts:
            index = bisect_right(self._order, said, key=_opened)
            if index:
                return self._order[index - 1][1]
        number = 0 if self._latest is None else self._latest + 1
        self._latest = number
        self._opened_last = (said, number)
        insort(self._order, self._opened_last)
        return number

    def withdraw(self) -> None:
        """Take back what the last ``place`` opened, when its turn was not stored after all (already tracked)."""
        if self._opened_last is not None:
            self._order.remove(self._opened_last)
            self._latest = max((number for _, number in self._order), default=None)
            self._opened_last = None


def _opened(item: tuple[Said, int]) -> Said:
    return item[0]
