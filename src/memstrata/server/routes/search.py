"""``/v1/search``, ``/v1/context`` and ``/v1/chat``: recall before answering, from a user's memory or a space's."""

from __future__ import annotations

from fastapi import APIRouter

from memstrata.server.auth import ActorDep
from memstrata.server.bodies import StrictJSONRoute
from memstrata.server.dependencies import IdsDep, MemoryDep
from memstrata.server.roles import READ, WRITE
from memstrata.server.routes import BODY_ERRORS, PROVIDER, SPACE_NOT_FOUND
from memstrata.server.schemas import (
    ChatOut,
    ChatRequest,
    ContextOut,
    ContextRequest,
    SearchRequest,
    SearchResponse,
    UsedMemoryOut,
)
from memstrata.server.views import context_out, hit_out

router = APIRouter(prefix="/v1", tags=["search"], route_class=StrictJSONRoute)


@router.post("/search", responses={**BODY_ERRORS, **SPACE_NOT_FOUND}, dependencies=[READ])
def search(body: SearchRequest, memory: MemoryDep, actor: ActorDep) -> SearchResponse:
    """The memories most relevant to a query, best first (``Memory.search``); query text is never search syntax.

    ``spaces`` ranks shared spaces (those named, or ``"all"`` the acting agent may read) with
    the memory named; each hit names its ``space`` and ``written_by``.
    """
    filters = body.filters
    whose = actor.whose(body.user_id, body.space, filters.agent_id)
    hits = memory.search(
        body.query,
        user_id=whose.user_id,
        space=whose.space,
        spaces=actor.shared(body.spaces),
        reader=actor.reader(whose, body.spaces),
        limit=body.limit,
        session_id=filters.session_id,
        agent_id=whose.agent_id,
        roles=filters.roles,
        after=filters.after,
        before=filters.before,
        mode=body.mode,
        tiers=body.tiers,
        diversity=body.diversity,
        timezone=body.timezone,
    )
    return SearchResponse(hits=[hit_out(hit, actor.tenant) for hit in hits])


@router.post("/context", responses={**BODY_ERRORS, **SPACE_NOT_FOUND}, dependencies=[READ])
def context(body: ContextRequest, memory: MemoryDep, actor: ActorDep) -> ContextOut:
    """A prompt-ready memory block packed under a token budget (``Memory.context``).

    ``spaces`` appends what shared spaces hold about the query, each line naming its space and writer.
    """
    whose = actor.whose(body.user_id, body.space, body.agent_id)
    assembled = memory.context(
        body.query,
        user_id=whose.user_id,
        space=whose.space,
        spaces=actor.shared(body.spaces),
        reader=actor.reader(whose, body.spaces),
        token_budget=body.token_budget,
        agent_id=whose.agent_id,
        session_id=body.session_id,
        include_superseded=body.include_superseded,
        timezone=body.timezone,
        verbatim=body.verbatim,
    )
    return context_out(assembled, actor.tenant)


@router.post("/chat", responses={**BODY_ERRORS, **SPACE_NOT_FOUND, 502: PROVIDER[502]}, dependencies=[WRITE])
def chat(body: ChatRequest, memory: MemoryDep, actor: ActorDep, ids: IdsDep) -> ChatOut:
    """Answer from memory with the configured LLM (an extractive reply without one), then store the exchange.

    In a ``space`` the acting agent needs write access: the exchange is stored as its own.
    """
    tenant = actor.tenant
    whose = actor.whose(body.user_id, body.space, body.agent_id)
    # Stored ids in the tenant's namespace, as add gives them: an export and re-import then matches them.
    reply = memory.chat(
        body.message,
        user_id=whose.user_id,
        space=whose.space,
        session_id=body.session_id,
        agent_id=whose.agent_id,
        token_budget=body.token_budget,
        system=body.system,
        timezone=body.timezone,
        message_id=tenant.inside(ids.new(), "id"),
        reply_id=tenant.inside(ids.new(), "id"),
    )
    return ChatOut(
        answer=reply.answer,
        is_extractive=reply.is_extractive,
        model=reply.model,
        provider=reply.provider,
        memories=[
            UsedMemoryOut(
                id=tenant.outside(m.id), kind=m.kind, tier=m.tier, score=m.score, text=m.text, is_abridged=m.is_abridged
            )
            for m in reply.memories
        ],
        context_tokens=reply.context_tokens,
        tokens_in=reply.tokens_in,
        tokens_out=reply.tokens_out,
        tokens_cached=reply.tokens_cached,
        consolidation_due=reply.consolidation_due,
        turn_ids=[tenant.outside(turn_id) for turn_id in reply.turn_ids],
    )
