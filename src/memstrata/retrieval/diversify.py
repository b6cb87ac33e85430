"""Diversification: maximal marginal relevance (MMR) over ranked candidates.

Opt-in (``search(..., diversity=...)``): on LoCoMo, where a question's evidence often
sits in near-identical turns, diversifying lowers evidence recall (docs/retrieval.md),
so the default ranking is by relevance alone. Diversity helps when many stored
memories say the same thing and a caller wants the different things said.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

Key = TypeVar("Key", bound=Hashable)


def maximal_marginal_relevance(
    keys: Sequence[Key],
    relevance: Sequence[float],
    vectors: Mapping[Key, npt.ArrayLike],
    *,
    diversity: float,
    limit: int,
) -> list[Key]:
    """Up to ``limit`` keys, each chosen to be relevant and unlike those chosen before it.

    Pass keys best first: ``diversity=0`` keeps their order, ``diversity=1`` keeps the first
    key and then only avoids resemblance. A key without a vector resembles nothing.
    See docs/retrieval.md#3b-diversify-opt-in.
    """
    if not 0.0 <= diversity <= 1.0:
        raise ValueError("diversity must be between 0 and 1")
    if len(keys) != len(relevance):
        raise ValueError("keys and relevance must have the same length")
    count = min(limit, len(keys))
    if count <= 0:
        return []
    scores = np.asarray(relevance, np.float64)
    spread = float(scores.max() - scores.min())
    scaled = (scores - scores.min()) / spread if spread > 0 else np.ones_like(scores)
    resemblance = _resemblance(keys, vectors)
    closest = np.zeros(len(keys))  # each candidate's highest resemblance to the chosen ones
    remaining = np.ones(len(keys), bool)
    chosen: list[int] = []
    for _ in range(count):
        gain = np.where(remaining, (1.0 - diversity) * scaled - diversity * closest, -np.inf)
        best = int(np.argmax(gain))  # the first maximum: ties keep the given order
        chosen.append(best)
        remaining[best] = False
        if resemblance is not None:
            closest = np.maximum(closest, resemblance[best])
    return [keys[index] for index in chosen]


def _resemblance(keys: Sequence[Key], vectors: Mapping[Key, npt.ArrayLike]) -> npt.NDArray[np.float64] | None:
    """Pairwise resemblance in [0, 1]: cosine rescaled so the candidates' mean cosine is 0 and identity 1.

    Sentence embedders crowd unrelated texts near one cosine (about 0.8 for e5), so raw
    cosines would make every candidate look redundant alike and diversity would barely act.
    A key without a vector resembles nothing.
    """
    found = {key: np.asarray(vectors[key], np.float64).ravel() for key in keys if key in vectors}
    if not found:
        return None
    dimension = len(next(iter(found.values())))
    rows = np.zeros((len(keys), dimension))
    for index, key in enumerate(keys):
        vector = found.get(key)
        norm = float(np.linalg.norm(vector)) if vector is not None and len(vector) == dimension else 0.0
        if vector is not None and norm > 0:
            rows[index] = vector / norm
    cosines = rows @ rows.T
    known = np.linalg.norm(rows, axis=1) > 0
    pairs = cosines[np.ix_(known, known)][~np.eye(int(known.sum()), dtype=bool)]
    typical = min(float(pairs.mean()), 0.99) if pairs.size else 0.0
    resemblance = np.clip((cosines - typical) / (1.0 - typical), 0.0, 1.0)
    resemblance[~known, :] = 0.0
    resemblance[:, ~known] = 0.0
    return resemblance
