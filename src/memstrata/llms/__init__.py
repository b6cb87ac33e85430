"""LLM providers behind one seam, chosen by name through ``memstrata.registry``, imported only when chosen.

``none`` is the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

from pydantic import ValidationError

from memstrata.errors import ConfigError
from memstrata.registry import LLM_PROVIDER, load, targets

if TYPE_CHECKING:
    from memstrata.config import Settings
    from memstrata.llms.base import LLM
    from memstrata.remote.costs import CostLog
    from memstrata.remote.provider import RemoteOptions

_RemoteOptionsT = TypeVar("_RemoteOptionsT", bound="RemoteOptions")

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


def remote_options(
    settings: Settings,
    options_type: type[_RemoteOptionsT],
    *,
    default_base_url: str,
    vendor_host: str,
    missing_key: str,
) -> _RemoteOptionsT:
    """A remote provider's options from the ``llm_*`` settings; ``missing_key`` is the ConfigError's message
    when no key is set and the base URL is the vendor's own API (at ``vendor_host``)."""
    model = required_model(settings)
    base_url = settings.llm_base_url or default_base_url
    has_key = settings.llm_api_key is not None and bool(settings.llm_api_key.get_secret_value())
    if not has_key and vendor_host in base_url:
        raise ConfigError(missing_key)
    return options_type(
        model=model,
        base_url=base_url,
        api_key=settings.llm_api_key if has_key else None,
        timeout_seconds=settings.llm_timeout_seconds,
        max_retries=settings.llm_max_retries,
    )
