"""LoCoMo-Plus data: cue/trigger pairs read and checked, their time gaps parsed, stitched into LoCoMo.

Pairs are placed as the paper's ``data/build_conv.py`` places them and dealt over the
conversations round-robin. See docs/benchmark-history.md#locomo-plus-protocol-notes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memstrata.bench.datasets import DialogTurn
from memstrata.errors import InvalidInput
from memstrata.extraction.time_expressions import NUMBER_WORDS

SOURCE = "data/locomo_plus.json of the public Locomo-Plus repository (github.com/xjtuleeyf/Locomo-Plus)"
QUERY_DELAY = timedelta(days=7)  # the trigger comes a week after the conversation's last session
UNIT_DAYS = {"week": 7, "month": 30, "year": 365}
# The paper's words, plus three vague ones it reads as no gap at all (see parse_time_gap).
COUNT_WORDS = {**NUMBER_WORDS, "a few": 3, "several": 3}
_GAP = re.compile(
    r"\b(\d+|" + "|".join(re.escape(word) for word in COUNT_WORDS) + r")[\s-]+(week|month|year)s?\b", re.IGNORECASE
)
_LINE = re.compile(r"^\s*([AB])\s*:\s*(.*?)\s*$")


def parse_time_gap(text: str) -> int:
    """Days between cue and trigger: "two weeks later" → 14, "about one month later" → 30, "a year after" → 365.

    A number (digits, a word up to twelve, "a"/"an" = 1) before week(s) = 7 days, month(s) = 30
    or year(s) = 365, as the paper reads it; the first such phrase counts. Where the paper's
    code finds no number (and so puts the cue at the trigger's time), this reads "several"
    and "a few" as 3 and "a couple of" as 2: "several months later" → 90. No unit at all → 0.
    """
    match = _GAP.search(text)
    if match is None:
        return 0
    count, unit = match.group(1).lower(), match.group(2).lower()
    number = int(count) if count.isdigit() else COUNT_WORDS[" ".join(count.split())]
    return number * UNIT_DAYS[unit]


@dataclass(kw_only=True, frozen=True, slots=True)
class PlusItem:
    """One cue/trigger pair; ``cue`` holds ("A" or "B", text) lines, ``trigger`` the A lines joined."""

    index: int
    relation: str
    cue: tuple[tuple[str, str], ...]
    trigger: str
    time_gap: str


@dataclass(kw_only=True, frozen=True, slots=True)
class Placement:
    """Where a pair lands: its conversation, the cue's turns (stored), the trigger's time and speaker (asked)."""

    item: PlusItem
    conversation: str
    cue_time: datetime
    query_time: datetime
    speaker: str
    cue_turns: tuple[DialogTurn, ...]

    @property
    def evidence(self) -> list[str]:
        """The cue's turn ids as stored: any of them found counts as recall of the cue."""
        return [f"{turn.conversation}:{turn.dia_id}" for turn in self.cue_turns]


def _lines(text: Any, field: str, index: int) -> list[tuple[str, str]]:
    if not isinstance(text, str):
        raise TypeError(f"item {index}'s {field} is {type(text).__name__}, not text")
    lines: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        match = _LINE.match(line)
        if match is None or not match.group(2):
            raise ValueError(f"line {number} of item {index}'s {field} is not 'A: …' or 'B: …': {line[:60]!r}")
        lines.append((match.group(1), match.group(2)))
    if not lines:
        raise ValueError(f"item {index}'s {field} is empty")
    return lines


def _item(index: int, raw: Any) -> PlusItem:
    if not isinstance(raw, dict):
        raise TypeError(f"item {index} is {type(raw).__name__}, not an object")
    relation, gap = raw["relation_type"], raw["time_gap"]
    if not isinstance(relation, str) or not relation.strip() or not isinstance(gap, str):
        raise TypeError(f"item {index}'s relation_type and time_gap must be text")
    trigger = [text for speaker, text in _lines(raw["trigger_query"], "trigger_query", index) if speaker == "A"]
    if not trigger:
        raise ValueError(f"item {index}'s trigger_query has no 'A: …' line")
    cue = tuple(_lines(raw["cue_dialogue"], "cue_dialogue", index))
    return PlusItem(index=index, relation=relation.strip(), cue=cue, trigger=" ".join(trigger), time_gap=gap)


def load_locomo_plus(path: Path) -> list[PlusItem]:
    """Every pair of LoCoMo-Plus's file; InvalidInput for a missing file or one that is not in its format."""
    if not path.is_file():
        raise InvalidInput(f"no LoCoMo-Plus file at {path}; get {SOURCE}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, list) or not raw:
            raise ValueError("it should be a non-empty JSON list of cue/trigger pairs")
        return [_item(index, entry) for index, entry in enumerate(raw)]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        raise InvalidInput(f"{path} is not LoCoMo-Plus's locomo_plus.json ({detail}); get {SOURCE}") from exc


def load_speakers(path: Path) -> dict[str, tuple[str, str]]:
    """Each LoCoMo conversation's (speaker_a, speaker_b), which ``load_locomo`` does not keep."""
    try:
        samples = json.loads(path.read_text(encoding="utf-8"))
        return {
            str(sample["sample_id"]): (
                str(sample["conversation"]["speaker_a"]),
                str(sample["conversation"]["speaker_b"]),
            )
            for sample in samples
        }
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(
            f"{path} is not LoCoMo's locomo10.json ({type(exc).__name__}: {exc}); pass --locomo with that file"
        ) from exc


def place(
    items: Sequence[PlusItem], turns: Sequence[DialogTurn], speakers: dict[str, tuple[str, str]]
) -> list[Placement]:
    """Deal item i to conversation i mod n (in file order) and date its cue as the paper does.

    The trigger is asked ``QUERY_DELAY`` after the conversation's last session; the cue is
    its own session ``plus_<index>`` said ``parse_time_gap(time_gap)`` days before that, its
    turns ``P<index>:<n>`` (n from 1), "A" spoken by ``speaker_a`` and "B" by ``speaker_b``.
    """
    last: dict[str, datetime] = {}
    for turn in turns:
        last[turn.conversation] = turn.timestamp  # turns come session by session: the last one wins
    order = list(last)
    if not order:
        raise InvalidInput("the LoCoMo data holds no conversation to stitch the cues into")
    missing = [conversation for conversation in order if conversation not in speakers]
    if missing:
        raise InvalidInput(f"LoCoMo conversation {missing[0]} names no speaker_a/speaker_b")
    placements: list[Placement] = []
    for item in items:
        conversation = order[item.index % len(order)]
        speaker_a, speaker_b = speakers[conversation]
        query_time = last[conversation] + QUERY_DELAY
        cue_time = query_time - timedelta(days=parse_time_gap(item.time_gap))
        cue_turns = tuple(
            DialogTurn(
                conversation=conversation,
                session=f"plus_{item.index}",
                dia_id=f"P{item.index}:{number}",
                speaker=speaker_a if role == "A" else speaker_b,
                text=text,
                timestamp=cue_time,
            )
            for number, (role, text) in enumerate(item.cue, start=1)
        )
        placements.append(
            Placement(
                item=item,
                conversation=conversation,
                cue_time=cue_time,
                query_time=query_time,
                speaker=speaker_a,
                cue_turns=cue_turns,
            )
        )
    return placements
