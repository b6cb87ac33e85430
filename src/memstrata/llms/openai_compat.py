"""OpenAI-compatible chat completions over plain HTTP: OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, Groq."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from memstrata.errors import ConfigError, ProviderError
from memstrata.llms import required_model
from memstrata.llms.base import ChatMessage, Completion, Usage
from memstrata.llms.json_output import complete_json, json_instruction
from memstrata.remote.costs import CostLog
from memstrata.remote.http import (
    HttpReply,
    JsonClient,
    RetryPolicy,
    Sleep,
    as_object,
    check_api_key,
    check_base_url,
    token_count,
)

if TYPE_CHECKING:
    from memstrata.config import Settings

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
CHAT_PATH = "chat/completions"
OutputMode = Literal["json_schema", "json_object", "none"]
#: Structured-output requests tried in turn; a server that rejects one is sent the next from then on.
OUTPUT_MODES: tuple[OutputMode, ...] = ("json_schema", "json_object", "none")
_REJECTABLE_STATUSES = (400, 422)
_MAX_ADJUSTMENTS = len(OUTPUT_MODES) + 1


class OpenAIOptions(BaseModel):
    """How to reach an OpenAI-compatible server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    base_url: str = DEFAULT_BASE_URL
    api_key: SecretStr | None = None
    timeout_seconds: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=20)

    @field_validator("base_url")
    @classmethod
    def _valid_url(cls, value: str) -> str:
        return check_base_url(value)

    @field_validator("api_key")
    @classmethod
    def _usable_key(cls, value: SecretStr | None) -> SecretStr | None:
        return check_api_key(value)


