"""Which topic an exchange belongs to: the score that files it into a segment, and runs of one topic in a batch."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


def topic_score(vector: Vector, words: Collection[str], centroid: Vector, topic_words: Collection[str]) -> float:
    """How well an exchange fits a topic: the cosine to its centroid, plus half the share of words they have in common.

    ``vector`` and ``centroid`` are unit vectors (or zero, which scores on words alone).
    ``topic_words`` may be phrases, as an LLM labels a segment; they count word by word.
    Shared words can lift a borderline vector match; they never lower one.
    """
    exchange_words = set(words)
    topic = {word for keyword in topic_words for word in keyword.split()}
    union = exchange_words | topic
    overlap = len(exchange_words & topic) / max(len(union), 1)
    return float(np.dot(centroid, vector)) + overlap / 2


def topic_runs(
    vectors: Sequence[Vector],
    texts: Sequence[Sequence[str]],
    count_words: Callable[[Sequence[str]], Counter[str]],
    threshold: float,
    *,
    label_size: int = 6,
) -> list[list[int]]:
    """Split a batch of exchanges, in the order they were said, into runs that stay on one topic.

    Exchange ``i`` has the unit vector ``vectors[i]`` and the texts ``texts[i]``;
    ``count_words`` counts the content words of some texts. The words compared are the
    ``label_size`` most frequent ones of the exchange, and of the run, as a filing compares
    an exchange's keywords with a segment's. Each exchange joins the run before it when :func:`topic_score` against
    that run (its mean direction and words) reaches ``threshold``, and starts a new run
    otherwise. Returns the exchanges' indexes, run by run. Linear in the batch: each run
    keeps a running vector sum and word count.
    """
    if len(vectors) != len(texts):
        raise ValueError(f"{len(vectors)} vectors for {len(texts)} exchanges")
    runs: list[list[int]] = []
    total: Vector | None = None
    label = _Label(label_size)
    for index, (vector, said) in enumerate(zip(vectors, texts, strict=True)):
        words = count_words(said)
        if runs and total is not None:
            norm = float(np.linalg.norm(total))
            centroid = total / norm if norm > 0 else total
            own = [word for word, _ in words.most_common(label_size)]
            if topic_score(vector, own, centroid, label.words()) >= threshold:
                runs[-1].append(index)
                total = total + vector
                label.update(words)
                continue
        runs.append([index])
        total = np.asarray(vector, dtype=np.float32).copy()
        label = _Label(label_size)
        label.update(words)
    return runs


class _Label:
    """A run's ``size`` most frequent words, kept up to date as its counts grow.

    The same words as ``Counter.most_common(size)`` over the run (ties go to the word seen
    first), without sorting the run's whole vocabulary for every exchange: counts only grow,
    so a word enters the label only when its own count rises.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._counts: Counter[str] = Counter()
        self._first: dict[str, int] = {}
        self._top: list[str] = []

    def update(self, words: Counter[str]) -> None:
        """Add one exchange's word counts."""
        for word, count in words.items():
            self._first.setdefault(word, len(self._first))
            self._counts[word] += count
            if word not in self._top:
                self._top.append(word)
            self._top.sort(key=self._rank)
            del self._top[self._size :]

    def words(self) -> list[str]:
        """The label, most frequent first."""
        return list(self._top)

    def _rank(self, word: str) -> tuple[int, int]:
        return -self._counts[word], self._first[word]
