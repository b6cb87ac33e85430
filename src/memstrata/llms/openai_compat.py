"""OpenAI-compatible chat completions over plain HTTP: OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, Groq."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from memstrata.errors import ProviderError
from memstrata.llms import remote_options
from memstrata.llms.base import ChatMessage, Completion, Usage
from memstrata.llms.json_output import json_instruction
from memstrata.llms.provider import ChatRequest, LLMBase
from memstrata.remote.costs import CostLog
from memstrata.remote.http import HttpReply, Sleep, as_object, token_count
from memstrata.remote.provider import BaseUrl, ProviderClient, RemoteOptions

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


class OpenAIOptions(RemoteOptions):
    """How to reach an OpenAI-compatible server."""

    base_url: BaseUrl = DEFAULT_BASE_URL


class OpenAICompatLLM(LLMBase):
    """Chat completions with the system instructions, then the memory block, in the first system message."""

    def __init__(self, options: OpenAIOptions, *, cost_log: CostLog | None = None, sleep: Sleep = time.sleep) -> None:
        self._options = options
        self._remote = ProviderClient(options, provider="openai", cost_log=cost_log, sleep=sleep, generates=True)
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
    def output_mode(self) -> OutputMode:
        """The structured-output request this server is sent (it steps down when a server rejects one)."""
        return OUTPUT_MODES[self._mode_index]

    def close(self) -> None:
        """Close pooled connections."""
        self._remote.close()

    def _complete(self, messages: Sequence[ChatMessage], request: ChatRequest) -> Completion:
        reply: HttpReply | None = None
        for _ in range(_MAX_ADJUSTMENTS):
            mode = self.output_mode if request.json_schema is not None else "none"
            token_field = self._token_field
            body = chat_body(self._options.model, messages, request, mode=mode, token_field=token_field)
            reply = self._remote.http.send(CHAT_PATH, body)
            if reply.status not in _REJECTABLE_STATUSES:
                break
            if mode != "none" and _mentions(reply, "response_format", "json_schema", "json_object"):
                self._step_down(mode)
            elif (
                request.max_tokens is not None
                and token_field == "max_tokens"
                and _mentions(reply, "max_completion_tokens")
            ):
                self._token_field = "max_completion_tokens"  # OpenAI's reasoning models refuse max_tokens
            else:
                break
        assert reply is not None
        completion = parse_chat_reply(
            self._remote.http.check(CHAT_PATH, reply),
            name=self.name,
            model=self._options.model,
            where=f"{self._remote.http.base_url}/{CHAT_PATH}",
        )
        self._remote.record(
            model=completion.model, purpose=request.purpose, usage=completion.usage, latency_ms=reply.elapsed_ms
        )
        return completion

    def _step_down(self, rejected: OutputMode) -> None:
        with self._lock:
            if self.output_mode == rejected:
                self._mode_index += 1
                logger.info(
                    "%s rejected response_format %s; sending %s from now on",
                    self._remote.http.base_url,
                    rejected,
                    self.output_mode,
                )


def from_settings(settings: Settings, *, cost_log: CostLog | None = None) -> OpenAICompatLLM:
    """The registry's factory: options from ``llm_*`` settings, calls logged in the data dir."""
    options = remote_options(
        settings,
        OpenAIOptions,
        default_base_url=DEFAULT_BASE_URL,
        vendor_host="api.openai.com",
        missing_key=(
            "OpenAI's API needs a key: set MEMSTRATA_LLM_API_KEY, or point MEMSTRATA_LLM_BASE_URL at a local "
            "server such as http://localhost:11434/v1 (Ollama)"
        ),
    )
    return OpenAICompatLLM(options, cost_log=cost_log or CostLog.for_settings(settings))


def _mentions(reply: HttpReply, *words: str) -> bool:
    text = reply.text.lower()
    return any(word in text for word in words)


def _schema_name(schema: Mapping[str, Any]) -> str:
    title = str(schema.get("title") or "reply")
    name = "".join(character if character.isalnum() or character in "_-" else "_" for character in title)
    return name[:64] or "reply"


def chat_body(
    model: str, messages: Sequence[ChatMessage], request: ChatRequest, *, mode: OutputMode, token_field: str
) -> dict[str, Any]:
    """A chat completions request: instructions, then the memory block, in the first system message."""
    # Instructions first and the memory block after them, so the prompt prefix stays stable and cacheable.
    schema = request.json_schema
    parts = [request.system] if request.system else []
    if schema is not None and mode != "json_schema":
        parts.append(json_instruction(schema))
    if request.memory:
        parts.append(request.memory)
    wire: list[dict[str, Any]] = [{"role": "system", "content": "\n\n".join(parts)}] if parts else []
    wire += [{"role": message.role, "content": message.content} for message in messages]
    body: dict[str, Any] = {"model": model, "messages": wire}
    if request.max_tokens is not None:
        body[token_field] = request.max_tokens
    if schema is not None and mode == "json_schema":
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": _schema_name(schema), "schema": dict(schema), "strict": False},
        }
    elif schema is not None and mode == "json_object":
        body["response_format"] = {"type": "json_object"}
    return body


def parse_chat_reply(payload: Mapping[str, Any], *, name: str, model: str, where: str) -> Completion:
    """The completion in a chat completions reply, or a ProviderError saying what is wrong with it."""
    choices = payload.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise ProviderError(
            f"{where} replied without a message; "
            "check that MEMSTRATA_LLM_BASE_URL points at an OpenAI-compatible API (it usually ends in /v1)"
        )
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    if content is None and message.get("refusal"):
        raise ProviderError(f"{name} refused to answer: {message['refusal']}")
    usage = as_object(payload.get("usage"))
    details = as_object(usage.get("prompt_tokens_details"))
    return Completion(
        text=str(content or ""),
        model=str(payload.get("model") or model),
        usage=Usage(
            input_tokens=token_count(usage.get("prompt_tokens")),
            output_tokens=token_count(usage.get("completion_tokens")),
            cached_tokens=token_count(details.get("cached_tokens")),
        ),
    )
