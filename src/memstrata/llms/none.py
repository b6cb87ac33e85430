"""The offline default: no model; every LLM-backed step uses its rule-based fallback."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memstrata.errors import HOW_TO_CONFIGURE_LLM, LLMRequired
from memstrata.llms.base import ChatMessage, Completion

if TYPE_CHECKING:
    from memstrata.config import Settings
    from memstrata.remote.costs import CostLog

HOW_TO_CONFIGURE = HOW_TO_CONFIGURE_LLM


class NoLLM:
    """Stands in when no LLM is configured; calling it explains how to configure one."""

    @property
    def name(self) -> str:
        """Always ``none``."""
        return "none"

    @property
    def is_available(self) -> bool:
        """Never."""
        return False

    def complete(self, prompt: str, *, system: str | None = None) -> str:
        """Raise: this step needs a model."""
        raise LLMRequired(f"this step needs an LLM, and none is configured; {HOW_TO_CONFIGURE}")

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
        """Raise: this step needs a model."""
        raise LLMRequired(f"this step needs an LLM, and none is configured; {HOW_TO_CONFIGURE}")


def from_settings(settings: Settings, *, cost_log: CostLog | None = None) -> NoLLM:
    """The registry's factory: ``none`` needs no settings."""
    return NoLLM()
