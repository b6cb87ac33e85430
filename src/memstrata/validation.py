"""Checks every input must pass before anything is stored; each failure is InvalidInput."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memstrata.errors import InvalidInput
from memstrata.models import SPACE_MARK, Role, Tier

MAX_IDENTIFIER_LENGTH = 256
MESSAGE_KEYS = frozenset({"role", "content", "name", "id", "metadata"})
#: Counts and offsets above this are capped: no store holds more, and stores keep 64-bit integers.
LARGEST_COUNT = 2**62
#: How deep metadata may nest (objects and lists); far beyond what anyone stores, well inside what JSON tools read.
MAX_METADATA_DEPTH = 64
#: Timestamps stay a day inside the calendar's ends, so every time zone can show them.
EARLIEST_TIME = datetime.min.replace(tzinfo=UTC) + timedelta(days=1)
LATEST_TIME = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)
#: The token budgets ``context()`` takes.
MIN_BUDGET = 50
MAX_BUDGET = 1_000_000
#: The derived tiers ``search(tiers=...)`` can rank beside the turns.
DERIVED_TIERS = (Tier.LONGTERM, Tier.SCENE, Tier.MIDTERM, Tier.CONSOLIDATION)


@dataclass(kw_only=True, frozen=True, slots=True)
class MessageInput:
    """One validated message waiting to be stored."""

    role: Role
    content: str
    name: str | None = None
    id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


def check_identifier(value: object, what: str, *, required: bool = True) -> str | None:
    """Return ``value`` if it is a usable id/scope string; ``None`` is allowed when not required."""
    if value is None:
        if required:
            raise InvalidInput(f"{what} is required (a non-empty string)")
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise InvalidInput(f"{what} must not be empty or only whitespace")
    if len(value) > MAX_IDENTIFIER_LENGTH:
        raise InvalidInput(f"{what} is longer than {MAX_IDENTIFIER_LENGTH} characters")
    _check_encodable(value, what)
    return value


def check_user_id(value: object, what: str = "user_id") -> str:
    """A user id, which may not spell a shared space's scope id (U+FDD0 and its name)."""
    user = str(check_identifier(value, what))
    if user.startswith(SPACE_MARK):
        raise InvalidInput(f"{what} may not start with U+FDD0, which marks the memory of a shared space")
    return user


def check_names(value: object, what: str) -> tuple[str, ...]:
    """The strings of a list-like argument (list, tuple, set; ``None`` → none), in order."""
    if value is None:
        return ()
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise InvalidInput(f"{what} must be a list of names, not {type(value).__name__}")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str):
            raise InvalidInput(f"{what} must hold names (strings), not {type(name).__name__}")
    return names


def check_text(value: object, what: str, *, max_bytes: int) -> str:
    """Return ``value`` if it is non-blank UTF-8 text no larger than ``max_bytes``."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise InvalidInput(f"{what} must not be empty or only whitespace")
    size = _check_encodable(value, what)
    if size > max_bytes:
        raise InvalidInput(
            f"{what} is {size:,} bytes, over the limit of {max_bytes:,} "
            "(raise max_text_bytes / MEMSTRATA_MAX_TEXT_BYTES, or split the text)"
        )
    return value


def _check_encodable(value: str, what: str) -> int:
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character")
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{what} is not valid Unicode (lone surrogate at position {exc.start})") from exc


def check_role(value: object) -> Role:
    """Return the role named by ``value``."""
    if isinstance(value, Role):
        return value
    if isinstance(value, str):
        try:
            return Role(value.strip().lower())
        except ValueError:
            pass
    allowed = ", ".join(role.value for role in Role)
    raise InvalidInput(f"invalid role {value!r}; expected one of: {allowed}")


def check_metadata(value: object, what: str = "metadata", *, max_bytes: int | None = None) -> dict[str, Any]:
    """Return a JSON-serialisable dict copy of ``value`` (``None`` → empty), its JSON at most ``max_bytes``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{what} must be a mapping, not {type(value).__name__}")
    _check_json_value(value, what)
    try:
        encoded = json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} must be JSON-serialisable: {exc}") from exc
    if max_bytes is not None:
        check_metadata_size(encoded, what, max_bytes)
    decoded: dict[str, Any] = json.loads(encoded)
    return decoded


