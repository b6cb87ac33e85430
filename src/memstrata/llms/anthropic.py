"""Anthropic's Messages API over plain HTTP, with the memory block marked for prompt caching."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from memstrata.errors import ConfigError, ProviderError
from memstrata.llms import required_model
from memstrata.llms.base import ChatMessage, Completion, Usage
from memstrata.llms.json_output import complete_json, json_instruction
from memstrata.remote.costs import CostLog
from memstrata.remote.http import JsonClient, RetryPolicy, Sleep, as_object, check_api_key, check_base_url, token_count

if TYPE_CHECKING:
    from memstrata.config import Settings

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"


class AnthropicOptions(BaseModel):
    """How to reach Anthropic's API (or a server speaking its Messages format)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    base_url: str = DEFAULT_BASE_URL
    api_key: SecretStr | None = None
    timeout_seconds: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=20)
    max_tokens: int = Field(default=4096, ge=1, description="Reply limit when the caller gives none (required).")

    @field_validator("base_url")
    @classmethod
    def _valid_url(cls, value: str) -> str:
        return check_base_url(value)

    @field_validator("api_key")
    @classmethod
    def _usable_key(cls, value: SecretStr | None) -> SecretStr | None:
        return check_api_key(value)


class AnthropicLLM:
    """Messages API calls: ``system`` as text blocks, the instructions first, then the cacheable memory block."""

    def __init__(
        self, options: AnthropicOptions, *, cost_log: CostLog | None = None, sleep: Sleep = time.sleep
    ) -> None:
        self._options = options
        self._cost_log = cost_log
        headers = {"Accept": "application/json", "anthropic-version": API_VERSION}
        if options.api_key is not None and options.api_key.get_secret_value():
            headers["x-api-key"] = options.api_key.get_secret_value()
        self._http = JsonClient(
            options.base_url,
            model=options.model,
            headers=headers,
            secret=options.api_key,
            timeout_seconds=options.timeout_seconds,
            retry=RetryPolicy(max_retries=options.max_retries),
            sleep=sleep,
        )
        # Accept a base URL given with or without the version segment.
        self._path = "messages" if options.base_url.endswith("/v1") else "v1/messages"

    def __repr__(self) -> str:
        return f"AnthropicLLM(model={self._options.model!r}, base_url={self._options.base_url!r})"

    @property
    def name(self) -> str:
        """``anthropic:<model>``."""
        return f"anthropic:{self._options.model}"

    @property
    def is_available(self) -> bool:
        """Always: failures surface as ProviderError when called."""
        return True

    def close(self) -> None:
        """Close pooled connections."""
        self._http.close()

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
        instructions = system
        if json_schema is not None:
            instructions = "\n\n".join(part for part in (system, json_instruction(json_schema)) if part)
        if json_schema is None:
            return self._call(messages, instructions, memory, max_tokens, purpose)
        return complete_json(
            lambda conversation: self._call(conversation, instructions, memory, max_tokens, purpose),
            messages,
            provider=self.name,
        )

    def _call(
        self,
        messages: Sequence[ChatMessage],
        instructions: str | None,
        memory: str | None,
        max_tokens: int | None,
        purpose: str,
    ) -> Completion:
        body: dict[str, Any] = {
            "model": self._options.model,
            "max_tokens": max_tokens or self._options.max_tokens,
            "messages": [{"role": message.role, "content": message.content} for message in messages],
        }
        blocks: list[dict[str, Any]] = []
        if instructions:
            blocks.append({"type": "text", "text": instructions})
        if memory:
            blocks.append({"type": "text", "text": memory, "cache_control": {"type": "ephemeral"}})
        if blocks:
            body["system"] = blocks
        payload, latency_ms = self._http.post(self._path, body)
        completion = self._parse(payload)
        if self._cost_log is not None:
            self._cost_log.record(
                provider="anthropic",
                model=completion.model,
                purpose=purpose,
                usage=completion.usage,
                latency_ms=latency_ms,
            )
        return completion

    def _parse(self, payload: Mapping[str, Any]) -> Completion:
        content = payload.get("content")
        if not isinstance(content, list):
            raise ProviderError(
                f"{self._http.base_url}/{self._path} replied without content blocks; "
                "check that MEMSTRATA_LLM_BASE_URL points at Anthropic's API"
            )
        text = "".join(
            str(block.get("text", "")) for block in content if isinstance(block, dict) and block.get("type") == "text"
        )
        usage = as_object(payload.get("usage"))
        cache_read = token_count(usage.get("cache_read_input_tokens"))
        cache_write = token_count(usage.get("cache_creation_input_tokens"))
        # Anthropic counts cache reads and writes apart from input_tokens; Usage.input_tokens includes them.
        return Completion(
            text=text,
            model=str(payload.get("model") or self._options.model),
            usage=Usage(
                input_tokens=token_count(usage.get("input_tokens")) + cache_read + cache_write,
                output_tokens=token_count(usage.get("output_tokens")),
                cached_tokens=cache_read,
            ),
        )


def from_settings(settings: Settings, *, cost_log: CostLog | None = None) -> AnthropicLLM:
    """The registry's factory: options from ``llm_*`` settings, calls logged in the data dir."""
    model = required_model(settings)
    base_url = settings.llm_base_url or DEFAULT_BASE_URL
    has_key = settings.llm_api_key is not None and bool(settings.llm_api_key.get_secret_value())
    if not has_key and "api.anthropic.com" in base_url:
        raise ConfigError("Anthropic's API needs a key: set MEMSTRATA_LLM_API_KEY")
    options = AnthropicOptions(
        model=model,
        base_url=base_url,
        api_key=settings.llm_api_key if has_key else None,
        timeout_seconds=settings.llm_timeout_seconds,
        max_retries=settings.llm_max_retries,
    )
    return AnthropicLLM(options, cost_log=cost_log or CostLog.for_settings(settings))
