"""What the REST API returns about whose memories exist: the tenant's users and a user's sessions."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from memstrata.server.schemas import ResponseModel


class UsersResponse(ResponseModel):
    """The users of your tenant with stored memories, in code point order."""

    users: list[str]


class SessionOut(ResponseModel):
    """One session of a user (or space): how many memories it holds and when they were said."""

    session_id: str | None = Field(description="The session's id; null gathers the memories stored without one.")
    turns: int
    first_at: datetime
    last_at: datetime


class SessionsResponse(ResponseModel):
    """A user's (or space's) sessions, most recently active first."""

    user_id: str | None
    space: str | None
    sessions: list[SessionOut]
    is_complete: bool = Field(
        description="false when the memory holds more turns than one listing reads (the newest are counted)."
    )
