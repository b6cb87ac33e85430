"""The JSONL export format: a header line, one line per turn, then an end line. Lossless both ways.

The end line (``{"kind": "end", "turns": N}``, from format version 2) tells a whole file
from one cut short at a line boundary, which parses as well as a whole one would.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memstrata.errors import InvalidInput
from memstrata.models import Turn, Vectors, format_time, space_scope
from memstrata.validation import (
    check_identifier,
    check_importance,
    check_metadata,
    check_role,
    check_stored_time,
    check_text,
    check_user_id,
    parse_json,
)

FORMAT_NAME = "memstrata-export"
FORMAT_VERSION = 2  # 2: files end with an end line; version 1 files (without one) are still read
END = "end"
#: The keys a turn line may hold (``turn_line`` writes them all, ``user_id`` or ``space``).
TURN_KEYS = frozenset(
    {
        "kind",
        "id",
        "user_id",
        "space",
        "agent_id",
        "session_id",
        "role",
        "name",
        "content",
        "created_at",
        "metadata",
        "importance",
        "embedding",
    }
)
EMBEDDING_KEYS = frozenset({"model_id", "dimension", "vector"})
# A vector whose float64 norm is this close to 1 is of unit length already; float32 rounding alone is ~1e-7.
_UNIT_TOLERANCE = 1e-6


@dataclass(frozen=True, slots=True)
class ImportedTurn:
    """One turn read back from an export, with its vector if the file carried one."""

    turn: Turn
    model_id: str | None = None
    vector: Vectors | None = None


def header_line(model_id: str) -> str:
    """The first line of every export."""
    return json.dumps({"kind": FORMAT_NAME, "version": FORMAT_VERSION, "embedding_model": model_id}) + "\n"


def end_line(turns: int) -> str:
    """The last line of every export: how many turn lines came before it."""
    return json.dumps({"kind": END, "turns": turns}) + "\n"


def turn_line(turn: Turn, *, model_id: str | None = None, vector: Vectors | None = None) -> str:
    """One turn as a JSON line; the vector, when given, as base64 little-endian float32."""
    record: dict[str, Any] = {
        "kind": "turn",
        "id": turn.id,
        # A space's turns name the space; its scope id is the store's business.
        **({"user_id": turn.user_id} if turn.space is None else {"space": turn.space}),
        "agent_id": turn.agent_id,
        "session_id": turn.session_id,
        "role": turn.role.value,
        "name": turn.name,
        "content": turn.content,
        "created_at": format_time(turn.created_at),
        "metadata": dict(turn.metadata),
        "importance": turn.importance,
    }
    if vector is not None and model_id is not None:
        array = np.ascontiguousarray(vector, dtype="<f4")
        record["embedding"] = {
            "model_id": model_id,
            "dimension": int(array.shape[-1]),
            "vector": base64.b64encode(array.tobytes()).decode("ascii"),
        }
    return json.dumps(record, ensure_ascii=False) + "\n"


def read_export_file(source: Path, *, max_bytes: int, max_metadata_bytes: int | None = None) -> list[ImportedTurn]:
    """Read and validate the export at ``source``; InvalidInput says what is wrong with it."""
    try:
        with source.open("r", encoding="utf-8-sig") as handle:  # a byte order mark some editors add is no text
            return read_export(iter(handle), max_bytes=max_bytes, max_metadata_bytes=max_metadata_bytes)
    except FileNotFoundError as exc:
        raise InvalidInput(f"no such file: {source}") from exc
    except IsADirectoryError as exc:
        raise InvalidInput(f"{source} is a directory, not an export") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{source} is not UTF-8 text") from exc
    except OSError as exc:
        raise InvalidInput(f"cannot read {source}: {exc.strerror or exc}") from exc


def read_export(lines: Iterator[str], *, max_bytes: int, max_metadata_bytes: int | None = None) -> list[ImportedTurn]:
    """Parse and validate a whole export; any bad line raises InvalidInput naming it.

    ``max_bytes`` bounds each turn's text and ``max_metadata_bytes`` its metadata's JSON (None: unbounded).
    """
    items: list[ImportedTurn] = []
    line_of: dict[str, int] = {}
    version = 0
    ended = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = parse_record(line, number)
        if not version:
            if record.get("kind") != FORMAT_NAME:
                raise InvalidInput(f"line {number}: not a memstrata export (no '{FORMAT_NAME}' header)")
            declared = record.get("version")
            if isinstance(declared, bool) or not isinstance(declared, int) or not 1 <= declared <= FORMAT_VERSION:
                raise InvalidInput(f"line {number}: export format version {declared!r} is not supported")
            version = declared
            continue
        if ended:
            raise InvalidInput(f"line {number}: a record after the end line (line {ended}); was a file appended?")
        if record.get("kind") == END:
            count = record.get("turns")
            if isinstance(count, bool) or not isinstance(count, int) or count != len(items):
                raise InvalidInput(
                    f"line {number}: the end line counts {count!r} turns, but the file holds {len(items)}"
                )
            ended = number
            continue
        try:
            item = _read_turn(record, max_bytes, max_metadata_bytes)
        except InvalidInput as exc:
            raise InvalidInput(f"line {number}: {exc}") from exc
        if item.turn.id in line_of:
            raise InvalidInput(
                f"line {number}: turn id {item.turn.id!r} is listed twice (first on line {line_of[item.turn.id]})"
            )
        line_of[item.turn.id] = number
        items.append(item)
    if not version:
        raise InvalidInput("the file is empty, not a memstrata export")
    if version >= 2 and not ended:
        raise InvalidInput(
            f"the file stops after {len(items)} turns without its end line: it was cut short; export it again"
        )
    return items


def _read_turn(record: dict[str, Any], max_bytes: int, max_metadata_bytes: int | None) -> ImportedTurn:
    if record.get("kind") != "turn":
        raise InvalidInput(f"unknown record kind {record.get('kind')!r}")
    # As strict as add(): a key memstrata does not know would be dropped without a word.
    _refuse_unknown_keys(record, TURN_KEYS, "a turn line")
    created_at = check_stored_time(record.get("created_at"), "created_at")
    if created_at is None:
        raise InvalidInput("created_at is required")
    turn = Turn(
        id=str(check_identifier(record.get("id"), "id")),
        user_id=_owner(record),
        agent_id=check_identifier(record.get("agent_id"), "agent_id", required=False),
        session_id=check_identifier(record.get("session_id"), "session_id", required=False),
        role=check_role(record.get("role")),
        name=check_identifier(record.get("name"), "name", required=False),
        content=check_text(record.get("content"), "content", max_bytes=max_bytes),
        created_at=created_at,
        metadata=check_metadata(record.get("metadata"), max_bytes=max_metadata_bytes),
        importance=check_importance(record.get("importance")),
    )
    embedding = record.get("embedding")
    if embedding is None:
        return ImportedTurn(turn)
    if not isinstance(embedding, dict):
        raise InvalidInput("embedding must be an object")
    _refuse_unknown_keys(embedding, EMBEDDING_KEYS, "embedding")
    try:
        raw = base64.b64decode(str(embedding["vector"]), validate=True)
        vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        model_id = str(embedding["model_id"])
        dimension = embedding["dimension"]
        if isinstance(dimension, bool) or not isinstance(dimension, int):
            raise TypeError(f"dimension must be a whole number, not {dimension!r}")
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"embedding is malformed: {exc}") from exc
    if vector.shape != (dimension,) or not np.all(np.isfinite(vector)):
        raise InvalidInput("embedding vector does not match its dimension or holds non-finite values")
    if not np.any(vector):
        raise InvalidInput("embedding vector is all zeros: it has no direction to compare")
    # The index scores by dot product over unit vectors; a longer one would outrank every other.
    # In float64 the norm of any finite, non-zero float32 vector is finite and non-zero. A vector
    # already of unit length (as every exported one is) is kept bit for bit: a round trip is lossless.
    wide = vector.astype(np.float64)
    norm = float(np.linalg.norm(wide))
    if abs(norm - 1.0) <= _UNIT_TOLERANCE:
        return ImportedTurn(turn, model_id, vector.astype(np.float32))
    return ImportedTurn(turn, model_id, (wide / norm).astype(np.float32))


def _refuse_unknown_keys(record: dict[str, Any], known: frozenset[str], what: str) -> None:
    """InvalidInput naming the keys of ``record`` not in ``known``."""
    unknown = sorted(set(record) - known)
    if unknown:
        raise InvalidInput(f"{what} has unknown keys {unknown}; allowed: {sorted(known)}")


def _owner(record: dict[str, Any]) -> str:
    """The scope id of a line: its user's id, or its space's scope id."""
    if record.get("space") is None:
        return check_user_id(record.get("user_id"))
    if record.get("user_id") is not None:
        raise InvalidInput("a line names either user_id or space, not both")
    return space_scope(str(check_identifier(record.get("space"), "space")))


def parse_record(line: str, number: int) -> dict[str, Any]:
    """One line of an export as a JSON object; InvalidInput names line ``number`` if it is not one."""
    try:
        record = parse_json(line)
    except ValueError as exc:
        raise InvalidInput(f"line {number}: not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise InvalidInput(f"line {number}: nested too deeply") from exc
    if not isinstance(record, dict):
        raise InvalidInput(f"line {number}: expected a JSON object")
    return record
