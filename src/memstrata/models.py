"""The values memstrata stores and returns: frozen, validated elsewhere, free of I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]
"""Rows of float32 vectors, one per text: what embedders return and stores keep beside each turn."""


class Tier(StrEnum):
    """Where a memory lives in the hierarchy (a hit's or a context item's ``tier``)."""

    WORKING = "working"  # this session's latest exchanges
    EPISODIC = "episodic"  # every turn, verbatim
    MIDTERM = "midterm"  # topic segments and their summaries
    SCENE = "scene"  # segments promoted to long-term scenes
    LONGTERM = "longterm"  # facts (cells) and the profile
    CONSOLIDATION = "consolidation"  # what a sleep pass distilled from many turns
    PROCEDURAL = "procedural"  # recurring patterns
    GRAPH = "graph"  # the entity graph


class ItemKind(StrEnum):
    """What a context item is (``ContextItem.kind``)."""

    PROFILE = "profile"
    CELL = "cell"
    PATTERN = "pattern"
    GRAPH = "graph"
    CONSOLIDATION = "consolidation"
    SCENE = "scene"
    MIDTERM = "midterm"  # a topic segment's summary
    EPISODE = "episode"  # a turn, or a message burst


class Role(StrEnum):
    """Who said a message, in the vocabulary chat APIs already use."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose memory an operation touches: always a user, optionally one agent and session."""

    user_id: str
    agent_id: str | None = None
    session_id: str | None = None


@dataclass(kw_only=True, frozen=True, slots=True)
class Turn:
    """One message, stored verbatim: the episodic ground truth everything else derives from."""

    id: str
    user_id: str
    role: Role
    content: str
    created_at: datetime
    session_id: str | None = None
    agent_id: str | None = None
    name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    importance: float | None = None

    @property
    def scope(self) -> Scope:
        """The scope the turn belongs to."""
        return Scope(self.user_id, self.agent_id, self.session_id)

    @property
    def space(self) -> str | None:
        """The shared space the turn is in (None: a user's memory, ``user_id``)."""
        return space_of(self.user_id)

    def is_same_message(self, other: Turn) -> bool:
        """True when ``other`` is a retry of this message (same scope, role, speaker and text)."""
        return (
            self.scope == other.scope
            and self.role == other.role
            and self.name == other.name
            and self.content == other.content
        )


@dataclass(kw_only=True, frozen=True, slots=True)
class SearchFilters:
    """Optional narrowing of a search inside one user's memory."""

    agent_id: str | None = None
    session_id: str | None = None
    roles: tuple[Role, ...] = ()
    after: datetime | None = None
    before: datetime | None = None

    @property
    def is_empty(self) -> bool:
        """True when nothing narrows the search."""
        return not (self.agent_id or self.session_id or self.roles or self.after or self.before)


