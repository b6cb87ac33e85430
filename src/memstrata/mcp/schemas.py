"""What the MCP tools return as structured content: pydantic models (their JSON schemas are the tools' outputSchema).

A result over a shared space's memory has ``space`` set and ``user_id`` null.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


class Output(BaseModel):
    """Base of tool outputs."""

    model_config = ConfigDict(frozen=True)


class MemoryOut(Output):
    """One stored message."""

    id: str
    role: str
    content: str
    created_at: datetime
    session_id: str | None = None
    agent_id: str | None = None


class AddOut(Output):
    """``add_memory``: what was stored."""

    user_id: str | None
    space: str | None = None
    memories: list[MemoryOut]


class HitOut(Output):
    """One search result: a stored message (tier ``episodic``) or a derived item standing for several."""

    id: str
    tier: str
    content: str
    score: float
    role: str | None = None
    created_at: datetime | None = None
    session_id: str | None = None
    agent_id: str | None = None
    source_turn_ids: list[str] = []
    #: The shared space the hit comes from (null: the memory searched is a user's, and it is from there).
    space: str | None = None
    #: The agent that wrote it.
    written_by: str | None = None


class SearchOut(Output):
    """``search_memory``: the hits, best first."""

    user_id: str | None
    space: str | None = None
    query: str
    hits: list[HitOut]


class ContextItemOut(Output):
    """One piece of an assembled context."""

    kind: str
    tier: str
    id: str
    tokens: int
    source_turn_ids: list[str] = []
    is_abridged: bool = False
    space: str | None = None
    written_by: str | None = None


class ContextOut(Output):
    """``get_context``: the memory block and what it holds."""

    user_id: str | None
    space: str | None = None
    query: str
    text: str
    tokens: int
    token_budget: int
    omitted: int
    items: list[ContextItemOut]


class ForgetOut(Output):
    """``forget_memory``: what was deleted."""

    user_id: str | None
    space: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    deleted_turns: int


class CellOut(Output):
    """A long-term fact, preference, task ... and whether it still holds."""

    id: str
    kind: str
    content: str
    is_current: bool
    valid_from: datetime
    valid_to: datetime | None = None


class SegmentOut(Output):
    """A mid-term topic segment."""

    id: str
    summary: str
    heat: float
    state: str
    turn_count: int


class PatternOut(Output):
    """A recurring habit."""

    description: str
    count: int
    score: float


class EntityOut(Output):
    """A named entity and how often it was mentioned."""

    name: str
    kind: str
    mentions: int


class InspectOut(Output):
    """``inspect_memory``: what each tier holds for a user or a space."""

    user_id: str | None
    space: str | None = None
    counts: dict[str, int]
    pending_jobs: int
    failed_jobs: int
    profile: dict[str, str]
    working: list[MemoryOut]
    cells: list[CellOut]
    segments: list[SegmentOut]
    patterns: list[PatternOut]
    entities: list[EntityOut]
    consolidations: list[str]


class UsedMemoryOut(Output):
    """One memory a chat reply stood on."""

    id: str
    kind: str
    tier: str
    text: str
    is_abridged: bool = False


class ChatOut(Output):
    """``chat``: the reply, the memories it used, and what it cost."""

    user_id: str | None
    space: str | None = None
    answer: str
    model: str
    provider: str
    is_extractive: bool
    memories: list[UsedMemoryOut]
    turn_ids: list[str]
    context_tokens: int
    tokens_in: int
    tokens_out: int


class SpaceOut(Output):
    """A shared space, and the acting agent's access to it."""

    name: str
    created_at: datetime
    description: str | None = None
    access: str | None = None


class SpacesOut(Output):
    """``list_spaces``: the spaces the acting agent may read, by name."""

    agent_id: str
    spaces: list[SpaceOut]


class GrantOut(Output):
    """``grant``: the access an agent now has to a space."""

    space: str
    agent_id: str
    access: str
    granted_at: datetime
    by: str


class RevokeOut(Output):
    """``revoke``: whether the agent had any access to take away."""

    space: str
    agent_id: str
    revoked: bool
    by: str


class ShareOut(Output):
    """``share``: the copies now in the space, each linked to its source."""

    to_space: str
    from_user_id: str | None = None
    from_space: str | None = None
    memories: list[MemoryOut]


def structured(output: Output) -> dict[str, Any]:
    """``output`` as the JSON object a tool result carries."""
    return output.model_dump(mode="json")
