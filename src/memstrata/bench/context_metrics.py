"""Context metrics: evidence and answers found in an assembled context, and CRS."""

from __future__ import annotations

import random
import re
import string
from collections.abc import Sequence

import numpy as np

from memstrata import Embedder, count_tokens

FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "was",
        "are",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "he",
        "she",
        "they",
        "them",
        "his",
        "her",
        "their",
        "hers",
        "him",
        "i",
        "you",
        "we",
        "my",
        "your",
        "our",
        "me",
        "us",
        "yes",
        "no",
        "not",
        "likely",
        "probably",
        "maybe",
    ]
)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans({character: " " for character in string.punctuation})


def normalize_answer(text: str) -> str:
    """Lowercase, punctuation and articles removed, whitespace collapsed (the SQuAD normalisation)."""
    lowered = str(text).lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", lowered).split())


def answer_string_in_context(answer: str, context: str) -> bool:
    """Whether the whole normalised answer occurs in the normalised context (strict)."""
    wanted = normalize_answer(answer)
    if not wanted:
        return False
    return f" {wanted} " in f" {normalize_answer(context)} "


def answer_in_context(answer: str, context: str) -> bool:
    """Whether every content word of the normalised answer occurs in the normalised context.

    LoCoMo answers are often paraphrases or lists ("beach, mountains, forest"), so the
    strict string test misses answers the context plainly holds; answers made only of
    function words ("Likely no") fall back to the strict test.
    """
    words = [word for word in normalize_answer(answer).split() if word not in FUNCTION_WORDS]
    if not words:
        return answer_string_in_context(answer, context)
    present = set(normalize_answer(context).split())
    return all(word in present for word in words)


def evidence_in_context(evidence_texts: Sequence[str], context: str) -> float:
    """Share of evidence turns whose text appears in the context verbatim."""
    if not evidence_texts:
        raise ValueError("evidence_in_context needs at least one evidence text")
    return sum(text in context for text in evidence_texts) / len(evidence_texts)


def evidence_first(evidence_lines: Sequence[str], excerpt_lines: Sequence[str], block: str, budget: int) -> str:
    """The block with the gold evidence moved to its front: what a perfect ranking would hand over.

    ``evidence_lines`` are the evidence turns as rendered lines; ``excerpt_lines`` the same
    turns as the block shows its excerpts, so one already in the block is not repeated. Lines
    are kept in order while they fit ``budget`` tokens, so this may score below the block.
    """
    rest = block
    for excerpt in excerpt_lines:
        if excerpt.strip():
            # Whole lines only (an excerpt may span two, a caption after its text): a summary
            # quoting the same words keeps them.
            rest = re.sub(rf"(?m)^{re.escape(excerpt)}$\n?", "", rest)
    lines = [*evidence_lines, *rest.splitlines()]
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = count_tokens(line) + 1
        if used + cost > budget:
            continue  # as context() does: a shorter line further on may still fit
        kept.append(line)
        used += cost
    return "\n".join(kept)


def random_context(texts: Sequence[str], tokens: int, rng: random.Random) -> str:
    """Random texts of one user packed to about ``tokens`` tokens: CRS's baseline context."""
    order = list(range(len(texts)))
    rng.shuffle(order)
    chosen: list[str] = []
    used = 0
    for index in order:
        cost = count_tokens(texts[index]) + 1
        if used + cost > tokens:
            continue
        chosen.append(texts[index])
        used += cost
    return "\n".join(chosen)


def context_relevance(embedder: Embedder, query: str, context: str, baseline: str) -> tuple[float, float]:
    """CRS's two cosines: (query, assembled context) and (query, random context of the same size)."""
    query_vector = np.asarray(embedder.embed_query(query), dtype=np.float32)
    documents = np.asarray(embedder.embed_documents([context or " ", baseline or " "]), dtype=np.float32)
    norms = np.linalg.norm(documents, axis=1) * float(np.linalg.norm(query_vector))
    cosines = documents @ query_vector / np.where(norms == 0, 1.0, norms)
    return float(cosines[0]), float(cosines[1])
