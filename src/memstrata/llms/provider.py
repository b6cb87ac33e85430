"""What the LLM providers share: ``complete`` and ``generate`` written once over one model call.

A provider subclasses :class:`LLMBase` and implements ``name`` and ``_complete``, one call to the
model; ``generate`` asks for JSON and retries once through it, and ``complete`` is ``generate``
with one user message. Callers still depend only on the :class:`~memstrata.llms.base.LLM` protocol.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.llms.base import ChatMessage, Completion
from memstrata.llms.json_output import complete_json

__all__ = ["ChatRequest", "LLMBase"]


@dataclass(kw_only=True, frozen=True, slots=True)
class ChatRequest:
    """What one ``generate`` call asks for besides the conversation, which a JSON retry extends."""

    system: str | None = None
    memory: str | None = None
    json_schema: Mapping[str, Any] | None = None
    max_tokens: int | None = None
    purpose: str = "chat"


class LLMBase(ABC):
    """An LLM provider: ``complete`` and ``generate`` over ``_complete``, the one call each provider makes."""

    @property
    @abstractmethod
    def name(self) -> str:
        """Provider and model, for logs and benchmark records (e.g. ``openai:gpt-4o-mini``)."""

    @property
    def is_available(self) -> bool:
        """Always: failures surface as ProviderError when called."""
        return True

    def complete(self, prompt: str, *, system: str | None = None) -> str:
        """Return the model's reply to one user ``prompt``."""
        return self.generate([ChatMessage("user", prompt)], system=system, purpose="complete").text

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
        """Reply to a conversation; with ``json_schema`` the reply's JSON object is in ``data``."""
        request = ChatRequest(
            system=system, memory=memory, json_schema=json_schema, max_tokens=max_tokens, purpose=purpose
        )
        if json_schema is None:
            return self._complete(messages, request)
        return complete_json(lambda conversation: self._complete(conversation, request), messages, provider=self.name)

    @abstractmethod
    def _complete(self, messages: Sequence[ChatMessage], request: ChatRequest) -> Completion:
        """One call to the model: its reply to ``messages`` (its text only; ``generate`` parses JSON from it)."""
