"""LLM providers behind one seam, chosen by name from config and imported only when chosen; ``none`` is the default."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pydantic import ValidationError

from memstrata.errors import ConfigError

if TYPE_CHECKING:
    from memstrata.config import Settings
    from memstrata.llms.base import LLM
    from memstrata.remote.costs import CostLog

#: name → "module:factory"; the factory takes (settings, cost_log=) and returns an LLM.
LLMS: dict[str, str] = {
    "none": "memstrata.llms.none:from_settings",
    "openai": "memstrata.llms.openai_compat:from_settings",
    "anthropic": "memstrata.llms.anthropic:from_settings",
}


def load_llm(settings: Settings, *, cost_log: CostLog | None = None) -> LLM:
    """Build the provider ``settings.llm_provider`` names; calls are logged to ``cost_log`` (default: the data dir)."""
    target = LLMS.get(settings.llm_provider)
    if target is None:
        raise ConfigError(
            f"unknown LLM provider {settings.llm_provider!r}; set MEMSTRATA_LLM_PROVIDER to one of: "
            + ", ".join(sorted(LLMS))
        )
    module_name, _, factory_name = target.partition(":")
    factory = getattr(importlib.import_module(module_name), factory_name)
    try:
        llm: LLM = factory(settings, cost_log=cost_log)
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