@dataclass(kw_only=True, frozen=True, slots=True)
class Hit:
    """One search result: the item, its fused score, the tier it came from and why it ranked.

    ``ranks`` maps each retriever that found the item ("fulltext", "vector") to its
    1-based rank there; ``source_turn_ids`` are the episodic turns the item stands for.
    """

    id: str
    tier: str
    content: str
    score: float
    turn: Turn | None = None
    source_turn_ids: tuple[str, ...] = ()
    ranks: Mapping[str, int] = field(default_factory=dict)
    seq: int | None = field(default=None, repr=False, compare=False, metadata={"internal": True})
    #: The shared space the hit comes from (None: the user's own memory).
    space: str | None = None
    #: The agent that wrote the memory (a turn's ``agent_id``; for a derived item, its source turn's).
    written_by: str | None = None
    """The store's internal row number (not part of the public contract)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class ContextItem:
    """One piece of an assembled context: what it is, where it came from, what it cost.

    ``kind`` is one of ``profile``, ``cell``, ``pattern``, ``graph``, ``consolidation``,
    ``scene``, ``midterm`` (a topic segment's summary) or ``episode``; ``tier`` is the memory
    tier it was read from. ``is_abridged``: ``text`` is an excerpt less its grammar words
    (articles, "I", "is" …), as the block shows it; the turn itself holds every word.
    """

    kind: str
    tier: str
    id: str
    text: str
    tokens: int
    score: float = 0.0
    source_turn_ids: tuple[str, ...] = ()
    is_abridged: bool = False
    #: The shared space the item comes from (None: the user's own memory), and its writer.
    space: str | None = None
    written_by: str | None = None


@dataclass(kw_only=True, frozen=True, slots=True)
class Context:
    """A memory block for a prompt, packed under a token budget, stable parts first.

    ``text`` is what goes into the prompt; ``tokens`` is its size as counted by
    :func:`memstrata.retrieval.tokens.count_tokens`; ``items`` lists what it includes, in order;
    ``omitted`` counts relevant items that did not fit.
    """

    query: str
    user_id: str
    text: str
    tokens: int
    token_budget: int
    items: tuple[ContextItem, ...] = ()
    omitted: int = 0

    @property
    def turn_ids(self) -> tuple[str, ...]:
        """Every episodic turn the context stands on, in order, without repeats."""
        return tuple(dict.fromkeys(turn_id for item in self.items for turn_id in item.source_turn_ids))


@dataclass(kw_only=True, frozen=True, slots=True)
class Deletion:
    """What a ``forget`` removed."""

    user_id: str
    turns: int
    agent_id: str | None = None
    session_id: str | None = None
    #: The space deleted or forgotten (its ``user_id`` is then the space's scope id).
    space: str | None = None


@dataclass(kw_only=True, frozen=True, slots=True)
class TransferReport:
    """What an export or import moved."""

    path: str
    turns: int
    embeddings: int
    skipped: int = 0


@dataclass(kw_only=True, frozen=True, slots=True)
class Compaction:
    """What a ``vacuum`` did: the store's size in bytes before and after, and whether nothing was left over.

    ``complete`` is False when another connection was reading or writing a SQLite store as
    its write-ahead log was checkpointed: the log keeps the rewritten pages, and the old file
    its remains, until the next full checkpoint.
    """

    bytes_before: int
    bytes_after: int
    seconds: float
    complete: bool = True


def format_time(moment: datetime) -> str:
    """Fixed-width UTC ISO 8601 text with microseconds, so string order is time order."""
    utc = moment.astimezone(UTC)
    # strftime's %Y does not zero-pad years before 1000 on every platform.
    return f"{utc.year:04d}" + utc.strftime("-%m-%dT%H:%M:%S.%f+00:00")


@dataclass(kw_only=True, frozen=True, slots=True)
class Cell:
    """A typed long-term memory (fact, preference, task, decision, plan, risk) with validity.

    ``valid_to`` is set when a newer cell about the same subject and attribute superseded
    it; ``superseded_by`` names that cell. Superseded cells are kept as history.
    """

    id: str
    user_id: str
    kind: str
    subject: str
    attribute: str
    value: str
    content: str
    salience: float
    valid_from: datetime
    source_turn_id: str
    valid_to: datetime | None = None
    superseded_by: str | None = None
    scene_id: str | None = None

    @property
    def is_current(self) -> bool:
        """True until a newer cell supersedes it."""
        return self.valid_to is None


@dataclass(kw_only=True, frozen=True, slots=True)
class Segment:
    """A mid-term topic segment built from exchanges that left working memory."""

    id: str
    user_id: str
    summary: str
    keywords: tuple[str, ...]
    visits: int
    turn_count: int
    heat: float
    state: str
    created_at: datetime
    last_activity: datetime
    session_id: str | None = None
    promoted_at: datetime | None = None


@dataclass(kw_only=True, frozen=True, slots=True)
class Pattern:
    """A recurring interaction pattern of a user, scored by frequency and recency."""

    key: str
    description: str
    count: int
    first_seen: datetime
    last_seen: datetime
    score: float
    evidence: str = ""


@dataclass(kw_only=True, frozen=True, slots=True)
class EntityNode:
    """A named entity seen in a user's memory."""

    name: str
    kind: str
    mentions: int
    first_seen: datetime
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class EntityEdge:
    """Two entities mentioned together, and how often."""

    source: str
    target: str
    weight: int


@dataclass(frozen=True, slots=True)
class Subgraph:
    """The entities a query touches, their neighbours, and the edges between them."""

    nodes: tuple[EntityNode, ...]
    edges: tuple[EntityEdge, ...]


@dataclass(kw_only=True, frozen=True, slots=True)
class Consolidation:
    """One "sleep" summary of a cluster of turns, with its token-efficiency score (TES)."""

    id: str
    user_id: str
    summary: str
    source_turn_ids: tuple[str, ...]
    compression_ratio: float
    entity_preservation: float
    tes: float
    created_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """An audit-log entry: promotion, eviction, consolidation, supersession, deletion."""

    at: datetime
    kind: str
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, frozen=True, slots=True)
class Inspection:
    """Everything an operator tunes thresholds by, for one user."""

    user_id: str
    counts: Mapping[str, int]
    working: tuple[Turn, ...]
    segments: tuple[Segment, ...]
    profile: Mapping[str, str]
    cells: tuple[Cell, ...]
    patterns: tuple[Pattern, ...]
    entities: tuple[EntityNode, ...]
    consolidations: tuple[Consolidation, ...]
    events: tuple[MemoryEvent, ...]
    pending_jobs: int
    #: Background jobs that failed every attempt: their tier work is missing until
    #: ``Memory.retry_failed_jobs`` queues them again (the turns themselves are stored).
    failed_jobs: int = 0


