"""What the REST API accepts and returns: pydantic models, separate from the core dataclasses.

Requests forbid unknown fields, so a typo is a 422 rather than a silently ignored option.
Ids in requests and responses are the caller's plain ids; the tenant namespace never shows.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field

from memstrata.validation import MAX_BUDGET, MAX_IDENTIFIER_LENGTH, MIN_BUDGET

RoleName = Literal["user", "assistant", "system", "tool"]
SearchMode = Literal["hybrid", "fulltext", "vector"]
DerivedTier = Literal["longterm", "scene", "midterm", "consolidation"]
PrunableTier = Literal["episodic", "midterm", "longterm"]

Identifier = Annotated[str, Field(min_length=1, max_length=MAX_IDENTIFIER_LENGTH)]
"""A user, space, session, agent, message id or speaker name: non-blank text without NUL (the namespace shortens it)."""
MAX_SPACES = 100
"""Most spaces one search or context names."""


def _iso_text(value: object) -> object:
    """A time in a body is ISO 8601 text: a number's unit (seconds? milliseconds?) would be guessed."""
    if not isinstance(value, str) or not _ISO_DATE.match(value):
        raise ValueError("must be an ISO 8601 date-time string with an offset, e.g. 2024-05-01T09:30:00Z")
    return value


UserIn = Annotated[Identifier | None, Field(description="Whose memory: a user's id (or name a `space` instead).")]
SpaceIn = Annotated[
    Identifier | None,
    Field(
        description="A shared space's name, in place of `user_id`: the request acts as its API key's agent "
        "(else the server's `server_agent_id`), which needs access to the space."
    ),
]
SpacesIn = Annotated[
    Annotated[list[Identifier], Field(max_length=MAX_SPACES)] | Literal["all"] | None,
    Field(
        description='Shared spaces ranked together with the memory named, or "all" the acting agent may read; '
        "each result names its `space` and `written_by`."
    ),
]
AgentIn = Annotated[
    Identifier | None,
    Field(
        description="In a user's memory, the agent: stored on what is added, a filter on what is read. In a space "
        "the request acts as its key's agent, so this may only name that agent (another is 403)."
    ),
]
OwnerUser = Annotated[str | None, Field(description="The user whose memory it is; null in a shared space.")]
OwnerSpace = Annotated[str | None, Field(description="The shared space it belongs to; null in a user's memory.")]
SpaceOf = Annotated[str | None, Field(description="The shared space it comes from; null: the user's own memory.")]
WrittenBy = Annotated[
    str | None, Field(description="The agent that wrote it (a turn's `agent_id`; a derived item's source turn's).")
]

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")  # how an ISO 8601 date-time begins; "1700000000" does not
IsoTime = Annotated[AwareDatetime, BeforeValidator(_iso_text)]
"""A time in a request body: ISO 8601 text with an offset, never a number."""

TimeZoneName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        description="IANA time zone (e.g. Europe/Paris) in which dates are read: 'yesterday' in the query, the "
        "days turns were said. Default: the server's `timezone` setting.",
    ),
]

MAX_PAGE = 1000
MAX_OFFSET = 2**31 - 1
"""Far beyond any real history, and inside SQLite's integers."""


class RequestModel(BaseModel):
    """Base of request bodies: unknown fields are an error.

    Numbers and flags are strict (``strict=True`` on each): ``true`` is not an importance
    of 1 and ``"5"`` is not a limit. Dates stay lax, as JSON spells them as strings.
    """

    model_config = ConfigDict(extra="forbid")


class ResponseModel(BaseModel):
    """Base of response bodies."""


# -- requests ------------------------------------------------------------------------------


class MessageIn(RequestModel):
    """One message to store, as chat APIs spell it."""

    role: RoleName = "user"
    content: str
    name: Identifier | None = None
    id: Identifier | None = Field(default=None, description="Your id for the message; retrying with it is safe.")
    metadata: dict[str, Any] | None = None


class AddRequest(RequestModel):
    """``Memory.add``: one string (a user message) or a list of messages."""

    messages: str | list[MessageIn]
    user_id: UserIn = None
    space: SpaceIn = None
    session_id: Identifier | None = None
    agent_id: AgentIn = None
    metadata: dict[str, Any] | None = None
    timestamp: IsoTime | None = Field(default=None, description="When it was said (default: now).")
    id: Identifier | None = Field(default=None, description="Id of a single message (or give each message an id).")
    importance: float | None = Field(default=None, ge=0.0, le=1.0, strict=True)


class SearchFiltersIn(RequestModel):
    """What narrows a search inside one user's memory."""

    session_id: Identifier | None = None
    agent_id: AgentIn = None
    roles: list[RoleName] = Field(default_factory=list)
    after: IsoTime | None = None
    before: IsoTime | None = None


