"""Test doubles for memstrata's seams: a scripted LLM.

``FakeLLM`` implements :class:`memstrata.llms.base.LLM` with replies queued in advance and a
record of every call, so a test says what the model answers and checks what it was asked::

    llm = FakeLLM([{"cells": []}, "plain text", ProviderError("timed out")])
    llm = FakeLLM({"extract_cells": [{"cells": []}], "chat": ["Hello!"]})  # one queue per purpose
    llm.script({"cells": []}, purpose="extract_cells")  # more, e.g. once ids made by earlier calls are known

A reply is a ``str`` (the completion's text; ``data`` stays None), a mapping (the parsed JSON
``data``, its text the JSON dump) or a :class:`memstrata.errors.ProviderError` instance (raised).
When no scripted reply is left the call raises ``ProviderError``, as a failing provider would, so
a step nobody scripted falls back to its offline version; ``calls`` shows what was asked anyway.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.errors import ProviderError
from memstrata.llms.base import ChatMessage, Completion, Usage

Reply = str | Mapping[str, Any] | ProviderError


@dataclass(frozen=True, slots=True)
class Call:
    """One call the fake received, with everything it was given."""

    messages: tuple[ChatMessage, ...]
    system: str | None
    memory: str | None
    json_schema: Mapping[str, Any] | None
    max_tokens: int | None
    purpose: str

    @property
    def prompt(self) -> str:
        """The last message's text (the whole prompt for the memory steps, which send one message)."""
        return self.messages[-1].content if self.messages else ""


class FakeLLM:
    """An always-available LLM answering from scripted replies, in order (one queue, or one per purpose)."""

    def __init__(self, replies: Sequence[Reply] | Mapping[str, Sequence[Reply]] = (), *, model: str = "scripted"):
        self._by_purpose = isinstance(replies, Mapping)
        queues: Mapping[str, Sequence[Reply]] = replies if isinstance(replies, Mapping) else {"": replies}
        self._queues = {purpose: deque(queue) for purpose, queue in queues.items()}
        self._model = model
        self.calls: list[Call] = []

    @property
    def name(self) -> str:
        """``fake:<model>``."""
        return f"fake:{self._model}"

    @property
    def is_available(self) -> bool:
        """Always."""
        return True

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet."""
        return sum(len(queue) for queue in self._queues.values())

    def script(self, *replies: Reply, purpose: str | None = None) -> None:
        """Queue more replies (for ``purpose`` when the fake was built with one queue per purpose)."""
        if self._by_purpose != (purpose is not None):
            raise ValueError("name a purpose exactly when the FakeLLM was built with one queue per purpose")
        self._queues.setdefault(purpose or "", deque()).extend(replies)

    def calls_for(self, purpose: str) -> list[Call]:
        """The calls made with one ``purpose``, in order."""
        return [call for call in self.calls if call.purpose == purpose]

    def complete(self, prompt: str, *, system: str | None = None) -> str:
        """The next reply's text to one prompt (recorded with purpose ``complete``)."""
        return self.generate([ChatMessage(role="user", content=prompt)], system=system, purpose="complete").text

    def generate(
        self,
        messages: Sequence[ChatMessage],
        *,
        system: str | None = None,
        memory: str | None = None,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        purpose: str = "chat",
    ) -> Completion:
        """Record the call, then answer with the next scripted reply (or raise the scripted error)."""
        self.calls.append(Call(tuple(messages), system, memory, json_schema, max_tokens, purpose))
        queue = self._queues.get(purpose if self._by_purpose else "")
        if not queue:
            raise ProviderError(f"FakeLLM has no scripted reply left for purpose {purpose!r}")
        reply = queue.popleft()
        if isinstance(reply, ProviderError):
            raise reply
        if isinstance(reply, str):
            return Completion(text=reply, model=self._model, usage=Usage())
        return Completion(text=json.dumps(reply), model=self._model, usage=Usage(), data=dict(reply))
