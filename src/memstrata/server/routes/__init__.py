"""The REST routes, one module per resource."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query

from memstrata.server.schemas import ErrorOut
from memstrata.validation import MAX_IDENTIFIER_LENGTH

UserQuery = Annotated[
    str | None,
    Query(min_length=1, max_length=MAX_IDENTIFIER_LENGTH, description="Whose memory: a user (or name a space)."),
]
SpaceQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_IDENTIFIER_LENGTH,
        description="A shared space, in place of user_id: the request acts as its key's agent, which needs access.",
    ),
]
AgentQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_IDENTIFIER_LENGTH,
        description="Only this agent's memories of the user; in a space it may only name the acting agent.",
    ),
]
ScopeQuery = Annotated[
    str | None, Query(min_length=1, max_length=MAX_IDENTIFIER_LENGTH, description="Only this session or agent.")
]

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "No API key, or an unknown one"},
    403: {
        "model": ErrorOut,
        "description": "The API key was revoked, its role does not allow the call, or its agent lacks space access",
    },
    422: {"model": ErrorOut, "description": "The request is invalid; the message says how"},
    500: {"model": ErrorOut, "description": "Internal error (details only in the server log)"},
    503: {"model": ErrorOut, "description": "Storage, configuration or embedding model unavailable"},
}
"""Errors any authenticated route can answer with."""

BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    400: {"model": ErrorOut, "description": "The body could not be read (e.g. JSON nested too deeply)"},
    413: {"model": ErrorOut, "description": "The body is over server_max_body_bytes"},
}
"""Errors of routes that take a body."""

NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No such memory for that user or space, or no such space"}
}
SPACE_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut, "description": "No such space"}}
SEGMENT_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No such mid-term segment for that user or space, or no such space"}
}
CONFLICT: dict[int | str, dict[str, Any]] = {409: {"model": ErrorOut, "description": "The id names different content"}}
PROVIDER: dict[int | str, dict[str, Any]] = {
    501: {"model": ErrorOut, "description": "The feature needs an LLM and the server has none configured"},
    502: {"model": ErrorOut, "description": "The LLM provider failed"},
}
