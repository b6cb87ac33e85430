"""The embedder seam: what a model must do for memstrata to index and search text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from memstrata.models import Vectors as Vectors


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised float32 vectors.

    Invariants every implementation keeps:

    - ``model_id`` names the model and anything that changes its vectors (variant,
      quantisation, prefixes); vectors with different ids are never compared.
    - ``dimension`` is fixed; ``embed_documents(texts)`` returns ``(len(texts), dimension)``,
      row ``i`` for ``texts[i]``, and ``embed_query(text)`` ``(dimension,)``. Asymmetric
      models (e5's ``query:``/``passage:``) apply their prefixes inside.
    - Every row has unit L2 norm, so a dot product is the cosine similarity.
    - Failures raise :class:`memstrata.errors.EmbeddingError`, never a missing or zero vector.
    - Calls may come from several threads; serialise if the engine is not thread-safe.
    """

    @property
    def model_id(self) -> str:
        """Stable identifier stored beside every vector."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Embed texts to be stored and searched."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """Embed one search query."""
        ...


@runtime_checkable
class FittedTopics(Protocol):
    """An embedder that knows the topic thresholds fitted for its model; the bundled ones do.

    Mid-term files an exchange into a topic segment by cosine, and what cosine means "on
    one topic" depends on the model. For a model without this, the thresholds are
    calibrated from how alike it finds unrelated lines (``embeddings/calibration.py``).
    """

    @property
    def topic_cosines(self) -> tuple[float, float]:
        """(join, stay): the cosines for returning to an earlier topic and for staying on the current one."""
        ...


def normalize_rows(vectors: Vectors) -> Vectors:
    """Return ``vectors`` scaled to unit L2 norm per row (zero rows stay zero)."""
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    normalized: Vectors = (matrix / norms).astype(np.float32, copy=False)
    return normalized
