"""The approximate half of a large user's vector search: product-quantized codes scanned by faiss.

From ``vector_approximate_from`` rows a user's vectors are also kept as 4-bit product-quantized
codes (one code per two dimensions) in a faiss inverted-file fast-scan index: the codes are
filed under the nearest of about √(n / 4) centroids, and a search scans the lists nearest the query,
about ``PROBED_PER_CANDIDATE`` codes for each candidate it asks for, estimating their cosines in
SIMD registers. Only the best candidates of that scan are scored exactly (docs/retrieval.md,
"Vectors"). The codes are a cache like the vectors: built from them on load, never stored.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.embeddings.base import Vectors

#: Rows the quantizer is trained on (evenly spaced over the user's rows).
TRAIN_SAMPLE_ROWS = 50_000
#: Dimensions per sub-quantizer: two, for estimates close enough that few candidates need rescoring.
SUBVECTOR_DIMENSIONS = 2
#: Fewest candidates of the scan scored exactly, per list asked for ...
RESCORED_ROWS = 4_000
#: ... and at least this many per result asked for.
RESCORED_PER_RESULT = 40
#: A scan asked for c of n codes reads the lists holding about this many times c codes (all from n / this).
PROBED_PER_CANDIDATE = 64
#: Lists of a scan: √(rows / this), so a list holds about four times as many codes as there are lists
#: (fewer lists: cheaper to file codes under, as fast to search).
ROWS_PER_LIST_SQUARE = 4
#: Training rows per list, at least: fewer leave k-means centroids poorly placed (faiss warns below 39).
TRAIN_ROWS_PER_LIST = 40
#: Rows encoded at a time, so a large load never holds a float32 copy of all vectors.
ENCODE_CHUNK_ROWS = 32_768

Seqs = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float32]


def _faiss() -> Any:
    """faiss, single-threaded: searches already run beside the embedder on two cores."""
    import faiss  # a dependency, imported only once a user is this large

    faiss.omp_set_num_threads(1)
    return faiss


def supports(dimension: int) -> bool:
    """Whether vectors of ``dimension`` can be coded (the sub-vectors must split them evenly, in pairs)."""
    return dimension % (2 * SUBVECTOR_DIMENSIONS) == 0


def rescored_count(limit: int, rescored_rows: int = RESCORED_ROWS, per_result: int = RESCORED_PER_RESULT) -> int:
    """How many of the scan's best rows are scored exactly for a list of ``limit``."""
    return max(rescored_rows, per_result * limit)


class CodeScan:
    """Codes of vectors in the order added, each labelled with its turn's seq; append-only.

    A row deleted or replaced since it was added keeps its code: the caller maps labels back to
    the rows it holds and drops the rest, and rebuilds once too many are stale.
    """

    def __init__(self, dimension: int, sample: Vectors, rows: int | None = None) -> None:
        """Train the centroids and the quantizer on ``sample`` (float32 rows) for about ``rows`` codes.

        ``rows`` (default: the sample's size) sets the number of lists, about its square root.

        Raises:
            ValueError: ``dimension`` cannot be coded (see ``supports``), or ``sample`` has fewer
                rows than a 4-bit quantizer has centroids (16).
        """
        if not supports(dimension):
            raise ValueError(f"vectors of {dimension} dimensions cannot be coded in pairs of pairs")
        if len(sample) < 16:
            raise ValueError(f"a quantizer needs at least 16 vectors to train on, got {len(sample)}")
        self._faiss = faiss = _faiss()
        self.lists = max(
            1, min(math.isqrt((rows or len(sample)) // ROWS_PER_LIST_SQUARE), len(sample) // TRAIN_ROWS_PER_LIST)
        )
        self._centroids = faiss.IndexFlatIP(dimension)  # kept referenced: the index does not own it
        self._index = faiss.IndexIVFPQFastScan(
            self._centroids, dimension, self.lists, dimension // SUBVECTOR_DIMENSIONS, 4, faiss.METRIC_INNER_PRODUCT
        )
        # Codes of each row's residual from its centroid: finer estimates than codes of the row.
        self._index.by_residual = True
        self._index.train(np.ascontiguousarray(sample, dtype=np.float32))
        self._labels = np.zeros(0, np.int64)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, seqs: Seqs, vectors: Vectors) -> None:
        """Code ``vectors`` (any float dtype) under the labels ``seqs``, a chunk at a time.

        Raises:
            ValueError: ``seqs`` and ``vectors`` differ in length.
        """
        if len(seqs) != len(vectors):
            raise ValueError(f"{len(seqs)} labels for {len(vectors)} vectors")
        if len(self._labels) < self._count + len(seqs):
            grown = np.zeros(max(self._count + len(seqs), len(self._labels) + len(self._labels) // 4), np.int64)
            grown[: self._count] = self._labels[: self._count]
            self._labels = grown
        for low in range(0, len(seqs), ENCODE_CHUNK_ROWS):
            chunk = np.ascontiguousarray(vectors[low : low + ENCODE_CHUNK_ROWS], dtype=np.float32)
            first = self._count + low  # each code's id is its position, in the order added
            self._index.add_with_ids(chunk, np.arange(first, first + len(chunk), dtype=np.int64))
        self._labels[self._count : self._count + len(seqs)] = seqs
        self._count += len(seqs)

    def best(self, query: Vectors, count: int) -> tuple[Seqs, Seqs]:
        """The ``count`` rows whose codes score best with ``query``, unordered, from the lists nearest it.

        Each as its position among the codes (the order they were added in) and its label. Fewer
        when the lists probed hold fewer.
        """
        count = min(count, self._count)
        if count < 1:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        probed = min(self.lists, math.ceil(self.lists * PROBED_PER_CANDIDATE * count / self._count))
        _, found = self._index.search(
            np.asarray(query, np.float32).reshape(1, -1), count, params=self._faiss.SearchParametersIVF(nprobe=probed)
        )
        positions: Seqs = found[0][found[0] >= 0]
        return positions, self._labels[positions]


def to_bfloat16(vectors: Vectors) -> npt.NDArray[np.uint16]:
    """``vectors`` rounded to bfloat16 (the top half of each float32, rounded to nearest even), as raw bits.

    A cosine read back is off by about 1e-4 (at most a few 1e-3): half of float32's memory, and
    read back several times faster than numpy's float16.
    """
    bits = np.ascontiguousarray(vectors, dtype=np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    halves: npt.NDArray[np.uint16] = (rounded >> np.uint32(16)).astype(np.uint16)
    return halves


def from_bfloat16(halves: npt.NDArray[np.uint16]) -> Floats:
    """The float32 values of bfloat16 bits (exact)."""
    widened = np.empty(halves.shape, np.uint32)
    np.left_shift(halves, 16, out=widened, dtype=np.uint32)
    floats: Floats = widened.view(np.float32)
    return floats


def training_rows(size: int) -> npt.NDArray[np.int64]:
    """At most TRAIN_SAMPLE_ROWS of ``size`` rows, evenly spaced: those a quantizer trains on."""
    return np.arange(0, size, max(1, size // TRAIN_SAMPLE_ROWS), dtype=np.int64)[:TRAIN_SAMPLE_ROWS]
