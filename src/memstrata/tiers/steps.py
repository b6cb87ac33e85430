"""The memory steps that can use an LLM, each with its offline version as the fallback.

Without a model every step runs offline; with one, a step whose call raises
:class:`memstrata.errors.ProviderError`, or whose reply is unusable as a whole, logs a
warning and runs the offline version for that item. See docs/tiers.md#with-an-llm.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import date, tzinfo
from typing import TypeVar

from memstrata.embeddings.base import Embedder, Vectors
from memstrata.errors import ProviderError
from memstrata.extraction.cells import ExtractedCell, extract_cells, profile_updates
from memstrata.extraction.gazetteers import CHAT_FILLER
from memstrata.extraction.llm_cells import extract_cells_with_llm
from memstrata.extraction.profile import update_profile
from memstrata.extraction.summaries import summarize_cluster, summarize_scene, summarize_segment
from memstrata.extraction.supersession import choose_superseded
from memstrata.extraction.time_expressions import annotate
from memstrata.llms.base import LLM
from memstrata.models import Cell, Segment, Turn
from memstrata.policies.consolidation import ConsolidationPolicy, extractive_summary
from memstrata.retrieval.fulltext import STOPWORDS

log = logging.getLogger("memstrata.steps")
Result = TypeVar("Result")
KEYWORDS_PER_SEGMENT = 6
_WORD_CHARACTERS = str.maketrans({character: " " for character in ".,;:!?()[]{}\"'`“”’*/\\"})


def day_said(turn: Turn, zone: tzinfo) -> date:
    """The day ``turn`` was said, in ``zone``: what its "yesterday" counts from."""
    return turn.created_at.astimezone(zone).date()


def keywords(
    texts: Sequence[str], count: int = KEYWORDS_PER_SEGMENT, *, speakers: Collection[str] = ()
) -> tuple[str, ...]:
    """The most frequent content words, for labelling a segment: not chat filler, nor the ``speakers``' names.

    Two people name each other in every other line, so their names would head every
    segment's keywords while saying nothing of what it is about.
    """
    return tuple(word for word, _ in content_words(texts, speakers=speakers).most_common(count))


def content_words(texts: Sequence[str], *, speakers: Collection[str] = ()) -> Counter[str]:
    """How often each content word occurs in ``texts``: the words :func:`keywords` chooses from."""
    names = {word for name in speakers for word in name.lower().translate(_WORD_CHARACTERS).split()}
    return Counter(
        word
        for text in texts
        for word in text.lower().translate(_WORD_CHARACTERS).split()
        if len(word) > 2
        and word not in STOPWORDS
        and word not in CHAT_FILLER
        and word not in names
        and not word.isdigit()
    )


class MemorySteps:
    """Runs each LLM-backed step with its model when one is available, else (or on failure) offline."""

    def __init__(self, llm: LLM, embedder: Embedder, consolidation: ConsolidationPolicy) -> None:
        self._llm = llm
        self._embedder = embedder
        self._consolidation = consolidation

    @property
    def uses_llm(self) -> bool:
        """Whether a model is configured, so callers fetch the extra context only the model needs."""
        return self._llm.is_available

    def cells(self, turn: Turn, known_attributes: Sequence[str]) -> list[ExtractedCell]:
        """Typed cells of one user turn."""
        speaker = turn.name
        if self.uses_llm:
            reply = self._attempt(
                "extract_cells",
                turn.id,
                lambda: extract_cells_with_llm(
                    self._llm, turn.content, speaker=speaker, known_attributes=known_attributes
                ),
            )
            if reply is not None:
                if reply.dropped:
                    log.warning("extract_cells dropped cells of turn %s: %s", turn.id, "; ".join(reply.dropped))
                return list(reply.cells)
        return extract_cells(turn.content, role=turn.role.value, speaker=speaker)

    def profile(self, turn: Turn, extracted: Sequence[ExtractedCell], current: Mapping[str, str]) -> dict[str, str]:
        """Profile values the turn sets, given the cells found in it and the current profile."""
        if self.uses_llm:
            subject = turn.name.strip() if turn.name and turn.name.strip() else "user"
            reply = self._attempt(
                "profile_update",
                turn.id,
                lambda: update_profile(self._llm, text=turn.content, subject=subject, profile=current),
            )
            if reply is not None:
                if reply.dropped:
                    log.warning("profile_update dropped updates of turn %s: %s", turn.id, "; ".join(reply.dropped))
                return dict(reply.updates)
        return profile_updates(extracted)

    def superseded(self, new: Cell, candidates: Sequence[Cell], *, is_single_valued: bool) -> list[str]:
        """Ids of ``candidates`` (current, older cells of the same subject and attribute) that ``new`` retires."""
        if not candidates:
            return []
        if self.uses_llm:
            reply = self._attempt("supersede", new.id, lambda: choose_superseded(self._llm, new, candidates))
            if reply is not None:
                if reply.ignored:
                    log.warning("supersede for cell %s ignored ids that were not candidates: %s", new.id, reply.ignored)
                return list(reply.superseded)
        # Only a newer value of the same single-valued subject+attribute retires an older one.
        return [cell.id for cell in candidates] if is_single_valued else []

    def segment_summary(
        self,
        segment: Segment,
        new_texts: Sequence[str],
        texts: Sequence[str],
        *,
        vectors: Vectors | None,
        speakers: Collection[str] = (),
        said: Sequence[date] | None = None,
        new_said: Sequence[date] | None = None,
    ) -> tuple[str, tuple[str, ...]]:
        """Summary and keywords of a segment whose member turns are ``texts``, ``new_texts`` among them.

        ``speakers`` are the names of those turns' speakers, which the keywords leave out.
        ``said`` and ``new_said`` are the days those turns were said, so the summary can say
        what their relative dates ("yesterday", "last week") meant.
        """
        if self.uses_llm and texts:
            # Incremental: the model folds the new turns into the summary so far, so a long
            # segment never sends all of its turns again.
            reply = self._attempt(
                "segment_summary",
                segment.id,
                lambda: summarize_segment(
                    self._llm,
                    previous_summary=segment.summary,
                    new_turns=_dated(new_texts, new_said) if new_texts else _dated(texts, said),
                    keyword_count=KEYWORDS_PER_SEGMENT,
                ),
            )
            if reply is not None:
                names = {name.casefold() for name in speakers}
                chosen = tuple(word for word in reply.keywords if word.casefold() not in names)
                return reply.summary, chosen or keywords(texts, speakers=speakers)
        return self._extractive(texts, vectors, said), keywords(texts, speakers=speakers)

    def scene(self, segment: Segment, texts: Sequence[str]) -> tuple[str, str]:
        """Title and summary of a segment promoted to a scene."""
        if self.uses_llm and texts:
            reply = self._attempt(
                "scene_summary",
                segment.id,
                lambda: summarize_scene(self._llm, keywords=segment.keywords, summary=segment.summary, turns=texts),
            )
            if reply is not None:
                return reply.title, reply.summary
        return ", ".join(segment.keywords[:3]) or "conversation", segment.summary

    def consolidation_summary(
        self, texts: Sequence[str], vectors: Vectors | None, label: str, said: Sequence[date] | None = None
    ) -> str:
        """A "sleep" summary of one cluster of turns: abstractive with a model, extractive otherwise.

        ``said``: the day each turn was said, which the summary uses to resolve relative dates.
        """
        if self.uses_llm and texts:
            summary = self._attempt("consolidate", label, lambda: summarize_cluster(self._llm, _dated(texts, said)))
            if summary is not None:
                return summary
        return self._extractive(texts, vectors, said)

    def _extractive(self, texts: Sequence[str], vectors: Vectors | None, said: Sequence[date] | None) -> str:
        if not texts:
            return ""
        usable = vectors is not None and len(vectors) == len(texts)
        matrix = vectors if usable and vectors is not None else self._embedder.embed_documents(texts)
        policy = self._consolidation
        days = said if said is not None and len(said) == len(texts) else None
        return extractive_summary(
            texts,
            matrix,
            max_sentences=policy.max_sentences,
            max_chars=policy.max_chars,
            restate=None if days is None else lambda index, sentence: annotate(sentence, days[index]),
        )

    def _attempt(self, step: str, item: str, call: Callable[[], Result]) -> Result | None:
        """``call()``, or None after logging why the model's answer cannot be used."""
        try:
            return call()
        except ProviderError as exc:
            log.warning("%s fell back to its offline version for %s: %s", step, item, exc)
            return None


def _dated(texts: Sequence[str], said: Sequence[date] | None) -> list[str]:
    """``texts`` with their relative dates resolved against the day each was said, when known."""
    if said is None or len(said) != len(texts):
        return list(texts)
    return [annotate(text, day) for text, day in zip(texts, said, strict=True)]
