"""A user's tiers: inspect, segments, consolidate, consolidations, profile, cells, patterns, graph, prune, jobs."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path, Query

from memstrata.server.auth import TenantDep
from memstrata.server.bodies import StrictJSONRoute
from memstrata.server.dependencies import MemoryDep
from memstrata.server.routes import BODY_ERRORS, ERRORS, PROVIDER, SEGMENT_NOT_FOUND, UserQuery
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


@router.get("/inspect", responses=ERRORS)
def inspect(
    memory: MemoryDep, tenant: TenantDep, user_id: UserQuery, limit: Annotated[int, Query(ge=1, le=100)] = 20
) -> InspectionOut:
    """Every tier of a user: counts, working set, segments, profile, cells, patterns, entities, log."""
    return inspection_out(memory.inspect(user_id=tenant.inside(user_id, "user_id"), limit=limit), tenant)


@router.get("/segments/{segment_id}/turns", responses={**ERRORS, **SEGMENT_NOT_FOUND})
def segment_turns(
    segment_id: SegmentPath, memory: MemoryDep, tenant: TenantDep, user_id: UserQuery
) -> SegmentTurnsResponse:
    """The turns filed in one of a user's mid-term segments, in the order they were said; 404 if it has none."""
    # Segment ids are memstrata's and carry no namespace; the namespaced user keeps the lookup in the tenant.
    found = memory.segment_turns(segment_id, user_id=tenant.inside(user_id, "user_id"))
    return SegmentTurnsResponse(segment_id=segment_id, turns=[memory_out(turn, tenant) for turn in found])


@router.post("/consolidate", responses={**BODY_ERRORS, **PROVIDER})
def consolidate(body: UserRequest, memory: MemoryDep, tenant: TenantDep) -> ConsolidationsResponse:
    """Run "sleep" now for a user: summarise what is not consolidated yet (``Memory.consolidate``)."""
    made = memory.consolidate(user_id=tenant.inside(body.user_id, "user_id"))
    return ConsolidationsResponse(consolidations=[consolidation_out(item, tenant) for item in made])


@router.get("/consolidations", responses=ERRORS)
def consolidations(
    memory: MemoryDep, tenant: TenantDep, user_id: UserQuery, limit: Page = 100
) -> ConsolidationsResponse:
    """Stored consolidation summaries, newest first, each with its TES."""
    found = memory.consolidations(user_id=tenant.inside(user_id, "user_id"), limit=limit)
    return ConsolidationsResponse(consolidations=[consolidation_out(item, tenant) for item in found])


@router.get("/profile", responses=ERRORS)
def profile(memory: MemoryDep, tenant: TenantDep, user_id: UserQuery) -> ProfileOut:
    """A user's stable traits and preferences."""
    return ProfileOut(user_id=user_id, profile=memory.profile(user_id=tenant.inside(user_id, "user_id")))


@router.get("/cells", responses=ERRORS)
def cells(
    memory: MemoryDep,
    tenant: TenantDep,
    user_id: UserQuery,
    attribute: str | None = None,
    subject: str | None = None,
    include_superseded: bool = False,
    limit: Page = 100,
) -> CellsResponse:
    """Long-term memory cells, newest first; ``include_superseded`` shows what was said before."""
    found = memory.cells(
        user_id=tenant.inside(user_id, "user_id"),
        attribute=attribute,
        subject=subject,
        include_superseded=include_superseded,
        limit=limit,
    )
    return CellsResponse(cells=[cell_out(cell, tenant) for cell in found])


@router.get("/patterns", responses=ERRORS)
def patterns(
    memory: MemoryDep, tenant: TenantDep, user_id: UserQuery, query: str | None = None, limit: Page = 10
) -> PatternsResponse:
    """Recurring interaction patterns, by frequency × recency; those matching ``query`` first."""
    found = memory.patterns(user_id=tenant.inside(user_id, "user_id"), query=query, limit=limit)
    return PatternsResponse(patterns=[pattern_out(pattern) for pattern in found])


@router.get("/graph", responses=ERRORS)
def graph(
    memory: MemoryDep,
    tenant: TenantDep,
    user_id: UserQuery,
    query: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> GraphOut:
    """The entities a query mentions, their neighbours, and the edges between them."""
    return graph_out(memory.graph(user_id=tenant.inside(user_id, "user_id"), query=query, limit=limit))


@router.post("/prune", responses=BODY_ERRORS)
def prune(body: PruneRequest, memory: MemoryDep, tenant: TenantDep) -> PruneOut:
    """Retention: delete a tier's items older than a cutoff and/or beyond the newest ``keep_last``."""
    older_than = timedelta(seconds=body.older_than_seconds) if body.older_than_seconds is not None else None
    deleted = memory.prune(
        user_id=tenant.inside(body.user_id, "user_id"), tier=body.tier, older_than=older_than, keep_last=body.keep_last
    )
    return PruneOut(user_id=body.user_id, tier=body.tier, deleted=deleted)


@router.post("/jobs/retry", responses=BODY_ERRORS)
def retry_jobs(body: UserRequest, memory: MemoryDep, tenant: TenantDep) -> RetriedJobsOut:
    """Queue again a user's background jobs that failed every attempt (``Memory.retry_failed_jobs``)."""
    requeued = memory.retry_failed_jobs(user_id=tenant.inside(body.user_id, "user_id"))
    return RetriedJobsOut(user_id=body.user_id, requeued=requeued)
