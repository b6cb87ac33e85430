"""A remote embedder: ``POST {base}/embeddings`` on an OpenAI-compatible server (OpenAI, Ollama, vLLM, llama.cpp).

Chosen only by name (``embedder="openai"``), never by ``auto``: memstrata stays offline unless
asked. The vector size is the configured ``embedding_dimension`` (sent as ``dimensions``) or
learned from the first reply.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from memstrata.embeddings.base import Vectors, normalize_rows
from memstrata.errors import ConfigError, EmbeddingError
from memstrata.remote.costs import CostLog
from memstrata.remote.http import SettingNames, Sleep, as_object, token_count
from memstrata.remote.provider import ApiKey, BaseUrl, ProviderClient
from memstrata.remote.usage import Usage

if TYPE_CHECKING:
    from memstrata.config import Settings

DEFAULT_BASE_URL = "https://api.openai.com/v1"
EMBEDDINGS_PATH = "embeddings"
SETTING_NAMES = SettingNames(
    api_key="MEMSTRATA_EMBEDDING_API_KEY (or MEMSTRATA_LLM_API_KEY)",
    model="MEMSTRATA_EMBEDDING_MODEL",
    base_url="MEMSTRATA_EMBEDDING_BASE_URL (or MEMSTRATA_LLM_BASE_URL)",
)


class RemoteEmbedderOptions(BaseModel):
    """How to reach the embeddings endpoint and which model to ask."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    base_url: BaseUrl = DEFAULT_BASE_URL
    api_key: ApiKey = None
    dimension: int | None = Field(default=None, ge=1)
    timeout_seconds: float = Field(default=60.0, gt=0, le=86_400)
    max_retries: int = Field(default=3, ge=0, le=20)
    batch_size: int = Field(default=64, ge=1, le=2048)


class RemoteEmbedder:
    """Embeds through an OpenAI-compatible ``/embeddings`` endpoint; vectors are L2-normalised here."""

    def __init__(
        self, options: RemoteEmbedderOptions, *, cost_log: CostLog | None = None, sleep: Sleep = time.sleep
    ) -> None:
        self._options = options
        self._remote = ProviderClient(
            options, provider="openai", cost_log=cost_log, sleep=sleep, names=SETTING_NAMES, error=EmbeddingError
        )
        self._dimension = options.dimension
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RemoteEmbedder(model={self._options.model!r}, base_url={self._options.base_url!r})"

    @property
    def model_id(self) -> str:
        """``openai:<remote model>:<dimension>``, so vectors of different models or sizes never mix."""
        return f"openai:{self._options.model}:{self.dimension}"

    @property
    def dimension(self) -> int:
        """The configured size, else the size of the server's first vector (one probe call)."""
        if self._dimension is None:
            with self._lock:
                if self._dimension is None:
                    self._dimension = int(self._request(["dimension probe"]).shape[1])
        return self._dimension

    def close(self) -> None:
        """Close pooled connections."""
        self._remote.close()

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """One unit vector per text, in order, requested in batches."""
        dimension = self.dimension
        if not texts:
            return np.zeros((0, dimension), dtype=np.float32)
        size = self._options.batch_size
        batches = [self._request(texts[start : start + size]) for start in range(0, len(texts), size)]
        vectors = np.concatenate(batches, axis=0)
        if vectors.shape[1] != dimension:
            raise EmbeddingError(
                f"{self._options.model} returned {vectors.shape[1]}-dimensional vectors, expected {dimension}; "
                "set MEMSTRATA_EMBEDDING_DIMENSION to what the model returns (or unset it)"
            )
        return normalize_rows(vectors)

    def embed_query(self, text: str) -> Vectors:
        """Queries and documents share one space (prefix your own queries if the model wants one)."""
        row: Vectors = self.embed_documents([text])[0]
        return row

    def _request(self, texts: Sequence[str]) -> Vectors:
        # Servers reject empty strings; a space embeds as "nothing" just as well.
        body: dict[str, Any] = {"model": self._options.model, "input": [text or " " for text in texts]}
        if self._options.dimension is not None:
            body["dimensions"] = self._options.dimension
        payload, latency_ms = self._remote.http.post(EMBEDDINGS_PATH, body)
        items = payload.get("data")
        if not isinstance(items, list) or len(items) != len(texts):
            raise EmbeddingError(
                f"{self._remote.http.base_url}/{EMBEDDINGS_PATH} returned "
                f"{len(items) if isinstance(items, list) else 'no'} vectors for {len(texts)} texts; "
                "check MEMSTRATA_EMBEDDING_BASE_URL and MEMSTRATA_EMBEDDING_MODEL"
            )
        try:
            ordered = sorted(items, key=lambda item: int(item.get("index", 0)))
            vectors = np.asarray([item["embedding"] for item in ordered], dtype=np.float32)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise EmbeddingError(
                f"{self._remote.http.base_url}/{EMBEDDINGS_PATH} returned malformed vectors ({exc}); "
                "is it an OpenAI-compatible embeddings endpoint? (base64 encoding is not supported)"
            ) from exc
        if vectors.ndim != 2 or vectors.shape[1] == 0 or not np.isfinite(vectors).all():
            raise EmbeddingError(f"{self._options.model} returned unusable vectors (shape {vectors.shape})")
        # Billed per input token, like a chat call's prompt.
        tokens = token_count(as_object(payload.get("usage")).get("prompt_tokens"))
        model = payload.get("model")
        self._remote.record(
            model=model if isinstance(model, str) and model else self._options.model,
            purpose="embed",
            usage=Usage(tokens, 0, 0),
            latency_ms=latency_ms,
        )
        return vectors


def from_settings(settings: Settings) -> RemoteEmbedder:
    """The registry's factory: ``embedding_*`` settings, falling back to the ``llm_*`` ones (unless Anthropic's)."""
    model = (settings.embedding_model or "").strip()
    if not model:
        raise ConfigError(
            "the openai embedder needs a model name; set MEMSTRATA_EMBEDDING_MODEL "
            "(e.g. text-embedding-3-small, or nomic-embed-text for Ollama)"
        )
    # The llm_* server and key are reused unless they are Anthropic's: that key must never go to another vendor.
    shares_llm = settings.llm_provider != "anthropic"
    base_url = settings.embedding_base_url or (settings.llm_base_url if shares_llm else None) or DEFAULT_BASE_URL
    api_key = settings.embedding_api_key or (settings.llm_api_key if shares_llm else None)
    if api_key is not None and not api_key.get_secret_value():
        api_key = None
    if api_key is None and "api.openai.com" in base_url:
        raise ConfigError(
            "OpenAI's embeddings API needs a key: set MEMSTRATA_EMBEDDING_API_KEY (or MEMSTRATA_LLM_API_KEY), "
            "or point MEMSTRATA_EMBEDDING_BASE_URL at a local server such as http://localhost:11434/v1 (Ollama)"
        )
    try:
        options = RemoteEmbedderOptions(
            model=model,
            base_url=base_url,
            api_key=api_key,
            dimension=settings.embedding_dimension,
            timeout_seconds=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
        )
    except ValueError as exc:
        raise ConfigError(f"invalid openai embedder settings: {exc}") from exc
    return RemoteEmbedder(options, cost_log=CostLog.for_settings(settings))
