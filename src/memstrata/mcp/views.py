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
    HitOut,
    InspectOut,
    MemoryOut,
    PatternOut,
    SearchOut,
    SegmentOut,
    UsedMemoryOut,
)
from memstrata.models import ChatReply, Context, Deletion, Hit, Inspection, Turn

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


def add_out(user_id: str, turns: Sequence[Turn]) -> AddOut:
    """What ``Memory.add`` stored."""
    return AddOut(user_id=user_id, memories=[memory_out(turn) for turn in turns])


def add_text(output: AddOut) -> str:
    """``Stored 1 memory for ana: …``."""
    lines = [f"Stored {_count(len(output.memories), 'memory', 'memories')} for {output.user_id}."]
    lines += [f"- {memory.id} ({memory.role}): {_snippet(memory.content)}" for memory in output.memories]
    return "\n".join(lines)


def search_out(user_id: str, query: str, hits: Sequence[Hit]) -> SearchOut:
    """What ``Memory.search`` found."""
    return SearchOut(user_id=user_id, query=query, hits=[_hit_out(hit) for hit in hits])


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
    )


def search_text(output: SearchOut, zone: tzinfo = UTC) -> str:
    """One numbered line per hit, with its date in ``zone``, speaker and id; or a sentence saying nothing matched."""
    if not output.hits:
        return f"No memories of {output.user_id} match {output.query!r}."
    lines = [f"{_count(len(output.hits), 'memory', 'memories')} of {output.user_id} for {output.query!r}, best first:"]
    for rank, hit in enumerate(output.hits, 1):
        where = [f"{hit.created_at.astimezone(zone):%Y-%m-%d}" if hit.created_at else hit.tier, hit.role or ""]
        if hit.session_id:
            where.append(f"session {hit.session_id}")
        label = ", ".join(part for part in where if part)
        lines.append(f"{rank}. [{label}] {hit.content} (id {hit.id}, score {hit.score:.3f})")
    return "\n".join(lines)


def context_out(context: Context) -> ContextOut:
    """What ``Memory.context`` assembled."""
    return ContextOut(
        user_id=context.user_id,
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
            )
            for item in context.items
        ],
    )


def context_text(output: ContextOut) -> str:
    """The block itself, ready for a prompt."""
    return output.text or f"Nothing in the memory of {output.user_id} relates to {output.query!r} yet."


def forget_out(deletion: Deletion) -> ForgetOut:
    """What ``Memory.forget`` deleted."""
    return ForgetOut(
        user_id=deletion.user_id,
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
    return f"Deleted {_count(output.deleted_turns, 'memory', 'memories')} of {output.user_id}{where}, permanently."


def inspect_out(report: Inspection) -> InspectOut:
    """What ``Memory.inspect`` reported."""
    return InspectOut(
        user_id=report.user_id,
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
    lines = [f"Memory of {output.user_id}: {counts}; {jobs}."]
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


def chat_out(user_id: str, reply: ChatReply) -> ChatOut:
    """What ``Memory.chat`` answered."""
    return ChatOut(
        user_id=user_id,
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


def _count(number: int, singular: str, plural: str) -> str:
    return f"{number} {singular if number == 1 else plural}"


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET else flat[: SNIPPET - 1] + "…"
