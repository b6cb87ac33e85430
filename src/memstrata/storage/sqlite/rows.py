"""Turn rows of the SQLite store: the column list, conversion both ways, parameter chunks."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar

from memstrata.models import Role, Turn, format_time

T = TypeVar("T")
TURN_COLUMNS = "seq, id, user_id, agent_id, session_id, role, name, content, created_at, metadata, importance"
CHUNK = 500  # stay far below SQLite's limit on bound parameters


def turn_row(turn: Turn) -> tuple[Any, ...]:
    """The values of ``turn`` for an INSERT, in ``TURN_COLUMNS`` order after ``seq``."""
    return (
        turn.id,
        turn.user_id,
        turn.agent_id,
        turn.session_id,
        turn.role.value,
        turn.name,
        turn.content,
        format_time(turn.created_at),
        json.dumps(dict(turn.metadata), ensure_ascii=False, sort_keys=True),
        turn.importance,
    )


def turn_from_row(row: Sequence[Any]) -> Turn:
    """The turn a row selected with ``TURN_COLUMNS`` holds."""
    return Turn(
        id=row[1],
        user_id=row[2],
        agent_id=row[3],
        session_id=row[4],
        role=Role(row[5]),
        name=row[6],
        content=row[7],
        created_at=datetime.fromisoformat(row[8]),
        metadata=json.loads(row[9]),
        importance=row[10],
    )


def chunks(items: list[T]) -> Iterator[list[T]]:
    """``items`` in slices of at most ``CHUNK``."""
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]
