"""The LLM seam: what memory steps need from a language model."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class LLM(Protocol):
    """A text-in, text-out model used by the memory steps that can use one.

    Invariants: ``is_available`` is False only for the offline ``none`` provider, whose
    ``complete`` raises :class:`memstrata.errors.ConfigError` saying how to configure a
    model; every step that could use an LLM checks ``is_available`` first and falls back
    to its deterministic offline version. Failures raise
    :class:`memstrata.errors.ProviderError`.
    """

    @property
    def name(self) -> str:
        """Provider and model, for logs and benchmark records."""
        ...

    @property
    def is_available(self) -> bool:
        """Whether ``complete`` can be called."""
        ...

    def complete(self, prompt: str, *, system: str | None = None) -> str:
        """Return the model's reply to ``prompt``."""
        ...
