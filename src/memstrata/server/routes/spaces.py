"""``/v1/spaces`` and ``/v1/trust``: shared spaces, who may use them, sharing into them, and trust between agents.

Every call here acts as the request's agent (its API key's, else ``server_agent_id``) and
is checked against that agent's grants; a request that acts as no agent gets 403.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from memstrata.errors import InvalidInput, NotFound
from memstrata.memory import Memory
from memstrata.server.acting import Actor
from memstrata.server.auth import ActorDep
from memstrata.server.bodies import StrictJSONRoute
from memstrata.server.dependencies import MemoryDep
from memstrata.server.roles import ADMIN, READ, WRITE
from memstrata.server.routes import BODY_ERRORS, ERRORS, SPACE_NOT_FOUND
from memstrata.server.schemas import DeletionOut, ErrorOut
from memstrata.server.space_schemas import (
    GrantOut,
    GrantRequest,
    GrantsResponse,
    ShareRequest,
    ShareResponse,
    SpaceOut,
    SpaceRequest,
    SpacesResponse,
    TrustOut,
    TrustRequest,
)
from memstrata.server.views import deletion_out, grant_out, memory_out, space_out
from memstrata.validation import MAX_IDENTIFIER_LENGTH

router = APIRouter(prefix="/v1", tags=["spaces"], route_class=StrictJSONRoute)

SpacePath = Annotated[str, Path(description="The space's name.")]
AgentPath = Annotated[str, Path(description="An agent's id (it may contain '/').")]
TAKEN: dict[int | str, dict[str, Any]] = {409: {"model": ErrorOut, "description": "The name is taken"}}
NO_GRANT: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No such space, or the agent had no access to it"}
}
SHARE_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No such space, or no such memory where the ids were said to be"}
}


@router.post("/spaces", status_code=201, responses={**BODY_ERRORS, **TAKEN}, dependencies=[ADMIN])
def create_space(body: SpaceRequest, memory: MemoryDep, actor: ActorDep) -> SpaceOut:
    """Create a shared space (``Memory.create_space``); the acting agent gets admin on it. 409 if the name is taken."""
    if "/" in body.space:
        raise InvalidInput(f"space {body.space!r} may not contain '/': its name is part of the paths under /v1/spaces")
    made = memory.create_space(actor.space(body.space), description=body.description, agent_id=actor.agent())
    return space_out(made, actor.tenant)


@router.get("/spaces", responses=ERRORS, dependencies=[READ])
def list_spaces(
    memory: MemoryDep,
    actor: ActorDep,
    prefix: Annotated[str, Query(max_length=MAX_IDENTIFIER_LENGTH, description="Only names starting with it.")] = "",
) -> SpacesResponse:
    """The spaces the acting agent may read (``Memory.spaces``), by name."""
    found = memory.spaces(agent_id=actor.agent(), prefix=actor.tenant.prefix + prefix)
    return SpacesResponse(spaces=[space_out(space, actor.tenant) for space in found])


@router.delete("/spaces/{space}", responses={**ERRORS, **SPACE_NOT_FOUND}, dependencies=[ADMIN])
def delete_space(space: SpacePath, memory: MemoryDep, actor: ActorDep) -> DeletionOut:
    """Delete a space with its grants and every memory in it (``Memory.delete_space``); the agent needs admin."""
    return deletion_out(memory.delete_space(actor.space(space), agent_id=actor.agent()), actor.tenant)


@router.get("/spaces/{space}/grants", responses={**ERRORS, **SPACE_NOT_FOUND}, dependencies=[READ])
def grants(space: SpacePath, memory: MemoryDep, actor: ActorDep) -> GrantsResponse:
    """Who may use a space, by agent id (``Memory.grants``); the acting agent needs read access."""
    found = memory.grants(actor.space(space), agent_id=actor.agent())
    return GrantsResponse(grants=[grant_out(grant, actor.tenant) for grant in found])


@router.put(
    "/spaces/{space}/grants/{agent_id:path}", responses={**BODY_ERRORS, **SPACE_NOT_FOUND}, dependencies=[ADMIN]
)
def grant(space: SpacePath, agent_id: AgentPath, body: GrantRequest, memory: MemoryDep, actor: ActorDep) -> GrantOut:
    """Give an agent read, write or admin access to a space, replacing what it had (``Memory.grant``); needs admin."""
    made = memory.grant(actor.space(space), actor.tenant.inside(agent_id, "agent_id"), body.access, by=actor.agent())
    return grant_out(made, actor.tenant)


@router.delete(
    "/spaces/{space}/grants/{agent_id:path}", status_code=204, responses={**ERRORS, **NO_GRANT}, dependencies=[ADMIN]
)
def revoke(space: SpacePath, agent_id: AgentPath, memory: MemoryDep, actor: ActorDep) -> Response:
    """Take an agent's access to a space away (``Memory.revoke``); needs admin. 404 if it had none."""
    if not memory.revoke(actor.space(space), actor.tenant.inside(agent_id, "agent_id"), by=actor.agent()):
        raise NotFound(f"agent {agent_id!r} had no access to space {space!r}")
    return Response(status_code=204)


@router.post(
    "/spaces/{space}/share", status_code=201, responses={**BODY_ERRORS, **SHARE_NOT_FOUND}, dependencies=[WRITE]
)
def share(space: SpacePath, body: ShareRequest, memory: MemoryDep, actor: ActorDep) -> ShareResponse:
    """Copy memories of a user (or of another space) into this one, each linked to its source (``Memory.share``).

    The acting agent needs write access here (and read access to a source space); the copies
    are written as its own. Sharing the same memory again answers the same copy.
    """
    tenant = actor.tenant
    source = actor.whose(body.user_id, body.space)
    agent = actor.agent()
    ids = [
        tenant.find(
            given,
            lambda stored: memory.get(stored, user_id=source.user_id, space=source.space, agent_id=agent).id,
        )
        for given in body.ids
    ]
    copies = memory.share(ids, to_space=actor.space(space), user_id=source.user_id, space=source.space, agent_id=agent)
    return ShareResponse(memories=[memory_out(turn, tenant) for turn in copies])


#: A path whose agent id holds a line break matches no route.
UNROUTABLE: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No route: an agent id with a line break cannot be named in a path"}
}


@router.get("/trust", responses=ERRORS, dependencies=[READ])
def trust(memory: MemoryDep, actor: ActorDep) -> TrustOut:
    """The weights the acting agent gives other agents' memories in spaces (``Memory.trust``); others count 1."""
    return _trust_out(memory, actor.agent(), actor)


@router.put("/trust/{of_agent:path}", responses={**BODY_ERRORS, **UNROUTABLE}, dependencies=[WRITE])
def set_trust(of_agent: AgentPath, body: TrustRequest, memory: MemoryDep, actor: ActorDep) -> TrustOut:
    """How much memories by ``of_agent`` count (0–1) when the acting agent reads spaces (``Memory.set_trust``)."""
    agent = actor.agent()
    memory.set_trust(agent, actor.tenant.inside(of_agent, "of_agent"), body.weight)
    return _trust_out(memory, agent, actor)


def _trust_out(memory: Memory, agent: str, actor: Actor) -> TrustOut:
    tenant = actor.tenant
    # Only the tenant's agents: a weight set from Python on another tenant's agent is not this tenant's to see.
    weights = {tenant.outside(other): weight for other, weight in memory.trust(agent).items() if tenant.owns(other)}
    return TrustOut(agent_id=tenant.outside(agent), trust=weights)
