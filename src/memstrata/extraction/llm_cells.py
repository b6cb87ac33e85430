"""Typed memory cells by an LLM: the extractor used when one is configured, its reply checked field by field.

A cell the model got wrong (an unknown type, a missing field, a salience outside [0, 1], a value
far too long to be one) is dropped with a reason and the rest are kept; a reply without a
``cells`` list is unusable as a whole and raises :class:`memstrata.errors.ProviderError`, so the
caller falls back to the rule-based extractor for that message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.extraction.cells import CellKind, ExtractedCell
from memstrata.extraction.llm_reply import ask_json, quote_message, required_list, short_text, unit_interval
from memstrata.llms.base import LLM

PURPOSE = "extract_cells"
CELL_KINDS = tuple(kind.value for kind in CellKind)
MAX_CELLS = 20
MAX_SUBJECT_CHARS = 80
MAX_ATTRIBUTE_CHARS = 80
MAX_VALUE_CHARS = 200
MAX_SCENE_CHARS = 80
MAX_SOURCE_CHARS = 500
MAX_KNOWN_ATTRIBUTES = 40
MAX_TOKENS = 1500
FIELDS = ("type", "subject", "attribute", "value", "single_valued", "salience", "scene")

CELLS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "cells": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": list(CELL_KINDS)},
                    "subject": {"type": "string", "description": "who or what the statement is about"},
                    "attribute": {"type": "string", "description": "short lower-case key, e.g. location, likes:jazz"},
                    "value": {"type": "string", "description": "the value in a few words"},
                    "single_valued": {"type": "boolean", "description": "true when a newer value replaces older ones"},
                    "salience": {"type": "number", "description": "0 to 1: how much it matters to remember"},
                    "scene": {"type": "string", "description": "a two-to-four-word topic label"},
                },
                "required": list(FIELDS),
                "additionalProperties": False,
            },
        }
    },
    "required": ["cells"],
    "additionalProperties": False,
}

# Words a model may use for the speaker instead of the speaker's name.
_SPEAKER_WORDS = frozenset({"i", "me", "myself", "user", "the user", "speaker", "the speaker"})
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True, slots=True)
class CellReply:
    """The cells a model found in one message, and why any cell it returned was dropped."""

    cells: tuple[ExtractedCell, ...]
    dropped: tuple[str, ...] = ()


def extract_cells_with_llm(
    llm: LLM, text: str, *, speaker: str | None = None, known_attributes: Sequence[str] = ()
) -> CellReply:
    """Ask ``llm`` for the cells of one user message; ``known_attributes`` lets it reuse the keys already in memory."""
    subject = speaker.strip() if speaker and speaker.strip() else "user"
    data = ask_json(
        llm,
        "extract_cells",
        schema=CELLS_SCHEMA,
        purpose=PURPOSE,
        max_tokens=MAX_TOKENS,
        message=quote_message(text),
        subject=subject,
        kinds=", ".join(CELL_KINDS),
        known=", ".join(known_attributes[:MAX_KNOWN_ATTRIBUTES]) or "(none yet)",
    )
    return cells_from_reply(data, text, subject=subject)


def cells_from_reply(data: Mapping[str, Any], text: str, *, subject: str) -> CellReply:
    """The valid, distinct cells of a reply (at most ``MAX_CELLS``), each with the sentence of ``text`` it came from."""
    cells: list[ExtractedCell] = []
    dropped: list[str] = []
    seen: set[tuple[str, str, str, str]] = set()
    for position, item in enumerate(required_list(data, "cells", PURPOSE)):
        checked = _checked_cell(item, text, subject)
        if isinstance(checked, str):
            dropped.append(f"cell {position}: {checked}")
            continue
        identity = (checked.kind.value, checked.subject.casefold(), checked.attribute, checked.value.casefold())
        if identity in seen:
            dropped.append(f"cell {position}: repeats an earlier cell")
        elif len(cells) >= MAX_CELLS:
            dropped.append(f"cell {position}: more than {MAX_CELLS} cells in one message")
        else:
            seen.add(identity)
            cells.append(checked)
    return CellReply(tuple(cells), tuple(dropped))


def _checked_cell(item: object, text: str, default_subject: str) -> ExtractedCell | str:
    """The cell ``item`` describes, or why it is not one."""
    if not isinstance(item, Mapping):
        return "not an object"
    missing = [name for name in FIELDS if name not in item]
    if missing:
        return f"missing {', '.join(missing)}"
    kind = item["type"]
    if not isinstance(kind, str) or kind.strip().casefold() not in CELL_KINDS:
        return f"unknown type {str(kind)[:40]!r}"
    subject = short_text(item["subject"], MAX_SUBJECT_CHARS)
    attribute = short_text(item["attribute"], MAX_ATTRIBUTE_CHARS)
    value = short_text(item["value"], MAX_VALUE_CHARS)
    salience = unit_interval(item["salience"])
    scene = item["scene"]
    if subject is None:
        return f"subject is not text of 1 to {MAX_SUBJECT_CHARS} characters"
    if attribute is None:
        return f"attribute is not text of 1 to {MAX_ATTRIBUTE_CHARS} characters"
    if value is None:
        return f"value is not text of 1 to {MAX_VALUE_CHARS} characters"
    if salience is None:
        return "salience is not a number from 0 to 1"
    if not isinstance(item["single_valued"], bool):
        return "single_valued is not true or false"
    if not isinstance(scene, str) or len(" ".join(scene.split())) > MAX_SCENE_CHARS:
        return f"scene is not text of at most {MAX_SCENE_CHARS} characters"
    is_speaker = subject.casefold() in _SPEAKER_WORDS or subject.casefold() == default_subject.casefold()
    return ExtractedCell(
        kind=CellKind(kind.strip().casefold()),
        subject=default_subject if is_speaker else subject,
        attribute=attribute.casefold(),
        value=value,
        text=source_sentence(text, value),
        salience=salience,
        is_single_valued=item["single_valued"],
        scene=" ".join(scene.split()),
    )


def source_sentence(text: str, value: str) -> str:
    """The sentence of ``text`` that mentions ``value`` (the whole text, clipped, when none does)."""
    sentences = [part.strip() for part in _SENTENCE_BREAK.split(text) if part.strip()]
    wanted = value.casefold()
    for sentence in sentences:
        if wanted in sentence.casefold():
            return sentence[:MAX_SOURCE_CHARS]
    whole = " ".join(text.split())
    return whole if len(whole) <= MAX_SOURCE_CHARS else whole[: MAX_SOURCE_CHARS - 1] + "…"
