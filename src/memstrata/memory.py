"""The Memory facade: the public API every front end calls. Each method checks its input and delegates."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from memstrata.config import Settings
from memstrata.embeddings.base import Embedder
from memstrata.errors import InvalidInput, NotFound
from memstrata.facade.chat import ChatRequest
from memstrata.facade.federation import federated_context, federated_search
from memstrata.facade.parts import Forwarded, Parts, open_parts, settings_for
from memstrata.facade.spaces import Target, check_access, check_weight
from memstrata.llms.base import LLM
from memstrata.models import (
    SPACE_MARK,
    Access,
    Cell,
    ChatReply,
    Compaction,
    Consolidation,
    Context,
    Deletion,
    Grant,
    Hit,
    Inspection,
    Pattern,
    Role,
    SearchFilters,
    Share,
    Space,
    Subgraph,
    TransferReport,
    Turn,
    space_of,
    space_scope,
    whose,
)
from memstrata.retrieval.assembly import AssemblyPolicy
from memstrata.retrieval.cell_candidates import CellCandidatePolicy
from memstrata.retrieval.context import ContextRequest
from memstrata.retrieval.entity_candidates import EntityCandidatePolicy
from memstrata.retrieval.query import DEFAULT_SEARCH_TIERS, Query, today_in
from memstrata.retrieval.rerank import RerankPolicy
from memstrata.storage.base import TierStore
from memstrata.tiers.episodic import Progress
from memstrata.validation import (
    LARGEST_COUNT,
    check_budget,
    check_flag,
    check_fraction,
    check_identifier,
    check_importance,
    check_limit,
    check_message_metadata,
    check_metadata,
    check_mode,
    check_names,
    check_offset,
    check_prefix,
    check_prune,
    check_role,
    check_stored_time,
    check_text,
    check_tiers,
    check_timeout,
    check_timestamp,
    check_timezone,
    parse_messages,
)

__all__ = ["DEFAULT_SEARCH_TIERS", "Memory", "Progress"]


class Memory:
    """Persistent memory for LLM agents: ``add`` what was said, ``search`` before answering.

    Behaviour of each method in detail: docs/python-api.md.

    >>> with Memory("/tmp/demo-memory") as memory:            # doctest: +SKIP
    ...     memory.add("I live in Lisbon", user_id="ana")
    ...     memory.search("where does Ana live?", user_id="ana")[0].content
    'I live in Lisbon'
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        settings: Settings | None = None,
        store: TierStore | None = None,
        embedder: Embedder | str | None = None,
        llm: LLM | None = None,
        **overrides: Any,
    ) -> None:
        if isinstance(embedder, str):  # the setting's name, not an Embedder object
            overrides["embedder"], embedder = embedder, None
        settings = settings_for(path, settings, overrides)
        self.settings = settings
        self._parts = open_parts(settings, store=store, embedder=embedder, llm=llm)
        if settings.background:
            self._parts.worker.start()
            if self._parts.retention_keeper is not None:
                self._parts.retention_keeper.start()

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **overrides: Any) -> Memory:
        """Build a Memory from settings (arguments > env > memstrata.toml > defaults)."""
        return cls(settings=settings, **overrides)

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Release the store; the Memory cannot be used afterwards."""
        self._parts.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def embedder(self) -> Embedder:
        """The embedder in use."""
        return self._parts.embedder

    @property
    def llm(self) -> LLM:
        """The LLM in use (``none`` unless one is configured or passed)."""
        return self._parts.llm

    @property
    def parts(self) -> Parts:
        """The collaborators this Memory is built from (store, tiers, pipeline, worker), for tools and tests.

        Not a stable API: calls on them skip the checks of Memory's methods.
        """
        return self._parts

    # Retrieval policies: value objects, replaceable per instance (docs/python-api.md).
    rerank_policy = Forwarded[RerankPolicy]("pipeline", "How fused candidates are rescored.")
    cell_policy = Forwarded[CellCandidatePolicy]("pipeline", "Which facts a query reaches by meaning.")
    assembly_policy = Forwarded[AssemblyPolicy]("contexts", "How ``context()`` packs its candidates into the budget.")
    entity_policy = Forwarded[EntityCandidatePolicy]("contexts", "Whose turns a kind-of-thing question lifts.")

    # -- writing ----------------------------------------------------------------------

    def add(
        self,
        messages: str | Sequence[dict[str, Any]] | dict[str, Any],
        *,
        user_id: str | None = None,
        space: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        timestamp: datetime | str | None = None,
        id: str | None = None,
        importance: float | None = None,
    ) -> list[Turn]:
        """Store messages verbatim, indexed for search; the stored turns. Durable when it returns; never calls an LLM.

        ``messages`` is one string (a user message) or a list of ``{"role", "content",
        "name"?, "id"?, "metadata"?}`` dicts, at most ``max_messages_per_add`` of them, each
        one's metadata (``metadata`` merged under its own) at most ``max_metadata_bytes`` of
        JSON. Raises InvalidInput, and IdConflict for an id stored with other content (the
        same message again is not stored twice). In a ``space``, ``agent_id`` is the writer
        and needs write access (else AccessDenied).
        """
        with self._parts.activity:
            self._require_open()
            scope = self._target(user_id, space, agent_id, Access.WRITE, session_id).scope
            settings = self.settings
            parsed = parse_messages(
                messages,
                max_bytes=settings.max_text_bytes,
                default_id=id,
                max_metadata_bytes=settings.max_metadata_bytes,
                max_messages=settings.max_messages_per_add,
            )
            shared = check_metadata(metadata, max_bytes=settings.max_metadata_bytes)
            check_message_metadata(shared, parsed, settings.max_metadata_bytes)
            moment = check_stored_time(timestamp) or datetime.now(UTC)
            weight = check_importance(importance)
            return self._parts.episodic.add(parsed, scope, moment=moment, metadata=shared, importance=weight)

    def reindex(self, progress: Progress | None = None, *, fulltext: bool = False, facts: bool = False) -> int:
        """Embed every stored turn without a vector from the current model; how many (facts included).

        ``fulltext=True`` also rebuilds the full-text indexes; ``facts=True`` also embeds
        every user's current facts that have no vector yet.
        """
        self._require_open()
        facts_of = self._parts.hierarchy.embed_cells if facts else None
        return self._parts.episodic.reindex(progress, fulltext=fulltext, facts=facts_of)

    # -- reading ----------------------------------------------------------------------

    def get(
        self, turn_id: str, *, user_id: str | None = None, space: str | None = None, agent_id: str | None = None
    ) -> Turn:
        """The turn with this id in ``user_id``'s memory (or the ``space``'s); NotFound otherwise."""
        target = self._target(user_id, space, agent_id, Access.READ)
        identifier = str(check_identifier(turn_id, "id"))
        found = self._parts.store.get_by_ids([identifier], target.user_id).get(identifier)
        if found is None:
            raise NotFound(f"no memory with id {identifier!r} for {whose(target.user_id)}")
        return found

    def history(
        self,
        *,
        user_id: str | None = None,
        space: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
        newest_first: bool = False,
    ) -> list[Turn]:
        """Turns of a user or space (or one session) in time order, paginated."""
        self._require_open()
        scope = self._target(user_id, space, agent_id, Access.READ, session_id).scope
        offset = check_offset(offset)
        check_flag(newest_first, "newest_first")
        limit = check_limit(limit, maximum=10_000)
        store = self._parts.store
        return store.history(scope, limit=limit, offset=min(offset, LARGEST_COUNT), newest_first=newest_first)

    def users(self, prefix: str = "") -> list[str]:
        """Ids of the users with stored turns that start with ``prefix`` (all by default), in code point order."""
        self._require_open()
        return [user for user in self._parts.store.user_ids(check_prefix(prefix)) if not user.startswith(SPACE_MARK)]

    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        space: str | None = None,
        spaces: Iterable[str] | str | None = None,
        limit: int = 10,
        session_id: str | None = None,
        agent_id: str | None = None,
        roles: Iterable[str | Role] | None = None,
        after: datetime | str | None = None,
        before: datetime | str | None = None,
        mode: str = "hybrid",
        tiers: Iterable[str] = DEFAULT_SEARCH_TIERS,
        diversity: float = 0.0,
        timezone: str | None = None,
        reader: str | None = None,
    ) -> list[Hit]:
        """The turns (with ``tiers``, derived items too) most relevant to ``query`` in ``user_id``'s memory, best first.

        Hybrid by default (full text and vectors fused, then reranked); see docs/python-api.md
        for modes, tiers, dates in the query, diversity and message bursts. ``spaces`` (names,
        or ``"all"`` the agent may read) are ranked together with the memory named; each hit
        carries its ``space`` and ``written_by``. ``reader`` is the agent whose grants and
        trust apply to them when not ``agent_id`` (which in a user's memory also filters whose
        turns). Raises InvalidInput, NotFound, AccessDenied.
        """
        with self._parts.activity:
            mode = check_mode(mode)
            self._require_open()
            target = self._target(user_id, space, agent_id, Access.READ, session_id)
            caller = self._reader(reader, target)
            shared = self._shared(spaces, target, caller)
            text = check_text(query, "query", max_bytes=self.settings.max_text_bytes)
            count = check_limit(limit)
            spread = check_fraction(diversity, "diversity")
            # In a user's memory agent_id filters whose turns; in a space it only names the reader.
            filters = SearchFilters(
                agent_id=target.scope.agent_id if target.space is None else None,
                session_id=target.scope.session_id,
                roles=tuple(check_role(role) for role in check_names(roles, "roles")),
                after=check_timestamp(after, "after"),
                before=check_timestamp(before, "before"),
            )
            wanted_tiers = check_tiers(check_names(tiers, "tiers"))
            zone = check_timezone(timezone) or self.settings.zone
            request = Query(
                text=text,
                user_id=target.user_id,
                depth=max(self.settings.search_candidates, count),
                today=today_in(zone),
                zone=zone,
                filters=filters,
                mode=mode,
                # Derived items (cells, summaries) have no session or role: a filtered search stays on the turns.
                tiers=wanted_tiers if wanted_tiers and filters.is_empty and mode == "hybrid" else (),
            )
            # A shared space's turns are not the caller's session's, nor filtered by agent.
            others = replace(filters, agent_id=None, session_id=None)
            queries = [request, *(replace(request, user_id=space_scope(name), filters=others) for name in shared)]
            trust = self._parts.spaces.trust_of(caller)
            hits = federated_search(
                self._parts.federation, self._parts.spaces, queries, count, diversity=spread, trust=trust
            )
            for query_of in queries:
                self._parts.visits.note_hits(query_of.user_id, [hit for hit in hits if _in(hit, query_of.user_id)])
            return hits

    def context(
        self,
        query: str,
        *,
        user_id: str | None = None,
        space: str | None = None,
        spaces: Iterable[str] | str | None = None,
        token_budget: int = 1000,
        agent_id: str | None = None,
        session_id: str | None = None,
        include_superseded: bool = False,
        timezone: str | None = None,
        verbatim: bool | None = None,
        reader: str | None = None,
    ) -> Context:
        """What ``user_id``'s memory holds about ``query``, as one block of at most ``token_budget`` tokens.

        Profile, habits, facts, entities, summaries, excerpts and (with ``session_id``) the
        session's recent exchanges, stable parts first; ``spaces`` adds what shared spaces hold,
        each line naming its space and writer (``reader``: as in ``search``). See
        docs/python-api.md. Never calls an LLM. Raises InvalidInput, NotFound, AccessDenied.
        """
        zone = check_timezone(timezone)
        if verbatim is not None:
            check_flag(verbatim, "verbatim")
        self._require_open()
        target = self._target(user_id, space, agent_id, Access.READ, session_id)
        caller = self._reader(reader, target)
        shared = self._shared(spaces, target, caller)
        text = check_text(query, "query", max_bytes=self.settings.max_text_bytes)
        budget = check_budget(token_budget)
        check_flag(include_superseded, "include_superseded")
        request = ContextRequest(
            text=text,
            scope=target.scope,
            budget=budget,
            zone=zone or self.settings.zone,
            include_superseded=include_superseded,
            verbatim=verbatim,
        )
        return federated_context(self._parts, request, shared, caller)

    def chat(
        self,
        message: str,
        *,
        user_id: str | None = None,
        space: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        token_budget: int = 1000,
        system: str | None = None,
        timezone: str | None = None,
        message_id: str | None = None,
        reply_id: str | None = None,
    ) -> ChatReply:
        """Answer ``message`` from ``user_id``'s memory, then store the exchange in the same session.

        Without an LLM the reply is extractive (it lists the most relevant memories). Raises
        InvalidInput before anything happens, IdConflict for a stored id (before the model
        is called), ProviderError for a failing model (nothing is stored). See docs/python-api.md.
        """
        self._require_open()
        target = self._target(user_id, space, agent_id, Access.WRITE, session_id)
        most = self.settings.max_text_bytes
        text = check_text(message, "message", max_bytes=most)
        budget = check_budget(token_budget)
        instructions = None if system is None else check_text(system, "system", max_bytes=most)
        zone = check_timezone(timezone) or self.settings.zone
        message_id = check_identifier(message_id, "message_id", required=False)
        reply_id = check_identifier(reply_id, "reply_id", required=False)
        if message_id is not None and message_id == reply_id:
            raise InvalidInput("message_id and reply_id must differ")
        request = ChatRequest(
            text=text,
            scope=target.scope,
            shared=target.space is not None,
            budget=budget,
            zone=zone,
            system=instructions,
            message_id=message_id,
            reply_id=reply_id,
        )
        return self._parts.chat.reply(request)

    # -- deleting ---------------------------------------------------------------------

    def delete(
        self, turn_id: str, *, user_id: str | None = None, space: str | None = None, agent_id: str | None = None
    ) -> None:
        """Hard-delete one turn of ``user_id`` (or of a ``space``) with its index entries; NotFound if absent."""
        user = self._owner(user_id, space, agent_id, Access.WRITE)
        self._parts.episodic.delete(str(check_identifier(turn_id, "id")), user)

    def forget(
        self,
        *,
        user_id: str | None = None,
        space: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> Deletion:
        """Hard-delete everything in a scope (a whole user by default), indexes included.

        A ``space`` keeps its record and grants (``delete_space`` removes those too); its
        memories go, all agents' (``agent_id`` needs admin).
        """
        self._require_open()
        target = self._target(user_id, space, agent_id, Access.ADMIN, session_id)
        scope = target.scope
        if scope.agent_id is None and scope.session_id is None:
            self._parts.visits.drop(scope.user_id)
        count = self._parts.episodic.forget(scope)
        return Deletion(
            user_id=scope.user_id,
            turns=count,
            agent_id=agent_id if target.space is None else None,
            session_id=scope.session_id,
            space=target.space,
        )

    def vacuum(self) -> Compaction:
        """Rewrite the store so deleted memories leave its files (writers wait); its size before and after."""
        self._require_open()
        return self._parts.vacuum()

    def prune(
        self,
        *,
        user_id: str | None = None,
        space: str | None = None,
        tier: str,
        older_than: timedelta | None = None,
        keep_last: int | None = None,
    ) -> int:
        """Retention: delete a tier's items older than ``older_than`` or beyond the newest ``keep_last``; how many."""
        user = self._owner(user_id, space, None, Access.ADMIN)
        tier, older_than, keep_last = check_prune(tier, older_than, keep_last)
        return self._parts.tiers.prune(user, tier, older_than, keep_last)

    def apply_retention(self) -> dict[str, int]:
        """Apply the ``retention`` setting to every user and space now; items deleted per tier.

        The background worker does this every ``retention_interval_seconds``; see docs/tiers.md#retention.
        """
        self._require_open()
        return self._parts.retention.apply()

    # -- moving -----------------------------------------------------------------------

    def export(
        self,
        path: str | os.PathLike[str],
        *,
        user_id: str | None = None,
        space: str | None = None,
        agent_id: str | None = None,
        embeddings: bool = False,
    ) -> TransferReport:
        """Write turns (of one user or space, or all) to JSONL; atomic: the file appears complete or not at all."""
        self._require_open()
        user = self._owner(user_id, space, agent_id, Access.READ) if user_id is not None or space else None
        return self._parts.transfer.export(path, user, embeddings=embeddings)

    def import_(self, path: str | os.PathLike[str]) -> TransferReport:
        """Load a JSONL export; on any bad line or conflicting id, none of it is stored.

        Every line is checked as ``add`` checks a message (unknown keys, text and metadata
        sizes), then the turns are written in transactions of at most ``max_messages_per_add``;
        stopped in between, the batches written stay, and importing the file again stores the
        rest. Turns keep their ids and times; ones already present unchanged are skipped. Vectors
        from the same model are reused, the rest are embedded. A space the file holds
        memories of is created if missing (grants are not exported).
        """
        self._require_open()
        return self._parts.transfer.import_(path, self._parts.spaces.ensure)

    # -- the derived tiers ------------------------------------------------------------

    def flush(self, timeout: float | None = 60.0, *, user_id: str | None = None, space: str | None = None) -> None:
        """Wait until background tier work queued so far is done: all of it, or that of one user or space.

        StorageError when ``timeout`` seconds pass first.
        """
        self._require_open()
        user = self._owner(user_id, space, None, Access.READ) if user_id is not None or space else None
        self._parts.tiers.flush(check_timeout(timeout), user)

    def consolidate(
        self, *, user_id: str | None = None, space: str | None = None, agent_id: str | None = None
    ) -> list[Consolidation]:
        """Run "sleep" now: cluster what is not consolidated yet and summarise each cluster."""
        user = self._owner(user_id, space, agent_id, Access.WRITE)
        self._parts.tiers.flush(60.0, user)  # this memory's queued work, run ahead of others'
        return self._parts.hierarchy.consolidate_backlog(user)

    def consolidations(
        self, *, user_id: str | None = None, space: str | None = None, agent_id: str | None = None, limit: int = 100
    ) -> list[Consolidation]:
        """Stored consolidation summaries, newest first, each with its TES."""
        user = self._owner(user_id, space, agent_id, Access.READ)
        return self._parts.store.consolidations(user, limit=check_limit(limit, maximum=100_000))

    def profile(
        self, *, user_id: str | None = None, space: str | None = None, agent_id: str | None = None
    ) -> dict[str, str]:
        """The user's (or space's) stable traits and preferences (key → value)."""
        return self._parts.store.profile(self._owner(user_id, space, agent_id, Access.READ))

    def cells(
        self,
        *,
        user_id: str | None = None,
        space: str | None = None,
        agent_id: str | None = None,
        attribute: str | None = None,
        subject: str | None = None,
        include_superseded: bool = False,
        limit: int = 100,
    ) -> list[Cell]:
        """Long-term memory cells, newest first; ``include_superseded`` shows what was said before.

        An ``agent_id`` that set trust weights (``set_trust``) sees, of facts that superseded
        one another, its most trusted writer's as current (docs/spaces.md).
        """
        target = self._target(user_id, space, agent_id, Access.READ)
        count = check_limit(limit, maximum=10_000)
        spaces = self._parts.spaces
        weighed = bool(spaces.trust_of(target.caller))
        found = self._parts.store.cells(
            target.user_id,
            subject=check_identifier(subject, "subject", required=False),
            attribute=check_identifier(attribute, "attribute", required=False),
            include_superseded=include_superseded or weighed,
            limit=count if not weighed else 10_000,
        )
        if not weighed:
            return found
        seen = spaces.cells_for(found, target.user_id, target.caller)
        return [cell for cell in seen if include_superseded or cell.superseded_by is None][:count]

    def patterns(
        self,
        *,
        user_id: str | None = None,
        space: str | None = None,
        agent_id: str | None = None,
        query: str | None = None,
        limit: int = 10,
    ) -> list[Pattern]:
        """Recurring interaction patterns, by frequency × recency; those matching ``query`` first."""
        user = self._owner(user_id, space, agent_id, Access.READ)
        if query is not None:
            query = check_text(query, "query", max_bytes=self.settings.max_text_bytes)
        procedural = self._parts.hierarchy.procedural
        return procedural.patterns(user, query, check_limit(limit, maximum=1000), datetime.now(UTC))

    def graph(
        self,
        *,
        query: str,
        user_id: str | None = None,
        space: str | None = None,
        agent_id: str | None = None,
        limit: int = 20,
    ) -> Subgraph:
        """The entities ``query`` mentions, their neighbours, and the edges between them."""
        user = self._owner(user_id, space, agent_id, Access.READ)
        query = check_text(query, "query", max_bytes=self.settings.max_text_bytes)
        return self._parts.hierarchy.graph.subgraph(user, query, check_limit(limit))

    def inspect(
        self, *, user_id: str | None = None, space: str | None = None, agent_id: str | None = None, limit: int = 20
    ) -> Inspection:
        """Each tier of a user or space: counts, working set, hot segments, profile, cells, patterns, entities, log."""
        user = self._owner(user_id, space, agent_id, Access.READ)
        return self._parts.tiers.inspect(user, check_limit(limit))

    def segment_turns(
        self, segment_id: str, *, user_id: str | None = None, space: str | None = None, agent_id: str | None = None
    ) -> list[Turn]:
        """The turns filed in one of the user's mid-term segments (active or archived), in the order they were said.

        Raises NotFound when ``segment_id`` names no segment of ``user_id`` that holds a turn.
        """
        user = self._owner(user_id, space, agent_id, Access.READ)
        return self._parts.tiers.segment_turns(str(check_identifier(segment_id, "segment_id")), user)

    def retry_failed_jobs(self, *, user_id: str | None = None, space: str | None = None) -> int:
        """Queue the background jobs that failed every attempt again (one user's or space's, or all); how many."""
        self._require_open()
        user = self._owner(user_id, space, None, Access.WRITE) if user_id is not None or space else None
        return self._parts.tiers.retry_failed_jobs(user)

    # -- shared spaces (docs/spaces.md) -----------------------------------------------

    def create_space(self, space: str, *, description: str | None = None, agent_id: str | None = None) -> Space:
        """A new shared space; the creating agent (if named) gets admin on it. IdConflict when the name is taken."""
        self._require_open()
        name = str(check_identifier(space, "space"))
        about = None if description is None else check_text(description, "description", max_bytes=4_096)
        return self._parts.spaces.create(name, about, check_identifier(agent_id, "agent_id", required=False))

    def spaces(self, *, agent_id: str | None = None, prefix: str = "") -> list[Space]:
        """The spaces (those ``agent_id`` may read, when named) whose name starts with ``prefix``, by name."""
        self._require_open()
        agent = check_identifier(agent_id, "agent_id", required=False)
        return self._parts.spaces.listed(agent, check_prefix(prefix))

    def delete_space(self, space: str, *, agent_id: str | None = None) -> Deletion:
        """Delete a space with its grants and memories (``agent_id`` needs admin); audited. NotFound if absent."""
        self._require_open()
        agent = check_identifier(agent_id, "agent_id", required=False)
        return self._parts.spaces.delete(str(check_identifier(space, "space")), agent)

    def grant(self, space: str, agent_id: str, access: str | Access, *, by: str | None = None) -> Grant:
        """Give ``agent_id`` read, write or admin access to a space, replacing what it had (``by`` needs admin)."""
        self._require_open()
        name = str(check_identifier(space, "space"))
        grantee = str(check_identifier(agent_id, "agent_id"))
        level = check_access(access)
        return self._parts.spaces.grant(name, grantee, level, check_identifier(by, "by", required=False))

    def revoke(self, space: str, agent_id: str, *, by: str | None = None) -> bool:
        """Take ``agent_id``'s access to a space away (``by`` needs admin); whether it had any."""
        self._require_open()
        name = str(check_identifier(space, "space"))
        grantee = str(check_identifier(agent_id, "agent_id"))
        return self._parts.spaces.revoke(name, grantee, check_identifier(by, "by", required=False))

    def grants(self, space: str, *, agent_id: str | None = None) -> list[Grant]:
        """Who may use a space, by agent id (``agent_id``, when named, needs read access)."""
        target = self._target(None, space, agent_id, Access.READ)
        return self._parts.store.grants(str(target.space))

    def set_trust(self, agent_id: str, of_agent: str, weight: float) -> None:
        """How much memories written by ``of_agent`` count (0–1, default 1) when ``agent_id`` reads them."""
        self._require_open()
        reader = str(check_identifier(agent_id, "agent_id"))
        writer = str(check_identifier(of_agent, "of_agent"))
        self._parts.store.set_trust(reader, writer, check_weight(weight))

    def origin(self, turn_id: str, *, space: str, agent_id: str | None = None) -> Share | None:
        """Where a memory of ``space`` was shared from (None: written there); NotFound for an unknown id."""
        target = self._target(None, space, agent_id, Access.READ)
        identifier = str(check_identifier(turn_id, "id"))
        if identifier not in self._parts.store.get_by_ids([identifier], target.user_id):
            raise NotFound(f"no memory with id {identifier!r} in space {target.space!r}")
        return self._parts.store.shares([identifier]).get(identifier)

    def trust(self, agent_id: str) -> dict[str, float]:
        """The trust weights ``agent_id`` set (agents not named count 1)."""
        self._require_open()
        return self._parts.store.trust_of(str(check_identifier(agent_id, "agent_id")))

    def share(
        self,
        ids: Iterable[str],
        *,
        to_space: str,
        user_id: str | None = None,
        space: str | None = None,
        agent_id: str | None = None,
    ) -> list[Turn]:
        """Copy memories of a user (or space) into ``to_space``, each linked to its source; never moves. The copies.

        ``agent_id`` needs read access to a source space and write access to ``to_space``;
        sharing the same memory again returns the same copy. Raises NotFound, AccessDenied.
        """
        chosen = [str(check_identifier(turn_id, "id")) for turn_id in check_names(ids, "ids")]
        if not chosen:
            raise InvalidInput("ids must name at least one memory")
        source = self._target(user_id, space, agent_id, Access.READ)
        to = self._target(None, to_space, agent_id, Access.WRITE)
        if source.user_id == to.user_id:
            raise InvalidInput("a memory is shared into another space than its own")
        return self._parts.spaces.share(chosen, source, to)

    # -- about ------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Where data lives, what is stored and its size on disk, the model, versions, this process's vector cache."""
        self._require_open()
        return self._parts.info()

    # -- helpers ----------------------------------------------------------------------

    def _require_open(self) -> None:
        self._parts.require_open()

    def _target(
        self, user_id: object, space: object, agent_id: object, needed: Access, session_id: object = None
    ) -> Target:
        """The checked memory a call names, once the Memory is known to be open; NotFound, AccessDenied."""
        self._require_open()
        return self._parts.spaces.target(user_id, space, agent_id, needed, session_id)

    def _owner(self, user_id: object, space: object, agent_id: object, needed: Access) -> str:
        """The scope id of the memory a call names (a user's id, or a space's scope id)."""
        return self._target(user_id, space, agent_id, needed).user_id

    def _reader(self, reader: object, target: Target) -> str | None:
        """The agent whose grants and trust apply to the spaces a read ranks: ``reader``, else the target's caller."""
        if reader is None:
            return target.caller
        agent = str(check_identifier(reader, "reader"))
        if target.space is not None and target.caller is not None and agent != target.caller:
            raise InvalidInput("in a space agent_id is the reader: leave reader out, or name the same agent")
        return agent

    def _shared(self, spaces: object, target: Target, reader: str | None) -> list[str]:
        """The spaces to rank with the target's memory: named ones (each checked for ``reader``), or all it may read."""
        if spaces is None:
            return []
        if spaces == "all":
            names = self._parts.spaces.readable(reader)
        else:
            names = list(dict.fromkeys(check_names(spaces, "spaces")))
            for name in names:
                self._parts.spaces.require(str(check_identifier(name, "spaces")), reader, Access.READ)
        return [name for name in names if name != target.space]


def _in(hit: Hit, scope_id: str) -> bool:
    """Whether ``hit`` comes from the memory stored under ``scope_id``."""
    return hit.space == space_of(scope_id)
