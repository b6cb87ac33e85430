"""The LLM seam: what memory steps and the agent need from a language model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from memstrata.remote.usage import Usage

__all__ = ["LLM", "ChatMessage", "ChatRole", "Completion", "Usage"]

ChatRole = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a conversation sent to a model."""

    role: ChatRole
    content: str


@dataclass(kw_only=True, frozen=True, slots=True)
class Completion:
    """A model's reply with its token usage."""

    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    data: Mapping[str, Any] | None = None
    """The parsed JSON object when a ``json_schema`` was asked for."""


@runtime_checkable
class LLM(Protocol):
    """A chat model used by the memory steps that can use one, and by the agent.

    Invariants:

    - ``is_available`` is False only for the offline ``none`` provider, whose methods raise
      :class:`memstrata.errors.ConfigError` saying how to configure a model; callers check it
      first and fall back to their offline version.
    - ``generate`` sends ``system``, then the ``memory`` block, then ``messages``, so the stable
      prefix is cached; providers with explicit caching (Anthropic) mark the memory block.
    - With ``json_schema`` the reply's ``data`` is a JSON object (callers validate its fields),
      or :class:`ProviderError` is raised after at most one retry.
    - Failures (network, HTTP errors after retries, unusable output) raise
      :class:`memstrata.errors.ProviderError`; API keys never appear in messages or logs.
    """

    @property
    def name(self) -> str:
        """Provider and model, for logs and benchmark records (e.g. ``openai:gpt-4o-mini``)."""
        ...

    @property
    def is_available(self) -> bool:
        """Whether the model can be called."""
        ...

    def complete(self, prompt: str, *, system: str | None = None) -> str:
        """Return the model's reply to one user ``prompt``."""
        ...

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
        """Reply to a conversation; ``purpose`` labels the call in the cost log."""
        ...
