"""Core values as response models, with every stored id mapped back out of the tenant's namespace.

A space's memories are stored under a scope id no client sees: they answer with the
space's plain name in ``space`` and ``user_id`` null, and their agents' plain ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from memstrata.models import (
    Cell,
    Consolidation,
    Context,
    ContextItem,
    Deletion,
    EntityEdge,
    EntityNode,
    Grant,
    Hit,
    Inspection,
    MemoryEvent,
    Pattern,
    Segment,
    Space,
    Subgraph,
    Turn,
    space_of,
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
from memstrata.server.space_schemas import GrantOut, SpaceOut
from memstrata.server.tenancy import Tenant

# Audit-log details that quote stored ids.
_ID_DETAILS = frozenset({"turn_id", "user_id"})


def _ids(tenant: Tenant, stored: Iterable[str]) -> list[str]:
    return [tenant.outside(item) for item in stored]


def owner_out(stored: str, tenant: Tenant) -> tuple[str | None, str | None]:
    """(user_id, space) a client sees for a stored scope id: a user's plain id, or a space's plain name."""
    space = space_of(stored)
    return (tenant.outside(stored), None) if space is None else (None, tenant.outside(space))


def _space(stored: str | None, tenant: Tenant) -> str | None:
    return None if stored is None else tenant.outside(stored)


def _agent(agent_id: str | None, space: str | None, tenant: Tenant) -> str | None:
    """An agent as a client sees it: in a space a namespaced agent; in a user's memory the client's own label."""
    return tenant.outside(agent_id) if space is not None and agent_id is not None else agent_id


def memory_out(turn: Turn, tenant: Tenant) -> MemoryOut:
    """A stored turn."""
    user_id, space = owner_out(turn.user_id, tenant)
    return MemoryOut(
        id=tenant.outside(turn.id),
        user_id=user_id,
        space=space,
        role=turn.role.value,
        content=turn.content,
        created_at=turn.created_at,
        session_id=turn.session_id,
        agent_id=_agent(turn.agent_id, space, tenant),
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
        space=_space(hit.space, tenant),
        written_by=_agent(hit.written_by, hit.space, tenant),
    )


def context_out(context: Context, tenant: Tenant) -> ContextOut:
    """An assembled context; its lines from shared spaces name the space and writer as the client knows them."""
    user_id, space = owner_out(context.user_id, tenant)
    text = context.text
    items: list[ContextItemOut] = []
    for item in context.items:
        line = _shared_line(item, tenant)
        if line != item.text:
            # Shared lines end the block, so a line's last occurrence is the line itself (not the user's own part).
            head, found, tail = text.rpartition(item.text)
            text = head + line + tail if found else text
        items.append(
            ContextItemOut(
                kind=item.kind,
                tier=item.tier,
                id=tenant.outside(item.id),
                text=line,
                tokens=item.tokens,
                score=item.score,
                source_turn_ids=_ids(tenant, item.source_turn_ids),
                is_abridged=item.is_abridged,
                space=_space(item.space, tenant),
                written_by=_agent(item.written_by, item.space, tenant),
            )
        )
    return ContextOut(
        query=context.query,
        user_id=user_id,
        space=space,
        text=text,
        tokens=context.tokens,
        token_budget=context.token_budget,
        items=items,
        omitted=context.omitted,
        turn_ids=_ids(tenant, context.turn_ids),
    )


def _shared_line(item: ContextItem, tenant: Tenant) -> str:
    """A context line from a shared space, "- [space, by writer] …", with the space and writer unprefixed."""
    if item.space is None:
        return item.text
    stored = f"- [{item.space}, by {item.written_by or 'unknown'}] "
    if not item.text.startswith(stored):
        return item.text  # the space's own context: its lines name no space
    writer = _agent(item.written_by, item.space, tenant) or "unknown"
    return f"- [{tenant.outside(item.space)}, by {writer}] " + item.text[len(stored) :]


def deletion_out(deletion: Deletion, tenant: Tenant) -> DeletionOut:
    """What a forget (or a space's deletion) removed."""
    user_id, space = owner_out(deletion.user_id, tenant)
    return DeletionOut(
        user_id=user_id,
        space=space,
        turns=deletion.turns,
        agent_id=deletion.agent_id,
        session_id=deletion.session_id,
    )


def cell_out(cell: Cell, tenant: Tenant) -> CellOut:
    """A long-term cell."""
    user_id, space = owner_out(cell.user_id, tenant)
    return CellOut(
        id=cell.id,
        user_id=user_id,
        space=space,
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
    user_id, space = owner_out(consolidation.user_id, tenant)
    return ConsolidationOut(
        id=consolidation.id,
        user_id=user_id,
        space=space,
        summary=consolidation.summary,
        source_turn_ids=_ids(tenant, consolidation.source_turn_ids),
        compression_ratio=consolidation.compression_ratio,
        entity_preservation=consolidation.entity_preservation,
        tes=consolidation.tes,
        created_at=consolidation.created_at,
    )


def segment_out(segment: Segment, tenant: Tenant) -> SegmentOut:
    """A mid-term segment."""
    user_id, space = owner_out(segment.user_id, tenant)
    return SegmentOut(
        id=segment.id,
        user_id=user_id,
        space=space,
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
    shown: dict[str, Any] = {}
    for key, value in detail.items():
        if key in _ID_DETAILS and isinstance(value, str):
            user_id, space = owner_out(value, tenant)
            if space is not None:
                shown["space"] = space  # a space's scope id is never shown, only its name
                continue
            value = user_id
        shown[key] = value
    return shown


def inspection_out(report: Inspection, tenant: Tenant) -> InspectionOut:
    """Every tier of one user or space."""
    user_id, space = owner_out(report.user_id, tenant)
    return InspectionOut(
        user_id=user_id,
        space=space,
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


def space_out(space: Space, tenant: Tenant) -> SpaceOut:
    """A shared space."""
    return SpaceOut(space=tenant.outside(space.name), description=space.description, created_at=space.created_at)


def grant_out(grant: Grant, tenant: Tenant) -> GrantOut:
    """An agent's access to a space."""
    return GrantOut(
        space=tenant.outside(grant.space),
        agent_id=tenant.outside(grant.agent_id),
        access=grant.access.value,
        granted_at=grant.granted_at,
    )
