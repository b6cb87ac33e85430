"""Consolidation ("sleep"): cluster related memories, summarise each cluster, and score the summary."""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.floating[Any]]

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")
_TOKEN = re.compile(r"\d+(?:[.,:/-]\d+)*|[^\W\d_][\w'’-]*")
_WORD = re.compile(r"\w+")
_WHITESPACE = re.compile(r"\s")
_PRONOUNS = frozenset({"i", "i'm", "i'll", "i've", "i'd", "i’m", "i’ll", "i’ve", "i’d"})
_BLOCK_ROWS = 1024  # rows of the similarity matrix computed at once, to bound memory for large n
_DUPLICATE_JACCARD = 0.8  # word-set overlap above which two sentences say the same thing
_ENTITY_BONUS = 0.05  # small: closeness to the centroid decides, names and numbers only break near-ties
# Sentences shorter than this ("Wow, Caroline!", "Thanks, Mel!") rarely state anything; they are
# picked only when no longer sentence fits. Without it, a chat cluster's summary was all greetings.
_MIN_INFORMATIVE_WORDS = 6
# "Name: " at the start of a text, as turns are embedded and indexed: a speaker label, not content.
_SPEAKER_LABEL = re.compile(r"([^\W\d_][\w'’.-]*(?: [^\W\d_][\w'’.-]*){0,3}): (?=\S)")


def _unit_rows(vectors: Matrix) -> npt.NDArray[np.float64]:
    """Rows scaled to unit length; a zero row stays zero, so it is dissimilar to everything."""
    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def _require_matrix(vectors: Matrix, rows: int | None = None) -> None:
    """Reject arrays that are not a finite 2-D matrix (with ``rows`` rows, when given)."""
    if np.ndim(vectors) != 2:
        raise ValueError(f"vectors must be a 2-D array (one row per item), got shape {np.shape(vectors)}")
    if rows is not None and len(vectors) != rows:
        raise ValueError(f"vectors has {len(vectors)} rows but there are {rows} texts; pass one row per text")
    if not np.all(np.isfinite(vectors)):
        raise ValueError("vectors contains NaN or infinity; re-embed the affected items")


def dbscan(vectors: Matrix, *, eps: float, min_samples: int) -> list[int]:
    """DBSCAN over cosine distance (1 − cosine): cluster labels 0..k−1 in order of first core point, −1 for noise.

    A point's neighbourhood includes itself; a core point has at least ``min_samples`` neighbours
    within ``eps``. A border point reachable from two clusters joins the one found first.
    """
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a cosine distance > 0 (typically 0.1-0.5), got {eps!r}")
    if min_samples < 1:
        raise ValueError(f"min_samples must be >= 1, got {min_samples!r}")
    _require_matrix(vectors)
    unit = _unit_rows(vectors)
    count = len(unit)
    neighbours: list[npt.NDArray[np.intp]] = []
    for start in range(0, count, _BLOCK_ROWS):
        distances = 1.0 - unit[start : start + _BLOCK_ROWS] @ unit.T
        for offset, row in enumerate(distances):
            # Zero rows would otherwise be at distance 1 from themselves.
            row[start + offset] = 0.0
            neighbours.append(np.flatnonzero(row <= eps))
    is_core = [len(found) >= min_samples for found in neighbours]

    labels = [-1] * count
    cluster = 0
    for seed in range(count):
        if not is_core[seed] or labels[seed] != -1:
            continue
        labels[seed] = cluster
        frontier = deque([seed])
        while frontier:
            point = frontier.popleft()
            if not is_core[point]:
                continue
            for neighbour in neighbours[point].tolist():
                if labels[neighbour] == -1:
                    labels[neighbour] = cluster
                    frontier.append(neighbour)
        cluster += 1
    return labels


def split_sentences(text: str) -> list[str]:
    """The non-empty sentences of ``text``, split after ., ! or ? followed by whitespace, or at line breaks."""
    return [sentence.strip() for sentence in _SENTENCE_END.split(text) if sentence.strip()]


def _has_name_or_number(sentence: str) -> bool:
    """True when the sentence mentions a number or a capitalised word past its first."""
    tokens = _TOKEN.findall(sentence)
    return any(token[0].isdigit() or (index > 0 and token[0].isupper()) for index, token in enumerate(tokens))


def _is_near_duplicate(words: set[str], chosen: Sequence[set[str]]) -> bool:
    """True when ``words`` overlaps an already chosen sentence's words by the duplicate threshold."""
    for other in chosen:
        union = words | other
        if not union or len(words & other) / len(union) >= _DUPLICATE_JACCARD:
            return True
    return False


def _truncate(sentence: str, max_chars: int) -> str:
    """Cut ``sentence`` to at most ``max_chars`` characters at a word boundary, ending in "…"."""
    room = max_chars - 1
    cut = sentence[: room + 1]
    boundary = max((space.start() for space in _WHITESPACE.finditer(cut)), default=-1)
    # Cut mid-word only when even the first word is longer than the budget.
    head = cut[:boundary].rstrip().rstrip(",;:") if boundary > 0 else sentence[:room]
    return head + "…"


