"""Profile updates by an LLM: stable traits and preferences a new message states, as short key → value pairs.

Only the keys the reply names change; a key the reply leaves out keeps its value, and nothing
is ever removed. A reply without an ``updates`` list raises :class:`memstrata.errors.ProviderError`
so the caller falls back to the rule-based profile updates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memstrata.extraction.llm_reply import ask_json, quote_message, required_list, short_text
from memstrata.llms.base import LLM

PURPOSE = "profile_update"
MAX_UPDATES = 10
MAX_KEY_CHARS = 40
MAX_VALUE_CHARS = 80
MAX_TOKENS = 400

PROFILE_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "updates": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "key": {"type": "string", "description": "snake_case trait name, e.g. location, diet"},
                    "value": {"type": "string", "description": "the new value in a few words"},
                },
                "required": ["key", "value"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["updates"],
    "additionalProperties": False,
}

_KEY = re.compile(r"[a-z][a-z0-9_:]*")


@dataclass(frozen=True, slots=True)
class ProfileReply:
    """The profile values to set, and why any update the model proposed was dropped."""

    updates: Mapping[str, str]
    dropped: tuple[str, ...] = ()


def update_profile(llm: LLM, *, text: str, subject: str, profile: Mapping[str, str]) -> ProfileReply:
    """Ask ``llm`` which of ``subject``'s stable traits the message ``text`` sets or changes."""
    current = "\n".join(f"- {key}: {value}" for key, value in sorted(profile.items())) or "(empty)"
    data = ask_json(
        llm,
        "profile_update",
        schema=PROFILE_SCHEMA,
        purpose=PURPOSE,
        max_tokens=MAX_TOKENS,
        subject=subject,
        profile=current,
        message=quote_message(text),
    )
    return profile_from_reply(data, profile)


def profile_from_reply(data: Mapping[str, Any], profile: Mapping[str, str]) -> ProfileReply:
    """The checked updates of a reply: snake_case keys, short values, at most ``MAX_UPDATES``, no-ops left out."""
    updates: dict[str, str] = {}
    dropped: list[str] = []
    for position, item in enumerate(required_list(data, "updates", PURPOSE)):
        if not isinstance(item, Mapping):
            dropped.append(f"update {position}: not an object")
            continue
        raw_key = short_text(item.get("key"), MAX_KEY_CHARS)
        key = raw_key.casefold().replace(" ", "_").replace("-", "_") if raw_key else None
        value = short_text(item.get("value"), MAX_VALUE_CHARS)
        if key is None or not _KEY.fullmatch(key):
            dropped.append(f"update {position}: key is not a snake_case name of at most {MAX_KEY_CHARS} characters")
        elif value is None:
            dropped.append(f"update {position}: value is not text of 1 to {MAX_VALUE_CHARS} characters")
        elif len(updates) >= MAX_UPDATES and key not in updates:
            dropped.append(f"update {position}: more than {MAX_UPDATES} updates")
        elif profile.get(key) != value:
            updates[key] = value
    return ProfileReply(updates, tuple(dropped))