class SearchRequest(RequestModel):
    """``Memory.search``."""

    query: str
    user_id: UserIn = None
    space: SpaceIn = None
    limit: int = Field(default=10, ge=1, le=MAX_PAGE, strict=True)
    mode: SearchMode = "hybrid"
    tiers: list[DerivedTier] = Field(
        default_factory=list,
        description="Derived tiers an unfiltered hybrid search also covers (ignored with filters or another mode).",
    )
    diversity: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        strict=True,
        description="0 ranks by relevance; up to 1 favours results unlike each other (MMR).",
    )
    filters: SearchFiltersIn = Field(default_factory=SearchFiltersIn)
    timezone: TimeZoneName | None = None
    spaces: SpacesIn = None


class ContextRequest(RequestModel):
    """``Memory.context``: a prompt-ready memory block under a token budget."""

    query: str
    user_id: UserIn = None
    space: SpaceIn = None
    spaces: SpacesIn = None
    token_budget: int = Field(default=1000, ge=MIN_BUDGET, le=MAX_BUDGET, strict=True)
    agent_id: AgentIn = None
    session_id: Identifier | None = None
    include_superseded: bool = Field(default=False, strict=True)
    timezone: TimeZoneName | None = None
    verbatim: bool | None = Field(
        default=None,
        strict=True,
        description="true quotes every excerpt whole; default (the abridge_excerpts setting): excerpts after the "
        "best one are abridged when the budget cannot hold them whole, so more fit.",
    )


class ChatRequest(RequestModel):
    """``Memory.chat``: answer a message from memory, then remember the exchange."""

    message: str
    user_id: UserIn = None
    space: SpaceIn = None
    session_id: Identifier | None = None
    agent_id: AgentIn = None
    token_budget: int = Field(default=1000, ge=MIN_BUDGET, le=MAX_BUDGET, strict=True)
    system: str | None = Field(default=None, description="Instructions replacing the agent's default system prompt.")
    timezone: TimeZoneName | None = None


class ScopeRequest(RequestModel):
    """A user (optionally narrowed to one agent and/or session), or a space (optionally one session)."""

    user_id: UserIn = None
    space: SpaceIn = None
    agent_id: AgentIn = None
    session_id: Identifier | None = None


class UserRequest(RequestModel):
    """An operation on one user's memory, or a space's."""

    user_id: UserIn = None
    space: SpaceIn = None


class PruneRequest(RequestModel):
    """``Memory.prune``: delete a tier's items older than a cutoff and/or beyond the newest N."""

    user_id: UserIn = None
    space: SpaceIn = None
    tier: PrunableTier
    older_than_seconds: float | None = Field(default=None, ge=0, le=3e9, strict=True, description="At most ~95 years.")
    keep_last: int | None = Field(default=None, ge=0, le=MAX_OFFSET, strict=True)


# -- responses -----------------------------------------------------------------------------


class MemoryOut(ResponseModel):
    """One stored message (a turn)."""

    id: str
    user_id: OwnerUser
    space: OwnerSpace
    role: RoleName
    content: str
    created_at: datetime
    session_id: str | None
    agent_id: str | None
    name: str | None
    metadata: dict[str, Any]
    importance: float | None


class AddResponse(ResponseModel):
    """The stored messages, with their ids."""

    memories: list[MemoryOut]


class HistoryResponse(ResponseModel):
    """One page of history; ask again with ``offset=next_offset`` while it is not null."""

    memories: list[MemoryOut]
    next_offset: int | None


class HitOut(ResponseModel):
    """One search result; ``turn`` is set for episodic hits, ``source_turn_ids`` for every hit."""

    id: str
    tier: str
    content: str
    score: float
    turn: MemoryOut | None
    source_turn_ids: list[str]
    ranks: dict[str, int]
    space: SpaceOf
    written_by: WrittenBy


class SearchResponse(ResponseModel):
    """Hits, best first."""

    hits: list[HitOut]


class ContextItemOut(ResponseModel):
    """One piece of an assembled context."""

    kind: str
    tier: str
    id: str
    text: str
    tokens: int
    score: float
    source_turn_ids: list[str]
    is_abridged: bool = Field(description="An excerpt shown less its grammar words; the turn holds every word.")
    space: SpaceOf
    written_by: WrittenBy


class ContextOut(ResponseModel):
    """A memory block for a prompt and what it is made of."""

    query: str
    user_id: OwnerUser
    space: OwnerSpace
    text: str
    tokens: int
    token_budget: int
    items: list[ContextItemOut]
    omitted: int
    turn_ids: list[str]


class UsedMemoryOut(ResponseModel):
    """One memory a chat reply stood on."""

    id: str
    kind: str
    tier: str
    score: float
    text: str
    is_abridged: bool = Field(description="An excerpt shown less its grammar words; the turn holds every word.")


