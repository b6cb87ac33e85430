"""``/v1/search``, ``/v1/context`` and ``/v1/chat``: recall before answering."""

from __future__ import annotations

from fastapi import APIRouter

from memstrata.server.auth import TenantDep
from memstrata.server.bodies import StrictJSONRoute
from memstrata.server.dependencies import IdsDep, MemoryDep
from memstrata.server.routes import BODY_ERRORS, PROVIDER
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


@router.post("/search", responses=BODY_ERRORS)
def search(body: SearchRequest, memory: MemoryDep, tenant: TenantDep) -> SearchResponse:
    """The memories most relevant to a query, best first (``Memory.search``); query text is never search syntax."""
    filters = body.filters
    hits = memory.search(
        body.query,
        user_id=tenant.inside(body.user_id, "user_id"),
        limit=body.limit,
        session_id=filters.session_id,
        agent_id=filters.agent_id,
        roles=filters.roles,
        after=filters.after,
        before=filters.before,
        mode=body.mode,
        tiers=body.tiers,
        diversity=body.diversity,
        timezone=body.timezone,
    )
    return SearchResponse(hits=[hit_out(hit, tenant) for hit in hits])


@router.post("/context", responses=BODY_ERRORS)
def context(body: ContextRequest, memory: MemoryDep, tenant: TenantDep) -> ContextOut:
    """A prompt-ready memory block packed under a token budget (``Memory.context``)."""
    assembled = memory.context(
        body.query,
        user_id=tenant.inside(body.user_id, "user_id"),
        token_budget=body.token_budget,
        agent_id=body.agent_id,
        session_id=body.session_id,
        include_superseded=body.include_superseded,
        timezone=body.timezone,
        verbatim=body.verbatim,
    )
    return context_out(assembled, tenant)


@router.post("/chat", responses={**BODY_ERRORS, 502: PROVIDER[502]})
def chat(body: ChatRequest, memory: MemoryDep, tenant: TenantDep, ids: IdsDep) -> ChatOut:
    """Answer from memory with the configured LLM (an extractive reply without one), then store the exchange."""
    # Stored ids in the tenant's namespace, as add gives them: an export and re-import then matches them.
    reply = memory.chat(
        body.message,
        user_id=tenant.inside(body.user_id, "user_id"),
        session_id=body.session_id,
        agent_id=body.agent_id,
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
