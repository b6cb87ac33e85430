"""Conversions between memstrata's values and PostgreSQL rows, including pgvector's ``vector`` type."""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo
from psycopg.types.json import Jsonb

from memstrata.models import Turn
from memstrata.storage.base import Vectors
from memstrata.storage.dialect import Dialect

Connection = psycopg.Connection[Any]
_HEADER = struct.Struct(">HH")


class PgVector:
    """A float32 vector to be sent as pgvector's ``vector`` (wrapped so no other ndarray is mistaken for one)."""

    __slots__ = ("values",)

    def __init__(self, values: Vectors) -> None:
        self.values = values


class _VectorBinaryDumper(Dumper):
    """pgvector's binary wire format: dimension and a reserved word (uint16 each), then big-endian float32s."""

    format = Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        array = np.ascontiguousarray(obj.values, dtype=">f4").reshape(-1)
        return _HEADER.pack(len(array), 0) + array.tobytes()


class _VectorBinaryLoader(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> Vectors:
        loaded: Vectors = np.frombuffer(bytes(data), dtype=">f4", offset=_HEADER.size).astype(np.float32)
        return loaded


class _VectorTextLoader(Loader):
    def load(self, data: Buffer) -> Vectors:
        text = bytes(data).decode("ascii").strip("[]")
        return np.array(text.split(",") if text else [], dtype=np.float32)


def configure_connection(connection: Connection) -> None:
    """Per-connection setup: UTC timestamps and the adapters of pgvector's type."""
    connection.execute("SET TIME ZONE 'UTC'")
    info = TypeInfo.fetch(connection, "vector")
    if info is None:  # the schema is migrated before any pooled connection opens, so this is a broken setup
        raise psycopg.ProgrammingError("the type 'vector' is missing; is the pgvector extension installed?")
    dumper = type("VectorBinaryDumper", (_VectorBinaryDumper,), {"oid": info.oid})
    connection.adapters.register_dumper(PgVector, dumper)
    connection.adapters.register_loader(info.oid, _VectorBinaryLoader)
    connection.adapters.register_loader(info.oid, _VectorTextLoader)


def utc(value: datetime) -> datetime:
    """A loaded timestamp as an aware UTC datetime, whatever the session's time zone."""
    return value.astimezone(UTC)


def optional_utc(value: datetime | None) -> datetime | None:
    """``utc`` that lets ``None`` through."""
    return None if value is None else utc(value)


def _as_is(value: Any) -> Any:
    return value


def _array(subquery: str, column: str) -> str:
    return f"ARRAY({subquery})"


#: How PostgreSQL spells the statements both stores share: native times, JSON (jsonb), booleans
#: and arrays; text sorted by code point whatever the database's collation; row locks.
POSTGRES = Dialect(
    question_marks=False,
    true="true",
    false="false",
    greatest="GREATEST",
    code_point=' COLLATE "C"',
    ordinal="ordinal",
    text_cast="::text",
    jsonb_cast="::jsonb",
    same="IS NOT DISTINCT FROM",
    insert_or_ignore="INSERT",
    do_nothing=" ON CONFLICT DO NOTHING",
    lower="lower",
    no_limit=None,
    locks_rows=True,
    chunk=None,
    time=_as_is,
    read_time=utc,
    json=Jsonb,
    read_json=_as_is,
    array=_array,
    read_array=list,
)


def turn_row(turn: Turn) -> tuple[Any, ...]:
    """The column values of a turn, in ``TURN_COLUMNS`` order without ``seq``."""
    return (
        turn.id,
        turn.user_id,
        turn.agent_id,
        turn.session_id,
        turn.role.value,
        turn.name,
        turn.content,
        turn.created_at,
        Jsonb(dict(turn.metadata)),
        turn.importance,
    )
