"""Checks made before a request's body is read: the Host of a keyless server, the import's media type."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from memstrata.server.auth import without_a_valid_key
from memstrata.server.limits import send_error

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
IMPORT_PATH = "/v1/import"
JSONL_TYPES = frozenset({"application/x-ndjson", "application/jsonl", "application/json-lines"})


class Gate:
    """ASGI middleware: refuses, before the body is read, what no route should see.

    With ``anonymous`` on (a keyless server, or ``memstrata ui``), a Host header that is not a
    loopback name or the configured host gets 400 (DNS rebinding); ``POST /v1/import`` takes only
    ``application/x-ndjson``, a type a browser cannot send cross-site without asking first. See docs/rest.md.
    """

    def __init__(self, app: ASGIApp, *, anonymous: bool, host: str) -> None:
        self.app = app
        self.hosts = _allowed_hosts(host) if anonymous else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = _headers(scope["headers"])
            # A browser always names the host; a request without one (HTTP/1.0, a health check) is no page's.
            host = headers.get("host")
            if self.hosts is not None and host is not None and _host_name(host) not in self.hosts:
                await send_error(send, 400, "bad_request", _HOST_MESSAGE)
                return
            if scope["path"] == IMPORT_PATH and scope["method"] == "POST":
                media = headers.get("content-type", "").split(";")[0].strip().lower()
                if media not in JSONL_TYPES:
                    # A caller without a valid key learns nothing about the route: 401/403 first.
                    refused = await without_a_valid_key(Request(scope))
                    if refused is not None:
                        await refused(scope, receive, send)
                        return
                    message = f"send the export as Content-Type: application/x-ndjson, not {media or 'nothing'!r}"
                    await send_error(send, 415, "unsupported_media_type", message)
                    return
        await self.app(scope, receive, send)


_HOST_MESSAGE = (
    "this server takes requests without a key (server_allow_anonymous) or is a local inspector (memstrata ui),"
    " so it answers only requests addressed to this machine (localhost, 127.0.0.1, [::1] or its server_host)"
)


def _allowed_hosts(host: str) -> frozenset[str]:
    configured = host.strip().strip("[]").lower()
    return LOOPBACK_NAMES if configured in WILDCARD_HOSTS else LOOPBACK_NAMES | {configured}


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in raw}


def _host_name(header: str) -> str:
    """The name in a Host header, without its port: ``[::1]:8420`` → ``::1``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    name = header.rpartition(":")[0] if header.count(":") == 1 else header
    return name.removesuffix(".")  # "localhost." names the same host
