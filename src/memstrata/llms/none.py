"""The offline default: no model; every LLM-backed step uses its rule-based fallback."""

from __future__ import annotations

from memstrata.errors import ConfigError


class NoLLM:
    """Stands in when no LLM is configured; ``complete`` explains how to configure one."""

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
        raise ConfigError(
            "this step needs an LLM, and none is configured; set MEMSTRATA_LLM_PROVIDER "
            "(openai or anthropic), MEMSTRATA_LLM_MODEL and MEMSTRATA_LLM_API_KEY"
        )
