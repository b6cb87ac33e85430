"""Asking a model for one JSON object, and the small checks every LLM-backed step applies to its fields.

The steps built on these raise :class:`memstrata.errors.ProviderError` when a reply is unusable
as a whole, so callers handle a failed call and an unusable reply the same way: by falling back
to the step's offline version.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from memstrata.errors import ProviderError
from memstrata.llms.base import LLM, ChatMessage
from memstrata.prompts import render

PROMPT_CHARS = 12_000  # the most conversation text one prompt quotes; the newest lines are kept


def ask_json(
    llm: LLM, template: str, *, schema: Mapping[str, Any], purpose: str, max_tokens: int, **values: str
) -> Mapping[str, Any]:
    """Render ``template`` with ``values``, send it as one user message, and return the reply's JSON object."""
    completion = llm.generate(
        [ChatMessage(role="user", content=render(template, **values))],
        json_schema=schema,
        max_tokens=max_tokens,
        purpose=purpose,
    )
    if not isinstance(completion.data, Mapping):
        raise ProviderError(f"{purpose}: the reply was not a JSON object")
    return completion.data


def required_list(data: Mapping[str, Any], key: str, purpose: str) -> list[Any]:
    """``data[key]`` when it is a list; otherwise the whole reply is unusable."""
    value = data.get(key)
    if not isinstance(value, list):
        raise ProviderError(f"{purpose}: the reply has no {key!r} list")
    return value


def short_text(value: object, max_chars: int) -> str | None:
    """``value`` as one line of text without surrounding space, or None if it is not text, empty or too long."""
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    return text if 0 < len(text) <= max_chars else None


def unit_interval(value: object) -> float | None:
    """``value`` as a number in [0, 1], or None (booleans, NaN and numbers outside the range are refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return round(number, 3) if math.isfinite(number) and 0.0 <= number <= 1.0 else None


def quote_message(text: str, max_chars: int = PROMPT_CHARS) -> str:
    """One message for a prompt: its first ``max_chars`` characters (the cap every quote keeps)."""
    return text[:max_chars]


def quote_lines(texts: Sequence[str], max_chars: int = PROMPT_CHARS) -> str:
    """Texts as ``- …`` lines for a prompt: the newest ones that fit in ``max_chars``, in their order."""
    lines: list[str] = []
    used = 0
    for text in reversed(texts):
        line = "- " + " ".join(text.split())
        if lines and used + len(line) > max_chars:
            break
        lines.append(line[:max_chars])
        used += len(line) + 1
    return "\n".join(reversed(lines))
