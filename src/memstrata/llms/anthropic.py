"""Anthropic's Messages API over plain HTTP, with the memory block marked for prompt caching."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field

from memstrata.errors import ProviderError
from memstrata.llms import remote_options
from memstrata.llms.base import ChatMessage, Completion, Usage
from memstrata.llms.json_output import json_instruction
from memstrata.llms.provider import ChatRequest, LLMBase
from memstrata.remote.costs import CostLog
from memstrata.remote.http import Sleep, as_object, token_count
from memstrata.remote.provider import BaseUrl, ProviderClient, RemoteOptions

if TYPE_CHECKING:
    from memstrata.config import Settings

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"


class AnthropicOptions(RemoteOptions):
    """How to reach Anthropic's API (or a server speaking its Messages format)."""

    base_url: BaseUrl = DEFAULT_BASE_URL
    max_tokens: int = Field(default=4096, ge=1, description="Reply limit when the caller gives none (required).")


class AnthropicLLM(LLMBase):
    """Messages API calls: ``system`` as text blocks, the instructions first, then the cacheable memory block."""

    def __init__(
        self, options: AnthropicOptions, *, cost_log: CostLog | None = None, sleep: Sleep = time.sleep
    ) -> None:
        self._options = options
        self._remote = ProviderClient(
            options,
            provider="anthropic",
            cost_log=cost_log,
            sleep=sleep,
            headers={"anthropic-version": API_VERSION},
            key_header="x-api-key",
            key_prefix="",
            generates=True,
        )
        # Accept a base URL given with or without the version segment.
        self._path = "messages" if options.base_url.endswith("/v1") else "v1/messages"

    def __repr__(self) -> str:
        return f"AnthropicLLM(model={self._options.model!r}, base_url={self._options.base_url!r})"

    @property
    def name(self) -> str:
        """``anthropic:<model>``."""
        return f"anthropic:{self._options.model}"

    def close(self) -> None:
        """Close pooled connections."""
        self._remote.close()

    def _complete(self, messages: Sequence[ChatMessage], request: ChatRequest) -> Completion:
        instructions = request.system
        if request.json_schema is not None:
            instructions = "\n\n".join(part for part in (request.system, json_instruction(request.json_schema)) if part)
        body: dict[str, Any] = {
            "model": self._options.model,
            "max_tokens": request.max_tokens or self._options.max_tokens,
            "messages": [{"role": message.role, "content": message.content} for message in messages],
        }
        blocks: list[dict[str, Any]] = []
        if instructions:
            blocks.append({"type": "text", "text": instructions})
        if request.memory:
            blocks.append({"type": "text", "text": request.memory, "cache_control": {"type": "ephemeral"}})
        if blocks:
            body["system"] = blocks
        payload, latency_ms = self._remote.http.post(self._path, body)
        completion = self._parse(payload)
        self._remote.record(
            model=completion.model, purpose=request.purpose, usage=completion.usage, latency_ms=latency_ms
        )
        return completion

    def _parse(self, payload: Mapping[str, Any]) -> Completion:
        content = payload.get("content")
        if not isinstance(content, list):
            raise ProviderError(
                f"{self._remote.http.base_url}/{self._path} replied without content blocks; "
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
    options = remote_options(
        settings,
        AnthropicOptions,
        default_base_url=DEFAULT_BASE_URL,
        vendor_host="api.anthropic.com",
        missing_key="Anthropic's API needs a key: set MEMSTRATA_LLM_API_KEY",
    )
    return AnthropicLLM(options, cost_log=cost_log or CostLog.for_settings(settings))
