"""Tolerant JSON from model replies, and the one bounded retry when a reply holds none."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memstrata.errors import ProviderError
from memstrata.llms.base import ChatMessage, Completion, Usage

_THINK_BLOCK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_THINK_END = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*[\w-]*[ \t]*\n?(.*?)```", re.DOTALL)
_RETRY_ECHO_LIMIT = 2000

RETRY_PROMPT = (
    "Your reply was not valid JSON. Reply again with only one JSON object that matches the requested schema: "
    "no prose, no code fences."
)


def json_instruction(schema: Mapping[str, Any]) -> str:
    """The instruction asking for JSON when the provider cannot enforce a schema itself."""
    return (
        "Reply with only one JSON object, no prose and no code fences, that matches this JSON schema:\n"
        + json.dumps(schema, ensure_ascii=False, sort_keys=True)
    )


def strip_thinking(text: str) -> str:
    """``text`` without ``<think>…</think>`` blocks (and anything before a dangling ``</think>``)."""
    text = _THINK_BLOCK.sub("", text)
    ends = list(_THINK_END.finditer(text))
    if ends:  # some servers drop the opening tag and send only the end of the reasoning
        text = text[ends[-1].end() :]
    return text.strip()


#: How many "{" of a reply are tried as the start of its object: a reply is rarely more than prose
#: around one object, and a degenerate one ("{{{{…") would otherwise cost time quadratic in its length.
MAX_OBJECT_STARTS = 200


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model's reply, tolerating fences, think blocks and prose; None if none."""
    cleaned = strip_thinking(text)
    candidates = [match.group(1) for match in _FENCE.finditer(cleaned)] + [cleaned]
    for candidate in candidates:
        found = _first_object(candidate.strip())
        if found is not None:
            return found
    return None


def _first_object(text: str) -> dict[str, Any] | None:
    # RecursionError: a model stuck in a loop can reply with thousands of "[" or "{".
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        pass
    else:
        if isinstance(whole, dict):
            return whole
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _ in range(MAX_OBJECT_STARTS):
        if start == -1:
            break
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def add_usage(first: Usage, second: Usage) -> Usage:
    """The tokens of two calls together."""
    return Usage(
        input_tokens=first.input_tokens + second.input_tokens,
        output_tokens=first.output_tokens + second.output_tokens,
        cached_tokens=first.cached_tokens + second.cached_tokens,
    )


def complete_json(
    call: Callable[[Sequence[ChatMessage]], Completion], messages: Sequence[ChatMessage], *, provider: str
) -> Completion:
    """Call, parse the reply's JSON object, and retry once telling the model its reply was not JSON."""
    first = call(messages)
    data = parse_json_object(first.text)
    if data is not None:
        return Completion(text=first.text, model=first.model, usage=first.usage, data=data)
    echoed = strip_thinking(first.text)[:_RETRY_ECHO_LIMIT] or "(empty reply)"
    retry = [*messages, ChatMessage("assistant", echoed), ChatMessage("user", RETRY_PROMPT)]
    second = call(retry)
    usage = add_usage(first.usage, second.usage)
    data = parse_json_object(second.text)
    if data is None:
        excerpt = " ".join(strip_thinking(second.text).split())[:200] or "an empty reply"
        raise ProviderError(
            f"{provider} did not reply with a JSON object, even after being asked again (it said: {excerpt!r}); "
            "use a model that follows JSON instructions, or one the server can constrain to a schema"
        )
    return Completion(text=second.text, model=second.model, usage=usage, data=data)
