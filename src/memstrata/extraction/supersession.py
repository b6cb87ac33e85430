"""Supersession decided by an LLM: does a new cell replace the current cells about the same subject and attribute?

The model sees only those candidates, and only their ids count in its answer: an id it invents
or copies from elsewhere is ignored. A reply without a ``supersede`` list raises
:class:`memstrata.errors.ProviderError` so the caller falls back to the single-valued rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.extraction.llm_reply import ask_json, required_list
from memstrata.llms.base import LLM
from memstrata.models import Cell

PURPOSE = "supersede"
MAX_TOKENS = 300

SUPERSEDE_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "supersede": {
            "type": "array",
            "items": {"type": "string"},
            "description": "ids of the existing memories the new one replaces; empty when all stay true",
        }
    },
    "required": ["supersede"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class SupersedeReply:
    """The candidate ids to retire, and the ids the reply named that were not candidates."""

    superseded: tuple[str, ...]
    ignored: tuple[str, ...] = ()


def choose_superseded(llm: LLM, new: Cell, candidates: Sequence[Cell]) -> SupersedeReply:
    """Ask ``llm`` which ``candidates`` (current cells of ``new``'s subject and attribute) ``new`` replaces."""
    listed = "\n".join(
        f"- id {cell.id}: {cell.value} (since {cell.valid_from.date().isoformat()}; said as: {cell.content})"
        for cell in candidates
    )
    data = ask_json(
        llm,
        "supersede",
        schema=SUPERSEDE_SCHEMA,
        purpose=PURPOSE,
        max_tokens=MAX_TOKENS,
        subject=new.subject,
        attribute=new.attribute,
        value=new.value,
        statement=new.content,
        when=new.valid_from.date().isoformat(),
        candidates=listed,
    )
    return superseded_from_reply(data, [cell.id for cell in candidates])


def superseded_from_reply(data: Mapping[str, Any], candidate_ids: Sequence[str]) -> SupersedeReply:
    """The reply's ids that name a candidate, each once, in candidate order; every other entry is ignored."""
    named = required_list(data, PURPOSE, PURPOSE)
    wanted = {item for item in named if isinstance(item, str)}
    allowed = set(candidate_ids)
    ignored = tuple(str(item)[:40] for item in named if not (isinstance(item, str) and item in allowed))
    return SupersedeReply(tuple(cell_id for cell_id in candidate_ids if cell_id in wanted), ignored)