def extractive_summary(
    texts: Sequence[str],
    vectors: Matrix,
    *,
    max_sentences: int = 3,
    max_chars: int = 600,
    restate: Callable[[int, str], str] | None = None,
) -> str:
    """Pick the sentences whose source text lies closest to the cluster centroid, in original order.

    The best sentences that fit ``max_chars`` (joined by spaces) are kept, or the best one cut at
    a word boundary and ended in "…"; empty input gives "" (docs/tiers.md#policies).
    ``restate(index, sentence)`` says how a sentence of ``texts[index]`` is quoted (for example
    with its relative dates resolved); what it returns is what ``max_chars`` counts.
    """
    if max_sentences < 1:
        raise ValueError(f"max_sentences must be >= 1, got {max_sentences!r}")
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars!r}")
    _require_matrix(vectors, rows=len(texts))
    candidates = [(index, sentence) for index, text in enumerate(texts) for sentence in _labelled_sentences(text)]
    if not candidates:
        return ""
    unit = _unit_rows(vectors)
    centroid = unit.mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    closeness = (unit @ (centroid / norm)).tolist() if norm > 0 else [0.0] * len(texts)

    def rank_key(position: int) -> tuple[bool, float, int]:
        source, sentence = candidates[position]
        body = _without_label(sentence)
        score = float(closeness[source]) + _ENTITY_BONUS * _has_name_or_number(body)
        # Ties go to the earlier sentence so the output is deterministic.
        return len(_WORD.findall(body)) < _MIN_INFORMATIVE_WORDS, -score, position

    def quoted(position: int) -> str:
        source, sentence = candidates[position]
        return restate(source, sentence) if restate is not None else sentence

    ranked = sorted(range(len(candidates)), key=rank_key)
    chosen: dict[int, str] = {}
    chosen_words: list[set[str]] = []
    used = -1  # characters used so far, counting the space before the first sentence as -1
    for position in ranked:
        # Ranked and compared on what was said; the restated form is what must fit.
        words = set(_WORD.findall(_without_label(candidates[position][1]).casefold()))
        if _is_near_duplicate(words, chosen_words):
            continue
        sentence = quoted(position)
        if used + 1 + len(sentence) > max_chars:
            continue
        chosen[position] = sentence
        chosen_words.append(words)
        used += 1 + len(sentence)
        if len(chosen) == max_sentences:
            break
    if not chosen:
        # As said, whole if that fits: a cut restatement would end in a broken "[yesterday = …".
        said = candidates[ranked[0]][1]
        return said if len(said) <= max_chars else _truncate(said, max_chars)
    return " ".join(chosen[position] for position in sorted(chosen))


def _labelled_sentences(text: str) -> list[str]:
    """The sentences of ``text``, each after the text's speaker label when it has one."""
    sentences = split_sentences(text)
    label = _speaker_label(sentences[0]) if sentences else ""
    return [sentences[0], *(label + sentence for sentence in sentences[1:])] if label else sentences


def _without_label(sentence: str) -> str:
    return sentence[len(_speaker_label(sentence)) :]


def _speaker_label(sentence: str) -> str:
    """The "Name: " that starts ``sentence`` (one to four words, not lower-case), or ""."""
    label = _SPEAKER_LABEL.match(sentence)
    return label.group(0) if label and not label.group(0)[0].islower() else ""


@dataclass(frozen=True, slots=True)
class TokenEfficiency:
    """TES of a summary: how much it compresses, how many entities it keeps, and their geometric mean."""

    compression_ratio: float
    entity_preservation: float
    score: float


def capitalised_entities(text: str) -> set[str]:
    """Case-folded numbers and capitalised words that do not start a sentence ("I" excluded)."""
    found: set[str] = set()
    for sentence in split_sentences(text):
        for index, token in enumerate(_TOKEN.findall(sentence)):
            folded = token.casefold()
            # "Alice's" and "Alice" are the same entity.
            folded = folded.removesuffix("'s").removesuffix("’s")
            if token[0].isdigit() or (index > 0 and token[0].isupper() and folded not in _PRONOUNS):
                found.add(folded)
    return found


def token_efficiency(
    source_texts: Sequence[str], summary: str, *, entities: Callable[[str], set[str]] | None = None
) -> TokenEfficiency:
    """The mission's TES = sqrt(compression_ratio × entity_preservation), in whitespace-separated words.

    compression_ratio = 1 − summary_words / source_words, clipped to [0, 1];
    entity_preservation = |E(summary) ∩ E(sources)| / |E(sources)|, 1.0 when the sources name
    no entities; E defaults to ``capitalised_entities``. See docs/tiers.md#policies.
    """
    extract = capitalised_entities if entities is None else entities
    source_tokens = sum(len(text.split()) for text in source_texts)
    summary_tokens = len(summary.split())
    compression = min(max(1.0 - summary_tokens / source_tokens, 0.0), 1.0) if source_tokens else 0.0
    source_entities: set[str] = set().union(*(extract(text) for text in source_texts))
    preservation = len(extract(summary) & source_entities) / len(source_entities) if source_entities else 1.0
    return TokenEfficiency(compression, preservation, math.sqrt(compression * preservation))


@dataclass(kw_only=True, frozen=True, slots=True)
class ConsolidationPolicy:
    """When to consolidate and how: trigger thresholds, DBSCAN parameters and summary size."""

    every_turns: int = 50
    token_threshold: int = 4000
    eps: float = 0.25
    min_samples: int = 2
    max_sentences: int = 3
    max_chars: int = 600

    def __post_init__(self) -> None:
        for name in ("every_turns", "token_threshold", "min_samples", "max_sentences", "max_chars"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value!r}")
        if not (math.isfinite(self.eps) and 0 < self.eps <= 2):
            raise ValueError(f"eps must be a cosine distance in (0, 2], got {self.eps!r}")


def should_consolidate(new_turns: int, new_tokens: int, policy: ConsolidationPolicy) -> bool:
    """True after ``every_turns`` new turns, or once unconsolidated tokens exceed ``token_threshold``."""
    return new_turns >= policy.every_turns or new_tokens > policy.token_threshold
