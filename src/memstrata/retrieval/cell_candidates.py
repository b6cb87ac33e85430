"""Cell candidates: the user's current facts closest in meaning to a query, beside those its words find.

Pure functions; the store reads and the embedding happen in the caller.
See docs/retrieval.md#1-candidates ("Facts by meaning").
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from memstrata.retrieval.fusion import reciprocal_rank_fusion

Key = TypeVar("Key", bound=Hashable)

#: The name the facts found by meaning go by when fused with the full-text list.
BY_MEANING = "cells"


@dataclass(frozen=True, slots=True)
class CellCandidatePolicy:
    """How many facts a query may reach by meaning, and how far one must stand out from the user's others."""

    #: Facts taken at most, closest first; 0 turns finding facts by meaning off.
    cells: int = 3
    #: A fact is taken only if its cosine is this many standard deviations above the mean cosine
    #: of the user's other current facts to the query: nothing stands out, nothing is taken.
    #: Measured on LoCoMo conversations 1-2 (about 20 facts each): at one deviation every
    #: question, about the memory or about another conversation, took about three facts; at
    #: two, questions about another conversation took 0.8-0.9 on average (docs/retrieval.md).
    min_deviations: float = 2.0
    #: Fewer facts than this give no distribution to stand out from: none is taken.
    min_cells: int = 3


def closest_cells(cosines: npt.NDArray[np.float32], policy: CellCandidatePolicy) -> list[int]:
    """Indexes into ``cosines`` (each current fact's cosine to the query) of the facts to rank, closest first.

    A fact counts when its cosine is at least ``min_deviations`` standard deviations above the
    mean of the other facts (itself left out, so it does not raise its own bar).
    """
    values = np.asarray(cosines, dtype=np.float64)
    count = len(values)
    if policy.cells <= 0 or count < max(policy.min_cells, 3):
        return []
    others = count - 1
    mean = (values.sum() - values) / others
    spread = np.sqrt(np.maximum((np.square(values).sum() - np.square(values)) / others - np.square(mean), 0.0))
    standing = (spread > 0.0) & (values >= mean + policy.min_deviations * spread)
    return [int(index) for index in np.argsort(-values, kind="stable") if standing[index]][: policy.cells]


def about_whom_asked(subjects: Sequence[str], asked: str | None, speakers: Sequence[str]) -> list[int]:
    """Indexes into ``subjects`` (each fact's) of the facts a query may reach: when it names one of the
    user's ``speakers`` (``asked``), the facts of the others are left out.

    Facts are embedded, as queries are, without the speakers' names (``storage.text.cell_gist``),
    so "What activities does Melanie partake in?" would otherwise reach Caroline's hobbies alike.
    """
    if asked is None:
        return list(range(len(subjects)))
    others = {speaker.strip().casefold() for speaker in speakers} - {asked.strip().casefold()}
    return [index for index, subject in enumerate(subjects) if subject.strip().casefold() not in others]


def with_cells(
    derived: Sequence[tuple[Key, float]], cells: Sequence[tuple[Key, float]], *, k: int = 60
) -> list[tuple[Key, float]]:
    """The full-text list of derived items fused with the facts found by meaning, best first.

    Reciprocal rank fusion: the scores are the fused ones, only the order of each list counts.
    Without facts the list is returned as it is.
    """
    if not cells:
        return list(derived)
    fused = reciprocal_rank_fusion({"derived": [key for key, _ in derived], BY_MEANING: [key for key, _ in cells]}, k=k)
    return [(item.key, item.score) for item in fused]
