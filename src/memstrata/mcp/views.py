"""Core results as tool outputs: the structured model and the text a model reads, side by side."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, tzinfo

from memstrata.mcp.schemas import (
    AddOut,
    CellOut,
    ChatOut,
    ContextItemOut,
    ContextOut,
    EntityOut,
    ForgetOut,
    GrantOut,
    HitOut,
    InspectOut,
    MemoryOut,
    PatternOut,
    RevokeOut,
    SearchOut,
    SegmentOut,
    ShareOut,
    SpaceOut,
    SpacesOut,
    UsedMemoryOut,
)
from memstrata.mcp.scope import Whose
from memstrata.models import (
    Access,
    ChatReply,
    Context,
    Deletion,
    Grant,
    Hit,
    Inspection,
    Space,
    Turn,
    space_of,
)

SNIPPET = 200


def memory_out(turn: Turn) -> MemoryOut:
    """One turn as a tool sees it."""
    return MemoryOut(
        id=turn.id,
        role=str(turn.role),
        content=turn.content,
        created_at=turn.created_at,
        session_id=turn.session_id,
        agent_id=turn.agent_id,
    )


def add_out(whose: Whose, turns: Sequence[Turn]) -> AddOut:
    """What ``Memory.add`` stored."""
    return AddOut(user_id=whose.user_id, space=whose.space, memories=[memory_out(turn) for turn in turns])


def add_text(output: AddOut) -> str:
    """``Stored 1 memory for ana: …`` (``… in space apollo``)."""
    where = f"in space {output.space}" if output.space is not None else f"for {output.user_id}"
    lines = [f"Stored {_count(len(output.memories), 'memory', 'memories')} {where}."]
    lines += [f"- {memory.id} ({memory.role}): {_snippet(memory.content)}" for memory in output.memories]
    return "\n".join(lines)


def search_out(whose: Whose, query: str, hits: Sequence[Hit]) -> SearchOut:
    """What ``Memory.search`` found."""
    return SearchOut(user_id=whose.user_id, space=whose.space, query=query, hits=[_hit_out(hit) for hit in hits])


def _hit_out(hit: Hit) -> HitOut:
    turn = hit.turn
    return HitOut(
        id=hit.id,
        tier=hit.tier,
        content=hit.content,
        score=hit.score,
        role=str(turn.role) if turn else None,
        created_at=turn.created_at if turn else None,
        session_id=turn.session_id if turn else None,
        agent_id=turn.agent_id if turn else None,
        source_turn_ids=list(hit.source_turn_ids),
        space=hit.space,
        written_by=hit.written_by,
    )


def search_text(output: SearchOut, zone: tzinfo = UTC) -> str:
    """One numbered line per hit, with its date in ``zone``, speaker and id; or a sentence saying nothing matched."""
    whom = _whom(output.user_id, output.space)
    if not output.hits:
        return f"No memories of {whom} match {output.query!r}."
    lines = [f"{_count(len(output.hits), 'memory', 'memories')} of {whom} for {output.query!r}, best first:"]
    for rank, hit in enumerate(output.hits, 1):
        where = [f"{hit.created_at.astimezone(zone):%Y-%m-%d}" if hit.created_at else hit.tier, hit.role or ""]
        if hit.session_id:
            where.append(f"session {hit.session_id}")
        if hit.space is not None:  # as a context names shared memories: their space and writer
            where.append(f"space {hit.space}" + (f", by {hit.written_by}" if hit.written_by else ""))
        label = ", ".join(part for part in where if part)
        lines.append(f"{rank}. [{label}] {hit.content} (id {hit.id}, score {hit.score:.3f})")
    return "\n".join(lines)


def context_out(context: Context) -> ContextOut:
    """What ``Memory.context`` assembled."""
    space = space_of(context.user_id)
    return ContextOut(
        user_id=context.user_id if space is None else None,
        space=space,
        query=context.query,
        text=context.text,
        tokens=context.tokens,
        token_budget=context.token_budget,
        omitted=context.omitted,
        items=[
            ContextItemOut(
                kind=item.kind,
                tier=item.tier,
                id=item.id,
                tokens=item.tokens,
                source_turn_ids=list(item.source_turn_ids),
                is_abridged=item.is_abridged,
                space=item.space,
                written_by=item.written_by,
            )
            for item in context.items
        ],
    )


def context_text(output: ContextOut) -> str:
    """The block itself, ready for a prompt."""
    return (
        output.text
        or f"Nothing in the memory of {_whom(output.user_id, output.space)} relates to {output.query!r} yet."
    )


def forget_out(deletion: Deletion) -> ForgetOut:
    """What ``Memory.forget`` deleted."""
    return ForgetOut(
        user_id=deletion.user_id if deletion.space is None else None,
        space=deletion.space,
        agent_id=deletion.agent_id,
        session_id=deletion.session_id,
        deleted_turns=deletion.turns,
    )


def forget_text(output: ForgetOut) -> str:
    """``Deleted 3 memories of ana (session s1).``"""
    narrowed = []
    if output.agent_id:
        narrowed.append(f"agent {output.agent_id}")
    if output.session_id:
        narrowed.append(f"session {output.session_id}")
    where = f" ({', '.join(narrowed)})" if narrowed else ""
    whom = _whom(output.user_id, output.space)
    return f"Deleted {_count(output.deleted_turns, 'memory', 'memories')} of {whom}{where}, permanently."


def inspect_out(report: Inspection) -> InspectOut:
    """What ``Memory.inspect`` reported."""
    space = space_of(report.user_id)
    return InspectOut(
        user_id=report.user_id if space is None else None,
        space=space,
        counts=dict(report.counts),
        pending_jobs=report.pending_jobs,
        failed_jobs=report.failed_jobs,
        profile=dict(report.profile),
        working=[memory_out(turn) for turn in report.working],
        cells=[
            CellOut(
                id=cell.id,
                kind=cell.kind,
                content=cell.content,
                is_current=cell.is_current,
                valid_from=cell.valid_from,
                valid_to=cell.valid_to,
            )
            for cell in report.cells
        ],
        segments=[
            SegmentOut(
                id=segment.id,
                summary=segment.summary,
                heat=segment.heat,
                state=segment.state,
                turn_count=segment.turn_count,
            )
            for segment in report.segments
        ],
        patterns=[
            PatternOut(description=pattern.description, count=pattern.count, score=pattern.score)
            for pattern in report.patterns
        ],
        entities=[
            EntityOut(name=entity.name, kind=entity.kind, mentions=entity.mentions) for entity in report.entities
        ],
        consolidations=[consolidation.summary for consolidation in report.consolidations],
    )


def inspect_text(output: InspectOut) -> str:
    """Counts first, then each non-empty tier as a short list."""
    counts = ", ".join(f"{name} {count}" for name, count in output.counts.items()) or "empty"
    jobs = f"{output.pending_jobs} background jobs pending"
    if output.failed_jobs:
        jobs += (
            f", {output.failed_jobs} failed (their tier work is missing; "
            "retry them with memstrata retry-jobs or POST /v1/jobs/retry)"
        )
    lines = [f"Memory of {_whom(output.user_id, output.space)}: {counts}; {jobs}."]
    if output.profile:
        lines.append("Profile: " + "; ".join(f"{key}: {value}" for key, value in output.profile.items()))
    sections: list[tuple[str, list[str]]] = [
        ("Facts (long-term)", [f"{cell.content}{'' if cell.is_current else ' (superseded)'}" for cell in output.cells]),
        ("Topics (mid-term)", [f"{segment.summary} (heat {segment.heat:.2f})" for segment in output.segments]),
        ("Habits", [f"{pattern.description} (seen {pattern.count}×)" for pattern in output.patterns]),
        ("Entities", [f"{entity.name} ({entity.kind}, {entity.mentions})" for entity in output.entities]),
        ("Consolidated summaries", list(output.consolidations)),
        ("Working memory (latest)", [f"{memory.role}: {_snippet(memory.content)}" for memory in output.working]),
    ]
    for title, entries in sections:
        if entries:
            lines.append(f"{title}:")
            lines += [f"- {entry}" for entry in entries]
    return "\n".join(lines)


def chat_out(whose: Whose, reply: ChatReply) -> ChatOut:
    """What ``Memory.chat`` answered."""
    return ChatOut(
        user_id=whose.user_id,
        space=whose.space,
        answer=reply.answer,
        model=reply.model,
        provider=reply.provider,
        is_extractive=reply.is_extractive,
        memories=[
            UsedMemoryOut(id=used.id, kind=used.kind, tier=used.tier, text=used.text, is_abridged=used.is_abridged)
            for used in reply.memories
        ],
        turn_ids=list(reply.turn_ids),
        context_tokens=reply.context_tokens,
        tokens_in=reply.tokens_in,
        tokens_out=reply.tokens_out,
    )


def chat_text(output: ChatOut) -> str:
    """The reply itself."""
    return output.answer


def _whom(user_id: str | None, space: str | None) -> str:
    """``ana``, or ``space apollo``."""
    return f"space {space}" if space is not None else str(user_id)


def _count(number: int, singular: str, plural: str) -> str:
    return f"{number} {singular if number == 1 else plural}"


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET else flat[: SNIPPET - 1] + "…"


def space_out(space: Space, access: Access | None) -> SpaceOut:
    """A space, and the acting agent's access to it."""
    return SpaceOut(
        name=space.name,
        created_at=space.created_at,
        description=space.description,
        access=None if access is None else access.value,
    )


