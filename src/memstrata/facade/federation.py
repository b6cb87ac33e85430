"""Federated search: a user's own memory and shared spaces ranked together, each hit weighed by trust in its writer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from memstrata.facade.parts import Parts
from memstrata.facade.spaces import Spaces
from memstrata.models import Context, ContextItem, Hit, ItemKind, space_of, space_scope
from memstrata.retrieval.context import ContextRequest
from memstrata.retrieval.pipeline import Pipeline
from memstrata.retrieval.query import Query, today_in
from memstrata.retrieval.tokens import count_tokens

#: Hits read beyond the limit from each memory, so trust and the other memories can reorder them.
SPARE_HITS = 10
#: At most this many items of shared spaces in a context block.
SHARED_ITEMS = 8
SHARED_HEADING = "## Shared memory (space, writer)"


def federated_search(
    pipeline: Pipeline,
    spaces: Spaces,
    queries: Sequence[Query],
    count: int,
    *,
    diversity: float = 0.0,
    trust: Mapping[str, float] | None = None,
) -> list[Hit]:
    """The ``count`` best hits over the memories ``queries`` name (a user's, spaces'), with provenance.

    Several memories are ranked as one (``Pipeline.search_together``); each hit's score is
    then scaled by the reader's trust in its writer (``Memory.set_trust``).
    """
    weights = dict(trust or {})
    owners = [query.user_id for query in queries]
    if not weights:
        return spaces.provenance(pipeline.search_together(queries, count, diversity), owners)
    # Trust reorders what was found: read spares for the hits it lowers to make way for.
    found = spaces.provenance(pipeline.search_together(queries, count + SPARE_HITS, diversity), owners)
    weighed = [
        replace(hit, score=hit.score * (weights.get(hit.written_by, 1.0) if hit.written_by is not None else 1.0))
        for hit in found
    ]
    order = {id(hit): rank for rank, hit in enumerate(weighed)}
    return sorted(weighed, key=lambda hit: (-hit.score, order[id(hit)]))[:count]


def federated_context(
    parts: Parts, request: ContextRequest, shared: Sequence[str], trust: Mapping[str, float]
) -> Context:
    """The block for ``request``, with what ``shared`` spaces hold about it appended (at most half the budget)."""
    if not shared:
        return _with_provenance(parts, parts.build_context(request))
    zone = request.zone
    queries = [
        Query(
            text=request.text,
            user_id=space_scope(name),
            depth=parts.settings.search_candidates,
            today=today_in(zone),
            zone=zone,
        )
        for name in shared
    ]
    hits = federated_search(parts.pipeline, parts.spaces, queries, SHARED_ITEMS, trust=trust)
    lines: list[ContextItem] = []
    spent = count_tokens(SHARED_HEADING)
    for hit in hits:
        line = f"- [{hit.space}, by {hit.written_by or 'unknown'}] {hit.content}"
        tokens = count_tokens(line)
        if spent + tokens > request.budget // 2:
            break
        spent += tokens
        lines.append(
            ContextItem(
                kind=ItemKind.EPISODE if hit.turn is not None else ItemKind.CELL,
                tier=hit.tier,
                id=hit.id,
                text=line,
                tokens=tokens,
                score=hit.score,
                source_turn_ids=hit.source_turn_ids,
                space=hit.space,
                written_by=hit.written_by,
            )
        )
    own = _with_provenance(
        parts, parts.build_context(replace(request, budget=request.budget - spent if lines else request.budget))
    )
    if not lines:
        return own
    block = "\n".join([SHARED_HEADING, *(item.text for item in lines)])
    text = f"{own.text}\n\n{block}" if own.text else block
    return replace(
        own,
        text=text,
        tokens=count_tokens(text),
        token_budget=request.budget,
        items=(*own.items, *lines),
    )


def _with_provenance(parts: Parts, context: Context) -> Context:
    """A space's context block with each item's space and writer."""
    space = space_of(context.user_id)
    if space is None:
        return context
    sources = [item.source_turn_ids[0] for item in context.items if item.source_turn_ids]
    found = parts.store.get_by_ids(sources, context.user_id) if sources else {}
    items = tuple(
        replace(
            item,
            space=space,
            written_by=found[item.source_turn_ids[0]].agent_id
            if item.source_turn_ids and item.source_turn_ids[0] in found
            else None,
        )
        for item in context.items
    )
    return replace(context, items=items)
