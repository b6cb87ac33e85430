"""A real HTTP server on 127.0.0.1 speaking the OpenAI-compatible and Anthropic wire formats, with scripted replies.

Tests talk to it over real sockets, so the providers' HTTP code runs for real::

    server.queue(CHAT, "hello")                                  # a text reply in the route's format
    server.queue(CHAT, Reply.error(429, retry_after=2), "ok")    # rate limited once, then a reply
    server.queue(MESSAGES, Reply.text("hi", usage={"input_tokens": 5, "output_tokens": 1}))
    llm = OpenAICompatLLM(OpenAIOptions(model="m", base_url=server.openai_url))
    server.requests_to(CHAT)[-1].body["messages"]                # what the client sent

Each route has a queue of replies, used in order; when a route's queue is empty the server
answers with a default: chat routes echo the last user message, ``/v1/embeddings`` returns
deterministic unit-free vectors. Every request is recorded (path, lower-cased headers,
parsed JSON body). Use it through the ``llm_server`` fixture in ``tests/conftest.py``.
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

CHAT = "/v1/chat/completions"
"""OpenAI-compatible chat completions."""
EMBEDDINGS = "/v1/embeddings"
"""OpenAI-compatible embeddings."""
MESSAGES = "/v1/messages"
"""Anthropic Messages API."""


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a model text, a JSON body, raw bytes, or an error status, optionally delayed."""

    status: int = 200
    text: str | None = None
    """Model text, wrapped in the route's reply format (chat completion or Anthropic message)."""
    body: Any = None
    """A JSON body sent as is (wins over ``text``)."""
    raw: bytes | None = None
    """Bytes sent as is, e.g. malformed JSON (wins over ``body``)."""
    usage: Mapping[str, Any] | None = None
    """Usage in the route's wire format for ``text`` replies; default: word counts."""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0
    """Wait this long before answering (to make clients time out)."""

    @classmethod
    def of_text(cls, text: str, *, usage: Mapping[str, Any] | None = None, delay_seconds: float = 0.0) -> Reply:
        """A successful reply whose model output is ``text``."""
        return cls(text=text, usage=usage, delay_seconds=delay_seconds)

    @classmethod
    def of_json(cls, body: Any, *, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
        """A JSON body sent verbatim."""
        return cls(status=status, body=body, headers=dict(headers or {}))

    @classmethod
    def error(cls, status: int, message: str = "scripted error", *, retry_after: float | str | None = None) -> Reply:
        """An error status with an OpenAI/Anthropic-style error body (and ``Retry-After`` if given)."""
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        body = {"type": "error", "error": {"type": "scripted_error", "message": message}}
        return cls(status=status, body=body, headers=headers)

    @classmethod
    def malformed(cls, raw: bytes = b'{"choices": [{"message": ') -> Reply:
        """A 200 whose body is not valid JSON."""
        return cls(raw=raw)

    @classmethod
    def slow(cls, delay_seconds: float, text: str = "too late") -> Reply:
        """A text reply sent only after ``delay_seconds``."""
        return cls(text=text, delay_seconds=delay_seconds)

    @classmethod
    def dropped(cls) -> Reply:
        """No reply at all: the connection is closed once the request is read (status 0 says so)."""
        return cls(status=0, raw=b"")


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: Mapping[str, str]
    """Header names lower-cased."""
    body: Any
    """The parsed JSON body, or None if it was not JSON."""
    raw: bytes


class LLMServer:
    """A threaded HTTP server on 127.0.0.1 (port chosen by the OS) with per-route reply queues."""

    def __init__(self, *, embedding_dimension: int = 8) -> None:
        self.embedding_dimension = embedding_dimension
        self._queues: dict[str, deque[Reply]] = {}
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._http.daemon_threads = True
        self._http.owner = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, name="llm-server", daemon=True
        )
        self._thread.start()

    def __enter__(self) -> LLMServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the base URL for Anthropic clients."""
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: the base URL for OpenAI-compatible clients."""
        return f"{self.url}/v1"

    @property
    def anthropic_url(self) -> str:
        """The base URL for Anthropic clients (they add ``/v1/messages``)."""
        return self.url

    def queue(self, path: str, *replies: Reply | str | Mapping[str, Any]) -> None:
        """Append replies for ``path``: a Reply, a str (model text) or a dict (JSON body)."""
        items = [_as_reply(reply) for reply in replies]
        with self._lock:
            self._queues.setdefault(path, deque()).extend(items)

    def pending(self, path: str) -> int:
        """How many scripted replies for ``path`` are still unused."""
        with self._lock:
            return len(self._queues.get(path, ()))

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """The requests received on ``path``, in order."""
        return [request for request in self.requests if request.path == path]

    def reset(self) -> None:
        """Forget queued replies and recorded requests."""
        with self._lock:
            self._queues.clear()
            self._requests.clear()

    def close(self) -> None:
        """Stop serving (delayed replies are cut short) and free the port."""
        self._stopping.set()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    # -- used by the handler ----------------------------------------------------------

    def _record(self, request: RecordedRequest) -> Reply | None:
        with self._lock:
            self._requests.append(request)
            queue = self._queues.get(request.path)
            return queue.popleft() if queue else None

    def _answer(self, request: RecordedRequest) -> tuple[int, dict[str, str], bytes]:
        scripted = self._record(request)
        reply = scripted if scripted is not None else self._default(request)
        if reply.delay_seconds:
            self._stopping.wait(reply.delay_seconds)
        headers = {"Content-Type": "application/json", **reply.headers}
        if reply.raw is not None:
            return reply.status, headers, reply.raw
        body = reply.body if reply.body is not None else self._wrap(request, reply)
        return reply.status, headers, json.dumps(body).encode("utf-8")

    def _default(self, request: RecordedRequest) -> Reply:
        if request.path == EMBEDDINGS:
            return Reply.of_json(self._embeddings(request))
        if request.path in (CHAT, MESSAGES):
            return Reply.of_text(f"echo: {_last_user_text(request.body)}")
        return Reply.error(404, f"no route {request.path}")

    def _wrap(self, request: RecordedRequest, reply: Reply) -> Any:
        body = request.body if isinstance(request.body, dict) else {}
        model = str(body.get("model") or "fake-model")
        text = reply.text or ""
        prompt = json.dumps([body.get("system", ""), body.get("messages", [])])
        prompt_words = len(prompt.split())
        if request.path == MESSAGES:
            usage = reply.usage or {"input_tokens": prompt_words, "output_tokens": len(text.split())}
            return {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": dict(usage),
            }
        usage = reply.usage or {
            "prompt_tokens": prompt_words,
            "completion_tokens": len(text.split()),
            "total_tokens": prompt_words + len(text.split()),
        }
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": dict(usage),
        }

    def _embeddings(self, request: RecordedRequest) -> dict[str, Any]:
        body = request.body if isinstance(request.body, dict) else {}
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else list(texts)
        dimension = int(body.get("dimensions") or self.embedding_dimension)
        data = [
            {"object": "embedding", "index": index, "embedding": fake_vector(str(text), dimension)}
            for index, text in enumerate(texts)
        ]
        tokens = sum(len(str(text).split()) for text in texts)
        return {
            "object": "list",
            "model": body.get("model", "fake-embedder"),
            "data": data,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _as_reply(reply: Reply | str | Mapping[str, Any]) -> Reply:
    if isinstance(reply, Reply):
        return reply
    return Reply.of_text(reply) if isinstance(reply, str) else Reply.of_json(reply)


def fake_vector(text: str, dimension: int) -> list[float]:
    """A deterministic pseudo-random vector for ``text`` (not normalised, so clients must normalise)."""
    values: list[float] = []
    counter = 0
    while len(values) < dimension:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values += [(number % 2000) / 100.0 - 10.0 for number in struct.unpack("<8I", digest)]
        counter += 1
    return values[:dimension]


def _last_user_text(body: Any) -> str:
    messages = body.get("messages", []) if isinstance(body, dict) else []
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            return str(content)
    return ""


class _Handler(BaseHTTPRequestHandler):
    server_version = "fake-llm/1.0"

    def do_POST(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        request = RecordedRequest(
            method=self.command,
            path=self.path.split("?", 1)[0],
            headers={name.lower(): value for name, value in self.headers.items()},
            body=parsed,
            raw=raw,
        )
        owner: LLMServer = self.server.owner  # type: ignore[attr-defined]
        status, headers, payload = owner._answer(request)
        if status == 0:  # Reply.dropped()
            self.close_connection = True
            return
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)
