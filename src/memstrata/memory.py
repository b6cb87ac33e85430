"""The Memory facade: the public API every front end calls. Each method checks its input and delegates."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from memstrata.config import Settings
from memstrata.embeddings.base import Embedder
from memstrata.errors import InvalidInput, NotFound
from memstrata.facade.chat import ChatRequest
from memstrata.facade.parts import Forwarded, Parts, open_parts, settings_for
from memstrata.llms.base import LLM
from memstrata.models import (
    Cell,
    ChatReply,
    Compaction,
    Consolidation,
    Context,
    Deletion,
    Hit,
    Inspection,
    Pattern,
    Role,
    Scope,
    SearchFilters,
    Subgraph,
    TransferReport,
    Turn,
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
        user_id: str,
        session_id: str | None = None,
        agent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        timestamp: datetime | str | None = None,
        id: str | None = None,
        importance: float | None = None,
    ) -> list[Turn]:
        """Store messages verbatim, indexed for search; the stored turns. Durable when it returns; never calls an LLM.

        ``messages`` is one string (a user message) or a list of ``{"role", "content",
        "name"?, "id"?, "metadata"?}`` dicts. Raises InvalidInput, and IdConflict for an id
        stored with other content (the same message again is not stored twice).
        """
        with self._parts.activity:
            self._require_open()
            scope = _scope(user_id, agent_id, session_id)
            parsed = parse_messages(messages, max_bytes=self.settings.max_text_bytes, default_id=id)
            shared = check_metadata(metadata)
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

    def get(self, turn_id: str, *, user_id: str) -> Turn:
        """The turn with this id in ``user_id``'s memory; NotFound otherwise."""
        user = self._user(user_id)
        identifier = str(check_identifier(turn_id, "id"))
        found = self._parts.store.get_by_ids([identifier], user).get(identifier)
        if found is None:
            raise NotFound(f"no memory with id {identifier!r} for user {user!r}")
        return found

    def history(
        self,
        *,
        user_id: str,
        session_id: str | None = None,
        agent_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
        newest_first: bool = False,
    ) -> list[Turn]:
        """Turns of a user (or one session) in time order, paginated."""
        self._require_open()
        scope = _scope(user_id, agent_id, session_id)
        offset = check_offset(offset)
        check_flag(newest_first, "newest_first")
        limit = check_limit(limit, maximum=10_000)
        store = self._parts.store
        return store.history(scope, limit=limit, offset=min(offset, LARGEST_COUNT), newest_first=newest_first)

    def users(self, prefix: str = "") -> list[str]:
        """Ids of the users with stored turns that start with ``prefix`` (all by default), in code point order."""
        self._require_open()
        return self._parts.store.user_ids(check_prefix(prefix))

    def search(
        self,
        query: str,
        *,
        user_id: str,
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
    ) -> list[Hit]:
        """The turns (with ``tiers``, derived items too) most relevant to ``query`` in ``user_id``'s memory, best first.

        Hybrid by default (full text and vectors fused, then reranked); see docs/python-api.md
        for modes, tiers, dates in the query, diversity and message bursts. Raises InvalidInput.
        """
        with self._parts.activity:
            mode = check_mode(mode)
            self._require_open()
            scope = _scope(user_id, agent_id, session_id)
            text = check_text(query, "query", max_bytes=self.settings.max_text_bytes)
            count = check_limit(limit)
            spread = check_fraction(diversity, "diversity")
            filters = SearchFilters(
                agent_id=scope.agent_id,
                session_id=scope.session_id,
                roles=tuple(check_role(role) for role in check_names(roles, "roles")),
                after=check_timestamp(after, "after"),
                before=check_timestamp(before, "before"),
            )
            wanted_tiers = check_tiers(check_names(tiers, "tiers"))
            zone = check_timezone(timezone) or self.settings.zone
            request = Query(
                text=text,
                user_id=scope.user_id,
                depth=max(self.settings.search_candidates, count),
                today=today_in(zone),
                zone=zone,
                filters=filters,
                mode=mode,
                # Derived items (cells, summaries) have no session or role: a filtered search stays on the turns.
                tiers=wanted_tiers if wanted_tiers and filters.is_empty and mode == "hybrid" else (),
            )
            hits = self._parts.pipeline.search(request, count, spread)
            self._parts.visits.note_hits(scope.user_id, hits)
            return hits

    def context(
        self,
        query: str,
        *,
        user_id: str,
        token_budget: int = 1000,
        agent_id: str | None = None,
        session_id: str | None = None,
        include_superseded: bool = False,
        timezone: str | None = None,
        verbatim: bool | None = None,
    ) -> Context:
        """What ``user_id``'s memory holds about ``query``, as one block of at most ``token_budget`` tokens.

        Profile, habits, facts, entities, summaries, excerpts and (with ``session_id``) the
        session's recent exchanges, stable parts first; see docs/python-api.md. Never calls
        an LLM. Raises InvalidInput.
        """
        zone = check_timezone(timezone)
        if verbatim is not None:
            check_flag(verbatim, "verbatim")
        self._require_open()
        scope = _scope(user_id, agent_id, session_id)
        text = check_text(query, "query", max_bytes=self.settings.max_text_bytes)
        budget = check_budget(token_budget)
        check_flag(include_superseded, "include_superseded")
        request = ContextRequest(
            text=text,
            scope=scope,
            budget=budget,
            zone=zone or self.settings.zone,
            include_superseded=include_superseded,
            verbatim=verbatim,
        )
        return self._parts.build_context(request)

    def chat(
        self,
        message: str,
        *,
        user_id: str,
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
        scope = _scope(user_id, agent_id, session_id)
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
            scope=scope,
            budget=budget,
            zone=zone,
            system=instructions,
            message_id=message_id,
            reply_id=reply_id,
        )
        return self._parts.chat.reply(request)

    # -- deleting ---------------------------------------------------------------------

    def delete(self, turn_id: str, *, user_id: str) -> None:
        """Hard-delete one turn of ``user_id`` with its index entries; NotFound if absent."""
        user = self._user(user_id)
        self._parts.episodic.delete(str(check_identifier(turn_id, "id")), user)

    def forget(self, *, user_id: str, agent_id: str | None = None, session_id: str | None = None) -> Deletion:
        """Hard-delete everything in a scope (a whole user by default), indexes included."""
        self._require_open()
        scope = _scope(user_id, agent_id, session_id)
        if scope.agent_id is None and scope.session_id is None:
            self._parts.visits.drop(scope.user_id)
        count = self._parts.episodic.forget(scope)
        return Deletion(user_id=scope.user_id, turns=count, agent_id=scope.agent_id, session_id=scope.session_id)

    def vacuum(self) -> Compaction:
        """Rewrite the store so deleted memories leave its files (writers wait); its size before and after."""
        self._require_open()
        return self._parts.vacuum()

    def prune(
        self,
        *,
        user_id: str,
        tier: str,
        older_than: timedelta | None = None,
        keep_last: int | None = None,
    ) -> int:
        """Retention: delete a tier's items older than ``older_than`` or beyond the newest ``keep_last``; how many."""
        user = self._user(user_id)
        tier, older_than, keep_last = check_prune(tier, older_than, keep_last)
        return self._parts.tiers.prune(user, tier, older_than, keep_last)

    # -- moving -----------------------------------------------------------------------

    def export(
        self, path: str | os.PathLike[str], *, user_id: str | None = None, embeddings: bool = False
    ) -> TransferReport:
        """Write turns (of one user, or all) to JSONL; atomic: the file appears complete or not at all."""
        self._require_open()
        user = self._user(user_id) if user_id is not None else None
        return self._parts.transfer.export(path, user, embeddings=embeddings)

    def import_(self, path: str | os.PathLike[str]) -> TransferReport:
        """Load a JSONL export; all of it is stored or, on any bad line, none of it.

        Turns keep their ids and times; ones already present unchanged are skipped. Vectors
        from the same model are reused, the rest are embedded.
        """
        self._require_open()
        return self._parts.transfer.import_(path)

    # -- the derived tiers ------------------------------------------------------------

    def flush(self, timeout: float | None = 60.0, *, user_id: str | None = None) -> None:
        """Wait until background tier work queued so far is done: all of it, or with ``user_id`` that user's.

        StorageError when ``timeout`` seconds pass first.
        """
        self._require_open()
        user = self._user(user_id) if user_id is not None else None
        self._parts.tiers.flush(check_timeout(timeout), user)

    def consolidate(self, *, user_id: str) -> list[Consolidation]:
        """Run "sleep" now: cluster what is not consolidated yet and summarise each cluster."""
        user = self._user(user_id)
        self.flush(user_id=user)  # this user's queued work, run ahead of other users'
        return self._parts.hierarchy.consolidate_backlog(user)

    def consolidations(self, *, user_id: str, limit: int = 100) -> list[Consolidation]:
        """Stored consolidation summaries, newest first, each with its TES."""
        user = self._user(user_id)
        return self._parts.store.consolidations(user, limit=check_limit(limit, maximum=100_000))

    def profile(self, *, user_id: str) -> dict[str, str]:
        """The user's stable traits and preferences (key → value)."""
        return self._parts.store.profile(self._user(user_id))

    def cells(
        self,
        *,
        user_id: str,
        attribute: str | None = None,
        subject: str | None = None,
        include_superseded: bool = False,
        limit: int = 100,
    ) -> list[Cell]:
        """Long-term memory cells, newest first; ``include_superseded`` shows what was said before."""
        user = self._user(user_id)
        return self._parts.store.cells(
            user,
            subject=check_identifier(subject, "subject", required=False),
            attribute=check_identifier(attribute, "attribute", required=False),
            include_superseded=include_superseded,
            limit=check_limit(limit, maximum=10_000),
        )

    def patterns(self, *, user_id: str, query: str | None = None, limit: int = 10) -> list[Pattern]:
        """Recurring interaction patterns, by frequency × recency; those matching ``query`` first."""
        user = self._user(user_id)
        if query is not None:
            query = check_text(query, "query", max_bytes=self.settings.max_text_bytes)
        procedural = self._parts.hierarchy.procedural
        return procedural.patterns(user, query, check_limit(limit, maximum=1000), datetime.now(UTC))

    def graph(self, *, user_id: str, query: str, limit: int = 20) -> Subgraph:
        """The entities ``query`` mentions, their neighbours, and the edges between them."""
        user = self._user(user_id)
        query = check_text(query, "query", max_bytes=self.settings.max_text_bytes)
        return self._parts.hierarchy.graph.subgraph(user, query, check_limit(limit))

    def inspect(self, *, user_id: str, limit: int = 20) -> Inspection:
        """Each tier of a user: counts, working set, hot segments, profile, cells, patterns, entities, log."""
        user = self._user(user_id)
        return self._parts.tiers.inspect(user, check_limit(limit))

    def segment_turns(self, segment_id: str, *, user_id: str) -> list[Turn]:
        """The turns filed in one of the user's mid-term segments (active or archived), in the order they were said.

        Raises NotFound when ``segment_id`` names no segment of ``user_id`` that holds a turn.
        """
        user = self._user(user_id)
        return self._parts.tiers.segment_turns(str(check_identifier(segment_id, "segment_id")), user)

    def retry_failed_jobs(self, *, user_id: str | None = None) -> int:
        """Queue the background jobs that failed every attempt again (``user_id``'s, or everyone's); how many."""
        self._require_open()
        return self._parts.tiers.retry_failed_jobs(self._user(user_id) if user_id is not None else None)

    # -- about ------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Where data lives, what is stored and its size on disk, the model, versions, this process's vector cache."""
        self._require_open()
        return self._parts.info()

    # -- helpers ----------------------------------------------------------------------

    def _require_open(self) -> None:
        self._parts.require_open()

    def _user(self, user_id: object) -> str:
        """A checked user id, once the Memory is known to be open."""
        self._require_open()
        return str(check_identifier(user_id, "user_id"))


def _scope(user_id: object, agent_id: object, session_id: object) -> Scope:
    return Scope(
        str(check_identifier(user_id, "user_id")),
        check_identifier(agent_id, "agent_id", required=False),
        check_identifier(session_id, "session_id", required=False),
    )
