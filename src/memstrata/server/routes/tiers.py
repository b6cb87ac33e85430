"""A user's or space's tiers: inspect, segments, consolidation, profile, cells, patterns, graph, prune, jobs."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path, Query

from memstrata.models import Access
from memstrata.server.auth import ActorDep
from memstrata.server.bodies import StrictJSONRoute
from memstrata.server.dependencies import MemoryDep
from memstrata.server.roles import ADMIN, READ, WRITE
from memstrata.server.routes import (
    BODY_ERRORS,
    ERRORS,
    PROVIDER,
    SEGMENT_NOT_FOUND,
    SPACE_NOT_FOUND,
    SpaceQuery,
    UserQuery,
)
from memstrata.server.schemas import (
    MAX_PAGE,
    CellsResponse,
    ConsolidationsResponse,
    GraphOut,
    InspectionOut,
    PatternsResponse,
    ProfileOut,
    PruneOut,
    PruneRequest,
    RetriedJobsOut,
    SegmentTurnsResponse,
    UserRequest,
)
from memstrata.server.views import cell_out, consolidation_out, graph_out, inspection_out, memory_out, pattern_out

router = APIRouter(prefix="/v1", tags=["tiers"], route_class=StrictJSONRoute)

Page = Annotated[int, Query(ge=1, le=MAX_PAGE)]
SegmentPath = Annotated[str, Path(description="The segment's id (as inspect lists it).")]
READ_ERRORS = {**ERRORS, **SPACE_NOT_FOUND}


@router.get("/inspect", responses=READ_ERRORS, dependencies=[READ])
def inspect(
    memory: MemoryDep,
    actor: ActorDep,
    user_id: UserQuery = None,
    space: SpaceQuery = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> InspectionOut:
    """Every tier of a user or space: counts, working set, segments, profile, cells, patterns, entities, log."""
    whose = actor.whose(user_id, space)
    report = memory.inspect(user_id=whose.user_id, space=whose.space, agent_id=whose.agent_id, limit=limit)
    return inspection_out(report, actor.tenant)


@router.get("/segments/{segment_id}/turns", responses={**ERRORS, **SEGMENT_NOT_FOUND}, dependencies=[READ])
def segment_turns(
    segment_id: SegmentPath, memory: MemoryDep, actor: ActorDep, user_id: UserQuery = None, space: SpaceQuery = None
) -> SegmentTurnsResponse:
    """The turns filed in one of a user's (or space's) mid-term segments, in the order they were said; 404 if none."""
    whose = actor.whose(user_id, space)
    # Segment ids are memstrata's and carry no namespace; the namespaced user or space keeps the lookup in the tenant.
    found = memory.segment_turns(segment_id, user_id=whose.user_id, space=whose.space, agent_id=whose.agent_id)
    return SegmentTurnsResponse(segment_id=segment_id, turns=[memory_out(turn, actor.tenant) for turn in found])


@router.post("/consolidate", responses={**BODY_ERRORS, **SPACE_NOT_FOUND, **PROVIDER}, dependencies=[WRITE])
def consolidate(body: UserRequest, memory: MemoryDep, actor: ActorDep) -> ConsolidationsResponse:
    """Run "sleep" now for a user or space: summarise what is not consolidated yet (``Memory.consolidate``)."""
    whose = actor.whose(body.user_id, body.space)
    made = memory.consolidate(user_id=whose.user_id, space=whose.space, agent_id=whose.agent_id)
    return ConsolidationsResponse(consolidations=[consolidation_out(item, actor.tenant) for item in made])


@router.get("/consolidations", responses=READ_ERRORS, dependencies=[READ])
def consolidations(
    memory: MemoryDep, actor: ActorDep, user_id: UserQuery = None, space: SpaceQuery = None, limit: Page = 100
) -> ConsolidationsResponse:
    """Stored consolidation summaries, newest first, each with its TES."""
    whose = actor.whose(user_id, space)
    found = memory.consolidations(user_id=whose.user_id, space=whose.space, agent_id=whose.agent_id, limit=limit)
    return ConsolidationsResponse(consolidations=[consolidation_out(item, actor.tenant) for item in found])


@router.get("/profile", responses=READ_ERRORS, dependencies=[READ])
def profile(memory: MemoryDep, actor: ActorDep, user_id: UserQuery = None, space: SpaceQuery = None) -> ProfileOut:
    """A user's (or space's) stable traits and preferences."""
    whose = actor.whose(user_id, space)
    traits = memory.profile(user_id=whose.user_id, space=whose.space, agent_id=whose.agent_id)
    return ProfileOut(user_id=user_id, space=space, profile=traits)


@router.get("/cells", responses=READ_ERRORS, dependencies=[READ])
def cells(
    memory: MemoryDep,
    actor: ActorDep,
    user_id: UserQuery = None,
    space: SpaceQuery = None,
    attribute: str | None = None,
    subject: str | None = None,
    include_superseded: bool = False,
    limit: Page = 100,
) -> CellsResponse:
    """Long-term memory cells, newest first; ``include_superseded`` shows what was said before."""
    whose = actor.whose(user_id, space)
    found = memory.cells(
        user_id=whose.user_id,
        space=whose.space,
        agent_id=whose.agent_id,
        attribute=attribute,
        subject=subject,
        include_superseded=include_superseded,
        limit=limit,
    )
    return CellsResponse(cells=[cell_out(cell, actor.tenant) for cell in found])


@router.get("/patterns", responses=READ_ERRORS, dependencies=[READ])
def patterns(
    memory: MemoryDep,
    actor: ActorDep,
    user_id: UserQuery = None,
    space: SpaceQuery = None,
    query: str | None = None,
    limit: Page = 10,
) -> PatternsResponse:
    """Recurring interaction patterns, by frequency × recency; those matching ``query`` first."""
    whose = actor.whose(user_id, space)
    found = memory.patterns(user_id=whose.user_id, space=whose.space, agent_id=whose.agent_id, query=query, limit=limit)
    return PatternsResponse(patterns=[pattern_out(pattern) for pattern in found])


@router.get("/graph", responses=READ_ERRORS, dependencies=[READ])
def graph(
    memory: MemoryDep,
    actor: ActorDep,
    query: str,
    user_id: UserQuery = None,
    space: SpaceQuery = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> GraphOut:
    """The entities a query mentions, their neighbours, and the edges between them."""
    whose = actor.whose(user_id, space)
    return graph_out(
        memory.graph(user_id=whose.user_id, space=whose.space, agent_id=whose.agent_id, query=query, limit=limit)
    )


@router.post("/prune", responses={**BODY_ERRORS, **SPACE_NOT_FOUND}, dependencies=[ADMIN])
def prune(body: PruneRequest, memory: MemoryDep, actor: ActorDep) -> PruneOut:
    """Retention: delete a tier's items older than a cutoff and/or beyond the newest ``keep_last``.

    In a space the acting agent needs admin access.
    """
    whose = actor.whose(body.user_id, body.space)
    if whose.space is not None:
        actor.require(memory, whose.space, Access.ADMIN)  # Memory.prune takes no agent to check
    older_than = timedelta(seconds=body.older_than_seconds) if body.older_than_seconds is not None else None
    deleted = memory.prune(
        user_id=whose.user_id, space=whose.space, tier=body.tier, older_than=older_than, keep_last=body.keep_last
    )
    return PruneOut(user_id=body.user_id, space=body.space, tier=body.tier, deleted=deleted)


@router.post("/jobs/retry", responses={**BODY_ERRORS, **SPACE_NOT_FOUND}, dependencies=[WRITE])
def retry_jobs(body: UserRequest, memory: MemoryDep, actor: ActorDep) -> RetriedJobsOut:
    """Queue again a user's (or space's) background jobs that failed every attempt (``Memory.retry_failed_jobs``).

    In a space the acting agent needs write access.
    """
    whose = actor.whose(body.user_id, body.space)
    if whose.space is not None:
        actor.require(memory, whose.space, Access.WRITE)  # Memory.retry_failed_jobs takes no agent to check
    requeued = memory.retry_failed_jobs(user_id=whose.user_id, space=whose.space)
    return RetriedJobsOut(user_id=body.user_id, space=body.space, requeued=requeued)
