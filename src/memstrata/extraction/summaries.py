"""Abstractive summaries by an LLM: mid-term segments, long-term scenes and consolidation clusters.

Each function returns checked fields or raises :class:`memstrata.errors.ProviderError` when the
reply cannot be used, so the caller falls back to the extractive summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.errors import ProviderError
from memstrata.extraction.llm_reply import ask_json, quote_lines, short_text
from memstrata.llms.base import LLM

MAX_SUMMARY_CHARS = 1500
MAX_CONSOLIDATION_CHARS = 2000
MAX_TITLE_CHARS = 80
MAX_KEYWORD_CHARS = 40
MAX_TOKENS = 600

SEGMENT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "description": "at most three sentences"},
        "keywords": {"type": "array", "items": {"type": "string"}, "description": "lower-case topic words"},
    },
    "required": ["summary", "keywords"],
    "additionalProperties": False,
}
SCENE_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "description": "a few words naming the scene"},
        "summary": {"type": "string", "description": "at most four sentences"},
    },
    "required": ["title", "summary"],
    "additionalProperties": False,
}
CONSOLIDATION_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string", "description": "at most three sentences"}},
    "required": ["summary"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    """A mid-term segment's summary and keywords (empty keywords: the caller keeps its own)."""

    summary: str
    keywords: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SceneSummary:
    """The title and summary of a segment promoted to a long-term scene."""

    title: str
    summary: str


def summarize_segment(
    llm: LLM, *, previous_summary: str, new_turns: Sequence[str], keyword_count: int
) -> SegmentSummary:
    """Fold ``new_turns`` into a segment's ``previous_summary`` (empty for a new segment)."""
    data = ask_json(
        llm,
        "segment_summary",
        schema=SEGMENT_SCHEMA,
        purpose="segment_summary",
        max_tokens=MAX_TOKENS,
        previous=previous_summary.strip() or "(a new segment: no summary yet)",
        turns=quote_lines(new_turns),
        count=str(keyword_count),
    )
    summary = _summary(data, "summary", MAX_SUMMARY_CHARS, "segment_summary")
    words: list[str] = []
    raw = data.get("keywords")
    for item in raw if isinstance(raw, list) else []:
        word = short_text(item, MAX_KEYWORD_CHARS)
        if word is not None and word.casefold() not in words and len(words) < keyword_count:
            words.append(word.casefold())
    return SegmentSummary(summary, tuple(words))


def summarize_scene(llm: LLM, *, keywords: Sequence[str], summary: str, turns: Sequence[str]) -> SceneSummary:
    """A title and summary for a hot segment becoming a long-term scene."""
    data = ask_json(
        llm,
        "scene_summary",
        schema=SCENE_SCHEMA,
        purpose="scene_summary",
        max_tokens=MAX_TOKENS,
        keywords=", ".join(keywords) or "(none)",
        summary=summary.strip() or "(none)",
        turns=quote_lines(turns),
    )
    title = short_text(data.get("title"), MAX_TITLE_CHARS)
    if title is None:
        raise ProviderError(f"scene_summary: the title is not text of 1 to {MAX_TITLE_CHARS} characters")
    return SceneSummary(title, _summary(data, "summary", MAX_SUMMARY_CHARS, "scene_summary"))


def summarize_cluster(llm: LLM, turns: Sequence[str]) -> str:
    """An abstractive "sleep" summary of a cluster of related turns."""
    data = ask_json(
        llm,
        "summarize",
        schema=CONSOLIDATION_SCHEMA,
        purpose="consolidate",
        max_tokens=MAX_TOKENS,
        turns=quote_lines(turns),
    )
    return _summary(data, "summary", MAX_CONSOLIDATION_CHARS, "consolidate")


def _summary(data: Mapping[str, Any], key: str, max_chars: int, purpose: str) -> str:
    """A summary field: non-empty text of at most ``max_chars``; paragraphs are kept, runs of spaces are not."""
    value = data.get(key)
    text = "\n".join(" ".join(line.split()) for line in value.strip().splitlines()) if isinstance(value, str) else ""
    if not text or len(text) > max_chars:
        raise ProviderError(f"{purpose}: the {key} is not text of 1 to {max_chars} characters")
    return text
