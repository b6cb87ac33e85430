"""The offline default: no model; every LLM-backed step uses its rule-based fallback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memstrata.errors import HOW_TO_CONFIGURE_LLM, LLMRequired
from memstrata.llms.base import ChatMessage, Completion
from memstrata.llms.provider import ChatRequest, LLMBase

if TYPE_CHECKING:
    from memstrata.config import Settings
    from memstrata.remote.costs import CostLog

HOW_TO_CONFIGURE = HOW_TO_CONFIGURE_LLM


class NoLLM(LLMBase):
    """Stands in when no LLM is configured; calling it explains how to configure one."""

    @property
    def name(self) -> str:
        """Always ``none``."""
        return "none"

    @property
    def is_available(self) -> bool:
        """Never."""
        return False

    def _complete(self, messages: Sequence[ChatMessage], request: ChatRequest) -> Completion:
        """Raise: this step needs a model."""
        raise LLMRequired(f"this step needs an LLM, and none is configured; {HOW_TO_CONFIGURE}")


def from_settings(settings: Settings, *, cost_log: CostLog | None = None) -> NoLLM:
    """The registry's factory: ``none`` needs no settings."""
    return NoLLM()
