"""What the REST API accepts and returns about shared spaces: the spaces, grants, trust and shares."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from memstrata.server.schemas import Identifier, MemoryOut, RequestModel, ResponseModel

AccessName = Literal["read", "write", "admin"]
MAX_SHARED = 100
"""Most memories one share copies."""


class SpaceRequest(RequestModel):
    """``Memory.create_space``: the acting agent creates it and gets admin on it."""

    space: Identifier = Field(description="The new space's name, unique in your tenant.")
    description: str | None = Field(default=None, description="What the space is for (at most 4096 bytes).")


class GrantRequest(RequestModel):
    """``Memory.grant``: what an agent may do in a space."""

    access: AccessName = Field(
        description="read: search, context, get, history, the tiers; write: also add, delete, chat, share into it; "
        "admin: also grant, revoke, forget, prune, delete the space."
    )


class TrustRequest(RequestModel):
    """``Memory.set_trust``: how much another agent's memories count when the acting agent reads them."""

    weight: float = Field(ge=0.0, le=1.0, strict=True, description="0 to 1; agents without a weight count 1.")


class ShareRequest(RequestModel):
    """``Memory.share``: copy memories of a user (or of another space) into the space; the sources stay."""

    ids: Annotated[list[Identifier], Field(min_length=1, max_length=MAX_SHARED)] = Field(
        description="The memories to copy (ids as add returned them)."
    )
    user_id: Identifier | None = Field(default=None, description="The user they are in (or name `space`).")
    space: Identifier | None = Field(default=None, description="The space they are in, in place of `user_id`.")


class SpaceOut(ResponseModel):
    """A shared space."""

    space: str
    description: str | None
    created_at: datetime


class SpacesResponse(ResponseModel):
    """Spaces, by name."""

    spaces: list[SpaceOut]


class GrantOut(ResponseModel):
    """An agent's access to a space."""

    space: str
    agent_id: str
    access: AccessName
    granted_at: datetime


class GrantsResponse(ResponseModel):
    """Who may use a space, by agent id."""

    grants: list[GrantOut]


class TrustOut(ResponseModel):
    """The weights the acting agent gives other agents' memories (agents not listed count 1)."""

    agent_id: str
    trust: dict[str, float]


class ShareResponse(ResponseModel):
    """The copies in the space (the same ones again when shared again)."""

    memories: list[MemoryOut]