class OpenAICompatLLM:
    """Chat completions with the system instructions, then the memory block, in the first system message."""

    def __init__(self, options: OpenAIOptions, *, cost_log: CostLog | None = None, sleep: Sleep = time.sleep) -> None:
        self._options = options
        self._cost_log = cost_log
        headers = {"Accept": "application/json"}
        if options.api_key is not None and options.api_key.get_secret_value():
            headers["Authorization"] = f"Bearer {options.api_key.get_secret_value()}"
        self._http = JsonClient(
            options.base_url,
            model=options.model,
            headers=headers,
            secret=options.api_key,
            timeout_seconds=options.timeout_seconds,
            retry=RetryPolicy(max_retries=options.max_retries),
            sleep=sleep,
        )
        self._lock = threading.Lock()
        self._mode_index = 0  # what structured output this server accepts, learned once
        self._token_field = "max_tokens"

    def __repr__(self) -> str:
        return f"OpenAICompatLLM(model={self._options.model!r}, base_url={self._options.base_url!r})"

    @property
    def name(self) -> str:
        """``openai:<model>``."""
        return f"openai:{self._options.model}"

    @property
    def is_available(self) -> bool:
        """Always: failures surface as ProviderError when called."""
        return True

    @property
    def output_mode(self) -> OutputMode:
        """The structured-output request this server is sent (it steps down when a server rejects one)."""
        return OUTPUT_MODES[self._mode_index]

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
        if json_schema is None:
            return self._call(
                messages, system=system, memory=memory, schema=None, max_tokens=max_tokens, purpose=purpose
            )
        return complete_json(
            lambda conversation: self._call(
                conversation, system=system, memory=memory, schema=json_schema, max_tokens=max_tokens, purpose=purpose
            ),
            messages,
            provider=self.name,
        )

    def _call(
        self,
        messages: Sequence[ChatMessage],
        *,
        system: str | None,
        memory: str | None,
        schema: Mapping[str, Any] | None,
        max_tokens: int | None,
        purpose: str,
    ) -> Completion:
        reply: HttpReply | None = None
        for _ in range(_MAX_ADJUSTMENTS):
            mode = self.output_mode if schema is not None else "none"
            token_field = self._token_field
            body = self._body(
                messages,
                system=system,
                memory=memory,
                schema=schema,
                mode=mode,
                max_tokens=max_tokens,
                token_field=token_field,
            )
            reply = self._http.send(CHAT_PATH, body)
            if reply.status not in _REJECTABLE_STATUSES:
                break
            if mode != "none" and _mentions(reply, "response_format", "json_schema", "json_object"):
                self._step_down(mode)
            elif max_tokens is not None and token_field == "max_tokens" and _mentions(reply, "max_completion_tokens"):
                self._token_field = "max_completion_tokens"  # OpenAI's reasoning models refuse max_tokens
            else:
                break
        assert reply is not None
        payload = self._http.check(CHAT_PATH, reply)
        completion = self._parse(payload)
        if self._cost_log is not None:
            self._cost_log.record(
                provider="openai",
                model=completion.model,
                purpose=purpose,
                usage=completion.usage,
                latency_ms=reply.elapsed_ms,
            )
        return completion

    def _body(
        self,
        messages: Sequence[ChatMessage],
        *,
        system: str | None,
        memory: str | None,
        schema: Mapping[str, Any] | None,
        mode: OutputMode,
        max_tokens: int | None,
        token_field: str,
    ) -> dict[str, Any]:
        # Instructions first and the memory block after them, so the prompt prefix stays stable and cacheable.
        parts = [system] if system else []
        if schema is not None and mode != "json_schema":
            parts.append(json_instruction(schema))
        if memory:
            parts.append(memory)
        wire: list[dict[str, Any]] = [{"role": "system", "content": "\n\n".join(parts)}] if parts else []
        wire += [{"role": message.role, "content": message.content} for message in messages]
        body: dict[str, Any] = {"model": self._options.model, "messages": wire}
        if max_tokens is not None:
            body[token_field] = max_tokens
        if schema is not None and mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(schema), "schema": dict(schema), "strict": False},
            }
        elif schema is not None and mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        return body

    def _step_down(self, rejected: OutputMode) -> None:
        with self._lock:
            if self.output_mode == rejected:
                self._mode_index += 1
                logger.info(
                    "%s rejected response_format %s; sending %s from now on",
                    self._http.base_url,
                    rejected,
                    self.output_mode,
                )

    def _parse(self, payload: Mapping[str, Any]) -> Completion:
        choices = payload.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(message, dict):
            raise ProviderError(
                f"{self._http.base_url}/{CHAT_PATH} replied without a message; "
                "check that MEMSTRATA_LLM_BASE_URL points at an OpenAI-compatible API (it usually ends in /v1)"
            )
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        if content is None and message.get("refusal"):
            raise ProviderError(f"{self.name} refused to answer: {message['refusal']}")
        usage = as_object(payload.get("usage"))
        details = as_object(usage.get("prompt_tokens_details"))
        return Completion(
            text=str(content or ""),
            model=str(payload.get("model") or self._options.model),
            usage=Usage(
                input_tokens=token_count(usage.get("prompt_tokens")),
                output_tokens=token_count(usage.get("completion_tokens")),
                cached_tokens=token_count(details.get("cached_tokens")),
            ),
        )


def from_settings(settings: Settings, *, cost_log: CostLog | None = None) -> OpenAICompatLLM:
    """The registry's factory: options from ``llm_*`` settings, calls logged in the data dir."""
    model = required_model(settings)
    base_url = settings.llm_base_url or DEFAULT_BASE_URL
    has_key = settings.llm_api_key is not None and bool(settings.llm_api_key.get_secret_value())
    if not has_key and "api.openai.com" in base_url:
        raise ConfigError(
            "OpenAI's API needs a key: set MEMSTRATA_LLM_API_KEY, or point MEMSTRATA_LLM_BASE_URL at a local "
            "server such as http://localhost:11434/v1 (Ollama)"
        )
    options = OpenAIOptions(
        model=model,
        base_url=base_url,
        api_key=settings.llm_api_key if has_key else None,
        timeout_seconds=settings.llm_timeout_seconds,
        max_retries=settings.llm_max_retries,
    )
    return OpenAICompatLLM(options, cost_log=cost_log or CostLog.for_settings(settings))


def _mentions(reply: HttpReply, *words: str) -> bool:
    text = reply.text.lower()
    return any(word in text for word in words)


def _schema_name(schema: Mapping[str, Any]) -> str:
    title = str(schema.get("title") or "reply")
    name = "".join(character if character.isalnum() or character in "_-" else "_" for character in title)
    return name[:64] or "reply"
