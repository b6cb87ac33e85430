"""Importance of a stored turn in [0, 1]: cheap static cues plus an EMA of dynamic signals."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

SECONDS_PER_DAY = 86_400.0


class SignalType(StrEnum):
    """The kind of memory-worthy content a message carries, if any."""

    PREFERENCE = "preference"
    FACT = "fact"
    TASK = "task"
    DECISION = "decision"
    PLAN = "plan"
    RISK = "risk"
    NONE = "none"


def _pattern(*alternatives: str) -> re.Pattern[str]:
    """One case-insensitive regex matching any alternative as whole words."""
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)


# Checked in this order, first match wins: the specific cues come before the broad ones,
# so "I'll go with X" is a decision (not a plan) and "I'm worried I will miss it" a risk (not a plan).
_SIGNAL_PATTERNS: tuple[tuple[SignalType, re.Pattern[str]], ...] = (
    (
        SignalType.PREFERENCE,
        _pattern(
            r"i\s+(?:really\s+|do\s+not\s+|don't\s+)?(?:prefer|like|love|hate|dislike|enjoy|adore)",
            r"i\s+can't\s+stand",
            r"my\s+favou?rite",
            r"i'?m\s+(?:a\s+)?(?:big\s+|huge\s+)?fan\s+of",
        ),
    ),
    (
        SignalType.DECISION,
        _pattern(
            r"(?:i|we)(?:\s+have|'ve)?\s+(?:decided|chosen|agreed|settled\s+on)",
            r"(?:i|we)\s+(?:chose|picked|agreed)",
            r"let(?:'s|\s+us)\s+go\s+with",
            r"(?:i|we)(?:'ll|\s+will)\s+go\s+with",
        ),
    ),
    (
        SignalType.TASK,
        _pattern(
            r"i\s+(?:need|have|ought)\s+to",
            r"i(?:'ve|\s+have)\s+got\s+to",
            r"i\s+must",
            r"remind\s+me",
            r"don't\s+(?:let\s+me\s+)?forget",
            r"to-?dos?",
        ),
    ),
    (
        SignalType.RISK,
        _pattern(
            r"worr(?:y|ied|ies|ying)",
            r"concern(?:ed|s)?",
            r"risk(?:s|y)?",
            r"(?:might|could|may)\s+fail",
            r"deadlines?",
            r"afraid",
            r"dangerous",
        ),
    ),
    (
        SignalType.PLAN,
        _pattern(
            r"(?:i|we)(?:'m|'re|\s+am|\s+are)\s+(?:planning|going\s+to)",
            r"(?:i|we)\s+plan\s+to",
            r"(?:i|we)(?:'ll|\s+will)",
        ),
    ),
    (
        SignalType.FACT,
        _pattern(
            # "I'm fine" and "I'm not sure" are chit-chat, not facts worth remembering.
            r"i(?:'m|\s+am)\s+(?!(?:not|sure|fine|ok|okay|sorry|glad|just|here|back|done|thinking|wondering)\b)",
            r"i\s+(?:live[sd]?|work(?:ed)?|grew\s+up|was\s+born|studied|moved|own)",
            r"my\s+[\w']+(?:\s+[\w']+)?\s+(?:is|are|was|were)",
        ),
    ),
)

_QUESTION = re.compile(r"\?")
_NUMBER_OR_DATE = re.compile(
    r"\d|\b(?:january|february|march|april|june|july|august|september|october|november|december"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tonight|tomorrow|yesterday)\b",
    re.IGNORECASE,
)


def classify_signal(text: str) -> SignalType:
    """The signal ``text`` carries, from whole-word, case-insensitive cues; ``NONE`` when none match."""
    # Curly apostrophes come from phones and word processors; the patterns use straight ones.
    normalised = text.replace("\u2019", "'")
    for signal, pattern in _SIGNAL_PATTERNS:
        if pattern.search(normalised):
            return signal
    return SignalType.NONE


def _default_signal_weights() -> Mapping[SignalType, float]:
    """Preferences and decisions are what users most expect an assistant to remember."""
    return MappingProxyType(
        {
            SignalType.PREFERENCE: 0.30,
            SignalType.DECISION: 0.30,
            SignalType.FACT: 0.25,
            SignalType.TASK: 0.25,
            SignalType.PLAN: 0.20,
            SignalType.RISK: 0.20,
            SignalType.NONE: 0.0,
        }
    )


def _default_role_weights() -> Mapping[str, float]:
    """The user states facts about themselves; the other roles mostly restate or instruct."""
    return MappingProxyType({"user": 0.10, "assistant": 0.05, "system": 0.02, "tool": 0.02})


@dataclass(kw_only=True, frozen=True, slots=True)
class ImportanceWeights:
    """The knobs of ``importance``; with the defaults the non-pinned terms sum to at most 1."""

    signal_weights: Mapping[SignalType, float] = field(default_factory=_default_signal_weights)
    role_weights: Mapping[str, float] = field(default_factory=_default_role_weights)
    pinned_bonus: float = 0.5
    length_weight: float = 0.10
    length_saturation_words: int = 60
    question_weight: float = 0.05
    numbers_weight: float = 0.10
    ema_alpha: float = 0.5
    entity_density_weight: float = 0.10
    novelty_weight: float = 0.15
    recency_weight: float = 0.10
    recency_half_life_seconds: float = 30 * SECONDS_PER_DAY

    def __post_init__(self) -> None:
        weights = {
            "pinned_bonus": self.pinned_bonus,
            "length_weight": self.length_weight,
            "question_weight": self.question_weight,
            "numbers_weight": self.numbers_weight,
            "entity_density_weight": self.entity_density_weight,
            "novelty_weight": self.novelty_weight,
            "recency_weight": self.recency_weight,
            **{f"signal_weights[{key}]": value for key, value in self.signal_weights.items()},
            **{f"role_weights[{key}]": value for key, value in self.role_weights.items()},
        }
        # Negative weights would break the guarantees callers rely on (pinned ranks first).
        for name, value in weights.items():
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not 0 <= self.ema_alpha <= 1:
            raise ValueError(f"ema_alpha must be in [0, 1], got {self.ema_alpha!r}")
        if self.length_saturation_words < 1:
            raise ValueError(f"length_saturation_words must be >= 1, got {self.length_saturation_words!r}")
        if not (math.isfinite(self.recency_half_life_seconds) and self.recency_half_life_seconds > 0):
            raise ValueError(f"recency_half_life_seconds must be > 0, got {self.recency_half_life_seconds!r}")


@dataclass(kw_only=True, frozen=True, slots=True)
class TurnFeatures:
    """What ``importance`` needs to know about one turn; the caller measures the dynamic parts."""

    text: str
    role: str
    pinned: bool = False
    entity_count: int = 0
    novelty: float = 1.0
    age_seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.entity_count < 0:
            raise ValueError(f"entity_count must be >= 0, got {self.entity_count!r}")
        if math.isnan(self.novelty):
            raise ValueError("novelty must be a number in [0, 1], got NaN")
        if not (math.isfinite(self.age_seconds) and self.age_seconds >= 0):
            raise ValueError(f"age_seconds must be a finite number >= 0, got {self.age_seconds!r}")


def recency_decay(age_seconds: float, half_life_seconds: float) -> float:
    """Exponential decay 0.5 ** (age / half_life): 1.0 at age 0, 0.5 at one half-life, never below 0."""
    if not (math.isfinite(half_life_seconds) and half_life_seconds > 0):
        raise ValueError(f"half_life_seconds must be a finite number > 0, got {half_life_seconds!r}")
    if math.isnan(age_seconds):
        raise ValueError("age_seconds must be a number, got NaN")
    # A timestamp slightly in the future (clock skew between writers) counts as brand new.
    return math.pow(0.5, max(age_seconds, 0.0) / half_life_seconds)


def ema(previous: float | None, value: float, alpha: float) -> float:
    """Exponential moving average alpha·value + (1 − alpha)·previous; the first value starts it."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    if previous is None:
        return value
    step = previous + alpha * (value - previous)
    # Rounding can overshoot by an ulp; an average must never leave the range it averages.
    return min(max(step, min(previous, value)), max(previous, value))


