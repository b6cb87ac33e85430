"""``/v1/memories``: add, list (history), get and delete stored messages, of a user or a shared space."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Response

from memstrata.ids import IdGenerator
from memstrata.server.auth import ActorDep
from memstrata.server.bodies import StrictJSONRoute
from memstrata.server.dependencies import IdsDep, MemoryDep
from memstrata.server.roles import READ, WRITE
from memstrata.server.routes import (
    BODY_ERRORS,
    CONFLICT,
    ERRORS,
    NOT_FOUND,
    SPACE_NOT_FOUND,
    AgentQuery,
    ScopeQuery,
    SpaceQuery,
    UserQuery,
)
from memstrata.server.schemas import MAX_OFFSET, MAX_PAGE, AddRequest, AddResponse, HistoryResponse, MemoryOut
from memstrata.server.tenancy import Tenant
from memstrata.server.views import memory_out

router = APIRouter(prefix="/v1", tags=["memories"], route_class=StrictJSONRoute)

MemoryPath = Annotated[str, Path(description="The memory's id (as returned by add).")]


@router.post(
    "/memories", status_code=201, responses={**BODY_ERRORS, **CONFLICT, **SPACE_NOT_FOUND}, dependencies=[WRITE]
)
def add_memories(body: AddRequest, memory: MemoryDep, actor: ActorDep, ids: IdsDep) -> AddResponse:
    """Store messages verbatim, indexed for search (``Memory.add``); durable when it answers.

    In a ``space`` the messages are written by the acting agent, which needs write access.
    """
    tenant = actor.tenant
    whose = actor.whose(body.user_id, body.space, body.agent_id)
    messages: str | list[dict[str, Any]]
    single_id: str | None
    if isinstance(body.messages, str):
        messages = body.messages
        single_id = tenant.inside(body.id if body.id is not None else ids.new(), "id")
    else:
        messages = [_message(index, item.model_dump(), tenant, ids) for index, item in enumerate(body.messages)]
        single_id = tenant.optional(body.id, "id")
    stored = memory.add(
        messages,
        user_id=whose.user_id,
        space=whose.space,
        session_id=body.session_id,
        agent_id=whose.agent_id,
        metadata=body.metadata,
        timestamp=body.timestamp,
        id=single_id,
        importance=body.importance,
    )
    return AddResponse(memories=[memory_out(turn, tenant) for turn in stored])


def _message(index: int, message: dict[str, Any], tenant: Tenant, ids: IdGenerator) -> dict[str, Any]:
    """A message as Memory.add takes it, its id (given or made here) in the tenant's namespace."""
    given = message.pop("id")
    message["id"] = tenant.inside(given if given is not None else ids.new(), f"messages[{index}].id")
    return {key: value for key, value in message.items() if value is not None}


@router.get("/memories", responses={**ERRORS, **SPACE_NOT_FOUND}, dependencies=[READ])
def history(
    memory: MemoryDep,
    actor: ActorDep,
    user_id: UserQuery = None,
    space: SpaceQuery = None,
    session_id: ScopeQuery = None,
    agent_id: AgentQuery = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    newest_first: bool = False,
) -> HistoryResponse:
    """A user's or space's (or one session's) messages in time order, a page at a time (``Memory.history``)."""
    whose = actor.whose(user_id, space, agent_id)
    page = memory.history(
        user_id=whose.user_id,
        space=whose.space,
        session_id=session_id,
        agent_id=whose.agent_id,
        limit=limit + 1,  # one more than asked tells whether another page exists
        offset=offset,
        newest_first=newest_first,
    )
    more = len(page) > limit
    return HistoryResponse(
        memories=[memory_out(turn, actor.tenant) for turn in page[:limit]], next_offset=offset + limit if more else None
    )


@router.get("/memories/{memory_id:path}", responses={**ERRORS, **NOT_FOUND}, dependencies=[READ])
def get_memory(
    memory_id: MemoryPath, memory: MemoryDep, actor: ActorDep, user_id: UserQuery = None, space: SpaceQuery = None
) -> MemoryOut:
    """One stored message of a user or space (``Memory.get``); 404 if it has none with this id."""
    _refuse_a_trailing_slash(memory_id)
    whose = actor.whose(user_id, space)
    turn = actor.tenant.find(
        memory_id,
        lambda stored: memory.get(stored, user_id=whose.user_id, space=whose.space, agent_id=whose.agent_id),
    )
    return memory_out(turn, actor.tenant)


@router.delete("/memories/{memory_id:path}", status_code=204, responses={**ERRORS, **NOT_FOUND}, dependencies=[WRITE])
def delete_memory(
    memory_id: MemoryPath, memory: MemoryDep, actor: ActorDep, user_id: UserQuery = None, space: SpaceQuery = None
) -> Response:
    """Hard-delete one message with its index entries (``Memory.delete``); 404 if absent."""
    _refuse_a_trailing_slash(memory_id)
    whose = actor.whose(user_id, space)
    actor.tenant.find(
        memory_id,
        lambda stored: memory.delete(stored, user_id=whose.user_id, space=whose.space, agent_id=whose.agent_id),
    )
    return Response(status_code=204)


def _refuse_a_trailing_slash(memory_id: str) -> None:
    """``/v1/memories/`` names no memory: a 404 like any path with a trailing slash, not an empty id."""
    if not memory_id:
        raise HTTPException(status_code=404, detail="Not Found")
