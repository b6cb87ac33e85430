"""LLM providers behind one seam, chosen by name through ``memstrata.registry``, imported only when chosen.

``none`` is the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import ValidationError

from memstrata.errors import ConfigError
from memstrata.registry import LLM_PROVIDER, load, targets

if TYPE_CHECKING:
    from memstrata.config import Settings
    from memstrata.llms.base import LLM
    from memstrata.remote.costs import CostLog

#: name → "module:factory" of the built-in providers; the factory takes (settings, cost_log=) and returns an LLM.
LLMS: Mapping[str, str] = targets(LLM_PROVIDER)


def load_llm(settings: Settings, *, cost_log: CostLog | None = None) -> LLM:
    """Build the provider ``settings.llm_provider`` names; calls are logged to ``cost_log`` (default: the data dir)."""
    try:
        llm: LLM = load(LLM_PROVIDER, settings.llm_provider, settings, cost_log=cost_log)
    except ValidationError as exc:
        problems = "; ".join(
            f"llm_{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()
        )
        raise ConfigError(f"invalid LLM settings: {problems}") from exc
    return llm


def required_model(settings: Settings) -> str:
    """The configured model name, or a ConfigError saying how to set one."""
    model = (settings.llm_model or "").strip()
    if not model:
        raise ConfigError(
            f"the {settings.llm_provider} LLM provider needs a model name; set MEMSTRATA_LLM_MODEL "
            "(e.g. gpt-4o-mini, claude-haiku-4-5, or llama3.1:8b for Ollama)"
        )
    return model