def check_metadata_size(encoded: str, what: str, max_bytes: int) -> None:
    """InvalidInput when metadata's JSON text ``encoded`` is over ``max_bytes`` (UTF-8)."""
    size = len(encoded.encode("utf-8"))
    if size > max_bytes:
        raise InvalidInput(
            f"{what} is {size:,} bytes of JSON, over the limit of {max_bytes:,} "
            "(raise max_metadata_bytes / MEMSTRATA_MAX_METADATA_BYTES, or store less metadata)"
        )


def check_message_metadata(shared: Mapping[str, Any], messages: Sequence[MessageInput], max_bytes: int) -> None:
    """Each message's metadata as stored (the call's ``shared`` under its own) is at most ``max_bytes`` of JSON."""
    if not shared:
        return  # each message's own was checked as it was parsed
    for index, message in enumerate(messages):
        merged = json.dumps({**shared, **message.metadata}, ensure_ascii=False)
        check_metadata_size(merged, f"messages[{index}].metadata with the call's metadata", max_bytes)


def _check_json_value(value: object, what: str, depth: int = 0) -> None:
    """Keys must be strings and every string clean text, at any depth up to ``MAX_METADATA_DEPTH``."""
    if isinstance(value, Mapping | list | tuple) and depth >= MAX_METADATA_DEPTH:
        # Deeper values (or one that contains itself) could be stored but not serialised back.
        raise InvalidInput(f"{what} is nested more than {MAX_METADATA_DEPTH} levels deep")
    if isinstance(value, str):
        _check_encodable(value, what)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{what} keys must be strings, not {type(key).__name__}")
            _check_encodable(key, what)
            _check_json_value(item, what, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_json_value(item, what, depth + 1)


class DuplicateKey(ValueError):
    """A JSON object names one key twice; raised by ``parse_json`` and turned into each front end's bad-input error."""


def parse_json(text: str | bytes) -> Any:
    """``json.loads``, refusing an object that names a key twice (``DuplicateKey``, a ``ValueError``).

    RFC 8259 leaves the meaning of such an object to each parser: some keep the first
    value, Python keeps the last. A proxy that checks one and memstrata that stores the
    other would disagree about the same request, so neither is guessed.
    """
    return json.loads(text, object_pairs_hook=_unique_keys)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            shown = key if len(key) <= 40 else f"{key[:40]}…"
            raise DuplicateKey(f"the key {shown!r} appears twice in one object")
        found[key] = value
    return found


def check_timestamp(value: object, what: str = "timestamp") -> datetime | None:
    """Return an aware UTC datetime from a datetime or ISO 8601 string with an offset."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidInput(f"{what} {value!r} is not an ISO 8601 date-time") from exc
    if not isinstance(value, datetime):
        raise InvalidInput(f"{what} must be a datetime or ISO 8601 string, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(f"{what} must be timezone-aware (e.g. datetime.now(timezone.utc))")
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise InvalidInput(f"{what} {value.isoformat()} is outside the representable range in UTC") from exc


def check_stored_time(value: object, what: str = "timestamp") -> datetime | None:
    """``check_timestamp`` for a time that is stored: it must also stay a day inside the calendar's ends.

    Stored times are shown in any time zone later; a filter's bound (``after``, ``before``)
    may be anything ``check_timestamp`` takes.
    """
    moment = check_timestamp(value, what)
    if moment is not None and not EARLIEST_TIME <= moment <= LATEST_TIME:
        raise InvalidInput(
            f"{what} {moment.isoformat()} is too close to the ends of the calendar; "
            f"use a time between {EARLIEST_TIME.isoformat()} and {LATEST_TIME.isoformat()}"
        )
    return moment


def check_timezone(value: object, what: str = "timezone") -> ZoneInfo | None:
    """Return the IANA time zone named by ``value`` (e.g. "Europe/Paris"), or ``None``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be an IANA time zone name, not {type(value).__name__}")
    try:
        return ZoneInfo(value.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: a region directory ("Europe")
        raise InvalidInput(
            f"unknown {what} {value[:80]!r}; use an IANA name such as 'Europe/Paris', 'America/New_York' or 'UTC'"
        ) from exc


def check_importance(value: object) -> float | None:
    """Return an importance in [0, 1], or ``None``."""
    return None if value is None else check_fraction(value, "importance")


def check_fraction(value: object, what: str) -> float:
    """Return a number in [0, 1]."""
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= 1:
        raise InvalidInput(f"{what} must be between 0 and 1")  # before isfinite: a huge int overflows a float
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(f"{what} must be a finite number between 0 and 1")
    if not 0.0 <= float(value) <= 1.0:
        raise InvalidInput(f"{what} must be between 0 and 1")
    return float(value)


def check_limit(value: object, what: str = "limit", *, maximum: int = 1000) -> int:
    """Return a positive whole-number limit no larger than ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{what} must be a whole number")
    if not 1 <= value <= maximum:
        raise InvalidInput(f"{what} must be between 1 and {maximum}")
    return value


def check_offset(value: object) -> int:
    """Return ``value`` if it is a whole number ≥ 0 (a page's start)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput("offset must be a whole number ≥ 0")
    return value


def parse_messages(
    messages: object,
    *,
    max_bytes: int,
    default_id: str | None = None,
    max_metadata_bytes: int | None = None,
    max_messages: int | None = None,
) -> list[MessageInput]:
    """Accept a string (one user message) or a list of ``{"role", "content", "name"?, "id"?}``.

    ``max_messages`` bounds the list and ``max_metadata_bytes`` each message's metadata (None: unbounded).
    """
    if isinstance(messages, str):
        content = check_text(messages, "message", max_bytes=max_bytes)
        return [MessageInput(role=Role.USER, content=content, id=check_identifier(default_id, "id", required=False))]
    if isinstance(messages, Mapping):
        messages = [messages]
    if not isinstance(messages, Sequence) or isinstance(messages, bytes | bytearray):
        raise InvalidInput("messages must be a string or a list of {'role', 'content'} dicts")
    if not messages:
        raise InvalidInput("messages must not be empty")
    if max_messages is not None and len(messages) > max_messages:
        raise InvalidInput(
            f"{len(messages):,} messages in one call, over the limit of {max_messages:,} "
            "(raise max_messages_per_add / MEMSTRATA_MAX_MESSAGES_PER_ADD, or add them in several calls)"
        )
    if default_id is not None and len(messages) != 1:
        raise InvalidInput("id= applies to a single message; give each message its own 'id' key instead")
    parsed = [_parse_message(item, index, max_bytes, max_metadata_bytes) for index, item in enumerate(messages)]
    if default_id is not None:
        only = parsed[0]
        parsed = [
            MessageInput(
                role=only.role,
                content=only.content,
                name=only.name,
                id=check_identifier(default_id, "id"),
                metadata=only.metadata,
            )
        ]
    ids = [message.id for message in parsed if message.id is not None]
    if len(ids) != len(set(ids)):
        raise InvalidInput("two messages in one call have the same id")
    return parsed


def _parse_message(item: object, index: int, max_bytes: int, max_metadata_bytes: int | None) -> MessageInput:
    where = f"messages[{index}]"
    if not isinstance(item, Mapping):
        raise InvalidInput(f"{where} must be a dict with 'role' and 'content', not {type(item).__name__}")
    unknown = set(item) - MESSAGE_KEYS
    if unknown:
        raise InvalidInput(f"{where} has unknown keys {sorted(map(str, unknown))}; allowed: {sorted(MESSAGE_KEYS)}")
    if "content" not in item:
        raise InvalidInput(f"{where} has no 'content'")
    return MessageInput(
        role=check_role(item.get("role", Role.USER.value)),
        content=check_text(item["content"], f"{where}.content", max_bytes=max_bytes),
        name=check_identifier(item.get("name"), f"{where}.name", required=False),
        id=check_identifier(item.get("id"), f"{where}.id", required=False),
        metadata=check_metadata(item.get("metadata"), f"{where}.metadata", max_bytes=max_metadata_bytes),
    )


def check_budget(value: object, name: str = "token_budget") -> int:
    """Return ``value`` if it is a usable token budget; errors call it ``name`` (a CLI says ``--budget``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be a whole number, not {type(value).__name__}")
    if not MIN_BUDGET <= value <= MAX_BUDGET:
        raise InvalidInput(f"{name} must be between {MIN_BUDGET} and {MAX_BUDGET:,}, not {value}")
    return value


def check_tiers(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` without repeats, if each is a derived tier ``search`` can rank; InvalidInput names the others."""
    unknown = [name for name in names if name not in DERIVED_TIERS]
    if unknown:
        raise InvalidInput(f"unknown tiers {unknown}; choose from {', '.join(DERIVED_TIERS)}")
    return tuple(dict.fromkeys(names))


PRUNABLE_TIERS = (Tier.EPISODIC, Tier.MIDTERM, Tier.LONGTERM)
SEARCH_MODES = ("hybrid", "fulltext", "vector")


def check_flag(value: object, what: str) -> bool:
    """``value`` if it is ``True`` or ``False`` (not a number or a string)."""
    if not isinstance(value, bool):
        raise InvalidInput(f"{what} must be true or false")
    return value


def check_mode(value: object) -> str:
    """A search mode: ``hybrid``, ``fulltext`` or ``vector``."""
    if value not in SEARCH_MODES:
        raise InvalidInput(f"mode must be one of {', '.join(SEARCH_MODES)}, not {value!r}")
    return str(value)


def check_prefix(prefix: object) -> str:
    """A user-id prefix: any start of a valid id, empty or blank included."""
    if not isinstance(prefix, str) or len(prefix) > MAX_IDENTIFIER_LENGTH:
        raise InvalidInput(f"prefix must be a string of at most {MAX_IDENTIFIER_LENGTH} characters")
    _check_encodable(prefix, "prefix")
    return prefix


def check_timeout(value: object) -> float | None:
    """A wait in seconds (≥ 0), or None to wait as long as it takes."""
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf
    ):
        raise InvalidInput("timeout must be a number of seconds ≥ 0, or None to wait as long as it takes")
    return value


def check_prune(tier: object, older_than: object, keep_last: object) -> tuple[str, timedelta | None, int | None]:
    """A retention rule: a prunable tier, and an age (a ``timedelta`` ≥ 0), a count to keep, or both."""
    if tier not in PRUNABLE_TIERS:
        raise InvalidInput(f"tier must be one of {', '.join(PRUNABLE_TIERS)}, not {tier!r}")
    if older_than is None and keep_last is None:
        raise InvalidInput("give older_than, keep_last, or both")
    if keep_last is not None and (isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0):
        raise InvalidInput("keep_last must be a whole number ≥ 0")
    if older_than is not None and (not isinstance(older_than, timedelta) or older_than < timedelta(0)):
        # A negative age would put the cutoff in the future and delete everything.
        raise InvalidInput("older_than must be a timedelta ≥ 0, e.g. timedelta(days=90)")
    return str(tier), older_than, None if keep_last is None else min(keep_last, LARGEST_COUNT)