class ChatOut(ResponseModel):
    """What ``Memory.chat`` answered, what it used and what it cost."""

    answer: str
    is_extractive: bool
    model: str
    provider: str
    memories: list[UsedMemoryOut]
    context_tokens: int
    tokens_in: int
    tokens_out: int
    tokens_cached: int
    consolidation_due: bool
    turn_ids: list[str]


class DeletionOut(ResponseModel):
    """What a forget removed."""

    user_id: OwnerUser
    space: OwnerSpace
    turns: int
    agent_id: str | None
    session_id: str | None


class CellOut(ResponseModel):
    """A long-term memory cell with its validity."""

    id: str
    user_id: OwnerUser
    space: OwnerSpace
    kind: str
    subject: str
    attribute: str
    value: str
    content: str
    salience: float
    valid_from: datetime
    valid_to: datetime | None
    superseded_by: str | None
    scene_id: str | None
    source_turn_id: str
    is_current: bool


class CellsResponse(ResponseModel):
    """Cells, newest first."""

    cells: list[CellOut]


class ProfileOut(ResponseModel):
    """A user's stable traits and preferences."""

    user_id: OwnerUser
    space: OwnerSpace
    profile: dict[str, str]


class PatternOut(ResponseModel):
    """A recurring interaction pattern."""

    key: str
    description: str
    count: int
    first_seen: datetime
    last_seen: datetime
    score: float
    evidence: str


class PatternsResponse(ResponseModel):
    """Patterns, those matching the query first."""

    patterns: list[PatternOut]


class EntityOut(ResponseModel):
    """A named entity seen in a user's memory."""

    name: str
    kind: str
    mentions: int
    first_seen: datetime
    last_seen: datetime


class EdgeOut(ResponseModel):
    """Two entities mentioned together, and how often."""

    source: str
    target: str
    weight: int


class GraphOut(ResponseModel):
    """The entities a query touches, their neighbours and the edges between them."""

    nodes: list[EntityOut]
    edges: list[EdgeOut]


class ConsolidationOut(ResponseModel):
    """One "sleep" summary with its token-efficiency score."""

    id: str
    user_id: OwnerUser
    space: OwnerSpace
    summary: str
    source_turn_ids: list[str]
    compression_ratio: float
    entity_preservation: float
    tes: float
    created_at: datetime


class ConsolidationsResponse(ResponseModel):
    """Consolidation summaries."""

    consolidations: list[ConsolidationOut]


class SegmentOut(ResponseModel):
    """A mid-term topic segment."""

    id: str
    user_id: OwnerUser
    space: OwnerSpace
    summary: str
    keywords: list[str]
    visits: int
    turn_count: int
    heat: float
    state: str
    created_at: datetime
    last_activity: datetime
    session_id: str | None
    promoted_at: datetime | None


class SegmentTurnsResponse(ResponseModel):
    """The turns filed in one mid-term segment, in the order they were said."""

    segment_id: str
    turns: list[MemoryOut]


class EventOut(ResponseModel):
    """An audit-log entry."""

    at: datetime
    kind: str
    detail: dict[str, Any]


class InspectionOut(ResponseModel):
    """Every tier of one user's memory."""

    user_id: OwnerUser
    space: OwnerSpace
    counts: dict[str, int]
    working: list[MemoryOut]
    segments: list[SegmentOut]
    profile: dict[str, str]
    cells: list[CellOut]
    patterns: list[PatternOut]
    entities: list[EntityOut]
    consolidations: list[ConsolidationOut]
    events: list[EventOut]
    pending_jobs: int
    failed_jobs: int = Field(description="Background jobs that failed every attempt; their tier work is missing.")


class RetriedJobsOut(ResponseModel):
    """How many failed background jobs were queued again."""

    user_id: OwnerUser
    space: OwnerSpace
    requeued: int = Field(
        description="Jobs queued again; they run in the background, and inspect counts any that fail again."
    )


class PruneOut(ResponseModel):
    """How many items a prune deleted."""

    user_id: OwnerUser
    space: OwnerSpace
    tier: str
    deleted: int


class ImportOut(ResponseModel):
    """What an import stored."""

    turns: int
    embeddings: int
    skipped: int


class HealthOut(ResponseModel):
    """The server is up."""

    status: Literal["ok"]


class VersionOut(ResponseModel):
    """What is serving, and who is asking."""

    version: str
    api: Literal["v1"]
    embedder: str
    tenant: str
    role: Literal["read", "write", "admin"] = Field(description="What your key may do (docs/rest.md#roles).")


class ErrorDetail(ResponseModel):
    """One problem with a request."""

    location: str
    message: str


class ErrorBody(ResponseModel):
    """What went wrong, and how to fix it when the caller can."""

    code: str
    message: str
    details: list[ErrorDetail] | None = None


class ErrorOut(ResponseModel):
    """Every error response has this shape."""

    error: ErrorBody
