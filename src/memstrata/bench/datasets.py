"""Benchmark data: LoCoMo read from the shared datasets folder, and synthetic turns."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstrata.errors import InvalidInput

LOCOMO_RELATIVE = Path("shared") / "datasets" / "locomo" / "locomo10.json"


@dataclass(kw_only=True, frozen=True, slots=True)
class DialogTurn:
    """One LoCoMo turn, ready for ``Memory.add``."""

    conversation: str
    session: str
    dia_id: str
    speaker: str
    text: str
    timestamp: datetime


@dataclass(kw_only=True, frozen=True, slots=True)
class Question:
    """One LoCoMo question with the dia_ids of its evidence."""

    conversation: str
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...] = field(default_factory=tuple)


def find_locomo(explicit: Path | None = None) -> Path:
    """The LoCoMo file: ``explicit``, or ``shared/datasets/…`` beside this or a parent directory."""
    if explicit is not None:
        if not explicit.is_file():
            raise InvalidInput(f"no LoCoMo file at {explicit}")
        return explicit
    for directory in [Path.cwd(), *Path.cwd().parents]:
        for candidate in (directory / LOCOMO_RELATIVE, directory.parent / LOCOMO_RELATIVE):
            if candidate.is_file():
                return candidate
    raise InvalidInput(f"cannot find {LOCOMO_RELATIVE}; pass --data /path/to/locomo10.json")


_SESSION_KEY = re.compile(r"^session_(\d+)$")


def parse_session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' → an aware UTC datetime."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError as exc:
        raise InvalidInput(f"unrecognised LoCoMo session date {text!r}") from exc


def load_locomo(path: Path) -> tuple[list[DialogTurn], list[Question]]:
    """Every turn (image captions appended as text) and every question; InvalidInput for a file that is not LoCoMo's."""
    try:
        turns, questions = _read_locomo(json.loads(path.read_text(encoding="utf-8")))
        if not turns:
            raise ValueError("it holds no conversation")
        return turns, questions
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput(
            f"{path} is not LoCoMo's locomo10.json ({type(exc).__name__}: {exc}); pass --data with that file"
        ) from exc


def _read_locomo(samples: Any) -> tuple[list[DialogTurn], list[Question]]:
    turns: list[DialogTurn] = []
    questions: list[Question] = []
    for sample in samples:
        conversation_id = str(sample["sample_id"])
        conversation = sample["conversation"]
        numbers = sorted(int(m.group(1)) for key in conversation if (m := _SESSION_KEY.match(key)))
        for number in numbers:
            when = parse_session_date(conversation[f"session_{number}_date_time"])
            for turn in conversation[f"session_{number}"]:
                text = turn["text"]
                if turn.get("blip_caption"):
                    text = f"{text} [shared an image: {turn['blip_caption']}]"
                turns.append(
                    DialogTurn(
                        conversation=conversation_id,
                        session=f"session_{number}",
                        dia_id=turn["dia_id"],
                        speaker=turn["speaker"],
                        text=text,
                        timestamp=when,
                    )
                )
        for qa in sample["qa"]:
            answer = qa.get("answer", qa.get("adversarial_answer", ""))
            questions.append(
                Question(
                    conversation=conversation_id,
                    question=qa["question"],
                    answer=str(answer),
                    category=int(qa["category"]),
                    evidence=tuple(qa.get("evidence", ())),
                )
            )
    return turns, questions


_SUBJECTS = ["I", "My sister", "Our team", "The landlord", "My manager", "Grandpa", "The new intern", "We"]
_VERBS = ["visited", "fixed", "bought", "planned", "cancelled", "painted", "booked", "discussed", "cooked", "reviewed"]
_OBJECTS = [
    "the garden shed",
    "a trip to Porto",
    "the quarterly report",
    "a red bicycle",
    "the kitchen sink",
    "dinner for six",
    "the database migration",
    "a yoga class",
    "the birthday party",
    "a used piano",
]
_TAILS = [
    "last Tuesday",
    "after work",
    "with two friends",
    "for the third time",
    "despite the rain",
    "on a tight budget",
    "before the deadline",
    "at 7 pm",
    "in March",
    "without telling anyone",
]


def synthetic_texts(count: int, seed: int = 7) -> Iterator[str]:
    """Plausible chat sentences with numbers, deterministic for a seed, all distinct."""
    generator = random.Random(seed)
    for index in range(count):
        yield (
            f"{generator.choice(_SUBJECTS)} {generator.choice(_VERBS)} {generator.choice(_OBJECTS)} "
            f"{generator.choice(_TAILS)}, item {index} cost {generator.randint(5, 900)} euros."
        )
