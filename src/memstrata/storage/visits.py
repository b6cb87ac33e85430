"""How a visit job's searches warm the segments they touched: one rule for every backend."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from memstrata.models import Segment

#: Records one segment's counted visits; ``%s`` placeholders (SQLite writes ``?``).
RECORD_VISITS = "UPDATE segments SET visits = %s, heat = %s, last_activity = %s WHERE id = %s"


def visited(
    found: Mapping[str, Segment],
    holding: Mapping[int, Iterable[str]],
    searches: Sequence[Sequence[int]],
    now: datetime,
    heat: Callable[[int, int], float],
) -> list[Segment]:
    """The segments of ``found`` that ``searches`` touched, with their visits counted.

    Each search is one visit to every segment holding any of its turns (``holding`` maps a
    turn's seq to those segments). A visited segment was active ``now``, and its heat is
    ``heat(visits, turn_count)``.
    """
    visits: Counter[str] = Counter()
    for search in searches:
        visits.update({segment for seq in search for segment in holding.get(seq, ())})
    return [
        replace(
            found[key],
            visits=found[key].visits + count,
            heat=heat(found[key].visits + count, found[key].turn_count),
            last_activity=now,
        )
        for key, count in visits.items()
    ]
