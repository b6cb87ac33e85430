"""Turn rows of the SQLite store as written, parameter chunks, and its SQL dialect."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any, TypeVar

from memstrata.models import Turn, format_time
from memstrata.storage.dialect import CHUNK, Dialect, in_chunks
from memstrata.storage.sql_turns import TURN_COLUMNS

T = TypeVar("T")
__all__ = ["CHUNK", "SQLITE", "TURN_COLUMNS", "chunks", "turn_row"]


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


def chunks(items: list[T]) -> Iterator[list[T]]:
    """``items`` in slices of at most ``CHUNK``."""
    return in_chunks(items)


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _json_array(subquery: str, column: str) -> str:
    return f"(SELECT json_group_array({column}) FROM ({subquery}))"


def _read_json_array(value: Any) -> list[Any]:
    return list(json.loads(value))


#: How SQLite spells the statements both stores share: times as fixed-width UTC text, JSON as
#: text, booleans as 0 and 1, arrays as JSON text; one writer at a time holds the whole file.
SQLITE = Dialect(
    question_marks=True,
    true="1",
    false="0",
    greatest="max",
    code_point="",
    ordinal="rowid",
    text_cast="",
    jsonb_cast="",
    same="IS",
    insert_or_ignore="INSERT OR IGNORE",
    do_nothing="",
    lower="memstrata_lower",
    no_limit=-1,
    locks_rows=False,
    chunk=CHUNK,
    time=format_time,
    read_time=datetime.fromisoformat,
    json=_json_text,
    read_json=json.loads,
    array=_json_array,
    read_array=_read_json_array,
)
