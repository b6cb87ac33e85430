"""How an integration turns the latest messages of a conversation into a memstrata query."""

from __future__ import annotations

from collections.abc import Iterable

#: The longest query an integration sends, in characters. A pasted document makes a slow,
#: unfocused query; what is being asked is usually at its end, so the end is kept.
MAX_QUERY_CHARACTERS = 2_000


def query_from(texts: Iterable[str]) -> str | None:
    """The non-blank ``texts`` joined into one query (its last ``MAX_QUERY_CHARACTERS``), or None if all are blank."""
    kept = [text.strip() for text in texts if text.strip()]
    if not kept:
        return None
    return "\n".join(kept)[-MAX_QUERY_CHARACTERS:].strip()
