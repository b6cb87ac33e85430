"""Tool parameters several tools share: who acts, and which shared space."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

AgentId = Annotated[
    str | None,
    Field(
        description="The agent acting. In a user's memory: only its memories (optional). With a shared space:"
        " the agent whose access is checked (required unless the server acts as one agent)."
    ),
]
SpaceName = Annotated[
    str | None,
    Field(
        description="A shared space's memory instead of a user's (not with user_id): what agents share. The agent"
        " acting needs read access to read, write to add, admin to forget."
    ),
]