@dataclass(kw_only=True, frozen=True, slots=True)
class UsedMemory:
    """One memory a chat reply stood on: which item of the context, from which tier, how it ranked.

    ``is_abridged``: ``text`` is the excerpt as the block showed it, less its grammar words.
    """

    id: str
    kind: str
    tier: str
    score: float
    text: str
    is_abridged: bool = False


@dataclass(kw_only=True, frozen=True, slots=True)
class ChatReply:
    """What ``Memory.chat`` answered, the memories it used, and what the turn cost.

    ``is_extractive`` is True when no LLM is configured: ``answer`` then lists what memory
    holds instead of a model's reply, and every token count is 0. ``consolidations`` are the
    "sleep" summaries stored for the user since the session's previous exchange (see
    ``Memory.chat``); ``turn_ids`` are the turns this call stored.
    """

    answer: str
    memories: tuple[UsedMemory, ...]
    model: str
    provider: str
    is_extractive: bool
    context_tokens: int
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    consolidations: tuple[Consolidation, ...] = ()
    consolidation_due: bool = False
    turn_ids: tuple[str, ...] = ()


class KeyRole(StrEnum):
    """What an API key may do over REST; each role includes the ones before it (docs/rest.md#roles)."""

    READ = "read"  # search, context, list and get memories, history, the tiers, export
    WRITE = "write"  # add, delete one memory, chat, import, consolidate, retry jobs, share, trust
    ADMIN = "admin"  # forget, prune, create and delete spaces, grant and revoke; every key made before roles

    def allows(self, needed: KeyRole) -> bool:
        """Whether this role covers ``needed``."""
        order = list(KeyRole)
        return order.index(self) >= order.index(needed)


@dataclass(kw_only=True, frozen=True, slots=True)
class ApiKey:
    """An API key's record: only a hash of the secret is ever stored."""

    id: str
    tenant: str
    name: str
    created_at: datetime
    revoked_at: datetime | None = None
    #: The agent the key acts as (its calls to a space are checked against that agent's grants).
    agent_id: str | None = None
    #: What the key may do; keys stored before roles existed are admin, as they could do everything.
    role: KeyRole = KeyRole.ADMIN

    @property
    def is_active(self) -> bool:
        """Whether the key may still be used."""
        return self.revoked_at is None


SPACE_MARK = "\ufdd0"
"""What a space's scope id starts with: a Unicode noncharacter, which no user id may start with."""


def space_scope(space: str) -> str:
    """The scope id under which a space's memories are stored, beside users' ids."""
    return SPACE_MARK + space


def space_of(scope_id: str) -> str | None:
    """The space a stored scope id belongs to; None for a user's id."""
    return scope_id[len(SPACE_MARK) :] if scope_id.startswith(SPACE_MARK) else None


def whose(scope_id: str) -> str:
    """A scope id as a message names it: ``user 'ana'`` or ``space 'apollo'``."""
    space = space_of(scope_id)
    return f"user {scope_id!r}" if space is None else f"space {space!r}"


class Access(StrEnum):
    """What an agent may do in a space; each level includes the ones before it."""

    READ = "read"  # search, context, get, history, the tiers
    WRITE = "write"  # add, delete, share into it
    ADMIN = "admin"  # grant, revoke, forget, delete the space

    def allows(self, needed: Access) -> bool:
        """Whether this level covers ``needed``."""
        order = list(Access)
        return order.index(self) >= order.index(needed)


@dataclass(kw_only=True, frozen=True, slots=True)
class Space:
    """A named memory shared by agents, beside the per-user memories."""

    name: str
    created_at: datetime
    description: str | None = None


@dataclass(kw_only=True, frozen=True, slots=True)
class Grant:
    """An agent's access to a space."""

    space: str
    agent_id: str
    access: Access
    granted_at: datetime


@dataclass(kw_only=True, frozen=True, slots=True)
class Share:
    """Where a shared memory came from: a copy's link to its source, which it never replaces."""

    turn_id: str
    scope: str
    source_id: str
    source_scope: str
    shared_at: datetime
    shared_by: str | None = None

    @property
    def from_space(self) -> str | None:
        """The space the source lives in (None: a user's memory)."""
        return space_of(self.source_scope)
