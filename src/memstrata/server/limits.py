"""The request body limit, enforced before anything parses the body."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Answers a request whose key would be refused with its 401/403 response, else None.
KeyCheck = Callable[[Request], Awaitable[Response | None]]
#: The one route that takes no key: its oversized bodies get 413 whoever sends them.
KEYLESS_PATHS = frozenset({"/v1/health"})


class BodyLimit:
    """ASGI middleware: a body over ``max_bytes`` gets 413 and never reaches the app.

    A declared ``Content-Length`` over the limit is refused before a byte is read; a
    chunked body is read up to the limit and refused as soon as it passes it. A caller
    whose key ``refuse`` would turn away gets that 401/403 instead, so what it learns
    never depends on the body it sent (the key is checked first, as everywhere).
    """

    def __init__(self, app: ASGIApp, max_bytes: int, refuse: KeyCheck | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.refuse is not None and scope["path"] not in KEYLESS_PATHS:
            refused = await self.refuse(Request(scope))
            if refused is not None:
                # The rest of the body is never read, so the connection cannot carry another request.
                refused.headers["connection"] = "close"
                await refused(scope, receive, send)
                return
        message = (
            f"the request body is larger than {self.max_bytes:,} bytes; send less "
            "(the server's operator sets server_max_body_bytes)"
        )
        await send_error(send, 413, "payload_too_large", message, close=True)


async def send_error(send: Send, status: int, code: str, message: str, *, close: bool = False) -> None:
    """An error response in the API's one error shape, from ASGI middleware (before any route runs)."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
