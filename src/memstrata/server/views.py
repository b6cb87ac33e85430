"""Core values as response models, with every stored id mapped back out of the tenant's namespace."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from memstrata.models import (
    Cell,
    Consolidation,
    Context,
    Deletion,
    EntityEdge,
    EntityNode,
    Hit,
    Inspection,
    MemoryEvent,
    Pattern,
    Segment,
    Subgraph,
    Turn,
)
from memstrata.server.schemas import (
    CellOut,
    ConsolidationOut,
    ContextItemOut,
    ContextOut,
    DeletionOut,
    EdgeOut,
    EntityOut,
    EventOut,
    GraphOut,
    HitOut,
    InspectionOut,
    MemoryOut,
    PatternOut,
    SegmentOut,
)
from memstrata.server.tenancy import Tenant

# Audit-log details that quote stored ids.
_ID_DETAILS = frozenset({"turn_id", "user_id"})


def _ids(tenant: Tenant, stored: Iterable[str]) -> list[str]:
    return [tenant.outside(item) for item in stored]


def memory_out(turn: Turn, tenant: Tenant) -> MemoryOut:
    """A stored turn."""
    return MemoryOut(
        id=tenant.outside(turn.id),
        user_id=tenant.outside(turn.user_id),
        role=turn.role.value,
        content=turn.content,
        created_at=turn.created_at,
        session_id=turn.session_id,
        agent_id=turn.agent_id,
        name=turn.name,
        metadata=dict(turn.metadata),
        importance=turn.importance,
    )


def hit_out(hit: Hit, tenant: Tenant) -> HitOut:
    """A search hit."""
    return HitOut(
        id=tenant.outside(hit.id),
        tier=hit.tier,
        content=hit.content,
        score=hit.score,
        turn=memory_out(hit.turn, tenant) if hit.turn is not None else None,
        source_turn_ids=_ids(tenant, hit.source_turn_ids),
        ranks=dict(hit.ranks),
    )


def context_out(context: Context, tenant: Tenant) -> ContextOut:
    """An assembled context."""
    return ContextOut(
        query=context.query,
        user_id=tenant.outside(context.user_id),
        text=context.text,
        tokens=context.tokens,
        token_budget=context.token_budget,
        items=[
            ContextItemOut(
                kind=item.kind,
                tier=item.tier,
                id=tenant.outside(item.id),
                text=item.text,
                tokens=item.tokens,
                score=item.score,
                source_turn_ids=_ids(tenant, item.source_turn_ids),
                is_abridged=item.is_abridged,
            )
            for item in context.items
        ],
        omitted=context.omitted,
        turn_ids=_ids(tenant, context.turn_ids),
    )


def deletion_out(deletion: Deletion, tenant: Tenant) -> DeletionOut:
    """What a forget removed."""
    return DeletionOut(
        user_id=tenant.outside(deletion.user_id),
        turns=deletion.turns,
        agent_id=deletion.agent_id,
        session_id=deletion.session_id,
    )


def cell_out(cell: Cell, tenant: Tenant) -> CellOut:
    """A long-term cell."""
    return CellOut(
        id=cell.id,
        user_id=tenant.outside(cell.user_id),
        kind=cell.kind,
        subject=cell.subject,
        attribute=cell.attribute,
        value=cell.value,
        content=cell.content,
        salience=cell.salience,
        valid_from=cell.valid_from,
        valid_to=cell.valid_to,
        superseded_by=cell.superseded_by,
        scene_id=cell.scene_id,
        source_turn_id=tenant.outside(cell.source_turn_id),
        is_current=cell.is_current,
    )


def pattern_out(pattern: Pattern) -> PatternOut:
    """A procedural pattern (it quotes no ids)."""
    return PatternOut(
        key=pattern.key,
        description=pattern.description,
        count=pattern.count,
        first_seen=pattern.first_seen,
        last_seen=pattern.last_seen,
        score=pattern.score,
        evidence=pattern.evidence,
    )


def entity_out(node: EntityNode) -> EntityOut:
    """An entity node."""
    return EntityOut(
        name=node.name, kind=node.kind, mentions=node.mentions, first_seen=node.first_seen, last_seen=node.last_seen
    )


def graph_out(graph: Subgraph) -> GraphOut:
    """Entities and the edges between them."""
    return GraphOut(
        nodes=[entity_out(node) for node in graph.nodes],
        edges=[_edge_out(edge) for edge in graph.edges],
    )


def _edge_out(edge: EntityEdge) -> EdgeOut:
    return EdgeOut(source=edge.source, target=edge.target, weight=edge.weight)


def consolidation_out(consolidation: Consolidation, tenant: Tenant) -> ConsolidationOut:
    """A sleep summary."""
    return ConsolidationOut(
        id=consolidation.id,
        user_id=tenant.outside(consolidation.user_id),
        summary=consolidation.summary,
        source_turn_ids=_ids(tenant, consolidation.source_turn_ids),
        compression_ratio=consolidation.compression_ratio,
        entity_preservation=consolidation.entity_preservation,
        tes=consolidation.tes,
        created_at=consolidation.created_at,
    )


def segment_out(segment: Segment, tenant: Tenant) -> SegmentOut:
    """A mid-term segment."""
    return SegmentOut(
        id=segment.id,
        user_id=tenant.outside(segment.user_id),
        summary=segment.summary,
        keywords=list(segment.keywords),
        visits=segment.visits,
        turn_count=segment.turn_count,
        heat=segment.heat,
        state=segment.state,
        created_at=segment.created_at,
        last_activity=segment.last_activity,
        session_id=segment.session_id,
        promoted_at=segment.promoted_at,
    )


def event_out(event: MemoryEvent, tenant: Tenant) -> EventOut:
    """An audit-log entry."""
    return EventOut(at=event.at, kind=event.kind, detail=_detail(event.detail, tenant))


def _detail(detail: Mapping[str, Any], tenant: Tenant) -> dict[str, Any]:
    return {
        key: tenant.outside(value) if key in _ID_DETAILS and isinstance(value, str) else value
        for key, value in detail.items()
    }


def inspection_out(report: Inspection, tenant: Tenant) -> InspectionOut:
    """Every tier of one user."""
    return InspectionOut(
        user_id=tenant.outside(report.user_id),
        counts=dict(report.counts),
        working=[memory_out(turn, tenant) for turn in report.working],
        segments=[segment_out(segment, tenant) for segment in report.segments],
        profile=dict(report.profile),
        cells=[cell_out(cell, tenant) for cell in report.cells],
        patterns=[pattern_out(pattern) for pattern in report.patterns],
        entities=[entity_out(node) for node in report.entities],
        consolidations=[consolidation_out(item, tenant) for item in report.consolidations],
        events=[event_out(event, tenant) for event in report.events],
        pending_jobs=report.pending_jobs,
        failed_jobs=report.failed_jobs,
    )
