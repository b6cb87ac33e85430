"""Federated search: a user's own memory and shared spaces ranked together, each hit weighed by trust in its writer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from memstrata.facade.parts import Parts
from memstrata.facade.spaces import Spaces
from memstrata.models import Context, ContextItem, Hit, ItemKind, space_of, space_scope
from memstrata.retrieval.context import ContextRequest
from memstrata.retrieval.federated import Federation
from memstrata.retrieval.query import DEFAULT_SEARCH_TIERS, Query, today_in
from memstrata.retrieval.tokens import count_tokens
from memstrata.storage.text import cell_text

#: Hits read beyond the limit from each memory, so trust and the other memories can reorder them.
SPARE_HITS = 10
#: At most this many items of shared spaces in a context block.
SHARED_ITEMS = 8
SHARED_HEADING = "## Shared memory (space, writer)"


def federated_search(
    federation: Federation,
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
        return spaces.provenance(federation.search_together(queries, count, diversity), owners)
    # Trust reorders what was found: read spares for the hits it lowers to make way for.
    found = spaces.provenance(federation.search_together(queries, count + SPARE_HITS, diversity), owners)
    weighed = [
        replace(hit, score=hit.score * (weights.get(hit.written_by, 1.0) if hit.written_by is not None else 1.0))
        for hit in found
    ]
    order = {id(hit): rank for rank, hit in enumerate(weighed)}
    return sorted(weighed, key=lambda hit: (-hit.score, order[id(hit)]))[:count]


def federated_context(parts: Parts, request: ContextRequest, shared: Sequence[str], reader: str | None) -> Context:
    """The block for ``request`` as ``reader`` reads it, with what ``shared`` spaces hold (at most half the budget)."""
    trust = parts.spaces.trust_of(reader)
    if not shared:
        return _as_read_by(parts, parts.build_context(request), reader)
    zone = request.zone
    queries = [
        Query(
            text=request.text,
            user_id=space_scope(name),
            depth=parts.settings.search_candidates,
            today=today_in(zone),
            zone=zone,
            tiers=DEFAULT_SEARCH_TIERS,
        )
        for name in shared
    ]
    hits = federated_search(parts.federation, parts.spaces, queries, SHARED_ITEMS, trust=trust)
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
    own = _as_read_by(
        parts, parts.build_context(replace(request, budget=request.budget - spent if lines else request.budget)), reader
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


def _as_read_by(parts: Parts, context: Context, reader: str | None) -> Context:
    """A block as ``reader`` reads it: a space's items with their space and writer, facts weighed by its trust."""
    context = _with_trusted_facts(parts, context, reader)
    space = space_of(context.user_id)
    if space is None:
        return context
    found = parts.spaces.turns(
        (item.source_turn_ids[0] for item in context.items if item.source_turn_ids), [context.user_id]
    )
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


def _with_trusted_facts(parts: Parts, context: Context, reader: str | None) -> Context:
    """The block with each fact and trait the reader's trust makes another fact current for replaced by that one.

    With history shown, the line of the fact taken as current says instead what the less
    trusted writer said later.
    """
    chosen = parts.spaces.facts_for(context.user_id, reader)
    if not chosen:
        return context
    current = {cell.attribute: cell for cell, _ in chosen.values() if cell.superseded_by is None}
    items = list(context.items)
    later: dict[str, str] = {}  # the id of a fact taken as current → the line of the newer one it displaced
    changed: dict[int, ContextItem] = {}
    for position, item in enumerate(items):
        if item.kind == ItemKind.CELL and item.id in chosen and chosen[item.id][1].id != item.id:
            stored, better = chosen[item.id]
            later[better.id] = f"{cell_text(stored)} (said later, by a writer trusted less)"
            changed[position] = replace(item, text=cell_text(better), source_turn_ids=(better.source_turn_id,))
        elif item.kind == ItemKind.PROFILE and (trait := current.get(item.id.removeprefix("profile:"))) is not None:
            better = chosen[trait.id][1]
            if better.id != trait.id and item.text.endswith(f": {trait.value}"):
                changed[position] = replace(item, text=item.text[: -len(trait.value)] + better.value)
    for position, item in enumerate(items):
        if item.kind == ItemKind.CELL and position not in changed and item.id in later:
            changed[position] = replace(item, text=later[item.id])
    if not changed:
        return context
    lines = context.text.split("\n")
    for position, new in sorted(changed.items()):
        old = f"- {items[position].text}"
        if old in lines:
            lines[lines.index(old)] = f"- {new.text}"
        items[position] = replace(new, tokens=count_tokens(new.text))
    text = "\n".join(lines)
    return replace(context, text=text, tokens=count_tokens(text), items=tuple(items))
