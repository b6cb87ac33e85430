"""Replaying LoCoMo conversations into a Memory: the data, the chosen conversations, the questions, ingest."""

from __future__ import annotations

import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress

from memstrata import Memory
from memstrata.bench.baselines import PlainDense
from memstrata.bench.datasets import DialogTurn, Question, find_locomo, load_locomo
from memstrata.errors import InvalidInput

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TUNING_CONVERSATIONS = 5  # methods are chosen on the first five; six to ten are held out
# A turn's dia_id: "D3:12". A few evidence entries are written "D30:05" or "D:11:26".
_DIA_ID = re.compile(r"D:?(\d+):0*(\d+)")


def dia_ids(evidence: str) -> list[str]:
    """The turn ids an evidence entry names, as the turns spell them ("D30:05" → "D30:5")."""
    return [f"D{session}:{turn}" for session, turn in _DIA_ID.findall(evidence)]


def choose_conversations(order: list[str], numbers: tuple[int, ...]) -> list[str]:
    """The conversations numbered ``numbers`` (1-based; none: all); InvalidInput for a number past the last."""
    missing = [n for n in numbers if not 0 < n <= len(order)]
    if missing:
        raise InvalidInput(f"the data has {len(order)} conversations, so there is no conversation {missing[0]}")
    return [order[n - 1] for n in numbers] or order


@dataclass(kw_only=True, frozen=True, slots=True)
class ReplayOptions:
    """Which LoCoMo conversations and questions to replay, into what; ``None`` means the Memory's own setting."""

    data: Path | None = None
    conversations: tuple[int, ...] = ()
    limit: int | None = None
    embedder: str | None = None
    threads: int | None = None
    home: Path | None = None


MAX_CONVERSATION = 10_000  # no dataset holds more; a larger number is a typo, not a range to build


def parse_conversations(text: str | None) -> tuple[int, ...]:
    """'1-5' or '1,3,7' → 1-based conversation numbers; empty means all."""
    if not text:
        return ()
    numbers: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"cannot read conversations {text!r}; use e.g. 1-5 or 1,3,7")
        first, last = int(low), int(high or low)
        if first < 1 or last < first or last > MAX_CONVERSATION:
            raise ValueError(f"conversations {part.strip()!r} is not a range from 1 up, such as 1-5")
        numbers.extend(range(first, last + 1))
    return tuple(sorted(set(numbers)))


def turn_id(turn: DialogTurn) -> str:
    """The caller-supplied id each LoCoMo turn is stored under."""
    return f"{turn.conversation}:{turn.dia_id}"


@dataclass(kw_only=True, frozen=True, slots=True)
class Dialogue:
    """The chosen LoCoMo conversations: their turns, every question of the data, each conversation's 1-based number."""

    turns: list[DialogTurn]
    questions: list[Question]
    chosen: list[str]
    number_of: dict[str, int]


def load_dialogue(data: Path | None, numbers: tuple[int, ...], limit: int | None) -> Dialogue:
    """The conversations numbered ``numbers`` (none: all) of LoCoMo at ``data``; InvalidInput for a limit under 1."""
    turns, questions = load_locomo(find_locomo(data))
    order = list(dict.fromkeys(turn.conversation for turn in turns))
    if limit is not None and limit < 1:
        raise InvalidInput(f"limit must be at least 1, not {limit}")
    chosen = choose_conversations(order, numbers)
    return Dialogue(
        turns=[turn for turn in turns if turn.conversation in chosen],
        questions=questions,
        chosen=chosen,
        number_of={conversation: order.index(conversation) + 1 for conversation in order},
    )


def question_records(dialogue: Dialogue, limit: int | None) -> list[dict[str, Any]]:
    """A record per question of categories 1-4 whose evidence turns exist, the first ``limit`` (none: all)."""
    known = {turn_id(turn) for turn in dialogue.turns}
    records: list[dict[str, Any]] = []
    for question in dialogue.questions:
        if question.conversation not in dialogue.chosen or question.category not in CATEGORIES:
            continue
        evidence = sorted({f"{question.conversation}:{d}" for e in question.evidence for d in dia_ids(e)} & known)
        if evidence:
            records.append(
                {
                    "conversation": question.conversation,
                    "conversation_number": dialogue.number_of[question.conversation],
                    "category": question.category,
                    "question": question.question,
                    "answer": str(question.answer),
                    "evidence": evidence,
                }
            )
    return records[:limit] if limit else records


def replay_settings(*, embedder: str | None, threads: int | None) -> dict[str, Any]:
    """The Memory settings LoCoMo is replayed with; ``None`` keeps the Memory's own embedder and threads.

    LoCoMo's session dates carry no zone and are stored as UTC, so they are read in UTC.
    Every question is asked in several modes and budgets: counted as visits, those reads
    would warm and promote segments, so later questions would meet a changed memory.
    """
    overrides: dict[str, Any] = {"timezone": "UTC", "record_visits": False}
    if embedder:
        overrides["embedder"] = embedder
    if threads:
        overrides["embedding_threads"] = threads
    return overrides


@contextmanager
def replay_memory(home: Path | None, prefix: str, *, embedder: str | None, threads: int | None) -> Iterator[Memory]:
    """A Memory with ``replay_settings`` in ``home``, else in a temporary directory named with ``prefix``."""
    with (
        tempfile.TemporaryDirectory(prefix=prefix) as scratch,
        Memory(home or Path(scratch), **replay_settings(embedder=embedder, threads=threads)) as memory,
    ):
        yield memory


def time_embedder(memory: Memory, turns: list[DialogTurn], dense: PlainDense) -> float:
    """Seconds the bare embedder takes for the texts memstrata embeds; keeps the vectors for the dense baseline."""
    started = time.perf_counter()
    texts = [f"{turn.speaker}: {turn.text}" for turn in turns]
    chunks = [memory.embedder.embed_documents(texts[start : start + 64]) for start in range(0, len(texts), 64)]
    elapsed = time.perf_counter() - started
    vectors = np.vstack(chunks) if chunks else np.zeros((0, memory.embedder.dimension), np.float32)
    by_user: dict[str, list[int]] = defaultdict(list)
    for index, turn in enumerate(turns):
        by_user[turn.conversation].append(index)
    for user, rows in by_user.items():
        dense.add(user, [turn_id(turns[row]) for row in rows], vectors[rows])
    return elapsed


def ingest_dialogue(memory: Memory, turns: list[DialogTurn], console: Console) -> float:
    """Store the turns through ``Memory.add`` as the protocol says, flush tier work; the seconds it took."""
    sessions: dict[tuple[str, str], list[DialogTurn]] = defaultdict(list)
    for turn in turns:
        sessions[(turn.conversation, turn.session)].append(turn)
    started = time.perf_counter()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("ingesting LoCoMo", total=len(turns))
        for (conversation, session), session_turns in sessions.items():
            for start in range(0, len(session_turns), 64):
                chunk = session_turns[start : start + 64]
                memory.add(
                    [{"role": "user", "content": t.text, "name": t.speaker, "id": turn_id(t)} for t in chunk],
                    user_id=conversation,
                    session_id=session,
                    timestamp=chunk[0].timestamp + timedelta(seconds=start),
                )
                progress.update(task, advance=len(chunk))
        progress.update(task, description="background tier work")
        memory.flush(timeout=None)
    return time.perf_counter() - started