def space_text(output: SpaceOut) -> str:
    """``Space apollo (the project): you have admin access.``"""
    about = f" ({output.description})" if output.description else ""
    return f"Space {output.name}{about}: you have {output.access or 'no'} access."


def spaces_text(output: SpacesOut) -> str:
    """One line per space the agent may read."""
    if not output.spaces:
        return f"Agent {output.agent_id} may read no shared space yet; an admin of one can grant it access."
    lines = [f"Shared spaces agent {output.agent_id} may read:"]
    for space in output.spaces:
        about = f": {space.description}" if space.description else ""
        lines.append(f"- {space.name} ({space.access} access){about}")
    return "\n".join(lines)


def grant_out(grant: Grant, by: str) -> GrantOut:
    """What ``Memory.grant`` gave."""
    return GrantOut(
        space=grant.space, agent_id=grant.agent_id, access=grant.access.value, granted_at=grant.granted_at, by=by
    )


def grant_text(output: GrantOut) -> str:
    """``Agent coder now has write access to space apollo.``"""
    return f"Agent {output.agent_id} now has {output.access} access to space {output.space}."


def revoke_text(output: RevokeOut) -> str:
    """Whether access was taken away."""
    if output.revoked:
        return f"Agent {output.agent_id} no longer has any access to space {output.space}."
    return f"Agent {output.agent_id} had no access to space {output.space}; nothing changed."


def share_out(source: Whose, to_space: str, copies: Sequence[Turn]) -> ShareOut:
    """What ``Memory.share`` copied."""
    return ShareOut(
        to_space=to_space,
        from_user_id=source.user_id,
        from_space=source.space,
        memories=[memory_out(turn) for turn in copies],
    )


def share_text(output: ShareOut) -> str:
    """``Shared 1 memory of ana into space apollo: …``."""
    whom = _whom(output.from_user_id, output.from_space)
    lines = [f"Shared {_count(len(output.memories), 'memory', 'memories')} of {whom} into space {output.to_space}:"]
    lines += [f"- {memory.id}: {_snippet(memory.content)}" for memory in output.memories]
    return "\n".join(lines)