def importance(
    features: TurnFeatures,
    *,
    weights: ImportanceWeights = ImportanceWeights(),
    running: float | None = None,
) -> tuple[float, float]:
    """Score a turn in [0, 1] and return ``(importance, new_running)``.

    Pass ``new_running`` back as ``running`` for the next turn: it smooths the per-turn signals
    across a conversation. Every term is non-negative, so a pinned turn never scores below the
    same turn unpinned. The formula is in docs/tiers.md#policies.
    """
    if running is not None and not 0 <= running <= 1:
        raise ValueError(f"running must be in [0, 1] (a value this function returned), got {running!r}")
    text = features.text
    word_count = len(text.split())

    length_score = min(1.0, math.log1p(word_count) / math.log1p(weights.length_saturation_words))
    static = (
        weights.signal_weights.get(classify_signal(text), 0.0)
        + weights.role_weights.get(features.role.lower(), 0.0)
        + weights.length_weight * length_score
        + weights.question_weight * bool(_QUESTION.search(text))
        + weights.numbers_weight * bool(_NUMBER_OR_DATE.search(text))
    )

    density = min(1.0, 10.0 * features.entity_count / max(word_count, 1))
    # 1 − cosine exceeds 1 for opposed vectors; past "unlike anything stored" there is nothing more.
    novelty = min(max(features.novelty, 0.0), 1.0)
    recency = recency_decay(features.age_seconds, weights.recency_half_life_seconds)
    dynamic_total = weights.entity_density_weight + weights.novelty_weight + weights.recency_weight
    weighted = (
        weights.entity_density_weight * density + weights.novelty_weight * novelty + weights.recency_weight * recency
    )
    dynamic = min(weighted / dynamic_total, 1.0) if dynamic_total > 0 else 0.0
    new_running = min(max(ema(running, dynamic, weights.ema_alpha), 0.0), 1.0)

    score = static + dynamic_total * new_running + weights.pinned_bonus * features.pinned
    return min(max(score, 0.0), 1.0), new_running
