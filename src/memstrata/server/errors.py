"""Errors mapped to HTTP once, in one table; every error body is ``{"error": {"code", "message"}}``.

Client errors (4xx) carry the core's message, which says how to fix the request. Server
errors (5xx) carry a generic message: paths, SQL and stack traces stay in the server log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match

from memstrata.errors import (
    AccessDenied,
    ConfigError,
    EmbeddingError,
    IdConflict,
    InvalidInput,
    LLMRequired,
    MemstrataError,
    NotFound,
    ProviderError,
    StorageError,
)

logger = logging.getLogger("memstrata.server")

_MAX_DETAILS = 20
#: Answers a request whose key would be refused with its 401/403 response, else None (``auth.without_a_valid_key``).
KeyCheck = Callable[[Request], Awaitable[JSONResponse | None]]


class Unauthorized(Exception):
    """No API key, or one the server does not know (401)."""


class Forbidden(Exception):
    """A revoked API key (403)."""


#: Most specific first: (error, status, code, message for 5xx or None to pass the core's message on).
STATUSES: tuple[tuple[type[MemstrataError], int, str, str | None], ...] = (
    (IdConflict, 409, "id_conflict", None),
    (InvalidInput, 422, "invalid_input", None),
    (NotFound, 404, "not_found", None),
    (AccessDenied, 403, "access_denied", None),
    (ProviderError, 502, "provider_error", "the LLM provider failed or answered unusably; try again later"),
    (ConfigError, 503, "misconfigured", "the server is misconfigured; its operator can see why in the server log"),
    (StorageError, 503, "storage_unavailable", "the store is unavailable; try again later"),
    (EmbeddingError, 503, "embedding_unavailable", "the embedding model is unavailable; try again later"),
)

_CODES_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    details: list[dict[str, str]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The one error body every failure gets."""
    body: dict[str, Any] = {"code": code, "message": _printable(message)}
    if details:
        body["details"] = [{key: _printable(value) for key, value in item.items()} for item in details]
    return JSONResponse({"error": body}, status_code=status, headers=dict(headers or {}))


def _printable(text: str) -> str:
    """Text that encodes as UTF-8 whatever a caller sent (lone surrogates become escapes)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _tenant_clean(request: Request, message: str) -> str:
    tenant = getattr(request.state, "tenant", None)
    return tenant.clean(message) if tenant is not None else message


def status_of(error: MemstrataError) -> tuple[int, str, str]:
    """(status, code, message a client may see) for a memstrata error."""
    if isinstance(error, LLMRequired):
        return 501, "llm_required", f"this feature needs an LLM and the server has none configured: {error}"
    for kind, status, code, generic in STATUSES:
        if isinstance(error, kind):
            return status, code, generic or str(error)
    return 500, "internal_error", "internal server error"


async def _memstrata_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, MemstrataError)
    status, code, message = status_of(error)
    if status >= 500:
        logger.error("%s %s failed: %s", request.method, request.url.path, error, exc_info=error)
    return error_response(status, code, _tenant_clean(request, message))


def _validation_error(refuse: KeyCheck) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    async def handle(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        # FastAPI reads the body before the key is checked: a caller without a valid key gets
        # 401/403 here too, never feedback on a body it may not send.
        refused = await refuse(request)
        return refused if refused is not None else _invalid_request(error)

    return handle


def _invalid_request(error: RequestValidationError) -> JSONResponse:
    unreadable = [item for item in error.errors() if item.get("type") == "json_invalid"]
    if unreadable:
        reason = str(unreadable[0].get("ctx", {}).get("error") or unreadable[0].get("msg", "invalid JSON"))
        return error_response(400, "bad_request", f"the request body is not valid JSON: {reason}")
    details = [
        {"location": ".".join(str(part) for part in item.get("loc", ())), "message": str(item.get("msg", "invalid"))}
        for item in error.errors()[:_MAX_DETAILS]
    ]
    summary = "; ".join(f"{item['location']}: {item['message']}" for item in details[:3]) or "invalid request"
    return error_response(422, "invalid_request", summary, details=details)


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    code = _CODES_BY_STATUS.get(error.status_code, "http_error")
    headers = dict(error.headers or {})
    if error.status_code == 405:
        allowed = _allowed_methods(request)
        if not allowed:  # "/v1/memories/" matched a route only as a memory id of nothing: no such path
            return error_response(404, _CODES_BY_STATUS.get(404, "not_found"), "Not Found")
        headers["Allow"] = ", ".join(allowed)
    return error_response(error.status_code, code, str(error.detail), headers=headers)


def _allowed_methods(request: Request) -> list[str]:
    """Every method the path supports (Starlette's 405 names only the first route that matched the path)."""
    methods: set[str] = set()
    for template, operations in request.app.openapi()["paths"].items():
        # A path parameter may itself contain "/" (a memory id) ...
        pattern = re.sub(r"\\{[^}]+\\}", ".+", re.escape(template))
        if re.fullmatch(pattern, request.url.path):
            methods.update(method.upper() for method in operations)
    # ... though most may not ("/v1/spaces/x/grants" is no space "x/grants"): the router has the last word.
    return sorted(method for method in methods if _routed(request, method))


def _routed(request: Request, method: str) -> bool:
    """Whether a route of the app takes ``method`` on the request's path."""
    scope = {**request.scope, "method": method}
    return any(route.matches(scope)[0] is Match.FULL for route in request.app.routes)


async def unauthorized(request: Request, error: Exception) -> JSONResponse:
    """The 401 response to ``error``."""
    return error_response(401, "unauthorized", str(error), headers={"WWW-Authenticate": "Bearer"})


async def forbidden(request: Request, error: Exception) -> JSONResponse:
    """The 403 response to ``error``."""
    return error_response(403, "forbidden", str(error))


async def _unexpected(request: Request, error: Exception) -> JSONResponse:
    logger.error("%s %s failed unexpectedly", request.method, request.url.path, exc_info=error)
    return error_response(500, "internal_error", "internal server error")


def install_error_handlers(app: FastAPI, refuse: KeyCheck) -> None:
    """Map every error a request can raise to its status, once; ``refuse`` answers an invalid body's unkeyed caller."""
    app.add_exception_handler(MemstrataError, _memstrata_error)
    app.add_exception_handler(RequestValidationError, _validation_error(refuse))
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Unauthorized, unauthorized)
    app.add_exception_handler(Forbidden, forbidden)
    app.add_exception_handler(Exception, _unexpected)
